/* The name table of a space (seed pi-channels.txt: names are looked up in the space with a
 * cheap request/reply). A name binds to at most one pipe until it is unlinked. Binding
 * gives the name a fresh pipe id, never reused in this space, so a reader holding the id of
 * an unlinked pipe never sees segments of a later pipe of the same name; the segment store
 * keeps that pipe under cx_nametable_pipe_name(id).
 *
 * Persistence: the table lives in <dir>/names (the segment store's directory). Every change
 * rewrites it as names.tmp, fsyncs it, renames it over names and fsyncs the directory
 * before the call returns, so a change that returned 0 survives a machine crash and a crash
 * mid-change leaves the old or the new table, never a mix. The file is text with a CRC-32C
 * trailer; a damaged file makes cx_nametable_open fail with -EBADMSG.
 *
 * Threads: every call may be made from any thread (one mutex per table). Lookups are a
 * binary search over a sorted array.
 */
#ifndef CX_NAMETABLE_H
#define CX_NAMETABLE_H

#include "space/cx_space_name.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Most names a table holds (bind beyond it: -ENOSPC). */
#define CX_NAMETABLE_MAX 65536
/* Size of the buffer cx_nametable_pipe_name fills. */
#define CX_PIPE_NAME_LEN 20

struct cx_nametable;

struct cx_name_entry {
    char name[CX_SPACE_NAME_MAX + 1];
    uint64_t pipe_id; /* >= 1 */
    uint64_t format;  /* format token declared at bind time (0: untyped) */
};

/* Opens (or starts empty) the table persisted in dir/names; dir must exist. -EBADMSG when
 * the file is damaged. */
int cx_nametable_open(const char *dir, struct cx_nametable **out);

/* Frees the table (everything is already on disk). NULL is a no-op. */
void cx_nametable_close(struct cx_nametable *t);

/* Binds `name` (cx_space_name_check rules, else -EINVAL) to a new pipe id with the given
 * format token and fills *out (may be NULL). -EEXIST when the name is bound (the message
 * names the pipe it is bound to); -ENOSPC beyond CX_NAMETABLE_MAX; I/O errors leave the
 * table unchanged. */
int cx_nametable_bind(struct cx_nametable *t, const char *name, uint64_t format,
                      struct cx_name_entry *out);

/* Fills *out with the binding of name. -ENOENT when unbound, -EINVAL when invalid. */
int cx_nametable_lookup(struct cx_nametable *t, const char *name, struct cx_name_entry *out);

/* Removes the binding of name, filling *out (may be NULL) with what it was. -ENOENT when
 * unbound. The caller unlinks the pipe's log from the segment store. */
int cx_nametable_unlink(struct cx_nametable *t, const char *name, struct cx_name_entry *out);

/* Copies up to cap bindings, sorted by name, into out (may be NULL when cap is 0) and
 * returns how many bindings exist (which may exceed cap). */
size_t cx_nametable_list(struct cx_nametable *t, struct cx_name_entry *out, size_t cap);

/* The segment-store pipe name of a pipe id: "p" and 16 hex digits. */
void cx_nametable_pipe_name(uint64_t pipe_id, char out[CX_PIPE_NAME_LEN]);

#ifdef __cplusplus
}
#endif
#endif
