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
    case OP_SEQ: case OP_SNE: case OP_POP:
        return -1;
    default:
        return 0;
    }
}

static int emit(struct gen *g, uint8_t op, uint8_t mode, uint32_t col, struct cx__insn **out)
{
    if (g->n >= CX_FILTER_MAX_CODE)
        return cx__syntax(E2BIG, col, "filter needs more than %d instructions",
                          CX_FILTER_MAX_CODE);
    struct cx__insn *i = &g->code[g->n++];
    memset(i, 0, sizeof *i);
    i->op = op;
    i->mode = mode;
    g->depth += effect(op);
    if (g->depth > g->max_depth)
        g->max_depth = g->depth;
    if (g->max_depth > CX_FILTER_MAX_STACK)
        return cx__syntax(E2BIG, col, "filter needs more than %d stack slots",
                          CX_FILTER_MAX_STACK);
    if (out)
        *out = i;
    return 0;
}

static int gen_node(struct gen *g, int ni);

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
    default:
        return gen_logic(g, n);
    }
}

int cx__gen(struct cx__compiler *c, int root, struct cx_filter *f)
{
    struct gen g = {.c = c};
    g.code = calloc(CX_FILTER_MAX_CODE, sizeof *g.code);
    if (!g.code)
        return cx_err_set(ENOMEM, "filter program");
    int rc;
    if ((rc = gen_node(&g, root)) < 0 ||
        (rc = emit(&g, OP_TRUTH, c->nodes[root].type, 1, NULL)) < 0 ||
        (rc = emit(&g, OP_END, 0, 1, NULL)) < 0) {
        free(g.code);
        return rc;
    }
    struct cx__insn *shrunk = realloc(g.code, g.n * sizeof *g.code);
    f->code = shrunk ? shrunk : g.code;
    f->ncode = g.n;
    f->max_stack = (uint32_t)g.max_depth;
    return 0;
}

int cx_filter_compile(const char *expr, const struct cx_format *fmt, struct cx_filter **out)
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
    struct cx__compiler c = {.src = expr, .src_len = len, .fmt = fmt};
    struct cx_filter *f = calloc(1, sizeof *f);
    int rc = f ? 0 : cx_err_set(ENOMEM, "filter");
    int root = rc < 0 ? rc : cx__parse(&c);
    if (root < 0)
        rc = root;
    if (rc == 0)
        rc = cx__gen(&c, root, f);
    if (rc == 0 && !(f->expr = strdup(expr)))
        rc = cx_err_set(ENOMEM, "filter text");
    free(c.nodes);
    free(c.accs);
    if (rc < 0) {
        free(c.pool);
        cx_filter_free(f);
        return rc;
    }
    f->fmt = fmt;
    f->swap = fmt->arch.big_endian != CX__HOST_BE;
    f->pool = c.pool;
    *out = f;
    return 0;
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
