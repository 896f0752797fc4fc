/* The reliability filter over a real lossy network: the stack (udp -> rel -> frag) between
 * two network namespaces joined by a veth pair whose both ends run tc netem with 10 % loss,
 * 5 % duplication, 25 % reordering and 1 ms delay. A sender in namespace "b" sends 20 000
 * messages of varied sizes (many above the 1424-byte datagram payload of a 1500-byte MTU, so
 * they cross as fragments) to a receiver in namespace "a", which checks that every message
 * arrives exactly once, in order, with the right bytes. Retransmission counts are printed.
 * Needs root and iproute2 (skips with the reason otherwise). */
#include "stack/cx_frag.h"
#include "stack/cx_rel.h"
#include "stack/cx_stack.h"
#include "testutil/cx_netns.h"
#include "transport/conformance.h"
#include "transport/udp/cx_udp.h"

#include <stdatomic.h>

#define NETEM "delay 1ms reorder 25% 50% loss 10% duplicate 5% limit 10000"
enum { N = 20000 };

/* Message i: its index (u64), then a pattern of it; sizes vary from 8 bytes to 30 KB. */
static size_t msg_size(uint64_t i) { return i % 97 == 0 ? 30000 : 8 + (i * 7919) % 3000; }
static uint8_t msg_byte(uint64_t i, size_t k) { return (uint8_t)(i * 13 + k); }

struct rx {
    uint64_t next, bytes, dup_or_gap;
    int bad;
};
static void on_msg(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    (void)h;
    struct rx *r = arg;
    uint64_t i;
    if (n < 8) {
        r->bad = 1;
        return;
    }
    memcpy(&i, p, 8);
    if (i != r->next) { /* a duplicate (i < next) or a gap (i > next): never allowed */
        if (!r->dup_or_gap++)
            fprintf(stderr, "  got message %llu, expected %llu\n", (unsigned long long)i,
                    (unsigned long long)r->next);
        r->next = i;
    }
    if (n != msg_size(i))
        r->bad = 2;
    const uint8_t *b = p;
    for (size_t k = 8; k < n && !r->bad; k += 13)
        if (b[k] != msg_byte(i, k))
            r->bad = 3;
    r->next++;
    r->bytes += n;
}
static void ignore(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    (void)h, (void)p, (void)n;
    ++*(uint64_t *)arg; /* the receiver sends nothing back but acks (consumed by rel) */
}

struct shared {
    struct cx_netns_pair *pair;
    char addr[96];
    atomic_int addr_ready, sender_done, receiver_done;
    /* receiver's results */
    int rc;
    char err[256];
    struct rx rx;
    struct cx_rel_stats rel;
    struct cx_udp_stats udp;
    size_t max_msg;
};

static void set_err(struct shared *s, int rc)
{
    s->rc = rc;
    snprintf(s->err, sizeof s->err, "%s", cx_errmsg());
}

/* Receiver: listens in namespace a (the accepted socket is made there too). */
static void *receiver(void *arg)
{
    struct shared *s = arg;
    int saved = cx_netns_enter(s->pair->ns[0]);
    if (saved < 0) {
        set_err(s, saved);
        atomic_store(&s->addr_ready, -1);
        return NULL;
    }
    char listen_at[64];
    snprintf(listen_at, sizeof listen_at, "udp://%s:0", s->pair->ip[0]);
    struct cx_listener *l;
    int rc = cx_udp_ops.listen(listen_at, &l);
    if (rc < 0) {
        set_err(s, rc);
        atomic_store(&s->addr_ready, -1);
        cx_netns_leave(saved);
        return NULL;
    }
    snprintf(s->addr, sizeof s->addr, "%s", cx_udp_ops.listener_addr(l));
    atomic_store(&s->addr_ready, 1);
    struct cx_link *u = NULL, *rel = NULL, *top = NULL;
    rc = cx_udp_ops.accept(l, 10000, &u);
    cx_udp_ops.listener_close(l);
    cx_netns_leave(saved);
    if (rc < 0) {
        set_err(s, rc);
        return NULL;
    }
    struct cx_driver_caps c;
    cx_link_caps(u, &c);
    s->max_msg = c.max_msg;
    /* the builder's wrapping: rel under a datagram link, frag over its small max_msg; built
     * in two steps so the test can read rel's counters */
    if ((rc = cx_rel_create(u, 0, &rel)) < 0 || (rc = cx_stack_assemble(&rel, 1, &top)) < 0) {
        set_err(s, rc);
        cx_link_close(rel ? rel : u);
        return NULL;
    }
    double t0 = cx_conf_now();
    while (!atomic_load(&s->sender_done) && cx_conf_now() - t0 < 65) {
        rc = cx_link_progress(top, on_msg, &s->rx, 64);
        if (rc < 0) {
            set_err(s, rc);
            break;
        }
        if (s->rx.next >= N)
            atomic_store(&s->receiver_done, 1);
        if (rc == 0)
            usleep(50);
    }
    cx_rel_stats(rel, &s->rel);
    cx_udp_stats(u, &s->udp);
    cx_link_close(top);
    return NULL;
}

