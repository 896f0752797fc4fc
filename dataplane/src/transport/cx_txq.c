/* Byte FIFO for pending sends; see cx_txq.h. */
#include "transport/cx_txq.h"

#include "common/cx_error.h"

#include <stdlib.h>
#include <string.h>

size_t cx_iov_len(const struct iovec *iov, int iovcnt)
{
    size_t n = 0;
    for (int i = 0; i < iovcnt; i++) n += iov[i].iov_len;
    return n;
}

void cx_iov_copy(void *dst, const struct iovec *iov, int iovcnt, size_t skip, size_t n)
{
    uint8_t *d = dst;
    for (int i = 0; i < iovcnt && n; i++) {
        size_t l = iov[i].iov_len;
        if (skip >= l) {
            skip -= l;
            continue;
        }
        size_t c = l - skip < n ? l - skip : n;
        memcpy(d, (const uint8_t *)iov[i].iov_base + skip, c);
        d += c;
        n -= c;
        skip = 0;
    }
}

int cx_txq_push(struct cx_txq *q, const struct iovec *iov, int iovcnt, size_t skip)
{
    size_t total = cx_iov_len(iov, iovcnt);
    if (skip >= total)
        return 0;
    size_t n = total - skip;
    if (q->head == q->tail)
        q->head = q->tail = 0;
    if (q->tail + n > q->cap) {
        if (q->head) { /* compact first */
            memmove(q->buf, q->buf + q->head, q->tail - q->head);
            q->tail -= q->head;
            q->head = 0;
        }
        if (q->tail + n > q->cap) {
            size_t cap = q->cap ? q->cap : 65536;
            while (cap < q->tail + n) cap *= 2;
            uint8_t *b = realloc(q->buf, cap);
            if (!b)
                return cx_err_set(ENOMEM, "send queue: cannot grow to %zu bytes", cap);
            q->buf = b;
            q->cap = cap;
        }
    }
    cx_iov_copy(q->buf + q->tail, iov, iovcnt, skip, n);
    q->tail += n;
    return 0;
}

void cx_txq_pop(struct cx_txq *q, size_t n)
{
    q->head += n;
    if (q->head >= q->tail) {
        q->head = q->tail = 0;
        if (q->cap > (64u << 20)) { /* give back a huge buffer after a huge message */
            free(q->buf);
            q->buf = NULL;
            q->cap = 0;
        }
    }
}

void cx_txq_free(struct cx_txq *q)
{
    free(q->buf);
    memset(q, 0, sizeof *q);
}
