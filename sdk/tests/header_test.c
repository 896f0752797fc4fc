/* The public header: it compiles together with the internal header whose calls it
 * re-declares (a drifted declaration is a compile error here), its version macros agree, and
 * an application using nothing but conflux.h runs a typed pipe across two processes (with
 * conversion) and a typed channel, against a real space server (confluxd, from $CONFLUXD). */
#include "conflux.h"
#include "space/cx_space_client.h" /* after conflux.h: conflicting re-declarations fail here */

#include "common/cx_test.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- a space server in a child process ----------------------------------------------- */

struct space { pid_t pid; char dir[64]; char addr[128]; };

static int space_start(struct space *s)
{
    const char *bin = getenv("CONFLUXD");
    if (!bin || access(bin, X_OK) != 0)
        return -1;
    snprintf(s->dir, sizeof s->dir, "/tmp/cxsdk-hdr-XXXXXX");
    if (!mkdtemp(s->dir))
        return -1;
    int fd[2];
    if (pipe(fd) < 0)
        return -1;
    char dirarg[96];
    snprintf(dirarg, sizeof dirarg, "--dir=%s", s->dir);
    if ((s->pid = fork()) == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        execl(bin, bin, "--role=space", dirarg, "--listen=tcp://127.0.0.1:0", "--quiet", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    FILE *f = fdopen(fd[0], "r");
    char line[256] = "";
    int ok = f && fgets(line, sizeof line, f) && sscanf(line, "listening %127s", s->addr) == 1;
    if (f)
        fclose(f);
    return ok ? 0 : -1;
}

static void space_stop(struct space *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
    }
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", s->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", s->dir);
}

/* ---- the tests ------------------------------------------------------------------------- */

CX_TEST(version_macros_agree)
{
    char v[32];
    snprintf(v, sizeof v, "%d.%d.%d", CONFLUX_VERSION_MAJOR, CONFLUX_VERSION_MINOR, CONFLUX_VERSION_PATCH);
    CX_CHECK_STR(v, CONFLUX_VERSION_STRING);
    CX_CHECK_STR(conflux_version(), CONFLUX_VERSION_STRING);
    CX_CHECK_EQ_INT(CONFLUX_VERSION_NUMBER,
                    CONFLUX_VERSION_MAJOR * 10000 + CONFLUX_VERSION_MINOR * 100 + CONFLUX_VERSION_PATCH);
}

CX_TEST(bad_schema_fails_with_a_message)
{
    const struct cx_format *f = NULL;
    int rc = conflux_format_json("{\"name\":\"x\",\"fields\":[{\"name\":\"a\",\"type\":\"int33\"}]}", &f);
    CX_CHECK(rc == -EINVAL);
    CX_CHECK(f == NULL);
    CX_CHECK(strstr(cx_errmsg(), "int33") != NULL);
}

/* The writer's struct (v2: a field in front, wider step) and the reader's (v1). */
struct sample_v2 { uint64_t tag; int64_t step; double energy; float pos[3]; };
struct sample_v1 { double energy; int32_t step; };

static const char *schema_v1 =
    "{\"name\":\"sample\",\"fields\":[{\"name\":\"energy\",\"type\":\"double\"},"
    "{\"name\":\"step\",\"type\":\"int32\"}]}";

/* Runs in a child process that never registered the reader's format (and vice versa). */
static int write_v2(const char *addr, int segments)
{
    static const struct cx_field f[] = {
        {"tag", "uint64", 0, offsetof(struct sample_v2, tag), NULL},
        {"step", "int64", 0, offsetof(struct sample_v2, step), NULL},
        {"energy", "double", 0, offsetof(struct sample_v2, energy), NULL},
        {"pos", "float[3]", 0, offsetof(struct sample_v2, pos), NULL},
        {NULL, NULL, 0, 0, NULL}};
    const struct cx_struct_decl d[] = {{"sample", f, sizeof(struct sample_v2)}, {NULL, NULL, 0}};
    struct cx_format *tmp;
    const struct cx_format *F;
    if (cx_format_create(d, NULL, &tmp) < 0 || cx_format_registry_insert(tmp, &F) < 0)
        return 1;
    if (conflux_format_publish(addr, F) < 0)
        return 2;
    int s = pi_space_open(addr, NULL);
    int w = pi_create("hdr-typed", s, PI_CREATE);
    if (s < 0 || w < 0)
        return 3;
    struct sample_v2 ev[16];
    for (int k = 0; k < segments; k++) {
        for (int i = 0; i < 16; i++)
            ev[i] = (struct sample_v2){.tag = 7, .step = k * 16 + i, .energy = (k * 16 + i) * 0.25};
        if (pi_write(w, ev, 16, F) != 16)
            return 4;
    }
    return pi_close(w) == 0 && pi_space_close(s) == 0 ? 0 : 5;
}

