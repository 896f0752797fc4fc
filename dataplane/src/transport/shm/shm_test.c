/* The shm driver through the conformance suite, plus ring unit tests. */
#define _GNU_SOURCE
#include "transport/conformance.h"
#include "transport/shm/cx_spsc_ring.h"
#include "testutil/hostile_peer.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

static void mkaddr(char *buf, size_t cap)
{
    static int n;
    snprintf(buf, cap, "shm:///tmp/cx-shm-test-%d-%d.sock", (int)getpid(), n++);
}

CX_DECLARE_TRANSPORT_TESTS(shm, &cx_shm_ops, mkaddr, NULL)

/* A producer's and a consumer's view of a fresh ring of `cap` bytes in mem (its control
 * block, then the data, all zeroed as a new memfd is). 0, or the attach's error. */
static int ring_pair(uint8_t *mem, uint64_t cap, struct cx_spsc_ring *p, struct cx_spsc_ring *c)
{
    memset(mem, 0, CX_RING_CTL_SIZE + cap);
    struct cx_ring_ctl *ctl = (void *)mem;
    cx_spsc_ring_init(ctl, cap);
    int rc = cx_spsc_ring_attach(p, ctl, mem + CX_RING_CTL_SIZE, cap);
    return rc < 0 ? rc : cx_spsc_ring_attach(c, ctl, mem + CX_RING_CTL_SIZE, cap);
}

struct ring_seen { uint32_t next; int bad; };
static void ring_on(void *c, uint32_t type, uint8_t *body, uint32_t len)
{
    struct ring_seen *s = c;
    uint32_t v;
    memcpy(&v, body, 4);
    if (type != 7 || v != s->next || len != 4 + v % 300) s->bad = 1;
    s->next++;
}

CX_TEST(ring_claim_commit_abort_wrap)
{
    static _Alignas(64) uint8_t mem[CX_RING_CTL_SIZE + 8192];
    struct cx_spsc_ring p, c;
    CX_CHECK_EQ_INT(ring_pair(mem, 8192, &p, &c), 0);
    CX_CHECK(cx_spsc_ring_try_claim(&p, 7, 8192) == NULL); /* above max body */
    void *x = cx_spsc_ring_try_claim(&p, 7, 100);
    CX_CHECK(x != NULL);
    cx_spsc_ring_abort(&p);
    CX_CHECK(cx_spsc_ring_empty(&c));
    struct ring_seen s = {0, 0};
    uint32_t sent = 0;
    for (int round = 0; round < 2000; round++) {
        for (;;) {
            uint32_t len = 4 + sent % 300;
            uint8_t *b = cx_spsc_ring_try_claim(&p, 7, len);
            if (!b) break;
            memcpy(b, &sent, 4);
            cx_spsc_ring_commit(&p);
            sent++;
        }
        cx_spsc_ring_read(&c, ring_on, &s, 1 + round % 5);
    }
    while (!cx_spsc_ring_empty(&c)) cx_spsc_ring_read(&c, ring_on, &s, 100);
    CX_CHECK_EQ_INT(s.bad, 0);
    CX_CHECK_EQ_INT(s.next, sent);
    CX_CHECK(sent > 2000);
    CX_CHECK_EQ_INT(cx_spsc_ring_reader_arm(&c), 0);
    CX_CHECK(cx_spsc_ring_try_claim(&p, 7, 10) != NULL);
    cx_spsc_ring_commit(&p);
    CX_CHECK_EQ_INT(cx_spsc_ring_take_reader_idle(&p), 1); /* producer must wake */
    CX_CHECK_EQ_INT(cx_spsc_ring_reader_arm(&c), -EAGAIN);  /* data present */
}

/* A header the consumer polls that claims a record past the ring's end is corruption:
 * -EPROTO with a message, nothing consumed, the same answer on the next poll. */
static void ring_never(void *c, uint32_t type, uint8_t *body, uint32_t len)
{
    (void)type, (void)body, (void)len;
    ++*(int *)c;
}
CX_TEST(ring_header_past_the_end_is_eproto)
{
    static _Alignas(64) uint8_t mem[CX_RING_CTL_SIZE + 8192];
    struct cx_ring_ctl *ctl = (void *)mem;
    uint8_t *data = mem + CX_RING_CTL_SIZE;
    struct cx_spsc_ring p, c;
    CX_CHECK_EQ_INT(ring_pair(mem, 8192, &p, &c), 0);
    int calls = 0;
    uint64_t bad = (uint64_t)7 << 32 | 8200; /* type 7, 8200 bytes: more than the ring */
    memcpy(data, &bad, 8);
    CX_CHECK_EQ_INT(cx_spsc_ring_read(&c, ring_never, &calls, 10), -EPROTO);
    CX_CHECK(strstr(cx_errmsg(), "past the end") != NULL);
    CX_CHECK_EQ_INT(calls, 0);
    memset(data, 0, 8);
    for (int i = 0; i < 7; i++) { /* real records up to 7 KiB, read: head at 7 x 1 KiB */
        CX_CHECK(cx_spsc_ring_try_claim(&p, 7, 1016) != NULL);
        cx_spsc_ring_commit(&p);
    }
    CX_CHECK_EQ_INT(cx_spsc_ring_read(&c, ring_never, &calls, 100), 7);
    CX_CHECK(cx_spsc_ring_empty(&c));
    bad = (uint64_t)7 << 32 | 1100; /* 1112 bytes at offset 7168: 88 past the end */
    memcpy(data + 7168, &bad, 8);
    CX_CHECK_EQ_INT(cx_spsc_ring_read(&c, ring_never, &calls, 10), -EPROTO);
    CX_CHECK(strstr(cx_errmsg(), "offset 7168") != NULL);
    CX_CHECK_EQ_INT(cx_spsc_ring_read(&c, ring_never, &calls, 10), -EPROTO);
    CX_CHECK_EQ_INT(calls, 7);
    CX_CHECK(ctl->head == 7168);
}