CX_TEST(udp_rel_frag_across_netem_veth)
{
    const char *why = cx_netns_unavailable();
    if (why)
        CX_SKIP("%s", why);
    struct cx_netns_pair pair;
    int rc = cx_netns_pair_create("cxudp", &pair);
    if (rc < 0)
        CX_SKIP("cannot make network namespaces here: %s", cx_errmsg());
    rc = cx_netns_impair(&pair, -1, NETEM);
    if (rc < 0) {
        cx_netns_pair_destroy(&pair);
        CX_SKIP("tc netem is not available: %s", cx_errmsg());
    }
    fprintf(stderr, "  %s (%s) <-> %s (%s), on both ends: %s\n  impairment by %s\n", pair.ns[0],
            pair.ip[0], pair.ns[1], pair.ip[1], NETEM, pair.impair_method);
    static struct shared s;
    memset(&s, 0, sizeof s);
    s.pair = &pair;
    pthread_t th;
    pthread_create(&th, NULL, receiver, &s);
    while (!atomic_load(&s.addr_ready)) usleep(1000);

    /* sender: connects from namespace b */
    struct cx_link *u = NULL, *rel = NULL, *top = NULL;
    rc = s.addr_ready > 0 ? cx_netns_enter(pair.ns[1]) : -1;
    if (rc >= 0) {
        int saved = rc;
        rc = cx_udp_ops.connect(s.addr, &u);
        cx_netns_leave(saved);
    }
    if (rc >= 0 && ((rc = cx_rel_create(u, 0, &rel)) < 0 || (rc = cx_stack_assemble(&rel, 1, &top)) < 0))
        cx_link_close(rel ? rel : u), u = rel = NULL;
    char err[256];
    snprintf(err, sizeof err, "%s", cx_errmsg());
    uint64_t sent = 0, back = 0;
    double t0 = cx_conf_now(), t_all = 0;
    static uint8_t buf[30000];
    while (rc >= 0 && top && cx_conf_now() - t0 < 60) {
        while (sent < N && cx_link_pending(top) < (1u << 20)) {
            size_t n = msg_size(sent);
            memcpy(buf, &sent, 8);
            for (size_t k = 8; k < n; k++) buf[k] = msg_byte(sent, k);
            struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .channel = 1};
            struct iovec v = {buf, n};
            if ((rc = cx_link_send(top, &h, &v, 1)) < 0)
                break;
            sent++;
        }
        if (rc < 0)
            break;
        if ((rc = cx_link_progress(top, ignore, &back, 64)) < 0)
            break;
        if (atomic_load(&s.receiver_done) && !t_all)
            t_all = cx_conf_now() - t0;
        if (t_all && cx_rel_unacked(rel) == 0)
            break; /* everything delivered and acknowledged */
        if (rc == 0)
            usleep(50);
    }
    if (rc < 0)
        snprintf(err, sizeof err, "%s", cx_errmsg());
    struct cx_rel_stats st = {0};
    struct cx_udp_stats ust = {0};
    size_t unacked = rel ? cx_rel_unacked(rel) : 0;
    if (rel) {
        cx_rel_stats(rel, &st);
        cx_udp_stats(u, &ust);
    }
    atomic_store(&s.sender_done, 1);
    pthread_join(th, NULL);
    if (top)
        cx_link_close(top);
    unsigned long long dq[2][3];
    cx_netns_impair_counts(&pair, 0, dq[0]);
    cx_netns_impair_counts(&pair, 1, dq[1]);
    cx_netns_pair_destroy(&pair);
    if (dq[1][0])
        fprintf(stderr, "  delay stage b->a: %llu packets, %llu let through at once (overtaking), "
                "%llu delayed; a->b: %llu, %llu, %llu\n", dq[1][0], dq[1][1], dq[1][2], dq[0][0],
                dq[0][1], dq[0][2]);

    if (rc < 0)
        fprintf(stderr, "  sender: %d (%s)\n", rc, err);
    if (s.rc < 0)
        fprintf(stderr, "  receiver: %d (%s)\n", s.rc, s.err);
    CX_CHECK(rc >= 0 && s.rc >= 0);
    fprintf(stderr, "  %llu messages (%.1f MB) delivered in %.2f s; datagram payload %zu bytes\n",
            (unsigned long long)s.rx.next, s.rx.bytes / 1e6, t_all, s.max_msg);
    fprintf(stderr, "  sender rel: %llu frames sent, %llu retransmitted (%.1f %%); udp: %llu datagrams, "
            "%llu queued\n", (unsigned long long)st.sent, (unsigned long long)st.retransmitted,
            st.sent ? 100.0 * (double)st.retransmitted / (double)st.sent : 0.0,
            (unsigned long long)ust.sent, (unsigned long long)ust.queued);
    fprintf(stderr, "  receiver rel: %llu delivered, %llu duplicates dropped, %llu out of order, "
            "%llu acks sent; udp: %llu datagrams received\n", (unsigned long long)s.rel.delivered,
            (unsigned long long)s.rel.duplicates, (unsigned long long)s.rel.out_of_order,
            (unsigned long long)s.rel.acks_sent, (unsigned long long)s.udp.received);
    CX_CHECK_EQ_INT(s.max_msg, 1500 - 20 - 8 - CX_FRAME_HDR_SIZE); /* sized to the veth MTU */
    CX_CHECK_EQ_INT(s.rx.bad, 0);
    CX_CHECK_EQ_INT(s.rx.dup_or_gap, 0); /* exactly once, in order */
    CX_CHECK_EQ_INT(s.rx.next, N);
    CX_CHECK_EQ_INT(unacked, 0);
    CX_CHECK_EQ_INT(back, 0);
    /* the network really was hostile: frames were lost, duplicated and reordered */
    CX_CHECK(st.retransmitted > 0);
    CX_CHECK(s.rel.duplicates > 0);
    CX_CHECK(s.rel.out_of_order > 0);
}

CX_TEST_MAIN()
