/* The pi-channels paper's Table 3: lookups served per second by one space server
 * (confluxd --role=space) with 2..32 concurrent clients, each looking up existing names
 * picked at random among `names` pre-bound names.
 *
 *   lookup_bench seed DIR N            writes DIR/names binding N names (name i -> pipe i+1)
 *   lookup_bench run --proto udp|tcp --mode lib|win --addr A --names N --clients C
 *                    [--window W] [--seconds S]
 *
 * Modes, per client thread:
 *   udp lib   cx_space_udp_lookup per lookup (the paper's one blocking request/reply)
 *   tcp lib   cx_space_lookup on the thread's own connection (one at a time)
 *   udp win   W requests in flight on one socket, batched with sendmmsg/recvmmsg,
 *             retransmitted after 20 ms of silence (W = 1: one at a time on a kept socket);
 *             --per-datagram K packs up to K requests per datagram (the server answers
 *             every frame of a datagram, packing the replies the same way)
 *   tcp win   W LOOKUP frames in flight on one raw link (cx_connect), a new one sent
 *             from each reply
 * Every reply is checked (status 0, the pipe id of the name asked); a wrong one counts as
 * an error and makes the run fail. Prints one JSON line.
 */
#define _GNU_SOURCE /* sendmmsg, recvmmsg */
#include "common/cx_error.h"
#include "common/cx_frame.h"
#include "common/cx_crc32c.h"
#include "space/cx_nametable.h"
#include "space/cx_space_client.h"
#include "space/cx_space_proto.h"
#include "transport/cx_addr.h"
#include "transport/cx_driver.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 256
#define MAX_WINDOW 1024
#define BATCH 64
#define RETX_MS 20.0
#define NAME_CAP 32

/* ---- names: reproducible "random" names, so clients regenerate what seed bound ------ */

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Name i: 12 random hex digits, then i (unique). A run formats them all once before its
 * clients start (g_names), so the load generator spends its time on lookups. */
static char (*g_names)[NAME_CAP];
static uint32_t g_nnames;

static void name_of(uint32_t i, char out[NAME_CAP])
{
    if (g_names && i < g_nnames) {
        memcpy(out, g_names[i], NAME_CAP);
        return;
    }
    snprintf(out, NAME_CAP, "%012" PRIx64 ".%u", (uint64_t)(mix64(i) & 0xffffffffffffull), i);
}

