/* Malformed input never crashes and always says why. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "format/cx_codec.h"
#include "format/cx_format_registry.h"

#include <stddef.h>

struct ev { uint8_t n; int32_t *v; char *s; };
static const struct cx_field ev_f[] = {
    {"n", "uint8", 1, offsetof(struct ev, n)}, {"v", "int32[n]", 4, offsetof(struct ev, v)},
    {"s", "string", sizeof(char *), offsetof(struct ev, s)}, {NULL}};
static const struct cx_struct_decl ev_d[] = {{"ev", ev_f, sizeof(struct ev)}, {NULL}};
static _Alignas(8) uint8_t buf[512], out[512];
static long len;
static const struct cx_format *F;

static int setup(void)
{
    struct cx_format *f;
    if (cx_format_create(ev_d, NULL, &f) < 0 || cx_format_registry_insert(f, &F) < 0)
        return -1;
    int32_t v[3] = {1, 2, 3};
    struct ev e = {3, v, "str"};
    struct cx_enc enc;
    if (cx_encode(F, &e, &enc) < 0)
        return -1;
    len = cx_enc_gather(&enc, buf, sizeof buf);
    return len > 0 ? 0 : -1;
}

static int dec(uint8_t *b, size_t n)
{
    void *e;
    return cx_decode(F, cx_format_token(F), b, n, out, sizeof out, &e);
}

CX_TEST(every_truncation_rejected)
{
    CX_CHECK_EQ_INT(setup(), 0);
    static _Alignas(8) uint8_t copy[512];
    uint64_t off, sl;
    memcpy(&off, buf + 24, 8); /* the string, the last part; only padding follows it */
    memcpy(&sl, buf + 32, 8);
    CX_CHECK((long)(off + sl) <= len && len - (long)(off + sl) < 8);
    for (long n = 0; n < (long)(off + sl); n++) {
        memcpy(copy, buf, (size_t)len);
        int rc = dec(copy, (size_t)n);
        CX_CHECK_EQ_INT(rc, -EPROTO);
        CX_CHECK(cx_errmsg()[0] != '\0');
    }
    memcpy(copy, buf, (size_t)len);
    CX_CHECK_EQ_INT(dec(copy, (size_t)len), 0);
}

CX_TEST(lying_count_rejected)
{
    CX_CHECK_EQ_INT(setup(), 0);
    buf[40 + offsetof(struct ev, n)] = 200; /* count says 200, the part holds 3 */
    CX_CHECK_EQ_INT(dec(buf, (size_t)len), -EPROTO);
    CX_CHECK(strstr(cx_errmsg(), "length field says 200") != NULL);
}

CX_TEST(slot_past_end_rejected)
{
    CX_CHECK_EQ_INT(setup(), 0);
    buf[8 + 8] = 0xff; /* slot 0 length 255 */
    CX_CHECK_EQ_INT(dec(buf, (size_t)len), -EPROTO);
    CX_CHECK(setup() == 0);
    buf[8 + 6] = 0x10; /* slot 0 offset far away */
    CX_CHECK_EQ_INT(dec(buf, (size_t)len), -EPROTO);
    CX_CHECK(setup() == 0);
    buf[4] = 9; /* slot count */
    CX_CHECK_EQ_INT(dec(buf, (size_t)len), -EPROTO);
}

CX_TEST(string_without_nul_rejected)
{
    CX_CHECK_EQ_INT(setup(), 0);
    uint64_t off, n;
    memcpy(&off, buf + 24, 8);
    memcpy(&n, buf + 32, 8);
    buf[off + n - 1] = 'x';
    CX_CHECK_EQ_INT(dec(buf, (size_t)len), -EPROTO);
    CX_CHECK(strstr(cx_errmsg(), "without its NUL") != NULL);
}

CX_TEST(unknown_token_rejected)
{
    CX_CHECK_EQ_INT(setup(), 0);
    void *e;
    CX_CHECK_EQ_INT(cx_decode(F, 0x1234, buf, (size_t)len, out, sizeof out, &e), -ENOENT);
    CX_CHECK(strstr(cx_errmsg(), "unknown format token") != NULL);
}

