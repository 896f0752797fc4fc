/* Transform programs (cx_filter_compile_xform): computed output fields, math, conversions,
 * reductions, state kept between events, seq() partitions, the per-event budget, and the
 * compile errors with their column. Real encoded events; the channel test runs them
 * between processes. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "filter/cx_filter.h"
#include "format/cx_codec.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

struct rd {
    int64_t step;
    float energy[16];
    uint32_t n;
    double *vals;
    char *label;
    double x;
    uint64_t big;
    int16_t grid[2][3];
};

struct out {
    int64_t step;
    double mean, peak;
    int32_t k;
    uint8_t flag;
    float f;
    uint64_t u;
    char *label;
};

static const struct cx_field rd_f[] = {
    {"step", "int64", 8, offsetof(struct rd, step)},
    {"energy", "float[16]", 4, offsetof(struct rd, energy)},
    {"n", "uint32", 4, offsetof(struct rd, n)},
    {"vals", "double[n]", 8, offsetof(struct rd, vals)},
    {"label", "string", sizeof(char *), offsetof(struct rd, label)},
    {"x", "double", 8, offsetof(struct rd, x)},
    {"big", "uint64", 8, offsetof(struct rd, big)},
    {"grid", "int16[2][3]", 2, offsetof(struct rd, grid)},
    {NULL}};
static const struct cx_field out_f[] = {
    {"step", "int64", 8, offsetof(struct out, step)},
    {"mean", "double", 8, offsetof(struct out, mean)},
    {"peak", "double", 8, offsetof(struct out, peak)},
    {"k", "int32", 4, offsetof(struct out, k)},
    {"flag", "bool", 1, offsetof(struct out, flag)},
    {"f", "float", 4, offsetof(struct out, f)},
    {"u", "uint64", 8, offsetof(struct out, u)},
    {"label", "string", sizeof(char *), offsetof(struct out, label)},
    {NULL}};

static struct cx_format *in_fmt, *out_fmt, *huge_fmt;
static _Alignas(8) uint8_t wire[4096];
static size_t wire_len;

static void setup(void)
{
    if (in_fmt)
        return;
    const struct cx_struct_decl in_d[] = {{"reading", rd_f, sizeof(struct rd)}, {NULL}};
    const struct cx_struct_decl out_d[] = {{"summary", out_f, sizeof(struct out)}, {NULL}};
    const struct cx_field huge_f[] = {{"big", "float[40000]", 4, 0}, {NULL}};
    const struct cx_struct_decl huge_d[] = {{"huge", huge_f, 160000}, {NULL}};
    if (cx_format_create(in_d, NULL, &in_fmt) < 0 || cx_format_create(out_d, NULL, &out_fmt) < 0 ||
        cx_format_create(huge_d, NULL, &huge_fmt) < 0) {
        fprintf(stderr, "format: %s\n", cx_errmsg());
        abort();
    }
}

static int encode(const struct rd *r)
{
    struct cx_enc enc;
    int rc = cx_encode(in_fmt, r, &enc);
    long n = rc < 0 ? rc : cx_enc_gather(&enc, wire, sizeof wire);
    if (n < 0)
        return (int)n;
    wire_len = (size_t)n;
    return 0;
}

static struct rd sample(int64_t step, double x)
{
    static double vals[3] = {1.5, -2.0, 4.5};
    struct rd r = {.step = step, .n = 3, .vals = vals, .label = "hot", .x = x, .big = 7};
    for (int i = 0; i < 16; i++)
        r.energy[i] = (float)(i + 1); /* 1..16: mean 8.5, max 16, min 1, sum 136 */
    for (int i = 0; i < 6; i++)
        r.grid[i / 3][i % 3] = (int16_t)(i - 2);
    return r;
}

static struct cx_filter *xf(const char *prog)
{
    setup();
    struct cx_filter *f = NULL;
    int rc = cx_filter_compile_xform(prog, in_fmt, out_fmt, &f);
    if (rc < 0)
        fprintf(stderr, "  compile \"%s\": %s\n", prog, cx_errmsg());
    return f;
}

