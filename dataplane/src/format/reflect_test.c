/* Reflection of an event whose format this program only learns from a format service. */
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "format/cx_codec.h"
#include "format/cx_format_registry.h"
#include "format/cx_reflect.h"

static uint8_t *desc_copy;
static size_t desc_len;
static int service(void *arg, uint64_t token, uint8_t **d, size_t *len)
{
    (void)arg; (void)token;
    *d = malloc(desc_len);
    memcpy(*d, desc_copy, desc_len);
    *len = desc_len;
    return 0;
}

CX_TEST(reflect_unknown_event_as_json)
{
    const char *js = "{\"name\":\"particle\",\"fields\":[{\"name\":\"id\",\"type\":\"int64\"},"
                     "{\"name\":\"pos\",\"type\":\"vec\"},{\"name\":\"n\",\"type\":\"uint32\"},"
                     "{\"name\":\"vals\",\"type\":\"float[n]\"},{\"name\":\"label\",\"type\":\"string\"},"
                     "{\"name\":\"ok\",\"type\":\"bool\"},{\"name\":\"tag\",\"type\":\"char[4]\"}],"
                     "\"structs\":[{\"name\":\"vec\",\"fields\":[{\"name\":\"x\",\"type\":\"double\"},"
                     "{\"name\":\"y\",\"type\":\"double\"}]}]}";
    struct vec { double x, y; };
    struct particle { int64_t id; struct vec pos; uint32_t n; float *vals; char *label; _Bool ok; char tag[4]; };
    struct cx_format *f;
    CX_CHECK_EQ_INT(cx_format_from_json(js, strlen(js), NULL, &f), 0);
    CX_CHECK_EQ_INT(cx_format_size(f), sizeof(struct particle));
    float vals[2] = {0.5f, -1.5f};
    struct particle p = {7, {1.25, -2}, 2, vals, "a \"q\"", 1, "xy"};
    struct cx_enc enc;
    CX_CHECK_EQ_INT(cx_encode(f, &p, &enc), 0);
    static _Alignas(8) uint8_t buf[512];
    long n = cx_enc_gather(&enc, buf, sizeof buf);
    CX_CHECK(n > 0);
    /* This process "forgets" the format: only the service knows it. */
    const uint8_t *d = cx_format_describe(f, &desc_len);
    desc_copy = malloc(desc_len);
    memcpy(desc_copy, d, desc_len);
    uint64_t tok = enc.token;
    cx_format_free(f);
    struct cx_view v;
    CX_CHECK_EQ_INT(cx_reflect_open(tok, buf, (size_t)n, &v), -ENOENT);
    cx_format_registry_set_fetch(service, NULL);
    CX_CHECK_EQ_INT(cx_reflect_open(tok, buf, (size_t)n, &v), 0);
    CX_CHECK_EQ_INT(cx_reflect_count(&v), 7);
    struct cx_field_info fi;
    CX_CHECK_EQ_INT(cx_reflect_field(&v, 3, &fi), 0);
    CX_CHECK_STR(fi.name, "vals");
    CX_CHECK_EQ_INT(fi.shape, CX_SHAPE_VAR);
    CX_CHECK_EQ_INT(fi.count, 2);
    CX_CHECK_EQ_INT(cx_reflect_field(&v, 1, &fi), 0);
    CX_CHECK_STR(fi.type_name, "vec");
    CX_CHECK_EQ_INT(cx_reflect_field(&v, 7, &fi), -ERANGE);
    struct cx_value val;
    CX_CHECK_EQ_INT(cx_reflect_get(&v, "pos.x", 0, &val), 0);
    CX_CHECK(val.kind == CX_K_FLOAT && val.d == 1.25);
    CX_CHECK_EQ_INT(cx_reflect_get(&v, "vals", 1, &val), 0);
    CX_CHECK(val.d == -1.5);
    CX_CHECK_EQ_INT(cx_reflect_get(&v, "vals", 2, &val), -ERANGE);
    CX_CHECK_EQ_INT(cx_reflect_get(&v, "label", 0, &val), 0);
    CX_CHECK_STR(val.s, "a \"q\"");
    CX_CHECK_EQ_INT(cx_reflect_get(&v, "pos.z", 0, &val), -ENOENT);
    CX_CHECK_EQ_INT(cx_reflect_get(&v, "pos", 0, &val), -EINVAL);
    char js_out[512];
    long jl = cx_reflect_json(&v, js_out, sizeof js_out);
    CX_CHECK_STR(js_out, "{\"id\":7,\"pos\":{\"x\":1.25,\"y\":-2},\"n\":2,\"vals\":[0.5,-1.5],"
                         "\"label\":\"a \\\"q\\\"\",\"ok\":true,\"tag\":\"xy\"}");
    CX_CHECK_EQ_INT(jl, strlen(js_out));
    char small[8];
    CX_CHECK_EQ_INT(cx_reflect_json(&v, small, sizeof small), jl); /* snprintf-like */
    CX_CHECK_EQ_INT(strlen(small), 7);
    cx_format_registry_set_fetch(NULL, NULL);
    free(desc_copy);
}

CX_TEST_MAIN()
