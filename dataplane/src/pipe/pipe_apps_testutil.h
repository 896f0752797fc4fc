/* Pipe tests whose applications run in both modes (header only, not part of the library):
 * a space server and a sidecar as real processes (build/bin/confluxd), applications as
 * forked children that reach the space embedded or through the sidecar, and segments of
 * SEG_BYTES (define it before including) that carry their id. One env per test binary. */
#ifndef PIPE_APPS_TESTUTIL_H
#define PIPE_APPS_TESTUTIL_H

#include "common/cx_error.h"
#include "pipe/cx_pipe.h"
#include "sidecar/cx_sc_client.h"
#include "sidecar/sc_testutil.h"

#include <sys/prctl.h>

struct apps_env {
    struct proc space, sc;
    char dir[64], space_addr[64], sock[128];
};
static struct apps_env E;

/* The space server on listen (its data in E.dir/space). 0 or -1. */
static int apps_space_start(const char *listen)
{
    char dirarg[128], lis[96];
    snprintf(dirarg, sizeof dirarg, "--dir=%s/space", E.dir);
    snprintf(lis, sizeof lis, "--listen=%s", listen);
    const char *args[] = {"--role=space", dirarg, lis, "--no-udp", "--fsync=none", "--quiet", NULL};
    return proc_start(&E.space, args, 0);
}

/* A directory from tmpl ("/tmp/cx-x-XXXXXX"), the space server and a sidecar of it. 0 or -1. */
static int apps_env_up(const char *tmpl)
{
    snprintf(E.dir, sizeof E.dir, "%s", tmpl);
    if (!mkdtemp(E.dir) || apps_space_start("tcp://127.0.0.1:0") < 0)
        return -1;
    word(E.space.line, 1, E.space_addr, sizeof E.space_addr);
    snprintf(E.sock, sizeof E.sock, "%s/sc.sock", E.dir);
    char sockarg[160], spacearg[96];
    snprintf(sockarg, sizeof sockarg, "--socket=%s", E.sock);
    snprintf(spacearg, sizeof spacearg, "--space=%s", E.space_addr);
    const char *args[] = {"--role=sidecar", sockarg, "--no-http", spacearg,
                          "--listen=tcp://127.0.0.1:0", "--ring-size=1M", "--quiet", NULL};
    return proc_start(&E.sc, args, 1);
}

/* An application's fatal error: the message, cx_errmsg(), exit 1. */
#define FAIL(...) do { fprintf(stderr, "  app %d: ", (int)getpid()); fprintf(stderr, __VA_ARGS__); \
                       fprintf(stderr, " (%s)\n", cx_errmsg()); _exit(1); } while (0)

static void seg_fill(uint8_t *b, uint64_t id)
{
    memcpy(b, &id, 8);
    for (int k = 8; k < SEG_BYTES; k++)
        b[k] = (uint8_t)(id * 7 + (uint64_t)k);
}

/* The id a segment carries, or -1 when its bytes are not what seg_fill wrote. */
static int64_t seg_check(const uint8_t *b, long len)
{
    uint64_t id;
    if (len != SEG_BYTES)
        return -1;
    memcpy(&id, b, 8);
    for (int k = 8; k < SEG_BYTES; k++)
        if (b[k] != (uint8_t)(id * 7 + (uint64_t)k))
            return -1;
    return (int64_t)id;
}

/* The application's space descriptor, through the sidecar when `sidecar` (else embedded);
 * the child dies with the test. */
static int app_space(int sidecar)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (sidecar && cx_sc_connect(E.sock) < 0)
        FAIL("connect to the sidecar at %s", E.sock);
    int s = pi_space_open(E.space_addr, NULL);
    if (s < 0)
        FAIL("pi_space_open %s", E.space_addr);
    return s;
}

#endif
