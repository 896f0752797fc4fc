/* From the typed tree to the stack bytecode that cx_filter_eval runs; cx_filter_compile
 * and cx_filter_free. Conversions (int to float) are placed here, where both operand
 * types are known, so the interpreter never looks at a type at run time. */
#include "filter/cx_filter_int.h"

#include "common/cx_error.h"

#include <stdlib.h>

struct gen {
    struct cx__compiler *c;
    struct cx__insn *code;
    uint32_t n;
    int depth, max_depth;
    uint64_t reduced; /* worst-case elements reduced per event */
};

/* Stack effect of each op. */
static int effect(uint8_t op)
{
    switch (op) {
    case OP_PUSH: case OP_PUSHS: case OP_LOADK: case OP_STRK: case OP_SSLOT:
    case OP_LENSLOT: case OP_LENSTR:
        return 1;
    case OP_IDX: case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_MOD:
    case OP_LT: case OP_LE: case OP_GT: case OP_GE: case OP_EQ: case OP_NE:
    case OP_SEQ: case OP_SNE: case OP_POP: case OP_MIN: case OP_MAX: case OP_WHEN:
    case OP_OUT:
        return -1;
    case OP_SEQNO: case OP_RED:
        return 1;
    default:
        return 0;
    }
}

static int emit_n(struct gen *g, uint8_t op, uint8_t mode, uint32_t col, int delta,
                  struct cx__insn **out)
{
    if (g->n >= CX_FILTER_MAX_CODE)
        return cx__syntax(E2BIG, col, "filter needs more than %d instructions",
                          CX_FILTER_MAX_CODE);
    struct cx__insn *i = &g->code[g->n++];
    memset(i, 0, sizeof *i);
    i->op = op;
    i->mode = mode;
    g->depth += delta;
    if (g->depth > g->max_depth)
        g->max_depth = g->depth;
    if (g->max_depth > CX_FILTER_MAX_STACK)
        return cx__syntax(E2BIG, col, "filter needs more than %d stack slots",
                          CX_FILTER_MAX_STACK);
    if (out)
        *out = i;
    return 0;
}

static int emit(struct gen *g, uint8_t op, uint8_t mode, uint32_t col, struct cx__insn **out)
{
    return emit_n(g, op, mode, col, effect(op), out);
}

static int gen_node(struct gen *g, int ni);
static int gen_call(struct gen *g, const struct cx__node *n);
static int gen_reduce(struct gen *g, const struct cx__node *n, const struct cx__access *a);
static int gen_state(struct gen *g, const struct cx__node *n);

/* Converts the value on top from type `from` to float when `to` is float. */
static int convert(struct gen *g, uint8_t from, uint8_t to, uint32_t col)
{
    if (to != TY_FLT || from == TY_FLT)
        return 0;
    return emit(g, from == TY_UINT ? OP_U2F : OP_I2F, 0, col, NULL);
}

/* Computes the dynamic part of an access on the stack; returns 1 when there is one. */
static int gen_access(struct gen *g, const struct cx__access *a, uint32_t col)
{
    struct cx__insn *in;
    int rc;
    uint32_t k = 0;
    if (!a->var && a->nidx == 0)
        return 0;
    if (a->var) {
        if ((rc = gen_node(g, a->idx[0].node)) < 0 ||
            (rc = emit(g, OP_VIDX, g->c->nodes[a->idx[0].node].type, col, &in)) < 0)
            return rc;
        in->a = a->slot;
        in->k.u = a->idx[0].stride;
        k = 1;
    } else if ((rc = emit(g, OP_PUSH, TY_INT, col, NULL)) < 0) { /* address 0 */
        return rc;
    }
    for (; k < a->nidx; k++) {
        if ((rc = gen_node(g, a->idx[k].node)) < 0 ||
            (rc = emit(g, OP_IDX, g->c->nodes[a->idx[k].node].type, col, &in)) < 0)
            return rc;
        in->b = a->idx[k].count;
        in->k.u = a->idx[k].stride;
    }
    return 1;
}

static uint8_t cmp_mode(uint8_t lt, uint8_t rt)
{
    if (lt == TY_FLT || rt == TY_FLT)
        return CM_FLT;
    if (lt == rt)
        return lt == TY_UINT ? CM_UINT : CM_INT;
    return lt == TY_INT ? CM_INT_UINT : CM_UINT_INT;
}

