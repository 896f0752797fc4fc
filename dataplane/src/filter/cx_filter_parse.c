/* The filter grammar: recursive descent over C's precedence levels, building a typed tree.
 * Types are checked here, at the operator, so a message can point at its column. */
#include "filter/cx_filter_int.h"

#include "common/cx_error.h"

#include <stdlib.h>

int cx__node_new(struct cx__compiler *c, uint8_t kind, uint32_t col)
{
    if (c->nnodes >= 2 * CX_FILTER_MAX_CODE)
        return cx__syntax(E2BIG, col, "filter has more than %d terms", 2 * CX_FILTER_MAX_CODE);
    if (c->nnodes == c->cap_nodes) {
        uint32_t cap = c->cap_nodes ? c->cap_nodes * 2 : 32;
        struct cx__node *n = realloc(c->nodes, cap * sizeof *n);
        if (!n)
            return cx_err_set(ENOMEM, "filter tree of %u nodes", cap);
        c->nodes = n;
        c->cap_nodes = cap;
    }
    struct cx__node *n = &c->nodes[c->nnodes];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->col = col;
    n->l = n->r = n->acc = -1;
    return (int)c->nnodes++;
}

static const char *type_name(uint8_t t)
{
    return t == TY_STR ? "string" : "number";
}

static const char *op_text(enum cx__tok t)
{
    switch (t) {
    case TK_PLUS: return "+";
    case TK_MINUS: return "-";
    case TK_STAR: return "*";
    case TK_SLASH: return "/";
    case TK_PCT: return "%";
    case TK_NOT: return "!";
    case TK_AND: return "&&";
    case TK_OR: return "||";
    case TK_EQ: return "==";
    case TK_NE: return "!=";
    case TK_LT: return "<";
    case TK_LE: return "<=";
    case TK_GT: return ">";
    case TK_GE: return ">=";
    default: return "?";
    }
}

int cx__enter(struct cx__compiler *c)
{
    if (++c->depth > CX_FILTER_MAX_DEPTH)
        return cx__syntax(E2BIG, c->tok.col, "filter nested deeper than %d levels",
                          CX_FILTER_MAX_DEPTH);
    return 0;
}

/* Binary operators by level, loosest first. */
static int level_of(enum cx__tok t)
{
    switch (t) {
    case TK_OR: return 0;
    case TK_AND: return 1;
    case TK_EQ: case TK_NE: return 2;
    case TK_LT: case TK_LE: case TK_GT: case TK_GE: return 3;
    case TK_PLUS: case TK_MINUS: return 4;
    case TK_STAR: case TK_SLASH: case TK_PCT: return 5;
    default: return -1;
    }
}
#define LEVELS 6

static int make_binary(struct cx__compiler *c, enum cx__tok op, uint32_t col, int l, int r)
{
    uint8_t lt = c->nodes[l].type, rt = c->nodes[r].type;
    bool ls = lt == TY_STR, rs = rt == TY_STR;
    uint8_t kind = N_BINARY, type = TY_INT;
    switch (level_of(op)) {
    case 0: case 1:
        if (ls || rs)
            return cx__syntax(EINVAL, col, "'%s' needs numbers, not a string", op_text(op));
        kind = op == TK_AND ? N_AND : N_OR;
        break;
    case 2:
        if (ls != rs)
            return cx__syntax(EINVAL, col, "cannot compare %s with %s", type_name(lt),
                              type_name(rt));
        break;
    case 3:
        if (ls && rs)
            return cx__syntax(EINVAL, col, "strings compare only with == and !=, not '%s'",
                              op_text(op));
        if (ls || rs)
            return cx__syntax(EINVAL, col, "cannot compare %s with %s", type_name(lt),
                              type_name(rt));
        break;
    default:
        if (ls || rs)
            return cx__syntax(EINVAL, col, "cannot use a string in arithmetic ('%s')",
                              op_text(op));
        type = (lt == TY_FLT || rt == TY_FLT) ? TY_FLT
               : (lt == TY_UINT || rt == TY_UINT) ? TY_UINT : TY_INT;
        break;
    }
    int n = cx__node_new(c, kind, col);
    if (n < 0)
        return n;
    c->nodes[n].op = (uint8_t)op;
    c->nodes[n].type = type;
    c->nodes[n].l = l;
    c->nodes[n].r = r;
    return n;
}

static int parse_unary(struct cx__compiler *c);

static int parse_level(struct cx__compiler *c, int level)
{
    if (level == LEVELS)
        return parse_unary(c);
    int l = parse_level(c, level + 1);
    while (l >= 0 && level_of(c->tok.t) == level) {
        enum cx__tok op = c->tok.t;
        uint32_t col = c->tok.col;
        int rc = cx__lex_next(c);
        if (rc < 0)
            return rc;
        int r = parse_level(c, level + 1);
        if (r < 0)
            return r;
        l = make_binary(c, op, col, l, r);
    }
    return l;
}

int cx__parse_expr(struct cx__compiler *c) { return parse_level(c, 0); }

