/* The conflux CLI against a real space server: ls, stat, cat (JSON through the format
 * service), lookup over TCP and UDP, unlink, and its errors and exit codes. Runs the built
 * binary (build/bin/conflux, built by `make test` before the tests). */
#define _GNU_SOURCE
#include "channel/cx_chan.h"
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "format/cx_codec.h"
#include "format/cx_format.h"
#include "format/cx_format_registry.h"
#include "space/cx_space_client.h"
#include "space/cx_space_server.h"
#include "sidecar/sc_testutil.h" /* run_cli */
#include "space/space_testutil.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/wait.h>

#define CLI CONFLUX_CLI

CX_TEST(cli_against_a_space)
{
    if (access(CLI, X_OK) != 0)
        CX_SKIP("%s is not built (make -C dataplane bin)", CLI);
    char dir[64];
    CX_CHECK(tmpdir_make(dir));
    struct cx_space_server_opts o = {.dir = dir, .quiet = 1}; /* UDP on the TCP port */
    struct cx_space_server *s;
    CX_CHECK_EQ_INT(cx_space_server_start(&o, &s), 0);
    const char *addr = cx_space_server_addr(s);
    /* a typed pipe of 3 events, written through the client */
    const char *js = "{\"name\":\"temp\",\"fields\":[{\"name\":\"sensor\",\"type\":\"int32\"},"
                     "{\"name\":\"kelvin\",\"type\":\"double\"}]}";
    struct temp { int32_t sensor; double kelvin; };
    struct cx_format *f;
    CX_CHECK_EQ_INT(cx_format_from_json(js, strlen(js), NULL, &f), 0);
    struct cx_space_client *c;
    CX_CHECK_EQ_INT(cx_space_connect(addr, &c), 0);
    CX_CHECK_EQ_INT(cx_space_format_put(c, f, NULL), 0);
    uint32_t w;
    struct cx_space_pipe_info info;
    CX_CHECK_EQ_INT(cx_space_put(c, "temps", CX_SP_CREATE, cx_format_token(f), "", &w, &info), 0);
    for (int i = 0; i < 3; i++) {
        struct temp t = {i, 270.5 + i};
        struct cx_enc e;
        CX_CHECK_EQ_INT(cx_encode(f, &t, &e), 0);
        CX_CHECK_EQ_INT(cx_space_append(c, w, (uint64_t)i + 1, e.token, e.iov, e.iovcnt), 0);
    }
    CX_CHECK_EQ_INT(cx_space_end(c, w, 3), 0);
    CX_CHECK_EQ_INT(cx_space_wait_acked(c, w, 3, 5000), 0);
    cx_format_free(f);

    char out[8192];
    CX_CHECK_EQ_INT(run_cli(out, sizeof out, "--space %s ls", addr), 0);
    CX_CHECK(strstr(out, "temps"));
    CX_CHECK_EQ_INT(run_cli(out, sizeof out, "--space %s stat temps", addr), 0);
    CX_CHECK(strstr(out, "segments  3 (positions 0..2)") && strstr(out, "closed"));
    /* ended, but the client that wrote it is still connected: its link counts */
    CX_CHECK(strstr(out, "readers   0\n") && strstr(out, "links     tcp=1\n"));
    /* bytes stored: the 3 segments and their record headers, as the space's STATS says */
    struct cx_space_pipe_stats st;
    CX_CHECK_EQ_INT(cx_space_stats(c, "temps", NULL, &st), 0);
    char want[64];
    snprintf(want, sizeof want, "bytes     %llu\n", (unsigned long long)st.bytes);
    CX_CHECK(st.segments == 3 && st.bytes > 3 * 12 && strstr(out, want));
    /* a pipe in use: its writer's connection and a registered reader's direct link */
    uint32_t w2;
    CX_CHECK_EQ_INT(cx_space_put(c, "live", CX_SP_CREATE, 0, "", &w2, &info), 0);
    CX_CHECK_EQ_INT(cx_space_get(c, "live", 0, "tcp://127.0.0.1:9", &info), 0);
    CX_CHECK_EQ_INT(run_cli(out, sizeof out, "--space %s links live", addr), 0);
    CX_CHECK(strstr(out, "TRANSPORT  LINKS\ntcp        2\n"));
    CX_CHECK_EQ_INT(run_cli(out, sizeof out, "--space %s links nosuch", addr), 1);
    CX_CHECK(strstr(out, "conflux: nosuch:"));
    CX_CHECK_EQ_INT(run_cli(out, sizeof out, "links --sidecar 127.0.0.1:1"), 1);
    CX_CHECK(strstr(out, "conflux: 127.0.0.1:1:") && strstr(out, "refused"));
    CX_CHECK_EQ_INT(run_cli(out, sizeof out, "links --sidecar nocolon"), 1);
    CX_CHECK(strstr(out, "give HOST:PORT"));
    CX_CHECK_EQ_INT(run_cli(out, sizeof out, "--sidecar 127.0.0.1:1 ls"), 2);
    CX_CHECK_EQ_INT(run_cli(out, sizeof out, "cat temps --space %s --json --from 1", addr), 0);
    CX_CHECK(!strstr(out, "\"sensor\":0") && strstr(out, "\"sensor\":1") && strstr(out, "\"kelvin\":272.5"));
    CX_CHECK_EQ_INT(run_cli(out, sizeof out, "--space %s lookup temps", addr), 0);
    CX_CHECK(strstr(out, "(TCP,"));
    CX_CHECK_EQ_INT(run_cli(out, sizeof out, "--space %s lookup temps --udp", addr), 0);
    CX_CHECK(strstr(out, "(UDP,"));
    /* errors: a clear message and exit 1; bad usage exit 2 */
    CX_CHECK_EQ_INT(run_cli(out, sizeof out, "--space %s cat nosuch", addr), 1);
    CX_CHECK(strstr(out, "conflux: nosuch:"));
    CX_CHECK_EQ_INT(run_cli(out, sizeof out, "--space %s frobnicate x", addr), 2);
    CX_CHECK(strstr(out, "unknown command"));
    CX_CHECK_EQ_INT(run_cli(out, sizeof out, "--space %s cat temps --from=abc", addr), 2);
    CX_CHECK_EQ_INT(run_cli(out, sizeof out, "--space tcp://127.0.0.1:9 ls"), 1);
    CX_CHECK(strstr(out, "refused") || strstr(out, "ECONNREFUSED") || strstr(out, "onnection"));
    CX_CHECK_EQ_INT(run_cli(out, sizeof out, "--space %s unlink temps", addr), 1); /* still open */
    CX_CHECK(strstr(out, "open for writing"));
    CX_CHECK_EQ_INT(cx_space_stop(c, w), 0);
    CX_CHECK_EQ_INT(run_cli(out, sizeof out, "--space %s unlink temps", addr), 0);
    CX_CHECK_EQ_INT(run_cli(out, sizeof out, "--space %s stat temps", addr), 1);
    cx_space_disconnect(c);
    cx_space_server_stop(s);
    tmpdir_remove(dir);
}

