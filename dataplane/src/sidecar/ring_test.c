/* The shared-memory SPSC ring: claim/commit/read, padding at the end, full and too-large
 * claims, trim and abort, and a producer process and a consumer process on one memfd
 * passing 200 000 records of varying sizes in order, with wake-ups through a socket. */
#define _GNU_SOURCE
#include "common/cx_test.h"
#include "sidecar/cx_sc_ring.h"

#include <errno.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static void *region(size_t len)
{
    int fd = memfd_create("ring-test", 0);
    if (fd < 0 || ftruncate(fd, (off_t)len) < 0)
        return NULL;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return p == MAP_FAILED ? NULL : p;
}

CX_TEST(claim_commit_peek_wrap_full)
{
    size_t cap = 4096;
    void *mem = region(cx_sc_ring_span(cap));
    CX_CHECK(mem);
    struct cx_sc_ring p, c;
    CX_CHECK_EQ_INT(cx_sc_ring_init(&p, mem, 1000), -EINVAL); /* not a power of two */
    CX_CHECK_EQ_INT(cx_sc_ring_init(&p, mem, cap), 0);
    CX_CHECK_EQ_INT(cx_sc_ring_attach(&c, mem, cx_sc_ring_span(cap)), 0);
    CX_CHECK_EQ_INT(cx_sc_ring_attach(&c, mem, cx_sc_ring_span(cap) + 8), -EPROTO);
    CX_CHECK_EQ_INT(cx_sc_ring_attach(&c, mem, cx_sc_ring_span(cap)), 0);
    int err = 0;
    CX_CHECK(!cx_sc_ring_claim(&p, 1, cx_sc_ring_max(&p) + 1, &err) && err == -EMSGSIZE);
    uint32_t type;
    void *pl;
    size_t len;
    CX_CHECK_EQ_INT(cx_sc_ring_peek(&c, &type, &pl, &len), 0);
    /* records of 1000 bytes: the 5th does not fit before the end, so it wraps */
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 3; i++) {
            char *w = cx_sc_ring_claim(&p, 7, 1000, &err);
            CX_CHECK(w);
            memset(w, 'a' + i, 1000);
            cx_sc_ring_commit(&p);
        }
        /* full now: 3 * 1008 of 4096, a 4th of 1008 + any padding may not fit */
        char *w = cx_sc_ring_claim(&p, 7, 2000, &err);
        CX_CHECK(!w && err == -EAGAIN);
        for (int i = 0; i < 3; i++) {
            CX_CHECK_EQ_INT(cx_sc_ring_peek(&c, &type, &pl, &len), 1);
            CX_CHECK(type == 7 && len == 1000 && ((char *)pl)[0] == 'a' + i && ((char *)pl)[999] == 'a' + i);
            cx_sc_ring_release(&c);
        }
        CX_CHECK_EQ_INT(cx_sc_ring_used(&c), 0);
    }
    /* trim publishes less than claimed; abort publishes nothing */
    char *w = cx_sc_ring_claim(&p, 2, 500, &err);
    CX_CHECK(w);
    memcpy(w, "hello", 5);
    cx_sc_ring_trim(&p, 5);
    cx_sc_ring_commit(&p);
    CX_CHECK(cx_sc_ring_claim(&p, 3, 100, &err));
    cx_sc_ring_abort(&p);
    CX_CHECK_EQ_INT(cx_sc_ring_peek(&c, &type, &pl, &len), 1);
    CX_CHECK(type == 2 && len == 5 && memcmp(pl, "hello", 5) == 0);
    cx_sc_ring_release(&c);
    CX_CHECK_EQ_INT(cx_sc_ring_peek(&c, &type, &pl, &len), 0);
    munmap(mem, cx_sc_ring_span(cap));
}

static void count_rec(void *arg, uint32_t type, void *p, size_t len)
{
    (void)type; (void)p; (void)len;
    ++*(int *)arg;
}