/* A producer thread and the consumer (this thread) at once, the consumer polling only the
 * headers: 100 000 records of 0 to 700 bytes through a 16 KiB ring (hundreds of laps,
 * padding at the ends), every record in order with every byte right. */
#define LAP_RING 16384
#define LAP_N 100000
static _Alignas(64) uint8_t lap_mem[CX_RING_CTL_SIZE + LAP_RING];
static int lap_stop; /* atomic: the consumer gave up */
static uint32_t lap_len(uint32_t i) { return (i * 2654435761u >> 7) % 701; }
static void *lap_producer(void *arg)
{
    struct cx_spsc_ring *p = arg;
    for (uint32_t i = 0; i < LAP_N; i++) {
        uint32_t len = 4 + lap_len(i);
        uint8_t *b;
        while (!(b = cx_spsc_ring_try_claim(p, 9, len))) {
            if (__atomic_load_n(&lap_stop, __ATOMIC_ACQUIRE))
                return NULL;
            sched_yield();
        }
        memcpy(b, &i, 4);
        for (uint32_t j = 4; j < len; j++)
            b[j] = (uint8_t)(i * 31 + j);
        cx_spsc_ring_commit(p);
    }
    return NULL;
}
struct lap_seen { uint32_t next, bad; };
static void lap_on(void *c, uint32_t type, uint8_t *body, uint32_t len)
{
    struct lap_seen *s = c;
    uint32_t i;
    memcpy(&i, body, 4);
    int ok = type == 9 && i == s->next && len == 4 + lap_len(i);
    for (uint32_t j = 4; ok && j < len; j++)
        ok = body[j] == (uint8_t)(i * 31 + j);
    s->bad += !ok;
    s->next++;
}
static void two_threads_across_laps(int *cx_failed, int *cx_skipped, uint64_t hot)
{
    struct cx_ring_ctl *ctl = (void *)lap_mem;
    struct cx_spsc_ring p, c;
    CX_CHECK_EQ_INT(ring_pair(lap_mem, LAP_RING, &p, &c), 0);
    cx_spsc_ring_set_hot(&p, hot);
    __atomic_store_n(&lap_stop, 0, __ATOMIC_RELEASE);
    pthread_t t;
    CX_CHECK_EQ_INT(pthread_create(&t, NULL, lap_producer, &p), 0);
    struct lap_seen s = {0, 0};
    while (s.next < LAP_N) {
        int n = cx_spsc_ring_read(&c, lap_on, &s, 64);
        if (n < 0 || s.bad) /* a stale or torn record: stop rather than read garbage on */
            break;
        if (n == 0)
            sched_yield();
    }
    __atomic_store_n(&lap_stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    CX_CHECK_EQ_INT(s.next, LAP_N);
    CX_CHECK_EQ_INT(s.bad, 0);
    CX_CHECK(cx_spsc_ring_empty(&c));
    CX_CHECK(ctl->tail > 100ull * LAP_RING); /* hundreds of laps */
    /* empty again: the largest record fits wherever the ring stands (padding and the
     * zeroed word included), and a writer asking for that much room is told it is there */
    int calls = 0;
    for (int k = 0; k < 64; k++) {
        CX_CHECK_EQ_INT(cx_spsc_ring_writer_arm(&p, cx_spsc_ring_max_body(&p)), -EAGAIN);
        CX_CHECK(cx_spsc_ring_try_claim(&p, 9, cx_spsc_ring_max_body(&p)) != NULL);
        cx_spsc_ring_abort(&p);
        CX_CHECK(cx_spsc_ring_try_claim(&p, 9, 4 + lap_len((uint32_t)k)) != NULL);
        cx_spsc_ring_commit(&p);
        CX_CHECK_EQ_INT(cx_spsc_ring_read(&c, ring_never, &calls, 8), 1);
    }
    CX_CHECK_EQ_INT(calls, 64);
    CX_CHECK(cx_spsc_ring_empty(&c));
}

CX_TEST(ring_two_threads_records_in_order_across_laps)
{
    two_threads_across_laps(cx_failed, cx_skipped, 0);
}

/* The same with a hot window of 2 KiB in the 16 KiB ring: records up to 1 KiB start over
 * early, larger ones and those of a lagging consumer go on through the lap. */
CX_TEST(ring_two_threads_in_order_with_a_hot_window)
{
    two_threads_across_laps(cx_failed, cx_skipped, 2048);
}

/* The hot window: while the consumer keeps up, small records stay in the ring's first
 * bytes lap after lap; when it lags, the whole ring fills as without the window; a record
 * larger than half the window goes where the ring stands. */
CX_TEST(ring_hot_window_keeps_small_records_in_front)
{
    static _Alignas(64) uint8_t mem[CX_RING_CTL_SIZE + 65536];
    struct cx_ring_ctl *ctl = (void *)mem;
    uint8_t *data = mem + CX_RING_CTL_SIZE;
    struct cx_spsc_ring p, c;
    CX_CHECK_EQ_INT(ring_pair(mem, 65536, &p, &c), 0);
    cx_spsc_ring_set_hot(&p, 4096);
    struct ring_seen s = {0, 0};
    uint32_t sent = 0;
    size_t far = 0; /* the furthest byte a record reached */
    for (int i = 0; i < 2000; i++, sent++) { /* the consumer keeps up */
        uint32_t len = 4 + sent % 300;
        uint8_t *b = cx_spsc_ring_try_claim(&p, 7, len);
        CX_CHECK(b != NULL);
        memcpy(b, &sent, 4);
        size_t end = (size_t)(b - data) + len;
        far = end > far ? end : far;
        cx_spsc_ring_commit(&p);
        CX_CHECK_EQ_INT(cx_spsc_ring_read(&c, ring_on, &s, 4), 1);
    }
    CX_CHECK(far <= 4096);
    CX_CHECK(ctl->tail > 50 * 4096ull); /* many windows' worth of bytes, all in the window */
    /* The consumer lags: records fill the whole ring. A padding record of the window
     * holds its part of the ring until the consumer passes it, having read what stood
     * before it: at most a quarter window (1 KiB here), up to 16 records of 64 bytes. */
    uint32_t burst = 0;
    int reads = 0;
    for (;; sent++, burst++) {
        uint32_t len = 4 + sent % 300;
        uint8_t *b = cx_spsc_ring_try_claim(&p, 7, len);
        if (!b && reads++ == 0) {
            CX_CHECK(cx_spsc_ring_read(&c, ring_on, &s, 16) > 0);
            b = cx_spsc_ring_try_claim(&p, 7, len);
        }
        if (!b)
            break;
        memcpy(b, &sent, 4);
        cx_spsc_ring_commit(&p);
    }
    /* at most 320 bytes a record: far more than the window */
    CX_CHECK(burst > (65536 - 4096 - 4096) / 320);
    while (!cx_spsc_ring_empty(&c))
        cx_spsc_ring_read(&c, ring_on, &s, 64);
    CX_CHECK_EQ_INT(s.bad, 0);
    CX_CHECK_EQ_INT(s.next, sent);
    /* near the window's end (the consumer keeping up): a record larger than half the
     * window goes where the ring stands, a smaller one starts over at 0 */
    while ((ctl->tail & 65535) < 3200 || (ctl->tail & 65535) >= 3584) {
        uint8_t *r = cx_spsc_ring_try_claim(&p, 7, 4 + sent % 300);
        CX_CHECK(r != NULL);
        memcpy(r, &sent, 4);
        sent++;
        cx_spsc_ring_commit(&p);
        CX_CHECK_EQ_INT(cx_spsc_ring_read(&c, ring_on, &s, 4), 1);
    }
    CX_CHECK_EQ_INT(s.bad, 0);
    uint64_t pos = ctl->tail & 65535;
    uint8_t *b = cx_spsc_ring_try_claim(&p, 7, 3000);
    CX_CHECK(b != NULL && (size_t)(b - data) == pos + CX_RING_REC_HDR);
    cx_spsc_ring_abort(&p);
    b = cx_spsc_ring_try_claim(&p, 7, 1000);
    CX_CHECK(b != NULL && (size_t)(b - data) == CX_RING_REC_HDR);
    cx_spsc_ring_abort(&p);
}

CX_TEST(shm_bad_address)
{
    struct cx_link *k;
    CX_CHECK_EQ_INT(cx_shm_ops.connect("shm://", &k), -EINVAL);
    CX_CHECK_EQ_INT(cx_shm_ops.connect("shm:///nonexistent/dir/x.sock", &k), -ECONNREFUSED);
}

static void on_one(void *arg, const struct cx_frame_hdr *h, const void *payload, size_t len)
{
    (void)payload;
    *(uint64_t *)arg = h->seq + len;
}

/* An abstract address leaves no file, and connect does not wait for the listener's process
 * (the connector passes the region itself): two processes may dial each other at once. */
CX_TEST(shm_abstract_address_and_connect_before_accept)
{
    char addr[96];
    snprintf(addr, sizeof addr, "shm://@cx-shm-test-%d", (int)getpid());
    struct cx_listener *l;
    CX_CHECK_EQ_INT(cx_shm_ops.listen(addr, &l), 0);
    CX_CHECK(strcmp(cx_shm_ops.listener_addr(l), addr) == 0);
    char file[96];
    snprintf(file, sizeof file, "@cx-shm-test-%d", (int)getpid());
    CX_CHECK(access(file, F_OK) != 0);
    struct cx_link *b, *a = NULL;
    CX_CHECK_EQ_INT(cx_shm_ops.connect(addr, &b), 0); /* nobody accepts yet */
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .channel = 1, .seq = 41};
    struct iovec v = {"x", 1};
    CX_CHECK_EQ_INT(cx_link_send(b, &h, &v, 1), 0);
    CX_CHECK_EQ_INT(cx_shm_ops.accept(l, 1000, &a), 0);
    uint64_t got = 0;
    for (int i = 0; i < 1000 && !got; i++)
        CX_CHECK(cx_link_progress(a, on_one, &got, 8) >= 0);
    CX_CHECK_EQ_INT((int)got, 42);
    cx_link_close(a);
    cx_link_close(b);
    cx_shm_ops.listener_close(l);
    struct cx_link *c;
    CX_CHECK_EQ_INT(cx_shm_ops.connect(addr, &c), -ECONNREFUSED); /* gone with the listener */
    CX_CHECK_EQ_INT(cx_shm_ops.connect("shm://@", &c), -EINVAL);
}

