/* netem's loss / duplicate / delay / reorder without netem; see cx_netns_emu.h. The delay
 * stage speaks nfnetlink_queue directly (the protocol of linux/netfilter/nfnetlink_queue.h):
 * bind queue 0 with metadata-only copies, read packet ids, send verdicts. */
#define _GNU_SOURCE
#include "testutil/cx_netns_emu.h"

#include "common/cx_error.h"
#include "testutil/cx_netns.h"

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define QUEUE_NUM 0
#define VERDICT_BATCH 256

struct cx_netns_emu {
    pthread_t th;
    int nl;
    atomic_int stop;
    struct cx_netns_emu_params p;
    uint32_t *ids; /* held packets, FIFO: every one waits the same delay */
    uint64_t *due;
    unsigned cap, head, n;
    uint64_t rng;
    atomic_ullong seen, early, late;
    uint8_t vbuf[VERDICT_BATCH * 32];
    size_t vlen;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double rnd01(struct cx_netns_emu *e)
{
    e->rng ^= e->rng << 13, e->rng ^= e->rng >> 7, e->rng ^= e->rng << 17; /* xorshift64 */
    return (double)(e->rng >> 11) / (double)(1ull << 53);
}

int cx_netns_emu_parse(const char *netem, struct cx_netns_emu_params *out)
{
    memset(out, 0, sizeof *out);
    out->limit = 1000; /* netem's default */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", netem ? netem : "");
    char *save, *key = strtok_r(buf, " \t", &save);
    while (key) {
        char *val = strtok_r(NULL, " \t", &save), *end = NULL;
        if (!val)
            return cx_err_set(EINVAL, "netns: '%s' needs a value", key);
        double v = strtod(val, &end);
        if (end == val)
            return cx_err_set(EINVAL, "netns: bad value '%s' for '%s'", val, key);
        if (!strcmp(key, "loss") || !strcmp(key, "duplicate") || !strcmp(key, "reorder")) {
            if (strcmp(end, "%") != 0 || v < 0 || v > 100)
                return cx_err_set(EINVAL, "netns: %s wants a percentage, got '%s'", key, val);
            *(key[0] == 'l' ? &out->loss : key[0] == 'd' ? &out->duplicate : &out->reorder) = v / 100;
        } else if (!strcmp(key, "delay")) {
            if (!strcmp(end, "ms")) out->delay_us = (long)(v * 1000);
            else if (!strcmp(end, "us")) out->delay_us = (long)v;
            else if (!strcmp(end, "s")) out->delay_us = (long)(v * 1e6);
            else return cx_err_set(EINVAL, "netns: delay '%s' wants a unit (s, ms, us)", val);
        } else if (!strcmp(key, "limit")) {
            if (*end || v < 1)
                return cx_err_set(EINVAL, "netns: bad limit '%s'", val);
            out->limit = (unsigned)v;
        } else {
            return cx_err_set(EINVAL, "netns: '%s' is not emulated without netem (loss, duplicate, "
                              "delay, reorder, limit are)", key);
        }
        /* skip an optional correlation percentage ("reorder 25% 50%") */
        key = strtok_r(NULL, " \t", &save);
        while (key && (key[0] >= '0' && key[0] <= '9'))
            key = strtok_r(NULL, " \t", &save);
    }
    return 0;
}

/* One nfqueue config message with up to two attributes; waits for its ack. */
static int nl_config(int fd, int t1, const void *d1, size_t l1, int t2, const void *d2, size_t l2)
{
    uint8_t m[256] = {0};
    struct nlmsghdr *nh = (struct nlmsghdr *)m;
    struct nfgenmsg *g = (struct nfgenmsg *)NLMSG_DATA(nh);
    nh->nlmsg_type = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_CONFIG;
    nh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    nh->nlmsg_seq = 1;
    g->nfgen_family = AF_UNSPEC;
    g->version = NFNETLINK_V0;
    g->res_id = htons(QUEUE_NUM);
    size_t off = NLMSG_LENGTH(sizeof *g);
    const void *d[2] = {d1, d2};
    size_t l[2] = {l1, l2};
    int t[2] = {t1, t2};
    for (int i = 0; i < 2 && d[i]; i++) {
        struct nlattr *a = (struct nlattr *)(m + off);
        a->nla_type = (uint16_t)t[i];
        a->nla_len = (uint16_t)(NLA_HDRLEN + l[i]);
        memcpy(m + off + NLA_HDRLEN, d[i], l[i]);
        off += NLA_ALIGN(a->nla_len);
    }
    nh->nlmsg_len = (uint32_t)off;
    struct sockaddr_nl k = {.nl_family = AF_NETLINK};
    if (sendto(fd, m, off, 0, (struct sockaddr *)&k, sizeof k) < 0)
        return cx_err_set(errno, "netns: nfqueue config: %s", strerror(errno));
    uint8_t r[1024];
    ssize_t n = recv(fd, r, sizeof r, 0);
    if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)))
        return cx_err_set(EPROTO, "netns: nfqueue config: no ack");
    struct nlmsgerr *err = NLMSG_DATA((struct nlmsghdr *)r);
    if (((struct nlmsghdr *)r)->nlmsg_type == NLMSG_ERROR && err->error)
        return cx_err_set(-err->error, "netns: nfqueue config refused: %s", strerror(-err->error));
    return 0;
}