static int names_precompute(uint32_t n)
{
    char (*t)[NAME_CAP] = malloc((size_t)n * NAME_CAP);
    if (!t)
        return cx_err_set(ENOMEM, "names");
    for (uint32_t i = 0; i < n; i++)
        name_of(i, t[i]);
    g_names = t;
    g_nnames = n;
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Writes the name table file in its documented format (dataplane/src/space/README.md:
 * "cxnames 1", "next N", one "name pipe_id format" line each, a CRC-32C trailer), then opens
 * it with the server's own loader to prove it is valid. Binding N names one by one through
 * the server rewrites and fsyncs the whole table per name (O(N^2)), far too slow for 25 366. */
static int seed(const char *dir, uint32_t n)
{
    size_t cap = 64 + (size_t)n * (NAME_CAP + 24);
    char *buf = malloc(cap);
    if (!buf)
        return cx_err_set(ENOMEM, "names buffer");
    size_t len = (size_t)snprintf(buf, cap, "cxnames 1\nnext %u\n", n + 1);
    for (uint32_t i = 0; i < n; i++) {
        char name[NAME_CAP];
        name_of(i, name);
        len += (size_t)snprintf(buf + len, cap - len, "%s %u 0\n", name, i + 1);
    }
    len += (size_t)snprintf(buf + len, cap - len, "crc %08" PRIx32 "\n", cx_crc32c(0, buf, len));
    mkdir(dir, 0755);
    char path[512];
    snprintf(path, sizeof path, "%s/names", dir);
    FILE *f = fopen(path, "w");
    int rc = 0;
    if (!f || fwrite(buf, 1, len, f) != len)
        rc = cx_err_set(errno ? errno : EIO, "write %s: %s", path, strerror(errno));
    if (f && fclose(f) != 0 && rc == 0)
        rc = cx_err_set(errno, "close %s: %s", path, strerror(errno));
    free(buf);
    if (rc < 0)
        return rc;
    struct cx_nametable *t;
    if ((rc = cx_nametable_open(dir, &t)) < 0)
        return rc;
    for (uint32_t i = 0; i < n && rc == 0; i += n / 16 + 1) {
        char name[NAME_CAP];
        struct cx_name_entry e;
        name_of(i, name);
        if ((rc = cx_nametable_lookup(t, name, &e)) == 0 && e.pipe_id != i + 1)
            rc = cx_err_set(EBADMSG, "seeded name %s reads back as pipe %" PRIu64, name, e.pipe_id);
    }
    cx_nametable_close(t);
    return rc;
}

/* ---- the run ---------------------------------------------------------------------- */

struct run {
    char proto[8], mode[8], addr[160], hostport[160];
    uint32_t names;
    int clients, window, per_dgram;
    double seconds;
    volatile int go;
    double start, end;
};

struct client {
    struct run *r;
    int id;
    uint64_t rng;
    uint64_t done, errors, retx;
    char err[256];
    pthread_t th;
};

static uint32_t pick(struct client *c)
{
    c->rng = mix64(c->rng);
    return (uint32_t)(c->rng % c->r->names);
}

static void client_error(struct client *c, const char *what)
{
    if (!c->errors++)
        snprintf(c->err, sizeof c->err, "%s", what);
}

static void wait_go(struct run *r)
{
    while (!__atomic_load_n(&r->go, __ATOMIC_ACQUIRE))
        usleep(100);
}

/* Encodes a LOOKUP of name i with seq into out; returns its length. */
static size_t encode_lookup(uint32_t i, uint64_t seq, uint8_t *out, size_t cap)
{
    char name[NAME_CAP];
    name_of(i, name);
    struct cx_sp_buf b = {.p = out + CX_FRAME_HDR_SIZE, .cap = cap - CX_FRAME_HDR_SIZE, .fixed = 1};
    struct cx_sp_request q = {.op = CX_SP_LOOKUP, .name = {name, (uint16_t)strlen(name)}};
    if (cx_sp_encode_request(&b, &q) < 0)
        return 0;
    struct cx_frame_hdr h = {.type = CX_FRAME_LOOKUP, .seq = seq, .length = (uint32_t)b.len,
                             .msg_length = (uint32_t)b.len};
    cx_frame_encode(&h, out);
    return CX_FRAME_HDR_SIZE + b.len;
}

/* Checks a reply payload answers the lookup of name i. */
static void check_reply(struct client *c, const void *p, size_t len, uint32_t i)
{
    struct cx_sp_reply rep;
    if (cx_sp_decode_reply(p, len, &rep) < 0)
        client_error(c, cx_errmsg());
    else if (rep.status < 0)
        client_error(c, "lookup failed on the server");
    else if (rep.pipe.pipe_id != (uint64_t)i + 1)
        client_error(c, "lookup answered with the wrong pipe id");
    else
        c->done++;
}

static void *client_udp_lib(void *arg)
{
    struct client *c = arg;
    struct run *r = c->r;
    wait_go(r);
    while (now_s() < r->end) {
        uint32_t i = pick(c);
        char name[NAME_CAP];
        struct cx_space_pipe_info info;
        name_of(i, name);
        if (cx_space_udp_lookup(r->hostport, name, 200, 20, &info) < 0)
            client_error(c, cx_errmsg());
        else if (info.pipe_id != (uint64_t)i + 1)
            client_error(c, "lookup answered with the wrong pipe id");
        else
            c->done++;
    }
    return NULL;
}

static void *client_tcp_lib(void *arg)
{
    struct client *c = arg;
    struct run *r = c->r;
    struct cx_space_client *sc;
    if (cx_space_connect(r->addr, &sc) < 0) {
        client_error(c, cx_errmsg());
        return NULL;
    }
    wait_go(r);
    while (now_s() < r->end) {
        uint32_t i = pick(c);
        char name[NAME_CAP];
        struct cx_space_pipe_info info;
        name_of(i, name);
        if (cx_space_lookup(sc, name, &info) < 0)
            client_error(c, cx_errmsg());
        else if (info.pipe_id != (uint64_t)i + 1)
            client_error(c, "lookup answered with the wrong pipe id");
        else
            c->done++;
    }
    cx_space_disconnect(sc);
    return NULL;
}

/* seq = client id (16 bits) | slot (16 bits) | generation (32 bits): a reply finds its
 * slot, and a late reply to a retransmitted request (old generation) is ignored. */
struct slot {
    uint32_t name, gen;
    double sent;
};

static uint64_t slot_seq(struct client *c, int s, uint32_t gen)
{
    return ((uint64_t)(c->id + 1) << 48) | ((uint64_t)s << 32) | gen;
}

/* A UDP client's outgoing datagrams, sent with one sendmmsg; each datagram packs up to
 * `per_dgram` LOOKUP frames back to back (1 = the paper's protocol) and stays under
 * DGRAM_BYTES. */
#define DGRAM_BYTES 1400
struct udp_out {
    int fd, n, per_dgram;
    int frames[BATCH];
    uint8_t buf[BATCH][DGRAM_BYTES + 256];
    struct iovec iov[BATCH];
    struct mmsghdr m[BATCH];
};

static void udp_flush(struct udp_out *o)
{
    for (int done = 0; done < o->n;) {
        int k = sendmmsg(o->fd, o->m + done, (unsigned)(o->n - done), 0);
        if (k <= 0)
            break; /* a full buffer: those requests are lost and retransmitted later */
        done += k;
    }
    o->n = 0;
}

/* Queues slot s's current request (its name and generation) into the open datagram. */
static void udp_queue(struct udp_out *o, struct client *c, struct slot *sl, int s)
{
    int d = o->n - 1;
    if (d < 0 || o->frames[d] == o->per_dgram || o->iov[d].iov_len > DGRAM_BYTES) {
        if (o->n == BATCH)
            udp_flush(o);
        d = o->n++;
        o->frames[d] = 0;
        o->iov[d] = (struct iovec){o->buf[d], 0};
        o->m[d] = (struct mmsghdr){.msg_hdr = {.msg_iov = &o->iov[d], .msg_iovlen = 1}};
    }
    size_t len = encode_lookup(sl[s].name, slot_seq(c, s, sl[s].gen), o->buf[d] + o->iov[d].iov_len,
                               sizeof o->buf[d] - o->iov[d].iov_len);
    o->iov[d].iov_len += len;
    o->frames[d]++;
    sl[s].sent = now_s();
}

static void *client_udp_win(void *arg)
{
    struct client *c = arg;
    struct run *r = c->r;
    int w = r->window;
    struct slot *sl = calloc((size_t)w, sizeof *sl);
    struct udp_out *o = calloc(1, sizeof *o);
    static __thread uint8_t in[BATCH][16384];
    struct iovec iov_in[BATCH];
    struct mmsghdr m_in[BATCH];
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (!sl || !o || fd < 0 || cx_addr_inet(r->hostport, &sa) < 0 ||
        connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        client_error(c, "UDP socket setup failed");
        goto out;
    }
    o->fd = fd;
    o->per_dgram = r->per_dgram;
    int big = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    wait_go(r);
    for (int s = 0; s < w; s++) {
        sl[s].name = pick(c);
        udp_queue(o, c, sl, s);
    }
    udp_flush(o);
    double last_scan = now_s();
    for (;;) {
        double t = now_s();
        if (t >= r->end)
            break;
        for (int i = 0; i < BATCH; i++) {
            iov_in[i] = (struct iovec){in[i], sizeof in[i]};
            m_in[i] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov_in[i], .msg_iovlen = 1}};
        }
        int n = recvmmsg(fd, m_in, BATCH, MSG_DONTWAIT, NULL);
        if (n <= 0) {
            struct pollfd pf = {.fd = fd, .events = POLLIN};
            poll(&pf, 1, 5);
        }
        for (int i = 0; i < n; i++) {
            /* one reply frame per request, back to back */
            for (size_t off = 0; m_in[i].msg_len - off >= CX_FRAME_HDR_SIZE;) {
                struct cx_frame_hdr h;
                const uint8_t *f = in[i] + off;
                if (cx_frame_decode(f, m_in[i].msg_len - off, &h) < 0 || !(h.flags & CX_FRAME_F_REPLY) ||
                    h.length > m_in[i].msg_len - off - CX_FRAME_HDR_SIZE)
                    break;
                off += CX_FRAME_HDR_SIZE + h.length;
                int s = (int)((h.seq >> 32) & 0xffff);
                if ((h.seq >> 48) != (uint64_t)(c->id + 1) || s >= w || (uint32_t)h.seq != sl[s].gen)
                    continue; /* a duplicate reply to a retransmitted request */
                check_reply(c, f + CX_FRAME_HDR_SIZE, h.length, sl[s].name);
                sl[s].name = pick(c);
                sl[s].gen++;
                udp_queue(o, c, sl, s);
            }
        }
        if (t - last_scan > RETX_MS / 1e3) { /* silence: the request or its reply was dropped */
            for (int s = 0; s < w; s++)
                if (t - sl[s].sent > RETX_MS / 1e3) {
                    c->retx++;
                    udp_queue(o, c, sl, s);
                }
            last_scan = t;
        }
        udp_flush(o);
    }
