/* Rebuilding a format from its canonical description (the reflection wire form). The
 * writer is cx__format_finish in cx_format.c; layout (all little-endian):
 *   "CXF1" u8 big_endian u8 ptr_size u8 long_size u8 align8 u32 nstructs
 *   per struct: str name, u32 size, u32 align, u32 nfields
 *   per field:  str name, u8 kind, u8 shape, u8 has_def, u32 esize, u32 offset, u32 count,
 *               i32 len_idx, i32 sub_idx, f64 default
 *   str = u16 length + bytes (no NUL). */
#include "format/cx_format_int.h"

#include "common/cx_error.h"

#include <stdio.h>
#include <stdlib.h>

struct rbuf { const uint8_t *p; size_t len, pos; };

static int get_u(struct rbuf *r, int n, uint64_t *v)
{
    if (r->len - r->pos < (size_t)n)
        return cx_err_set(EPROTO, "description truncated at byte %zu", r->pos);
    uint64_t x = 0;
    for (int i = 0; i < n; i++)
        x |= (uint64_t)r->p[r->pos + (size_t)i] << (8 * i);
    r->pos += (size_t)n;
    *v = x;
    return 0;
}

static int get_s(struct rbuf *r, char **out)
{
    uint64_t n = 0;
    int rc = get_u(r, 2, &n);
    if (rc < 0)
        return rc;
    if (n == 0 || r->len - r->pos < n)
        return cx_err_set(EPROTO, "bad name at byte %zu", r->pos);
    if (memchr(r->p + r->pos, 0, n))
        return cx_err_set(EPROTO, "name with a NUL at byte %zu", r->pos);
    if (!(*out = malloc(n + 1)))
        return cx_err_set(ENOMEM, "out of memory");
    memcpy(*out, r->p + r->pos, n);
    (*out)[n] = '\0';
    r->pos += n;
    return 0;
}

#define GET(n, dst)                                                                        \
    do {                                                                                   \
        uint64_t v_ = 0;                                                                     \
        if ((rc = get_u(&r, (n), &v_)) < 0)                                                \
            goto error;                                                                    \
        dst = v_;                                                                          \
    } while (0)

int cx_format_from_description(const uint8_t *desc, size_t len, struct cx_format **out)
{
    int rc;
    struct rbuf r = {desc, len, 0};
    uint64_t n = 0;
    *out = NULL;
    if (!desc || len < 12 || memcmp(desc, "CXF1", 4))
        return cx_err_set(EPROTO, "not a format description");
    r.pos = 4;
    struct cx_format *f = calloc(1, sizeof *f);
    if (!f)
        return cx_err_set(ENOMEM, "out of memory");
    GET(1, f->arch.big_endian);
    GET(1, f->arch.ptr_size);
    GET(1, f->arch.long_size);
    GET(1, f->arch.align8);
    GET(4, n);
    if (n < 1 || n > CX__MAX_STRUCTS) {
        rc = cx_err_set(EPROTO, "%llu structs", (unsigned long long)n);
        goto error;
    }
    if (!(f->structs = calloc(n, sizeof *f->structs))) {
        rc = cx_err_set(ENOMEM, "out of memory");
        goto error;
    }
    f->nstructs = (uint32_t)n;
    for (uint32_t si = 0; si < f->nstructs; si++) {
        struct cx__struct *s = &f->structs[si];
        uint64_t nf;
        if ((rc = get_s(&r, &s->name)) < 0)
            goto error;
        GET(4, s->size);
        GET(4, s->align);
        GET(4, nf);
        /* Each field takes at least 34 bytes: refuse counts the input cannot hold. */
        if (nf < 1 || nf > CX__MAX_FIELDS || nf > (r.len - r.pos) / 34) {
            rc = cx_err_set(EPROTO, "struct '%s': bad field count %llu", s->name,
                            (unsigned long long)nf);
            goto error;
        }
        if (!(s->fields = calloc(nf, sizeof *s->fields))) {
            rc = cx_err_set(ENOMEM, "out of memory");
            goto error;
        }
        s->nfields = (uint32_t)nf;
        for (uint32_t fi = 0; fi < s->nfields; fi++) {
            struct cx__field *fd = &s->fields[fi];
            uint64_t bits, li, sb;
            if ((rc = get_s(&r, &fd->name)) < 0)
                goto error;
            GET(1, fd->kind);
            GET(1, fd->shape);
            GET(1, fd->has_def);
            GET(4, fd->esize);
            GET(4, fd->offset);
            GET(4, fd->count);
            GET(4, li);
            GET(4, sb);
            GET(8, bits);
            fd->len_idx = (int32_t)(uint32_t)li;
            fd->sub_idx = (int32_t)(uint32_t)sb;
            if (fd->kind < CX_K_INT || fd->kind > CX_K_STRING || fd->has_def > 1) {
                rc = cx_err_set(EPROTO, "field '%s': bad kind %u", fd->name, fd->kind);
                goto error;
            }
            memcpy(&fd->def, &bits, 8);
        }
    }
    if (r.pos != r.len) {
        rc = cx_err_set(EPROTO, "%zu trailing bytes", r.len - r.pos);
        goto error;
    }
    /* Fields that are not structs carry no struct reference, and only VAR has a length. */
    for (uint32_t si = 0; si < f->nstructs; si++)
        for (uint32_t fi = 0; fi < f->structs[si].nfields; fi++) {
            struct cx__field *fd = &f->structs[si].fields[fi];
            if ((fd->kind != CX_K_STRUCT && fd->sub_idx != -1) ||
                (fd->shape != CX_SHAPE_VAR && fd->len_idx != -1)) {
                rc = cx_err_set(EPROTO, "field '%s': stray reference", fd->name);
                goto error;
            }
        }
    if ((rc = cx__format_finish(f)) < 0) {
        if (rc == -EINVAL) {
            char why[256];
            snprintf(why, sizeof why, "%s", cx_errmsg());
            rc = cx_err_set(EPROTO, "%s", why);
        }
        goto error;
    }
    *out = f;
    return 0;
error:
    cx_format_free(f);
    return cx_err_wrap(rc, "format description");
}
