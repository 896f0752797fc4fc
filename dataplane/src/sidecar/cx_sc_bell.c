/* The shared-memory doorbell of cx_sc_bell.h. */
#include "sidecar/cx_sc_bell.h"

#include "engine/cx_idle.h"

#include <errno.h>
#include <sys/socket.h>

void cx_sc_bell_ring(struct cx_sc_bell *b, uint32_t seq, int fd)
{
    atomic_store(&b->seq, seq);
    if (atomic_load_explicit(&b->sleeping, memory_order_relaxed) && atomic_exchange(&b->sleeping, 0))
        (void)send(fd, "w", 1, MSG_DONTWAIT | MSG_NOSIGNAL); /* a full socket holds a byte already */
}

int cx_sc_bell_arm(struct cx_sc_bell *b, uint32_t seen)
{
    atomic_store(&b->sleeping, 1);
    if (atomic_load(&b->seq) == seen)
        return 1;
    atomic_store(&b->sleeping, 0);
    return 0;
}

int cx_sc_bell_sleep(struct cx_sc_bell *b, int fd)
{
    char buf[64];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    atomic_store_explicit(&b->sleeping, 0, memory_order_relaxed);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
        return -ECONNRESET;
    return 0;
}

int64_t cx_sc_bell_wait(struct cx_sc_bell *b, uint32_t seen, int fd, uint64_t spin_ns)
{
    uint32_t now;
    if ((now = atomic_load_explicit(&b->seq, memory_order_acquire)) != seen)
        return (uint32_t)(now - seen);
    uint64_t t0 = cx_idle_now_ns();
    while (cx_idle_now_ns() - t0 < spin_ns) {
        if ((now = atomic_load_explicit(&b->seq, memory_order_acquire)) != seen)
            return (uint32_t)(now - seen);
        cx_idle_spin_until(t0, spin_ns);
    }
    for (;;) {
        if (cx_sc_bell_arm(b, seen)) {
            int rc = cx_sc_bell_sleep(b, fd);
            if (rc < 0)
                return rc;
        }
        if ((now = atomic_load_explicit(&b->seq, memory_order_acquire)) != seen)
            return (uint32_t)(now - seen);
    }
}
