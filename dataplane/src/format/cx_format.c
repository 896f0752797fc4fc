/* Building formats from declarations: type strings, C layout, checks, slots. */
#include "format/cx_format_int.h"

#include "common/cx_error.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

void cx_arch_native(struct cx_arch *a)
{
    struct probe { char c; double d; };
    a->big_endian = CX__HOST_BE;
    a->ptr_size = sizeof(void *);
    a->long_size = sizeof(long);
    a->align8 = offsetof(struct probe, d);
}

int cx__parse_type(const char *type, struct cx__typespec *ts)
{
    memset(ts, 0, sizeof *ts);
    ts->count = 1;
    if (!type)
        return cx_err_set(EINVAL, "missing type");
    const char *br = strchr(type, '[');
    size_t blen = br ? (size_t)(br - type) : strlen(type);
    while (blen > 0 && type[blen - 1] == ' ')
        blen--;
    if (blen == 0 || blen >= sizeof ts->base)
        return cx_err_set(EINVAL, "bad type '%s'", type);
    memcpy(ts->base, type, blen);
    ts->base[blen] = '\0';
    uint64_t count = 1;
    while (br) {
        const char *end = strchr(br, ']');
        if (!end || end == br + 1)
            return cx_err_set(EINVAL, "bad dimension in type '%s'", type);
        size_t dlen = (size_t)(end - br - 1);
        if (isdigit((unsigned char)br[1])) {
            uint64_t d = 0;
            for (size_t i = 1; i <= dlen; i++) {
                if (!isdigit((unsigned char)br[i]) || d > CX__MAX_SIZE)
                    return cx_err_set(EINVAL, "bad dimension in type '%s'", type);
                d = d * 10 + (uint64_t)(br[i] - '0');
            }
            if (d == 0 || ts->var)
                return cx_err_set(EINVAL, "bad dimension in type '%s'", type);
            count *= d;
            if (count > CX__MAX_SIZE)
                return cx_err_set(E2BIG, "array too large in type '%s'", type);
            ts->fixed = true;
        } else {
            if (ts->var || ts->fixed || dlen >= sizeof ts->len_name)
                return cx_err_set(EINVAL,
                                  "type '%s': one variable dimension only, and no fixed one",
                                  type);
            memcpy(ts->len_name, br + 1, dlen);
            ts->len_name[dlen] = '\0';
            ts->var = true;
        }
        br = end[1] == '\0' ? NULL : end + 1;
        if (br && *br != '[')
            return cx_err_set(EINVAL, "trailing text in type '%s'", type);
    }
    ts->count = (uint32_t)count;
    return 0;
}

int cx__builtin(const char *b, size_t declared, const struct cx_arch *arch, uint8_t *kind,
                uint32_t *size)
{
    static const struct { const char *name; uint8_t kind; uint8_t size; } tab[] = {
        {"int8", CX_K_INT, 1},     {"int16", CX_K_INT, 2},    {"int32", CX_K_INT, 4},
        {"int64", CX_K_INT, 8},    {"uint8", CX_K_UINT, 1},   {"uint16", CX_K_UINT, 2},
        {"uint32", CX_K_UINT, 4},  {"uint64", CX_K_UINT, 8},  {"float", CX_K_FLOAT, 4},
        {"float32", CX_K_FLOAT, 4}, {"double", CX_K_FLOAT, 8}, {"float64", CX_K_FLOAT, 8},
        {"char", CX_K_CHAR, 1},    {"bool", CX_K_BOOL, 1},    {"boolean", CX_K_BOOL, 1},
        {"enum", CX_K_ENUM, 4},    {"integer", CX_K_INT, 4},
        {"unsigned integer", CX_K_UINT, 4}, {"unsigned", CX_K_UINT, 4},
        {"long", CX_K_INT, 0},     {"ulong", CX_K_UINT, 0},   {"unsigned long", CX_K_UINT, 0},
        {"string", CX_K_STRING, 0},
    };
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        if (strcmp(b, tab[i].name) != 0)
            continue;
        *kind = tab[i].kind;
        *size = tab[i].size;
        if (*kind == CX_K_STRING)
            *size = arch->ptr_size;
        else if (*size == 0)
            *size = arch->long_size;
        /* PBIO style: "integer", "float", "boolean", "enum" take their width from size. */
        bool generic = !strcmp(b, "integer") || !strcmp(b, "unsigned integer") ||
                       !strcmp(b, "unsigned") || !strcmp(b, "float") || !strcmp(b, "boolean") ||
                       !strcmp(b, "bool") || !strcmp(b, "enum");
        if (declared && generic && *kind != CX_K_STRING)
            *size = (uint32_t)declared;
        return 0;
    }
    return -ENOENT;
}

