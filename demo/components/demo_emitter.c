/* demo-emitter: creates a reliable event channel and sends ticks 0..N-1 on it, each with its
 * check value, once a receiver has subscribed (the WAN scenario of e2e/TestChannelOverWAN:
 * the emitter in one cluster, demo-receiver in the other).
 *
 *   env DEMO_TICKS=5000 demo-emitter
 *
 * It prints "emitter: channel <id> created, ..." first: the id (its sidecar's advertised
 * address and the channel's number) is what the receiver is given. Ticks go with
 * cx_chan_submit_wait, so a slow link holds the emitter back instead of losing ticks. When
 * all are submitted it prints "emitter: done: N ticks submitted" and stays up (its process
 * is the channel's contact point; SIGTERM ends it).
 */
#include "demo_formats.h"

#include <errno.h>
#include <stdio.h>

static const char *me = "emitter";

int main(void)
{
    demo_exit_on_sigterm();
    long ticks = demo_env_long("DEMO_TICKS", 5000);
    const struct cx_format *fmt = demo_register("tick");
    if (!fmt)
        return 1;
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_source *src;
    if (cx_chan_ctx_create(NULL, &ctx) < 0 ||
        cx_chan_create(ctx, &(struct cx_chan_opts){.format = fmt, .mode = CX_CHAN_RELIABLE}, &ch) < 0 ||
        cx_chan_source(ch, fmt, &src) < 0) {
        fprintf(stderr, "%s: channel: %s\n", me, cx_errmsg());
        return 1;
    }
    demo_log(me, "channel %s created, waiting for a receiver", cx_chan_id(ch));
    for (long waited = 0; cx_chan_wait_members(ch, 0, 1, 10000) < 0; waited += 10)
        demo_log(me, "no receiver yet after %ld s", waited + 10);
    demo_log(me, "a receiver subscribed: sending %ld ticks", ticks);
    for (long i = 0; i < ticks; i++) {
        struct tick t = {.id = i, .check = tick_check(i)};
        int rc;
        while ((rc = cx_chan_submit_wait(src, &t, 10000)) < 0) {
            demo_log(me, "tick %ld: %s; trying again", i, cx_errmsg());
            if (rc != -ETIMEDOUT && rc != -EAGAIN)
                return 1;
        }
        if ((i + 1) % 1000 == 0)
            demo_log(me, "%ld/%ld ticks submitted", i + 1, ticks);
    }
    struct cx_chan_stats st;
    cx_chan_stats(ch, &st);
    demo_log(me, "done: %ld ticks submitted (%llu sent to remote sinks, %u sinks)", ticks,
             (unsigned long long)st.sent, st.sinks);
    demo_idle();
}
