/* The reader's in-bound buffer: dedupe + reorder window + memory queue + spill file.
 * The window is a ring of node pointers indexed by id, grown by doubling as far as the
 * span allows; every node in it has next <= id < next + ring_cap. */
#include "pipe/cx_pipe_buf.h"

#include "common/cx_error.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct node {
    struct node *next;
    struct cx_pipe_seg s;
    uint8_t data[];
};

struct spill_hdr { /* a record in the spill file, native layout (the file is ours only) */
    uint64_t id, format;
    uint32_t len, pad;
};

struct cx_pipe_buf {
    uint64_t next;    /* next id to make ready */
    uint64_t take_id; /* next id the reader takes */
    uint64_t last_id; /* end: the writer closed after it (0 = open) */
    int ended;
    struct node **ring;       /* the reorder window (ids > next, out of order) */
    uint64_t ring_cap;        /* a power of two, 0 before the first out-of-order id */
    uint64_t span_max;        /* how far ahead of next an id may be kept */
    size_t win_bytes;         /* bytes waiting in the window */
    struct node *head, *tail; /* ready, in memory */
    size_t mem_bytes, mem_cap;
    char spill_path[256];
    int spill_fd;
    uint64_t spill_wr, spill_rd, spill_count; /* file offsets; records in the file */
    struct cx_pipe_buf_stats st;
};

int cx_pipe_buf_create(uint64_t next_id, size_t mem_cap, const char *spill_path,
                       struct cx_pipe_buf **out)
{
    struct cx_pipe_buf *b = calloc(1, sizeof *b);
    if (!b)
        return cx_err_set(ENOMEM, "pipe buffer");
    b->next = b->take_id = next_id ? next_id : 1;
    b->mem_cap = mem_cap;
    b->span_max = mem_cap / 256 > CX_PIPE_REORDER ? mem_cap / 256 : CX_PIPE_REORDER;
    b->spill_fd = -1;
    snprintf(b->spill_path, sizeof b->spill_path, "%s", spill_path ? spill_path : "");
    *out = b;
    return 0;
}

static void drop_all(struct cx_pipe_buf *b)
{
    for (uint64_t i = 0; i < b->ring_cap; i++) {
        free(b->ring[i]);
        b->ring[i] = NULL;
    }
    b->win_bytes = 0;
    for (struct node *n = b->head, *x; n; n = x) {
        x = n->next;
        free(n);
    }
    b->head = b->tail = NULL;
    b->mem_bytes = 0;
    if (b->spill_fd >= 0) {
        close(b->spill_fd);
        unlink(b->spill_path);
        b->spill_fd = -1;
    }
    b->spill_wr = b->spill_rd = b->spill_count = 0;
}

void cx_pipe_buf_free(struct cx_pipe_buf *b)
{
    if (!b)
        return;
    drop_all(b);
    free(b->ring);
    free(b);
}

/* Appends a segment to the ready queue: memory while under the cap and nothing waits in
 * the file (order!), else the spill file. */
