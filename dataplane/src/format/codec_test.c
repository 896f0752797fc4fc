/* Homogeneous round trips: every type, in-place delivery, descriptions, registry. */
/* Field lists are written PBIO-style with four members; dflt is left out. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "format/cx_codec.h"
#include "format/cx_format.h"
#include "format/cx_format_registry.h"

#include <stdbool.h>
#include <stddef.h>

enum color { RED, GREEN, BLUE };
struct inner { int16_t a; double b; };
struct all {
    int8_t i8; int16_t i16; int32_t i32; int64_t i64;
    uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64;
    float f; double d; char c; bool b; enum color e; long l;
    struct inner in; int32_t fix[3]; char name[8]; struct inner in2[2];
    uint32_t n; double *vals; char *label; int16_t m; struct inner *parts; char *empty;
};

#define F(name, type) {#name, type, sizeof(((struct all *)0)->name), offsetof(struct all, name)}
static const struct cx_field inner_f[] = {
    {"a", "int16", 2, offsetof(struct inner, a)},
    {"b", "double", 8, offsetof(struct inner, b)}, {NULL}};
static const struct cx_field all_f[] = {
    F(i8, "int8"), F(i16, "integer"), F(i32, "int32"), F(i64, "int64"),
    F(u8, "uint8"), F(u16, "unsigned integer"), F(u32, "uint32"), F(u64, "uint64"),
    F(f, "float"), F(d, "double"), F(c, "char"), F(b, "boolean"), F(e, "enum"), F(l, "long"),
    F(in, "inner"),
    {"fix", "int32[3]", 4, offsetof(struct all, fix)},
    {"name", "char[8]", 1, offsetof(struct all, name)},
    {"in2", "inner[2]", sizeof(struct inner), offsetof(struct all, in2)},
    F(n, "uint32"),
    {"vals", "double[n]", 8, offsetof(struct all, vals)},
    F(label, "string"), F(m, "int16"),
    {"parts", "inner[m]", sizeof(struct inner), offsetof(struct all, parts)},
    F(empty, "string"), {NULL}};
static const struct cx_struct_decl all_d[] = {
    {"all", all_f, sizeof(struct all)}, {"inner", inner_f, sizeof(struct inner)}, {NULL}};

static _Alignas(8) uint8_t wire[4096];

static void fill(struct all *a, double *vals, struct inner *parts)
{
    memset(a, 0, sizeof *a);
    a->i8 = -8; a->i16 = -1600; a->i32 = -320000; a->i64 = -(1LL << 40);
    a->u8 = 200; a->u16 = 60000; a->u32 = 4000000000u; a->u64 = 1ULL << 63;
    a->f = 1.5f; a->d = -2.25; a->c = 'x'; a->b = true; a->e = BLUE; a->l = -7;
    a->in = (struct inner){-3, 3.5};
    a->fix[0] = 1; a->fix[1] = 2; a->fix[2] = 3;
    strcpy(a->name, "abc");
    a->in2[0] = (struct inner){10, 10.5}; a->in2[1] = (struct inner){11, 11.5};
    for (int i = 0; i < 5; i++) vals[i] = i * 1.25;
    a->n = 5; a->vals = vals; a->label = "hello, world";
    parts[0] = (struct inner){100, 0.5}; parts[1] = (struct inner){101, 1.5};
    a->m = 2; a->parts = parts; a->empty = NULL;
}

static int check_all(const struct all *a)
{
    return a->i8 == -8 && a->i16 == -1600 && a->i32 == -320000 && a->i64 == -(1LL << 40) &&
           a->u8 == 200 && a->u16 == 60000 && a->u32 == 4000000000u && a->u64 == 1ULL << 63 &&
           a->f == 1.5f && a->d == -2.25 && a->c == 'x' && a->b && a->e == BLUE && a->l == -7 &&
           a->in.a == -3 && a->in.b == 3.5 && a->fix[2] == 3 && !strcmp(a->name, "abc") &&
           a->in2[1].a == 11 && a->in2[1].b == 11.5 && a->n == 5 && a->vals[4] == 5.0 &&
           !strcmp(a->label, "hello, world") && a->m == 2 && a->parts[1].a == 101 &&
           a->parts[1].b == 1.5 && a->empty == NULL;
}

CX_TEST(homogeneous_every_type_in_place)
{
    struct cx_format *f;
    CX_CHECK_EQ_INT(cx_format_create(all_d, NULL, &f), 0);
    const struct cx_format *rf;
    CX_CHECK_EQ_INT(cx_format_registry_insert(f, &rf), 0);
    struct all a;
    double vals[5];
    struct inner parts[2];
    fill(&a, vals, parts);
    struct cx_enc e;
    CX_CHECK_EQ_INT(cx_encode(rf, &a, &e), 0);
    CX_CHECK(e.token == cx_format_token(rf));
    /* zero copy: the fixed part and the arrays are referenced, not copied */
    CX_CHECK(e.iov[1].iov_base == (void *)&a);
    int found_vals = 0;
    for (int i = 0; i < e.iovcnt; i++)
        found_vals |= e.iov[i].iov_base == (void *)vals;
    CX_CHECK(found_vals);
    long n = cx_enc_gather(&e, wire, sizeof wire);
    CX_CHECK(n > (long)sizeof a);
    size_t need = 99;
    CX_CHECK_EQ_INT(cx_decode_need(rf, e.token, wire, (size_t)n, &need), 0);
    CX_CHECK_EQ_INT(need, 0);
    void *ev = NULL;
    CX_CHECK_EQ_INT(cx_decode(rf, e.token, wire, (size_t)n, NULL, 0, &ev), 0);
    const struct all *b = ev;
    CX_CHECK((uint8_t *)ev > wire && (uint8_t *)ev < wire + n); /* delivered in place */
    CX_CHECK((uint8_t *)b->vals > wire && (uint8_t *)b->vals < wire + n);
    CX_CHECK(check_all(b));
    /* with room in out for the fixed part: that part goes there, the arrays stay in the
     * buffer, and the buffer is only read (a shared-memory ring stays the sender's) */
    n = cx_enc_gather(&e, wire, sizeof wire);
    static _Alignas(8) uint8_t before[sizeof wire];
    memcpy(before, wire, (size_t)n);
    _Alignas(8) uint8_t out[sizeof(struct all)];
    CX_CHECK(sizeof(struct all) <= 256);
    CX_CHECK_EQ_INT(cx_decode(rf, e.token, wire, (size_t)n, out, sizeof out, &ev), 0);
    b = ev;
    CX_CHECK(ev == (void *)out);
    CX_CHECK((uint8_t *)b->vals > wire && (uint8_t *)b->vals < wire + n);
    CX_CHECK((uint8_t *)b->label > wire && (uint8_t *)b->label < wire + n);
    CX_CHECK(check_all(b));
    CX_CHECK(memcmp(before, wire, (size_t)n) == 0);
    /* too small an out: in place, as without one */
    CX_CHECK_EQ_INT(cx_decode(rf, e.token, wire, (size_t)n, out, sizeof out - 8, &ev), 0);
    CX_CHECK((uint8_t *)ev > wire && (uint8_t *)ev < wire + n && check_all(ev));
}