CX_TEST(a_broken_record_is_refused_not_followed)
{
    size_t cap = 4096;
    void *mem = region(cx_sc_ring_span(cap));
    CX_CHECK(mem);
    struct cx_sc_ring p, c;
    CX_CHECK_EQ_INT(cx_sc_ring_init(&p, mem, cap), 0);
    CX_CHECK_EQ_INT(cx_sc_ring_attach(&c, mem, cx_sc_ring_span(cap)), 0);
    uint32_t *w = cx_sc_ring_claim(&p, 1, 16, NULL);
    CX_CHECK(w);
    cx_sc_ring_commit(&p);
    w[-2] = 1u << 30; /* the other process rewrites the length: far past the ring */
    uint32_t type;
    void *pl;
    size_t len;
    CX_CHECK_EQ_INT(cx_sc_ring_peek(&c, &type, &pl, &len), -EPROTO);
    CX_CHECK(cx_sc_ring_broken(&c));
    CX_CHECK_EQ_INT(cx_sc_ring_peek(&c, &type, &pl, &len), -EPROTO); /* for good */
    /* a length that fits the ring but not what was published */
    CX_CHECK_EQ_INT(cx_sc_ring_init(&p, mem, cap), 0);
    CX_CHECK_EQ_INT(cx_sc_ring_attach(&c, mem, cx_sc_ring_span(cap)), 0);
    w = cx_sc_ring_claim(&p, 1, 16, NULL);
    cx_sc_ring_commit(&p);
    w[-2] = 1000;
    int seen = 0;
    CX_CHECK_EQ_INT(cx_sc_ring_read(&c, count_rec, &seen, 10), 0);
    CX_CHECK_EQ_INT(seen, 0);
    CX_CHECK(cx_sc_ring_broken(&c));
    munmap(mem, cx_sc_ring_span(cap));
}

struct check {
    uint64_t next;
    int bad;
};

static void on_rec(void *arg, uint32_t type, void *p, size_t len)
{
    struct check *ck = arg;
    uint64_t v;
    memcpy(&v, p, 8);
    size_t want = 9 + (size_t)(v * 7919 % 300);
    if (type != 5 || v != ck->next || len != want || ((uint8_t *)p)[len - 1] != (uint8_t)v)
        ck->bad++;
    ck->next++;
}

CX_TEST(two_processes_in_order_with_wakeups)
{
    size_t cap = 1 << 16;
    void *mem = region(cx_sc_ring_span(cap));
    CX_CHECK(mem);
    struct cx_sc_ring r;
    CX_CHECK_EQ_INT(cx_sc_ring_init(&r, mem, cap), 0);
    int sv[2];
    CX_CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0);
    const uint64_t N = 200000;
    pid_t pid = fork();
    if (pid == 0) { /* the producer */
        struct cx_sc_ring p;
        if (cx_sc_ring_attach(&p, mem, cx_sc_ring_span(cap)) < 0)
            _exit(3);
        for (uint64_t v = 0; v < N;) {
            size_t len = 9 + (size_t)(v * 7919 % 300);
            uint8_t *w = cx_sc_ring_claim(&p, 5, len, NULL);
            if (!w) {
                sched_yield();
                continue;
            }
            memcpy(w, &v, 8);
            w[len - 1] = (uint8_t)v;
            if (cx_sc_ring_commit(&p))
                send(sv[1], "w", 1, 0);
            v++;
        }
        _exit(0);
    }
    struct check ck = {0};
    int waits = 0;
    while (ck.next < N) {
        if (cx_sc_ring_read(&r, on_rec, &ck, 64))
            continue;
        if (cx_sc_ring_prepare_wait(&r)) {
            char b;
            struct timeval tv = {.tv_sec = 10};
            setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            if (recv(sv[0], &b, 1, 0) != 1)
                break; /* a lost wake-up would end here */
            cx_sc_ring_done_wait(&r);
            waits++;
        }
    }
    int st;
    waitpid(pid, &st, 0);
    CX_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CX_CHECK_EQ_INT(ck.next, N);
    CX_CHECK_EQ_INT(ck.bad, 0);
    close(sv[0]);
    close(sv[1]);
    munmap(mem, cx_sc_ring_span(cap));
}

CX_TEST_MAIN()
