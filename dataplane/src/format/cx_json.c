/* The strict JSON reader of cx_json.h: recursive descent over a byte range. */
#include "format/cx_json.h"

#include "common/cx_error.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct jp { const char *s; size_t len, pos; };

static int jerr(struct jp *p, const char *what)
{
    return cx_err_set(EINVAL, "JSON: %s at byte %zu", what, p->pos);
}

static void ws(struct jp *p)
{
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
                               p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

static int lit(struct jp *p, const char *w)
{
    size_t n = strlen(w);
    if (p->len - p->pos < n || memcmp(p->s + p->pos, w, n))
        return jerr(p, "bad literal");
    p->pos += n;
    return 0;
}

static int hex4(struct jp *p, uint32_t *v)
{
    if (p->len - p->pos < 4)
        return jerr(p, "truncated \\u escape");
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[p->pos++];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return jerr(p, "bad \\u escape");
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

static int str(struct jp *p, char **out)
{
    p->pos++; /* opening quote */
    size_t cap = 16, n = 0;
    char *b = malloc(cap);
    int rc;
    if (!b)
        return cx_err_set(ENOMEM, "out of memory");
    for (;;) {
        if (p->pos >= p->len) { rc = jerr(p, "unterminated string"); goto error; }
        unsigned char c = (unsigned char)p->s[p->pos++];
        uint32_t cp;
        char enc[4];
        size_t en = 0;
        if (c == '"')
            break;
        if (c < 0x20) { rc = jerr(p, "control character in string"); goto error; }
        if (c != '\\') {
            enc[en++] = (char)c;
        } else {
            if (p->pos >= p->len) { rc = jerr(p, "unterminated escape"); goto error; }
            char e = p->s[p->pos++];
            switch (e) {
            case '"': enc[en++] = '"'; break;
            case '\\': enc[en++] = '\\'; break;
            case '/': enc[en++] = '/'; break;
            case 'b': enc[en++] = '\b'; break;
            case 'f': enc[en++] = '\f'; break;
            case 'n': enc[en++] = '\n'; break;
            case 'r': enc[en++] = '\r'; break;
            case 't': enc[en++] = '\t'; break;
            case 'u':
                if ((rc = hex4(p, &cp)) < 0)
                    goto error;
                if (cp >= 0xDC00 && cp <= 0xDFFF) { rc = jerr(p, "lone surrogate"); goto error; }
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    uint32_t lo;
                    if (p->len - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') {
                        rc = jerr(p, "lone surrogate");
                        goto error;
                    }
                    p->pos += 2;
                    if ((rc = hex4(p, &lo)) < 0)
                        goto error;
                    if (lo < 0xDC00 || lo > 0xDFFF) { rc = jerr(p, "bad surrogate pair"); goto error; }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                if (cp == 0) { rc = jerr(p, "NUL in string"); goto error; }
                if (cp < 0x80) {
                    enc[en++] = (char)cp;
                } else if (cp < 0x800) {
                    enc[en++] = (char)(0xC0 | cp >> 6);
                    enc[en++] = (char)(0x80 | (cp & 0x3F));
                } else if (cp < 0x10000) {
                    enc[en++] = (char)(0xE0 | cp >> 12);
                    enc[en++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                    enc[en++] = (char)(0x80 | (cp & 0x3F));
                } else {
                    enc[en++] = (char)(0xF0 | cp >> 18);
                    enc[en++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                    enc[en++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                    enc[en++] = (char)(0x80 | (cp & 0x3F));
                }
                break;
            default: rc = jerr(p, "bad escape"); goto error;
            }
        }
        if (n + en + 1 > cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) { rc = cx_err_set(ENOMEM, "out of memory"); goto error; }
            b = nb;
        }
        memcpy(b + n, enc, en);
        n += en;
    }
    b[n] = '\0';
    *out = b;
    return 0;
error:
    free(b);
    return rc;
}

static int num(struct jp *p, double *out)
{
    size_t st = p->pos;
    const char *s = p->s;
#define DIG (p->pos < p->len && s[p->pos] >= '0' && s[p->pos] <= '9')
    if (p->pos < p->len && s[p->pos] == '-')
        p->pos++;
    if (!DIG)
        return jerr(p, "bad number");
    if (s[p->pos] == '0') {
        p->pos++;
        if (DIG)
            return jerr(p, "leading zero");
    } else {
        while (DIG) p->pos++;
    }
    if (p->pos < p->len && s[p->pos] == '.') {
        p->pos++;
        if (!DIG) return jerr(p, "bad fraction");
        while (DIG) p->pos++;
    }
    if (p->pos < p->len && (s[p->pos] == 'e' || s[p->pos] == 'E')) {
        p->pos++;
        if (p->pos < p->len && (s[p->pos] == '+' || s[p->pos] == '-'))
            p->pos++;
        if (!DIG) return jerr(p, "bad exponent");
        while (DIG) p->pos++;
    }
#undef DIG
    char tmp[64];
    if (p->pos - st >= sizeof tmp)
        return jerr(p, "number too long");
    memcpy(tmp, s + st, p->pos - st);
    tmp[p->pos - st] = '\0';
    *out = strtod(tmp, NULL);
    return 0;
}

static int value(struct jp *p, struct cx__jv *v, int depth);

static int push(struct cx__jv *v, size_t *cap, struct cx__jv **item)
{
    if (v->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        struct cx__jv *ni = realloc(v->items, nc * sizeof *ni);
        if (!ni) return cx_err_set(ENOMEM, "out of memory");
        v->items = ni;
        if (v->t == CX__J_OBJ) {
            char **nk = realloc(v->keys, nc * sizeof *nk);
            if (!nk) return cx_err_set(ENOMEM, "out of memory");
            v->keys = nk;
        }
        *cap = nc;
    }
    *item = &v->items[v->n];
    memset(*item, 0, sizeof **item);
    return 0;
}

static int container(struct jp *p, struct cx__jv *v, int depth)
{
    bool obj = p->s[p->pos] == '{';
    char close = obj ? '}' : ']';
    size_t cap = 0;
    int rc;
    v->t = obj ? CX__J_OBJ : CX__J_ARR;
    p->pos++;
    ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return 0;
    }
    for (;;) {
        struct cx__jv *it = NULL;
        char *key = NULL;
        ws(p);
        if (obj) {
            if (p->pos >= p->len || p->s[p->pos] != '"')
                return jerr(p, "expected a key");
            if ((rc = str(p, &key)) < 0)
                return rc;
            for (size_t i = 0; i < v->n; i++)
                if (!strcmp(v->keys[i], key)) {
                    free(key);
                    return jerr(p, "duplicate key");
                }
            ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                free(key);
                return jerr(p, "expected ':'");
            }
            p->pos++;
        }
        if ((rc = push(v, &cap, &it)) < 0) {
            free(key);
            return rc;
        }
        if (obj)
            v->keys[v->n] = key;
        v->n++; /* counted now so that cx__json_free releases it on error */
        if ((rc = value(p, it, depth + 1)) < 0)
            return rc;
        ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == close) {
            p->pos++;
            return 0;
        }
        return jerr(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int value(struct jp *p, struct cx__jv *v, int depth)
{
    if (depth > CX__JSON_MAX_DEPTH)
        return jerr(p, "nested too deep");
    ws(p);
    if (p->pos >= p->len)
        return jerr(p, "unexpected end");
    char c = p->s[p->pos];
    switch (c) {
    case '{': case '[': return container(p, v, depth);
    case '"': v->t = CX__J_STR; return str(p, &v->str);
    case 't': v->t = CX__J_BOOL; v->b = true; return lit(p, "true");
    case 'f': v->t = CX__J_BOOL; return lit(p, "false");
    case 'n': v->t = CX__J_NULL; return lit(p, "null");
    default: v->t = CX__J_NUM; return num(p, &v->num);
    }
}

void cx__json_free(struct cx__jv *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++) {
        cx__json_free(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->str);
    memset(v, 0, sizeof *v);
}

int cx__json_parse(const char *text, size_t len, struct cx__jv *out)
{
    struct jp p = {text, len, 0};
    memset(out, 0, sizeof *out);
    int rc = value(&p, out, 0);
    if (rc == 0) {
        ws(&p);
        if (p.pos != p.len)
            rc = jerr(&p, "trailing bytes");
    }
    if (rc < 0)
        cx__json_free(out);
    return rc;
}

const struct cx__jv *cx__json_get(const struct cx__jv *obj, const char *key)
{
    if (!obj || obj->t != CX__J_OBJ)
        return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (!strcmp(obj->keys[i], key))
            return &obj->items[i];
    return NULL;
}
