/* STATS (cx_space_proto.h) against a real server over TCP: readers, stored bytes and
 * segments, and links per transport follow writers and readers as they come and go; the
 * encoding round-trips and malformed replies are refused. */
#define _GNU_SOURCE
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "space/cx_space_client.h"
#include "space/cx_space_server.h"
#include "space/space_testutil.h"
#include "transport/cx_driver.h"

#include <unistd.h>

/* One STATS exchange over a raw link (the operator speaks it the same way, one request per
 * connection); the reply's strings are copied out before the payload goes. */
struct stats_got {
    int done;
    int32_t status;
    char error[256];
    struct cx_sp_pipe pipe;
    struct cx_sp_stats st;
    char transports[CX_SP_MAX_LINKS][32];
};

static void on_stats(void *arg, const struct cx_frame_hdr *f, const void *p, size_t len)
{
    struct stats_got *g = arg;
    struct cx_sp_reply r;
    if (f->seq != 9 || cx_sp_decode_reply(p, len, &r) < 0)
        return;
    g->done = 1;
    g->status = r.status;
    if (r.status < 0) {
        cx_sp_str_copy(r.error, g->error, sizeof g->error);
        return;
    }
    g->pipe = r.pipe;
    g->st = r.stats;
    for (int i = 0; i < r.stats.nlinks; i++)
        cx_sp_str_copy(r.stats.links[i].transport, g->transports[i], sizeof g->transports[i]);
}

static int stats(struct cx_space_server *s, const char *name, struct stats_got *g)
{
    memset(g, 0, sizeof *g);
    struct cx_link *k;
    int rc = cx_connect(cx_space_server_addr(s), &k);
    if (rc < 0)
        return rc;
    struct cx_sp_request q = {.op = CX_SP_STATS, .name = {name, (uint16_t)strlen(name)}};
    struct cx_sp_buf b = {0};
    if ((rc = cx_sp_encode_request(&b, &q)) == 0) {
        struct cx_frame_hdr h = {.type = CX_FRAME_LOOKUP, .seq = 9};
        struct iovec iov = {b.p, b.len};
        rc = cx_link_send(k, &h, &iov, 1);
    }
    cx_sp_buf_free(&b);
    for (int i = 0; rc >= 0 && !g->done && i < 1000; i++) {
        rc = cx_link_progress(k, on_stats, g, 16);
        if (!g->done)
            usleep(2000);
    }
    cx_link_close(k);
    if (rc >= 0 && !g->done)
        rc = -ETIMEDOUT;
    return rc < 0 ? rc : 0;
}

/* Uses counted for transport t (0 when absent). */
static uint32_t link_count(const struct stats_got *g, const char *t)
{
    for (int i = 0; i < g->st.nlinks; i++)
        if (strcmp(g->transports[i], t) == 0)
            return g->st.links[i].count;
    return 0;
}

