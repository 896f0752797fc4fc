/* Heterogeneous conversion: hand-made byte images of a big-endian and of a 32-bit sender,
 * type evolution both ways (ECho 3.4), nested structs and variable arrays of structs. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "format/cx_codec.h"
#include "format/cx_format_registry.h"
#include "format/cx_plan.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>

static _Alignas(8) uint8_t img[1024];
static _Alignas(8) uint8_t out[4096];

static void be(uint8_t *p, uint64_t v, int n) { for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * (n - 1 - i))); }
static void le(uint8_t *p, uint64_t v, int n) { for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint64_t dbits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static const struct cx_format *reg_json(const char *js, const struct cx_arch *a)
{
    struct cx_format *f;
    const struct cx_format *r = NULL;
    if (cx_format_from_json(js, strlen(js), a, &f) < 0) {
        fprintf(stderr, "  %s\n", cx_errmsg());
        return NULL;
    }
    cx_format_registry_insert(f, &r);
    return r;
}

struct rec { int64_t id; double x; uint32_t n; int64_t *vals; char *label; };
static const struct cx_field rec_f[] = {
    {"id", "int64", 8, offsetof(struct rec, id)}, {"x", "double", 8, offsetof(struct rec, x)},
    {"n", "uint32", 4, offsetof(struct rec, n)}, {"vals", "int64[n]", 8, offsetof(struct rec, vals)},
    {"label", "string", sizeof(char *), offsetof(struct rec, label)}, {NULL}};
static const struct cx_struct_decl rec_d[] = {{"rec", rec_f, sizeof(struct rec)}, {NULL}};

CX_TEST(big_endian_sender_narrower_types)
{
    struct cx_arch bea = {1, 8, 8, 8};
    const struct cx_format *w = reg_json(
        "{\"name\":\"rec\",\"fields\":[{\"name\":\"id\",\"type\":\"int32\"},"
        "{\"name\":\"x\",\"type\":\"double\"},{\"name\":\"n\",\"type\":\"uint16\"},"
        "{\"name\":\"vals\",\"type\":\"int32[n]\"},{\"name\":\"label\",\"type\":\"string\"}]}", &bea);
    CX_CHECK(w != NULL);
    CX_CHECK_EQ_INT(cx_format_size(w), 40); /* id@0 x@8 n@16 vals@24 label@32 */
    struct cx_format *lf;
    const struct cx_format *l;
    CX_CHECK_EQ_INT(cx_format_create(rec_d, NULL, &lf), 0);
    CX_CHECK_EQ_INT(cx_format_registry_insert(lf, &l), 0);
    memset(img, 0, sizeof img);
    le(img, 40, 4); le(img + 4, 2, 4);           /* side: 2 slots */
    le(img + 8, 80, 8); le(img + 16, 12, 8);      /* vals: 3 x int32 at 80 */
    le(img + 24, 96, 8); le(img + 32, 6, 8);      /* label at 96 */
    uint8_t *fx = img + 40;
    be(fx, (uint32_t)-5, 4); be(fx + 8, dbits(6.5), 8); be(fx + 16, 3, 2);
    be(fx + 24, 0xdeadbeef, 8); be(fx + 32, 0xfeedface, 8); /* sender's pointers: junk */
    be(img + 80, 7, 4); be(img + 84, (uint32_t)-8, 4); be(img + 88, 9, 4);
    memcpy(img + 96, "hello", 6);
    void *ev;
    CX_CHECK_EQ_INT(cx_decode(l, cx_format_token(w), img, 102, out, sizeof out, &ev), 0);
    struct rec *r = ev;
    CX_CHECK(ev == out);
    CX_CHECK_EQ_INT(r->id, -5);
    CX_CHECK(r->x == 6.5);
    CX_CHECK_EQ_INT(r->n, 3);
    CX_CHECK_EQ_INT(r->vals[0], 7);
    CX_CHECK_EQ_INT(r->vals[1], -8);
    CX_CHECK_EQ_INT(r->vals[2], 9);
    CX_CHECK_STR(r->label, "hello");
    CX_CHECK(r->label == (char *)img + 96); /* strings are never copied */
}

struct r32 { int32_t id; double x; long n; float *vals; char *label; };
static const struct cx_field r32_f[] = {
    {"id", "int32", 4, offsetof(struct r32, id)}, {"x", "double", 8, offsetof(struct r32, x)},
    {"n", "long", sizeof(long), offsetof(struct r32, n)},
    {"vals", "float[n]", 4, offsetof(struct r32, vals)},
    {"label", "string", sizeof(char *), offsetof(struct r32, label)}, {NULL}};
