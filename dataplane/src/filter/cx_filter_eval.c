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

static uint8_t elem_type(const struct cx__insn *in)
{
    return in->kind == CX_K_FLOAT ? TY_FLT
           : (in->kind == CX_K_UINT && in->size == 8) ? TY_UINT : TY_INT;
}

static double as_double(uint8_t t, const struct val *v)
{
    return t == TY_FLT ? v->d : t == TY_UINT ? (double)v->u : (double)v->i;
}

/* One reduction loop over native floats or doubles (the common case, one load each). */
#define RED_NATIVE(T)                                                                      \
    do {                                                                                   \
        T e;                                                                               \
        memcpy(&e, p, sizeof e);                                                           \
        double a = e;                                                                      \
        for (uint64_t i = 1; i < cnt; i++) {                                               \
            memcpy(&e, p + i * sizeof e, sizeof e);                                        \
            if (in->mode == R_SUM || in->mode == R_MEAN)                                   \
                a += e;                                                                    \
            else if (in->mode == R_MAX ? e > a : e < a)                                    \
                a = e;                                                                     \
        }                                                                                  \
        out->d = in->mode == R_MEAN ? a / (double)cnt : a;                                 \
    } while (0)

/* sum / mean / max / min over cnt elements at p. False (drop) for the mean, max or min of
 * no element. A NaN element never replaces the max or min (as in a comparison). */
static bool reduce(const struct cx__insn *in, const uint8_t *p, uint64_t cnt, bool swap,
                   struct val *out)
{
    const uint8_t et = elem_type(in);
    const uint8_t cm = et == TY_FLT ? CM_FLT : et == TY_UINT ? CM_UINT : CM_INT;
    if (cnt == 0) {
        out->u = 0;
        if (et == TY_FLT)
            out->d = 0;
        return in->mode == R_SUM;
    }
    if (et == TY_FLT && !swap) {
        if (in->size == 4)
            RED_NATIVE(float);
        else
            RED_NATIVE(double);
        return true;
    }
    struct val acc, v;
    load(in, p, swap, &acc);
    double dsum = as_double(et, &acc);
    for (uint64_t i = 1; i < cnt; i++) {
        load(in, p + i * in->size, swap, &v);
        switch (in->mode) {
        case R_SUM:
            if (et == TY_FLT)
                acc.d += v.d;
            else
                acc.u += v.u; /* wraps modulo 2^64, as + does */
            break;
        case R_MEAN: dsum += as_double(et, &v); break;
        case R_MAX: if (compare(cm, &v, &acc) == 1) acc = v; break;
        default: if (compare(cm, &v, &acc) == -1) acc = v; break;
        }
    }
    if (in->mode == R_MEAN)
        out->d = dsum / (double)cnt;
    else
        *out = acc;
    return true;
}

/* A stateful call; its arguments (floats) are at sp[1 - nargs .. 0]. Returns the new sp. */
static struct val *state_op(const struct cx__insn *in, struct cx__state *s, struct val *sp)
{
    double x;
    int hit;
    switch (in->mode) {
    case S_COUNT:
        (++sp)->i = ++s->n;
        return sp;
    case S_EVERY:
        hit = ++s->n >= in->k.i;
        if (hit)
            s->n = 0;
        (++sp)->i = hit;
        return sp;
    case S_CHANGED:
        sp--;
        x = sp->d;
        hit = !s->n || fabs(x - s->a) > sp[1].d;
        if (hit) {
            s->a = x;
            s->n = 1;
        }
        sp->i = hit;
        return sp;
    case S_PREV:
        x = sp->d;
        sp->d = s->n ? s->a : x;
        s->a = x;
        s->n = 1;
        return sp;
    case S_TOTAL:
        s->a += sp->d;
        sp->d = s->a;
        return sp;
    default: /* the windows: the aggregate of this window so far, this event included */
        x = sp->d;
        if (s->n == 0)
            s->a = x;
        else if (in->mode == S_WMAX)
            s->a = x > s->a ? x : s->a;
        else if (in->mode == S_WMIN)
            s->a = x < s->a ? x : s->a;
        else
            s->a += x;
        s->n++;
        sp->d = in->mode == S_WMEAN ? s->a / (double)s->n : s->a;
        if (s->n >= in->k.i)
            s->n = 0; /* the window is complete: the next event starts another */
        return sp;
    }
}

