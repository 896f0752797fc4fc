/* Reflection over wire-form events (cx_reflect.h). */
#include "format/cx_reflect.h"

#include "common/cx_error.h"
#include "format/cx_format_int.h"
#include "format/cx_format_registry.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

int cx_reflect_open_format(const struct cx_format *f, const void *buf, size_t len,
                           struct cx_view *v)
{
    int rc = cx__event_check(f, buf, len, &v->fixed);
    if (rc < 0)
        return cx_err_wrap(rc, "event of format '%s'", f->structs[0].name);
    v->f = f;
    v->buf = buf;
    v->len = len;
    return 0;
}

int cx_reflect_open(uint64_t token, const void *buf, size_t len, struct cx_view *v)
{
    const struct cx_format *f = cx_format_registry_lookup(token);
    if (!f)
        return -cx_errcode();
    return cx_reflect_open_format(f, buf, len, v);
}

int cx_reflect_count(const struct cx_view *v) { return (int)v->f->structs[0].nfields; }

static const struct cx__slot *slot_for(const struct cx_view *v, const char *path,
                                       uint32_t *idx)
{
    for (uint32_t i = 0; i < v->f->nslots; i++)
        if (!strcmp(v->f->slots[i].path, path)) {
            *idx = i;
            return &v->f->slots[i];
        }
    return NULL;
}

int cx_reflect_field(const struct cx_view *v, int i, struct cx_field_info *fi)
{
    if (i < 0 || (uint32_t)i >= v->f->structs[0].nfields)
        return cx_err_set(ERANGE, "field %d of %u", i, v->f->structs[0].nfields);
    const struct cx__field *fd = &v->f->structs[0].fields[i];
    fi->name = fd->name;
    fi->kind = fd->kind;
    fi->shape = fd->shape;
    fi->size = fd->esize;
    fi->count = fd->count;
    fi->type_name = fd->kind == CX_K_STRUCT ? v->f->structs[fd->sub_idx].name : NULL;
    uint32_t si;
    const struct cx__slot *s;
    if (fd->shape == CX_SHAPE_VAR && (s = slot_for(v, fd->name, &si)))
        fi->count = (uint64_t)cx__slot_count(v->f, s, v->fixed);
    return 0;
}

static void read_scalar(const struct cx_format *f, const struct cx__field *fd, const uint8_t *p,
                        struct cx_value *val)
{
    bool swap = f->arch.big_endian != CX__HOST_BE;
    memset(val, 0, sizeof *val);
    val->kind = fd->kind;
    if (fd->kind == CX_K_FLOAT)
        val->d = cx__load_f(p, fd->esize, swap);
    else if (cx__is_signed(fd->kind))
        val->i = cx__load_i(p, fd->esize, swap);
    else
        val->u = cx__load_u(p, fd->esize, swap);
}

/* Finds the field at path: its struct-relative data pointer for element 0 (for a variable
 * array, the part's data) and its element count. */
static int locate(const struct cx_view *v, const char *path, const struct cx__field **out,
                  const uint8_t **data, uint64_t *count)
{
    uint32_t si = 0, base = 0;
    const char *p = path;
    for (int depth = 0; depth <= CX_FORMAT_MAX_DEPTH; depth++) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        const struct cx__struct *s = &v->f->structs[si];
        const struct cx__field *fd = NULL;
        for (uint32_t i = 0; i < s->nfields; i++)
            if (strlen(s->fields[i].name) == n && !memcmp(s->fields[i].name, p, n))
                fd = &s->fields[i];
        if (!fd)
            break;
        if (dot) {
            if (fd->kind != CX_K_STRUCT || fd->shape != CX_SHAPE_ONE)
                break;
            si = (uint32_t)fd->sub_idx;
            base += fd->offset;
            p = dot + 1;
            continue;
        }
        *out = fd;
        if (fd->shape == CX_SHAPE_VAR || fd->kind == CX_K_STRING) {
            uint32_t idx;
            const struct cx__slot *sl = slot_for(v, path, &idx);
            uint64_t off, len;
            if (!sl)
                break;
            cx__slot_get(v->buf, idx, &off, &len);
            *data = len ? v->buf + off : NULL;
            *count = fd->kind == CX_K_STRING ? 1 : (uint64_t)cx__slot_count(v->f, sl, v->fixed);
        } else {
            *data = v->fixed + base + fd->offset;
            *count = fd->count;
        }
        return 0;
    }
    return cx_err_set(ENOENT, "format '%s' has no field '%s'", v->f->structs[0].name, path);
}

