/* The format service of a space (issue: "a format service in the space server, so any
 * process can fetch the full description for a token it has not seen"). Descriptions are
 * checked (rebuilt with cx_format_from_description and re-hashed to their token) before
 * they are kept, persisted one file per token under <dir>/formats/, and reloaded at start.
 * Thread-safe.
 */
#ifndef CX_SPACE_FORMATS_H
#define CX_SPACE_FORMATS_H

#include <stddef.h>
#include <stdint.h>

struct cx_space_formats;

/* Opens (creating <dir>/formats) and loads every stored description; a damaged file is
 * skipped with a warning on stderr (a client may PUT it again). */
int cx_space_formats_open(const char *dir, struct cx_space_formats **out);
void cx_space_formats_close(struct cx_space_formats *f);

/* Checks and stores a description; *token is what it hashes to. Storing one that is
 * already there is a no-op. -EPROTO for a malformed description, -EIO from the disk. */
int cx_space_formats_put(struct cx_space_formats *f, const uint8_t *desc, size_t len,
                         uint64_t *token);

/* Copies out the description of token (malloc'ed, caller frees). -ENOENT when unknown. */
int cx_space_formats_get(struct cx_space_formats *f, uint64_t token, uint8_t **desc, size_t *len);

size_t cx_space_formats_count(struct cx_space_formats *f);

#endif