static long minor_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

static void on_count(void *arg, const struct cx_frame_hdr *h, const void *payload, size_t len)
{
    (void)h, (void)payload, (void)len;
    ++*(long *)arg;
}

/* Both ends map the rings resident and writable before the first record: a whole first
 * lap of 1 KB messages through a fresh link (every page of the ring written by the sender,
 * read by the receiver, both mappings in this process) takes almost no page faults, where
 * an unpopulated mapping takes one per page on each side (2 x 2048 for 8 MiB). */
CX_TEST(shm_rings_are_prefaulted_so_the_first_lap_takes_no_faults)
{
    char addr[96];
    snprintf(addr, sizeof addr, "shm://@cx-shm-test-lap-%d", (int)getpid());
    struct cx_listener *l;
    struct cx_link *a, *b;
    CX_CHECK_EQ_INT(cx_shm_ops.listen(addr, &l), 0);
    CX_CHECK_EQ_INT(cx_shm_ops.connect(addr, &a), 0);
    CX_CHECK_EQ_INT(cx_shm_ops.accept(l, 1000, &b), 0);
    static uint8_t buf[1000];
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .channel = 1};
    struct iovec v = {buf, sizeof buf};
    long n = (8l << 20) / 1064 + 16, got = 0; /* a record: 8 + 48 + 1000 bytes, 8-aligned */
    cx_link_progress(b, on_count, &got, 1); /* the receiver's first poll, outside the count */
    long f0 = minor_faults();
    for (long i = 0; i < n; i++) {
        CX_CHECK_EQ_INT(cx_link_send(a, &h, &v, 1), 0);
        while (got <= i)
            CX_CHECK(cx_link_progress(b, on_count, &got, 64) >= 0);
    }
    long faults = minor_faults() - f0;
    printf("first lap: %ld messages of 1000 B, %ld minor faults\n", n, faults);
    CX_CHECK(faults < 64);
    cx_link_close(a);
    cx_link_close(b);
    cx_shm_ops.listener_close(l);
}