static const struct cx_struct_decl r32_d[] = {{"r32", r32_f, sizeof(struct r32)}, {NULL}};

CX_TEST(i386_sender_4_byte_pointers_longs_alignment)
{
    struct cx_arch i386 = {0, 4, 4, 4};
    const struct cx_format *w = reg_json(
        "{\"name\":\"r32\",\"fields\":[{\"name\":\"id\",\"type\":\"int32\"},"
        "{\"name\":\"x\",\"type\":\"double\"},{\"name\":\"n\",\"type\":\"long\"},"
        "{\"name\":\"vals\",\"type\":\"float[n]\"},{\"name\":\"label\",\"type\":\"string\"}]}", &i386);
    CX_CHECK(w != NULL);
    CX_CHECK_EQ_INT(cx_format_size(w), 24); /* id@0 x@4 n@12 vals@16 label@20 */
    struct cx_format *lf;
    const struct cx_format *l;
    CX_CHECK_EQ_INT(cx_format_create(r32_d, NULL, &lf), 0);
    CX_CHECK_EQ_INT(cx_format_registry_insert(lf, &l), 0);
    memset(img, 0, sizeof img);
    le(img, 40, 4); le(img + 4, 2, 4);
    le(img + 8, 64, 8); le(img + 16, 8, 8);   /* 2 floats at 64 (40 + 24 = 64) */
    le(img + 24, 72, 8); le(img + 32, 3, 8);  /* "ab" */
    uint8_t *fx = img + 40;
    le(fx, 42, 4); le(fx + 4, dbits(-1.25), 8); le(fx + 12, 2, 4);
    le(fx + 16, 0x1000, 4); le(fx + 20, 0x2000, 4);
    le(img + 64, fbits(0.5f), 4); le(img + 68, fbits(2.0f), 4);
    memcpy(img + 72, "ab", 3);
    void *ev;
    size_t need;
    CX_CHECK_EQ_INT(cx_decode_need(l, cx_format_token(w), img, 75, &need), 0);
    CX_CHECK_EQ_INT(need, sizeof(struct r32)); /* float arrays stay in the buffer */
    CX_CHECK_EQ_INT(cx_decode(l, cx_format_token(w), img, 75, out, sizeof out, &ev), 0);
    struct r32 *r = ev;
    CX_CHECK_EQ_INT(r->id, 42);
    CX_CHECK(r->x == -1.25);
    CX_CHECK_EQ_INT(r->n, 2);
    CX_CHECK(r->vals[0] == 0.5f && r->vals[1] == 2.0f);
    CX_CHECK(r->vals == (float *)(img + 64));
    CX_CHECK_STR(r->label, "ab");
}

/* ECho's worst case: v2 adds a field in front of all v1 fields. */
struct v1 { int32_t a; double b; char *s; };
struct v2 { int64_t extra; int32_t a; double b; char *s; };
struct v3 { int32_t a; double b; char *s; int32_t tail; };
static const struct cx_field v1_f[] = {
    {"a", "int32", 4, offsetof(struct v1, a)}, {"b", "double", 8, offsetof(struct v1, b)},
    {"s", "string", sizeof(char *), offsetof(struct v1, s)}, {NULL}};
static const struct cx_field v2_f[] = {
    {"extra", "int64", 8, offsetof(struct v2, extra), "42"},
    {"a", "int32", 4, offsetof(struct v2, a)}, {"b", "double", 8, offsetof(struct v2, b)},
    {"s", "string", sizeof(char *), offsetof(struct v2, s)}, {NULL}};
static const struct cx_field v3_f[] = {
    {"a", "int32", 4, offsetof(struct v3, a)}, {"b", "double", 8, offsetof(struct v3, b)},
    {"s", "string", sizeof(char *), offsetof(struct v3, s)},
    {"tail", "int32", 4, offsetof(struct v3, tail)}, {NULL}};
static const struct cx_struct_decl v1_d[] = {{"ev", v1_f, sizeof(struct v1)}, {NULL}};
static const struct cx_struct_decl v2_d[] = {{"ev", v2_f, sizeof(struct v2)}, {NULL}};
static const struct cx_struct_decl v3_d[] = {{"ev", v3_f, sizeof(struct v3)}, {NULL}};

static const struct cx_format *reg(const struct cx_struct_decl *d)
{
    struct cx_format *f;
    const struct cx_format *r = NULL;
    if (cx_format_create(d, NULL, &f) == 0)
        cx_format_registry_insert(f, &r);
    return r;
}

