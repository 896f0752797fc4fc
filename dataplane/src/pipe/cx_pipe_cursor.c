/* Durable named readers: pi_attach_named and pi_ack (semantics in cx_pipe.h). The space
 * keeps each cursor's acknowledged position beside the pipe (space/cx_segcursor.h); this
 * side attaches, seeks to it, and stores pi_tell at each pi_ack. */
#include "pipe/cx_pipe_int.h"

#include "api/cx_api.h"
#include "common/cx_error.h"
#include "space/cx_segcursor.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* One cursor request to space s, riding out a restart of the space for up to its
 * timeout_ms (as publishing a format does): set when set != 0, else get into *pos. */
static int cursor_call(int s, int set, const char *name, uint64_t pipe_id, const char *cursor,
                       uint64_t *pos)
{
    pthread_mutex_lock(&g_pi.mu);
    struct pi_space *sp = pi_space_get(s);
    int timeout_ms = sp ? sp->opts.timeout_ms : 0;
    pthread_mutex_unlock(&g_pi.mu);
    if (!sp)
        return -EBADF;
    double end = pi_now_ms() + (timeout_ms > 0 ? timeout_ms : 10000);
    struct cx_space_client *c = pi_space_ctl(s, NULL);
    int rc;
    for (;;) {
        rc = !c ? -cx_errcode()
             : set ? cx_space_cursor_set(c, name, pipe_id, cursor, *pos)
                   : cx_space_cursor_get(c, name, cursor, pos);
        if ((rc != -ECONNRESET && rc != -ETIMEDOUT && c) || pi_now_ms() > end)
            break;
        c = pi_space_ctl(s, rc == -ECONNRESET ? c : NULL);
        if (!c)
            usleep(100000);
    }
    return rc;
}

int cx_embedded_pi_attach_named(const char *name, int s, const char *cursor)
{
    int rc = pi_name_check(name, "pi_attach_named");
    if (rc == 0 && (rc = cx_cursor_name_check(cursor)) < 0)
        rc = cx_err_wrap(rc, "pi_attach_named '%s'", name);
    if (rc < 0)
        return pi_fail(rc);
    int d = pi_reader_open(name, s, NULL); /* binds the name if unbound, as pi_attach */
    if (d < 0)
        return d;
    uint64_t pos = 0, pipe_id = 0;
    pthread_mutex_lock(&g_pi.mu);
    struct pi_reader *r = pi_reader_get(d);
    if (r) {
        snprintf(r->cursor, sizeof r->cursor, "%s", cursor);
        pipe_id = r->pipe_id;
    }
    pthread_mutex_unlock(&g_pi.mu);
    rc = cursor_call(s, 0, name, pipe_id, cursor, &pos);
    if (rc == -ENOENT && pipe_id) /* never acknowledged: a new cursor, from segment 0 */
        rc = 0, pos = 0;
    if (rc == 0 && pos > 0 && cx_embedded_pi_seek(d, pos) < 0)
        rc = -cx_errcode();
    if (rc < 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", cx_errmsg());
        cx_embedded_pi_detach(d);
        return pi_fail(cx_err_set(-rc, "pi_attach_named '%s' cursor '%s': %s", name, cursor, msg));
    }
    return d;
}

int cx_embedded_pi_ack(int d)
{
    int grc;
    if (pi_group_ack(d, &grc))
        return grc;
    char name[128], cursor[sizeof ((struct pi_reader *)0)->cursor];
    uint64_t pipe_id = 0, pos = 0;
    int s = -1;
    pthread_mutex_lock(&g_pi.mu);
    struct pi_reader *r = pi_reader_get(d);
    if (r) {
        snprintf(name, sizeof name, "%s", r->name);
        snprintf(cursor, sizeof cursor, "%s", r->cursor);
        pipe_id = r->pipe_id;
        pos = cx_pipe_buf_tell(r->buf) - 1; /* the buffer counts from 1, pi_tell from 0 */
        s = r->space;
    }
    pthread_mutex_unlock(&g_pi.mu);
    if (!r)
        return pi_fail(-EBADF);
    if (!cursor[0])
        return pi_fail(cx_err_set(EINVAL, "pi_ack: reader %d of pipe '%s' was attached without a "
                                          "cursor name (pi_attach_named)", d, name));
    int rc = cursor_call(s, 1, name, pipe_id, cursor, &pos);
    if (rc < 0)
        return pi_fail(cx_err_wrap(rc, "pi_ack: pipe '%s' cursor '%s'", name, cursor));
    return 0;
}