static void free_structs(struct cx__struct *s, uint32_t n)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; s[i].fields && j < s[i].nfields; j++)
            free(s[i].fields[j].name);
        free(s[i].fields);
        free(s[i].name);
    }
    free(s);
}

void cx_format_free(struct cx_format *f)
{
    if (!f)
        return;
    free_structs(f->structs, f->nstructs);
    for (uint32_t i = 0; i < f->nslots; i++)
        free(f->slots[i].path);
    free(f->desc);
    free(f);
}

uint64_t cx_format_token(const struct cx_format *f) { return f->token; }
const char *cx_format_name(const struct cx_format *f) { return f->structs[0].name; }
size_t cx_format_size(const struct cx_format *f) { return f->structs[0].size; }
const struct cx_arch *cx_format_arch(const struct cx_format *f) { return &f->arch; }

const uint8_t *cx_format_describe(const struct cx_format *f, size_t *len)
{
    *len = f->desc_len;
    return f->desc;
}

static bool scalar_size_ok(uint8_t kind, uint32_t size)
{
    switch (kind) {
    case CX_K_INT: case CX_K_UINT: case CX_K_BOOL: case CX_K_ENUM:
        return size == 1 || size == 2 || size == 4 || size == 8;
    case CX_K_FLOAT: return size == 4 || size == 8;
    case CX_K_CHAR: return size == 1;
    default: return false;
    }
}

int cx__format_check(const struct cx_format *f)
{
    const struct cx_arch *a = &f->arch;
    if (a->big_endian > 1 || (a->ptr_size != 4 && a->ptr_size != 8) ||
        (a->long_size != 4 && a->long_size != 8) || (a->align8 != 4 && a->align8 != 8))
        return cx_err_set(EINVAL, "bad architecture (order %u, pointer %u, long %u, align %u)",
                          a->big_endian, a->ptr_size, a->long_size, a->align8);
    if (f->nstructs < 1 || f->nstructs > CX__MAX_STRUCTS)
        return cx_err_set(E2BIG, "%u structs (1..%u allowed)", f->nstructs, CX__MAX_STRUCTS);
    /* Nested structs have larger indices than their users: check from the last. */
    for (uint32_t si = f->nstructs; si-- > 0;) {
        struct cx__struct *s = &f->structs[si];
        s->has_ptr = false;
        if (!s->name || !s->name[0])
            return cx_err_set(EINVAL, "struct %u has no name", si);
        if (s->size > CX__MAX_SIZE || s->nfields < 1 || s->nfields > CX__MAX_FIELDS)
            return cx_err_set(EINVAL, "struct '%s': size %u or %u fields out of range", s->name,
                              s->size, s->nfields);
        for (uint32_t fi = 0; fi < s->nfields; fi++) {
            const struct cx__field *fd = &s->fields[fi];
            if (!fd->name || !fd->name[0] || strchr(fd->name, '.'))
                return cx_err_set(EINVAL, "struct '%s': field %u has a bad name", s->name, fi);
            for (uint32_t k = 0; k < fi; k++)
                if (!strcmp(s->fields[k].name, fd->name))
                    return cx_err_set(EINVAL, "struct '%s': field '%s' declared twice", s->name,
                                      fd->name);
#define FERR(...) cx_err_wrap(cx_err_set(EINVAL, __VA_ARGS__), "struct '%s' field '%s'", s->name, fd->name)
            if (fd->shape > CX_SHAPE_VAR)
                return FERR("bad shape %u", fd->shape);
            if ((fd->shape == CX_SHAPE_FIXED && fd->count < 1) ||
                (fd->shape != CX_SHAPE_FIXED && fd->count != 1))
                return FERR("bad element count %u", fd->count);
            if (fd->kind == CX_K_STRUCT) {
                if (fd->sub_idx <= (int32_t)si || fd->sub_idx >= (int32_t)f->nstructs)
                    return FERR("bad struct reference %d", fd->sub_idx);
                const struct cx__struct *sub = &f->structs[fd->sub_idx];
                if (fd->esize != sub->size)
                    return FERR("size %u differs from struct '%s' (%u)", fd->esize, sub->name,
                                sub->size);
                if (sub->has_ptr && fd->shape != CX_SHAPE_ONE)
                    return FERR("arrays of structs holding strings or variable arrays are not "
                                "supported");
                if (sub->has_ptr)
                    s->has_ptr = true;
            } else if (fd->kind == CX_K_STRING) {
                if (fd->esize != a->ptr_size || fd->shape != CX_SHAPE_ONE)
                    return FERR("strings are pointers and cannot be arrays");
                s->has_ptr = true;
            } else if (!scalar_size_ok(fd->kind, fd->esize)) {
                return FERR("bad size %u for kind %u", fd->esize, fd->kind);
            }
            if (fd->shape == CX_SHAPE_VAR) {
                if (fd->len_idx < 0 || fd->len_idx >= (int32_t)s->nfields ||
                    fd->len_idx == (int32_t)fi)
                    return FERR("bad length field reference");
                const struct cx__field *lf = &s->fields[fd->len_idx];
                if (!cx__is_intlike(lf->kind) || lf->kind == CX_K_BOOL ||
                    lf->shape != CX_SHAPE_ONE)
                    return FERR("length field '%s' is not an integer", lf->name);
                s->has_ptr = true;
            }
            uint64_t span = fd->shape == CX_SHAPE_VAR ? a->ptr_size
                                                      : (uint64_t)fd->esize * fd->count;
            if ((uint64_t)fd->offset + span > s->size)
                return FERR("offset %u + %llu bytes past the struct's %u bytes", fd->offset,
                            (unsigned long long)span, s->size);
#undef FERR
        }
    }
    return 0;
}

