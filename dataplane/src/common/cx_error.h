/* Errors in libconflux: every fallible call returns 0 (or a count) on success and a
 * negative errno on failure, and leaves a human-readable message in a per-thread buffer.
 * The message is set where the error happens and extended with context on the way up:
 *
 *     if (len > max)
 *         return cx_err_set(EMSGSIZE, "segment of %zu bytes exceeds the %zu-byte limit", len, max);
 *     ...
 *     if ((rc = cx_pipe_append(p, seg)) < 0)
 *         return cx_err_wrap(rc, "pipe '%s'", p->name);   // "pipe 'x': segment of ..."
 */
#ifndef CX_ERROR_H
#define CX_ERROR_H

#include "common/cx_export.h"

#include <errno.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Records a message for `err` (a positive errno) and returns -err. */
CX_EXPORT int cx_err_set(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes the current message with context ("context: old message") and returns rc
 * unchanged, so it can be used as `return cx_err_wrap(rc, ...)`. */
CX_EXPORT int cx_err_wrap(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The calling thread's last message, or "" if none. Valid until the next cx_err_* call. */
CX_EXPORT const char *cx_errmsg(void);

/* The errno of the last cx_err_set on this thread, or 0. */
CX_EXPORT int cx_errcode(void);

/* Forgets the calling thread's last error. */
CX_EXPORT void cx_err_clear(void);

#ifdef __cplusplus
}
#endif
#endif
