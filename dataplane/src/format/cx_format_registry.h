/* The per-process format registry: token -> format, shared by every thread.
 *
 * Formats handed to the registry live until the process ends (decoders and conversion
 * plans keep pointers to them), so a looked-up format never goes away under its user.
 * When a token is not known, the registry asks the fetch hook (a format service, e.g. the
 * space server) for the description, checks that it hashes to the asked token, and keeps
 * the result.
 */
#ifndef CX_FORMAT_REGISTRY_H
#define CX_FORMAT_REGISTRY_H

#include "common/cx_export.h"
#include "format/cx_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fetches the description of `token` from elsewhere. Returns 0 with a malloc'ed
 * description in *desc (the registry frees it) and its length in *len, or a negative errno
 * (with cx_err_set) when the token is unknown there too. Called without registry locks
 * held, possibly from several threads at once. */
typedef int (*cx_format_fetch_fn)(void *arg, uint64_t token, uint8_t **desc, size_t *len);

/* Hands f to the registry (the registry owns it from now on, even on error). If a format
 * with the same token is already there, f is freed and the registered one is used. Sets
 * *canon (may be NULL) to the registered format. Returns 0, or -ENOMEM. */
CX_EXPORT int cx_format_registry_insert(struct cx_format *f, const struct cx_format **canon);

/* The format registered under token. On a miss, calls the fetch hook if one is set.
 * Returns the format, or NULL with cx_errmsg() set: -ENOENT "unknown format token ..."
 * when no hook is set or the hook does not know it, -EPROTO when the fetched description
 * is malformed or hashes to another token. */
CX_EXPORT const struct cx_format *cx_format_registry_lookup(uint64_t token);

/* Sets (or with fn NULL, removes) the fetch hook. */
CX_EXPORT void cx_format_registry_set_fetch(cx_format_fetch_fn fn, void *arg);

/* Number of formats registered (for tests and metrics). */
CX_EXPORT size_t cx_format_registry_count(void);

#ifdef __cplusplus
}
#endif
#endif