/* Sends a hand-made hello (ring size, region fd and two eventfds) to the listener at path. */
static int send_hello(const char *name, uint64_t ring, int memfd)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = strlen(name);
    memcpy(sa.sun_path + 1, name + 1, n - 1); /* abstract: a leading NUL */
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0 || connect(sock, (struct sockaddr *)&sa,
                            (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) < 0)
        return -1;
    struct { uint32_t magic, pad; uint64_t ring; } h = {0x43585348u, 0, ring};
    struct iovec iov = {&h, sizeof h};
    union { char buf[CMSG_SPACE(3 * sizeof(int))]; struct cmsghdr a; } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(3 * sizeof(int));
    int e1 = eventfd(0, EFD_CLOEXEC), e2 = eventfd(0, EFD_CLOEXEC);
    int fds[3] = {memfd, e1, e2};
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t w = sendmsg(sock, &m, MSG_NOSIGNAL);
    close(e1), close(e2);
    return w == (ssize_t)sizeof h ? sock : -1;
}

/* A peer's region is checked before it is mapped: one shorter than its rings (which would
 * fault with SIGBUS at the first record past its end) and ring sizes that are not a power
 * of two from 4 KiB to 1 GiB are refused with -EPROTO and a message; the listener goes on. */
CX_TEST(shm_accept_refuses_a_short_region_and_bad_ring_sizes)
{
    char addr[96];
    snprintf(addr, sizeof addr, "shm://@cx-shm-test-bad-%d", (int)getpid());
    struct cx_listener *l;
    CX_CHECK_EQ_INT(cx_shm_ops.listen(addr, &l), 0);
    const char *name = addr + strlen("shm://");
    int memfd = memfd_create("cx-shm-test", MFD_CLOEXEC);
    CX_CHECK(memfd >= 0 && ftruncate(memfd, 4096) == 0); /* rings of 64 KiB need 136 KiB */
    struct { uint64_t ring; const char *says; } bad[] = {
        {65536, "region of 4096 bytes"},
        {3 * 4096, "power of two"},
        {1ull << 40, "power of two"},
        {1ull << 63, "power of two"}, /* 2 x ring would wrap to 0 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int sock = send_hello(name, bad[i].ring, memfd);
        CX_CHECK(sock >= 0);
        struct cx_link *k = NULL;
        CX_CHECK_EQ_INT(cx_shm_ops.accept(l, 1000, &k), -EPROTO);
        CX_CHECK(strstr(cx_errmsg(), bad[i].says) != NULL);
        CX_CHECK(k == NULL);
        close(sock);
    }
    close(memfd);
    struct cx_link *a, *b; /* the listener still works */
    CX_CHECK_EQ_INT(cx_shm_ops.connect(addr, &a), 0);
    CX_CHECK_EQ_INT(cx_shm_ops.accept(l, 1000, &b), 0);
    cx_link_close(a);
    cx_link_close(b);
    cx_shm_ops.listener_close(l);
}

/* Every header field arrives as it was sent, on the short record (no ack, no fragment
 * fields: type, flags, channel, seq, format) and on the full one (an ack, a fragment). */
struct hdr_seen { struct cx_frame_hdr h[8]; size_t len[8]; int n; };
static void on_hdr(void *arg, const struct cx_frame_hdr *h, const void *payload, size_t len)
{
    (void)payload;
    struct hdr_seen *s = arg;
    if (s->n < 8) {
        s->h[s->n] = *h;
        s->len[s->n++] = len;
    }
}
/* A linked pair through a fresh listener named after `what`: *out the connector's end,
 * *in the listener's. 0, or the first error. */
static int shm_pair(const char *what, struct cx_listener **l, struct cx_link **out,
                    struct cx_link **in)
{
    char addr[96];
    snprintf(addr, sizeof addr, "shm://@cx-shm-test-%s-%d", what, (int)getpid());
    int rc = cx_shm_ops.listen(addr, l);
    if (rc == 0 && (rc = cx_shm_ops.connect(addr, out)) == 0)
        rc = cx_shm_ops.accept(*l, 1000, in);
    return rc;
}
CX_TEST(shm_headers_arrive_as_sent_short_and_full)
{
    struct cx_listener *l;
    struct cx_link *a, *b;
    CX_CHECK_EQ_INT(shm_pair("hdr", &l, &b, &a), 0);
    static char body[300];
    struct cx_frame_hdr sent[] = {
        {.type = CX_FRAME_DATA, .channel = 7, .seq = UINT64_MAX, .format = 0x1122334455667788ull,
         .length = 100, .msg_length = 100},
        {.type = CX_FRAME_CTRL, .flags = CX_FRAME_F_REPLY | CX_FRAME_F_END, .channel = 0xffffffffu,
         .seq = 3, .length = 0, .msg_length = 0},
        {.type = CX_FRAME_DATA, .flags = CX_FRAME_F_ACK, .channel = 2, .seq = 9, .ack = 1u << 20,
         .length = 5, .msg_length = 5},
        {.type = CX_FRAME_DATA, .flags = CX_FRAME_F_FRAG | CX_FRAME_F_LAST, .seq = 10,
         .frag_offset = 200, .length = 44, .msg_length = 244},
        {.type = CX_FRAME_LOOKUP, .flags = CX_FRAME_F_RETX, .format = 1, .ack = 0,
         .length = 300, .msg_length = 300},
    };
    size_t n = sizeof sent / sizeof sent[0];
    for (size_t i = 0; i < n; i++) {
        struct iovec v = {body, sent[i].length};
        CX_CHECK_EQ_INT(cx_link_send(b, &sent[i], &v, 1), 0);
    }
    struct hdr_seen seen = {.n = 0};
    for (int i = 0; i < 1000 && seen.n < (int)n; i++)
        CX_CHECK(cx_link_progress(a, on_hdr, &seen, 8) >= 0);
    CX_CHECK_EQ_INT(seen.n, n);
    for (size_t i = 0; i < n; i++) {
        CX_CHECK(memcmp(&seen.h[i], &sent[i], sizeof sent[i]) == 0); /* padding zero on both */
        CX_CHECK_EQ_INT(seen.len[i], sent[i].length);
    }
    cx_link_close(a);
    cx_link_close(b);
    cx_shm_ops.listener_close(l);
}

/* A peer that writes nonsense into its ring: a short record of an unknown frame type, one
 * claiming fragment fields it cannot carry, one shorter than its header, a record of an
 * unknown kind, a full header whose length is not its record's. Each breaks the link with
 * -EPROTO and delivers nothing; a well-formed short record (the control) is delivered. The
 * record kinds and the short header's layout are cx_shm.c's (REC_*, struct short_hdr). */
struct raw_short { uint8_t type, flags; uint16_t zero; uint32_t channel; uint64_t seq, format; };
static int hostile_record(const char *addr, uint32_t kind, const void *rec, size_t len,
                          struct hdr_seen *seen)
{
    struct cx_listener *l;
    if (cx_shm_ops.listen(addr, &l) < 0)
        return -1000;
    const uint64_t ring = 65536;
    int memfd = memfd_create("cx-shm-test", MFD_CLOEXEC);
    size_t maplen = 2 * CX_RING_CTL_SIZE + 2 * ring + 2048; /* cx_shm.c's REGION_SIZE */
    uint8_t *m = NULL;
    if (memfd < 0 || ftruncate(memfd, (off_t)maplen) < 0 ||
        (m = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0)) == MAP_FAILED)
        return -1001;
    struct cx_ring_ctl *c0 = (void *)m, *c1 = (void *)(m + CX_RING_CTL_SIZE);
    cx_spsc_ring_init(c0, ring); /* the connector's tx ring: the listener reads it */
    cx_spsc_ring_init(c1, ring);
    struct cx_spsc_ring tx;
    cx_spsc_ring_attach(&tx, c0, m + 2 * CX_RING_CTL_SIZE, ring);
    int sock = send_hello(addr + strlen("shm://"), ring, memfd);
    struct cx_link *k = NULL;
    int rc = sock < 0 ? -1002 : cx_shm_ops.accept(l, 1000, &k);
    if (rc == 0) {
        void *p = cx_spsc_ring_try_claim(&tx, kind, len);
        memcpy(p, rec, len);
        cx_spsc_ring_commit(&tx);
        for (int i = 0; i < 10 && rc == 0; i++)
            rc = cx_link_progress(k, on_hdr, seen, 8) < 0 ? -cx_errcode() : 0;
        cx_link_close(k);
    }
    close(sock);
    munmap(m, maplen);
    close(memfd);
    cx_shm_ops.listener_close(l);
    return rc;
}
CX_TEST(shm_corrupt_records_break_the_link_and_deliver_nothing)
{
    char addr[96];
    snprintf(addr, sizeof addr, "shm://@cx-shm-test-raw-%d", (int)getpid());
    uint8_t rec[64] = {0};
    struct raw_short good = {.type = CX_FRAME_DATA, .channel = 3, .seq = 77, .format = 5};
    memcpy(rec, &good, sizeof good);
    memcpy(rec + sizeof good, "payload!", 8);
    struct hdr_seen seen = {.n = 0};
    CX_CHECK_EQ_INT(hostile_record(addr, 4, rec, sizeof good + 8, &seen), 0);
    CX_CHECK_EQ_INT(seen.n, 1);
    CX_CHECK(seen.h[0].channel == 3 && seen.h[0].seq == 77 && seen.h[0].format == 5 &&
             seen.h[0].length == 8 && seen.h[0].msg_length == 8 && seen.len[0] == 8);
    struct raw_short bad_type = good, frag = good, nonzero = good;
    bad_type.type = 0;
    frag.flags = CX_FRAME_F_FRAG;
    nonzero.zero = 1;
    struct { uint32_t kind; const void *rec; size_t len; } bad[] = {
        {4, &bad_type, sizeof bad_type}, {4, &frag, sizeof frag}, {4, &nonzero, sizeof nonzero},
        {4, &good, sizeof good - 1}, {9, &good, sizeof good}, {2, NULL, 48 + 8},
    };
    uint8_t full[56] = {0};
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .length = 9, .msg_length = 9};
    cx_frame_encode_unchecked(&h, full); /* says 9 bytes, the record holds 8 */
    bad[5].rec = full;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        seen.n = 0;
        CX_CHECK_EQ_INT(hostile_record(addr, bad[i].kind, bad[i].rec, bad[i].len, &seen), -EPROTO);
        CX_CHECK_EQ_INT(seen.n, 0);
    }
}