out:
    if (fd >= 0)
        close(fd);
    free(sl);
    free(o);
    return NULL;
}

struct tcp_win {
    struct client *c;
    struct cx_link *k;
    uint32_t *names; /* per slot */
    uint32_t *gen;
    int w;
};

static void tcp_send(struct tcp_win *t, int s)
{
    char name[NAME_CAP];
    uint8_t req[256];
    name_of(t->names[s], name);
    struct cx_sp_buf b = {.p = req, .cap = sizeof req, .fixed = 1};
    struct cx_sp_request q = {.op = CX_SP_LOOKUP, .name = {name, (uint16_t)strlen(name)}};
    cx_sp_encode_request(&b, &q);
    struct cx_frame_hdr h = {.type = CX_FRAME_LOOKUP, .seq = slot_seq(t->c, s, t->gen[s])};
    struct iovec iov = {req, b.len};
    if (cx_link_send(t->k, &h, &iov, 1) < 0)
        client_error(t->c, cx_errmsg());
}

static void on_tcp_reply(void *arg, const struct cx_frame_hdr *h, const void *p, size_t len)
{
    struct tcp_win *t = arg;
    int s = (int)((h->seq >> 32) & 0xffff);
    if (h->type != CX_FRAME_LOOKUP || !(h->flags & CX_FRAME_F_REPLY) || s >= t->w ||
        (uint32_t)h->seq != t->gen[s])
        return; /* a push, or not ours */
    check_reply(t->c, p, len, t->names[s]);
    if (now_s() >= t->c->r->end)
        return;
    t->names[s] = pick(t->c);
    t->gen[s]++;
    tcp_send(t, s);
}

