/* Internals of the filter module, shared by its source files only (not a public header).
 *
 * Pipeline: cx_filter_lex.c turns the text into tokens; cx_filter_parse.c builds a typed
 * tree (cx_filter_path.c resolves each field path against the format to a static offset
 * plus indices); cx_filter_gen.c emits a stack bytecode; cx_filter_eval.c runs it. */
#ifndef CX_FILTER_INT_H
#define CX_FILTER_INT_H

#include "filter/cx_filter.h"
/* The filter reads the format's tables (fields, offsets, slots) to compile paths once, and
 * uses the format layer's own event checks and loaders: it is a friend of src/format. */
#include "format/cx_format_int.h"

#include <stdbool.h>
#include <stdint.h>

/* --- tokens ---------------------------------------------------------------------------- */

enum cx__tok {
    TK_END, TK_INT, TK_FLOAT, TK_STR, TK_IDENT,
    TK_LPAREN, TK_RPAREN, TK_LBRACK, TK_RBRACK, TK_DOT,
    TK_PLUS, TK_MINUS, TK_STAR, TK_SLASH, TK_PCT, TK_NOT,
    TK_AND, TK_OR, TK_EQ, TK_NE, TK_LT, TK_LE, TK_GT, TK_GE,
    TK_ASSIGN, TK_SEMI, TK_COMMA,
};

struct cx__token {
    enum cx__tok t;
    uint32_t col;        /* 1-based column of its first byte */
    const char *text;    /* its bytes in the expression */
    uint32_t len;
    union { uint64_t u; double d; } v; /* TK_INT, TK_FLOAT (char literals are TK_INT) */
    uint32_t str_off, str_len;         /* TK_STR: unescaped bytes in the compiler's pool */
};

/* --- values and types ------------------------------------------------------------------ */

enum cx__type { TY_INT, TY_UINT, TY_FLT, TY_STR };

/* --- the typed tree -------------------------------------------------------------------- */

enum cx__nkind {
    N_NUM,      /* literal number: k */
    N_STRLIT,   /* string literal: pool [str_off, +str_len) */
    N_LOAD,     /* scalar field: acc */
    N_STRFIX,   /* fixed char array read as a string: acc, count */
    N_STRSLOT,  /* string field or variable char array read as a string: slot */
    N_LENSLOT,  /* len() of a variable array: slot */
    N_LENSTR,   /* len() of a string field: slot */
    N_UNARY,    /* op (TK_MINUS, TK_NOT) l */
    N_BINARY,   /* l op r */
    N_AND, N_OR,
    N_CALL,     /* built-in function op (enum cx__fn) of l (and r) */
    N_REDUCE,   /* op (enum cx__red) over a whole array: acc (fixed, k.u elements) or slot */
    N_STATE,    /* stateful function op (enum cx__sfn) of l (and r), state slot, k.i = N */
};

/* Built-in functions (N_CALL, OP_FN / OP_MIN / OP_MAX / OP_SEQNO). */
enum cx__fn { F_SQRT, F_ABS, F_INT, F_FLOAT, F_MIN, F_MAX, F_SEQ, F_SHARE };
/* Reductions over an array's elements (N_REDUCE, OP_RED / OP_REDA). */
enum cx__red { R_SUM, R_MEAN, R_MAX, R_MIN };
/* Stateful functions (N_STATE, OP_STATE); each owns one struct cx__state. */
enum cx__sfn { S_COUNT, S_EVERY, S_CHANGED, S_PREV, S_TOTAL, S_WSUM, S_WMEAN, S_WMAX, S_WMIN };

/* One stateful call's memory between events (cx_filter_state_size bytes in all). */
struct cx__state {
    double a;  /* reference (changed), last value (prev), running sum or extreme */
    int64_t n; /* events counted (count, every, window fill), or "a is set" */
};

#define CX__MAX_IDX (CX_FORMAT_MAX_DEPTH + 2)

/* Where a field's value lies: static offset `off` (from the event start when !var, from
 * the variable part of slot `slot` when var) plus index[k] * stride[k] for each dynamic
 * index; index 0 of a var access selects the element of that variable array. */
