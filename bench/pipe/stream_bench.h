/* Shared by the persistent-stream benchmark's files: what one run is, and the two sides
 * (Conflux pipes, NATS JetStream) as a writer and a reader function each.
 *
 * stream_bench.c forks the writer and the reader as two processes and times the run from
 * the writer's start to the moment the reader holds the last segment (CLOCK_MONOTONIC is
 * one clock for every process of the machine). */
#ifndef STREAM_BENCH_H
#define STREAM_BENCH_H

#include <stddef.h>
#include <stdint.h>

/* The paper's three scenarios (seed pi-channels.txt, "π-channel Throughput"). */
enum scenario {
    SC_MATCHED = 1,     /* writer and reader start together */
    SC_CREATE_FIRST = 2, /* the writer writes everything and closes; then the reader reads */
    SC_ATTACH_FIRST = 3, /* the reader attaches (asynchronously), then the writer starts */
};

struct stream_run {
    const char *peer;   /* "conflux" or "nats" */
    const char *addr;   /* conflux: tcp://H:P of the space; nats: H:P of nats-server */
    char name[64];      /* pipe / stream name, unique per run */
    int scenario;
    size_t size;        /* bytes per segment */
    uint64_t count;     /* segments */
    uint32_t window;    /* segments the writer may have unacknowledged by the server */
    uint32_t batch;     /* NATS: messages per pull request */
};

/* What a side reports back to the harness. */
struct side_result {
    int rc;                 /* 0 or a negative errno */
    double t_ready;         /* reader: attached / consumer created (scenario 3 waits for it) */
    double t_done;          /* writer: close returned (all acknowledged); reader: last segment in hand */
    uint64_t segments;      /* reader: segments received and verified */
    uint64_t from_writer;   /* conflux reader: segments first delivered by the writer's direct link */
    char err[200];
};

/* The reader calls ready() once it is attached (with the time), so the harness can start
 * the writer in scenario 3. */
typedef void (*ready_fn)(void *arg, double t);

int conflux_writer(const struct stream_run *r, struct side_result *out);
int conflux_reader(const struct stream_run *r, struct side_result *out, ready_fn ready, void *arg);
int nats_writer(const struct stream_run *r, struct side_result *out);
int nats_reader(const struct stream_run *r, struct side_result *out, ready_fn ready, void *arg);
/* Removes the run's pipe / stream from the server (between repetitions, to free disk). */
int conflux_cleanup(const struct stream_run *r);
int nats_cleanup(const struct stream_run *r);

double bench_now(void);
/* Segment i's bytes: its index in the first and last 8 bytes, a pattern between, so the
 * reader can check order and integrity without reading every byte twice. */
void seg_fill(uint8_t *p, size_t size, uint64_t i);
/* 0 when p is segment i of `size` bytes, else -EBADMSG with a message in out->err. */
int seg_check(const uint8_t *p, size_t len, size_t size, uint64_t i, struct side_result *out);

#endif
