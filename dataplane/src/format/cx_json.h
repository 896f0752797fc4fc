/* A small strict JSON reader (RFC 8259) for format schemas (and the network-status file,
 * ../transport/cx_fabric_dev.c); internal to the library.
 * Rejects trailing bytes, duplicate object keys, control characters and bad escapes in
 * strings, lone surrogates, leading zeros, and nesting deeper than CX__JSON_MAX_DEPTH. */
#ifndef CX_JSON_H
#define CX_JSON_H

#include <stdbool.h>
#include <stddef.h>

#define CX__JSON_MAX_DEPTH 32

enum cx__jtype { CX__J_NULL, CX__J_BOOL, CX__J_NUM, CX__J_STR, CX__J_ARR, CX__J_OBJ };

struct cx__jv {
    enum cx__jtype t;
    bool b;
    double num;
    char *str;             /* CX__J_STR, NUL-terminated (embedded NULs rejected) */
    size_t n;              /* items of CX__J_ARR / CX__J_OBJ */
    struct cx__jv *items;
    char **keys;           /* CX__J_OBJ */
};

/* Parses text[0..len) into *out. Returns 0, or -EINVAL with the byte position in the
 * message. Free with cx__json_free. */
int cx__json_parse(const char *text, size_t len, struct cx__jv *out);
void cx__json_free(struct cx__jv *v);

/* The member `key` of an object, or NULL. */
const struct cx__jv *cx__json_get(const struct cx__jv *obj, const char *key);

#endif