static int make_ready(struct cx_pipe_buf *b, struct node *n)
{
    if (b->spill_count == 0 && b->mem_bytes + n->s.len <= b->mem_cap) {
        n->next = NULL;
        if (b->tail)
            b->tail->next = n;
        else
            b->head = n;
        b->tail = n;
        b->mem_bytes += n->s.len;
        return 0;
    }
    if (!b->spill_path[0]) {
        free(n);
        return cx_err_set(ENOBUFS, "pipe buffer full (%zu bytes in memory) and no spill file", b->mem_bytes);
    }
    if (b->spill_fd < 0) {
        b->spill_fd = open(b->spill_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (b->spill_fd < 0) {
            free(n);
            return cx_err_set(errno, "pipe spill file %s: %s", b->spill_path, strerror(errno));
        }
    }
    struct spill_hdr h = {n->s.id, n->s.format, n->s.len, 0};
    int ok = pwrite(b->spill_fd, &h, sizeof h, (off_t)b->spill_wr) == (ssize_t)sizeof h &&
             pwrite(b->spill_fd, n->data, n->s.len, (off_t)(b->spill_wr + sizeof h)) == (ssize_t)n->s.len;
    free(n);
    if (!ok)
        return cx_err_set(errno ? errno : EIO, "pipe spill file %s: write failed", b->spill_path);
    b->spill_wr += sizeof h + h.len;
    b->spill_count++;
    b->st.spilled++;
    return 0;
}

/* Makes the ring cover ids up to next + need (need < span_max). */
static int ring_grow(struct cx_pipe_buf *b, uint64_t need)
{
    uint64_t cap = b->ring_cap ? b->ring_cap : 64;
    while (cap <= need)
        cap *= 2;
    struct node **r = calloc(cap, sizeof *r);
    if (!r)
        return cx_err_set(ENOMEM, "pipe reorder window of %llu ids", (unsigned long long)cap);
    for (uint64_t i = 0; i < b->ring_cap; i++)
        if (b->ring[i])
            r[b->ring[i]->s.id & (cap - 1)] = b->ring[i];
    free(b->ring);
    b->ring = r;
    b->ring_cap = cap;
    return 0;
}

int cx_pipe_buf_offer(struct cx_pipe_buf *b, uint64_t id, uint64_t format, const void *data,
                      uint32_t len)
{
    if (id < b->next) {
        b->st.duplicates++;
        return 0;
    }
    if (b->ended && id > b->last_id) {
        b->st.duplicates++;
        return 0;
    }
    struct node **slot = NULL;
    if (id != b->next) { /* out of order: waits in the window if it fits */
        /* within CX_PIPE_REORDER ids it always fits (as many large segments as small
         * ones); further ahead while the window's bytes stay under mem_cap */
        if (id - b->next >= b->span_max ||
            (id - b->next >= CX_PIPE_REORDER && b->win_bytes + len > b->mem_cap)) {
            b->st.too_far++;
            return 0;
        }
        if (id - b->next >= b->ring_cap) {
            int rc = ring_grow(b, id - b->next);
            if (rc < 0)
                return rc;
        }
        slot = &b->ring[id & (b->ring_cap - 1)];
        if (*slot) { /* already waiting */
            b->st.duplicates++;
            return 0;
        }
    }
    struct node *n = malloc(sizeof *n + len);
    if (!n)
        return cx_err_set(ENOMEM, "pipe buffer: segment %llu of %u bytes", (unsigned long long)id, len);
    n->s = (struct cx_pipe_seg){id, format, len};
    if (len)
        memcpy(n->data, data, len);
    b->st.kept++;
    if (slot) {
        *slot = n;
        b->win_bytes += len;
        return 1;
    }
    /* id == next: ready now, and so is the run that waits behind it */
    for (;;) {
        b->next++;
        int rc = make_ready(b, n);
        if (rc < 0)
            return rc;
        if (!b->ring_cap || !(n = b->ring[b->next & (b->ring_cap - 1)]) || n->s.id != b->next)
            break;
        b->ring[b->next & (b->ring_cap - 1)] = NULL;
        b->win_bytes -= n->s.len;
    }
    return 1;
}

void cx_pipe_buf_end(struct cx_pipe_buf *b, uint64_t last_id)
{
    b->ended = 1;
    b->last_id = last_id;
}

int cx_pipe_buf_peek(struct cx_pipe_buf *b, struct cx_pipe_seg *seg)
{
    if (b->head) {
        *seg = b->head->s;
        return 1;
    }
    if (b->spill_count) {
        struct spill_hdr h;
        if (pread(b->spill_fd, &h, sizeof h, (off_t)b->spill_rd) != (ssize_t)sizeof h)
            return cx_err_set(EIO, "pipe spill file %s: read failed", b->spill_path);
        *seg = (struct cx_pipe_seg){h.id, h.format, h.len};
        return 1;
    }
    if (b->ended && b->take_id > b->last_id)
        return cx_err_set(EPIPE, "end of pipe after segment %llu", (unsigned long long)b->last_id);
    return 0;
}

int cx_pipe_buf_take(struct cx_pipe_buf *b, void *out, size_t cap)
{
    struct cx_pipe_seg s;
    int rc = cx_pipe_buf_peek(b, &s);
    if (rc <= 0)
        return rc < 0 ? rc : cx_err_set(EAGAIN, "no segment ready");
    if (s.len > cap)
        return cx_err_set(EMSGSIZE, "segment %llu of %u bytes does not fit %zu",
                          (unsigned long long)s.id, s.len, cap);
    if (b->head) {
        struct node *n = b->head;
        memcpy(out, n->data, n->s.len);
        b->head = n->next;
        if (!b->head)
            b->tail = NULL;
        b->mem_bytes -= n->s.len;
        free(n);
    } else {
        if (pread(b->spill_fd, out, s.len, (off_t)(b->spill_rd + sizeof(struct spill_hdr))) != (ssize_t)s.len)
            return cx_err_set(EIO, "pipe spill file %s: read failed", b->spill_path);
        b->spill_rd += sizeof(struct spill_hdr) + s.len;
        if (--b->spill_count == 0) { /* drained: start the file afresh */
            b->spill_rd = b->spill_wr = 0;
            if (ftruncate(b->spill_fd, 0) != 0) {
                /* only disk space is lost; offsets restart at 0 either way */
            }
        }
    }
    b->take_id = s.id + 1;
    return 0;
}

uint64_t cx_pipe_buf_next(const struct cx_pipe_buf *b) { return b->next; }
uint64_t cx_pipe_buf_tell(const struct cx_pipe_buf *b) { return b->take_id; }

void cx_pipe_buf_reset(struct cx_pipe_buf *b, uint64_t next_id)
{
    drop_all(b);
    b->next = b->take_id = next_id ? next_id : 1;
}

void cx_pipe_buf_stats(const struct cx_pipe_buf *b, struct cx_pipe_buf_stats *out)
{
    *out = b->st;
    out->mem_bytes = b->mem_bytes;
}
