/* The space server over real sockets: names over TCP and UDP, the format service used by a
 * process that never saw the format, writing and reading pipes (late and live readers),
 * APPEND replay, unlink rules, restart and SIGKILL recovery, bad input. */
#define _GNU_SOURCE
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "format/cx_codec.h"
#include "format/cx_format_registry.h"
#include "format/cx_reflect.h"
#include "space/cx_space_client.h"
#include "space/cx_space_server.h"
#include "space/space_testutil.h"
#include "transport/cx_driver.h"

#include "space/cx_space_proto.h"
#include "transport/cx_addr.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

static struct cx_space_server *start(const char *dir, enum cx_seg_fsync fsync)
{
    struct cx_space_server_opts o = {.dir = dir, .listen = "tcp://127.0.0.1:0", .quiet = 1};
    o.pipe.fsync = fsync;
    o.pipe.fsync_interval_ms = 20;
    o.udp = "127.0.0.1:0";
    struct cx_space_server *s = NULL;
    if (cx_space_server_start(&o, &s) < 0)
        fprintf(stderr, "server start: %s\n", cx_errmsg());
    return s;
}

/* A fresh store in dir and a server on it: 0, or -1 (stderr says why). */
static int start_fresh(char dir[64], enum cx_seg_fsync fsync, struct cx_space_server **s)
{
    if (!tmpdir_make(dir))
        return -1;
    *s = start(dir, fsync);
    return *s ? 0 : -1;
}

static void stop_and_remove(struct cx_space_server *s, const char *dir)
{
    cx_space_server_stop(s);
    tmpdir_remove(dir);
}

static void seg_bytes(uint64_t id, uint8_t *buf, size_t *len)
{
    *len = (size_t)(id * 131 % 3000);
    for (size_t i = 0; i < *len; i++)
        buf[i] = (uint8_t)(id * 7 + i);
}

static int check_seg(uint64_t id, const uint8_t *buf, long n)
{
    uint8_t want[4096];
    size_t len;
    seg_bytes(id, want, &len);
    return n == (long)len && memcmp(buf, want, len) == 0;
}

static int write_range(struct cx_space_client *c, uint32_t w, uint64_t from, uint64_t to)
{
    uint8_t buf[4096];
    for (uint64_t id = from; id <= to; id++) {
        size_t len;
        seg_bytes(id, buf, &len);
        struct iovec iov = {buf, len};
        int rc = cx_space_append(c, w, id, 0x1234, &iov, 1);
        if (rc < 0)
            return rc;
    }
    return 0;
}

enum { ANY_FORMAT = -1 };

/* Reads the next segments on read handle h and checks they are exactly from..to with
 * write_range's contents (and, unless ANY_FORMAT, format), then, when then_end, that the pipe
 * ends there (-EPIPE): 0, or -1 (stderr says where). */
static int read_checked(struct cx_space_client *c, uint32_t h, uint64_t from, uint64_t to, long format,
                        int then_end)
{
    uint8_t buf[4096];
    struct cx_seg_info si;
    for (uint64_t id = from; id <= to; id++) {
        long n = cx_space_read_next(c, h, buf, sizeof buf, &si, 10000);
        if (n < 0 || si.seg_id != id || (format != ANY_FORMAT && si.format != (uint64_t)format) || !check_seg(id, buf, n)) {
            fprintf(stderr, "  read_checked: segment %llu: %ld (%s)\n", (unsigned long long)id, n, cx_errmsg());
            return -1;
        }
    }
    long n = then_end ? cx_space_read_next(c, h, buf, sizeof buf, &si, 10000) : -EPIPE;
    if (n != -EPIPE) {
        fprintf(stderr, "  read_checked: after %llu: %ld, not the end (-EPIPE)\n", (unsigned long long)to, n);
        return -1;
    }
    return 0;
}