CX_TEST(v2_sender_extra_field_in_front_v1_receiver)
{
    const struct cx_format *f1 = reg(v1_d), *f2 = reg(v2_d);
    CX_CHECK(f1 && f2);
    struct v2 e = {99, -7, 3.25, "evolved"};
    struct cx_enc enc;
    CX_CHECK_EQ_INT(cx_encode(f2, &e, &enc), 0);
    long n = cx_enc_gather(&enc, img, sizeof img);
    CX_CHECK(n > 0);
    void *ev;
    CX_CHECK_EQ_INT(cx_decode(f1, enc.token, img, (size_t)n, out, sizeof out, &ev), 0);
    struct v1 *r = ev;
    CX_CHECK(ev == out); /* relocated, not in place */
    CX_CHECK_EQ_INT(r->a, -7);
    CX_CHECK(r->b == 3.25);
    CX_CHECK_STR(r->s, "evolved");
    const struct cx__plan *p;
    CX_CHECK_EQ_INT(cx__plan_get(f2, f1, &p), 0);
    CX_CHECK(!p->identity);
    CX_CHECK_EQ_INT(p->nops, 1); /* a, b and s shift by 8: one merged memcpy */
    CX_CHECK_EQ_INT(p->ops[0].code, CX__OP_COPY);
}

CX_TEST(v1_sender_v2_receiver_gets_default)
{
    const struct cx_format *f1 = reg(v1_d), *f2 = reg(v2_d);
    CX_CHECK(f1 && f2);
    struct v1 e = {5, 0.5, NULL};
    struct cx_enc enc;
    CX_CHECK_EQ_INT(cx_encode(f1, &e, &enc), 0);
    long n = cx_enc_gather(&enc, img, sizeof img);
    void *ev;
    memset(out, 0xAB, sizeof out);
    CX_CHECK_EQ_INT(cx_decode(f2, enc.token, img, (size_t)n, out, sizeof out, &ev), 0);
    struct v2 *r = ev;
    CX_CHECK_EQ_INT(r->extra, 42);
    CX_CHECK_EQ_INT(r->a, 5);
    CX_CHECK(r->b == 0.5);
    CX_CHECK(r->s == NULL);
}

CX_TEST(extra_field_at_end_still_in_place)
{
    const struct cx_format *f1 = reg(v1_d), *f3 = reg(v3_d);
    CX_CHECK(f1 && f3);
    struct v3 e = {1, 2.0, "t", 77};
    struct cx_enc enc;
    CX_CHECK_EQ_INT(cx_encode(f3, &e, &enc), 0);
    long n = cx_enc_gather(&enc, img, sizeof img);
    void *ev;
    CX_CHECK_EQ_INT(cx_decode(f1, enc.token, img, (size_t)n, NULL, 0, &ev), 0);
    CX_CHECK((uint8_t *)ev > img && (uint8_t *)ev < img + n);
    struct v1 *r = ev;
    CX_CHECK_EQ_INT(r->a, 1);
    CX_CHECK_STR(r->s, "t");
}

/* Nested structs and a variable array of structs, receiver with reordered, wider fields. */
struct pt { float x; int16_t id; };
struct cloud { char tag[4]; struct pt origin; uint16_t np; struct pt *pts; };
struct lpt { int32_t id; double x; int32_t unused; };
struct lcloud { uint64_t np; struct lpt *pts; struct lpt origin; char tag[6]; };
static const struct cx_field pt_f[] = {{"x", "float", 4, offsetof(struct pt, x)},
                                       {"id", "int16", 2, offsetof(struct pt, id)}, {NULL}};
static const struct cx_field cloud_f[] = {
    {"tag", "char[4]", 1, offsetof(struct cloud, tag)},
    {"origin", "pt", sizeof(struct pt), offsetof(struct cloud, origin)},
    {"np", "uint16", 2, offsetof(struct cloud, np)},
    {"pts", "pt[np]", sizeof(struct pt), offsetof(struct cloud, pts)}, {NULL}};
static const struct cx_field lpt_f[] = {
    {"id", "int32", 4, offsetof(struct lpt, id)}, {"x", "double", 8, offsetof(struct lpt, x)},
    {"unused", "int32", 4, offsetof(struct lpt, unused), "-1"}, {NULL}};
static const struct cx_field lcloud_f[] = {
    {"np", "uint64", 8, offsetof(struct lcloud, np)},
    {"pts", "pt[np]", sizeof(struct lpt), offsetof(struct lcloud, pts)},
    {"origin", "pt", sizeof(struct lpt), offsetof(struct lcloud, origin)},
    {"tag", "char[6]", 1, offsetof(struct lcloud, tag)}, {NULL}};
