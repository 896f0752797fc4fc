/* The shm driver through the conformance suite, plus ring unit tests. */
#include "transport/conformance.h"
#include "transport/shm/cx_spsc_ring.h"

static void mkaddr(char *buf, size_t cap)
{
    static int n;
    snprintf(buf, cap, "shm:///tmp/cx-shm-test-%d-%d.sock", (int)getpid(), n++);
}

CX_DECLARE_TRANSPORT_TESTS(shm, &cx_shm_ops, mkaddr, NULL)

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
    struct cx_ring_ctl *ctl = (void *)mem;
    struct cx_spsc_ring p, c;
    cx_spsc_ring_init(ctl, 8192);
    CX_CHECK_EQ_INT(cx_spsc_ring_attach(&p, ctl, mem + CX_RING_CTL_SIZE, 8192), 0);
    CX_CHECK_EQ_INT(cx_spsc_ring_attach(&c, ctl, mem + CX_RING_CTL_SIZE, 8192), 0);
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

CX_TEST_MAIN()