CX_TEST(names_over_tcp_and_udp)
{
    char dir[64];
    struct cx_space_server *s;
    CX_CHECK_EQ_INT(start_fresh(dir, CX_SEG_FSYNC_NONE, &s), 0);
    struct cx_space_client *c;
    CX_CHECK_EQ_INT(cx_space_connect(cx_space_server_addr(s), &c), 0);
    struct cx_space_pipe_info a, b;
    CX_CHECK_EQ_INT(cx_space_lookup(c, "sim.out", &a), -ENOENT);
    CX_CHECK(strstr(cx_errmsg(), "sim.out"));
    CX_CHECK_EQ_INT(cx_space_get(c, "sim.out", 77, "", &a), 0); /* binds, as pi_attach's get */
    CX_CHECK(a.pipe_id >= 1);
    CX_CHECK_EQ_INT(cx_space_lookup(c, "sim.out", &b), 0);
    CX_CHECK(b.pipe_id == a.pipe_id && b.format == 77);
    CX_CHECK_EQ_INT(cx_space_udp_lookup(cx_space_server_udp_addr(s), "sim.out", 200, 5, &b), 0);
    CX_CHECK(b.pipe_id == a.pipe_id && b.format == 77);
    CX_CHECK_EQ_INT(cx_space_udp_lookup(cx_space_server_udp_addr(s), "nope", 200, 5, &b), -ENOENT);
    CX_CHECK_EQ_INT(cx_space_get(c, "bad/name", 0, "", &b), -EINVAL);
    CX_CHECK_EQ_INT(cx_space_get(c, "second", 0, "", &b), 0);
    CX_CHECK_EQ_INT(cx_space_list(c, NULL, NULL), 2);
    CX_CHECK_EQ_INT(cx_space_unlink(c, "sim.out", &b), 0);
    CX_CHECK_EQ_INT(cx_space_lookup(c, "sim.out", &b), -ENOENT);
    CX_CHECK_EQ_INT(cx_space_get(c, "sim.out", 0, "", &b), 0);
    CX_CHECK(b.pipe_id != a.pipe_id); /* ids are never reused */
    /* UDP to a port where nobody answers: a clear timeout after the retries */
    CX_CHECK_EQ_INT(cx_space_udp_lookup("127.0.0.1:9", "x", 20, 3, &b), -ETIMEDOUT);
    cx_space_disconnect(c);
    stop_and_remove(s, dir);
}

/* A datagram packing many LOOKUP frames gets every one answered, the replies packed into
 * datagrams that fit a 1500-byte MTU (the pipelined lookups of bench/pipe). */
CX_TEST(udp_datagram_of_many_lookups_gets_every_answer)
{
    char dir[64];
    struct cx_space_server *s;
    CX_CHECK_EQ_INT(start_fresh(dir, CX_SEG_FSYNC_NONE, &s), 0);
    struct cx_space_client *c;
    CX_CHECK_EQ_INT(cx_space_connect(cx_space_server_addr(s), &c), 0);
    enum { N = 40 };
    uint64_t ids[N + 1];
    char name[32];
    for (int i = 0; i < N; i++) {
        struct cx_space_pipe_info in;
        snprintf(name, sizeof name, "packed.%d", i);
        CX_CHECK_EQ_INT(cx_space_get(c, name, 0, "", &in), 0);
        ids[i] = in.pipe_id;
    }
    uint8_t dg[8192];
    size_t len = 0;
    for (int i = 0; i <= N; i++) { /* the last one names nothing: an error reply, in place */
        snprintf(name, sizeof name, i < N ? "packed.%d" : "absent", i);
        struct cx_sp_buf b = {.p = dg + len + CX_FRAME_HDR_SIZE, .cap = sizeof dg - len - CX_FRAME_HDR_SIZE, .fixed = 1};
        struct cx_sp_request q = {.op = CX_SP_LOOKUP, .name = {name, (uint16_t)strlen(name)}};
        CX_CHECK_EQ_INT(cx_sp_encode_request(&b, &q), 0);
        struct cx_frame_hdr h = {.type = CX_FRAME_LOOKUP, .seq = 1000 + (uint64_t)i, .length = (uint32_t)b.len,
                                 .msg_length = (uint32_t)b.len};
        cx_frame_encode(&h, dg + len);
        len += CX_FRAME_HDR_SIZE + b.len;
    }
    struct sockaddr_in sa;
    CX_CHECK_EQ_INT(cx_addr_inet(cx_space_server_udp_addr(s), &sa), 0);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    CX_CHECK(fd >= 0);
    CX_CHECK_EQ_INT(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    CX_CHECK_EQ_INT(send(fd, dg, len, 0), (long)len);
    int got[N + 1] = {0}, answers = 0, datagrams = 0;
    while (answers < N + 1) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        CX_CHECK_EQ_INT(poll(&pf, 1, 2000), 1);
        uint8_t in[4096];
        ssize_t n = recv(fd, in, sizeof in, 0);
        CX_CHECK(n > 0 && n <= 1472);
        datagrams++;
        for (size_t off = 0; (size_t)n - off >= CX_FRAME_HDR_SIZE;) {
            struct cx_frame_hdr h;
            CX_CHECK_EQ_INT(cx_frame_decode(in + off, (size_t)n - off, &h), 0);
            int i = (int)(h.seq - 1000);
            CX_CHECK(i >= 0 && i <= N && !got[i]);
            struct cx_sp_reply rep;
            CX_CHECK_EQ_INT(cx_sp_decode_reply(in + off + CX_FRAME_HDR_SIZE, h.length, &rep), 0);
            if (i < N)
                CX_CHECK(rep.status == 0 && rep.pipe.pipe_id == ids[i]);
            else
                CX_CHECK_EQ_INT(rep.status, -ENOENT);
            got[i] = 1;
            answers++;
            off += CX_FRAME_HDR_SIZE + h.length;
        }
    }
    CX_CHECK(datagrams >= 2 && datagrams < N); /* packed, and split to fit the MTU */
    close(fd);
    cx_space_disconnect(c);
    stop_and_remove(s, dir);
}