/* --- canonical description and token ------------------------------------------------- */

struct wbuf { uint8_t *p; size_t len, cap; int err; };

static void put(struct wbuf *w, const void *src, size_t n)
{
    if (w->err)
        return;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 256;
        while (cap < w->len + n)
            cap *= 2;
        uint8_t *p = realloc(w->p, cap);
        if (!p) { w->err = 1; return; }
        w->p = p;
        w->cap = cap;
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}
static void put_u(struct wbuf *w, uint64_t v, int n)
{
    uint8_t b[8];
    for (int i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, (size_t)n);
}
static void put_s(struct wbuf *w, const char *s)
{
    size_t n = strlen(s);
    put_u(w, n, 2);
    put(w, s, n);
}

static uint64_t hash64(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, then a splitmix64 finalizer */
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    h ^= h >> 30; h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27; h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h ? h : 1;
}

static int collect_slots(struct cx_format *f, uint32_t si, uint32_t base, const char *prefix,
                         int depth)
{
    const struct cx__struct *s = &f->structs[si];
    if (depth > CX_FORMAT_MAX_DEPTH)
        return cx_err_set(E2BIG, "structs nested deeper than %d", CX_FORMAT_MAX_DEPTH);
    for (uint32_t fi = 0; fi < s->nfields; fi++) {
        const struct cx__field *fd = &s->fields[fi];
        char path[512];
        snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", fd->name);
        if (fd->kind == CX_K_STRUCT && fd->shape == CX_SHAPE_ONE &&
            f->structs[fd->sub_idx].has_ptr) {
            int rc = collect_slots(f, (uint32_t)fd->sub_idx, base + fd->offset, path, depth + 1);
            if (rc < 0)
                return rc;
            continue;
        }
        if (fd->kind != CX_K_STRING && fd->shape != CX_SHAPE_VAR)
            continue;
        if (f->nslots >= CX_FORMAT_MAX_SLOTS)
            return cx_err_set(E2BIG, "more than %d strings and variable arrays",
                              CX_FORMAT_MAX_SLOTS);
        struct cx__slot *sl = &f->slots[f->nslots];
        memset(sl, 0, sizeof *sl);
        sl->offset = base + fd->offset;
        sl->kind = fd->kind;
        sl->is_var = fd->shape == CX_SHAPE_VAR;
        sl->esize = fd->esize;
        sl->field = fd;
        if (sl->is_var) {
            const struct cx__field *lf = &s->fields[fd->len_idx];
            sl->len_off = base + lf->offset;
            sl->len_kind = lf->kind;
            sl->len_size = (uint8_t)lf->esize;
        }
        if (!(sl->path = strdup(path)))
            return cx_err_set(ENOMEM, "out of memory");
        f->nslots++;
    }
    return 0;
}

