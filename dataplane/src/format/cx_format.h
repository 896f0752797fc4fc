/* Native-format event descriptions (ARCHITECTURE.md, seed echo-event-delivery.txt 2.2).
 *
 * A format describes one C struct as its sender lays it out in memory: named fields with a
 * kind (signed/unsigned integer, float, char, boolean, enum, nested struct, string), an
 * element size, an offset, and an optional shape (fixed array, or variable array whose
 * element count is another integer field of the same struct and whose elements live behind
 * a pointer), plus the sender's architecture facts (byte order, pointer and long sizes,
 * alignment of 8-byte scalars). Events travel in that layout; a receiver converts with a
 * plan (cx_codec.h).
 *
 * Declaring a format, PBIO/FFS style (the top struct first, nested structs after it; each
 * field list ends with a {NULL} entry):
 *
 *     struct vec { double x, y; };
 *     struct particle { int64_t id; struct vec pos; uint32_t n; float *vals; char *label; };
 *     static const struct cx_field vec_f[] = {
 *         {"x", "double", sizeof(double), offsetof(struct vec, x)},
 *         {"y", "double", sizeof(double), offsetof(struct vec, y)}, {NULL}};
 *     static const struct cx_field particle_f[] = {
 *         {"id", "int64", 8, offsetof(struct particle, id)},
 *         {"pos", "vec", sizeof(struct vec), offsetof(struct particle, pos)},
 *         {"n", "uint32", 4, offsetof(struct particle, n)},
 *         {"vals", "float[n]", sizeof(float), offsetof(struct particle, vals)},
 *         {"label", "string", sizeof(char *), offsetof(struct particle, label)}, {NULL}};
 *     static const struct cx_struct_decl decl[] = {
 *         {"particle", particle_f, sizeof(struct particle)},
 *         {"vec", vec_f, sizeof(struct vec)}, {NULL}};
 *     struct cx_format *f;
 *     int rc = cx_format_create(decl, NULL, &f);
 *
 * Type strings: int8 int16 int32 int64 uint8 .. uint64, "integer" and "unsigned integer"
 * (width from size), long, ulong (width from the arch), float, double (float32, float64),
 * char, bool/boolean, enum, string (char *, NUL-terminated), or the name of another struct
 * of the declaration; followed by any number of fixed dimensions "[3]" (flattened) or by one
 * variable dimension "[field]". For arrays `size` is the element size. A `size` of 0 means
 * "the natural size of the type" and an offset of CX_OFFSET_AUTO means "lay the field out
 * with C alignment rules" (all fields of a struct auto, or none).
 *
 * Limits (checked, -EINVAL): strings and variable arrays may appear in the top struct and in
 * nested structs, but not inside arrays; variable-array elements are scalars or pointer-free
 * structs; at most CX_FORMAT_MAX_SLOTS strings and variable arrays per format; nesting depth
 * at most 16; a struct of at most 1 GiB.
 *
 * A format is immutable once created. Its token (cx_format_token) is a stable 64-bit hash
 * of its canonical description (cx_format_describe), so two processes that describe the
 * same layout on the same architecture get the same token.
 */
#ifndef CX_FORMAT_H
#define CX_FORMAT_H

#include "common/cx_export.h"
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CX_OFFSET_AUTO ((size_t)-1)
#define CX_FORMAT_MAX_SLOTS 32
#define CX_FORMAT_MAX_DEPTH 16

/* The facts about the sender's machine that a description carries. */
struct cx_arch {
    uint8_t big_endian; /* 1 when integers are stored most significant byte first */
    uint8_t ptr_size;   /* 4 or 8 */
    uint8_t long_size;  /* 4 or 8 */
    uint8_t align8;     /* alignment of 8-byte scalars inside structs: 4 (i386) or 8 */
};