static const struct cx_struct_decl cloud_d[] = {
    {"cloud", cloud_f, sizeof(struct cloud)}, {"pt", pt_f, sizeof(struct pt)}, {NULL}};
static const struct cx_struct_decl lcloud_d[] = {
    {"cloud", lcloud_f, sizeof(struct lcloud)}, {"pt", lpt_f, sizeof(struct lpt)}, {NULL}};

CX_TEST(nested_and_var_array_of_structs_converted)
{
    const struct cx_format *w = reg(cloud_d), *l = reg(lcloud_d);
    CX_CHECK(w && l);
    struct pt pts[3] = {{1.5f, 10}, {2.5f, -20}, {3.5f, 30}};
    struct cloud c = {"abc", {0.25f, 7}, 3, pts};
    struct cx_enc enc;
    CX_CHECK_EQ_INT(cx_encode(w, &c, &enc), 0);
    long n = cx_enc_gather(&enc, img, sizeof img);
    void *ev;
    CX_CHECK_EQ_INT(cx_decode(l, enc.token, img, (size_t)n, out, sizeof out, &ev), 0);
    struct lcloud *r = ev;
    CX_CHECK_EQ_INT(r->np, 3);
    CX_CHECK_STR(r->tag, "abc");
    CX_CHECK_EQ_INT(r->tag[4], 0); /* the longer local array is zero-filled */
    CX_CHECK_EQ_INT(r->origin.id, 7);
    CX_CHECK(r->origin.x == 0.25);
    CX_CHECK_EQ_INT(r->origin.unused, -1);
    CX_CHECK((uint8_t *)r->pts >= out && (uint8_t *)r->pts < out + sizeof out);
    CX_CHECK_EQ_INT(r->pts[1].id, -20);
    CX_CHECK(r->pts[2].x == 3.5);
    CX_CHECK_EQ_INT(r->pts[2].unused, -1);
}

CX_TEST(incompatible_kinds_refused)
{
    const char *a = "{\"name\":\"k\",\"fields\":[{\"name\":\"v\",\"type\":\"string\"}]}";
    const char *b = "{\"name\":\"k\",\"fields\":[{\"name\":\"v\",\"type\":\"int32\"}]}";
    const struct cx_format *fa = reg_json(a, NULL), *fb = reg_json(b, NULL);
    CX_CHECK(fa && fb);
    char *s = "x";
    struct cx_enc enc;
    CX_CHECK_EQ_INT(cx_encode(fa, &s, &enc), 0);
    long n = cx_enc_gather(&enc, img, sizeof img);
    void *ev;
    CX_CHECK_EQ_INT(cx_decode(fb, enc.token, img, (size_t)n, out, sizeof out, &ev), -EPROTO);
    CX_CHECK(strstr(cx_errmsg(), "field 'v'") != NULL);
}

CX_TEST(numeric_conversions)
{
    const char *a = "{\"name\":\"n\",\"fields\":[{\"name\":\"f\",\"type\":\"double\"},"
                    "{\"name\":\"i\",\"type\":\"int8\"},{\"name\":\"u\",\"type\":\"uint64\"},"
                    "{\"name\":\"b\",\"type\":\"int32\"}]}";
    const char *b = "{\"name\":\"n\",\"fields\":[{\"name\":\"f\",\"type\":\"int32\"},"
                    "{\"name\":\"i\",\"type\":\"double\"},{\"name\":\"u\",\"type\":\"uint8\"},"
                    "{\"name\":\"b\",\"type\":\"bool\"}]}";
    struct na { double f; int8_t i; uint64_t u; int32_t b; } x = {-3.75, -100, 0x1ff, 5};
    struct nb { int32_t f; double i; uint8_t u; _Bool b; };
    const struct cx_format *fa = reg_json(a, NULL), *fb = reg_json(b, NULL);
    CX_CHECK(fa && fb);
    struct cx_enc enc;
    CX_CHECK_EQ_INT(cx_encode(fa, &x, &enc), 0);
    long n = cx_enc_gather(&enc, img, sizeof img);
    void *ev;
    CX_CHECK_EQ_INT(cx_decode(fb, enc.token, img, (size_t)n, out, sizeof out, &ev), 0);
    struct nb *r = ev;
    CX_CHECK_EQ_INT(r->f, -3);
    CX_CHECK(r->i == -100.0);
    CX_CHECK_EQ_INT(r->u, 0xff);
    CX_CHECK_EQ_INT(r->b, 1);
}