static void *client_tcp_win(void *arg)
{
    struct client *c = arg;
    struct run *r = c->r;
    struct tcp_win t = {.c = c, .w = r->window};
    t.names = calloc((size_t)t.w, sizeof *t.names);
    t.gen = calloc((size_t)t.w, sizeof *t.gen);
    if (!t.names || !t.gen || cx_connect(r->addr, &t.k) < 0) {
        client_error(c, cx_errmsg());
        goto out;
    }
    /* a first frame now: the space closes connections silent past its first-frame
     * deadline, and the other clients may take a while to connect */
    struct cx_frame_hdr hello = {.type = CX_FRAME_CTRL};
    if (cx_link_send(t.k, &hello, NULL, 0) < 0) {
        client_error(c, cx_errmsg());
        goto out;
    }
    wait_go(r);
    for (int s = 0; s < t.w; s++) {
        t.names[s] = pick(c);
        tcp_send(&t, s);
    }
    while (now_s() < r->end && !c->errors) {
        int n = cx_link_progress(t.k, on_tcp_reply, &t, 256);
        if (n < 0) {
            client_error(c, cx_errmsg());
            break;
        }
        if (n == 0) {
            struct pollfd pf = {.fd = cx_link_fd(t.k), .events = POLLIN};
            poll(&pf, 1, 5);
        }
    }
out:
    if (t.k)
        cx_link_close(t.k);
    free(t.names);
    free(t.gen);
    return NULL;
}

