/* The microbenchmark suite over one Conflux link (the interconnect microbenchmarks paper's
 * tests): a tiny protocol both ends speak, the echo/ack server, the measuring tests and the
 * JSON output. Harnesses: micro_bench.c (shm, tcp, ucx, tls: forked processes) and
 * micro_dpdk.c (two processes on a memif pair). */
#ifndef MICRO_H
#define MICRO_H

#include "transport/cx_driver.h"

#include <stddef.h>
#include <stdint.h>

/* Opcodes, carried in the frame header's channel field. */
enum {
    OP_DATA = 1,   /* counted only */
    OP_WEND = 2,   /* the last message of a window: counted, answered with OP_ACK */
    OP_ECHO = 3,   /* answered with OP_ECHOR of the same length */
    OP_ECHOR = 4,  /* the answer to OP_ECHO */
    OP_ACK = 5,    /* struct ack_msg */
    OP_STREAM = 6, /* struct cmd_msg: the server streams windows back (bidirectional, hot-spot) */
    OP_BILAT = 7,  /* struct cmd_msg: both ends send one message per round at once */
    OP_MODE = 8,   /* one byte: 1 = the server blocks on the link's fd, 0 = busy-polls */
    OP_CPU = 9,    /* answered with OP_ACK carrying the server's process CPU seconds */
    OP_RESET = 10, /* zero the server's counters, answered with OP_ACK */
    OP_STOP = 11,  /* the server exits */
};

struct ack_msg { uint64_t data; double cpu_s; };
struct cmd_msg { uint64_t windows, q, size; };

/* One end of a link and what it has seen. */
struct mlink {
    struct cx_link *k;
    int block;                  /* wait on the fd (after arm) instead of busy-polling */
    uint64_t data, wends;       /* data messages and window ends received */
    uint64_t acks, echoes;      /* acks and echo answers received */
    struct ack_msg last_ack;
    uint32_t echo_due, echo_len, ack_due, cpu_due;
    int cmd, stop;              /* a command the server must run (OP_STREAM, OP_BILAT) */
    struct cmd_msg arg;
    uint64_t cmd_data0;         /* data count when the command arrived (later messages count) */
    uint8_t *reply;             /* the server's echo buffer */
    size_t reply_cap;
};

/* Sending buffers: nbuf buffers of size bytes used in FIFO order; with reuse_pct >= 0 each
 * send takes buffer 0 with that probability, else the next one of the FIFO. */
struct bufset {
    uint8_t **buf;
    int nbuf, next, reuse_pct;
    size_t size;
    unsigned rng;
};

void die(const char *what, int rc);
#define CK(expr)                                                                           \
    do {                                                                                   \
        int rc_ = (expr);                                                                  \
        if (rc_ < 0) die(#expr, rc_);                                                      \
    } while (0)

double now_s(void);
double proc_cpu_s(void);   /* getrusage: user + system seconds of this process */
double thread_cpu_s(void); /* CLOCK_THREAD_CPUTIME_ID */
void spin_ns(double ns);   /* computes (busy arithmetic) for about ns nanoseconds */

void ml_init(struct mlink *m, struct cx_link *k);
/* One progress call, then the answers it made due; blocks on the fd when idle and m->block. */
int ml_pump(struct mlink *m);
int ml_send(struct mlink *m, uint32_t op, const void *p, size_t n);
/* Serves requests until OP_STOP or the peer is gone. */
void ml_serve(struct mlink *m);
/* Streams `windows` windows of q messages of bs->size bytes, each window acknowledged before
 * the next (OSU style); compute_ns of computation after each send (overlap test). */
void ml_stream(struct mlink *m, uint64_t windows, uint64_t q, struct bufset *bs, double compute_ns,
               double *send_cpu_s);

void bufset_init(struct bufset *b, int nbuf, size_t size, int reuse_pct);
void bufset_free(struct bufset *b);
uint8_t *bufset_next(struct bufset *b);

/* Output: one JSON object per line. The value is the median over the repetitions, with min
 * and max as the spread; matched = every message sent was counted by the receiver. */
struct out { const char *layer, *link, *note; };
void emit(const struct out *o, const char *test, const char *params, const char *metric,
          const char *unit, double *reps, int nreps, long n, int matched);

/* The tests (client side). m[0..npeers) are links to ml_serve peers. quick = smoke sizes. */
struct suite { int quick, reps; struct out out; };
void test_lat(struct suite *s, struct mlink *m);
void test_bw(struct suite *s, struct mlink *m);
void test_bidir(struct suite *s, struct mlink *m);
void test_cpu(struct suite *s, struct mlink *m);
void test_overlap(struct suite *s, struct mlink *m);
void test_notify(struct suite *s, struct mlink *m);
void test_reuse(struct suite *s, struct mlink *m);
void test_hotspot(struct suite *s, struct mlink *m, int npeers);
void run_tests(struct suite *s, const char *which, struct mlink *m);

#endif
