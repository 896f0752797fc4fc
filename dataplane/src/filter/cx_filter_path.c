/* Field paths (pos.x, pts[i].y, vals[2], tag): resolved once, at compile time, against the
 * format's tables to a static offset plus the dynamic indices that remain, so evaluation
 * never looks a name up. */
#include "filter/cx_filter_int.h"

#include "common/cx_error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int cx__acc_new(struct cx__compiler *c)
{
    if (c->naccs == c->cap_accs) {
        uint32_t cap = c->cap_accs ? c->cap_accs * 2 : 8;
        struct cx__access *a = realloc(c->accs, cap * sizeof *a);
        if (!a)
            return cx_err_set(ENOMEM, "filter field table of %u entries", cap);
        c->accs = a;
        c->cap_accs = cap;
    }
    memset(&c->accs[c->naccs], 0, sizeof c->accs[0]);
    return (int)c->naccs++;
}

static const struct cx__field *find_field(const struct cx__struct *s, const char *name,
                                          size_t n)
{
    for (uint32_t i = 0; i < s->nfields; i++)
        if (strlen(s->fields[i].name) == n && !memcmp(s->fields[i].name, name, n))
            return &s->fields[i];
    return NULL;
}

static int unknown_field(const struct cx__compiler *c, uint32_t si, uint32_t col,
                         const char *name, size_t n)
{
    const struct cx__struct *s = &c->fmt->structs[si];
    char list[200] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < s->nfields; i++) {
        size_t w = strlen(s->fields[i].name) + 2;
        if (used + w + 5 >= sizeof list) { /* keep room for ", ..." */
            memcpy(list + used, ", ...", 6);
            break;
        }
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 s->fields[i].name);
    }
    return cx__syntax(EINVAL, col, "unknown field '%.*s' (%s '%s' has: %s)",
                      (int)(n > 64 ? 64 : n), name, si ? "struct" : "format", s->name, list);
}

/* The slot of a string / variable array field at top-struct offset `off`. */
static int slot_of(const struct cx_format *f, const struct cx__field *fd, uint64_t off)
{
    for (uint32_t i = 0; i < f->nslots; i++)
        if (f->slots[i].field == fd && f->slots[i].offset == off)
            return (int)i;
    return -1;
}

static uint8_t value_type(const struct cx__field *fd)
{
    if (fd->kind == CX_K_FLOAT)
        return TY_FLT;
    if (fd->kind == CX_K_UINT && fd->esize == 8)
        return TY_UINT;
    return TY_INT;
}

/* Parses "[ expr ]" after the array field fd and records it in access a. */
static int parse_index(struct cx__compiler *c, int ai, const struct cx__field *fd, int slot)
{
    uint32_t col = c->tok.col;
    int rc;
    if (++c->depth > CX_FILTER_MAX_DEPTH)
        return cx__syntax(E2BIG, col, "filter nested deeper than %d levels",
                          CX_FILTER_MAX_DEPTH);
    if ((rc = cx__lex_next(c)) < 0)
        return rc;
    int ix = cx__parse_expr(c);
    if (ix < 0)
        return ix;
    if (c->nodes[ix].type != TY_INT && c->nodes[ix].type != TY_UINT)
        return cx__syntax(EINVAL, c->nodes[ix].col, "the index of '%s' must be an integer, "
                          "not a %s", fd->name, c->nodes[ix].type == TY_STR ? "string" : "float");
    if (c->tok.t != TK_RBRACK) {
        char show[40];
        return cx__syntax(EINVAL, c->tok.col, "expected ']' to close the '[' at col %u, found %s",
                          col, cx__tok_show(c, show, sizeof show));
    }
    c->depth--;
    if ((rc = cx__lex_next(c)) < 0)
        return rc;
    struct cx__access *a = &c->accs[ai];
    const struct cx__node *n = &c->nodes[ix];
    if (fd->shape == CX_SHAPE_FIXED) {
        a->off += fd->offset;
        if (n->kind == N_NUM) { /* a literal index is checked and folded now */
            if ((n->type == TY_INT && n->k.i < 0) || n->k.u >= fd->count)
                return cx__syntax(EINVAL, n->col, "index %s%" PRIu64 " is out of range for "
                                  "'%s' (%u elements)", n->type == TY_INT && n->k.i < 0 ? "-" : "",
                                  n->type == TY_INT && n->k.i < 0 ? 0 - n->k.u : n->k.u,
                                  fd->name, fd->count);
            a->off += n->k.u * fd->esize;
            return 0;
        }
    } else { /* variable array: the element lives in the slot's part */
        a->var = true;
        a->slot = (uint32_t)slot;
        a->off = 0;
    }
    if (a->nidx >= CX__MAX_IDX)
        return cx__syntax(E2BIG, col, "more than %d indices in one field path", CX__MAX_IDX);
    a->idx[a->nidx].node = ix;
    a->idx[a->nidx].count = fd->shape == CX_SHAPE_FIXED ? fd->count : 0;
    a->idx[a->nidx].stride = fd->esize;
    a->nidx++;
    return 0;
}