struct cx__access {
    bool var;
    uint32_t slot;
    uint64_t off;
    uint8_t kind, size;  /* the leaf scalar (N_LOAD) */
    uint32_t count;      /* N_STRFIX: bytes of the char array */
    uint32_t nidx;
    struct { int32_t node; uint64_t count; uint64_t stride; } idx[CX__MAX_IDX];
};

union cx__num { int64_t i; uint64_t u; double d; };

struct cx__node {
    uint8_t kind;     /* enum cx__nkind */
    uint8_t type;     /* enum cx__type of its value */
    uint8_t op;       /* enum cx__tok for N_UNARY / N_BINARY */
    uint32_t col;
    int32_t l, r;     /* children (node indices) */
    union cx__num k;
    uint32_t str_off, str_len, slot;
    int32_t acc;      /* index into the access table */
};

/* --- bytecode -------------------------------------------------------------------------- */

enum cx__op {
    OP_END,
    OP_PUSH,     /* push k (mode: its type) */
    OP_PUSHS,    /* push pool string [a, +b) */
    OP_LOADK,    /* push scalar (kind, size) at event + b */
    OP_LOAD,     /* pop addr; push scalar at event + addr + b */
    OP_IDX,      /* pop index (mode INT/UINT), pop addr; index < b or drop; push addr + index*k.u */
    OP_VIDX,     /* pop index; < count of slot a or drop; push part offset + index*k.u */
    OP_STRK,     /* push string in the b-byte char array at event + k.u (up to its NUL) */
    OP_STR,      /* pop addr; the same at event + addr + k.u */
    OP_SSLOT,    /* push the string held by slot a (NULL: "") */
    OP_LENSLOT,  /* push the element count of variable array slot a */
    OP_LENSTR,   /* push strlen of string slot a */
    OP_I2F, OP_U2F,
    OP_NEG, OP_NOT, OP_TRUTH,           /* mode: operand type */
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD,   /* mode: INT, UINT or FLT */
    OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE, /* mode: cx__cmp_mode */
    OP_SEQ, OP_SNE,
    OP_JZ, OP_JNZ, /* top (an int 0/1) zero / non-zero: jump to a, keeping it */
    OP_POP,
    /* transforms (cx_filter_compile_xform) */
    OP_FN,       /* mode enum cx__fn (F_SQRT, F_ABS, F_INT, F_FLOAT), kind: operand type */
    OP_MIN, OP_MAX, /* mode: INT, UINT or FLT (operands converted) */
    OP_SEQNO,    /* push the source's event number */
    OP_RED,      /* mode enum cx__red, kind/size element; k.u bit 0: variable array in slot
                  * a, else fixed array of a elements at event + b; push the result
                  * (k.u bits 8..15: its enum cx__type) */
    OP_REDA,     /* the same for a fixed array at event + popped addr + b */
    OP_STATE,    /* mode enum cx__sfn, a: state slot, k.i: N; pops its float arguments */
    OP_WHEN,     /* pop a condition (mode: its type); the event passes only if all hold */
    OP_OUT,      /* pop the value of output a */
    OP_SHARE,    /* pop a key (mode INT or UINT); push key mod members == member */
};

/* Comparison modes: both of one type, or an int against a uint (exact comparison). */
enum cx__cmp_mode { CM_INT, CM_UINT, CM_FLT, CM_INT_UINT, CM_UINT_INT };

struct cx__insn {
    uint8_t op, mode, kind, size;
    uint32_t a;
    uint64_t b;
    union cx__num k;
};

/* An output field of a transform: where it lies in the output format's native struct. */
struct cx__out {
    uint32_t off;
    uint8_t kind, size, type; /* the field's cx_kind, byte size, and enum cx__type */
};

