/* Multiplexing filter (seed padico-corba-mpi.txt 4.1, netibis.txt 3): many channels over
 * one link, told apart by the frame header's channel id. No extra header, no extra copy:
 * a channel's send stamps its id into the header and passes the caller's iovec down
 * unchanged; a received message is handed, in place, to the handler of its channel.
 *
 *     struct cx_mux *m;  cx_mux_create(lower, &m);          // the mux owns lower now
 *     struct cx_link *a; cx_mux_channel(m, 7, &a);           // a link for channel 7
 *     cx_link_send(a, &h, iov, n);                           // goes out with channel 7
 *     cx_link_progress(a, on_msg, arg, 64);                  // on_msg now handles channel 7
 *
 * Progress on any channel (or on the mux link itself) drives the shared lower link and
 * dispatches every message to its channel's handler: the one given to that channel's
 * latest progress call. Messages for a channel without a handler yet (or unknown ids) go
 * to the handler of the mux link (cx_mux_link) if one was set, else they are dropped and
 * counted in cx_mux_dropped. */
#ifndef CX_MUX_H
#define CX_MUX_H

#include "transport/cx_driver.h"

struct cx_mux;

/* Builds a mux on lower (which it owns and closes). 0 or -ENOMEM. */
int cx_mux_create(struct cx_link *lower, struct cx_mux **out);
/* Opens channel `id` (> 0; 0 is link control). -EEXIST if already open. The channel link
 * is closed with cx_link_close (it does not close the mux). */
int cx_mux_channel(struct cx_mux *m, uint32_t id, struct cx_link **out);
/* The mux as a link: send passes h->channel through; progress dispatches (unclaimed
 * messages go to fn). Closing it closes the lower link; close channels first. */
struct cx_link *cx_mux_link(struct cx_mux *m);
/* Messages dropped because their channel had no handler. */
unsigned long long cx_mux_dropped(const struct cx_mux *m);

extern const struct cx_driver_ops cx_mux_ops;
extern const struct cx_driver_ops cx_mux_channel_ops;

#endif