static void verdict(struct cx_netns_emu *e, uint32_t id)
{
    struct {
        struct nlmsghdr nh;
        struct nfgenmsg g;
        struct nlattr a;
        struct nfqnl_msg_verdict_hdr v;
    } m = {
        .nh = {.nlmsg_len = sizeof m, .nlmsg_type = (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_VERDICT,
               .nlmsg_flags = NLM_F_REQUEST},
        .g = {.nfgen_family = AF_UNSPEC, .version = NFNETLINK_V0, .res_id = htons(QUEUE_NUM)},
        .a = {.nla_len = NLA_HDRLEN + sizeof(struct nfqnl_msg_verdict_hdr), .nla_type = NFQA_VERDICT_HDR},
        .v = {.verdict = htonl(NF_ACCEPT), .id = htonl(id)},
    };
    memcpy(e->vbuf + e->vlen, &m, sizeof m);
    e->vlen += sizeof m;
    if (e->vlen + sizeof m > sizeof e->vbuf) {
        struct sockaddr_nl k = {.nl_family = AF_NETLINK};
        sendto(e->nl, e->vbuf, e->vlen, 0, (struct sockaddr *)&k, sizeof k);
        e->vlen = 0;
    }
}

static void verdict_flush(struct cx_netns_emu *e)
{
    if (!e->vlen)
        return;
    struct sockaddr_nl k = {.nl_family = AF_NETLINK};
    sendto(e->nl, e->vbuf, e->vlen, 0, (struct sockaddr *)&k, sizeof k);
    e->vlen = 0;
}

static void on_packet(struct cx_netns_emu *e, struct nlmsghdr *nh, uint64_t t)
{
    struct nlattr *a = (struct nlattr *)((uint8_t *)NLMSG_DATA(nh) + sizeof(struct nfgenmsg));
    size_t left = nh->nlmsg_len - NLMSG_LENGTH(sizeof(struct nfgenmsg));
    while (left >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= left) {
        if ((a->nla_type & NLA_TYPE_MASK) == NFQA_PACKET_HDR) {
            struct nfqnl_msg_packet_hdr ph;
            memcpy(&ph, (uint8_t *)a + NLA_HDRLEN, sizeof ph);
            uint32_t id = ntohl(ph.packet_id);
            atomic_fetch_add(&e->seen, 1);
            if (e->n == e->cap || rnd01(e) < e->p.reorder) { /* overtakes the held ones */
                atomic_fetch_add(&e->early, 1);
                verdict(e, id);
            } else {
                unsigned i = (e->head + e->n++) % e->cap;
                e->ids[i] = id;
                e->due[i] = t + (uint64_t)e->p.delay_us * 1000;
            }
            return;
        }
        size_t step = NLA_ALIGN(a->nla_len);
        if (step >= left)
            break;
        left -= step;
        a = (struct nlattr *)((uint8_t *)a + step);
    }
}

static void *run(void *arg)
{
    struct cx_netns_emu *e = arg;
    static __thread uint8_t buf[1 << 16];
    while (!atomic_load(&e->stop)) {
        uint64_t t = now_ns();
        struct timespec to = {0, 10000000}; /* look at the stop flag every 10 ms */
        if (e->n) {
            uint64_t d = e->due[e->head] > t ? e->due[e->head] - t : 0;
            if (d < 10000000)
                to.tv_nsec = (long)d;
        }
        struct pollfd p = {.fd = e->nl, .events = POLLIN};
        ppoll(&p, 1, &to, NULL);
        ssize_t n;
        t = now_ns();
        while ((n = recv(e->nl, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
            for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, (size_t)n); nh = NLMSG_NEXT(nh, n))
                if (nh->nlmsg_type == ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET))
                    on_packet(e, nh, t);
        }
        t = now_ns();
        while (e->n && e->due[e->head] <= t) {
            verdict(e, e->ids[e->head]);
            e->head = (e->head + 1) % e->cap;
            e->n--;
            atomic_fetch_add(&e->late, 1);
        }
        verdict_flush(e);
    }
    while (e->n) { /* let go of everything still held */
        verdict(e, e->ids[e->head]);
        e->head = (e->head + 1) % e->cap;
        e->n--;
    }
    verdict_flush(e);
    return NULL;
}