CX_TEST(stats_follow_writers_and_readers)
{
    char dir[64];
    CX_CHECK(tmpdir_make(dir));
    struct cx_space_server_opts o = {.dir = dir, .listen = "tcp://127.0.0.1:0", .udp = "", .quiet = 1};
    struct cx_space_server *s = NULL;
    CX_CHECK_EQ_INT(cx_space_server_start(&o, &s), 0);
    struct stats_got g;

    CX_CHECK_EQ_INT(stats(s, "frames", &g), 0);
    CX_CHECK_EQ_INT(g.status, -ENOENT);
    CX_CHECK(strstr(g.error, "frames"));

    struct cx_space_client *ctl, *w, *r1, *r2;
    struct cx_space_pipe_info info;
    CX_CHECK_EQ_INT(cx_space_connect(cx_space_server_addr(s), &ctl), 0);
    CX_CHECK_EQ_INT(cx_space_get(ctl, "frames", 0, "", &info), 0); /* the operator's register */
    CX_CHECK_EQ_INT(stats(s, "frames", &g), 0);
    CX_CHECK_EQ_INT(g.status, 0);
    CX_CHECK(g.pipe.pipe_id == info.pipe_id && !g.pipe.writer_open);
    CX_CHECK(g.st.readers == 0 && g.st.bytes == 0 && g.st.segments == 0 && g.st.nlinks == 0);

    /* a writer stores 20 segments: bytes = 40-byte record header + payload, each */
    CX_CHECK_EQ_INT(cx_space_connect(cx_space_server_addr(s), &w), 0);
    uint32_t wh;
    CX_CHECK_EQ_INT(cx_space_put(w, "frames", CX_SP_CREATE, 0, "tcp://10.1.0.1:7000", &wh, &info), 0);
    uint64_t want_bytes = 0;
    uint8_t buf[4096];
    for (uint64_t id = 1; id <= 20; id++) {
        size_t len = (size_t)id * 37 % 700;
        memset(buf, (int)id, len);
        struct iovec iov = {buf, len};
        CX_CHECK_EQ_INT(cx_space_append(w, wh, id, 0, &iov, 1), 0);
        want_bytes += 40 + len;
    }
    CX_CHECK_EQ_INT(cx_space_wait_acked(w, wh, 20, 5000), 0);
    CX_CHECK_EQ_INT(stats(s, "frames", &g), 0);
    CX_CHECK(g.pipe.writer_open && g.pipe.last_id == 20 && g.pipe.naddrs == 1);
    CX_CHECK_EQ_INT((long)g.st.segments, 20);
    CX_CHECK_EQ_INT((long)g.st.bytes, (long)want_bytes);
    CX_CHECK_EQ_INT(g.st.readers, 0);
    CX_CHECK_EQ_INT(g.st.nlinks, 1);
    CX_CHECK_EQ_INT(link_count(&g, "tcp"), 1); /* the writer's connection */

    /* reader 1 registers a tcp address (the writer's direct link) and streams from the
     * space; reader 2 registers an shm address and streams too */
    CX_CHECK_EQ_INT(cx_space_connect(cx_space_server_addr(s), &r1), 0);
    CX_CHECK_EQ_INT(cx_space_connect(cx_space_server_addr(s), &r2), 0);
    uint32_t rh1, rh2;
    CX_CHECK_EQ_INT(cx_space_get(r1, "frames", 0, "tcp://10.1.0.2:7001", &info), 0);
    CX_CHECK_EQ_INT(cx_space_read_start(r1, "frames", 1, &rh1, &info), 0);
    CX_CHECK_EQ_INT(cx_space_get(r2, "frames", 0, "shm://node-a/reader-2", &info), 0);
    CX_CHECK_EQ_INT(cx_space_read_start(r2, "frames", 15, &rh2, &info), 0);
    CX_CHECK_EQ_INT(stats(s, "frames", &g), 0);
    CX_CHECK_EQ_INT(g.st.readers, 2);
    CX_CHECK_EQ_INT(link_count(&g, "tcp"), 4); /* writer + 2 streams + 1 direct */
    CX_CHECK_EQ_INT(link_count(&g, "shm"), 1);
    CX_CHECK_EQ_INT(g.st.nlinks, 2);

    /* reader 2 leaves: its stream and its registered address go with its connection */
    cx_space_disconnect(r2);
    int ok = 0;
    for (int i = 0; i < 500 && !ok; i++) {
        CX_CHECK_EQ_INT(stats(s, "frames", &g), 0);
        ok = g.st.readers == 1 && link_count(&g, "shm") == 0;
        if (!ok)
            usleep(10000);
    }
    CX_CHECK(ok);
    CX_CHECK_EQ_INT(link_count(&g, "tcp"), 3);

    /* the writer ends and leaves: no direct links any more; the END record is counted */
    CX_CHECK_EQ_INT(cx_space_end(w, wh, 20), 0);
    CX_CHECK_EQ_INT(cx_space_wait_acked(w, wh, 20, 5000), 0);
    cx_space_disconnect(w);
    ok = 0;
    for (int i = 0; i < 500 && !ok; i++) {
        CX_CHECK_EQ_INT(stats(s, "frames", &g), 0);
        ok = !g.pipe.writer_open;
        if (!ok)
            usleep(10000);
    }
    CX_CHECK(ok);
    CX_CHECK(g.pipe.ended);
    CX_CHECK_EQ_INT((long)g.st.bytes, (long)want_bytes + 40);
    CX_CHECK_EQ_INT(g.st.readers, 1);
    CX_CHECK_EQ_INT(link_count(&g, "tcp"), 1); /* reader 1's stream only */

    /* stopping the stream leaves no reader */
    CX_CHECK_EQ_INT(cx_space_stop(r1, rh1), 0);
    CX_CHECK_EQ_INT(stats(s, "frames", &g), 0);
    CX_CHECK(g.st.readers == 0 && g.st.nlinks == 0 && g.st.segments == 20);

    cx_space_disconnect(r1);
    cx_space_disconnect(ctl);
    cx_space_server_stop(s);
    tmpdir_remove(dir);
}