struct tail_run {
    char cmd[512], out[8192];
    int status, done;
};

static void *tail_thread(void *arg)
{
    struct tail_run *t = arg;
    t->status = run_cli(t->out, sizeof t->out, "%s", t->cmd);
    __atomic_store_n(&t->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* conflux tail: a channel's events as JSON lines, filtered at the source. */
CX_TEST(cli_tails_a_channel)
{
    if (access(CLI, X_OK) != 0)
        CX_SKIP("%s is not built (make -C dataplane bin)", CLI);
    const char *js = "{\"name\":\"tick\",\"fields\":[{\"name\":\"n\",\"type\":\"int64\"}]}";
    struct cx_format *f;
    const struct cx_format *F;
    CX_CHECK_EQ_INT(cx_format_from_json(js, strlen(js), NULL, &f), 0);
    cx_format_registry_insert(f, &F);
    struct cx_chan_ctx *ctx;
    struct cx_chan *ch;
    struct cx_chan_source *src;
    CX_CHECK_EQ_INT(cx_chan_ctx_create(NULL, &ctx), 0);
    struct cx_chan_opts co = {.format = F};
    CX_CHECK_EQ_INT(cx_chan_create(ctx, &co, &ch), 0);
    CX_CHECK_EQ_INT(cx_chan_source(ch, F, &src), 0);
    struct tail_run t = {0};
    snprintf(t.cmd, sizeof t.cmd, "tail '%s' --count 3 --filter 'n %% 2 == 1'", cx_chan_id(ch));
    pthread_t th;
    pthread_create(&th, NULL, tail_thread, &t);
    int64_t n = 0;
    for (int i = 0; i < 400 && !__atomic_load_n(&t.done, __ATOMIC_ACQUIRE); i++) {
        cx_chan_submit(src, &n);
        n++;
        usleep(25000);
    }
    pthread_join(th, NULL);
    CX_CHECK_EQ_INT(t.status, 0);
    CX_CHECK(strstr(t.out, "\"event\":{\"n\":"));
    CX_CHECK(!strstr(t.out, "\"n\":0}") && !strstr(t.out, "\"n\":2}")); /* the filter ran */
    int lines = 0;
    for (const char *p = t.out; (p = strchr(p, '\n')); p++)
        lines++;
    CX_CHECK_EQ_INT(lines, 3);
    /* --transform: the program runs at this process's source; the tail prints the fields
     * it computes (doubles) for the events its condition keeps */
    struct tail_run t2 = {0};
    snprintf(t2.cmd, sizeof t2.cmd, "tail '%s' --count 3 --transform 'n %% 2 == 1; twice = n * 2; "
             "root = sqrt(n)'", cx_chan_id(ch));
    pthread_create(&th, NULL, tail_thread, &t2);
    for (int i = 0; i < 400 && !__atomic_load_n(&t2.done, __ATOMIC_ACQUIRE); i++) {
        cx_chan_submit(src, &n);
        n++;
        usleep(25000);
    }
    pthread_join(th, NULL);
    CX_CHECK_EQ_INT(t2.status, 0);
    lines = 0;
    for (const char *p = t2.out; (p = strstr(p, "\"event\":{\"twice\":")); p++, lines++) {
        double twice = -1, root = -1;
        CX_CHECK_EQ_INT(sscanf(p, "\"event\":{\"twice\":%lf,\"root\":%lf", &twice, &root), 2);
        CX_CHECK(fabs(twice - 2 * root * root) < 1e-6 && (long)twice % 4 == 2); /* odd n */
    }
    CX_CHECK_EQ_INT(lines, 3);
    CX_CHECK(!strstr(t2.out, "\"n\":")); /* only the computed fields crossed */
    CX_CHECK_EQ_INT(run_cli(t2.out, sizeof t2.out, "tail '%s' --transform 'n > 1'", cx_chan_id(ch)), 1);
    CX_CHECK(strstr(t2.out, "computes no field"));
    CX_CHECK_EQ_INT(run_cli(t2.out, sizeof t2.out, "tail '%s' --transform 'x = nope(1)'",
                            cx_chan_id(ch)), 1);
    CX_CHECK(strstr(t2.out, "col 5: unknown field 'nope'"));
    cx_chan_ctx_destroy(ctx);
}

CX_TEST_MAIN()
