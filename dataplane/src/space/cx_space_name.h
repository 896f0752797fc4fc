/* Names inside a space: the names of the name table and the pipe names of the segment
 * store (which become directory names on disk, hence the strict alphabet). */
#ifndef CX_SPACE_NAME_H
#define CX_SPACE_NAME_H

/* Longest valid name, in bytes, without the terminating NUL. */
#define CX_SPACE_NAME_MAX 127

/* Returns 0 when `name` is valid: 1..CX_SPACE_NAME_MAX bytes from [A-Za-z0-9._:-], the
 * first one a letter or digit (so never "", "." or ".."). Otherwise -EINVAL with a message
 * that says which rule failed; a NULL name is -EINVAL too. */
int cx_space_name_check(const char *name);

#endif