/* ---- element kernels: every numeric pair against the per-element reference ---- */

struct ntype { uint8_t kind; uint32_t size; const char *name; };
static const struct ntype ntypes[] = {
    {CX_K_INT, 1, "int8"},   {CX_K_INT, 2, "int16"},  {CX_K_INT, 4, "int32"},
    {CX_K_INT, 8, "int64"},  {CX_K_UINT, 1, "uint8"}, {CX_K_UINT, 2, "uint16"},
    {CX_K_UINT, 4, "uint32"}, {CX_K_UINT, 8, "uint64"}, {CX_K_FLOAT, 4, "float"},
    {CX_K_FLOAT, 8, "double"}, {CX_K_ENUM, 4, "enum"}, {CX_K_CHAR, 1, "char"},
    {CX_K_BOOL, 1, "bool"},
};
#define NNUM 10 /* the first ten: every one must have a kernel to every other */
#define NTYPES (sizeof ntypes / sizeof ntypes[0])

/* Edge values of each type, as doubles or integers written in the host's order. */
static const double fedge[] = {
    0.0, -0.0, 0.5, -0.5, 1.5, -1.5, -3.75, 127.5, 128.0, -128.5, 255.9, 256.0, 32767.5,
    -32768.9, 65535.0, 65536.0, 2147483647.0, 2147483648.0, -2147483648.0, -2147483649.0,
    4294967295.0, 4294967296.0, 1e10, -1e10, 0x1p52, -0x1p52, 0x1p53 + 2, 0x1.fffffffffffffp62,
    0x1p63, -0x1p63, -0x1.0000000000001p63, 0x1.fffffffffffffp63, 0x1p64, -0x1p64, 1e19,
    2e19, 1e30, -1e30, 3.4028234663852886e38, 3.4028235677973366e38, 3.4028236e38, -3.4028236e38,
    0x1.fffffe8p127, -0x1.fffffe8p127, /* above FLT_MAX yet rounding to it: infinity */
    1e300, -1e300, 1e-300, 1e-45, 5e-324, INFINITY, -INFINITY, NAN, -NAN};
static const uint64_t iedge[] = {
    0, 1, 2, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xffff, 0x10000, 0x7fffffff, 0x80000000,
    0xffffffff, 0x100000000ull, 0x7fffffffffffffffull, 0x8000000000000000ull,
    0xffffffffffffffffull, 0xfffffffffffffffeull, 0x20000000000001ull, 0x1000001,
    0x123456789abcdef0ull, 0xfedcba9876543210ull, 0x8000000000000001ull, 0x7ffffffffffffc00ull,
    0xfffffffffffff800ull, 0xfffffffffffffc00ull, 0xffffff80ull, 0xff80, 0x4b000001,
    0x1000001000000001ull, 0x8000010000000001ull, /* (float)(double)v != (float)v */
};

static void put_value(uint8_t *p, const struct ntype *t, unsigned i, bool swap)
{
    uint64_t u;
    if (t->kind == CX_K_FLOAT) {
        double d = fedge[i % (sizeof fedge / sizeof fedge[0])];
        if (i / (sizeof fedge / sizeof fedge[0]) % 2)
            d = -d * 0.75 + (double)i; /* more values between the edges */
        if (t->size == 4) {
            float f = (float)d;
            uint32_t x;
            memcpy(&x, &f, 4);
            u = x;
        } else {
            memcpy(&u, &d, 8);
        }
    } else {
        u = iedge[i % (sizeof iedge / sizeof iedge[0])];
        if (i / (sizeof iedge / sizeof iedge[0]) % 2)
            u = ~u + i; /* the negatives too */
    }
    if (swap)
        u = t->size == 2 ? __builtin_bswap16((uint16_t)u) : t->size == 4 ? __builtin_bswap32((uint32_t)u)
          : t->size == 8 ? __builtin_bswap64(u) : u;
    cx__store_u(p, t->size, u);
}

/* Every (source, target, swap) pair in every kernel variant this CPU runs, against the
 * reference: unaligned starts, lengths around every vector width, edge values (NaN,
 * infinities, out of range both ways, negatives, byte-swapped); a byte written outside
 * the target, or any byte differing from the reference, fails. */