/* The arming end's barrier (the busy end's half of the wake-up handshake when it commits
 * or frees without a fence): announced in the shared block, run by every arm between
 * raising the flag and the last look; an arm whose barrier fails declines, as one that
 * finds data. Both directions: a sleeping reader, a writer waiting for room. */
static int barrier_calls, barrier_rc;
static int count_barrier(void) { barrier_calls++; return barrier_rc; }
CX_TEST(ring_barrier_runs_in_every_arm)
{
    static _Alignas(64) uint8_t mem[CX_RING_CTL_SIZE + 4096];
    struct cx_ring_ctl *ctl = (void *)mem;
    struct cx_spsc_ring p, c;
    CX_CHECK_EQ_INT(ring_pair(mem, 4096, &p, &c), 0);
    CX_CHECK_EQ_INT(ctl->consumer_barrier, 0);
    cx_spsc_ring_set_barrier(&c, CX_RING_CONSUMER, 1, count_barrier);
    CX_CHECK_EQ_INT(ctl->consumer_barrier, 1);
    CX_CHECK_EQ_INT(ctl->producer_barrier, 0);
    cx_spsc_ring_set_barrier(&p, CX_RING_PRODUCER, 1, NULL);
    CX_CHECK_EQ_INT(cx_spsc_ring_reader_arm(&c), 0);
    CX_CHECK_EQ_INT(barrier_calls, 1);
    CX_CHECK(cx_spsc_ring_try_claim(&p, 7, 10) != NULL);
    cx_spsc_ring_commit(&p);
    CX_CHECK_EQ_INT(cx_spsc_ring_take_reader_idle(&p), 1); /* woken without the fence */
    CX_CHECK_EQ_INT(cx_spsc_ring_reader_arm(&c), -EAGAIN); /* data there */
    CX_CHECK_EQ_INT(cx_spsc_ring_read(&c, ring_never, &(int){0}, 8), 1);
    barrier_rc = -EPERM;
    CX_CHECK_EQ_INT(cx_spsc_ring_reader_arm(&c), -EAGAIN); /* could not order the producer */
    CX_CHECK_EQ_INT(ctl->reader_idle, 0);
    CX_CHECK_EQ_INT(barrier_calls, 3);
    barrier_rc = 0;
    cx_spsc_ring_set_barrier(&c, CX_RING_CONSUMER, 1, NULL);
    CX_CHECK_EQ_INT(ctl->consumer_barrier, 0);
    CX_CHECK_EQ_INT(cx_spsc_ring_reader_arm(&c), 0);
    CX_CHECK_EQ_INT(barrier_calls, 3);
    /* the other direction: a producer waiting for room runs its barrier in writer_arm */
    cx_spsc_ring_set_barrier(&p, CX_RING_PRODUCER, 1, count_barrier);
    CX_CHECK_EQ_INT(ctl->producer_barrier, 1);
    while (cx_spsc_ring_try_claim(&p, 7, 1000))
        cx_spsc_ring_commit(&p);
    CX_CHECK_EQ_INT(cx_spsc_ring_writer_arm(&p, 1000), 0); /* full: it may sleep */
    CX_CHECK_EQ_INT(barrier_calls, 4);
    CX_CHECK_EQ_INT(cx_spsc_ring_read(&c, ring_never, &(int){0}, 1), 1);
    CX_CHECK_EQ_INT(cx_spsc_ring_take_writer_idle(&c), 1); /* woken without the fence */
    barrier_rc = -EPERM;
    CX_CHECK_EQ_INT(cx_spsc_ring_writer_arm(&p, 4000), -EAGAIN);
    CX_CHECK_EQ_INT(ctl->writer_idle, 0);
    barrier_rc = 0;
}