/* A child process with an empty format registry decodes an event it has never seen the
 * format of: the registry asks the space. */
CX_TEST(format_service_feeds_the_registry_of_another_process)
{
    char dir[64];
    struct cx_space_server *s;
    CX_CHECK_EQ_INT(start_fresh(dir, CX_SEG_FSYNC_NONE, &s), 0);
    const char *js = "{\"name\":\"reading\",\"fields\":[{\"name\":\"sensor\",\"type\":\"int32\"},"
                     "{\"name\":\"value\",\"type\":\"double\"},{\"name\":\"unit\",\"type\":\"string\"}]}";
    struct reading { int32_t sensor; double value; char *unit; } ev = {42, 2.5, "K"};
    struct cx_format *f;
    CX_CHECK_EQ_INT(cx_format_from_json(js, strlen(js), NULL, &f), 0);
    static _Alignas(8) uint8_t wire[256];
    struct cx_enc enc;
    CX_CHECK_EQ_INT(cx_encode(f, &ev, &enc), 0);
    long n = cx_enc_gather(&enc, wire, sizeof wire);
    CX_CHECK(n > 0);
    uint64_t want = cx_format_token(f), token = 0;
    struct cx_space_client *c;
    CX_CHECK_EQ_INT(cx_space_connect(cx_space_server_addr(s), &c), 0);
    CX_CHECK_EQ_INT(cx_space_format_put(c, f, &token), 0);
    CX_CHECK(token == want);
    /* a description that lies is refused */
    uint8_t *bad;
    size_t bad_len;
    CX_CHECK_EQ_INT(cx_space_format_get(c, token, &bad, &bad_len), 0);
    CX_CHECK(bad_len > 8);
    free(bad);
    CX_CHECK_EQ_INT(cx_space_format_get(c, token ^ 1, &bad, &bad_len), -ENOENT);
    cx_space_disconnect(c);
    cx_format_free(f);

    pid_t pid = fork();
    if (pid == 0) {
        struct cx_space_client *k;
        if (cx_space_connect(cx_space_server_addr(s), &k) < 0)
            _exit(2);
        cx_space_serve_formats(k);
        struct cx_view v;
        if (cx_reflect_open(want, wire, (size_t)n, &v) < 0) {
            fprintf(stderr, "child: %s\n", cx_errmsg());
            _exit(3);
        }
        char js_out[256];
        cx_reflect_json(&v, js_out, sizeof js_out);
        _exit(strstr(js_out, "\"sensor\":42") && strstr(js_out, "\"unit\":\"K\"") ? 0 : 4);
    }
    int st;
    waitpid(pid, &st, 0);
    CX_CHECK(WIFEXITED(st));
    CX_CHECK_EQ_INT(WEXITSTATUS(st), 0);
    /* the description survives a restart of the server */
    cx_space_server_stop(s);
    s = start(dir, CX_SEG_FSYNC_NONE);
    CX_CHECK(s);
    CX_CHECK_EQ_INT(cx_space_connect(cx_space_server_addr(s), &c), 0);
    CX_CHECK_EQ_INT(cx_space_format_get(c, want, &bad, &bad_len), 0);
    free(bad);
    cx_space_disconnect(c);
    stop_and_remove(s, dir);
}