CX_TEST(element_kernels_match_the_reference_for_every_pair)
{
    static const unsigned lens[] = {0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 129, 300};
    static const unsigned offs[][2] = {{0, 0}, {1, 3}, {3, 1}, {7, 5}, {4, 8}};
    static uint8_t src[300 * 8 + 16], want[300 * 8 + 32], got[300 * 8 + 32];
    int variants = 0;
    for (int isa = 0; isa < CX__ISA_COUNT; isa++) {
        if (!cx__conv_isa_ok((enum cx__isa)isa))
            continue;
        variants++;
        fprintf(stderr, "  kernel variant %s\n", cx__conv_isa_name((enum cx__isa)isa));
        for (unsigned a = 0; a < NTYPES; a++)
            for (unsigned b = 0; b < NTYPES; b++)
                for (int sw = 0; sw < 2; sw++) {
                    const struct ntype *S = &ntypes[a], *D = &ntypes[b];
                    cx__conv_fn k = cx__conv_kernel_isa((enum cx__isa)isa, S->kind, S->size,
                                                        sw, D->kind, D->size);
                    if (D->kind == CX_K_BOOL && S->kind != CX_K_BOOL) {
                        CX_CHECK(k == NULL); /* v != 0: the reference's alone */
                        continue;
                    }
                    if (!k)
                        fprintf(stderr, "  no kernel %s -> %s swap %d\n", S->name, D->name, sw);
                    CX_CHECK(k != NULL);
                    for (unsigned o = 0; o < sizeof offs / sizeof offs[0]; o++)
                        for (unsigned l = 0; l < sizeof lens / sizeof lens[0]; l++) {
                            unsigned n = lens[l], so = offs[o][0], dof = offs[o][1];
                            for (unsigned i = 0; i < n; i++)
                                put_value(src + so + i * S->size, S, i + 7 * l + o, sw);
                            memset(want, 0xA5, sizeof want);
                            memset(got, 0xA5, sizeof got);
                            cx__conv_ref(S->kind, S->size, sw, D->kind, D->size, src + so,
                                         want + dof, n);
                            k(src + so, got + dof, n);
                            if (memcmp(want, got, sizeof got)) {
                                unsigned at = 0;
                                while (want[at] == got[at])
                                    at++;
                                fprintf(stderr, "  %s: %s -> %s swap %d, n %u, offsets %u/%u: "
                                        "byte %u (element %d) differs\n",
                                        cx__conv_isa_name((enum cx__isa)isa), S->name, D->name,
                                        sw, n, so, dof, at, (int)(at - dof) / (int)D->size);
                            }
                            CX_CHECK(!memcmp(want, got, sizeof got));
                        }
                }
    }
    CX_CHECK(variants >= 1);
}

/* The reference itself on values worked out by hand (so a change of rules shows here). */
CX_TEST(reference_rules_clamp_truncate_and_round)
{
    uint8_t s[8], d[8];
    double v = -3.75;
    memcpy(s, &v, 8);
    cx__conv_ref(CX_K_FLOAT, 8, false, CX_K_INT, 4, s, d, 1);
    CX_CHECK_EQ_INT(cx__load_i(d, 4, false), -3); /* toward zero */
    v = 1e30;
    memcpy(s, &v, 8);
    cx__conv_ref(CX_K_FLOAT, 8, false, CX_K_INT, 8, s, d, 1);
    CX_CHECK_EQ_INT(cx__load_i(d, 8, false), INT64_MAX); /* clamped to int64 */
    cx__conv_ref(CX_K_FLOAT, 8, false, CX_K_INT, 4, s, d, 1);
    CX_CHECK_EQ_INT(cx__load_u(d, 4, false), 0xffffffff); /* INT64_MAX truncated */
    v = 300.0;
    memcpy(s, &v, 8);
    cx__conv_ref(CX_K_FLOAT, 8, false, CX_K_UINT, 1, s, d, 1);
    CX_CHECK_EQ_INT(d[0], 44); /* 300 truncated to 8 bits, not clamped to 255 */
    v = -1.0;
    memcpy(s, &v, 8);
    cx__conv_ref(CX_K_FLOAT, 8, false, CX_K_UINT, 4, s, d, 1);
    CX_CHECK_EQ_INT(cx__load_u(d, 4, false), 0); /* negative to unsigned: 0 */
    v = NAN;
    memcpy(s, &v, 8);
    cx__conv_ref(CX_K_FLOAT, 8, false, CX_K_INT, 2, s, d, 1);
    CX_CHECK_EQ_INT(cx__load_i(d, 2, false), 0);
    v = 3.4028236e38; /* above FLT_MAX, though it would round to it */
    memcpy(s, &v, 8);
    cx__conv_ref(CX_K_FLOAT, 8, false, CX_K_FLOAT, 4, s, d, 1);
    float f;
    memcpy(&f, d, 4);
    CX_CHECK(isinf(f) && f > 0);
    be(s, (uint64_t)-2, 2); /* a big-endian int16 -2 to int64 */
    cx__conv_ref(CX_K_INT, 2, true, CX_K_INT, 8, s, d, 1);
    CX_CHECK_EQ_INT(cx__load_i(d, 8, false), -2);
    be(s, 0x123456789ull, 8); /* uint64 to uint16: the low 16 bits */
    cx__conv_ref(CX_K_UINT, 8, true, CX_K_INT, 2, s, d, 1);
    CX_CHECK_EQ_INT(cx__load_u(d, 2, false), 0x6789);
}