static int run(const struct cx_filter *f, struct cx__state *stt, const void *event,
               size_t len, uint64_t seq, uint64_t member, uint64_t members,
               union cx_filter_value *res)
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
    int pass = 1;
    for (uint32_t pc = 0;; pc++) {
        const struct cx__insn *in = &f->code[pc];
        uint64_t off, n, at;
        switch (in->op) {
        case OP_END:
            return in->mode ? pass : sp->i != 0;
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
        case OP_FN:
            if (in->mode == F_SQRT) {
                sp->d = sqrt(sp->d);
            } else if (in->mode == F_ABS) {
                if (in->kind == TY_FLT)
                    sp->d = fabs(sp->d);
                else if (sp->i < 0)
                    sp->u = 0 - sp->u;
            } else { /* F_INT of a float: toward zero; NaN or out of range drops */
                if (!(sp->d > -9223372036854775808.0 && sp->d < 9223372036854775808.0))
                    return DROP;
                sp->i = (int64_t)sp->d;
            }
            break;
        case OP_MIN:
        case OP_MAX: {
            sp--;
            uint8_t cm = in->mode == TY_FLT ? CM_FLT : in->mode == TY_UINT ? CM_UINT : CM_INT;
            int c = compare(cm, &sp[1], sp);
            if ((in->op == OP_MIN && c == -1) || (in->op == OP_MAX && c == 1) ||
                (c == 2 && isnan(sp->d)))
                *sp = sp[1]; /* a NaN loses to a number */
            break;
        }
        case OP_SEQNO:
            (++sp)->u = seq;
            break;
        case OP_RED:
        case OP_REDA: {
            uint64_t cnt;
            if (in->k.u & 1) {
                int64_t c = cx__slot_count(fmt, &fmt->slots[in->a], fixed);
                cnt = c > 0 ? (uint64_t)c : 0;
                if (cnt > CX_FILTER_VAR_ELEMS)
                    return DROP; /* past the budget the compiler counted */
                cx__slot_get(buf, in->a, &at, &n);
            } else {
                cnt = in->a;
                at = (in->op == OP_REDA ? (sp--)->u : 0) + in->b;
            }
            if (at > len || cnt * in->size > len - at)
                return read_past(f, at, cnt * in->size, len);
            if (!reduce(in, buf + at, cnt, swap, ++sp))
                return DROP;
            break;
        }
        case OP_STATE:
            sp = state_op(in, &stt[in->a], sp);
            break;
        case OP_SHARE: { /* the key's residue, never negative, picks one member */
            uint64_t r = in->mode == TY_INT && sp->i < 0
                             ? (members - (0 - sp->u) % members) % members
                             : sp->u % members;
            sp->i = r == member;
            break;
        }
        case OP_WHEN:
            pass &= truth(in->mode, sp);
            sp--;
            break;
        case OP_OUT:
            if (res)
                res[in->a].u = sp->u;
            sp--;
            break;
        default:
            return cx_err_set(EINVAL, "filter: bad instruction %u at %u", in->op, pc);
        }
    }
}

int cx_filter_eval(const struct cx_filter *f, const void *event, size_t len)
{
    if (f && f->nstate)
        return cx_err_set(EINVAL, "filter '%s' keeps state: run it with cx_filter_run",
                          f->expr);
    return run(f, NULL, event, len, 0, 0, 1, NULL);
}

int cx_filter_run_member(const struct cx_filter *f, void *state, const void *event, size_t len,
                         uint64_t seq, uint64_t member, uint64_t members,
                         union cx_filter_value *res)
{
    if (f && f->nstate && !state)
        return cx_err_set(EINVAL, "filter '%s' keeps state and was given none", f->expr);
    if (members == 0 || member >= members)
        return cx_err_set(EINVAL, "filter: member %llu of %llu", (unsigned long long)member,
                          (unsigned long long)members);
    return run(f, state, event, len, seq, member, members, res);
}

int cx_filter_run(const struct cx_filter *f, void *state, const void *event, size_t len,
                  uint64_t seq, union cx_filter_value *res)
{
    return cx_filter_run_member(f, state, event, len, seq, 0, 1, res);
}

bool cx_filter_shares(const struct cx_filter *f) { return f && f->shares; }

size_t cx_filter_state_size(const struct cx_filter *f)
{
    return f ? f->nstate * sizeof(struct cx__state) : 0;
}

void cx_filter_state_init(const struct cx_filter *f, void *state)
{
    if (f && state)
        memset(state, 0, cx_filter_state_size(f));
}

unsigned cx_filter_outputs(const struct cx_filter *f) { return f ? f->nout : 0; }

void cx_filter_store(const struct cx_filter *f, const union cx_filter_value *res, void *native)
{
    for (uint32_t i = 0; f && res && native && i < f->nout; i++) {
        const struct cx__out *o = &f->out[i];
        uint8_t *p = (uint8_t *)native + o->off;
        uint64_t v = res[i].u;
        if (o->kind == CX_K_FLOAT) {
            if (o->size == 4) {
                float x = (float)res[i].d;
                memcpy(p, &x, 4);
            } else {
                memcpy(p, &res[i].d, 8);
            }
            continue;
        }
        if (o->kind == CX_K_BOOL)
            v = v != 0;
        uint8_t b1 = (uint8_t)v;
        uint16_t b2 = (uint16_t)v;
        uint32_t b4 = (uint32_t)v;
        memcpy(p, o->size == 1 ? (void *)&b1 : o->size == 2 ? (void *)&b2
                  : o->size == 4 ? (void *)&b4 : (void *)&v, o->size);
    }
}
