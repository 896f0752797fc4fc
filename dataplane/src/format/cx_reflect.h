/* Reflection: reading an event of a format this program was not built for (seed
 * echo-event-delivery.txt 3.4). The event stays in its wire form; values are read with
 * the sender's byte order and sizes, so no conversion plan is needed.
 *
 *     struct cx_view v;
 *     if (cx_reflect_open(token, buf, len, &v) == 0) {       // format from the registry
 *         struct cx_value x;
 *         cx_reflect_get(&v, "pos.x", 0, &x);                // x.d
 *         char js[4096];
 *         cx_reflect_json(&v, js, sizeof js);                // {"id":7,"pos":{...},...}
 *     }
 */
#ifndef CX_REFLECT_H
#define CX_REFLECT_H

#include "common/cx_export.h"
#include "format/cx_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A checked event. Valid while buf lives. */
struct cx_view {
    const struct cx_format *f;
    const uint8_t *buf;
    size_t len;
    const uint8_t *fixed;
};

struct cx_field_info {
    const char *name;
    enum cx_kind kind;
    enum cx_shape shape;
    uint32_t size;   /* element size on the sender */
    uint64_t count;  /* 1, the fixed count, or this event's variable count */
    const char *type_name; /* struct name for CX_K_STRUCT, else NULL */
};

/* A value read from an event: kind says which member is meaningful (i for INT, ENUM;
 * u for UINT, CHAR, BOOL; d for FLOAT; s for STRING, NULL for a NULL string). */
struct cx_value {
    enum cx_kind kind;
    int64_t i;
    uint64_t u;
    double d;
    const char *s;
};

/* Looks the token up in the registry (fetching it if a hook is set) and checks the event
 * (as cx_decode does). Returns 0, -ENOENT for an unknown token, -EPROTO for a bad event. */
CX_EXPORT int cx_reflect_open(uint64_t token, const void *buf, size_t len, struct cx_view *v);

/* The same with the format at hand. */
CX_EXPORT int cx_reflect_open_format(const struct cx_format *f, const void *buf, size_t len,
                           struct cx_view *v);

/* Number of fields of the top struct. */
CX_EXPORT int cx_reflect_count(const struct cx_view *v);

/* Describes top-level field i. Returns 0, or -ERANGE. */
CX_EXPORT int cx_reflect_field(const struct cx_view *v, int i, struct cx_field_info *fi);

/* Reads element `index` (0 for a single value) of the scalar or string field at `path`
 * ("id", "pos.x": dots go into nested structs). Returns 0, -ENOENT for an unknown path,
 * -ERANGE for an index past the array, -EINVAL when the field is a struct. */
CX_EXPORT int cx_reflect_get(const struct cx_view *v, const char *path, uint64_t index,
                   struct cx_value *val);

/* Prints the event as one JSON object (fields in declaration order; char arrays as
 * strings; NaN and infinities as null). Writes at most cap bytes including the NUL and
 * returns the length needed (like snprintf). */
CX_EXPORT long cx_reflect_json(const struct cx_view *v, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