/* One field of a struct (see the header comment). `dflt` (optional, may be left out of an
 * initializer, which -Wextra reports as missing-field-initializers) is the value a receiver uses when the sender lacks the field: a number for
 * numeric kinds; ignored for strings, structs and arrays. */
struct cx_field {
    const char *name;
    const char *type;
    size_t size;
    size_t offset;
    const char *dflt;
};

/* One struct: its name, its field list ending with {NULL}, and sizeof the struct (0 with
 * auto layout: computed). A declaration is an array of these ending with {NULL}. */
struct cx_struct_decl {
    const char *name;
    const struct cx_field *fields;
    size_t size;
};

enum cx_kind {
    CX_K_INT = 1,    /* signed integer, 1/2/4/8 bytes */
    CX_K_UINT = 2,   /* unsigned integer, 1/2/4/8 bytes */
    CX_K_FLOAT = 3,  /* IEEE 754, 4 or 8 bytes */
    CX_K_CHAR = 4,   /* one byte */
    CX_K_BOOL = 5,   /* 1/2/4/8 bytes, zero or not */
    CX_K_ENUM = 6,   /* signed integer of 1/2/4/8 bytes */
    CX_K_STRUCT = 7, /* nested struct */
    CX_K_STRING = 8, /* char *, NUL-terminated */
};

enum cx_shape { CX_SHAPE_ONE = 0, CX_SHAPE_FIXED = 1, CX_SHAPE_VAR = 2 };

struct cx_format;

/* Fills *a with the facts of the machine this code runs on. */
CX_EXPORT void cx_arch_native(struct cx_arch *a);

/* Builds a format from a declaration (top struct first). arch NULL means this machine.
 * Returns 0 and a new format in *out (free with cx_format_free), or a negative errno with
 * cx_errmsg() naming the struct and field at fault: -EINVAL for a bad type string, size,
 * offset, unknown struct name or length field, unsupported shape; -E2BIG past the limits. */
CX_EXPORT int cx_format_create(const struct cx_struct_decl *decl, const struct cx_arch *arch,
                     struct cx_format **out);

/* Builds a format from the JSON schema the Channel CRD carries:
 *   {"name":"particle","fields":[{"name":"id","type":"int64"},
 *     {"name":"vals","type":"float[n]"},{"name":"n","type":"uint32","default":0}, ...],
 *    "structs":[{"name":"vec","fields":[...]}]}
 * ("structs", optional, declares nested struct types by name). Offsets are computed with C
 * alignment rules for `arch` (NULL: this machine). The parser is strict: unknown keys,
 * duplicate keys, trailing bytes, bad escapes and nesting deeper than 32 are rejected.
 * Returns 0 and *out, or -EINVAL with a message giving the byte position or the field. */
CX_EXPORT int cx_format_from_json(const char *json, size_t len, const struct cx_arch *arch,
                        struct cx_format **out);

/* Frees a format that was not handed to the registry. NULL is allowed. */
CX_EXPORT void cx_format_free(struct cx_format *f);

/* The format token (never 0). */
CX_EXPORT uint64_t cx_format_token(const struct cx_format *f);

/* The top struct's name, its size in bytes and its architecture. */
CX_EXPORT const char *cx_format_name(const struct cx_format *f);
CX_EXPORT size_t cx_format_size(const struct cx_format *f);
CX_EXPORT const struct cx_arch *cx_format_arch(const struct cx_format *f);

/* The canonical description (the bytes the token hashes, and the reflection wire form a
 * format service hands out). Points into f; valid while f lives. */
CX_EXPORT const uint8_t *cx_format_describe(const struct cx_format *f, size_t *len);

/* Rebuilds a format from a description received from elsewhere. Every count, offset, size
 * and reference is checked: returns 0 and *out, or -EPROTO with a message for a malformed
 * description (never reads past desc[len)). */
CX_EXPORT int cx_format_from_description(const uint8_t *desc, size_t len, struct cx_format **out);

#ifdef __cplusplus
}
#endif
#endif
