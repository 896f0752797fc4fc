/* The protocol engine of the microbenchmarks: pumping a link, the server's answers, the
 * windowed streamer, the sending buffers and the JSON output. */
#include "micro.h"

#include "common/cx_error.h"

#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

void die(const char *what, int rc)
{
    fprintf(stderr, "micro: %s: %d (%s)\n", what, rc, cx_errmsg());
    exit(1);
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double proc_cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void spin_ns(double ns)
{
    volatile double x0 = 1.0; /* volatile: the loop is not optimised away */
    double end = now_s() + ns * 1e-9, x = x0;
    while (now_s() < end)
        for (int i = 0; i < 64; i++) x = x * 1.0000001 + 1e-9;
    x0 = x;
}

void ml_init(struct mlink *m, struct cx_link *k)
{
    memset(m, 0, sizeof *m);
    m->k = k;
}

static void on_msg(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    struct mlink *m = arg;
    switch (h->channel) {
    case OP_DATA: m->data++; break;
    case OP_WEND: m->data++, m->wends++, m->ack_due++; break;
    case OP_ECHO: m->echo_due++, m->echo_len = (uint32_t)n; break;
    case OP_ECHOR: m->echoes++; break;
    case OP_ACK:
        m->acks++;
        if (n >= sizeof m->last_ack) memcpy(&m->last_ack, p, sizeof m->last_ack);
        break;
    case OP_STREAM:
    case OP_BILAT:
        m->cmd = (int)h->channel;
        m->cmd_data0 = m->data;
        if (n >= sizeof m->arg) memcpy(&m->arg, p, sizeof m->arg);
        break;
    case OP_MODE: m->block = n && ((const uint8_t *)p)[0]; break;
    case OP_CPU: m->cpu_due++; break;
    case OP_RESET: m->data = m->wends = 0, m->ack_due++; break;
    case OP_STOP: m->stop = 1; break;
    default: break;
    }
}

int ml_send(struct mlink *m, uint32_t op, const void *p, size_t n)
{
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .channel = op};
    struct iovec v = {(void *)p, n};
    return cx_link_send(m->k, &h, &v, 1);
}

static void flush_due(struct mlink *m)
{
    for (; m->echo_due; m->echo_due--) {
        if (m->echo_len > m->reply_cap) {
            free(m->reply);
            m->reply = calloc(1, m->echo_len);
            m->reply_cap = m->echo_len;
        }
        CK(ml_send(m, OP_ECHOR, m->reply, m->echo_len));
    }
    for (; m->ack_due; m->ack_due--) {
        struct ack_msg a = {m->data, 0};
        CK(ml_send(m, OP_ACK, &a, sizeof a));
    }
    for (; m->cpu_due; m->cpu_due--) {
        struct ack_msg a = {m->data, proc_cpu_s()};
        CK(ml_send(m, OP_ACK, &a, sizeof a));
    }
}

int ml_pump(struct mlink *m)
{
    int rc = cx_link_progress(m->k, on_msg, m, 16);
    if (rc < 0) return rc;
    flush_due(m);
    if (rc == 0 && m->block && cx_link_pending(m->k) == 0 && cx_link_arm(m->k) == 0) {
        struct pollfd pf = {cx_link_fd(m->k), POLLIN, 0};
        if (pf.fd >= 0) poll(&pf, 1, 100);
    }
    return rc;
}

void ml_stream(struct mlink *m, uint64_t windows, uint64_t q, struct bufset *bs, double compute_ns,
               double *send_cpu_s)
{
    uint64_t acks0 = m->acks;
    for (uint64_t w = 0; w < windows; w++) {
        for (uint64_t i = 0; i < q; i++) {
            double c0 = send_cpu_s ? thread_cpu_s() : 0;
            CK(ml_send(m, i == q - 1 ? OP_WEND : OP_DATA, bufset_next(bs), bs->size));
            if (send_cpu_s) *send_cpu_s += thread_cpu_s() - c0;
            if (compute_ns > 0) spin_ns(compute_ns);
        }
        while (m->acks < acks0 + w + 1) CK(ml_pump(m));
    }
}

void ml_serve(struct mlink *m)
{
    while (!m->stop) {
        if (ml_pump(m) < 0) return; /* the peer is gone */
        if (m->cmd == OP_STREAM) {
            m->cmd = 0;
            struct bufset b;
            bufset_init(&b, 1, m->arg.size, -1);
            ml_stream(m, m->arg.windows, m->arg.q, &b, 0, NULL);
            bufset_free(&b);
        } else if (m->cmd == OP_BILAT) {
            m->cmd = 0;
            uint8_t *buf = calloc(1, m->arg.size ? m->arg.size : 1);
            uint64_t d0 = m->cmd_data0;
            for (uint64_t i = 0; i < m->arg.windows; i++) {
                CK(ml_send(m, OP_DATA, buf, m->arg.size));
                while (m->data < d0 + i + 1) CK(ml_pump(m));
            }
            free(buf);
        }
    }
    cx_link_flush(m->k, NULL, NULL, 1000);
}

void bufset_init(struct bufset *b, int nbuf, size_t size, int reuse_pct)
{
    b->nbuf = nbuf, b->size = size, b->next = 0, b->reuse_pct = reuse_pct, b->rng = 12345;
    b->buf = calloc((size_t)nbuf, sizeof *b->buf);
    for (int i = 0; i < nbuf; i++) {
        b->buf[i] = malloc(size ? size : 1);
        memset(b->buf[i], i, size); /* touched: no page faults inside the timed loop */
    }
}

void bufset_free(struct bufset *b)
{
    for (int i = 0; i < b->nbuf; i++) free(b->buf[i]);
    free(b->buf);
}

uint8_t *bufset_next(struct bufset *b)
{
    if (b->reuse_pct >= 0) {
        b->rng = b->rng * 1103515245u + 12345u;
        if ((int)((b->rng >> 16) % 100) < b->reuse_pct) return b->buf[0];
        b->next = b->next % (b->nbuf - 1) + 1; /* the other buffers, in FIFO order */
        return b->buf[b->next];
    }
    uint8_t *p = b->buf[b->next];
    b->next = (b->next + 1) % b->nbuf;
    return p;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void emit(const struct out *o, const char *test, const char *params, const char *metric,
          const char *unit, double *reps, int nreps, long n, int matched)
{
    double s[64];
    int k = nreps < 64 ? nreps : 64;
    memcpy(s, reps, sizeof(double) * (size_t)k);
    qsort(s, (size_t)k, sizeof *s, cmpd);
    double med = k % 2 ? s[k / 2] : (s[k / 2 - 1] + s[k / 2]) / 2;
    printf("{\"layer\":\"%s\",\"link\":\"%s\",\"test\":\"%s\",\"params\":{%s},\"metric\":\"%s\","
           "\"unit\":\"%s\",\"median\":%.4g,\"min\":%.4g,\"max\":%.4g,\"reps\":[",
           o->layer, o->link, test, params, metric, unit, med, s[0], s[k - 1]);
    for (int i = 0; i < nreps; i++) printf("%s%.4g", i ? "," : "", reps[i]);
    printf("],\"n\":%ld,\"matched\":%s%s%s%s}\n", n, matched ? "true" : "false",
           o->note ? ",\"note\":\"" : "", o->note ? o->note : "", o->note ? "\"" : "");
    fflush(stdout);
}