CX_TEST(write_then_late_and_live_readers)
{
    char dir[64];
    struct cx_space_server *s;
    CX_CHECK_EQ_INT(start_fresh(dir, CX_SEG_FSYNC_INTERVAL, &s), 0);
    struct cx_space_client *w, *r;
    CX_CHECK_EQ_INT(cx_space_connect(cx_space_server_addr(s), &w), 0);
    CX_CHECK_EQ_INT(cx_space_connect(cx_space_server_addr(s), &r), 0);
    struct cx_space_pipe_info info;
    uint32_t wh, live, late;
    CX_CHECK_EQ_INT(cx_space_put(w, "stream", CX_SP_CREATE, 0x1234, "", &wh, &info), 0);
    CX_CHECK_EQ_INT(cx_space_read_start(r, "stream", 1, &live, &info), 0); /* before any write */
    CX_CHECK_EQ_INT(write_range(w, wh, 1, 2000), 0);
    CX_CHECK_EQ_INT(cx_space_end(w, wh, 2000), 0);
    CX_CHECK_EQ_INT(cx_space_wait_acked(w, wh, 2000, 10000), 0);
    uint8_t buf[4096];
    struct cx_seg_info si;
    CX_CHECK_EQ_INT(read_checked(r, live, 1, 2000, 0x1234, 1), 0);
    /* a late reader seeks into the middle (pi_seek) */
    CX_CHECK_EQ_INT(cx_space_read_start(r, "stream", 1500, &late, &info), 0);
    CX_CHECK(info.last_id == 2000 && info.ended);
    CX_CHECK_EQ_INT(read_checked(r, late, 1500, 2000, ANY_FORMAT, 1), 0);
    /* a small buffer: told the size, the segment stays */
    uint32_t again;
    CX_CHECK_EQ_INT(cx_space_read_start(r, "stream", 2, &again, &info), 0);
    CX_CHECK_EQ_INT(cx_space_read_next(r, again, buf, 1, &si, 10000), -EMSGSIZE);
    CX_CHECK(si.length == 262 && si.seg_id == 2);
    CX_CHECK(check_seg(2, buf, cx_space_read_next(r, again, buf, sizeof buf, &si, 10000)));
    CX_CHECK_EQ_INT(cx_space_stop(r, again), 0);
    struct cx_space_server_stats st;
    cx_space_server_stats(s, &st);
    CX_CHECK(st.segments_in == 2000 && st.segments_out >= 2000 + 501);
    cx_space_disconnect(w);
    cx_space_disconnect(r);
    stop_and_remove(s, dir);
}