int cx__format_finish(struct cx_format *f)
{
    int rc = cx__format_check(f);
    if (rc < 0)
        return rc;
    if ((rc = collect_slots(f, 0, 0, "", 0)) < 0)
        return rc;
    struct cx_arch nat;
    cx_arch_native(&nat);
    f->native = !memcmp(&nat, &f->arch, sizeof nat);
    struct wbuf w = {0};
    put(&w, "CXF1", 4);
    put_u(&w, f->arch.big_endian, 1);
    put_u(&w, f->arch.ptr_size, 1);
    put_u(&w, f->arch.long_size, 1);
    put_u(&w, f->arch.align8, 1);
    put_u(&w, f->nstructs, 4);
    for (uint32_t si = 0; si < f->nstructs; si++) {
        const struct cx__struct *s = &f->structs[si];
        put_s(&w, s->name);
        put_u(&w, s->size, 4);
        put_u(&w, s->align, 4);
        put_u(&w, s->nfields, 4);
        for (uint32_t fi = 0; fi < s->nfields; fi++) {
            const struct cx__field *fd = &s->fields[fi];
            uint64_t bits;
            memcpy(&bits, &fd->def, 8);
            put_s(&w, fd->name);
            put_u(&w, fd->kind, 1);
            put_u(&w, fd->shape, 1);
            put_u(&w, fd->has_def, 1);
            put_u(&w, fd->esize, 4);
            put_u(&w, fd->offset, 4);
            put_u(&w, fd->count, 4);
            put_u(&w, (uint32_t)fd->len_idx, 4);
            put_u(&w, (uint32_t)fd->sub_idx, 4);
            put_u(&w, fd->has_def ? bits : 0, 8);
        }
    }
    if (w.err) {
        free(w.p);
        return cx_err_set(ENOMEM, "out of memory");
    }
    f->desc = w.p;
    f->desc_len = w.len;
    f->token = hash64(w.p, w.len);
    return 0;
}

/* --- declarations -------------------------------------------------------------------- */

static int find_struct(const struct cx_struct_decl *decl, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(decl[i].name, name))
            return (int)i;
    return -1;
}

static uint32_t field_align(const struct cx_format *f, const struct cx__field *fd)
{
    if (fd->shape == CX_SHAPE_VAR || fd->kind == CX_K_STRING)
        return f->arch.ptr_size;
    if (fd->kind == CX_K_STRUCT)
        return f->structs[fd->sub_idx].align;
    return cx__scalar_align(fd->esize, &f->arch);
}

