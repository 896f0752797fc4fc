/* demo-receiver: opens demo-emitter's channel by its id, possibly from another cluster, and
 * checks that ticks 0..N-1 all arrive, in order, each with its check value.
 *
 *   env DEMO_CHANNEL=cx1:tls://10.115.1.5:40123/1 DEMO_TICKS=5000 [DEMO_TIMEOUT=600] demo-receiver
 *
 * It retries the open until the emitter answers (for up to DEMO_TIMEOUT seconds), prints its
 * progress every 1000 ticks, and ends with one line for scripts and tests:
 *   "receiver: complete: 5000/5000 ticks in order with their check values" (exit 0), or
 *   "receiver: FAILED: <what went wrong>" (exit 1): a tick with a wrong check value, one out
 *   of order or seen twice, or no tick for DEMO_TIMEOUT seconds.
 */
#include "demo_formats.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static const char *me = "receiver";

struct tally {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long next;          /* the id expected next = ticks received in order */
    long received, bad, disorder;
    long first_wrong;   /* the first id out of place, -1 */
};

/* On the SDK's event thread: one tick. */
static void on_tick(void *arg, const struct cx_chan_event *ev)
{
    struct tally *t = arg;
    const struct tick *k = ev->data;
    pthread_mutex_lock(&t->mu);
    t->received++;
    if (!k || k->check != tick_check(k->id))
        t->bad++;
    else if (k->id != t->next) {
        if (t->first_wrong < 0)
            t->first_wrong = k->id;
        t->disorder++;
        if (k->id > t->next)
            t->next = k->id + 1;
    } else
        t->next++;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* The final line of a failed run; returns the exit status 1. */
static int failed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int failed(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s: FAILED: ", me);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
    return 1;
}

int main(void)
{
    demo_exit_on_sigterm();
    const char *id = getenv("DEMO_CHANNEL");
    if (!id || !*id) {
        fprintf(stderr, "%s: set DEMO_CHANNEL to the channel id demo-emitter printed\n", me);
        return 2;
    }
    long ticks = demo_env_long("DEMO_TICKS", 5000);
    long timeout = demo_env_long("DEMO_TIMEOUT", 600);
    const struct cx_format *fmt = demo_register("tick");
    if (!fmt)
        return 1;
    struct cx_chan_ctx *ctx;
    if (cx_chan_ctx_create(NULL, &ctx) < 0) {
        fprintf(stderr, "%s: channel runtime: %s\n", me, cx_errmsg());
        return 1;
    }
    struct tally t = {.first_wrong = -1};
    pthread_mutex_init(&t.mu, NULL);
    pthread_cond_init(&t.cv, NULL);
    struct cx_chan *ch = NULL;
    struct cx_chan_sink *k = NULL;
    time_t t0 = time(NULL);
    while (cx_chan_open(ctx, id, 10000, &ch) < 0 ||
           cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = fmt}, on_tick, &t, &k) < 0) {
        demo_log(me, "channel %s: %s; trying again", id, cx_errmsg());
        if (ch)
            cx_chan_close(ch);
        ch = NULL;
        if (time(NULL) - t0 > timeout)
            return failed("the channel did not open in %ld s", timeout);
        sleep(1);
    }
    demo_log(me, "subscribed to %s, expecting %ld ticks", id, ticks);

    long last_report = 0;
    pthread_mutex_lock(&t.mu);
    while (t.received < ticks) {
        long before = t.received;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += timeout;
        while (t.received == before)
            if (pthread_cond_timedwait(&t.cv, &t.mu, &until) == ETIMEDOUT)
                break;
        if (t.received == before) {
            pthread_mutex_unlock(&t.mu);
            return failed("%ld ticks arrived, then none for %ld s", before, timeout);
        }
        if (t.received - last_report >= 1000 || t.received == ticks) {
            last_report = t.received - t.received % 1000;
            demo_log(me, "%ld/%ld ticks (%ld bad, %ld out of order)", t.received, ticks, t.bad, t.disorder);
        }
    }
    long bad = t.bad, disorder = t.disorder, first = t.first_wrong, next = t.next;
    pthread_mutex_unlock(&t.mu);
    if (bad)
        return failed("%ld ticks with a wrong check value (of %ld)", bad, ticks);
    if (disorder)
        return failed("%ld ticks out of order or repeated, the first tick %ld", disorder, first);
    if (next != ticks)
        return failed("the last tick in order was %ld of %ld", next - 1, ticks);
    demo_log(me, "complete: %ld/%ld ticks in order with their check values", ticks, ticks);
    cx_chan_sink_close(k);
    cx_chan_close(ch);
    cx_chan_ctx_destroy(ctx);
    return 0;
}
