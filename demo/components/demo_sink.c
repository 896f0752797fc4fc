/* demo-sink: creates the event channel the stages submit results to, collects one result
 * per readings segment, and writes each (once) to the pipe "summary".
 *
 *   env CONFLUX_SPACE=... DEMO_SEGMENTS=200 demo-sink
 *
 * It is the channel's contact point: it creates the channel (declared format result_v1,
 * reliable delivery) and publishes the channel's id as the only segment of the pipe
 * "results-contact". Stages submit result_v2 events (a newer version with more fields);
 * this sink subscribes with result_v1 and the data plane converts. A result seen twice (a
 * stage restarted and resubmitted) is counted once. When every segment has its result it
 * prints "sink: complete" and stays up.
 */
#include "demo_formats.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *me = "sink";

struct collected {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long segments;
    unsigned char *seen;      /* per segment: result received */
    struct result_v1 *queue;  /* new results for the summary pipe */
    long queued, unique, duplicates, bad;
};

static void on_result(void *arg, const struct cx_chan_event *ev)
{
    struct collected *c = arg;
    const struct result_v1 *r = ev->data;
    pthread_mutex_lock(&c->mu);
    if (!r || r->segment < 0 || r->segment >= c->segments)
        c->bad++;
    else if (c->seen[r->segment])
        c->duplicates++;
    else {
        c->seen[r->segment] = 1;
        c->queue[c->queued++] = *r;
        c->unique++;
        pthread_cond_signal(&c->cv);
    }
    pthread_mutex_unlock(&c->mu);
}

/* Publishes the channel id as the only segment of "results-contact" (replacing an old one). */
static int publish_contact(int s, const char *id)
{
    pi_unlink("results-contact", s); /* a previous sink's id, if any */
    int w = pi_create("results-contact", s, PI_CREATE);
    if (w < 0 || pi_write(w, id, strlen(id), NULL) < 0 || pi_close(w) < 0) {
        fprintf(stderr, "%s: publishing the channel id: %s\n", me, cx_errmsg());
        return -1;
    }
    return 0;
}

int main(void)
{
    const char *space = demo_space(me);
    long segments = demo_env_long("DEMO_SEGMENTS", 200);
    const struct cx_format *fmt = demo_register("result_v1");
    if (!fmt)
        return 1;
    struct collected c = {.segments = segments};
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    c.seen = calloc((size_t)segments, 1);
    c.queue = calloc((size_t)segments, sizeof *c.queue);
    struct result_v1 *batch = calloc((size_t)segments, sizeof *batch);
    if (!c.seen || !c.queue || !batch)
        return 1;

    int s = demo_open_space(me, space, (const struct cx_format *const[]){fmt, NULL});
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_sink *k;
    if (cx_chan_ctx_create(NULL, &ctx) < 0 ||
        cx_chan_create(ctx, &(struct cx_chan_opts){.format = fmt, .mode = CX_CHAN_RELIABLE}, &ch) < 0 ||
        cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = fmt}, on_result, &c, &k) < 0) {
        fprintf(stderr, "%s: channel: %s\n", me, cx_errmsg());
        return 1;
    }
    if (publish_contact(s, cx_chan_id(ch)) < 0)
        return 1;
    /* a summary from an earlier run of this sink is replaced */
    pi_unlink("summary", s);
    int w = pi_create("summary", s, PI_CREATE);
    if (w < 0) {
        fprintf(stderr, "%s: pi_create summary: %s\n", me, cx_errmsg());
        return 1;
    }
    demo_log(me, "channel %s created (results as result_v1), waiting for %ld results", cx_chan_id(ch), segments);

    long written = 0, last_report = 0;
    while (written < segments) {
        pthread_mutex_lock(&c.mu);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        while (c.queued == 0)
            if (pthread_cond_timedwait(&c.cv, &c.mu, &until) == ETIMEDOUT)
                break;
        long n = c.queued;
        memcpy(batch, c.queue, (size_t)n * sizeof *batch);
        c.queued = 0;
        long dup = c.duplicates, bad = c.bad;
        pthread_mutex_unlock(&c.mu);
        for (long i = 0; i < n; i++)
            if (pi_write(w, &batch[i], 1, fmt) != 1) {
                fprintf(stderr, "%s: pi_write summary: %s\n", me, cx_errmsg());
                return 1;
            }
        written += n;
        if (written - last_report >= 25 || (n == 0 && written != last_report) || written == segments) {
            struct cx_chan_stats st;
            cx_chan_stats(ch, &st);
            demo_log(me, "%ld/%ld results (%ld duplicates, %ld bad), %u sources on the channel",
                     written, segments, dup, bad, st.sources);
            last_report = written;
        }
    }
    if (pi_close(w) < 0) {
        fprintf(stderr, "%s: pi_close summary: %s\n", me, cx_errmsg());
        return 1;
    }
    demo_log(me, "complete: %ld results from the stages, written to pipe 'summary'", segments);
    demo_idle();
}