CX_TEST(create_append_replay_and_unlink_rules)
{
    char dir[64];
    struct cx_space_server *s;
    CX_CHECK_EQ_INT(start_fresh(dir, CX_SEG_FSYNC_NONE, &s), 0);
    struct cx_space_client *w, *o;
    CX_CHECK_EQ_INT(cx_space_connect(cx_space_server_addr(s), &w), 0);
    CX_CHECK_EQ_INT(cx_space_connect(cx_space_server_addr(s), &o), 0);
    struct cx_space_pipe_info info;
    uint32_t wh, h2;
    CX_CHECK_EQ_INT(cx_space_get(o, "p", 0, "tcp://10.1.2.3:9", &info), 0); /* a reader waits */
    CX_CHECK_EQ_INT(cx_space_put(w, "p", CX_SP_CREATE, 0, "tcp://10.9.9.9:1", &wh, &info), 0);
    CX_CHECK_EQ_INT(info.naddrs, 1); /* the writer learns of the reader (Figure 6, #60-#62) */
    CX_CHECK_STR(info.addrs[0], "tcp://10.1.2.3:9");
    CX_CHECK_EQ_INT(cx_space_put(o, "p", CX_SP_CREATE, 0, "", &h2, &info), -EBUSY); /* one writer */
    CX_CHECK_EQ_INT(cx_space_unlink(o, "p", &info), -EBUSY);
    CX_CHECK(strstr(cx_errmsg(), "open for writing"));
    /* a reader that attaches now is announced to the writer */
    CX_CHECK_EQ_INT(cx_space_get(o, "p", 0, "tcp://10.1.2.4:9", &info), 0);
    CX_CHECK_STR(info.addrs[0], "tcp://10.9.9.9:1");
    CX_CHECK_EQ_INT(write_range(w, wh, 1, 100), 0);
    CX_CHECK_EQ_INT(cx_space_wait_acked(w, wh, 100, 10000), 0);
    char addr[128];
    CX_CHECK_EQ_INT(cx_space_next_reader(w, wh, addr, sizeof addr), 1);
    CX_CHECK_STR(addr, "tcp://10.1.2.4:9");
    /* a gap is refused with a clear error, and the handle reports it */
    uint8_t x = 1;
    struct iovec iov = {&x, 1};
    CX_CHECK_EQ_INT(cx_space_append(w, wh, 105, 0, &iov, 1), 0);
    CX_CHECK_EQ_INT(cx_space_wait_acked(w, wh, 105, 10000), -ERANGE);
    cx_space_disconnect(w); /* the writer "crashes" */
    /* CREATE on a pipe with segments is refused; APPEND resumes and replays idempotently */
    CX_CHECK_EQ_INT(cx_space_connect(cx_space_server_addr(s), &w), 0);
    CX_CHECK_EQ_INT(cx_space_put(w, "p", CX_SP_CREATE, 0, "", &wh, &info), -EEXIST);
    CX_CHECK(strstr(cx_errmsg(), "APPEND"));
    CX_CHECK_EQ_INT(cx_space_put(w, "p", CX_SP_APPEND, 0, "", &wh, &info), 0);
    CX_CHECK(info.last_id == 100);
    CX_CHECK_EQ_INT(write_range(w, wh, 1, 150), 0); /* replays 1..100, then new ones */
    CX_CHECK_EQ_INT(cx_space_end(w, wh, 150), 0);
    CX_CHECK_EQ_INT(cx_space_wait_acked(w, wh, 150, 10000), 0);
    uint32_t rh;
    CX_CHECK_EQ_INT(cx_space_read_start(o, "p", 0, &rh, &info), 0);
    CX_CHECK_EQ_INT(read_checked(o, rh, 1, 150, ANY_FORMAT, 1), 0);
    CX_CHECK_EQ_INT(cx_space_stop(w, wh), 0);
    CX_CHECK_EQ_INT(cx_space_unlink(o, "p", &info), 0);
    CX_CHECK_EQ_INT(cx_space_read_start(o, "p", 0, &rh, &info), -ENOENT);
    cx_space_disconnect(w);
    cx_space_disconnect(o);
    stop_and_remove(s, dir);
}

struct got {
    int replies, pushes, status5, status_push;
};

static void on_raw(void *arg, const struct cx_frame_hdr *f, const void *p, size_t len)
{
    struct got *g = arg;
    struct cx_sp_reply r;
    if (cx_sp_decode_reply(p, len, &r) < 0)
        return;
    if (f->seq == 5)
        g->replies++, g->status5 = r.status;
    else if (f->seq == 0 && f->channel == 77)
        g->pushes++, g->status_push = r.status;
}