static int build_struct(struct cx_format *f, const struct cx_struct_decl *decl, uint32_t n,
                        uint32_t si)
{
    const struct cx_struct_decl *d = &decl[si];
    struct cx__struct *s = &f->structs[si];
    uint32_t nf = 0;
    while (d->fields && d->fields[nf].name)
        if (++nf > CX__MAX_FIELDS)
            return cx_err_set(E2BIG, "struct '%s': too many fields", d->name);
    if (nf == 0)
        return cx_err_set(EINVAL, "struct '%s' has no fields", d->name);
    if (!(s->name = strdup(d->name)) || !(s->fields = calloc(nf, sizeof *s->fields)))
        return cx_err_set(ENOMEM, "out of memory");
    s->nfields = nf;
    bool autolay = d->fields[0].offset == CX_OFFSET_AUTO;
    uint32_t cur = 0, maxalign = 1;
    for (uint32_t fi = 0; fi < nf; fi++) {
        const struct cx_field *in = &d->fields[fi];
        struct cx__field *fd = &s->fields[fi];
        struct cx__typespec ts;
        int rc;
        if (!(fd->name = strdup(in->name)))
            return cx_err_set(ENOMEM, "out of memory");
#define FERR(rc) cx_err_wrap((rc), "struct '%s' field '%s'", d->name, in->name)
        if ((in->offset == CX_OFFSET_AUTO) != autolay)
            return FERR(cx_err_set(EINVAL, "mixes automatic and explicit offsets"));
        if ((rc = cx__parse_type(in->type, &ts)) < 0)
            return FERR(rc);
        fd->count = ts.count;
        fd->shape = ts.var ? CX_SHAPE_VAR : ts.fixed ? CX_SHAPE_FIXED : CX_SHAPE_ONE;
        fd->len_idx = -1;
        fd->sub_idx = -1;
        rc = cx__builtin(ts.base, in->size, &f->arch, &fd->kind, &fd->esize);
        if (rc == -ENOENT) {
            int j = find_struct(decl, n, ts.base);
            if (j < 0)
                return FERR(cx_err_set(EINVAL, "unknown type '%s'", ts.base));
            if (j <= (int)si)
                return FERR(cx_err_set(EINVAL,
                                       "struct '%s' must be declared after its user (top first)",
                                       ts.base));
            fd->kind = CX_K_STRUCT;
            fd->sub_idx = j;
            fd->esize = f->structs[j].size;
        }
        if (in->size && in->size != fd->esize)
            return FERR(cx_err_set(EINVAL, "declared size %zu, type '%s' has %u", in->size,
                                   in->type, fd->esize));
        if (in->dflt && cx__is_scalar(fd->kind) && fd->shape == CX_SHAPE_ONE) {
            char *end;
            fd->def = strtod(in->dflt, &end);
            if (end == in->dflt || *end)
                return FERR(cx_err_set(EINVAL, "bad default '%s'", in->dflt));
            fd->has_def = 1;
        }
        if (fd->kind != CX_K_STRUCT && fd->kind != CX_K_STRING &&
            (fd->kind > CX_K_STRING || !scalar_size_ok(fd->kind, fd->esize)))
            return FERR(cx_err_set(EINVAL, "bad size %u for type '%s'", fd->esize, in->type));
        uint32_t al = field_align(f, fd);
        if (al > maxalign)
            maxalign = al;
        if (autolay) {
            uint64_t span = fd->shape == CX_SHAPE_VAR ? f->arch.ptr_size
                                                      : (uint64_t)fd->esize * fd->count;
            uint64_t off = cx__align_up(cur, al);
            if (off + span > CX__MAX_SIZE)
                return FERR(cx_err_set(E2BIG, "struct larger than %u bytes", CX__MAX_SIZE));
            fd->offset = (uint32_t)off;
            cur = (uint32_t)(off + span);
        } else {
            if (in->offset > CX__MAX_SIZE)
                return FERR(cx_err_set(EINVAL, "offset %zu too large", in->offset));
            fd->offset = (uint32_t)in->offset;
        }
#undef FERR
    }
    for (uint32_t fi = 0; fi < nf; fi++) {
        struct cx__field *fd = &s->fields[fi];
        if (fd->shape != CX_SHAPE_VAR)
            continue;
        struct cx__typespec ts;
        cx__parse_type(d->fields[fi].type, &ts);
        for (uint32_t k = 0; k < nf; k++)
            if (!strcmp(s->fields[k].name, ts.len_name))
                fd->len_idx = (int32_t)k;
        if (fd->len_idx < 0)
            return cx_err_set(EINVAL, "struct '%s' field '%s': no length field '%s'", d->name,
                              fd->name, ts.len_name);
    }
    s->align = maxalign;
    if (autolay) {
        s->size = cx__align_up(cur, maxalign);
        if (d->size && d->size != s->size)
            return cx_err_set(EINVAL, "struct '%s': declared size %zu, layout gives %u",
                              d->name, d->size, s->size);
    } else {
        if (d->size == 0 || d->size > CX__MAX_SIZE)
            return cx_err_set(EINVAL, "struct '%s': explicit offsets need its size", d->name);
        s->size = (uint32_t)d->size;
    }
    return 0;
}

int cx_format_create(const struct cx_struct_decl *decl, const struct cx_arch *arch,
                     struct cx_format **out)
{
    int rc;
    uint32_t n = 0;
    *out = NULL;
    if (!decl)
        return cx_err_set(EINVAL, "no declaration");
    while (decl[n].name)
        if (++n > CX__MAX_STRUCTS)
            return cx_err_set(E2BIG, "more than %u structs", CX__MAX_STRUCTS);
    if (n == 0)
        return cx_err_set(EINVAL, "empty declaration");
    struct cx_format *f = calloc(1, sizeof *f);
    if (!f || !(f->structs = calloc(n, sizeof *f->structs))) {
        free(f);
        return cx_err_set(ENOMEM, "out of memory");
    }
    f->nstructs = n;
    if (arch)
        f->arch = *arch;
    else
        cx_arch_native(&f->arch);
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < i; j++)
            if (!strcmp(decl[i].name, decl[j].name)) {
                rc = cx_err_set(EINVAL, "struct '%s' declared twice", decl[i].name);
                goto error;
            }
    for (uint32_t i = n; i-- > 0;)
        if ((rc = build_struct(f, decl, n, i)) < 0)
            goto error;
    if ((rc = cx__format_finish(f)) < 0)
        goto error;
    *out = f;
    return 0;
error:
    cx_err_wrap(rc, "format '%s'", decl[0].name);
    cx_format_free(f);
    return rc;
}
