/* The filter language's tokens (see cx_filter.h for the language). */
#include "filter/cx_filter_int.h"

#include "common/cx_error.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int cx__syntax(int err, uint32_t col, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cx_err_set(err, "col %u: %s", col, msg);
}

long cx__pool_add(struct cx__compiler *c, const char *s, size_t n)
{
    if (c->pool_len + n + 1 > c->pool_cap) {
        uint32_t cap = c->pool_cap ? c->pool_cap * 2 : 64;
        while (cap < c->pool_len + n + 1)
            cap *= 2;
        char *p = realloc(c->pool, cap);
        if (!p)
            return cx_err_set(ENOMEM, "filter string pool of %u bytes", cap);
        c->pool = p;
        c->pool_cap = cap;
    }
    long off = c->pool_len;
    memcpy(c->pool + off, s, n);
    c->pool[off + n] = '\0';
    c->pool_len += (uint32_t)n + 1;
    return off;
}

static bool ident_start(char ch) { return isalpha((unsigned char)ch) || ch == '_'; }
static bool ident_char(char ch) { return isalnum((unsigned char)ch) || ch == '_'; }

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* One character of a string or char literal at s[*i] (after the opening quote); a
 * backslash escape is decoded. Returns 0, or -EINVAL at column col + *i. */
static int lit_char(const struct cx__compiler *c, size_t *i, uint8_t *out)
{
    const char *s = c->src;
    char ch = s[*i];
    if (ch != '\\') {
        *out = (uint8_t)ch;
        (*i)++;
        return 0;
    }
    char e = s[*i + 1];
    size_t at = *i;
    *i += 2;
    switch (e) {
    case 'n': *out = '\n'; return 0;
    case 't': *out = '\t'; return 0;
    case 'r': *out = '\r'; return 0;
    case '0': *out = '\0'; return 0;
    case '\\': *out = '\\'; return 0;
    case '"': *out = '"'; return 0;
    case '\'': *out = '\''; return 0;
    case 'x': {
        int h = hexval(s[*i]), l = h < 0 ? -1 : hexval(s[*i + 1]);
        if (h < 0 || l < 0)
            return cx__syntax(EINVAL, (uint32_t)at + 1, "\\x needs two hex digits");
        *out = (uint8_t)(h * 16 + l);
        *i += 2;
        return 0;
    }
    default:
        if (e == '\0')
            return cx__syntax(EINVAL, (uint32_t)at + 1, "unterminated literal");
        return cx__syntax(EINVAL, (uint32_t)at + 1, "unknown escape '\\%c'",
                          isprint((unsigned char)e) ? e : '?');
    }
}

static int lex_string(struct cx__compiler *c, size_t start)
{
    char buf[256];
    size_t n = 0, i = start + 1;
    long first = -1;
    for (;;) {
        if (i >= c->src_len)
            return cx__syntax(EINVAL, (uint32_t)start + 1, "unterminated string");
        if (c->src[i] == '"')
            break;
        uint8_t ch;
        int rc = lit_char(c, &i, &ch);
        if (rc < 0)
            return rc;
        buf[n++] = (char)ch;
        if (n == sizeof buf) { /* long literal: append in pieces, contiguous in the pool */
            long off = cx__pool_add(c, buf, n);
            if (off < 0)
                return (int)off;
            c->pool_len--; /* the next piece overwrites this piece's NUL */
            if (first < 0)
                first = off;
            n = 0;
        }
    }
    long off = cx__pool_add(c, buf, n);
    if (off < 0)
        return (int)off;
    if (first < 0)
        first = off;
    c->tok.t = TK_STR;
    c->tok.str_off = (uint32_t)first;
    c->tok.str_len = (uint32_t)(c->pool_len - 1 - (uint32_t)first);
    c->pos = i + 1;
    return 0;
}

static int lex_char(struct cx__compiler *c, size_t start)
{
    size_t i = start + 1;
    uint8_t ch;
    if (c->src[i] == '\'' || c->src[i] == '\0')
        return cx__syntax(EINVAL, (uint32_t)start + 1, "empty or unterminated char literal");
    int rc = lit_char(c, &i, &ch);
    if (rc < 0)
        return rc;
    if (c->src[i] != '\'')
        return cx__syntax(EINVAL, (uint32_t)start + 1,
                          "char literal holds one character (use \"...\" for a string)");
    c->tok.t = TK_INT;
    c->tok.v.u = ch;
    c->pos = i + 1;
    return 0;
}