static uint8_t binary_op(uint8_t tok)
{
    switch (tok) {
    case TK_PLUS: return OP_ADD;
    case TK_MINUS: return OP_SUB;
    case TK_STAR: return OP_MUL;
    case TK_SLASH: return OP_DIV;
    case TK_PCT: return OP_MOD;
    case TK_LT: return OP_LT;
    case TK_LE: return OP_LE;
    case TK_GT: return OP_GT;
    case TK_GE: return OP_GE;
    case TK_EQ: return OP_EQ;
    default: return OP_NE;
    }
}

static int gen_binary(struct gen *g, const struct cx__node *n)
{
    uint8_t lt = g->c->nodes[n->l].type, rt = g->c->nodes[n->r].type;
    uint8_t op = binary_op(n->op), mode, to;
    int rc;
    if (lt == TY_STR) { /* == or != on strings: checked by the parser */
        if ((rc = gen_node(g, n->l)) < 0 || (rc = gen_node(g, n->r)) < 0)
            return rc;
        return emit(g, op == OP_EQ ? OP_SEQ : OP_SNE, 0, n->col, NULL);
    }
    if (op >= OP_LT) {
        mode = cmp_mode(lt, rt);
        to = mode == CM_FLT ? TY_FLT : TY_INT;
    } else {
        mode = n->type;
        to = n->type;
    }
    if ((rc = gen_node(g, n->l)) < 0 || (rc = convert(g, lt, to, n->col)) < 0 ||
        (rc = gen_node(g, n->r)) < 0 || (rc = convert(g, rt, to, n->col)) < 0)
        return rc;
    return emit(g, op, mode, n->col, NULL);
}

/* l && r: l; truth; JZ end; pop; r; truth; end:  (|| the same with JNZ) */
static int gen_logic(struct gen *g, const struct cx__node *n)
{
    struct cx__insn *j;
    int rc;
    if ((rc = gen_node(g, n->l)) < 0 ||
        (rc = emit(g, OP_TRUTH, g->c->nodes[n->l].type, n->col, NULL)) < 0 ||
        (rc = emit(g, n->kind == N_AND ? OP_JZ : OP_JNZ, 0, n->col, NULL)) < 0)
        return rc;
    uint32_t jump = g->n - 1;
    if ((rc = emit(g, OP_POP, 0, n->col, NULL)) < 0 || (rc = gen_node(g, n->r)) < 0 ||
        (rc = emit(g, OP_TRUTH, g->c->nodes[n->r].type, n->col, NULL)) < 0)
        return rc;
    j = &g->code[jump];
    j->a = g->n;
    return 0;
}

/* Generates node ni and converts its value to type `to` (float, or nothing to do). */
static int gen_as(struct gen *g, int ni, uint8_t to)
{
    int rc = gen_node(g, ni);
    return rc < 0 ? rc : convert(g, g->c->nodes[ni].type, to, g->c->nodes[ni].col);
}

static int gen_call(struct gen *g, const struct cx__node *n)
{
    struct cx__insn *in;
    uint8_t lt = n->l >= 0 ? g->c->nodes[n->l].type : TY_INT;
    int rc;
    switch (n->op) {
    case F_SEQ:
        return emit(g, OP_SEQNO, 0, n->col, NULL);
    case F_SHARE:
        if ((rc = gen_node(g, n->l)) < 0)
            return rc;
        return emit(g, OP_SHARE, lt, n->col, NULL);
    case F_MIN:
    case F_MAX:
        if ((rc = gen_as(g, n->l, n->type)) < 0 || (rc = gen_as(g, n->r, n->type)) < 0)
            return rc;
        return emit(g, n->op == F_MIN ? OP_MIN : OP_MAX, n->type, n->col, NULL);
    case F_SQRT:
    case F_FLOAT:
        if ((rc = gen_as(g, n->l, TY_FLT)) < 0)
            return rc;
        return n->op == F_FLOAT ? 0 : emit(g, OP_FN, F_SQRT, n->col, NULL);
    default: /* F_INT, F_ABS */
        if ((rc = gen_node(g, n->l)) < 0)
            return rc;
        if ((n->op == F_INT && lt != TY_FLT) || (n->op == F_ABS && lt == TY_UINT))
            return 0; /* int(integer): the same bits; abs(uint): itself */
        if ((rc = emit(g, OP_FN, n->op, n->col, &in)) < 0)
            return rc;
        in->kind = lt;
        return 0;
    }
}