CX_TEST(homogeneous_unaligned_buffer_copies)
{
    struct cx_format *f;
    const struct cx_format *rf;
    CX_CHECK_EQ_INT(cx_format_create(all_d, NULL, &f), 0);
    CX_CHECK_EQ_INT(cx_format_registry_insert(f, &rf), 0);
    struct all a;
    double vals[5];
    struct inner parts[2];
    fill(&a, vals, parts);
    struct cx_enc e;
    CX_CHECK_EQ_INT(cx_encode(rf, &a, &e), 0);
    long n = cx_enc_gather(&e, wire + 1, sizeof wire - 1);
    CX_CHECK(n > 0);
    size_t need = 0;
    CX_CHECK_EQ_INT(cx_decode_need(rf, e.token, wire + 1, (size_t)n, &need), 0);
    CX_CHECK(need >= sizeof(struct all));
    _Alignas(8) static uint8_t out[4096];
    void *ev;
    CX_CHECK_EQ_INT(cx_decode(rf, e.token, wire + 1, (size_t)n, out, need - 1, &ev), -ENOBUFS);
    CX_CHECK_EQ_INT(cx_decode(rf, e.token, wire + 1, (size_t)n, out, sizeof out, &ev), 0);
    CX_CHECK(ev == (void *)out);
    CX_CHECK(check_all(ev));
}

CX_TEST(description_round_trip_same_token)
{
    struct cx_format *f, *g;
    CX_CHECK_EQ_INT(cx_format_create(all_d, NULL, &f), 0);
    size_t len;
    const uint8_t *d = cx_format_describe(f, &len);
    CX_CHECK(len > 100);
    CX_CHECK_EQ_INT(cx_format_from_description(d, len, &g), 0);
    CX_CHECK(cx_format_token(g) == cx_format_token(f));
    CX_CHECK_EQ_INT(cx_format_size(g), sizeof(struct all));
    CX_CHECK_STR(cx_format_name(g), "all");
    cx_format_free(g);
    cx_format_free(f);
}