CX_TEST(mean_and_peak_of_an_array_into_a_new_format)
{
    struct cx_filter *f = xf("mean = mean(energy); peak = max(energy)");
    CX_CHECK(f != NULL);
    CX_CHECK_EQ_INT(cx_filter_outputs(f), 2);
    CX_CHECK_EQ_INT((int)cx_filter_state_size(f), 0);
    struct rd r = sample(42, 0);
    CX_CHECK_EQ_INT(encode(&r), 0);
    union cx_filter_value res[2];
    CX_CHECK_EQ_INT(cx_filter_run(f, NULL, wire, wire_len, 1, res), 1);
    CX_CHECK(res[0].d == 8.5 && res[1].d == 16.0);
    struct out o = {.step = 42, .k = 9};
    cx_filter_store(f, res, &o);
    CX_CHECK(o.mean == 8.5 && o.peak == 16.0 && o.step == 42 && o.k == 9);
    cx_filter_free(f);
}

CX_TEST(math_conversions_strings_indices_and_reductions)
{
    struct {
        const char *prog;
        int pass;
        double mean, peak;
        int32_t k;
        float fl;
        uint64_t u;
        uint8_t flag;
    } cases[] = {
        {"mean = sqrt(16) + abs(-2.5); k = abs(-7) + min(3, 9) * max(2, -1)", 1, 6.5, 0, 13},
        {"mean = min(energy); peak = sum(energy); k = int(mean(energy))", 1, 1, 136, 8},
        {"mean = sum(vals); peak = mean(vals); k = len(vals) + len(label)", 1, 4, 4.0 / 3, 6},
        {"k = sum(grid) + max(grid) * 10 + min(grid) * 100; u = big * 3", 1, 0, 0,
         3 + 30 - 200, 0, 21},
        {"k = int(-2.9); f = float(7) / 2; flag = label == \"hot\"", 1, 0, 0, -2, 3.5f, 0, 1},
        {"label == \"cold\"; k = 1", 0},
        {"k = int(x / 0.0)", 0},                    /* int() of an infinity drops */
        {"mean = energy[15] - energy[step - 40]; peak = vals[2]", 1, 13, 4.5},
        {"mean = energy[step]", 0},                 /* index 42 past the end: dropped */
        {"step > 40 && len(label) == 3; u = seq() * 2", 1, 0, 0, 0, 0, 10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct cx_filter *f = xf(cases[i].prog);
        CX_CHECK(f != NULL);
        struct rd r = sample(42, 1);
        CX_CHECK_EQ_INT(encode(&r), 0);
        union cx_filter_value res[CX_FILTER_MAX_OUT];
        int rc = cx_filter_run(f, NULL, wire, wire_len, 5, res);
        if (rc != cases[i].pass)
            fprintf(stderr, "  case %zu \"%s\": %d\n", i, cases[i].prog, rc);
        CX_CHECK_EQ_INT(rc, cases[i].pass);
        if (rc == 1) {
            struct out o = {0};
            cx_filter_store(f, res, &o);
            if (fabs(o.mean - cases[i].mean) > 1e-12 || fabs(o.peak - cases[i].peak) > 1e-12 ||
                o.k != cases[i].k || o.f != cases[i].fl || o.u != cases[i].u ||
                o.flag != cases[i].flag)
                fprintf(stderr, "  case %zu: mean %g peak %g k %d f %g u %llu flag %u\n", i,
                        o.mean, o.peak, o.k, o.f, (unsigned long long)o.u, o.flag);
            CX_CHECK(fabs(o.mean - cases[i].mean) < 1e-12 && fabs(o.peak - cases[i].peak) < 1e-12);
            CX_CHECK(o.k == cases[i].k && o.f == cases[i].fl && o.u == cases[i].u);
            CX_CHECK(o.flag == cases[i].flag);
        }
        cx_filter_free(f);
    }
}

CX_TEST(empty_variable_array_sum_is_zero_other_reductions_drop)
{
    struct rd r = sample(1, 0);
    r.n = 0;
    r.vals = NULL;
    setup();
    CX_CHECK_EQ_INT(encode(&r), 0);
    union cx_filter_value res[1];
    struct cx_filter *f = xf("mean = sum(vals)");
    CX_CHECK_EQ_INT(cx_filter_run(f, NULL, wire, wire_len, 1, res), 1);
    CX_CHECK(res[0].d == 0.0);
    cx_filter_free(f);
    const char *drop[] = {"mean = mean(vals)", "mean = max(vals)", "mean = min(vals)"};
    for (int i = 0; i < 3; i++) {
        CX_CHECK((f = xf(drop[i])) != NULL);
        CX_CHECK_EQ_INT(cx_filter_run(f, NULL, wire, wire_len, 1, res), 0);
        cx_filter_free(f);
    }
}

CX_TEST(nan_elements_never_win_max_or_min)
{
    struct rd r = sample(1, 0);
    r.energy[3] = NAN;
    setup();
    CX_CHECK_EQ_INT(encode(&r), 0);
    union cx_filter_value res[2];
    struct cx_filter *f = xf("mean = max(energy); peak = min(energy)");
    CX_CHECK_EQ_INT(cx_filter_run(f, NULL, wire, wire_len, 1, res), 1);
    CX_CHECK(res[0].d == 16.0 && res[1].d == 1.0);
    cx_filter_free(f);
    CX_CHECK((f = xf("mean = sum(energy)")) != NULL);
    CX_CHECK_EQ_INT(cx_filter_run(f, NULL, wire, wire_len, 1, res), 1);
    CX_CHECK(isnan(res[0].d));
    cx_filter_free(f);
}

/* Runs prog over events with x = xs[i] and step = i + 1; returns the passing steps as a
 * bit set, and the mean output of the last pass in *last. */
static uint64_t stream(const char *prog, const double *xs, int n, double *last)
{
    struct cx_filter *f = xf(prog);
    if (!f)
        return ~0ull;
    _Alignas(8) uint8_t state[CX_FILTER_MAX_STATE * 16];
    if (cx_filter_state_size(f) > sizeof state)
        abort();
    cx_filter_state_init(f, state);
    uint64_t bits = 0;
    for (int i = 0; i < n; i++) {
        struct rd r = sample(i + 1, xs[i]);
        union cx_filter_value res[CX_FILTER_MAX_OUT];
        if (encode(&r) < 0)
            abort();
        int rc = cx_filter_run(f, state, wire, wire_len, (uint64_t)i + 1, res);
        if (rc == 1) {
            bits |= 1ull << (i + 1);
            struct out o = {0};
            cx_filter_store(f, res, &o);
            if (last)
                *last = o.mean;
        } else if (rc != 0) {
            abort();
        }
    }
    cx_filter_free(f);
    return bits;
}

CX_TEST(state_every_changed_windows_and_running_values)
{
    double xs[12] = {0, 0.2, 0.9, 1.0, 1.0, 3.0, 2.9, 2.0, 0, 0, 0, 0};
    double last = 0;
    /* one event every 4: steps 4, 8, 12 */
    CX_CHECK_EQ_INT(stream("every(4)", xs, 12, NULL), (1 << 4) | (1 << 8) | (1 << 12));
    /* changed by more than 0.5 from the last event that passed: 0 (first), 0.9, 3.0, 2.0,
     * 0 (steps 1, 3, 6, 8, 9) */
    CX_CHECK_EQ_INT(stream("changed(x, 0.5)", xs, 12, NULL),
                    (1 << 1) | (1 << 3) | (1 << 6) | (1 << 8) | (1 << 9));
    /* the mean of each window of 4: windows {0,.2,.9,1}, {1,3,2.9,2}, {0,0,0,0} */
    CX_CHECK_EQ_INT(stream("every(4); mean = wmean(x, 4)", xs, 8, &last), (1 << 4) | (1 << 8));
    CX_CHECK(fabs(last - 2.225) < 1e-12);
    CX_CHECK_EQ_INT(stream("every(4); mean = wmax(x, 4) - wmin(x, 4)", xs, 8, &last),
                    (1 << 4) | (1 << 8));
    CX_CHECK(fabs(last - 2.0) < 1e-12);
    CX_CHECK_EQ_INT(stream("every(3); mean = wsum(x, 3)", xs, 6, &last), (1 << 3) | (1 << 6));
    CX_CHECK(fabs(last - 5.0) < 1e-12);
    /* running sum, count, last value */
    CX_CHECK_EQ_INT(stream("count() == 6; mean = total(x) + prev(x) * 100", xs, 12, &last),
                    1 << 6);
    CX_CHECK(fabs(last - (6.1 + 100.0)) < 1e-9);
    /* state is only touched by the calls that run: the second every() sees odd steps */
    CX_CHECK_EQ_INT(stream("step % 2 == 1 && every(2)", xs, 8, NULL), (1 << 3) | (1 << 7));
}

CX_TEST(seq_partitions_a_stream_among_members)
{
    double xs[30] = {0};
    uint64_t all = 0;
    char prog[64];
    for (int rank = 0; rank < 3; rank++) {
        snprintf(prog, sizeof prog, "seq() %% 3 == %d", rank);
        uint64_t got = stream(prog, xs, 30, NULL);
        CX_CHECK_EQ_INT(__builtin_popcountll(got), 10);
        CX_CHECK((got & all) == 0); /* each event to one member only */
        all |= got;
    }
    CX_CHECK(all == ((1ull << 31) - 2)); /* and every event to one */
}

CX_TEST(share_picks_one_member_per_key)
{
    struct cx_filter *f = xf("share(step - 50)"); /* negative keys too: residues 0..n-1 */
    CX_CHECK(f != NULL && cx_filter_shares(f));
    for (int64_t k = 1; k <= 30; k++) {
        struct rd r = sample(k, 0);
        CX_CHECK_EQ_INT(encode(&r), 0);
        int hits = 0, who = -1;
        for (uint64_t m = 0; m < 4; m++)
            if (cx_filter_run_member(f, NULL, wire, wire_len, 1, m, 4, NULL) == 1)
                hits++, who = (int)m;
        CX_CHECK(hits == 1 && who == (int)(((k - 50) % 4 + 4) % 4));
    }
    CX_CHECK_EQ_INT(cx_filter_run_member(f, NULL, wire, wire_len, 1, 4, 4, NULL), -EINVAL);
    CX_CHECK_EQ_INT(cx_filter_run(f, NULL, wire, wire_len, 1, NULL), 1); /* alone: all */
    cx_filter_free(f);
    CX_CHECK(cx_filter_compile_xform("share(x)", in_fmt, NULL, &f) == -EINVAL);
    CX_CHECK(strstr(cx_errmsg(), "col 7: share() takes an integer key") != NULL);
}

CX_TEST(stateful_program_needs_its_state)
{
    struct cx_filter *f = xf("every(2)");
    CX_CHECK(f != NULL);
    struct rd r = sample(1, 0);
    CX_CHECK_EQ_INT(encode(&r), 0);
    CX_CHECK_EQ_INT(cx_filter_eval(f, wire, wire_len), -EINVAL);
    CX_CHECK_EQ_INT(cx_filter_run(f, NULL, wire, wire_len, 1, NULL), -EINVAL);
    CX_CHECK_EQ_INT((int)cx_filter_state_size(f), 16);
    cx_filter_free(f);
}

CX_TEST(type_errors_name_their_column)
{
    setup();
    struct {
        const char *prog;
        int rc;
        const char *msg;
    } cases[] = {
        {"nope = 1", -EINVAL, "col 1: unknown output field 'nope' (not in format 'summary')"},
        {"label = 1", -EINVAL, "col 1: output field 'label' is not a number"},
        {"k = label", -EINVAL, "col 5: cannot assign a string to a number field"},
        {"k = x * 2", -EINVAL, "col 5: the output field is an integer and this value is a "
                               "float: convert it with int(...)"},
        {"k = 1; k = 2", -EINVAL, "col 8: output field 'k' is assigned twice"},
        {"mean = sum(x)", -EINVAL, "col 12: 'x' is not an array of numbers"},
        {"mean = sum(1)", -EINVAL, "col 12: sum() takes an array field, found '1'"},
        {"mean = mean(label)", -EINVAL, "col 13: 'label' is not an array of numbers"},
        {"every(x)", -EINVAL, "col 7: the last argument of every() must be an integer literal"},
        {"every(0)", -EINVAL, "col 7: the last argument of every() must be an integer literal"},
        {"mean = wmean(x, 2.5)", -EINVAL, "col 17: the last argument of wmean()"},
        {"mean = sqrt(label)", -EINVAL, "col 13: sqrt() takes a number, not a string"},
        {"mean = sqrt(1, 2)", -EINVAL, "col 14: sqrt() takes 1 argument"},
        {"mean = changed(x)", -EINVAL, "col 17: expected ',' in changed(), found ')'"},
        {"mean = min(1, 2, 3)", -EINVAL, "col 16: min() takes 2 arguments"},
        {"k = 1 x == 2", -EINVAL, "col 7: unexpected 'x' after a complete expression"},
        {"step == 1 = 2", -EINVAL, "col 11: '=' is not an operator (use '==')"},
        {"label; k = 1", -EINVAL, "col 1: a filter must give a number"},
        {"k = 1;; k = 2", -EINVAL, "col 7: expected a number, a string, a field or '('"},
        {"", -EINVAL, "col 1: empty filter"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct cx_filter *f = (struct cx_filter *)1;
        int rc = cx_filter_compile_xform(cases[i].prog, in_fmt, out_fmt, &f);
        if (rc != cases[i].rc || strncmp(cx_errmsg(), cases[i].msg, strlen(cases[i].msg)))
            fprintf(stderr, "  \"%s\": %d \"%s\"\n", cases[i].prog, rc, cx_errmsg());
        CX_CHECK_EQ_INT(rc, cases[i].rc);
        CX_CHECK(strncmp(cx_errmsg(), cases[i].msg, strlen(cases[i].msg)) == 0);
        CX_CHECK(f == NULL);
    }
    /* a plain filter has no output format: '=' is the old mistake */
    struct cx_filter *f;
    CX_CHECK_EQ_INT(cx_filter_compile("x = 1", in_fmt, &f), -EINVAL);
    CX_CHECK(strcmp(cx_errmsg(), "col 3: '=' is not an operator (use '==')") == 0);
}

CX_TEST(over_budget_transform_is_refused_at_creation)
{
    setup();
    struct cx_filter *f = NULL;
    /* 40 000 elements: one reduction fits the budget of 65 536 steps, two do not */
    CX_CHECK_EQ_INT(cx_filter_compile_xform("sum(big) > 0", huge_fmt, NULL, &f), 0);
    cx_filter_free(f);
    CX_CHECK_EQ_INT(cx_filter_compile_xform("sum(big) > 0 && max(big) < 9", huge_fmt, NULL, &f),
                    -E2BIG);
    CX_CHECK(strstr(cx_errmsg(), "col 17: transform may take") != NULL);
    CX_CHECK(strstr(cx_errmsg(), "over the budget of 65536") != NULL);
    CX_CHECK(f == NULL);
    /* a variable array counts as CX_FILTER_VAR_ELEMS (4096): 16 reductions are too many */
    char prog[512] = "mean = 0";
    for (int i = 0; i < 16; i++)
        strcat(prog, " + sum(vals)");
    CX_CHECK_EQ_INT(cx_filter_compile_xform(prog, in_fmt, out_fmt, &f), -E2BIG);
    CX_CHECK(strstr(cx_errmsg(), "over the budget") != NULL);
    prog[strlen(prog) - strlen(" + sum(vals)")] = '\0';
    CX_CHECK_EQ_INT(cx_filter_compile_xform(prog, in_fmt, out_fmt, &f), 0);
    char text[4096];
    CX_CHECK(cx_filter_describe(f, text, sizeof text) > 0);
    CX_CHECK(strstr(text, "1 outputs, 0 states, worst case 61") != NULL);
    if (!strstr(text, "sum kind 3 size 8 slot 0 (vals)"))
        fprintf(stderr, "%s", text);
    CX_CHECK(strstr(text, "sum kind 3 size 8 slot 0 (vals)") != NULL);
    cx_filter_free(f);
}

CX_TEST(output_format_must_be_native)
{
    setup();
    struct cx_arch be = {1, 8, 8, 8};
    const struct cx_struct_decl out_d[] = {{"summary", out_f, sizeof(struct out)}, {NULL}};
    struct cx_format *bef;
    CX_CHECK_EQ_INT(cx_format_create(out_d, &be, &bef), 0);
    struct cx_filter *f;
    CX_CHECK_EQ_INT(cx_filter_compile_xform("k = 1", in_fmt, bef, &f), -EINVAL);
    CX_CHECK(strstr(cx_errmsg(), "not native") != NULL);
    cx_format_free(bef);
}

CX_TEST_MAIN()
