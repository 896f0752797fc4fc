/* Calls of built-in functions: math (sqrt abs min max), conversions (int float), reductions
 * over an array's elements (sum mean max min), the source's event number (seq), and the
 * stateful functions (count every changed prev total wsum wmean wmax wmin). Each is type
 * checked here, at its column; the language is defined in cx_filter.h. */
#include "filter/cx_filter_int.h"

#include "common/cx_error.h"

enum call_kind { K_FN, K_MINMAX, K_RED, K_STATE };

struct fn_def {
    const char *name;
    uint8_t kind;  /* enum call_kind */
    uint8_t id;    /* enum cx__fn, cx__red or cx__sfn */
    uint8_t nargs; /* K_MINMAX: 2 numbers, or 1 array (then a reduction) */
    bool lit_n;    /* the last argument is a window or period: an integer literal >= 1 */
};

static const struct fn_def fns[] = {
    {"sqrt", K_FN, F_SQRT, 1, false},      {"abs", K_FN, F_ABS, 1, false},
    {"int", K_FN, F_INT, 1, false},        {"float", K_FN, F_FLOAT, 1, false},
    {"seq", K_FN, F_SEQ, 0, false},        {"share", K_FN, F_SHARE, 1, false},
    {"min", K_MINMAX, F_MIN, 2, false},
    {"max", K_MINMAX, F_MAX, 2, false},    {"sum", K_RED, R_SUM, 1, false},
    {"mean", K_RED, R_MEAN, 1, false},     {"count", K_STATE, S_COUNT, 0, false},
    {"every", K_STATE, S_EVERY, 1, true},  {"changed", K_STATE, S_CHANGED, 2, false},
    {"prev", K_STATE, S_PREV, 1, false},   {"total", K_STATE, S_TOTAL, 1, false},
    {"wsum", K_STATE, S_WSUM, 2, true},    {"wmean", K_STATE, S_WMEAN, 2, true},
    {"wmax", K_STATE, S_WMAX, 2, true},    {"wmin", K_STATE, S_WMIN, 2, true},
};

/* Commas at the top level of the argument list that opens at src[i] ('('). */
static int top_commas(const struct cx__compiler *c, size_t i)
{
    int depth = 0, commas = 0;
    for (i++; i < c->src_len; i++) {
        char ch = c->src[i];
        if (ch == '"' || ch == '\'') {
            for (i++; i < c->src_len && c->src[i] != ch; i++)
                if (c->src[i] == '\\')
                    i++;
        } else if (ch == '(' || ch == '[') {
            depth++;
        } else if (ch == ')' || ch == ']') {
            if (!depth--)
                break;
        } else if (ch == ',' && !depth) {
            commas++;
        }
    }
    return commas;
}

static int expect(struct cx__compiler *c, enum cx__tok t, const char *what, const char *fn)
{
    if (c->tok.t == t)
        return cx__lex_next(c);
    char show[40];
    return cx__syntax(EINVAL, c->tok.col, "expected %s in %s(), found %s", what, fn,
                      cx__tok_show(c, show, sizeof show));
}

static int number_arg(struct cx__compiler *c, const char *fn)
{
    uint32_t col = c->tok.col;
    int n = cx__parse_expr(c);
    if (n >= 0 && c->nodes[n].type == TY_STR)
        return cx__syntax(EINVAL, col, "%s() takes a number, not a string", fn);
    return n;
}

static uint8_t promote(uint8_t a, uint8_t b)
{
    return (a == TY_FLT || b == TY_FLT) ? TY_FLT : (a == TY_UINT || b == TY_UINT) ? TY_UINT
                                                                                    : TY_INT;
}