CX_TEST(count_too_big_for_receiver)
{
    const char *w = "{\"name\":\"c\",\"fields\":[{\"name\":\"n\",\"type\":\"uint32\"},"
                    "{\"name\":\"v\",\"type\":\"uint8[n]\"}]}";
    const char *l = "{\"name\":\"c\",\"fields\":[{\"name\":\"n\",\"type\":\"uint8\"},"
                    "{\"name\":\"v\",\"type\":\"uint8[n]\"}]}";
    struct cx_format *fw, *fl;
    CX_CHECK_EQ_INT(cx_format_from_json(w, strlen(w), NULL, &fw), 0);
    CX_CHECK_EQ_INT(cx_format_from_json(l, strlen(l), NULL, &fl), 0);
    const struct cx_format *rw, *rl;
    cx_format_registry_insert(fw, &rw);
    cx_format_registry_insert(fl, &rl);
    static uint8_t data[300];
    struct { uint32_t n; uint8_t *v; } e = {300, data};
    struct cx_enc enc;
    CX_CHECK_EQ_INT(cx_encode(rw, &e, &enc), 0);
    static _Alignas(8) uint8_t b[1024];
    long n = cx_enc_gather(&enc, b, sizeof b);
    void *ev;
    CX_CHECK_EQ_INT(cx_decode(rl, enc.token, b, (size_t)n, out, sizeof out, &ev), -EPROTO);
    CX_CHECK(strstr(cx_errmsg(), "do not fit") != NULL);
}

CX_TEST(bad_descriptions_rejected)
{
    CX_CHECK_EQ_INT(setup(), 0);
    size_t dl;
    const uint8_t *d = cx_format_describe(F, &dl);
    struct cx_format *g;
    for (size_t n = 0; n < dl; n++)
        CX_CHECK_EQ_INT(cx_format_from_description(d, n, &g), -EPROTO);
    uint8_t copy[512];
    memcpy(copy, d, dl);
    copy[dl - 30] ^= 0x40; /* corrupt a field's offset/size area */
    int rc = cx_format_from_description(copy, dl, &g);
    if (rc == 0) {
        CX_CHECK(cx_format_token(g) != cx_format_token(F));
        cx_format_free(g);
    } else {
        CX_CHECK_EQ_INT(rc, -EPROTO);
    }
}

CX_TEST(bad_schemas_rejected)
{
    static const char *bad[] = {
        "", "{", "[]", "{\"name\":\"x\"}", "{\"name\":\"x\",\"fields\":[]}",
        "{\"name\":\"x\",\"fields\":[{\"name\":\"a\",\"type\":\"int33\"}]}",
        "{\"name\":\"x\",\"fields\":[{\"name\":\"a\",\"type\":\"int32[m]\"}]}",
        "{\"name\":\"x\",\"fields\":[{\"name\":\"a\",\"type\":\"int32\"},{\"name\":\"a\",\"type\":\"int8\"}]}",
        "{\"name\":\"x\",\"fields\":[{\"name\":\"a\",\"type\":\"int32\"}],\"bogus\":1}",
        "{\"name\":\"x\",\"name\":\"y\",\"fields\":[{\"name\":\"a\",\"type\":\"int32\"}]}",
        "{\"name\":\"x\",\"fields\":[{\"name\":\"a\",\"type\":\"int32\"}]} x",
        "{\"name\":\"x\",\"fields\":[{\"name\":\"a\",\"type\":\"int32\",\"default\":01}]}",
        "{\"name\":\"x\\ud800\",\"fields\":[{\"name\":\"a\",\"type\":\"int32\"}]}",
        "{\"name\":\"x\",\"fields\":[{\"name\":\"a\",\"type\":\"string[3]\"}]}",
        "{\"name\":\"x\",\"fields\":[{\"name\":\"a\",\"type\":\"y\"}],\"structs\":[{\"name\":\"y\",\"fields\":[{\"name\":\"a\",\"type\":\"x\"}]}]}",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct cx_format *f = NULL;
        int rc = cx_format_from_json(bad[i], strlen(bad[i]), NULL, &f);
        if (rc != -EINVAL)
            fprintf(stderr, "  schema %zu accepted or wrong error (%d): %s\n", i, rc, bad[i]);
        CX_CHECK_EQ_INT(rc, -EINVAL);
        CX_CHECK(f == NULL);
        CX_CHECK(cx_errmsg()[0] != '\0');
    }
}

CX_TEST_MAIN()