static int usage(void)
{
    fprintf(stderr, "usage: lookup_bench seed DIR N\n"
                    "       lookup_bench run --proto udp|tcp --mode lib|win --addr tcp://H:P "
                    "[--udp H:P] --names N --clients C [--window W] [--seconds S]\n"
                    "                    [--per-datagram K]   (udp win: K lookups packed per datagram)\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "seed") == 0) {
        long n = strtol(argv[3], NULL, 10);
        if (n < 1 || n > CX_NAMETABLE_MAX) {
            fprintf(stderr, "lookup_bench: N must be 1..%d\n", CX_NAMETABLE_MAX);
            return 2;
        }
        if (seed(argv[2], (uint32_t)n) < 0) {
            fprintf(stderr, "lookup_bench seed: %s\n", cx_errmsg());
            return 1;
        }
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "run") != 0)
        return usage();
    static struct run r = {.window = 1, .per_dgram = 1, .seconds = 2};
    static const struct option lo[] = {
        {"proto", required_argument, 0, 'p'},   {"mode", required_argument, 0, 'm'},
        {"addr", required_argument, 0, 'a'},    {"udp", required_argument, 0, 'u'},
        {"names", required_argument, 0, 'n'},   {"clients", required_argument, 0, 'c'},
        {"window", required_argument, 0, 'w'},  {"seconds", required_argument, 0, 's'},
        {"per-datagram", required_argument, 0, 'd'}, {0, 0, 0, 0}};
    int o;
    optind = 2;
    while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (o) {
        case 'p': snprintf(r.proto, sizeof r.proto, "%s", optarg); break;
        case 'm': snprintf(r.mode, sizeof r.mode, "%s", optarg); break;
        case 'a': snprintf(r.addr, sizeof r.addr, "%s", optarg); break;
        case 'u': snprintf(r.hostport, sizeof r.hostport, "%s", optarg); break;
        case 'n': r.names = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'c': r.clients = atoi(optarg); break;
        case 'w': r.window = atoi(optarg); break;
        case 's': r.seconds = atof(optarg); break;
        case 'd': r.per_dgram = atoi(optarg); break;
        default: return usage();
        }
    }
    int udp = strcmp(r.proto, "udp") == 0, win = strcmp(r.mode, "win") == 0;
    if ((!udp && strcmp(r.proto, "tcp") != 0) || (!win && strcmp(r.mode, "lib") != 0) || !r.addr[0] ||
        r.names < 1 || r.clients < 1 || r.clients > MAX_CLIENTS || r.window < 1 ||
        r.window > MAX_WINDOW || r.seconds <= 0 || r.per_dgram < 1 || r.per_dgram > 64 ||
        (r.per_dgram > 1 && !(udp && win)))
        return usage();
    if (!r.hostport[0]) { /* the UDP service listens on the TCP host and port by default */
        const char *hp = strstr(r.addr, "://");
        snprintf(r.hostport, sizeof r.hostport, "%s", hp ? hp + 3 : r.addr);
    }
    void *(*fn)(void *) = udp ? (win ? client_udp_win : client_udp_lib) : (win ? client_tcp_win : client_tcp_lib);
    static struct client cl[MAX_CLIENTS];
    if (names_precompute(r.names) < 0) {
        fprintf(stderr, "lookup_bench: %s\n", cx_errmsg());
        return 1;
    }
    for (int i = 0; i < r.clients; i++) {
        cl[i] = (struct client){.r = &r, .id = i, .rng = mix64((uint64_t)i * 7919 + 1)};
        if (pthread_create(&cl[i].th, NULL, fn, &cl[i]) != 0) {
            fprintf(stderr, "lookup_bench: cannot start client thread %d\n", i);
            return 1;
        }
    }
    usleep(200000); /* connections made */
    r.start = now_s();
    r.end = r.start + r.seconds;
    __atomic_store_n(&r.go, 1, __ATOMIC_RELEASE);
    uint64_t done = 0, errors = 0, retx = 0;
    const char *err = NULL;
    for (int i = 0; i < r.clients; i++) {
        pthread_join(cl[i].th, NULL);
        done += cl[i].done;
        errors += cl[i].errors;
        retx += cl[i].retx;
        if (cl[i].errors && !err)
            err = cl[i].err;
    }
    double el = now_s() - r.start;
    printf("{\"proto\":\"%s\",\"mode\":\"%s\",\"clients\":%d,\"window\":%d,\"per_datagram\":%d,\"names\":%u,"
           "\"lookups\":%" PRIu64 ",\"seconds\":%.3f,\"rate\":%.1f,\"errors\":%" PRIu64
           ",\"retransmits\":%" PRIu64 "}\n",
           r.proto, r.mode, r.clients, win ? r.window : 1, r.per_dgram, r.names, done, el, done / el, errors, retx);
    if (errors) {
        fprintf(stderr, "lookup_bench: %" PRIu64 " errors; first: %s\n", errors, err);
        return 1;
    }
    return done ? 0 : 1;
}