struct cx_filter {
    const struct cx_format *fmt;
    const struct cx_format *out_fmt; /* transforms: the output format, else NULL */
    bool program;          /* several statements: OP_END returns the OP_WHEN verdict */
    bool shares;           /* calls share(): its verdict depends on the member's rank */
    uint32_t nout, nstate;
    uint64_t cost;         /* worst-case steps per event (instructions + elements reduced) */
    struct cx__out out[CX_FILTER_MAX_OUT];
    uint8_t out_type[CX_FILTER_MAX_OUT];
    bool swap;             /* the sender's byte order differs from ours */
    uint32_t ncode;
    uint32_t max_stack;
    struct cx__insn *code;
    char *pool;            /* string literals */
    char *expr;            /* the source text, for cx_filter_describe */
};

/* --- compiler state -------------------------------------------------------------------- */

struct cx__compiler {
    const char *src;
    size_t src_len;
    size_t pos;                    /* lexer position */
    struct cx__token tok;          /* current token */
    enum cx__tok prev;             /* previous token type (for '.5' vs 'a.b') */
    const struct cx_format *fmt;
    int depth;
    struct cx__node *nodes;
    uint32_t nnodes, cap_nodes;
    struct cx__access *accs;
    uint32_t naccs, cap_accs;
    char *pool;
    uint32_t pool_len, pool_cap;
    const struct cx_format *out_fmt; /* transforms: the output format */
    uint32_t nstate;                 /* stateful calls so far */
    bool shares;                     /* share() was called */
    uint32_t nstmt;
    struct { int32_t node; int32_t out; } stmt[CX_FILTER_MAX_STMT]; /* out -1: a condition */
    struct cx__out out[CX_FILTER_MAX_OUT];
    uint32_t nout;
};

/* Reads the next token into c->tok. Returns 0 or -EINVAL/-ENOMEM with "col N: ...". */
int cx__lex_next(struct cx__compiler *c);

/* A short printable form of the current token for messages ("'foo'", "end of filter"). */
const char *cx__tok_show(const struct cx__compiler *c, char *buf, size_t cap);

/* Appends bytes to the string pool; returns their offset or -ENOMEM. */
long cx__pool_add(struct cx__compiler *c, const char *s, size_t n);

/* Allocates a node / an access; returns its index or -ENOMEM/-E2BIG. */
int cx__node_new(struct cx__compiler *c, uint8_t kind, uint32_t col);
int cx__acc_new(struct cx__compiler *c);

/* Parses the whole program into c->stmt (one entry per statement). 0 or a negative errno. */
int cx__parse(struct cx__compiler *c);

/* Parses one expression at the current token (used by the path resolver for indices). */
int cx__parse_expr(struct cx__compiler *c);

/* Parses a primary term (literal, parenthesised expression, len(), field). */
int cx__parse_primary(struct cx__compiler *c);

/* Parses a field path starting at the current identifier token and turns it into a node:
 * a value (as_len false) or the argument of len() (as_len true). */
enum { PATH_VALUE, PATH_LEN, PATH_ARRAY };
int cx__parse_path(struct cx__compiler *c, int mode);

/* Parses a call of a built-in function (sqrt, abs, min, max, int, float, sum, mean, seq,
 * and the stateful ones) at the current identifier; returns its node, or -ENOENT (no error
 * set) when the identifier is not a function name followed by '('. cx_filter_call.c. */
int cx__parse_call(struct cx__compiler *c);

/* Whether the next non-blank byte after the current token is `ch` (and, when not 0, the
 * one after it is not `not_next`). */
bool cx__next_is(const struct cx__compiler *c, char ch, char not_next);

/* Whether the current token is the identifier `word`. */
bool cx__ident_is(const struct cx__compiler *c, const char *word);

/* Enters one nesting level (-E2BIG past CX_FILTER_MAX_DEPTH). */
int cx__enter(struct cx__compiler *c);

/* Sets "col N: <message>" and returns -err. */
int cx__syntax(int err, uint32_t col, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Emits the program for c->stmt into f. */
int cx__gen(struct cx__compiler *c, struct cx_filter *f);

/* Name of an op (for the listing). */
const char *cx__op_name(uint8_t op);

#endif