/* The per-event budget: instructions plus every element a reduction may visit. */
static int over_budget(uint64_t cost, uint32_t col)
{
    return cx__syntax(E2BIG, col, "transform may take %llu steps per event, over the budget "
                      "of %d (reductions count every element; a variable array as %d)",
                      (unsigned long long)cost, CX_FILTER_BUDGET, CX_FILTER_VAR_ELEMS);
}

static int gen_reduce(struct gen *g, const struct cx__node *n, const struct cx__access *a)
{
    struct cx__insn *in;
    int rc, dyn = 0;
    bool var = n->slot != UINT32_MAX;
    g->reduced += var ? CX_FILTER_VAR_ELEMS : n->k.u;
    if (g->reduced + g->n > CX_FILTER_BUDGET)
        return over_budget(g->reduced + g->n, n->col);
    if (!var && (dyn = gen_access(g, a, n->col)) < 0)
        return dyn;
    if ((rc = emit(g, dyn ? OP_REDA : OP_RED, n->op, n->col, &in)) < 0)
        return rc;
    in->kind = a->kind;
    in->size = a->size;
    in->a = var ? n->slot : (uint32_t)n->k.u;
    in->b = a->off;
    in->k.u = (var ? 1u : 0u) | ((uint64_t)n->type << 8);
    return 0;
}

static int gen_state(struct gen *g, const struct cx__node *n)
{
    struct cx__insn *in = NULL;
    int rc = 0, nargs = (n->l >= 0) + (n->r >= 0);
    if ((n->l >= 0 && (rc = gen_as(g, n->l, TY_FLT)) < 0) ||
        (n->r >= 0 && (rc = gen_as(g, n->r, TY_FLT)) < 0) ||
        (rc = emit_n(g, OP_STATE, n->op, n->col, 1 - nargs, &in)) < 0)
        return rc;
    in->a = n->slot;
    in->k.i = n->k.i;
    return 0;
}

static int gen_node(struct gen *g, int ni)
{
    const struct cx__node *n = &g->c->nodes[ni];
    const struct cx__access *a = n->acc >= 0 ? &g->c->accs[n->acc] : NULL;
    struct cx__insn *in;
    int rc, dyn;
    switch (n->kind) {
    case N_NUM:
        if ((rc = emit(g, OP_PUSH, n->type, n->col, &in)) < 0)
            return rc;
        in->k = n->k;
        return 0;
    case N_STRLIT:
        if ((rc = emit(g, OP_PUSHS, 0, n->col, &in)) < 0)
            return rc;
        in->a = n->str_off;
        in->b = n->str_len;
        return 0;
    case N_LOAD:
    case N_STRFIX:
        if ((dyn = gen_access(g, a, n->col)) < 0)
            return dyn;
        if (n->kind == N_LOAD) {
            if ((rc = emit(g, dyn ? OP_LOAD : OP_LOADK, n->type, n->col, &in)) < 0)
                return rc;
            in->kind = a->kind;
            in->size = a->size;
            in->b = a->off;
        } else {
            if ((rc = emit(g, dyn ? OP_STR : OP_STRK, 0, n->col, &in)) < 0)
                return rc;
            in->b = a->count;
            in->k.u = a->off;
        }
        return 0;
    case N_STRSLOT:
    case N_LENSLOT:
    case N_LENSTR:
        if ((rc = emit(g, n->kind == N_STRSLOT ? OP_SSLOT : n->kind == N_LENSLOT ? OP_LENSLOT
                                                                              : OP_LENSTR,
                       0, n->col, &in)) < 0)
            return rc;
        in->a = n->slot;
        return 0;
    case N_UNARY:
        if ((rc = gen_node(g, n->l)) < 0)
            return rc;
        return emit(g, n->op == TK_NOT ? OP_NOT : OP_NEG, g->c->nodes[n->l].type, n->col, NULL);
    case N_BINARY:
        return gen_binary(g, n);
    case N_CALL:
        return gen_call(g, n);
    case N_REDUCE:
        return gen_reduce(g, n, a);
    case N_STATE:
        return gen_state(g, n);
    default:
        return gen_logic(g, n);
    }
}

/* A program: each statement in order (so every stateful call sees every event), each
 * condition folded into the verdict by OP_WHEN, each value stored by OP_OUT. A single
 * condition is the plain filter of old: its truth is the verdict. */