int cx_reflect_get(const struct cx_view *v, const char *path, uint64_t index,
                   struct cx_value *val)
{
    const struct cx__field *fd = NULL;
    const uint8_t *data = NULL;
    uint64_t count = 0;
    int rc = locate(v, path, &fd, &data, &count);
    if (rc < 0)
        return rc;
    if (fd->kind == CX_K_STRUCT)
        return cx_err_set(EINVAL, "'%s' is a struct: read its fields", path);
    if (index >= count)
        return cx_err_set(ERANGE, "'%s' has %" PRIu64 " elements, index %" PRIu64, path, count,
                          index);
    if (fd->kind == CX_K_STRING) {
        memset(val, 0, sizeof *val);
        val->kind = CX_K_STRING;
        val->s = (const char *)data;
        return 0;
    }
    read_scalar(v->f, fd, data + index * fd->esize, val);
    return 0;
}

/* --- JSON ----------------------------------------------------------------------------- */

struct out { char *p; size_t cap, len; };

static void emit(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(struct out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int n = vsnprintf(room ? o->p + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

static void emit_str(struct out *o, const char *s, size_t max)
{
    emit(o, "\"");
    for (size_t i = 0; i < max && s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            emit(o, "\\%c", c);
        else if (c < 0x20)
            emit(o, "\\u%04x", c);
        else
            emit(o, "%c", c);
    }
    emit(o, "\"");
}

static void emit_scalar(struct out *o, const struct cx_format *f, const struct cx__field *fd,
                        const uint8_t *p)
{
    struct cx_value v;
    read_scalar(f, fd, p, &v);
    switch (fd->kind) {
    case CX_K_FLOAT:
        if (!isfinite(v.d))
            emit(o, "null");
        else
            emit(o, fd->esize == 4 ? "%.9g" : "%.17g", v.d);
        break;
    case CX_K_INT: case CX_K_ENUM: emit(o, "%" PRId64, v.i); break;
    case CX_K_BOOL: emit(o, v.u ? "true" : "false"); break;
    case CX_K_CHAR: { char c = (char)v.u; emit_str(o, &c, 1); break; }
    default: emit(o, "%" PRIu64, v.u); break;
    }
}

static void emit_struct(struct out *o, const struct cx_view *v, uint32_t si, const uint8_t *p,
                        const char *prefix);

static void emit_elems(struct out *o, const struct cx_view *v, const struct cx__field *fd,
                       const uint8_t *p, uint64_t n)
{
    if (fd->kind == CX_K_CHAR) {
        emit_str(o, (const char *)p, n);
        return;
    }
    emit(o, "[");
    for (uint64_t i = 0; i < n; i++) {
        if (i)
            emit(o, ",");
        if (fd->kind == CX_K_STRUCT)
            emit_struct(o, v, (uint32_t)fd->sub_idx, p + i * fd->esize, NULL);
        else
            emit_scalar(o, v->f, fd, p + i * fd->esize);
    }
    emit(o, "]");
}

/* prefix: the dotted path of this struct in the fixed part ("" for the top), or NULL for
 * an element of a variable array (which holds no pointers). */
static void emit_struct(struct out *o, const struct cx_view *v, uint32_t si, const uint8_t *p,
                        const char *prefix)
{
    const struct cx__struct *s = &v->f->structs[si];
    emit(o, "{");
    for (uint32_t i = 0; i < s->nfields; i++) {
        const struct cx__field *fd = &s->fields[i];
        const uint8_t *fp = p + fd->offset;
        if (i)
            emit(o, ",");
        emit_str(o, fd->name, SIZE_MAX);
        emit(o, ":");
        char path[512] = "";
        if (prefix)
            snprintf(path, sizeof path, "%s%s%s", prefix, prefix[0] ? "." : "", fd->name);
        if (fd->kind == CX_K_STRING || fd->shape == CX_SHAPE_VAR) {
            uint32_t idx;
            const struct cx__slot *sl = prefix ? slot_for(v, path, &idx) : NULL;
            uint64_t off, len;
            if (!sl) {
                emit(o, "null");
                continue;
            }
            cx__slot_get(v->buf, idx, &off, &len);
            if (fd->kind == CX_K_STRING) {
                if (len)
                    emit_str(o, (const char *)v->buf + off, len);
                else
                    emit(o, "null");
            } else {
                emit_elems(o, v, fd, v->buf + off, (uint64_t)cx__slot_count(v->f, sl, v->fixed));
            }
        } else if (fd->shape == CX_SHAPE_FIXED) {
            emit_elems(o, v, fd, fp, fd->count);
        } else if (fd->kind == CX_K_STRUCT) {
            emit_struct(o, v, (uint32_t)fd->sub_idx, fp, prefix ? path : NULL);
        } else {
            emit_scalar(o, v->f, fd, fp);
        }
    }
    emit(o, "}");
}

long cx_reflect_json(const struct cx_view *v, char *out, size_t cap)
{
    struct out o = {out, cap, 0};
    if (cap)
        out[0] = '\0';
    emit_struct(&o, v, 0, v->fixed, "");
    return (long)o.len;
}
