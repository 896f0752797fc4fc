/* demo-stage: one replica of the parallel stage. A member of the reader group "stages" of
 * the pipe "readings" (pi_attach_group): the space hands each replica its own share of the
 * segments, and for each it submits one result (mean and max energy) to the sink's event
 * channel, then acknowledges the segment (pi_ack), so a replica that dies leaves its
 * unfinished segments to the others.
 *
 *   env CONFLUX_SPACE=... DEMO_STAGES=3 [DEMO_RANK=r] demo-stage
 *
 * The rank (a label on its results and log lines) is DEMO_RANK, or the ordinal at the end of
 * the pod's host name (a StatefulSet pod "demo-stage-2" has rank 2). The channel's id comes from the sink: it writes it as the
 * only segment of the pipe "results-contact" (the space doubles as a name service). Results
 * travel in format result_v2; the sink reads them as the older result_v1.
 */
#include "demo_formats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *me = "stage";

static long rank_from_env(long stages)
{
    const char *r = getenv("DEMO_RANK");
    char host[256] = "";
    if (!r || !*r) {
        gethostname(host, sizeof host - 1);
        r = strrchr(host, '-');
        r = r ? r + 1 : host;
    }
    char *end;
    long rank = strtol(r, &end, 10);
    if (end == r || *end || rank < 0 || rank >= stages) {
        fprintf(stderr, "%s: no rank in [0,%ld): set DEMO_RANK or run as a StatefulSet pod "
                        "(host name '%s')\n", me, stages, host);
        exit(2);
    }
    return rank;
}

/* The sink's channel id: the first segment of "results-contact". A sink that restarted
 * rewrites it, so a stale id (the contact refuses) makes the caller ask again. */
static int contact_id(int s, char *id, size_t cap)
{
    for (int tries = 0;; tries++) {
        int r = pi_attach("results-contact", s);
        if (r >= 0) {
            long n = pi_read_timeout(r, id, cap - 1, NULL, 2000);
            pi_detach(r);
            if (n > 0) {
                id[n] = 0;
                return 0;
            }
        }
        if (tries % 10 == 0)
            demo_log(me, "waiting for the sink to publish the results channel");
        sleep(1);
    }
}

int main(void)
{
    const char *space = demo_space(me);
    long stages = demo_env_long("DEMO_STAGES", 1);
    long rank = rank_from_env(stages);
    const struct cx_format *in = demo_register("reading"), *out = demo_register("result_v2");
    if (!in || !out)
        return 1;
    int s = demo_open_space(me, space, (const struct cx_format *const[]){out, NULL});
    struct cx_chan_ctx *ctx;
    if (cx_chan_ctx_create(NULL, &ctx) < 0) {
        fprintf(stderr, "%s: channel runtime: %s\n", me, cx_errmsg());
        return 1;
    }
    struct cx_chan *ch = NULL;
    struct cx_chan_source *src = NULL;
    char id[256];
    while (!src) {
        contact_id(s, id, sizeof id);
        if (cx_chan_open(ctx, id, 5000, &ch) < 0 || cx_chan_source(ch, out, &src) < 0 ||
            cx_chan_wait_members(ch, 0, 1, 10000) < 0) {
            demo_log(me, "channel %s: %s; asking the space again", id, cx_errmsg());
            if (ch)
                cx_chan_close(ch);
            ch = NULL, src = NULL;
            sleep(1);
        }
    }
    demo_log(me, "rank %ld/%ld: channel %s open, reading pipe 'readings'", rank, stages, id);

    int r = -1;
    while ((r = pi_attach_group("readings", s, "stages")) < 0) {
        demo_log(me, "waiting for pipe 'readings': %s", cx_errmsg());
        sleep(1);
    }
    struct reading buf[DEMO_READINGS_PER_SEGMENT];
    long mine = 0, n;
    while ((n = pi_read(r, buf, DEMO_READINGS_PER_SEGMENT, in)) >= 0) {
        long idx = (long)pi_tell(r) - 1; /* a group member: the position of what it read */
        struct result_v2 res = {.segment = idx, .stage = (int32_t)rank, .count = (int32_t)n};
        res.max = n ? buf[0].energy[0] : 0;
        for (long k = 0; k < n; k++)
            for (int j = 0; j < DEMO_ENERGIES; j++) {
                res.mean += buf[k].energy[j];
                if (buf[k].energy[j] > res.max)
                    res.max = buf[k].energy[j];
            }
        if (n)
            res.mean /= (double)(n * DEMO_ENERGIES);
        if (cx_chan_submit_wait(src, &res, 30000) < 0) {
            fprintf(stderr, "%s: submit of segment %ld: %s\n", me, idx, cx_errmsg());
            return 1;
        }
        if (pi_ack(r) < 0) { /* not acknowledged: the space hands it to another replica */
            fprintf(stderr, "%s: pi_ack of segment %ld: %s\n", me, idx, cx_errmsg());
            return 1;
        }
        if (++mine % 20 == 0)
            demo_log(me, "rank %ld: %ld results submitted (segment %ld)", rank, mine, idx);
    }
    if (errno != EPIPE) {
        fprintf(stderr, "%s: pi_read: %s\n", me, cx_errmsg());
        return 1;
    }
    demo_log(me, "rank %ld: done, end of pipe, %ld results submitted (its share)", rank, mine);
    demo_idle();
}
