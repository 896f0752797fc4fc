/* Durable reader cursors of a pipe (pi_attach_named, pi_ack in ../pipe/cx_pipe.h): the
 * position a named reader acknowledged, kept beside the pipe's log so it survives a restart
 * of the space and goes with the pipe when it is unlinked.
 *
 * Layout: <dir>/pipes/<pipe>/cursor-<name>, two 32-byte slots, each "CXCURSR1", u64
 * position (the next segment the reader gets, 0-based as pi_tell), u64 sequence (1, 2, ...),
 * u32 CRC-32C of the 24 bytes before it, u32 zero; little-endian. A write puts sequence n+1
 * into the slot the older record holds (one pwrite, in place) and the newest whole slot is
 * the position, so a write cut by a crash leaves the previous position, never a mix; under
 * the pipe's fsync policy EVERY or INTERVAL it is fdatasynced (and a new file's directory
 * fsynced) before the call returns (NONE: it survives a crash of the space, not of the
 * machine). An empty file (created, never written) is a cursor never stored.
 */
#ifndef CX_SEGCURSOR_H
#define CX_SEGCURSOR_H

#include <stdint.h>

struct cx_seg_pipe;

/* Longest cursor name, in bytes, without the NUL. */
#define CX_CURSOR_NAME_MAX 64

/* 0 when name is a valid cursor name: 1..CX_CURSOR_NAME_MAX bytes from [A-Za-z0-9._-],
 * the first a letter or digit. Otherwise -EINVAL with a message saying which rule failed
 * (a NULL name too). */
int cx_cursor_name_check(const char *name);

/* Stores the cursor's position (crash-safe, see above). 0, -EINVAL (bad name), or the
 * disk's error with a message. */
int cx_segcursor_set(struct cx_seg_pipe *p, const char *name, uint64_t pos);
/* The stored position: 0, -ENOENT when the cursor was never stored, -EBADMSG when its file
 * is damaged (the message names it). */
int cx_segcursor_get(struct cx_seg_pipe *p, const char *name, uint64_t *pos);
/* Calls fn for every stored cursor of the pipe (damaged files are skipped with a log
 * line); returns how many were listed, or a negative errno. */
long cx_segcursor_list(struct cx_seg_pipe *p, void (*fn)(void *arg, const char *name, uint64_t pos),
                       void *arg);

/* Reader groups' floors (pi_attach_group): the same record in <dir>/pipes/<pipe>/group-<name>
 * (group names follow cursor names' rules), the first position not acknowledged by the
 * group. Same results as the cursor calls. */
int cx_segfloor_set(struct cx_seg_pipe *p, const char *group, uint64_t floor);
int cx_segfloor_get(struct cx_seg_pipe *p, const char *group, uint64_t *floor);
long cx_segfloor_list(struct cx_seg_pipe *p, void (*fn)(void *arg, const char *group, uint64_t floor),
                      void *arg);

#endif