/* Bad input loses nothing: malformed requests get an error and the connection goes on. */
CX_TEST(bad_requests_get_clear_errors)
{
    char dir[64];
    struct cx_space_server *s;
    CX_CHECK_EQ_INT(start_fresh(dir, CX_SEG_FSYNC_NONE, &s), 0);
    struct cx_link *k;
    CX_CHECK_EQ_INT(cx_connect(cx_space_server_addr(s), &k), 0);
    uint8_t junk[] = {3, 9, 0, 0, 0, 0, 0xff, 0xff}; /* PUT with mode 9, truncated */
    struct cx_frame_hdr h = {.type = CX_FRAME_LOOKUP, .seq = 5};
    struct iovec iov = {junk, sizeof junk};
    CX_CHECK_EQ_INT(cx_link_send(k, &h, &iov, 1), 0);
    uint8_t seg[100] = {0};
    struct cx_frame_hdr d = {.type = CX_FRAME_DATA, .channel = 77, .seq = 1};
    iov = (struct iovec){seg, sizeof seg};
    CX_CHECK_EQ_INT(cx_link_send(k, &d, &iov, 1), 0); /* a segment on a handle never opened */
    struct got g = {0};
    for (int i = 0; i < 400 && (g.replies < 1 || g.pushes < 1); i++) {
        CX_CHECK(cx_link_progress(k, on_raw, &g, 64) >= 0);
        usleep(5000);
    }
    CX_CHECK_EQ_INT(g.status5, -EPROTO);
    CX_CHECK_EQ_INT(g.status_push, -EBADF);
    cx_link_close(k);
    /* the server still serves */
    struct cx_space_client *c;
    struct cx_space_pipe_info info;
    CX_CHECK_EQ_INT(cx_space_connect(cx_space_server_addr(s), &c), 0);
    CX_CHECK_EQ_INT(cx_space_get(c, "ok", 0, "", &info), 0);
    cx_space_disconnect(c);
    /* a second server on the same store is refused: one owner */
    struct cx_space_server_opts o = {.dir = dir, .quiet = 1, .udp = ""};
    struct cx_space_server *s2;
    CX_CHECK_EQ_INT(cx_space_server_start(&o, &s2), -EBUSY);
    stop_and_remove(s, dir);
}

/* The server process is SIGKILLed while a writer streams with fsync=every: after a restart
 * every acknowledged segment is there, in order, and the writer resumes with APPEND. */
CX_TEST(server_killed_acked_segments_survive)
{
    char dir[64];
    CX_CHECK(tmpdir_make(dir));
    int portpipe[2];
    CX_CHECK_EQ_INT(pipe(portpipe), 0);
    pid_t pid = fork();
    if (pid == 0) {
        struct cx_space_server *s = start(dir, CX_SEG_FSYNC_EVERY);
        if (!s)
            _exit(2);
        char a[160];
        snprintf(a, sizeof a, "%s", cx_space_server_addr(s));
        if (write(portpipe[1], a, sizeof a) != sizeof a)
            _exit(3);
        pause();
        _exit(0);
    }
    char addr[160];
    CX_CHECK_EQ_INT(read(portpipe[0], addr, sizeof addr), (int)sizeof addr);
    struct cx_space_client *w;
    CX_CHECK_EQ_INT(cx_space_connect(addr, &w), 0);
    struct cx_space_pipe_info info;
    uint32_t wh;
    CX_CHECK_EQ_INT(cx_space_put(w, "durable", CX_SP_CREATE, 0, "", &wh, &info), 0);
    uint64_t acked = 0, id = 1;
    for (; id <= 400; id++) {
        uint8_t buf[4096];
        size_t len;
        seg_bytes(id, buf, &len);
        struct iovec iov = {buf, len};
        if (cx_space_append(w, wh, id, 0, &iov, 1) < 0)
            break;
        if (id % 50 == 0 && id < 250) /* some acks are surely in before the kill */
            CX_CHECK_EQ_INT(cx_space_wait_acked(w, wh, id, 10000), 0);
        if (id == 250)
            kill(pid, SIGKILL);
    }
    int st;
    waitpid(pid, &st, 0);
    cx_space_wait_acked(w, wh, id, 200); /* collect the last acks that made it */
    acked = cx_space_acked(w, wh);
    cx_space_disconnect(w);
    CX_CHECK(acked > 0);
    struct cx_space_server *s = start(dir, CX_SEG_FSYNC_EVERY);
    CX_CHECK(s);
    CX_CHECK_EQ_INT(cx_space_connect(cx_space_server_addr(s), &w), 0);
    CX_CHECK_EQ_INT(cx_space_put(w, "durable", CX_SP_APPEND, 0, "", &wh, &info), 0);
    uint64_t held = info.last_id;
    CX_CHECK(held >= acked);
    CX_CHECK_EQ_INT(write_range(w, wh, 1, 300), 0);
    CX_CHECK_EQ_INT(cx_space_end(w, wh, 300), 0);
    CX_CHECK_EQ_INT(cx_space_wait_acked(w, wh, 300, 10000), 0);
    uint32_t rh;
    CX_CHECK_EQ_INT(cx_space_read_start(w, "durable", 1, &rh, &info), 0);
    CX_CHECK_EQ_INT(read_checked(w, rh, 1, 300, ANY_FORMAT, 0), 0);
    printf("    acked before the kill: %llu of 250 sent; the restarted space held %llu\n",
           (unsigned long long)acked, (unsigned long long)held);
    cx_space_disconnect(w);
    stop_and_remove(s, dir);
}

