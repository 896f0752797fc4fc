/* libFuzzer target: format descriptions, JSON schemas and events from the wire must be
 * rejected cleanly or accepted and handled without reading out of bounds.
 * The first byte picks the mode:
 *   0  a format description (cx_format_from_description), then its token must round-trip
 *   1  a JSON schema (cx_format_from_json)
 *   2  an event of a known native format: decoded in place, through a relocating plan, and
 *      printed by reflection
 *   3  u16 description length, a description, then an event of that format: reflected,
 *      and decoded when the description is native
 */
#include "common/cx_error.h"
#include "format/cx_codec.h"
#include "format/cx_format_registry.h"
#include "format/cx_reflect.h"

#include <stdlib.h>
#include <string.h>

static const char *schema_v1 =
    "{\"name\":\"ev\",\"fields\":[{\"name\":\"id\",\"type\":\"int32\"},"
    "{\"name\":\"pos\",\"type\":\"vec\"},{\"name\":\"n\",\"type\":\"uint16\"},"
    "{\"name\":\"vals\",\"type\":\"double[n]\"},{\"name\":\"m\",\"type\":\"int8\"},"
    "{\"name\":\"pts\",\"type\":\"vec[m]\"},{\"name\":\"label\",\"type\":\"string\"},"
    "{\"name\":\"tag\",\"type\":\"char[5]\"}],"
    "\"structs\":[{\"name\":\"vec\",\"fields\":[{\"name\":\"x\",\"type\":\"float\"},"
    "{\"name\":\"y\",\"type\":\"int64\"}]}]}";
static const char *schema_v0 =
    "{\"name\":\"ev\",\"fields\":[{\"name\":\"label\",\"type\":\"string\"},"
    "{\"name\":\"n\",\"type\":\"uint64\"},{\"name\":\"vals\",\"type\":\"float[n]\"},"
    "{\"name\":\"pos\",\"type\":\"vec\"},{\"name\":\"m\",\"type\":\"int32\"},"
    "{\"name\":\"pts\",\"type\":\"vec[m]\"},{\"name\":\"id\",\"type\":\"double\",\"default\":3}],"
    "\"structs\":[{\"name\":\"vec\",\"fields\":[{\"name\":\"y\",\"type\":\"int16\"},"
    "{\"name\":\"x\",\"type\":\"double\"}]}]}";

static const struct cx_format *v1, *v0;
static uint8_t outbuf[1 << 20] __attribute__((aligned(8)));

static const struct cx_format *reg(const char *js)
{
    struct cx_format *f;
    const struct cx_format *r = NULL;
    if (cx_format_from_json(js, strlen(js), NULL, &f) < 0 || cx_format_registry_insert(f, &r) < 0)
        abort();
    return r;
}

static void reflect(const struct cx_format *f, const uint8_t *b, size_t n)
{
    struct cx_view v;
    char js[4096];
    if (cx_reflect_open_format(f, b, n, &v) == 0) {
        struct cx_value val;
        cx_reflect_json(&v, js, sizeof js);
        cx_reflect_get(&v, "vals", 1, &val);
        cx_reflect_get(&v, "pos.x", 0, &val);
        cx_reflect_get(&v, "label", 0, &val);
    }
}

static void decode(const struct cx_format *wire, const struct cx_format *local, const uint8_t *d,
                   size_t n)
{
    uint8_t *b = malloc(n ? n : 1); /* exact size: ASan sees any overread */
    void *ev;
    size_t need;
    memcpy(b, d, n);
    if (cx_decode_need(local, cx_format_token(wire), b, n, &need) == 0 && need <= sizeof outbuf) {
        if (cx_decode(local, cx_format_token(wire), b, n, outbuf, sizeof outbuf, &ev) != 0)
            abort(); /* need said yes */
    }
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!v1) {
        v1 = reg(schema_v1);
        v0 = reg(schema_v0);
    }
    if (size < 1)
        return 0;
    uint8_t mode = data[0] % 4;
    data++;
    size--;
    struct cx_format *f = NULL;
    switch (mode) {
    case 0:
        if (cx_format_from_description(data, size, &f) == 0) {
            size_t dl;
            const uint8_t *d = cx_format_describe(f, &dl);
            struct cx_format *g = NULL;
            if (cx_format_from_description(d, dl, &g) != 0 ||
                cx_format_token(g) != cx_format_token(f))
                abort();
            cx_format_free(g);
        }
        break;
    case 1:
        cx_format_from_json((const char *)data, size, NULL, &f);
        break;
    case 2:
        decode(v1, v1, data, size);
        decode(v1, v0, data, size);
        reflect(v1, data, size);
        break;
    case 3: {
        if (size < 2)
            break;
        size_t dl = data[0] | (size_t)data[1] << 8;
        if (dl > size - 2)
            break;
        if (cx_format_from_description(data + 2, dl, &f) != 0)
            break;
        const uint8_t *ev = data + 2 + dl;
        size_t evn = size - 2 - dl;
        uint8_t *copy = malloc(evn ? evn : 1);
        memcpy(copy, ev, evn);
        reflect(f, copy, evn);
        struct cx_arch nat;
        cx_arch_native(&nat);
        if (!memcmp(cx_format_arch(f), &nat, sizeof nat))
            decode(f, f, copy, evn);
        free(copy);
        break;
    }
    }
    cx_format_free(f);
    return 0;
}
