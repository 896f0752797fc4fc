/* The filter interpreter: a fixed-size value stack on the C stack, no allocation. The event
 * is checked first by the format layer (cx__event_check: side area, every slot in bounds,
 * lengths that agree), so loads need no further checks; each load still re-checks its
 * bounds against len, cheaply, so a compiler bug cannot turn into a read past the event. */
#include "filter/cx_filter_int.h"

#include "common/cx_error.h"

#include <inttypes.h>
#include <math.h>

struct val {
    union { int64_t i; uint64_t u; double d; const char *s; };
    uint64_t n; /* string length */
};

#define DROP 0

static int read_past(const struct cx_filter *f, uint64_t at, uint64_t n, size_t len)
{
    return cx_err_set(EBADMSG, "filter on format '%s': read of %" PRIu64 " bytes at %" PRIu64
                      " past the event's %zu", f->fmt->structs[0].name, n, at, len);
}

static void load(const struct cx__insn *in, const uint8_t *p, bool swap, struct val *v)
{
    switch (in->kind) {
    case CX_K_FLOAT:
        v->d = cx__load_f(p, in->size, swap);
        break;
    case CX_K_INT:
    case CX_K_ENUM:
        v->i = cx__load_i(p, in->size, swap);
        break;
    case CX_K_BOOL:
        v->i = cx__load_u(p, in->size, swap) != 0;
        break;
    default: /* UINT (a uint when 8 bytes, else it fits an int), CHAR */
        v->u = cx__load_u(p, in->size, swap);
        break;
    }
}

/* a <=> b for the comparison mode: -1, 0 or 1 (2 when unordered: NaN). */
static int compare(uint8_t mode, const struct val *a, const struct val *b)
{
    switch (mode) {
    case CM_INT: return (a->i > b->i) - (a->i < b->i);
    case CM_UINT: return (a->u > b->u) - (a->u < b->u);
    case CM_INT_UINT: return a->i < 0 ? -1 : ((a->u > b->u) - (a->u < b->u));
    case CM_UINT_INT: return b->i < 0 ? 1 : ((a->u > b->u) - (a->u < b->u));
    default:
        if (isnan(a->d) || isnan(b->d))
            return 2;
        return (a->d > b->d) - (a->d < b->d);
    }
}

static bool cmp_holds(uint8_t op, int c)
{
    switch (op) {
    case OP_LT: return c == -1;
    case OP_LE: return c == -1 || c == 0;
    case OP_GT: return c == 1;
    case OP_GE: return c == 1 || c == 0;
    case OP_EQ: return c == 0;
    default: return c != 0; /* OP_NE: NaN != x holds, as in C */
    }
}

/* Integer + - * / %, wrapping modulo 2^64. Returns false on a zero divisor. */
static bool arith_int(uint8_t op, uint8_t mode, struct val *a, const struct val *b)
{
    switch (op) {
    case OP_ADD: a->u = a->u + b->u; return true;
    case OP_SUB: a->u = a->u - b->u; return true;
    case OP_MUL: a->u = a->u * b->u; return true;
    default: break;
    }
    if (b->u == 0)
        return false;
    if (mode == TY_UINT) {
        a->u = op == OP_DIV ? a->u / b->u : a->u % b->u;
    } else if (b->i == -1) { /* INT64_MIN / -1 overflows in C: wrap instead */
        a->u = op == OP_DIV ? 0 - a->u : 0;
    } else {
        a->i = op == OP_DIV ? a->i / b->i : a->i % b->i;
    }
    return true;
}

static bool arith_flt(uint8_t op, struct val *a, const struct val *b)
{
    switch (op) {
    case OP_ADD: a->d += b->d; return true;
    case OP_SUB: a->d -= b->d; return true;
    case OP_MUL: a->d *= b->d; return true;
    default: break;
    }
    if (b->d == 0.0)
        return false;
    a->d = op == OP_DIV ? a->d / b->d : fmod(a->d, b->d);
    return true;
}

static bool truth(uint8_t mode, const struct val *v)
{
    return mode == TY_FLT ? v->d != 0.0 : v->u != 0;
}