static int gen_stmts(struct gen *g, struct cx_filter *f)
{
    struct cx__compiler *c = g->c;
    struct cx__insn *in;
    int rc;
    f->program = !(c->nstmt == 1 && c->stmt[0].out < 0);
    for (uint32_t i = 0; i < c->nstmt; i++) {
        int ni = c->stmt[i].node, out = c->stmt[i].out;
        uint8_t t = c->nodes[ni].type;
        uint32_t col = c->nodes[ni].col;
        if (!f->program)
            return (rc = gen_node(g, ni)) < 0 ? rc : emit(g, OP_TRUTH, t, 1, NULL);
        if (out < 0) {
            if ((rc = gen_node(g, ni)) < 0 || (rc = emit(g, OP_WHEN, t, col, NULL)) < 0)
                return rc;
            continue;
        }
        if ((rc = gen_as(g, ni, c->out[out].type)) < 0 ||
            (rc = emit(g, OP_OUT, 0, col, &in)) < 0)
            return rc;
        in->a = (uint32_t)out;
    }
    return 0;
}

int cx__gen(struct cx__compiler *c, struct cx_filter *f)
{
    struct gen g = {.c = c};
    g.code = calloc(CX_FILTER_MAX_CODE, sizeof *g.code);
    if (!g.code)
        return cx_err_set(ENOMEM, "filter program");
    struct cx__insn *end;
    int rc;
    if ((rc = gen_stmts(&g, f)) < 0 || (rc = emit(&g, OP_END, 0, 1, &end)) < 0 ||
        (g.reduced + g.n > CX_FILTER_BUDGET && (rc = over_budget(g.reduced + g.n, 1)) < 0)) {
        free(g.code);
        return rc;
    }
    end->mode = f->program;
    struct cx__insn *shrunk = realloc(g.code, g.n * sizeof *g.code);
    f->code = shrunk ? shrunk : g.code;
    f->ncode = g.n;
    f->max_stack = (uint32_t)g.max_depth;
    f->cost = g.reduced + g.n;
    f->nout = c->nout;
    f->nstate = c->nstate;
    f->shares = c->shares;
    memcpy(f->out, c->out, sizeof c->out);
    return 0;
}

static int compile(const char *expr, const struct cx_format *fmt, const struct cx_format *ofmt,
                   struct cx_filter **out)
{
    if (!out)
        return cx_err_set(EINVAL, "filter: no output pointer");
    *out = NULL;
    if (!expr || !fmt)
        return cx_err_set(EINVAL, "filter: %s is NULL", expr ? "the format" : "the expression");
    size_t len = strnlen(expr, CX_FILTER_MAX_EXPR + 1);
    if (len > CX_FILTER_MAX_EXPR)
        return cx_err_set(E2BIG, "col %d: filter longer than %d bytes", CX_FILTER_MAX_EXPR + 1,
                          CX_FILTER_MAX_EXPR);
    struct cx__compiler *c = calloc(1, sizeof *c);
    struct cx_filter *f = calloc(1, sizeof *f);
    int rc = f && c ? 0 : cx_err_set(ENOMEM, "filter");
    if (rc == 0) {
        c->src = expr;
        c->src_len = len;
        c->fmt = fmt;
        c->out_fmt = ofmt;
        rc = cx__parse(c);
    }
    if (rc == 0)
        rc = cx__gen(c, f);
    if (rc == 0 && !(f->expr = strdup(expr)))
        rc = cx_err_set(ENOMEM, "filter text");
    char *pool = c ? c->pool : NULL;
    if (c) {
        free(c->nodes);
        free(c->accs);
        free(c);
    }
    if (rc < 0) {
        free(pool);
        cx_filter_free(f);
        return rc;
    }
    f->fmt = fmt;
    f->out_fmt = ofmt;
    f->swap = fmt->arch.big_endian != CX__HOST_BE;
    f->pool = pool;
    *out = f;
    return 0;
}

int cx_filter_compile(const char *expr, const struct cx_format *fmt, struct cx_filter **out)
{
    return compile(expr, fmt, NULL, out);
}

int cx_filter_compile_xform(const char *prog, const struct cx_format *in,
                            const struct cx_format *out, struct cx_filter **f)
{
    struct cx_arch na;
    cx_arch_native(&na);
    if (out && memcmp(&out->arch, &na, sizeof na) != 0) {
        if (f)
            *f = NULL;
        return cx_err_set(EINVAL, "transform: output format '%s' is not native",
                          cx_format_name(out));
    }
    return compile(prog, in, out, f);
}

void cx_filter_free(struct cx_filter *f)
{
    if (!f)
        return;
    free(f->code);
    free(f->pool);
    free(f->expr);
    free(f);
}

const struct cx_format *cx_filter_format(const struct cx_filter *f) { return f ? f->fmt : NULL; }