/* The wake-up handshake under a racing producer: a reader that blocks whenever its ring is
 * empty (arm, then poll on the link's fd) and a writer thread sending 20 000 messages one
 * at a time, with no pause or pauses of up to 20 us, so that commits land on every step of
 * the reader's arm. A lost wake-up leaves the reader asleep: its 2 s poll times out. Runs
 * with the producer's fence replaced by the reader's membarrier where the kernel has it.
 * A stress run, not a proof: the race is narrow (with both the fence and the barrier taken
 * out, three runs lost no wake-up either); the argument is in cx_spsc_ring.h. */
struct wake_arg { struct cx_link *k; long n; int err; long writer_timeouts; };

/* A full ring queues the message on the link: the writer moves it on (progress) before the
 * next one, sleeping on the link's fd, so a slow reader (a loaded machine) only slows it. */
static void wake_writer_drain(struct wake_arg *w)
{
    long ignored = 0;
    struct pollfd p = {.fd = cx_link_fd(w->k), .events = POLLIN};
    while (!w->err && cx_link_pending(w->k) > 0) {
        int n = cx_link_progress(w->k, on_count, &ignored, 16);
        if (n < 0)
            w->err = 1;
        else if (cx_link_pending(w->k) > 0 && cx_link_arm(w->k) == 0 && poll(&p, 1, 2000) == 0) {
            size_t before = cx_link_pending(w->k); /* asleep 2 s: lost only if room was made */
            if (cx_link_progress(w->k, on_count, &ignored, 16) >= 0 &&
                cx_link_pending(w->k) < before)
                w->writer_timeouts++;
        }
    }
}