int cx_filter_eval(const struct cx_filter *f, const void *event, size_t len)
{
    if (!f || !event)
        return cx_err_set(EINVAL, "filter: %s is NULL", f ? "the event" : "the filter");
    const struct cx_format *fmt = f->fmt;
    const uint8_t *buf = event, *fixed;
    int rc = cx__event_check(fmt, buf, len, &fixed);
    if (rc < 0)
        return cx_err_wrap(-EBADMSG, "filter on format '%s'", fmt->structs[0].name);
    struct val st[CX_FILTER_MAX_STACK + 1];
    struct val *sp = st; /* top of stack; st[0] is never used, so no pointer before st */
    const bool swap = f->swap;
    for (uint32_t pc = 0;; pc++) {
        const struct cx__insn *in = &f->code[pc];
        uint64_t off, n, at;
        switch (in->op) {
        case OP_END:
            return sp->i != 0;
        case OP_PUSH:
            (++sp)->u = in->k.u;
            if (in->mode == TY_FLT)
                sp->d = in->k.d;
            break;
        case OP_PUSHS:
            ++sp;
            sp->s = f->pool + in->a;
            sp->n = in->b;
            break;
        case OP_LOADK:
        case OP_LOAD:
            at = in->op == OP_LOAD ? (sp--)->u + in->b : in->b;
            if (at > len || in->size > len - at)
                return read_past(f, at, in->size, len);
            load(in, buf + at, swap, ++sp);
            break;
        case OP_IDX: {
            const struct val *ix = sp--;
            if ((in->mode == TY_INT && ix->i < 0) || ix->u >= in->b)
                return DROP;
            sp->u += ix->u * in->k.u;
            break;
        }
        case OP_VIDX: {
            int64_t cnt = cx__slot_count(fmt, &fmt->slots[in->a], fixed);
            if ((in->mode == TY_INT && sp->i < 0) || sp->u >= (uint64_t)cnt)
                return DROP;
            cx__slot_get(buf, in->a, &off, &n);
            sp->u = off + sp->u * in->k.u;
            break;
        }
        case OP_STRK:
        case OP_STR:
            at = in->op == OP_STR ? (sp--)->u + in->k.u : in->k.u;
            if (at > len || in->b > len - at)
                return read_past(f, at, in->b, len);
            ++sp;
            sp->s = (const char *)buf + at;
            sp->n = strnlen(sp->s, in->b);
            break;
        case OP_SSLOT:
        case OP_LENSTR:
            cx__slot_get(buf, in->a, &off, &n);
            ++sp;
            sp->s = n ? (const char *)buf + off : "";
            sp->n = n ? strnlen(sp->s, n) : 0;
            if (in->op == OP_LENSTR)
                sp->i = (int64_t)sp->n;
            break;
        case OP_LENSLOT:
            (++sp)->i = cx__slot_count(fmt, &fmt->slots[in->a], fixed);
            break;
        case OP_I2F: sp->d = (double)sp->i; break;
        case OP_U2F: sp->d = (double)sp->u; break;
        case OP_NEG:
            if (in->mode == TY_FLT)
                sp->d = -sp->d;
            else
                sp->u = 0 - sp->u;
            break;
        case OP_NOT:
            sp->i = !truth(in->mode, sp);
            break;
        case OP_TRUTH:
            sp->i = truth(in->mode, sp);
            break;
        case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_MOD:
            sp--;
            if (!(in->mode == TY_FLT ? arith_flt(in->op, sp, sp + 1)
                                     : arith_int(in->op, in->mode, sp, sp + 1)))
                return DROP; /* division by zero: documented to drop the event */
            break;
        case OP_LT: case OP_LE: case OP_GT: case OP_GE: case OP_EQ: case OP_NE:
            sp--;
            sp->i = cmp_holds(in->op, compare(in->mode, sp, sp + 1));
            break;
        case OP_SEQ:
        case OP_SNE: {
            sp--;
            bool eq = sp->n == sp[1].n && !memcmp(sp->s, sp[1].s, sp->n);
            sp->i = in->op == OP_SEQ ? eq : !eq;
            break;
        }
        case OP_JZ:
            if (sp->i == 0)
                pc = in->a - 1;
            break;
        case OP_JNZ:
            if (sp->i != 0)
                pc = in->a - 1;
            break;
        case OP_POP:
            sp--;
            break;
        default:
            return cx_err_set(EINVAL, "filter: bad instruction %u at %u", in->op, pc);
        }
    }
}