/* A big-endian sender with runs of like fields and arrays: each run or array is one op
 * with a kernel (none interpreted per element), and the values arrive right. */
struct run_l { double a, b, c; int64_t arr[5]; int32_t q[3]; uint8_t flag; };
CX_TEST(runs_of_like_fields_are_one_kernel_op)
{
    struct cx_arch bea = {1, 8, 8, 8};
    const struct cx_format *w = reg_json(
        "{\"name\":\"run\",\"fields\":[{\"name\":\"a\",\"type\":\"float\"},"
        "{\"name\":\"b\",\"type\":\"float\"},{\"name\":\"c\",\"type\":\"float\"},"
        "{\"name\":\"arr\",\"type\":\"int16[5]\"},{\"name\":\"q\",\"type\":\"int8[3]\"},"
        "{\"name\":\"flag\",\"type\":\"uint8\"}]}", &bea);
    const struct cx_format *l = reg_json(
        "{\"name\":\"run\",\"fields\":[{\"name\":\"a\",\"type\":\"double\"},"
        "{\"name\":\"b\",\"type\":\"double\"},{\"name\":\"c\",\"type\":\"double\"},"
        "{\"name\":\"arr\",\"type\":\"int64[5]\"},{\"name\":\"q\",\"type\":\"int32[3]\"},"
        "{\"name\":\"flag\",\"type\":\"uint8\"}]}", NULL);
    CX_CHECK(w && l);
    CX_CHECK_EQ_INT(cx_format_size(l), sizeof(struct run_l));
    const struct cx__plan *p;
    CX_CHECK_EQ_INT(cx__plan_get(w, l, &p), 0);
    int conv = 0;
    for (uint32_t i = 0; i < p->nops; i++)
        if (p->ops[i].code == CX__OP_CONV) {
            conv++;
            CX_CHECK(p->ops[i].kern != NULL);
        }
    CX_CHECK_EQ_INT(conv, 3); /* a b c | arr | q */
    CX_CHECK_EQ_INT(p->ops[0].count, 3);
    memset(img, 0, sizeof img);
    le(img, 8, 4);
    uint8_t *fx = img + 8; /* a@0 b@4 c@8 arr@12 q@22 flag@25 */
    be(fx, fbits(1.5f), 4); be(fx + 4, fbits(-2.25f), 4); be(fx + 8, fbits(1e20f), 4);
    for (int i = 0; i < 5; i++)
        be(fx + 12 + 2 * i, (uint64_t)(-300 * i + 7), 2);
    fx[22] = 0x80; fx[23] = 0x7f; fx[24] = 0xff; fx[25] = 9;
    void *ev;
    CX_CHECK_EQ_INT(cx_decode(l, cx_format_token(w), img, 8 + cx_format_size(w), out,
                              sizeof out, &ev), 0);
    struct run_l *r = ev;
    CX_CHECK(r->a == 1.5 && r->b == -2.25 && r->c == (double)1e20f);
    for (int i = 0; i < 5; i++)
        CX_CHECK_EQ_INT(r->arr[i], -300 * i + 7);
    CX_CHECK_EQ_INT(r->q[0], -128);
    CX_CHECK_EQ_INT(r->q[1], 127);
    CX_CHECK_EQ_INT(r->q[2], -1);
    CX_CHECK_EQ_INT(r->flag, 9);
}

/* ---- the plan caches: many pairs, several threads ---- */

#define NVAR 40 /* pairs: more than a thread's cache has slots, so slots collide */
static const struct cx_format *var_w[NVAR], *var_l;
struct pt2 { double x; int64_t id; }; /* the local format: fields in another order */

/* Wire variant i: id int32 or int64, x float or double, then a pad of 1..10 bytes (so
 * every variant has its own token and a conversion of its own). */