static void *wake_writer(void *p)
{
    struct wake_arg *w = p;
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA};
    static char big[8192]; /* a commit's stores take longest to drain: the widest window */
    struct iovec v = {big, 0};
    unsigned x = 12345;
    for (long i = 0; i < w->n && !w->err; i++) {
        h.seq = (uint64_t)i;
        v.iov_len = 1 + (size_t)(x >> 8) % sizeof big;
        if (cx_link_send(w->k, &h, &v, 1) < 0)
            w->err = 1;
        wake_writer_drain(w);
        x = x * 1103515245u + 12345u;
        unsigned pause = (x >> 16) % 4 == 0 ? 0 : (x >> 16) % 20000; /* ns */
        struct timespec ts = {0, (long)pause};
        if (pause)
            nanosleep(&ts, NULL);
    }
    return NULL;
}
CX_TEST(shm_blocked_reader_is_always_woken)
{
    struct cx_listener *l;
    struct cx_link *a, *b;
    CX_CHECK_EQ_INT(shm_pair("wake", &l, &a, &b), 0);
    struct wake_arg w = {.k = a, .n = 20000};
    pthread_t t;
    CX_CHECK_EQ_INT(pthread_create(&t, NULL, wake_writer, &w), 0);
    long got = 0, sleeps = 0, timeouts = 0;
    struct pollfd p = {.fd = cx_link_fd(b), .events = POLLIN};
    while (got < w.n && !w.err && !timeouts) {
        int n = cx_link_progress(b, on_count, &got, 64);
        if (n < 0)
            break;
        if (n == 0 && cx_link_arm(b) == 0) {
            sleeps++;
            /* asleep 2 s: a lost wake-up if a message was there (else the writer is slow) */
            if (poll(&p, 1, 2000) == 0 && cx_link_progress(b, on_count, &got, 64) > 0)
                timeouts++;
        }
    }
    pthread_join(t, NULL);
    fprintf(stderr, "  %ld messages, reader slept %ld times, %ld lost wake-ups (writer: %ld)\n",
            got, sleeps, timeouts, w.writer_timeouts);
    CX_CHECK_EQ_INT(timeouts, 0);
    CX_CHECK_EQ_INT(w.writer_timeouts, 0);
    CX_CHECK_EQ_INT(w.err, 0);
    CX_CHECK_EQ_INT(got, w.n);
    CX_CHECK(sleeps > 100); /* the race was run: the reader did block, again and again */
    cx_link_close(a);
    cx_link_close(b);
    cx_shm_ops.listener_close(l);
}

