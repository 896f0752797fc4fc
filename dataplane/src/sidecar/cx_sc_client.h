/* The application side of the sidecar protocol (cx_sc_proto.h): the pipe and channel calls
 * of ../pipe/cx_pipe.h and ../channel/cx_chan.h, made through a confluxd --role=sidecar
 * instead of in this process. Same arguments, same results, same errors (pipe calls: -1
 * and errno; channel calls: a negative errno; cx_errmsg() carries the sidecar's message).
 *
 * The SDK's libconflux calls these when CONFLUX_SOCKET is set (sdk/README.md, "Mode"); a
 * program may also call them directly after cx_sc_connect.
 *
 * Data path: pi_write and submit put the segment or the encoded event straight into a ring
 * of the region shared with the sidecar, which sends it from there; pi_read's segment comes
 * back the same way. Sink events arrive in a ring of a second connection, read by one thread
 * of this library that runs the handlers (as the embedded runtime's progress thread does).
 *
 * Handles: descriptors and pointers are this library's; they refer to the sidecar's. One
 * request at a time per connection; concurrent calls from several threads take several
 * connections (a pool). After fork() the child starts a fresh session of its own.
 */
#ifndef CX_SC_CLIENT_H
#define CX_SC_CLIENT_H

#include "channel/cx_chan.h"
#include "pipe/cx_pipe.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether calls go through a sidecar: CONFLUX_SOCKET is set and non-empty (read once per
 * process) or cx_sc_connect succeeded. */
int cx_sc_enabled(void);

/* Uses the sidecar at socket path (instead of $CONFLUX_SOCKET) and checks it answers.
 * 0 or a negative errno (-ENOENT, -ECONNREFUSED: no sidecar there). */
int cx_sc_connect(const char *path);

/* ---- pipes: as pi_* in cx_pipe.h (opts: timeout_ms and window are passed on; listen,
 * reader_mem and spill_dir are the sidecar's) ---- */
int cx_sc_pi_space_open(const char *addr, const struct pi_options *opts);
int cx_sc_pi_space_close(int s);
int cx_sc_pi_attach(const char *name, int s);
int cx_sc_pi_create(const char *name, int s, int mode);
long cx_sc_pi_read(int d, void *b, size_t len, const struct cx_format *t);
long cx_sc_pi_read_timeout(int d, void *b, size_t len, const struct cx_format *t, int timeout_ms);
long cx_sc_pi_write(int d, const void *b, size_t len, const struct cx_format *t);
int cx_sc_pi_close(int d);
int cx_sc_pi_abandon(int d);
int cx_sc_pi_detach(int d);
int cx_sc_pi_seek(int d, uint64_t seg);
int64_t cx_sc_pi_tell(int d);
int cx_sc_pi_unlink(const char *name, int s);
int cx_sc_pi_reader_stats(int d, struct pi_reader_stats *out);

/* ---- channels: as cx_chan_* in cx_chan.h; the structs are this library's own, cast to
 * the channel types so one header serves both modes ---- */
int cx_sc_chan_ctx_create(const struct cx_chan_ctx_opts *o, struct cx_chan_ctx **out);
const char *cx_sc_chan_ctx_addr(const struct cx_chan_ctx *ctx);
const char *cx_sc_chan_ctx_fabric(const struct cx_chan_ctx *ctx);
const char *cx_sc_chan_ctx_fabric_addr(const struct cx_chan_ctx *ctx);
void cx_sc_chan_ctx_destroy(struct cx_chan_ctx *ctx);
int cx_sc_chan_create(struct cx_chan_ctx *ctx, const struct cx_chan_opts *o, struct cx_chan **out);
int cx_sc_chan_open(struct cx_chan_ctx *ctx, const char *id, int timeout_ms, struct cx_chan **out);
const char *cx_sc_chan_id(const struct cx_chan *ch);
const struct cx_format *cx_sc_chan_format(const struct cx_chan *ch);
enum cx_chan_mode cx_sc_chan_mode(const struct cx_chan *ch);
void cx_sc_chan_close(struct cx_chan *ch);
int cx_sc_chan_source(struct cx_chan *ch, const struct cx_format *fmt, struct cx_chan_source **out);
int cx_sc_chan_submit(struct cx_chan_source *s, const void *event);
int cx_sc_chan_submit_wait(struct cx_chan_source *s, const void *event, int timeout_ms);
/* The event is sent from the shared ring, so it is released before this returns. */
int cx_sc_chan_submit_owned(struct cx_chan_source *s, void *event,
                            void (*release)(void *arg, void *event), void *arg, int timeout_ms);
void cx_sc_chan_source_close(struct cx_chan_source *s);
int cx_sc_chan_sink(struct cx_chan *ch, const struct cx_chan_sink_opts *o, cx_chan_handler fn,
                    void *arg, struct cx_chan_sink **out);
void cx_sc_chan_sink_close(struct cx_chan_sink *k);
size_t cx_sc_chan_sink_error(struct cx_chan_sink *k, char *out, size_t cap);
void cx_sc_chan_stats(struct cx_chan *ch, struct cx_chan_stats *out);
int cx_sc_chan_wait_members(struct cx_chan *ch, unsigned sources, unsigned sinks, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