int cx__parse_call(struct cx__compiler *c)
{
    if (c->tok.t != TK_IDENT || !cx__next_is(c, '(', 0))
        return -ENOENT;
    const struct fn_def *d = NULL;
    for (size_t i = 0; i < sizeof fns / sizeof fns[0] && !d; i++)
        if (cx__ident_is(c, fns[i].name))
            d = &fns[i];
    if (!d)
        return -ENOENT;
    uint32_t col = c->tok.col;
    size_t open = c->pos;
    while (c->src[open] != '(')
        open++;
    int nargs = d->nargs, kind = d->kind, rc;
    if (kind == K_MINMAX && top_commas(c, open) == 0)
        kind = K_RED; /* max(energy): a reduction over an array */
    if (kind == K_RED)
        nargs = 1;
    if ((rc = cx__enter(c)) < 0 || (rc = cx__lex_next(c)) < 0 || (rc = cx__lex_next(c)) < 0)
        return rc; /* past the name and '(' */
    int args[2] = {-1, -1};
    for (int k = 0; k < nargs; k++) {
        if (k && (rc = expect(c, TK_COMMA, "','", d->name)) < 0)
            return rc;
        if (kind == K_RED) {
            if (c->tok.t != TK_IDENT) {
                char show[40];
                return cx__syntax(EINVAL, c->tok.col, "%s() takes an array field, found %s",
                                  d->name, cx__tok_show(c, show, sizeof show));
            }
            args[k] = cx__parse_path(c, PATH_ARRAY);
        } else {
            args[k] = number_arg(c, d->name);
        }
        if (args[k] < 0)
            return args[k];
    }
    if (c->tok.t == TK_COMMA)
        return cx__syntax(EINVAL, c->tok.col, "%s() takes %d argument%s", d->name, nargs,
                          nargs == 1 ? "" : "s");
    if ((rc = expect(c, TK_RPAREN, "')'", d->name)) < 0)
        return rc;
    c->depth--;

    if (kind == K_RED) {
        struct cx__node *n = &c->nodes[args[0]];
        n->op = d->kind == K_MINMAX ? (d->id == F_MIN ? R_MIN : R_MAX) : d->id;
        if (n->op == R_MEAN)
            n->type = TY_FLT;
        n->col = col;
        return args[0];
    }
    int64_t lit = 0;
    if (d->lit_n) {
        const struct cx__node *a = &c->nodes[args[nargs - 1]];
        if (a->kind != N_NUM || a->type == TY_FLT || a->k.i < 1 || a->k.i > (1LL << 40))
            return cx__syntax(EINVAL, a->col, "the last argument of %s() must be an integer "
                              "literal from 1 to 2^40", d->name);
        lit = a->k.i;
        args[nargs - 1] = -1;
    }
    int n = cx__node_new(c, kind == K_STATE ? N_STATE : N_CALL, col);
    if (n < 0)
        return n;
    struct cx__node *o = &c->nodes[n];
    o->op = d->id;
    o->l = args[0];
    o->r = args[1];
    o->k.i = lit;
    uint8_t lt = args[0] >= 0 ? c->nodes[args[0]].type : TY_INT;
    if (kind == K_STATE) {
        if (c->nstate >= CX_FILTER_MAX_STATE)
            return cx__syntax(E2BIG, col, "more than %d stateful calls", CX_FILTER_MAX_STATE);
        o->slot = c->nstate++;
        o->type = (d->id == S_COUNT || d->id == S_EVERY || d->id == S_CHANGED) ? TY_INT
                                                                                : TY_FLT;
        return n;
    }
    if (d->id == F_SHARE && lt == TY_FLT)
        return cx__syntax(EINVAL, c->nodes[args[0]].col, "share() takes an integer key "
                          "(int(...) converts a float)");
    c->shares |= d->id == F_SHARE;
    switch (d->id) {
    case F_SQRT: case F_FLOAT: o->type = TY_FLT; break;
    case F_SHARE: o->type = TY_INT; break;
    case F_INT: case F_SEQ: o->type = TY_INT; break;
    case F_ABS: o->type = lt; break;
    default: o->type = promote(lt, c->nodes[args[1]].type); break; /* min, max */
    }
    return n;
}
