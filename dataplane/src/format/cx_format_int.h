/* Internals of the format module, shared by its source files only (not a public header). */
#ifndef CX_FORMAT_INT_H
#define CX_FORMAT_INT_H

#include "format/cx_format.h"

#include <stdbool.h>
#include <string.h>

/* Largest struct or event part we accept (keeps every offset sum far from overflow). */
#define CX__MAX_SIZE (1u << 30)
#define CX__MAX_FIELDS 4096
#define CX__MAX_STRUCTS 256
#define CX__HOST_BE (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__)

struct cx__field {
    char *name;
    uint8_t kind;     /* enum cx_kind */
    uint8_t shape;    /* enum cx_shape */
    uint8_t has_def;
    uint32_t esize;   /* element size (struct: sub->size; string: ptr_size) */
    uint32_t offset;  /* in the struct */
    uint32_t count;   /* CX_SHAPE_FIXED: number of elements; else 1 */
    int32_t len_idx;  /* CX_SHAPE_VAR: index of the length field in the same struct */
    int32_t sub_idx;  /* CX_K_STRUCT: index into the format's struct table */
    double def;
};

struct cx__struct {
    char *name;
    uint32_t size;
    uint32_t align;
    uint32_t nfields;
    struct cx__field *fields;
    bool has_ptr; /* holds a string or variable array, directly or in a nested struct */
};

/* A pointer slot: one string or variable array reachable in the top struct, in traversal
 * order (fields in order, depth first into nested structs). Slot i of an encoded event is
 * the i-th of these. */
struct cx__slot {
    uint32_t offset;     /* of the pointer, from the top struct's start */
    uint8_t kind;        /* CX_K_STRING, or the element kind of a variable array */
    uint8_t is_var;
    uint32_t esize;      /* variable array: element size */
    uint32_t len_off;    /* variable array: offset of the length field in the top struct */
    uint8_t len_kind, len_size;
    const struct cx__field *field;
    char *path;          /* dotted name, e.g. "pos.label" (owned by the format) */
};

struct cx_format {
    struct cx_arch arch;
    uint32_t nstructs;
    struct cx__struct *structs; /* [0] is the top struct */
    uint32_t nslots;
    struct cx__slot slots[CX_FORMAT_MAX_SLOTS];
    uint8_t *desc;
    size_t desc_len;
    uint64_t token;
    bool native;                /* arch equals this machine's */
    /* atomic memo: the plan from this format to itself, once cx_decode looked it up (plans
     * are never freed): the decode of an event in its own format skips the plan cache */
    const struct cx__plan *self_plan;
};

/* Builds the derived parts (slots, description, token) once structs are filled in and
 * checked. Returns 0 or a negative errno with a message. */
int cx__format_finish(struct cx_format *f);

/* Checks what every format must satisfy (sizes, offsets within the struct, references);
 * used on declarations and on received descriptions alike. */
int cx__format_check(const struct cx_format *f);

/* Parses "double[3]" / "float[n]" / "unsigned integer" into a base name and dims. */
struct cx__typespec {
    char base[64];
    uint32_t count;   /* product of fixed dims, 1 if none */
    bool fixed;
    bool var;
    char len_name[64];
};
int cx__parse_type(const char *type, struct cx__typespec *ts);

/* Maps a base type name to a kind and natural size for arch; returns -ENOENT for a name
 * that is not a builtin (then it may be a struct name). */
int cx__builtin(const char *base, size_t declared, const struct cx_arch *arch, uint8_t *kind,
                uint32_t *size);

/* Alignment of a scalar of `size` bytes under arch. */
static inline uint32_t cx__scalar_align(uint32_t size, const struct cx_arch *a)
{
    if (size >= 8)
        return a->align8;
    return size ? size : 1;
}

/* Scalar loads and stores in a given byte order; no alignment needed. */
static inline uint64_t cx__load_u(const uint8_t *p, uint32_t size, bool swap)
{
    switch (size) {
    case 1: return p[0];
    case 2: { uint16_t v; memcpy(&v, p, 2); return swap ? __builtin_bswap16(v) : v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return swap ? __builtin_bswap32(v) : v; }
    default: { uint64_t v; memcpy(&v, p, 8); return swap ? __builtin_bswap64(v) : v; }
    }
}

static inline int64_t cx__load_i(const uint8_t *p, uint32_t size, bool swap)
{
    uint64_t u = cx__load_u(p, size, swap);
    switch (size) {
    case 1: return (int8_t)u;
    case 2: return (int16_t)u;
    case 4: return (int32_t)u;
    default: return (int64_t)u;
    }
}

static inline double cx__load_f(const uint8_t *p, uint32_t size, bool swap)
{
    if (size == 4) {
        uint32_t u = (uint32_t)cx__load_u(p, 4, swap);
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    uint64_t u = cx__load_u(p, 8, swap);
    double d;
    memcpy(&d, &u, 8);
    return d;
}

static inline void cx__store_u(uint8_t *p, uint32_t size, uint64_t v)
{
    switch (size) {
    case 1: p[0] = (uint8_t)v; break;
    case 2: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    default: memcpy(p, &v, 8); break;
    }
}

static inline bool cx__is_intlike(uint8_t kind)
{
    return kind == CX_K_INT || kind == CX_K_UINT || kind == CX_K_CHAR || kind == CX_K_BOOL ||
           kind == CX_K_ENUM;
}

static inline bool cx__is_signed(uint8_t kind) { return kind == CX_K_INT || kind == CX_K_ENUM; }

static inline bool cx__is_scalar(uint8_t kind)
{
    return cx__is_intlike(kind) || kind == CX_K_FLOAT;
}

/* Size one field occupies in its struct. */
static inline uint32_t cx__field_span(const struct cx__field *fd, const struct cx_arch *a)
{
    if (fd->shape == CX_SHAPE_VAR)
        return a->ptr_size;
    return fd->esize * fd->count;
}

static inline uint32_t cx__align_up(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }

/* The wire layout of an encoded event (see cx_codec.h): side area header and slot entry. */
#define CX__SIDE_HDR 8u
#define CX__SIDE_SLOT 16u

/* Checks the side area and every slot of an encoded event against its format: bounds,
 * 8-byte alignment, string NUL, variable-array count times element size against the slot
 * length. On success sets *fixed to the fixed part. */
int cx__event_check(const struct cx_format *f, const uint8_t *buf, size_t len,
                    const uint8_t **fixed);

/* Reads slot i of a checked event. */
static inline void cx__slot_get(const uint8_t *buf, uint32_t i, uint64_t *off, uint64_t *len)
{
    const uint8_t *s = buf + CX__SIDE_HDR + (size_t)i * CX__SIDE_SLOT;
    *off = cx__load_u(s, 8, CX__HOST_BE);
    *len = cx__load_u(s + 8, 8, CX__HOST_BE);
}

/* Reads the element count of a variable-array slot from the fixed part (wire byte order). */
static inline int64_t cx__slot_count(const struct cx_format *f, const struct cx__slot *s,
                                     const uint8_t *fixed)
{
    bool swap = f->arch.big_endian != CX__HOST_BE;
    if (cx__is_signed(s->len_kind))
        return cx__load_i(fixed + s->len_off, s->len_size, swap);
    uint64_t u = cx__load_u(fixed + s->len_off, s->len_size, swap);
    return u > INT64_MAX ? -1 : (int64_t)u;
}

#endif
