/* libFuzzer target: random filter expressions and transform programs compiled against fixed
 * formats and evaluated on random events. Input: one mode byte, the expression up to the
 * first NUL, then event bytes. Mode bit 0 picks the format (native, or the same schema for
 * a big-endian sender); bit 1 compiles a program with an output format and runs it with
 * state (twice, so stateful calls see a second event), storing its computed fields.
 * Invariants checked (abort on violation):
 *   - compile returns 0 or -EINVAL / -E2BIG with a "col N: " message; never crashes;
 *   - eval returns 1, 0 or -EBADMSG on any bytes (an exact-size heap copy, so ASan sees any
 *     read past the event), and 1 or 0 on a valid event whose fixed part is random.
 */
#include "common/cx_error.h"
#include "filter/cx_filter.h"
#include "format/cx_codec.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *schema =
    "{\"name\":\"ev\",\"fields\":[{\"name\":\"id\",\"type\":\"int32\"},"
    "{\"name\":\"pos\",\"type\":\"vec\"},{\"name\":\"n\",\"type\":\"uint16\"},"
    "{\"name\":\"vals\",\"type\":\"double[n]\"},{\"name\":\"m\",\"type\":\"int8\"},"
    "{\"name\":\"pts\",\"type\":\"vec[m]\"},{\"name\":\"label\",\"type\":\"string\"},"
    "{\"name\":\"tag\",\"type\":\"char[5]\"},{\"name\":\"big\",\"type\":\"uint64\"},"
    "{\"name\":\"ok\",\"type\":\"bool\"},{\"name\":\"c\",\"type\":\"char\"},"
    "{\"name\":\"e\",\"type\":\"enum\"},{\"name\":\"grid\",\"type\":\"int16[2][3]\"},"
    "{\"name\":\"arr\",\"type\":\"vec[3]\"}],"
    "\"structs\":[{\"name\":\"vec\",\"fields\":[{\"name\":\"x\",\"type\":\"float\"},"
    "{\"name\":\"y\",\"type\":\"int64\"},{\"name\":\"t\",\"type\":\"char[3]\"}]}]}";

static const char *out_schema =
    "{\"name\":\"out\",\"fields\":[{\"name\":\"a\",\"type\":\"double\"},"
    "{\"name\":\"k\",\"type\":\"int32\"},{\"name\":\"b\",\"type\":\"bool\"},"
    "{\"name\":\"u\",\"type\":\"uint64\"},{\"name\":\"f\",\"type\":\"float\"},"
    "{\"name\":\"s\",\"type\":\"string\"}]}";

static struct cx_format *native, *bigend, *outf;
static bool program;
static uint8_t ref[1024] __attribute__((aligned(8)));
static size_t ref_len, ref_fixed_off, ref_fixed_len;

/* A valid native event to mutate: its fixed part is replaced by fuzz bytes. */
static void make_ref(void)
{
    static double vals[3] = {0.5, -1, 1e300};
    struct vec { float x; int64_t y; char t[3]; };
    static struct vec pts[2] = {{1, 2, "ab"}, {-3, 4, "c"}};
    struct ev {
        int32_t id; struct vec pos; uint16_t n; double *vals; int8_t m; struct vec *pts;
        char *label; char tag[5]; uint64_t big; _Bool ok; char c; int32_t e; int16_t grid[2][3];
        struct vec arr[3];
    } e = {.id = 7, .n = 3, .vals = vals, .m = 2, .pts = pts, .label = "hi", .tag = "tag"};
    if (cx_format_size(native) != sizeof e)
        abort();
    struct cx_enc enc;
    if (cx_encode(native, &e, &enc) < 0)
        abort();
    long n = cx_enc_gather(&enc, ref, sizeof ref);
    if (n < 0)
        abort();
    ref_len = (size_t)n;
    ref_fixed_off = 8 + 16 * 3;
    ref_fixed_len = sizeof e;
}

static void check_eval(const struct cx_filter *f, const uint8_t *b, size_t n, bool valid)
{
    if (!program) {
        int rc = cx_filter_eval(f, b, n);
        if (rc != 0 && rc != 1 && (valid || rc != -EBADMSG))
            abort();
        return;
    }
    static uint64_t state[CX_FILTER_MAX_STATE * 2], out[64];
    static union cx_filter_value res[CX_FILTER_MAX_OUT];
    if (cx_filter_state_size(f) > sizeof state || cx_filter_outputs(f) > CX_FILTER_MAX_OUT)
        abort();
    cx_filter_state_init(f, state);
    for (int i = 0; i < 2; i++) {
        int rc = cx_filter_run(f, state, b, n, (uint64_t)i + 1, res);
        if (rc != 0 && rc != 1 && (valid || rc != -EBADMSG))
            abort();
        if (rc == 1)
            cx_filter_store(f, res, out);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!native) {
        struct cx_arch be = {1, 8, 8, 8};
        if (cx_format_from_json(schema, strlen(schema), NULL, &native) < 0 ||
            cx_format_from_json(schema, strlen(schema), &be, &bigend) < 0 ||
            cx_format_from_json(out_schema, strlen(out_schema), NULL, &outf) < 0 ||
            cx_format_size(outf) > 64 * 8)
            abort();
        make_ref();
    }
    if (size < 1)
        return 0;
    const struct cx_format *fmt = data[0] & 1 ? bigend : native;
    const uint8_t *p = data + 1, *end = data + size;
    const uint8_t *nul = memchr(p, 0, (size_t)(end - p));
    size_t elen = nul ? (size_t)(nul - p) : (size_t)(end - p);
    char *expr = malloc(elen + 1);
    memcpy(expr, p, elen);
    expr[elen] = '\0';
    const uint8_t *ev = nul ? nul + 1 : end;
    size_t evlen = (size_t)(end - ev);

    struct cx_filter *f = NULL;
    program = data[0] & 2;
    int rc = program ? cx_filter_compile_xform(expr, fmt, outf, &f)
                     : cx_filter_compile(expr, fmt, &f);
    free(expr);
    if (rc < 0) {
        if ((rc != -EINVAL && rc != -E2BIG) || strncmp(cx_errmsg(), "col ", 4) != 0 || f)
            abort();
        return 0;
    }
    char text[256];
    cx_filter_describe(f, text, sizeof text);
    if (cx_filter_state_size(f))
        program = true; /* a plain filter may keep state too: it runs with cx_filter_run */

    uint8_t *copy = malloc(evlen ? evlen : 1); /* exact size: ASan sees any overread */
    memcpy(copy, ev, evlen);
    check_eval(f, copy, evlen, false);
    free(copy);

    if (fmt == native) {
        static uint8_t mut[1024] __attribute__((aligned(8)));
        memcpy(mut, ref, ref_len);
        check_eval(f, mut, ref_len, true);
        size_t k = evlen < ref_fixed_len ? evlen : ref_fixed_len;
        memcpy(mut + ref_fixed_off, ev, k);
        check_eval(f, mut, ref_len, false); /* counts may now lie: -EBADMSG allowed */
    }
    cx_filter_free(f);
    return 0;
}