/* accept_start: a peer that connects and never sends its hello holds no one: a real peer
 * connecting meanwhile is accepted (its hello is there already) and carries a message while
 * the silent one is still pending; a bad hello is refused at once; the silent one fails
 * with -ETIMEDOUT at the deadline and its socket is closed. */
CX_TEST(shm_accept_start_serves_a_peer_while_a_silent_one_waits)
{
    enum { HS_MS = 3000 };
    char addr[96];
    snprintf(addr, sizeof addr, "shm://@cx-shm-test-hs-%d", (int)getpid());
    struct cx_listener *l;
    CX_CHECK_EQ_INT(cx_shm_ops.listen(addr, &l), 0);
    int silent = hp_connect(addr);
    CX_CHECK(silent >= 0);
    struct cx_link *ks = NULL, *kb = NULL, *kg = NULL, *b = NULL;
    double t0 = hp_now_ms();
    while (!ks && hp_now_ms() - t0 < 5000)
        cx_shm_ops.accept_start(l, HS_MS, &ks);
    CX_CHECK(ks != NULL);
    int memfd = memfd_create("cx-shm-test", MFD_CLOEXEC);
    CX_CHECK(memfd >= 0 && ftruncate(memfd, 4096) == 0);
    int liar = send_hello(addr + strlen("shm://"), 3 * 4096, memfd);
    CX_CHECK(liar >= 0);
    int rb = 1;
    while (rb == 1 && hp_now_ms() - t0 < 5000) {
        rb = cx_shm_ops.accept_start(l, HS_MS, &kb);
        rb = rb == -EAGAIN ? 1 : rb;
    }
    CX_CHECK_EQ_INT(rb, -EPROTO);
    CX_CHECK_EQ_INT(cx_shm_ops.connect(addr, &b), 0);
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .channel = 1, .seq = 41};
    struct iovec v = {"x", 1};
    CX_CHECK_EQ_INT(cx_link_send(b, &h, &v, 1), 0);
    uint64_t got = 0;
    int rs = 0;
    while ((!kg || !got) && hp_now_ms() - t0 < HS_MS - 500) {
        if (!kg)
            cx_shm_ops.accept_start(l, HS_MS, &kg);
        if (kg)
            CX_CHECK(cx_link_progress(kg, on_one, &got, 8) >= 0);
        if (rs >= 0)
            rs = cx_link_progress(ks, on_one, &got, 8);
    }
    int still_pending = rs == 0;
    fprintf(stderr, "  a real peer served in %.0f ms beside a silent one (pending: %d)\n",
            hp_now_ms() - t0, still_pending);
    while (rs >= 0 && hp_now_ms() - t0 < HS_MS + 5000)
        rs = cx_link_progress(ks, on_one, &got, 8);
    CX_CHECK_EQ_INT((int)got, 42);
    CX_CHECK(still_pending);
    CX_CHECK_EQ_INT(rs, -ETIMEDOUT);
    CX_CHECK(strstr(cx_errmsg(), "handshake not done within") != NULL);
    cx_link_close(ks);
    CX_CHECK(hp_closed_by_server(silent, 2000));
    close(silent);
    close(liar);
    close(memfd);
    cx_link_close(kg);
    cx_link_close(b);
    cx_shm_ops.listener_close(l);
}

CX_TEST_MAIN()