CX_TEST(json_schema_layout_matches_c)
{
    struct particle { int64_t id; double pos[3]; uint32_t n; float *vals; char *label; };
    const char *js = "{\"name\":\"particle\",\"fields\":[{\"name\":\"id\",\"type\":\"int64\"},"
                     "{\"name\":\"pos\",\"type\":\"double[3]\"},{\"name\":\"n\",\"type\":\"uint32\"},"
                     "{\"name\":\"vals\",\"type\":\"float[n]\"},{\"name\":\"label\",\"type\":\"string\"}]}";
    static const struct cx_field pf[] = {
        {"id", "int64", 8, offsetof(struct particle, id)},
        {"pos", "double[3]", 8, offsetof(struct particle, pos)},
        {"n", "uint32", 4, offsetof(struct particle, n)},
        {"vals", "float[n]", 4, offsetof(struct particle, vals)},
        {"label", "string", sizeof(char *), offsetof(struct particle, label)}, {NULL}};
    static const struct cx_struct_decl pd[] = {{"particle", pf, sizeof(struct particle)}, {NULL}};
    struct cx_format *a, *b;
    CX_CHECK_EQ_INT(cx_format_from_json(js, strlen(js), NULL, &a), 0);
    CX_CHECK_EQ_INT(cx_format_create(pd, NULL, &b), 0);
    CX_CHECK_EQ_INT(cx_format_size(a), sizeof(struct particle));
    CX_CHECK(cx_format_token(a) == cx_format_token(b)); /* same layout, same token */
    cx_format_free(a);
    cx_format_free(b);
}

CX_TEST(json_schema_i386_layout)
{
    /* int32 then double: 4-byte alignment on i386 gives a 12-byte struct, 16 on x86_64 */
    const char *js = "{\"name\":\"s\",\"fields\":[{\"name\":\"a\",\"type\":\"int32\"},"
                     "{\"name\":\"b\",\"type\":\"double\"},{\"name\":\"p\",\"type\":\"string\"}]}";
    struct cx_arch i386 = {0, 4, 4, 4}, x64 = {0, 8, 8, 8};
    struct cx_format *a, *b;
    CX_CHECK_EQ_INT(cx_format_from_json(js, strlen(js), &i386, &a), 0);
    CX_CHECK_EQ_INT(cx_format_from_json(js, strlen(js), &x64, &b), 0);
    CX_CHECK_EQ_INT(cx_format_size(a), 16);
    CX_CHECK_EQ_INT(cx_format_size(b), 24);
    CX_CHECK(cx_format_token(a) != cx_format_token(b));
    cx_format_free(a);
    cx_format_free(b);
}

static uint8_t *served;
static size_t served_len;
static int fetches;
static int fake_service(void *arg, uint64_t token, uint8_t **desc, size_t *len)
{
    (void)arg;
    fetches++;
    if (!served || token == 12345)
        return cx_err_set(ENOENT, "format service does not know it");
    *desc = malloc(served_len);
    memcpy(*desc, served, served_len);
    *len = served_len;
    return 0;
}

CX_TEST(registry_fetches_unknown_tokens_once)
{
    const char *js = "{\"name\":\"fetched\",\"fields\":[{\"name\":\"a\",\"type\":\"int32\"}]}";
    struct cx_format *f;
    CX_CHECK_EQ_INT(cx_format_from_json(js, strlen(js), NULL, &f), 0);
    uint64_t tok = cx_format_token(f);
    CX_CHECK(cx_format_registry_lookup(tok) == NULL);
    CX_CHECK_EQ_INT(cx_errcode(), ENOENT);
    const uint8_t *d = cx_format_describe(f, &served_len);
    served = malloc(served_len);
    memcpy(served, d, served_len);
    cx_format_free(f);
    cx_format_registry_set_fetch(fake_service, NULL);
    fetches = 0;
    const struct cx_format *g = cx_format_registry_lookup(tok);
    CX_CHECK(g != NULL);
    CX_CHECK_STR(cx_format_name(g), "fetched");
    CX_CHECK(cx_format_registry_lookup(tok) == g);
    CX_CHECK_EQ_INT(fetches, 1);
    /* a service answering with another format's description is refused */
    CX_CHECK(cx_format_registry_lookup(777) == NULL);
    CX_CHECK_EQ_INT(cx_errcode(), EPROTO);
    CX_CHECK(cx_format_registry_lookup(12345) == NULL);
    CX_CHECK_EQ_INT(cx_errcode(), ENOENT);
    cx_format_registry_set_fetch(NULL, NULL);
    free(served);
    served = NULL;
}

CX_TEST_MAIN()
