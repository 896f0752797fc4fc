/* A doorbell in memory the application and its sidecar share: one side publishes a new
 * sequence number, the other waits for it without a system call while it is polling and
 * sleeps on the connection's socket when it is not.
 *
 *     ringer:  cx_sc_bell_ring(b, seq, fd)     // store seq; one wake-up byte if the waiter sleeps
 *     waiter:  cx_sc_bell_wait(b, seen, fd, spin_ns)   // spin, then sleep in recv(fd)
 *
 * The waiter announces its sleep (`sleeping` = 1) and checks `seq` once more before it
 * blocks; the ringer stores `seq` and then takes `sleeping` back to 0, sending a byte only if
 * it was 1. Both pairs of accesses are sequentially consistent, so one of the two sides sees
 * the other's write and no wake-up is lost. A byte may arrive after the waiter already saw
 * the number (it checks again and goes back to sleep); recv returning 0 means the other side
 * closed the connection. The socket carries nothing else after the hello. */
#ifndef CX_SC_BELL_H
#define CX_SC_BELL_H

#include <stdatomic.h>
#include <stdint.h>

struct cx_sc_bell {
    _Atomic uint32_t seq;      /* the last number published */
    _Atomic uint32_t sleeping; /* 1: the waiter is (about to be) blocked in recv */
    char pad[56];              /* one cache line per bell: the two sides write different bells */
};

/* Publishes seq and wakes the waiter if it sleeps (a one-byte message on fd). */
void cx_sc_bell_ring(struct cx_sc_bell *b, uint32_t seq, int fd);

/* Waiter: announces a sleep. Returns 1 when the number is still `seen` (block on fd now:
 * cx_sc_bell_sleep), or 0 with the announcement taken back (a new number came). */
int cx_sc_bell_arm(struct cx_sc_bell *b, uint32_t seen);

/* Waiter: blocks in recv on fd after cx_sc_bell_arm returned 1. 0 (woken or interrupted:
 * check the number again), or -ECONNRESET when the other side closed the connection. */
int cx_sc_bell_sleep(struct cx_sc_bell *b, int fd);

/* Waiter: spins up to spin_ns for a number other than `seen`, then sleeps on fd until one
 * comes. Returns the new number's difference from seen (> 0), or -ECONNRESET when the other
 * side closed the connection. */
int64_t cx_sc_bell_wait(struct cx_sc_bell *b, uint32_t seen, int fd, uint64_t spin_ns);

#endif