CX_TEST(typed_pipe_across_processes_converts_at_the_reader)
{
    struct space sp = {0};
    if (space_start(&sp) < 0) {
        space_stop(&sp);
        CX_SKIP("no space server: set CONFLUXD to dataplane/build/bin/confluxd (make -C sdk test does)");
    }
    pid_t w = fork();
    if (w == 0)
        _exit(write_v2(sp.addr, 5));
    int st = 0;
    waitpid(w, &st, 0);
    const struct cx_format *F1 = NULL;
    int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && conflux_format_json(schema_v1, &F1) == 0;
    int s = ok ? pi_space_open(sp.addr, NULL) : -1;
    int r = s >= 0 ? pi_attach("hdr-typed", s) : -1;
    long got = 0, n;
    struct sample_v1 in[16];
    while (r >= 0 && (n = pi_read_timeout(r, in, 16, F1, 5000)) > 0) {
        for (long i = 0; i < n; i++)
            ok &= in[i].step == got + i && in[i].energy == (got + i) * 0.25;
        got += n;
    }
    int end_errno = errno;
    const char *msg = cx_errmsg();
    if (r >= 0)
        pi_detach(r);
    if (s >= 0)
        pi_space_close(s);
    space_stop(&sp);
    if (got != 80)
        fprintf(stderr, "  read %ld events, last error: %s\n", got, msg);
    CX_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CX_CHECK_EQ_INT(got, 80);
    CX_CHECK(ok);
    CX_CHECK_EQ_INT(end_errno, EPIPE);
}

CX_TEST(publish_to_an_unreachable_space_says_so)
{
    const struct cx_format *F;
    CX_CHECK_EQ_INT(conflux_format_json(schema_v1, &F), 0);
    int rc = conflux_format_publish("tcp://127.0.0.1:1", F);
    CX_CHECK(rc < 0);
    CX_CHECK(strstr(cx_errmsg(), "publishing format 'sample'") != NULL);
}

struct got { int n; int64_t sum; };
static void on_event(void *arg, const struct cx_chan_event *ev)
{
    struct got *g = arg;
    const struct sample_v1 *e = ev->data;
    g->sum += e->step;
    __atomic_add_fetch(&g->n, 1, __ATOMIC_SEQ_CST);
}

CX_TEST(typed_channel_with_a_local_sink_through_the_header)
{
    const struct cx_format *F1;
    CX_CHECK_EQ_INT(conflux_format_json(schema_v1, &F1), 0);
    struct cx_chan_ctx *ctx;
    CX_CHECK_EQ_INT(cx_chan_ctx_create(&(struct cx_chan_ctx_opts){.listen = "tcp://127.0.0.1:0"}, &ctx), 0);
    struct cx_chan *ch;
    struct cx_chan_source *src;
    struct cx_chan_sink *k;
    struct got g = {0};
    int rc = cx_chan_create(ctx, &(struct cx_chan_opts){.format = F1, .mode = CX_CHAN_RELIABLE}, &ch);
    if (rc == 0)
        rc = cx_chan_sink(ch, &(struct cx_chan_sink_opts){.format = F1}, on_event, &g, &k);
    if (rc == 0)
        rc = cx_chan_source(ch, F1, &src);
    for (int i = 0; rc == 0 && i < 100; i++)
        rc = cx_chan_submit_wait(src, &(struct sample_v1){.energy = i, .step = i}, 5000);
    for (int t = 0; t < 500 && __atomic_load_n(&g.n, __ATOMIC_SEQ_CST) < 100; t++)
        usleep(10000);
    cx_chan_ctx_destroy(ctx);
    CX_CHECK_EQ_INT(rc, 0);
    CX_CHECK_EQ_INT(g.n, 100);
    CX_CHECK_EQ_INT(g.sum, 99 * 100 / 2);
}

CX_TEST_MAIN()
