/* Per-thread error messages; see cx_error.h. */
#include "cx_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define CX_ERRMSG_MAX 512

static _Thread_local char errmsg[CX_ERRMSG_MAX];
static _Thread_local int errcode;

int cx_err_set(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errmsg, sizeof errmsg, fmt, ap);
    va_end(ap);
    errcode = err;
    return -err;
}

int cx_err_wrap(int rc, const char *fmt, ...)
{
    char prefix[CX_ERRMSG_MAX], old[CX_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, errmsg, sizeof old);
    const char *tail = old[0] ? old : strerror(rc < 0 ? -rc : rc);
    /* Joined by hand: the result is cut at CX_ERRMSG_MAX on purpose. */
    size_t n = strnlen(prefix, sizeof errmsg - 1);
    memcpy(errmsg, prefix, n);
    if (n + 2 < sizeof errmsg) {
        errmsg[n++] = ':';
        errmsg[n++] = ' ';
        size_t t = strnlen(tail, sizeof errmsg - 1 - n);
        memcpy(errmsg + n, tail, t);
        n += t;
    }
    errmsg[n] = '\0';
    return rc;
}

const char *cx_errmsg(void) { return errmsg; }
int cx_errcode(void) { return errcode; }
void cx_err_clear(void) { errmsg[0] = '\0'; errcode = 0; }