/* -x of a literal is folded, so -9223372036854775808 is the int INT64_MIN and a negative
 * literal index is seen at compile time. */
static int make_unary(struct cx__compiler *c, enum cx__tok op, uint32_t col, int l)
{
    struct cx__node *o = &c->nodes[l];
    if (o->type == TY_STR)
        return cx__syntax(EINVAL, col, "'%s' needs a number, not a string", op_text(op));
    if (op == TK_MINUS && o->kind == N_NUM) {
        if (o->type == TY_FLT) {
            o->k.d = -o->k.d;
        } else {
            o->k.u = 0 - o->k.u;
            o->type = TY_INT;
        }
        o->col = col;
        return l;
    }
    int n = cx__node_new(c, N_UNARY, col);
    if (n < 0)
        return n;
    c->nodes[n].op = (uint8_t)op;
    c->nodes[n].l = l;
    c->nodes[n].type = op == TK_NOT ? TY_INT : (c->nodes[l].type == TY_FLT ? TY_FLT : TY_INT);
    return n;
}

static int parse_unary(struct cx__compiler *c)
{
    if (c->tok.t != TK_MINUS && c->tok.t != TK_NOT)
        return cx__parse_primary(c);
    enum cx__tok op = c->tok.t;
    uint32_t col = c->tok.col;
    int rc;
    if ((rc = cx__enter(c)) < 0 || (rc = cx__lex_next(c)) < 0)
        return rc;
    int l = parse_unary(c);
    if (l < 0)
        return l;
    c->depth--;
    return make_unary(c, op, col, l);
}

bool cx__ident_is(const struct cx__compiler *c, const char *word)
{
    size_t n = strlen(word);
    return c->tok.t == TK_IDENT && c->tok.len == n && !memcmp(c->tok.text, word, n);
}

bool cx__next_is(const struct cx__compiler *c, char ch, char not_next)
{
    size_t i = c->pos;
    while (i < c->src_len && (c->src[i] == ' ' || c->src[i] == '\t' || c->src[i] == '\n' ||
                              c->src[i] == '\r'))
        i++;
    return i < c->src_len && c->src[i] == ch &&
           (!not_next || i + 1 >= c->src_len || c->src[i + 1] != not_next);
}

static int parse_len(struct cx__compiler *c)
{
    uint32_t col = c->tok.col;
    int rc;
    if ((rc = cx__enter(c)) < 0 || (rc = cx__lex_next(c)) < 0 || (rc = cx__lex_next(c)) < 0)
        return rc; /* past "len" and "(" */
    if (c->tok.t != TK_IDENT) {
        char show[40];
        return cx__syntax(EINVAL, c->tok.col, "len() takes a field, found %s",
                          cx__tok_show(c, show, sizeof show));
    }
    int n = cx__parse_path(c, PATH_LEN);
    if (n < 0)
        return n;
    if (c->tok.t != TK_RPAREN) {
        char show[40];
        return cx__syntax(EINVAL, c->tok.col, "expected ')' to close len( at col %u, found %s",
                          col, cx__tok_show(c, show, sizeof show));
    }
    c->depth--;
    if ((rc = cx__lex_next(c)) < 0)
        return rc;
    return n;
}

int cx__parse_primary(struct cx__compiler *c)
{
    struct cx__token t = c->tok;
    int n, rc;
    switch (t.t) {
    case TK_INT:
    case TK_FLOAT:
        if ((n = cx__node_new(c, N_NUM, t.col)) < 0)
            return n;
        if (t.t == TK_FLOAT) {
            c->nodes[n].type = TY_FLT;
            c->nodes[n].k.d = t.v.d;
        } else {
            c->nodes[n].type = t.v.u > INT64_MAX ? TY_UINT : TY_INT;
            c->nodes[n].k.u = t.v.u;
        }
        return (rc = cx__lex_next(c)) < 0 ? rc : n;
    case TK_STR:
        if ((n = cx__node_new(c, N_STRLIT, t.col)) < 0)
            return n;
        c->nodes[n].type = TY_STR;
        c->nodes[n].str_off = t.str_off;
        c->nodes[n].str_len = t.str_len;
        return (rc = cx__lex_next(c)) < 0 ? rc : n;
    case TK_LPAREN:
        if ((rc = cx__enter(c)) < 0 || (rc = cx__lex_next(c)) < 0)
            return rc;
        if ((n = cx__parse_expr(c)) < 0)
            return n;
        if (c->tok.t != TK_RPAREN) {
            char show[40];
            return cx__syntax(EINVAL, c->tok.col, "expected ')' to close the '(' at col %u, "
                              "found %s", t.col, cx__tok_show(c, show, sizeof show));
        }
        c->depth--;
        return (rc = cx__lex_next(c)) < 0 ? rc : n;
    case TK_IDENT:
        if (cx__ident_is(c, "true") || cx__ident_is(c, "false")) {
            if ((n = cx__node_new(c, N_NUM, t.col)) < 0)
                return n;
            c->nodes[n].type = TY_INT;
            c->nodes[n].k.i = cx__ident_is(c, "true");
            return (rc = cx__lex_next(c)) < 0 ? rc : n;
        }
        if (cx__ident_is(c, "len") && cx__next_is(c, '(', 0))
            return parse_len(c);
        if ((n = cx__parse_call(c)) != -ENOENT)
            return n;
        return cx__parse_path(c, PATH_VALUE);
    default: {
        char show[40];
        return cx__syntax(EINVAL, t.col, "expected a number, a string, a field or '(', found %s",
                          cx__tok_show(c, show, sizeof show));
    }
    }
}