/* The next push for a writer handle (up to 2 s). */
static int next_event(struct cx_space_client *c, uint32_t h, struct cx_space_event *ev)
{
    for (int i = 0; i < 2000; i++) {
        if (cx_space_next_event(c, h, ev) == 1)
            return 1;
        usleep(1000);
    }
    return 0;
}

/* MIGRATE and RESUME (the hold list, seed Figure 7) at the protocol level: a held reader is
 * announced to the writer, kept from writers that open the pipe, and moved; a migrating
 * writer's slot is kept for its token; holds end by time. */
CX_TEST(migrate_holds_readers_and_writer_slots)
{
    char dir[64];
    struct cx_space_server *s;
    CX_CHECK_EQ_INT(start_fresh(dir, CX_SEG_FSYNC_NONE, &s), 0);
    const char *sa = cx_space_server_addr(s);
    struct cx_space_client *w, *r, *o, *n;
    CX_CHECK_EQ_INT(cx_space_connect(sa, &w), 0);
    CX_CHECK_EQ_INT(cx_space_connect(sa, &r), 0);
    CX_CHECK_EQ_INT(cx_space_connect(sa, &o), 0);
    CX_CHECK_EQ_INT(cx_space_connect(sa, &n), 0);
    struct cx_space_pipe_info info, in2;
    struct cx_space_event ev;
    uint32_t wh, wh2;
    uint64_t rtok, wtok;
    CX_CHECK_EQ_INT(cx_space_get(r, "p", 0, "tcp://10.0.0.1:1", &info), 0);
    CX_CHECK_EQ_INT(cx_space_put(w, "p", CX_SP_CREATE, 0, "", &wh, &info), 0);
    CX_CHECK_EQ_INT(info.naddrs, 1);
    CX_CHECK_EQ_INT(write_range(w, wh, 1, 50), 0);
    CX_CHECK_EQ_INT(cx_space_wait_acked(w, wh, 50, 10000), 0);
    /* the reader migrates: the writer is told to hold it */
    CX_CHECK_EQ_INT(cx_space_migrate(r, CX_SP_MIG_READER, 0, "p", "tcp://10.0.0.1:1", 5000, &rtok, &info), 0);
    CX_CHECK(rtok != 0 && info.last_id == 50 && info.writer_open);
    CX_CHECK_EQ_INT(next_event(w, wh, &ev), 1);
    CX_CHECK(ev.op == CX_SP_READER_HELD && ev.hold_ms == 5000);
    CX_CHECK_STR(ev.addr, "tcp://10.0.0.1:1");
    cx_space_disconnect(r); /* the old process goes: the hold stays */
    CX_CHECK_EQ_INT(cx_space_get(o, "p", 0, "tcp://10.0.0.1:1", &info), 0); /* no news: held */
    /* the writer migrates too: a wrong handle is refused, then its slot is kept */
    CX_CHECK_EQ_INT(cx_space_migrate(w, CX_SP_MIG_WRITER, wh + 7, "p", "", 5000, &wtok, &info), -EBADF);
    CX_CHECK_EQ_INT(cx_space_migrate(w, CX_SP_MIG_WRITER, wh, "p", "", 5000, &wtok, &info), 0);
    CX_CHECK(wtok != 0 && wtok != rtok && !info.writer_open);
    CX_CHECK_EQ_INT(cx_space_put(o, "p", CX_SP_APPEND, 0, "", &wh2, &info), -EBUSY);
    CX_CHECK(strstr(cx_errmsg(), "migrating"));
    CX_CHECK_EQ_INT(cx_space_resume(o, CX_SP_MIG_WRITER, "p", "", info.pipe_id, wtok + 1, &wh2, &in2), -EBUSY);
    CX_CHECK_EQ_INT(cx_space_resume(o, CX_SP_MIG_WRITER, "p", "", info.pipe_id + 1, wtok, &wh2, &in2), -ENOENT);
    CX_CHECK_EQ_INT(cx_space_resume(o, CX_SP_MIG_WRITER, "p", "", info.pipe_id, wtok, &wh2, &in2), 0);
    CX_CHECK(in2.last_id == 50 && in2.writer_open);
    CX_CHECK_EQ_INT(in2.naddrs, 0); /* the held reader is not to be connected to */
    CX_CHECK_EQ_INT(write_range(o, wh2, 51, 60), 0);
    CX_CHECK_EQ_INT(cx_space_wait_acked(o, wh2, 60, 10000), 0);
    /* the reader reappears: the (new) writer learns old -> new */
    CX_CHECK_EQ_INT(cx_space_resume(n, CX_SP_MIG_READER, "p", "tcp://10.0.0.2:2", info.pipe_id, rtok, NULL, &in2), 0);
    CX_CHECK_EQ_INT(next_event(o, wh2, &ev), 1);
    CX_CHECK_EQ_INT(ev.op, CX_SP_READER_MOVED);
    CX_CHECK_STR(ev.addr, "tcp://10.0.0.1:1");
    CX_CHECK_STR(ev.addr2, "tcp://10.0.0.2:2");
    /* a hold that ends by time: a late RESUME is an attach (JOINED, not MOVED) */
    CX_CHECK_EQ_INT(cx_space_migrate(n, CX_SP_MIG_READER, 0, "p", "tcp://10.0.0.2:2", 100, &rtok, &info), 0);
    CX_CHECK_EQ_INT(next_event(o, wh2, &ev), 1);
    CX_CHECK_EQ_INT(ev.op, CX_SP_READER_HELD);
    usleep(200000);
    CX_CHECK_EQ_INT(cx_space_resume(n, CX_SP_MIG_READER, "p", "tcp://10.0.0.3:3", info.pipe_id, rtok, NULL, &in2), 0);
    CX_CHECK_EQ_INT(next_event(o, wh2, &ev), 1);
    CX_CHECK_EQ_INT(ev.op, CX_SP_READER_JOINED);
    CX_CHECK_STR(ev.addr, "tcp://10.0.0.3:3");
    /* bad requests */
    CX_CHECK_EQ_INT(cx_space_migrate(n, CX_SP_MIG_READER, 0, "nope", "tcp://x:1", 100, &rtok, &info), -ENOENT);
    CX_CHECK_EQ_INT(cx_space_migrate(n, CX_SP_MIG_READER, 0, "p", "", 100, &rtok, &info), -EINVAL);
    CX_CHECK_EQ_INT(cx_space_migrate(n, 7, 0, "p", "tcp://x:1", 100, &rtok, &info), -EPROTO); /* unknown kind */
    cx_space_disconnect(w);
    cx_space_disconnect(o);
    cx_space_disconnect(n);
    stop_and_remove(s, dir);
}

CX_TEST_MAIN()