static int ipt(const char *ns, const char *rule)
{
    char buf[512], out[512];
    snprintf(buf, sizeof buf, "ip netns exec %s iptables -w %s", ns, rule);
    char *words[64];
    int n = 0;
    for (char *save, *w = strtok_r(buf, " ", &save); w && n < 63; w = strtok_r(NULL, " ", &save))
        words[n++] = w;
    words[n] = NULL;
    int rc = cx_netns_run(words, out, sizeof out);
    if (rc == 0)
        return 0;
    out[strcspn(out, "\n")] = 0;
    return rc < 0 ? rc : cx_err_set(EIO, "netns: iptables %s (in %s) failed: %s", rule, ns, out);
}

int cx_netns_emu_start(const char *ns, const char *dev, const char *peer_ns, const char *peer_dev,
                       const char *peer_ip, const struct cx_netns_emu_params *prm,
                       struct cx_netns_emu **out)
{
    char rule[256];
    int rc;
    *out = NULL;
    if (prm->loss > 0) {
        snprintf(rule, sizeof rule, "-t raw -A PREROUTING -i %s -m statistic --mode random "
                 "--probability %.4f -j DROP", peer_dev, prm->loss);
        if ((rc = ipt(peer_ns, rule)) < 0)
            return rc;
    }
    if (prm->duplicate > 0) {
        snprintf(rule, sizeof rule, "-t mangle -A POSTROUTING -o %s -m statistic --mode random "
                 "--probability %.4f -j TEE --gateway %s", dev, prm->duplicate, peer_ip);
        if ((rc = ipt(ns, rule)) < 0)
            return rc;
    }
    if (prm->delay_us <= 0)
        return 0;
    struct cx_netns_emu *e = calloc(1, sizeof *e);
    if (!e)
        return cx_err_set(ENOMEM, "netns: out of memory");
    e->p = *prm;
    e->cap = prm->limit;
    e->ids = calloc(e->cap, sizeof *e->ids);
    e->due = calloc(e->cap, sizeof *e->due);
    e->rng = now_ns() | 1;
    int saved = cx_netns_enter(ns); /* the netlink socket belongs to the namespace it is made in */
    if (saved < 0) {
        free(e->ids), free(e->due), free(e);
        return saved;
    }
    e->nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
    cx_netns_leave(saved);
    if (e->nl < 0 || !e->ids || !e->due) {
        rc = cx_err_set(e->nl < 0 ? errno : ENOMEM, "netns: nfnetlink socket: %s", strerror(errno));
        goto fail;
    }
    int big = 16 << 20;
    if (setsockopt(e->nl, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big) < 0)
        setsockopt(e->nl, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    struct sockaddr_nl me = {.nl_family = AF_NETLINK};
    if (bind(e->nl, (struct sockaddr *)&me, sizeof me) < 0) {
        rc = cx_err_set(errno, "netns: bind nfnetlink: %s", strerror(errno));
        goto fail;
    }
    struct nfqnl_msg_config_cmd cmd = {.command = NFQNL_CFG_CMD_BIND};
    struct nfqnl_msg_config_params par = {.copy_range = 0, .copy_mode = NFQNL_COPY_META};
    uint32_t maxlen = htonl(prm->limit);
    uint32_t flags = htonl(NFQA_CFG_F_FAIL_OPEN), mask = htonl(NFQA_CFG_F_FAIL_OPEN);
    if ((rc = nl_config(e->nl, NFQA_CFG_CMD, &cmd, sizeof cmd, 0, NULL, 0)) < 0 ||
        (rc = nl_config(e->nl, NFQA_CFG_PARAMS, &par, sizeof par, NFQA_CFG_QUEUE_MAXLEN, &maxlen, 4)) < 0 ||
        (rc = nl_config(e->nl, NFQA_CFG_FLAGS, &flags, 4, NFQA_CFG_MASK, &mask, 4)) < 0)
        goto fail;
    if (pthread_create(&e->th, NULL, run, e) != 0) {
        rc = cx_err_set(EAGAIN, "netns: cannot start the delay thread");
        goto fail;
    }
    snprintf(rule, sizeof rule, "-t mangle -A POSTROUTING -o %s -j NFQUEUE --queue-num %d "
             "--queue-bypass", dev, QUEUE_NUM);
    if ((rc = ipt(ns, rule)) < 0) {
        cx_netns_emu_stop(e);
        return rc;
    }
    *out = e;
    return 0;
fail:
    if (e->nl >= 0)
        close(e->nl);
    free(e->ids), free(e->due), free(e);
    return rc;
}

void cx_netns_emu_stop(struct cx_netns_emu *e)
{
    if (!e)
        return;
    atomic_store(&e->stop, 1);
    pthread_join(e->th, NULL);
    close(e->nl);
    free(e->ids), free(e->due), free(e);
}

void cx_netns_emu_counts(const struct cx_netns_emu *e, unsigned long long out[3])
{
    out[0] = atomic_load(&e->seen);
    out[1] = atomic_load(&e->early);
    out[2] = atomic_load(&e->late);
}