static int lex_number(struct cx__compiler *c, size_t start)
{
    const char *s = c->src;
    size_t i = start;
    bool flt = false;
    if (s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
        i += 2;
        uint64_t v = 0;
        size_t nd = 0;
        for (; hexval(s[i]) >= 0; i++, nd++) {
            if (v >> 60)
                return cx__syntax(EINVAL, (uint32_t)start + 1,
                                  "integer literal is out of range (more than 64 bits)");
            v = v * 16 + (uint64_t)hexval(s[i]);
        }
        if (!nd || ident_char(s[i]) || s[i] == '.')
            return cx__syntax(EINVAL, (uint32_t)start + 1, "bad hexadecimal number");
        c->tok.t = TK_INT;
        c->tok.v.u = v;
        c->pos = i;
        return 0;
    }
    while (isdigit((unsigned char)s[i]))
        i++;
    if (s[i] == '.') {
        flt = true;
        i++;
        while (isdigit((unsigned char)s[i]))
            i++;
    }
    if ((s[i] == 'e' || s[i] == 'E') &&
        (isdigit((unsigned char)s[i + 1]) ||
         ((s[i + 1] == '+' || s[i + 1] == '-') && isdigit((unsigned char)s[i + 2])))) {
        flt = true;
        i += 2;
        while (isdigit((unsigned char)s[i]))
            i++;
    }
    if (ident_char(s[i]) || s[i] == '.')
        return cx__syntax(EINVAL, (uint32_t)start + 1, "bad number '%.*s'",
                          (int)(i - start + 1 > 32 ? 32 : i - start + 1), s + start);
    size_t n = i - start;
    char num[80];
    if (n >= sizeof num)
        return cx__syntax(EINVAL, (uint32_t)start + 1, "number longer than %zu characters",
                          sizeof num - 1);
    memcpy(num, s + start, n);
    num[n] = '\0';
    if (flt) {
        double d = strtod(num, NULL);
        if (isinf(d))
            return cx__syntax(EINVAL, (uint32_t)start + 1, "float literal %s is out of range",
                              num);
        c->tok.t = TK_FLOAT;
        c->tok.v.d = d;
    } else {
        uint64_t v = 0;
        for (size_t k = 0; k < n; k++) {
            uint64_t dgt = (uint64_t)(num[k] - '0');
            if (v > (UINT64_MAX - dgt) / 10)
                return cx__syntax(EINVAL, (uint32_t)start + 1,
                                  "integer literal %s is out of range (more than 64 bits)", num);
            v = v * 10 + dgt;
        }
        c->tok.t = TK_INT;
        c->tok.v.u = v;
    }
    c->pos = i;
    return 0;
}

static int lex_op(struct cx__compiler *c, size_t i)
{
    const char *s = c->src;
    char a = s[i], b = s[i + 1];
    enum cx__tok t;
    size_t n = 1;
    switch (a) {
    case '(': t = TK_LPAREN; break;
    case ')': t = TK_RPAREN; break;
    case '[': t = TK_LBRACK; break;
    case ']': t = TK_RBRACK; break;
    case '.': t = TK_DOT; break;
    case '+': t = TK_PLUS; break;
    case '-': t = TK_MINUS; break;
    case '*': t = TK_STAR; break;
    case '/': t = TK_SLASH; break;
    case '%': t = TK_PCT; break;
    case '!': if (b == '=') { t = TK_NE; n = 2; } else t = TK_NOT; break;
    case '<': if (b == '=') { t = TK_LE; n = 2; } else t = TK_LT; break;
    case '>': if (b == '=') { t = TK_GE; n = 2; } else t = TK_GT; break;
    case '=': if (b == '=') { t = TK_EQ; n = 2; } else t = TK_ASSIGN; break;
    case ';': t = TK_SEMI; break;
    case ',': t = TK_COMMA; break;
    case '&':
        if (b != '&')
            return cx__syntax(EINVAL, (uint32_t)i + 1, "'&' is not an operator (use '&&')");
        t = TK_AND; n = 2; break;
    case '|':
        if (b != '|')
            return cx__syntax(EINVAL, (uint32_t)i + 1, "'|' is not an operator (use '||')");
        t = TK_OR; n = 2; break;
    default:
        if (isprint((unsigned char)a))
            return cx__syntax(EINVAL, (uint32_t)i + 1, "unexpected character '%c'", a);
        return cx__syntax(EINVAL, (uint32_t)i + 1, "unexpected byte 0x%02x", (unsigned char)a);
    }
    c->tok.t = t;
    c->pos = i + n;
    return 0;
}

int cx__lex_next(struct cx__compiler *c)
{
    const char *s = c->src;
    size_t i = c->pos;
    c->prev = c->tok.t;
    while (i < c->src_len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    memset(&c->tok, 0, sizeof c->tok);
    c->tok.col = (uint32_t)i + 1;
    c->tok.text = s + i;
    int rc = 0;
    if (i >= c->src_len) {
        c->tok.t = TK_END;
        c->pos = i;
    } else if (ident_start(s[i])) {
        size_t j = i;
        while (ident_char(s[j]))
            j++;
        c->tok.t = TK_IDENT;
        c->pos = j;
    } else if (isdigit((unsigned char)s[i]) ||
               (s[i] == '.' && isdigit((unsigned char)s[i + 1]) && c->prev != TK_IDENT &&
                c->prev != TK_RBRACK && c->prev != TK_RPAREN)) {
        rc = lex_number(c, i);
    } else if (s[i] == '"') {
        rc = lex_string(c, i);
    } else if (s[i] == '\'') {
        rc = lex_char(c, i);
    } else {
        rc = lex_op(c, i);
    }
    c->tok.len = (uint32_t)(c->pos - i);
    return rc;
}

const char *cx__tok_show(const struct cx__compiler *c, char *buf, size_t cap)
{
    if (c->tok.t == TK_END)
        snprintf(buf, cap, "end of filter");
    else
        snprintf(buf, cap, "'%.*s'", (int)(c->tok.len > 24 ? 24 : c->tok.len), c->tok.text);
    return buf;
}