int cx__parse_path(struct cx__compiler *c, int mode)
{
    const struct cx_format *f = c->fmt;
    const uint64_t side = CX__SIDE_HDR + (uint64_t)CX__SIDE_SLOT * f->nslots;
    int ai = cx__acc_new(c);
    if (ai < 0)
        return ai;
    c->accs[ai].off = side; /* static offsets of the fixed part count from the event start */
    uint32_t si = 0;
    const struct cx__field *fd;
    bool indexed;
    int slot, rc;
    uint32_t col;
    for (;;) {
        col = c->tok.col;
        if (!(fd = find_field(&f->structs[si], c->tok.text, c->tok.len)))
            return unknown_field(c, si, col, c->tok.text, c->tok.len);
        if ((rc = cx__lex_next(c)) < 0)
            return rc;
        slot = -1;
        struct cx__access *a = &c->accs[ai];
        if (fd->kind == CX_K_STRING || fd->shape == CX_SHAPE_VAR) {
            /* the format keeps these out of arrays, so a is still static and fixed here */
            if (a->var || a->nidx || (slot = slot_of(f, fd, a->off - side + fd->offset)) < 0)
                return cx__syntax(EINVAL, col, "field '%s' has no slot in format '%s'",
                                  fd->name, f->structs[0].name);
        }
        indexed = c->tok.t == TK_LBRACK;
        if (indexed) {
            if (fd->shape == CX_SHAPE_ONE)
                return cx__syntax(EINVAL, c->tok.col, "'%s' is not an array", fd->name);
            if ((rc = parse_index(c, ai, fd, slot)) < 0)
                return rc;
            if (c->tok.t == TK_LBRACK)
                return cx__syntax(EINVAL, c->tok.col, "'%s' takes one index (fixed "
                                  "multi-dimensional arrays are flattened)", fd->name);
        } else if (slot < 0) {
            a->off += fd->offset;
        }
        if (c->tok.t != TK_DOT)
            break;
        if (fd->kind != CX_K_STRUCT)
            return cx__syntax(EINVAL, c->tok.col, "'%s' is not a struct", fd->name);
        if (fd->shape != CX_SHAPE_ONE && !indexed)
            return cx__syntax(EINVAL, c->tok.col, "'%s' is an array of structs: index it "
                              "first (%s[0].field)", fd->name, fd->name);
        si = (uint32_t)fd->sub_idx;
        if ((rc = cx__lex_next(c)) < 0)
            return rc;
        if (c->tok.t != TK_IDENT) {
            char show[40];
            return cx__syntax(EINVAL, c->tok.col, "expected a field name after '.', found %s",
                              cx__tok_show(c, show, sizeof show));
        }
    }

    bool whole_array = fd->shape != CX_SHAPE_ONE && !indexed;
    int n;
    if (mode == PATH_ARRAY) { /* the argument of a reduction: a whole array of numbers */
        if (!whole_array || fd->kind == CX_K_STRUCT || fd->kind == CX_K_STRING)
            return cx__syntax(EINVAL, col, "'%s' is not an array of numbers (a reduction "
                              "needs one, e.g. sum(vals))", fd->name);
        if ((n = cx__node_new(c, N_REDUCE, col)) < 0)
            return n;
        c->accs[ai].kind = fd->kind;
        c->accs[ai].size = (uint8_t)fd->esize;
        c->nodes[n].acc = ai;
        c->nodes[n].type = value_type(fd);
        if (fd->shape == CX_SHAPE_VAR) {
            c->nodes[n].slot = (uint32_t)slot;
            c->nodes[n].k.u = 0; /* variable: counted as CX_FILTER_VAR_ELEMS */
        } else {
            c->nodes[n].slot = UINT32_MAX;
            c->nodes[n].k.u = fd->count;
        }
        return n;
    }
    if (mode == PATH_LEN) {
        if (whole_array && fd->shape == CX_SHAPE_FIXED) {
            if ((n = cx__node_new(c, N_NUM, col)) < 0)
                return n;
            c->nodes[n].k.i = fd->count;
        } else if (whole_array || fd->kind == CX_K_STRING) {
            if ((n = cx__node_new(c, whole_array ? N_LENSLOT : N_LENSTR, col)) < 0)
                return n;
            c->nodes[n].slot = (uint32_t)slot;
        } else {
            return cx__syntax(EINVAL, col, "len() needs an array or a string; '%s' is a %s",
                              fd->name, fd->kind == CX_K_STRUCT ? "struct" : "number");
        }
        c->nodes[n].type = TY_INT;
        return n;
    }
    if (fd->kind == CX_K_STRUCT && !whole_array)
        return cx__syntax(EINVAL, col, "'%s' is a struct: use one of its fields (%s.%s)",
                          fd->name, fd->name, c->fmt->structs[fd->sub_idx].nfields
                              ? c->fmt->structs[fd->sub_idx].fields[0].name : "x");
    if (whole_array && fd->kind != CX_K_CHAR)
        return cx__syntax(EINVAL, col, "'%s' is an array: index it (%s[0]) or use len(%s)",
                          fd->name, fd->name, fd->name);
    if (whole_array && fd->shape == CX_SHAPE_FIXED) { /* char[N] reads as a string */
        if ((n = cx__node_new(c, N_STRFIX, col)) < 0)
            return n;
        c->accs[ai].count = fd->count;
        c->nodes[n].acc = ai;
        c->nodes[n].type = TY_STR;
        return n;
    }
    if (whole_array || fd->kind == CX_K_STRING) { /* string, or char[n] */
        if ((n = cx__node_new(c, N_STRSLOT, col)) < 0)
            return n;
        c->nodes[n].slot = (uint32_t)slot;
        c->nodes[n].type = TY_STR;
        return n;
    }
    if ((n = cx__node_new(c, N_LOAD, col)) < 0)
        return n;
    c->accs[ai].kind = fd->kind;
    c->accs[ai].size = (uint8_t)fd->esize;
    c->nodes[n].acc = ai;
    c->nodes[n].type = value_type(fd);
    return n;
}