static int missing_op(struct cx__compiler *c)
{
    char show[40];
    if (c->tok.t == TK_ASSIGN)
        return cx__syntax(EINVAL, c->tok.col, "'=' is not an operator (use '==')");
    return cx__syntax(EINVAL, c->tok.col, "unexpected %s after a complete expression "
                      "(missing operator?)", cx__tok_show(c, show, sizeof show));
}

/* The output field `name` of the transform: a top-level number field of c->out_fmt. */
static int out_field(struct cx__compiler *c, const struct cx__token *name)
{
    const struct cx__struct *s = &c->out_fmt->structs[0];
    const struct cx__field *fd = NULL;
    for (uint32_t i = 0; i < s->nfields && !fd; i++)
        if (strlen(s->fields[i].name) == name->len &&
            !memcmp(s->fields[i].name, name->text, name->len))
            fd = &s->fields[i];
    if (!fd)
        return cx__syntax(EINVAL, name->col, "unknown output field '%.*s' (not in format '%s')",
                          (int)(name->len > 64 ? 64 : name->len), name->text, s->name);
    if (fd->shape != CX_SHAPE_ONE || fd->kind == CX_K_STRUCT || fd->kind == CX_K_STRING)
        return cx__syntax(EINVAL, name->col, "output field '%s' is not a number: only number "
                          "fields are computed (the others are copied by name)", fd->name);
    for (uint32_t i = 0; i < c->nout; i++)
        if (c->out[i].off == fd->offset)
            return cx__syntax(EINVAL, name->col, "output field '%s' is assigned twice",
                              fd->name);
    if (c->nout >= CX_FILTER_MAX_OUT)
        return cx__syntax(E2BIG, name->col, "more than %d output fields", CX_FILTER_MAX_OUT);
    struct cx__out *o = &c->out[c->nout];
    o->off = fd->offset;
    o->kind = fd->kind;
    o->size = (uint8_t)fd->esize;
    o->type = fd->kind == CX_K_FLOAT ? TY_FLT
              : (fd->kind == CX_K_UINT && fd->esize == 8) ? TY_UINT : TY_INT;
    return (int)c->nout++;
}

/* One statement: `field = expr` or a condition. */
static int parse_stmt(struct cx__compiler *c)
{
    int rc, out = -1;
    if (c->nstmt >= CX_FILTER_MAX_STMT)
        return cx__syntax(E2BIG, c->tok.col, "more than %d statements", CX_FILTER_MAX_STMT);
    if (c->tok.t == TK_IDENT && cx__next_is(c, '=', '=')) {
        struct cx__token name = c->tok;
        if ((rc = cx__lex_next(c)) < 0)
            return rc;
        if (!c->out_fmt)
            return cx__syntax(EINVAL, c->tok.col, "'=' is not an operator (use '==')");
        if ((out = out_field(c, &name)) < 0 || (rc = cx__lex_next(c)) < 0)
            return out < 0 ? out : rc;
    }
    uint32_t col = c->tok.col;
    int n = cx__parse_expr(c);
    if (n < 0)
        return n;
    uint8_t t = c->nodes[n].type;
    if (out >= 0 && t == TY_STR)
        return cx__syntax(EINVAL, col, "cannot assign a string to a number field");
    if (out >= 0 && c->out[out].type != TY_FLT && t == TY_FLT)
        return cx__syntax(EINVAL, col, "the output field is an integer and this value is a "
                          "float: convert it with int(...)");
    if (out < 0 && t == TY_STR)
        return cx__syntax(EINVAL, c->nodes[n].col,
                          "a filter must give a number (e.g. a comparison), not a string");
    c->stmt[c->nstmt].node = n;
    c->stmt[c->nstmt].out = out;
    c->nstmt++;
    return 0;
}

int cx__parse(struct cx__compiler *c)
{
    int rc = cx__lex_next(c);
    if (rc < 0)
        return rc;
    if (c->tok.t == TK_END)
        return cx__syntax(EINVAL, c->tok.col, "empty filter");
    for (;;) {
        if ((rc = parse_stmt(c)) < 0)
            return rc;
        if (c->tok.t == TK_END)
            return 0;
        if (c->tok.t != TK_SEMI)
            return missing_op(c);
        if ((rc = cx__lex_next(c)) < 0)
            return rc;
        if (c->tok.t == TK_END)
            return 0;
    }
}