static const struct cx_format *variant(int i, size_t *id_off, size_t *x_off)
{
    char js[256];
    int id32 = i & 1, xf = (i & 2) != 0;
    snprintf(js, sizeof js,
             "{\"name\":\"pt2\",\"fields\":[{\"name\":\"id\",\"type\":\"%s\"},"
             "{\"name\":\"x\",\"type\":\"%s\"},{\"name\":\"pad\",\"type\":\"uint8[%d]\"}]}",
             id32 ? "int32" : "int64", xf ? "float" : "double", i / 4 + 1);
    *id_off = 0;
    *x_off = id32 && xf ? 4 : 8; /* natural alignment */
    return reg_json(js, NULL);
}

/* One event of variant i in img: side area (no slots), then the fixed part. */
static size_t variant_event(int i, uint8_t *buf, int64_t id, double x)
{
    size_t io, xo;
    const struct cx_format *w = variant(i, &io, &xo); /* registered: the same format */
    size_t size = cx_format_size(w);
    memset(buf, 0, 8 + size);
    le(buf, 8, 4);
    uint8_t *fx = buf + 8;
    if (i & 1) {
        int32_t v = (int32_t)id;
        memcpy(fx + io, &v, 4);
    } else {
        memcpy(fx + io, &id, 8);
    }
    if (i & 2) {
        float f = (float)x;
        memcpy(fx + xo, &f, 4);
    } else {
        memcpy(fx + xo, &x, 8);
    }
    return 8 + size;
}

struct worker {
    int t, bad, rounds;
};

static void *decode_all(void *arg)
{
    struct worker *w = arg;
    _Alignas(8) uint8_t ev[64], res[64];
    for (int r = 0; r < w->rounds; r++)
        for (int k = 0; k < NVAR; k++) {
            int i = (k * 7 + w->t * 3 + r) % NVAR; /* each thread its own order */
            int64_t id = 1000 * i + 7 * w->t + r;
            size_t n = variant_event(i, ev, id, i + 0.5);
            void *out;
            if (cx_decode(var_l, cx_format_token(var_w[i]), ev, n, res, sizeof res, &out) < 0 ||
                ((struct pt2 *)out)->id != id || ((struct pt2 *)out)->x != i + 0.5) {
                if (!w->bad++)
                    fprintf(stderr, "  variant %d: %s\n", i, cx_errmsg());
            }
        }
    return NULL;
}

/* Every thread looks plans up in its own small cache before the shared one: with 40
 * (wire, local) pairs decoded in different orders by four threads at once (slots collide
 * and are replaced all the time), every event still converts with its own plan, each
 * plan is built once, and a pair that cannot convert is refused every time (never cached). */
CX_TEST(plan_caches_many_pairs_many_threads)
{
    size_t io, xo;
    for (int i = 0; i < NVAR; i++)
        CX_CHECK((var_w[i] = variant(i, &io, &xo)) != NULL);
    var_l = reg_json("{\"name\":\"pt2\",\"fields\":[{\"name\":\"x\",\"type\":\"double\"},"
                     "{\"name\":\"id\",\"type\":\"int64\"}]}", NULL);
    CX_CHECK(var_l != NULL);
    size_t before = cx_plan_cache_count();
    struct worker w[4];
    pthread_t th[4];
    for (int t = 0; t < 4; t++) {
        w[t] = (struct worker){t, 0, 50};
        CX_CHECK_EQ_INT(pthread_create(&th[t], NULL, decode_all, &w[t]), 0);
    }
    for (int t = 0; t < 4; t++) {
        pthread_join(th[t], NULL);
        CX_CHECK_EQ_INT(w[t].bad, 0);
    }
    CX_CHECK_EQ_INT((int)(cx_plan_cache_count() - before), NVAR);
    struct worker self = {9, 0, 3}; /* this thread too, after the others filled the cache */
    decode_all(&self);
    CX_CHECK_EQ_INT(self.bad, 0);
    const struct cx_format *str = reg_json(
        "{\"name\":\"pt2\",\"fields\":[{\"name\":\"id\",\"type\":\"string\"}]}", NULL);
    CX_CHECK(str != NULL);
    _Alignas(8) uint8_t ev[64], res[64];
    size_t n = variant_event(0, ev, 1, 1.5);
    void *out;
    for (int k = 0; k < 2; k++) {
        CX_CHECK_EQ_INT(cx_decode(str, cx_format_token(var_w[0]), ev, n, res, sizeof res, &out),
                        -EPROTO);
        CX_CHECK(strstr(cx_errmsg(), "field 'id'") != NULL);
    }
    CX_CHECK_EQ_INT((int)(cx_plan_cache_count() - before), NVAR);
}

CX_TEST_MAIN()
