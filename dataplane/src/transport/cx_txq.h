/* A byte FIFO for data a link accepted but could not hand to the wire yet (the "queue" of
 * cx_driver_ops.send). Encoded frames (48-byte header + payload) go in back to back. Not
 * thread-safe: owned by one link. */
#ifndef CX_TXQ_H
#define CX_TXQ_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct cx_txq {
    uint8_t *buf;
    size_t head, tail, cap; /* live bytes are buf[head..tail) */
};

/* Appends the bytes of iov[0..iovcnt) skipping the first `skip` bytes. 0 or -ENOMEM. */
int cx_txq_push(struct cx_txq *q, const struct iovec *iov, int iovcnt, size_t skip);
/* Live bytes. */
static inline size_t cx_txq_len(const struct cx_txq *q) { return q->tail - q->head; }
/* The first live byte (valid until the next push). */
static inline uint8_t *cx_txq_data(const struct cx_txq *q) { return q->buf + q->head; }
/* Drops n bytes from the front. */
void cx_txq_pop(struct cx_txq *q, size_t n);
/* Frees the buffer. */
void cx_txq_free(struct cx_txq *q);

/* Total bytes in iov[0..iovcnt). */
size_t cx_iov_len(const struct iovec *iov, int iovcnt);
/* Copies iov[0..iovcnt) from byte `skip` on into dst (n bytes). */
void cx_iov_copy(void *dst, const struct iovec *iov, int iovcnt, size_t skip, size_t n);

#endif