CX_TEST(stats_encoding_round_trips_and_bad_replies_are_refused)
{
    struct cx_sp_pipe p = {.pipe_id = 3, .format = 4, .first_id = 1, .last_id = 9, .writer_open = 1};
    struct cx_sp_stats st = {.readers = 2, .bytes = 1u << 20, .segments = 9, .nlinks = 2};
    st.links[0].transport = (struct cx_sp_str){"tcp", 3};
    st.links[0].count = 3;
    st.links[1].transport = (struct cx_sp_str){"ucx", 3};
    st.links[1].count = 1;
    struct cx_sp_buf b = {0};
    cx_sp_encode_reply_head(&b, CX_SP_STATS, 0, NULL);
    cx_sp_encode_pipe(&b, &p);
    CX_CHECK_EQ_INT(cx_sp_encode_stats(&b, &st), 0);
    struct cx_sp_reply r;
    CX_CHECK_EQ_INT(cx_sp_decode_reply(b.p, b.len, &r), 0);
    CX_CHECK(r.op == CX_SP_STATS && r.pipe.last_id == 9 && r.pipe.writer_open == 1);
    CX_CHECK(r.stats.readers == 2 && r.stats.bytes == 1u << 20 && r.stats.segments == 9);
    CX_CHECK(r.stats.nlinks == 2 && r.stats.links[1].count == 1);
    CX_CHECK(r.stats.links[1].transport.len == 3 && memcmp(r.stats.links[1].transport.p, "ucx", 3) == 0);
    /* truncated: refused, naming the field */
    CX_CHECK_EQ_INT(cx_sp_decode_reply(b.p, b.len - 1, &r), -EPROTO);
    CX_CHECK(strstr(cx_errmsg(), "STATS") && strstr(cx_errmsg(), "link uses"));
    /* a link count over the limit */
    size_t at = b.len - (2 + 3 + 4) * 2 - 2;
    b.p[at] = CX_SP_MAX_LINKS + 1;
    CX_CHECK_EQ_INT(cx_sp_decode_reply(b.p, b.len, &r), -EPROTO);
    CX_CHECK(strstr(cx_errmsg(), "over the limit"));
    cx_sp_buf_free(&b);
    /* the encoder refuses what the decoder would */
    st.nlinks = CX_SP_MAX_LINKS + 1;
    struct cx_sp_buf e = {0};
    CX_CHECK_EQ_INT(cx_sp_encode_stats(&e, &st), -EINVAL);
    cx_sp_buf_free(&e);
    /* the request is a name, like LOOKUP */
    struct cx_sp_request q = {.op = CX_SP_STATS, .name = {"abc", 3}}, q2;
    e = (struct cx_sp_buf){0};
    CX_CHECK_EQ_INT(cx_sp_encode_request(&e, &q), 0);
    CX_CHECK_EQ_INT(cx_sp_decode_request(e.p, e.len, &q2), 0);
    CX_CHECK(q2.op == CX_SP_STATS && q2.name.len == 3 && memcmp(q2.name.p, "abc", 3) == 0);
    CX_CHECK_STR(cx_sp_op_name(CX_SP_STATS), "STATS");
    cx_sp_buf_free(&e);
}

CX_TEST_MAIN()
