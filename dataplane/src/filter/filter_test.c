/* Derived-channel filters: every operator and field type on real encoded events, the
 * promotion rules, precedence, every compile error with its column, hostile expressions,
 * malformed events, and events of a big-endian and of a 32-bit sender (hand-made images). */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "filter/cx_filter.h"
#include "format/cx_codec.h"
#include "format/cx_format_registry.h"

#include <malloc.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>

struct vec { double x, y; };
struct pt { float x; int16_t y; char tag[4]; };
struct inner { int32_t k; char *s; };
struct ev {
    int8_t i8; int16_t i16; int32_t i32; int64_t i64;
    uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64;
    float f; double d; bool b; char c; int32_t e; uint64_t ul;
    struct vec pos;
    struct pt pts[3];
    int32_t grid[2][3];
    char name[8];
    uint32_t n; double *vals;
    uint16_t np; struct pt *vp;
    char *label; char *note;
    int32_t nc; char *chars;
    struct inner in;
};

#define F(name, type) {#name, type, sizeof(((struct ev *)0)->name), offsetof(struct ev, name)}
static const struct cx_field vec_f[] = {
    {"x", "double", 8, offsetof(struct vec, x)}, {"y", "double", 8, offsetof(struct vec, y)},
    {NULL}};
static const struct cx_field pt_f[] = {
    {"x", "float", 4, offsetof(struct pt, x)}, {"y", "int16", 2, offsetof(struct pt, y)},
    {"tag", "char[4]", 1, offsetof(struct pt, tag)}, {NULL}};
static const struct cx_field inner_f[] = {
    {"k", "int32", 4, offsetof(struct inner, k)},
    {"s", "string", sizeof(char *), offsetof(struct inner, s)}, {NULL}};
static const struct cx_field ev_f[] = {
    F(i8, "int8"), F(i16, "int16"), F(i32, "int32"), F(i64, "int64"),
    F(u8, "uint8"), F(u16, "uint16"), F(u32, "uint32"), F(u64, "uint64"),
    F(f, "float"), F(d, "double"), F(b, "bool"), F(c, "char"), F(e, "enum"),
    F(ul, "unsigned integer"), F(pos, "vec"),
    {"pts", "pt[3]", sizeof(struct pt), offsetof(struct ev, pts)},
    {"grid", "int32[2][3]", 4, offsetof(struct ev, grid)},
    {"name", "char[8]", 1, offsetof(struct ev, name)},
    F(n, "uint32"), {"vals", "double[n]", 8, offsetof(struct ev, vals)},
    F(np, "uint16"), {"vp", "pt[np]", sizeof(struct pt), offsetof(struct ev, vp)},
    F(label, "string"), F(note, "string"),
    F(nc, "int32"), {"chars", "char[nc]", 1, offsetof(struct ev, chars)},
    F(in, "inner"), {NULL}};
static const struct cx_struct_decl ev_d[] = {
    {"ev", ev_f, sizeof(struct ev)}, {"vec", vec_f, sizeof(struct vec)},
    {"pt", pt_f, sizeof(struct pt)}, {"inner", inner_f, sizeof(struct inner)}, {NULL}};

static const struct cx_format *fmt;
static _Alignas(8) uint8_t wire[4096];
static size_t wire_len;
static double vals[3] = {1.0, 2.0, 3.0};
static struct pt vp[2] = {{9.5f, -1, "z"}, {8.5f, -2, "w"}};

/* Encodes the reference event (changed by `edit` when not NULL) into wire. */
static int make_event(void (*edit)(struct ev *))
{
    if (!fmt) {
        struct cx_format *f;
        if (cx_format_create(ev_d, NULL, &f) < 0 || cx_format_registry_insert(f, &fmt) < 0) {
            fprintf(stderr, "  format: %s\n", cx_errmsg());
            return -1;
        }
    }
    struct ev e = {
        .i8 = -5, .i16 = -300, .i32 = -70000, .i64 = -5000000000LL,
        .u8 = 200, .u16 = 60000, .u32 = 4000000000u, .u64 = UINT64_MAX,
        .f = 1.5f, .d = 2.5, .b = true, .c = 'A', .e = 3, .ul = 1ULL << 63,
        .pos = {0.25, -8},
        .pts = {{1.5f, 10, "ab"}, {2.5f, 20, "xy"}, {3.5f, 30, "q"}},
        .grid = {{0, 1, 2}, {3, 4, 5}},
        .name = "abc",
        .n = 3, .vals = vals, .np = 2, .vp = vp,
        .label = "hello", .note = NULL,
        .nc = 3, .chars = "hey",
        .in = {7, "inner"},
    };
    if (edit)
        edit(&e);
    struct cx_enc enc;
    if (cx_encode(fmt, &e, &enc) < 0) {
        fprintf(stderr, "  encode: %s\n", cx_errmsg());
        return -1;
    }
    long n = cx_enc_gather(&enc, wire, sizeof wire);
    if (n < 0)
        return -1;
    wire_len = (size_t)n;
    return 0;
}

#define COMPILE_FAILED (-1000)

/* Compiles expr, evaluates it on the current event: 1, 0, a negative errno from eval, or
 * COMPILE_FAILED (the message printed). */
static int run(const char *expr)
{
    struct cx_filter *flt;
    int rc = cx_filter_compile(expr, fmt, &flt);
    if (rc < 0) {
        fprintf(stderr, "  compile \"%s\": %s\n", expr, cx_errmsg());
        return COMPILE_FAILED;
    }
    rc = cx_filter_eval(flt, wire, wire_len);
    cx_filter_free(flt);
    return rc;
}

/* Every expression must pass (each one is checked alone, so a failure names it). */
static int all_pass(const char *const *exprs, size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = run(exprs[i]);
        if (rc != 1) {
            fprintf(stderr, "  expected pass: %s  (got %d)\n", exprs[i], rc);
            bad++;
        }
    }
    return bad;
}

static int all_drop(const char *const *exprs, size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = run(exprs[i]);
        if (rc != 0) {
            fprintf(stderr, "  expected drop: %s  (got %d)\n", exprs[i], rc);
            bad++;
        }
    }
    return bad;
}
#define N(a) (sizeof(a) / sizeof((a)[0]))

CX_TEST(integer_fields_of_every_width)
{
    CX_CHECK_EQ_INT(make_event(NULL), 0);
    static const char *const pass[] = {
        "i8 == -5", "i16 == -300", "i32 == -70000", "i64 == -5000000000",
        "u8 == 200", "u16 == 60000", "u32 == 4000000000", "u64 == 18446744073709551615",
        "u64 == 0xffffffffffffffff", "ul == 9223372036854775808", "i8 < 0", "u8 > 199",
        "i64 < i32", "u32 > u16", "u16 >= 60000", "i16 <= -300", "i8 != 5", "e == 3",
        "i32 + 70000 == 0", "i64 * 2 == -10000000000", "u8 - 201 == -1",
    };
    static const char *const drop[] = {
        "i8 == 5", "u8 < 200", "i64 > 0", "u32 == 0", "u16 != 60000", "e > 3",
    };
    CX_CHECK_EQ_INT(all_pass(pass, N(pass)), 0);
    CX_CHECK_EQ_INT(all_drop(drop, N(drop)), 0);
}

CX_TEST(unsigned_64_compares_exactly_and_wraps)
{
    CX_CHECK_EQ_INT(make_event(NULL), 0);
    static const char *const pass[] = {
        "u64 > -1",               /* exact int/uint comparison, unlike C */
        "-1 < u64", "u64 > i64", "i64 < u64", "!(u64 < 0)", "u64 + 1 == 0",
        "u64 / 2 == 9223372036854775807", "u64 % 10 == 5",
        "9223372036854775807 + 1 < 0",                      /* int wraps */
        "-9223372036854775808 < 0", "-9223372036854775808 - 1 > 0",
        "-9223372036854775808 / -1 == -9223372036854775808", /* no trap */
        "-9223372036854775808 % -1 == 0", "ul == 9223372036854775808", "ul > 0",
        "-ul < 0", /* minus of a uint is the int with the same bits */
        "-7 / 2 == -3", "-7 % 2 == -1", "7 % -2 == 1",
    };
    CX_CHECK_EQ_INT(all_pass(pass, N(pass)), 0);
}

CX_TEST(float_fields_and_promotion)
{
    CX_CHECK_EQ_INT(make_event(NULL), 0);
    static const char *const pass[] = {
        "f == 1.5", "d == 2.5", "d > f", "f < 2", "d * 2 == 5", "d / 2 == 1.25",
        "i32 / 3 == -23333", "i32 / 3.0 < -23333.3", "i32 + 0.5 == -69999.5",
        "d % 1 == 0.5", "-d == -2.5", "f + d == 4", "2e0 == 2", ".5 == 0.5", "1e-3 < 0.01",
        "u64 > 1.8e19", "u32 * 1.0 == 4000000000", "pos.x == .25", "pos.y < pos.x",
        "d", "!!f",
    };
    CX_CHECK_EQ_INT(all_pass(pass, N(pass)), 0);
}

CX_TEST(bool_char_enum)
{
    CX_CHECK_EQ_INT(make_event(NULL), 0);
    static const char *const pass[] = {
        "b", "b == true", "b == 1", "!b == false", "c == 'A'", "c == 65", "c + 1 == 'B'",
        "c > 'a' - 32 - 1", "'\\n' == 10", "'\\x41' == c", "e == 3", "e * 2 == 6",
        "true && !false", "true + true == 2",
    };
    CX_CHECK_EQ_INT(all_pass(pass, N(pass)), 0);
}

static void set_bool_2(struct ev *e) { memset(&e->b, 2, 1); e->c = (char)0xE9; }

CX_TEST(bool_of_any_nonzero_byte_is_one_and_char_is_unsigned)
{
    CX_CHECK_EQ_INT(make_event(set_bool_2), 0);
    CX_CHECK_EQ_INT(run("b == 1"), 1);
    CX_CHECK_EQ_INT(run("c == 233"), 1);
}

CX_TEST(nested_structs_and_fixed_arrays)
{
    CX_CHECK_EQ_INT(make_event(NULL), 0);
    static const char *const pass[] = {
        "pos.x == 0.25", "pos.y == -8", "in.k == 7", "in.s == \"inner\"",
        "pts[0].x == 1.5", "pts[2].y == 30", "pts[1].tag == \"xy\"", "pts[2].tag == \"q\"",
        "grid[0] == 0", "grid[5] == 5", "grid[4] + grid[1] == 5",
        "pts[in.k - 6].y == 20", "grid[in.k - 2] == 5", "grid[u8 - 197] == 3",
        "pts[grid[2]].y == 30", "name == \"abc\"", "name != \"abcd\"",
        "len(grid) == 6", "len(pts) == 3", "len(name) == 8", "len(pts[1].tag) == 4",
        "len(in.s) == 5",
    };
    CX_CHECK_EQ_INT(all_pass(pass, N(pass)), 0);
}

CX_TEST(variable_arrays_and_strings)
{
    CX_CHECK_EQ_INT(make_event(NULL), 0);
    static const char *const pass[] = {
        "vals[0] == 1", "vals[n - 1] == 3", "len(vals) == n", "len(vals) == 3",
        "vals[1] * vals[2] == 6", "vp[1].y == -2", "vp[0].x == 9.5", "vp[1].tag == \"w\"",
        "len(vp) == np", "len(vp[0].tag) == 4", "chars == \"hey\"", "len(chars) == 3",
        "label == \"hello\"", "label != \"hell\"", "label != \"hello!\"", "len(label) == 5",
        "note == \"\"", "len(note) == 0", "label != in.s", "in.s == \"inner\"",
        "label == \"h\\x65llo\"",
    };
    CX_CHECK_EQ_INT(all_pass(pass, N(pass)), 0);
}

CX_TEST(index_past_the_end_drops_the_event)
{
    CX_CHECK_EQ_INT(make_event(NULL), 0);
    static const char *const drop[] = {
        "vals[3] == 0", "vals[n] > -1", "!(vals[n] == 0)", "vals[i8] == 0",
        "vp[np].y == 0", "grid[in.k] == 0", "pts[i8].y == 0", "vals[u64] == 0",
    };
    CX_CHECK_EQ_INT(all_drop(drop, N(drop)), 0);
    /* the guard idiom: && short-circuits before the read */
    CX_CHECK_EQ_INT(run("len(vals) > 5 && vals[5] == 0 || i8 == -5"), 1);
}

static void empty_vals(struct ev *e) { e->n = 0; e->vals = NULL; e->label = NULL; }

CX_TEST(empty_variable_array_and_null_string)
{
    CX_CHECK_EQ_INT(make_event(empty_vals), 0);
    CX_CHECK_EQ_INT(run("len(vals) == 0"), 1);
    CX_CHECK_EQ_INT(run("vals[0] == 0"), 0);
    CX_CHECK_EQ_INT(run("label == \"\" && len(label) == 0"), 1);
}

CX_TEST(precedence_and_associativity)
{
    CX_CHECK_EQ_INT(make_event(NULL), 0);
    static const char *const pass[] = {
        "1 + 2 * 3 == 7", "(1 + 2) * 3 == 9", "10 - 2 - 3 == 5", "100 / 10 / 5 == 2",
        "2 * 3 % 4 == 2", "-2 * -3 == 6", "- -2 == 2", "!0 && 1 || 0", "1 || 0 && 0",
        "!(1 && 0)", "2 < 3 == 1", "1 == 1 == 1", "3 > 2 > 1 == 0", "1 + 1 < 3 && 4 > 3",
        "!1 == 0", "-(2 + 3) == -5", "((((i8)))) == -5", "1 != 2 == 1",
    };
    static const char *const drop[] = {"0 || 0", "1 && 0", "!1", "0", "0.0", "2 - 2"};
    CX_CHECK_EQ_INT(all_pass(pass, N(pass)), 0);
    CX_CHECK_EQ_INT(all_drop(drop, N(drop)), 0);
}

CX_TEST(division_by_zero_drops_and_short_circuit_skips_it)
{
    CX_CHECK_EQ_INT(make_event(NULL), 0);
    static const char *const drop[] = {
        "i32 / 0 == 0", "!(i32 / 0 == 1)", "i32 % 0 == 0", "u64 / 0 > 0", "u64 % (u8 - 200)",
        "d / 0.0 > 0", "d / 0 < 1", "d % 0 == 0", "1 / (i8 + 5)", "0 || 1 / 0 == 0 || 1",
    };
    CX_CHECK_EQ_INT(all_drop(drop, N(drop)), 0);
    CX_CHECK_EQ_INT(run("1 || 1 / 0"), 1);  /* never evaluated */
    CX_CHECK_EQ_INT(run("0 && 1 / 0"), 0);
}

static void set_nan(struct ev *e) { e->d = NAN; }

CX_TEST(nan_compares_false_but_is_true)
{
    CX_CHECK_EQ_INT(make_event(set_nan), 0);
    CX_CHECK_EQ_INT(run("d == d"), 0);
    CX_CHECK_EQ_INT(run("d < 1 || d >= 1"), 0);
    CX_CHECK_EQ_INT(run("d != d"), 1);
    CX_CHECK_EQ_INT(run("d"), 1);
}

struct err_case { const char *expr; int rc; const char *msg; };

CX_TEST(compile_errors_name_the_column)
{
    CX_CHECK_EQ_INT(make_event(NULL), 0);
    static const struct err_case cases[] = {
        {"i32 == x", -EINVAL, "col 8: unknown field 'x' (format 'ev' has: i8, i16,"},
        {"label == 5", -EINVAL, "col 7: cannot compare string with number"},
        {"5 == label", -EINVAL, "col 3: cannot compare number with string"},
        {"label < \"a\"", -EINVAL, "col 7: strings compare only with == and !=, not '<'"},
        {"name > 1", -EINVAL, "col 6: cannot compare string with number"},
        {"label + 1 == 2", -EINVAL, "col 7: cannot use a string in arithmetic ('+')"},
        {"i32 && label", -EINVAL, "col 5: '&&' needs numbers, not a string"},
        {"!label", -EINVAL, "col 1: '!' needs a number, not a string"},
        {"-\"x\" == 1", -EINVAL, "col 1: '-' needs a number, not a string"},
        {"(i32 == 1", -EINVAL, "col 10: expected ')' to close the '(' at col 1, found end"},
        {"i32 = 1", -EINVAL, "col 5: '=' is not an operator (use '==')"},
        {"i32 & 1", -EINVAL, "col 5: '&' is not an operator (use '&&')"},
        {"i32 | 1", -EINVAL, "col 5: '|' is not an operator (use '||')"},
        {"", -EINVAL, "col 1: empty filter"},
        {"   ", -EINVAL, "col 4: empty filter"},
        {"i32 1", -EINVAL, "col 5: unexpected '1' after a complete expression"},
        {"i32 == 1)", -EINVAL, "col 9: unexpected ')' after a complete expression"},
        {"1 +", -EINVAL, "col 4: expected a number, a string, a field or '(', found end"},
        {"* 2", -EINVAL, "col 1: expected a number, a string, a field or '(', found '*'"},
        {"pos", -EINVAL, "col 1: 'pos' is a struct: use one of its fields (pos.x)"},
        {"pos == 1", -EINVAL, "col 1: 'pos' is a struct"},
        {"vals > 1", -EINVAL, "col 1: 'vals' is an array: index it (vals[0]) or use len(vals)"},
        {"grid == 1", -EINVAL, "col 1: 'grid' is an array"},
        {"grid[6] == 1", -EINVAL, "col 6: index 6 is out of range for 'grid' (6 elements)"},
        {"grid[-1] == 1", -EINVAL, "col 6: index -1 is out of range for 'grid'"},
        {"i32[0]", -EINVAL, "col 4: 'i32' is not an array"},
        {"pos.z > 0", -EINVAL, "col 5: unknown field 'z' (struct 'vec' has: x, y)"},
        {"in.k.x", -EINVAL, "col 5: 'k' is not a struct"},
        {"pts.x", -EINVAL, "col 4: 'pts' is an array of structs: index it first"},
        {"pos.", -EINVAL, "col 5: expected a field name after '.', found end"},
        {"vals[1.5] > 0", -EINVAL, "col 6: the index of 'vals' must be an integer, not a float"},
        {"vals[label] > 0", -EINVAL, "col 6: the index of 'vals' must be an integer"},
        {"vals[1 > 0", -EINVAL, "col 11: expected ']' to close the '[' at col 5"},
        {"grid[1][2] == 0", -EINVAL, "col 8: 'grid' takes one index"},
        {"len(i32) == 1", -EINVAL, "col 5: len() needs an array or a string; 'i32' is a number"},
        {"len(pos) == 1", -EINVAL, "col 5: len() needs an array or a string; 'pos' is a struct"},
        {"len(3) == 1", -EINVAL, "col 5: len() takes a field, found '3'"},
        {"len(vals == 1", -EINVAL, "col 10: expected ')' to close len( at col 1"},
        {"len == 1", -EINVAL, "col 1: unknown field 'len'"},
        {"\"abc\"", -EINVAL, "col 1: a filter must give a number"},
        {"label", -EINVAL, "col 1: a filter must give a number"},
        {"label == \"abc", -EINVAL, "col 10: unterminated string"},
        {"99999999999999999999 > 1", -EINVAL, "col 1: integer literal 99999999999999999999 is "
                                                "out of range"},
        {"0x10000000000000000", -EINVAL, "col 1: integer literal is out of range"},
        {"0x", -EINVAL, "col 1: bad hexadecimal number"},
        {"1.5.2 == 1", -EINVAL, "col 1: bad number '1.5."},
        {"12abc", -EINVAL, "col 1: bad number '12a'"},
        {"1e999 > 0", -EINVAL, "col 1: float literal 1e999 is out of range"},
        {"'ab' == 1", -EINVAL, "col 1: char literal holds one character"},
        {"'' == 1", -EINVAL, "col 1: empty or unterminated char literal"},
        {"label == \"\\q\"", -EINVAL, "col 11: unknown escape '\\q'"},
        {"label == \"\\x4\"", -EINVAL, "col 11: \\x needs two hex digits"},
        {"i32 # 1", -EINVAL, "col 5: unexpected character '#'"},
        {"i32 == \x01", -EINVAL, "col 8: unexpected byte 0x01"},
    };
    int bad = 0;
    for (size_t i = 0; i < N(cases); i++) {
        struct cx_filter *flt = (struct cx_filter *)1;
        int rc = cx_filter_compile(cases[i].expr, fmt, &flt);
        if (rc != cases[i].rc || flt != NULL || strncmp(cx_errmsg(), cases[i].msg,
                                                        strlen(cases[i].msg)) != 0) {
            fprintf(stderr, "  \"%s\": rc %d, message \"%s\"; want %d \"%s...\"\n",
                    cases[i].expr, rc, cx_errmsg(), cases[i].rc, cases[i].msg);
            bad++;
        }
    }
    CX_CHECK_EQ_INT(bad, 0);
}

CX_TEST(hostile_expressions_are_rejected_by_the_limits)
{
    CX_CHECK_EQ_INT(make_event(NULL), 0);
    static char text[CX_FILTER_MAX_EXPR * 2];
    struct cx_filter *flt;
    /* too long */
    memset(text, ' ', CX_FILTER_MAX_EXPR + 1);
    text[0] = '1';
    text[CX_FILTER_MAX_EXPR + 1] = '\0';
    CX_CHECK_EQ_INT(cx_filter_compile(text, fmt, &flt), -E2BIG);
    CX_CHECK(strstr(cx_errmsg(), "longer than 4096 bytes") != NULL);
    /* nested too deep: parentheses, unary operators, indices */
    size_t n = 0;
    for (int i = 0; i < CX_FILTER_MAX_DEPTH + 1; i++)
        text[n++] = '(';
    text[n++] = '1';
    for (int i = 0; i < CX_FILTER_MAX_DEPTH + 1; i++)
        text[n++] = ')';
    text[n] = '\0';
    CX_CHECK_EQ_INT(cx_filter_compile(text, fmt, &flt), -E2BIG);
    CX_CHECK(strstr(cx_errmsg(), "col 65: filter nested deeper than 64 levels") != NULL);
    memset(text, '!', 1000);
    strcpy(text + 1000, "1");
    CX_CHECK_EQ_INT(cx_filter_compile(text, fmt, &flt), -E2BIG);
    n = 0;
    for (int i = 0; i < 100; i++)
        n += (size_t)sprintf(text + n, "grid[");
    n += (size_t)sprintf(text + n, "0");
    for (int i = 0; i < 100; i++)
        text[n++] = ']';
    text[n] = '\0';
    CX_CHECK_EQ_INT(cx_filter_compile(text, fmt, &flt), -E2BIG);
    /* just inside the depth limit, but the stack would need 65 slots */
    n = 0;
    for (int i = 0; i < 63; i++)
        n += (size_t)sprintf(text + n, "1+(");
    n += (size_t)sprintf(text + n, "1+1");
    for (int i = 0; i < 63; i++)
        text[n++] = ')';
    text[n] = '\0';
    CX_CHECK_EQ_INT(cx_filter_compile(text, fmt, &flt), -E2BIG);
    CX_CHECK(strstr(cx_errmsg(), "more than 64 stack slots") != NULL);
    /* the same one level shallower fits, and evaluates */
    n = 0;
    for (int i = 0; i < 62; i++)
        n += (size_t)sprintf(text + n, "1+(");
    n += (size_t)sprintf(text + n, "1+1");
    for (int i = 0; i < 62; i++)
        text[n++] = ')';
    n += (size_t)sprintf(text + n, " == 64");
    CX_CHECK_EQ_INT(run(text), 1);
    /* too many instructions (a long flat chain: no nesting at all) */
    n = 0;
    for (int i = 0; i < 600; i++)
        n += (size_t)sprintf(text + n, "i8+");
    sprintf(text + n, "1");
    CX_CHECK_EQ_INT(cx_filter_compile(text, fmt, &flt), -E2BIG);
    CX_CHECK(strstr(cx_errmsg(), "more than 1024 instructions") != NULL);
    /* a very long string literal is fine */
    memset(text, 0, sizeof text);
    strcpy(text, "label != \"");
    memset(text + 10, 'x', 3000);
    strcat(text, "\"");
    CX_CHECK_EQ_INT(run(text), 1);
}

CX_TEST(null_arguments)
{
    CX_CHECK_EQ_INT(make_event(NULL), 0);
    struct cx_filter *flt;
    CX_CHECK_EQ_INT(cx_filter_compile(NULL, fmt, &flt), -EINVAL);
    CX_CHECK_EQ_INT(cx_filter_compile("1", NULL, &flt), -EINVAL);
    CX_CHECK_EQ_INT(cx_filter_compile("1", fmt, NULL), -EINVAL);
    CX_CHECK_EQ_INT(cx_filter_eval(NULL, wire, wire_len), -EINVAL);
    CX_CHECK_EQ_INT(cx_filter_compile("1", fmt, &flt), 0);
    CX_CHECK_EQ_INT(cx_filter_eval(flt, NULL, 0), -EINVAL);
    CX_CHECK(cx_filter_format(flt) == fmt);
    cx_filter_free(flt);
    cx_filter_free(NULL);
}

CX_TEST(malformed_events_are_rejected_never_read)
{
    CX_CHECK_EQ_INT(make_event(NULL), 0);
    struct cx_filter *flt;
    CX_CHECK_EQ_INT(cx_filter_compile("vals[2] == 3 && label == \"hello\" && vp[1].y == -2 "
                                      "&& chars == \"hey\" && grid[i8 + 10] == 5", fmt, &flt), 0);
    CX_CHECK_EQ_INT(cx_filter_eval(flt, wire, wire_len), 1);
    /* every truncation is rejected (never partially read), except cutting the zero
     * padding after the last part, which leaves a whole event */
    static _Alignas(8) uint8_t copy[4096];
    for (size_t len = 0; len < wire_len; len++) {
        memcpy(copy, wire, len);
        int rc = cx_filter_eval(flt, copy, len);
        if (rc != -EBADMSG && !(rc == 1 && len > wire_len - 8)) {
            fprintf(stderr, "  truncated to %zu of %zu: %d\n", len, wire_len, rc);
            CX_CHECK(0);
        }
    }
    CX_CHECK(strstr(cx_errmsg(), "filter on format 'ev': ") != NULL);
    /* a lying array count, a slot past the end, a string without its NUL */
    const struct ev *fx = (const struct ev *)(wire + 8 + 16 * 6);
    memcpy(copy, wire, wire_len);
    ((struct ev *)(copy + ((const uint8_t *)fx - wire)))->n = 1000;
    CX_CHECK_EQ_INT(cx_filter_eval(flt, copy, wire_len), -EBADMSG);
    CX_CHECK(strstr(cx_errmsg(), "'vals'") != NULL);
    memcpy(copy, wire, wire_len);
    uint64_t big = 1ULL << 40;
    memcpy(copy + 8 + 8, &big, 8); /* slot 0 length */
    CX_CHECK_EQ_INT(cx_filter_eval(flt, copy, wire_len), -EBADMSG);
    memcpy(copy, wire, wire_len);
    uint64_t off, len;
    memcpy(&off, wire + 8 + 16 * 2, 8); /* slot 2: label */
    memcpy(&len, wire + 8 + 16 * 2 + 8, 8);
    copy[off + len - 1] = 'x';
    CX_CHECK_EQ_INT(cx_filter_eval(flt, copy, wire_len), -EBADMSG);
    CX_CHECK(strstr(cx_errmsg(), "without its NUL") != NULL);
    memset(copy, 0xff, wire_len);
    CX_CHECK_EQ_INT(cx_filter_eval(flt, copy, wire_len), -EBADMSG);
    cx_filter_free(flt);
}

CX_TEST(eval_allocates_nothing)
{
    CX_CHECK_EQ_INT(make_event(NULL), 0);
    struct cx_filter *flt;
    CX_CHECK_EQ_INT(cx_filter_compile("label == \"hello\" && vals[n - 1] * 2.0 > pts[1].y / 10 "
                                      "&& vp[np - 1].tag == \"w\" && len(chars) == 3",
                                      fmt, &flt), 0);
    struct mallinfo2 before = mallinfo2();
    int sum = 0;
    for (int i = 0; i < 10000; i++)
        sum += cx_filter_eval(flt, wire, wire_len);
    struct mallinfo2 after = mallinfo2();
    CX_CHECK_EQ_INT(sum, 10000);
    CX_CHECK_EQ_INT(after.uordblks, before.uordblks);
    cx_filter_free(flt);
}

CX_TEST(describe_shows_folded_paths)
{
    CX_CHECK_EQ_INT(make_event(NULL), 0);
    struct cx_filter *flt;
    CX_CHECK_EQ_INT(cx_filter_compile("grid[4] == 4 && pts[2].y == 30", fmt, &flt), 0);
    char text[2048];
    long n = cx_filter_describe(flt, text, sizeof text);
    CX_CHECK(n > 0 && (size_t)n < sizeof text);
    CX_CHECK(strstr(text, "loadk") != NULL);
    CX_CHECK(strstr(text, "idx") == NULL); /* literal indices folded into offsets */
    CX_CHECK(strstr(text, "jz") != NULL);
    cx_filter_free(flt);
    CX_CHECK_EQ_INT(cx_filter_compile("vals[i8 + 6] > 1 && label == \"x\" || len(vals) > u64",
                                      fmt, &flt), 0);
    n = cx_filter_describe(flt, text, sizeof text);
    CX_CHECK(strstr(text, "vidx") != NULL);
    CX_CHECK(strstr(text, "sslot") != NULL);
    CX_CHECK(strstr(text, "gt      int:uint") != NULL);
    CX_CHECK_EQ_INT(cx_filter_eval(flt, wire, wire_len), 0);
    char small[16];
    CX_CHECK_EQ_INT(cx_filter_describe(flt, small, sizeof small), n);
    CX_CHECK_EQ_INT(strlen(small), 15);
    cx_filter_free(flt);
}

/* --- events of other architectures (hand-made byte images, as in format/convert_test.c) --- */

static _Alignas(8) uint8_t img[512];
static void be(uint8_t *p, uint64_t v, int n) { for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * (n - 1 - i))); }
static void le(uint8_t *p, uint64_t v, int n) { for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint64_t dbits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static struct cx_format *from_json(const char *js, const struct cx_arch *a)
{
    struct cx_format *f = NULL;
    if (cx_format_from_json(js, strlen(js), a, &f) < 0)
        fprintf(stderr, "  %s\n", cx_errmsg());
    return f;
}

CX_TEST(big_endian_sender)
{
    struct cx_arch bea = {1, 8, 8, 8};
    struct cx_format *w = from_json(
        "{\"name\":\"rec\",\"fields\":[{\"name\":\"id\",\"type\":\"int32\"},"
        "{\"name\":\"x\",\"type\":\"double\"},{\"name\":\"n\",\"type\":\"uint16\"},"
        "{\"name\":\"vals\",\"type\":\"int32[n]\"},{\"name\":\"label\",\"type\":\"string\"},"
        "{\"name\":\"big\",\"type\":\"uint64\"},{\"name\":\"fl\",\"type\":\"float[2]\"}]}", &bea);
    CX_CHECK(w != NULL);
    CX_CHECK_EQ_INT(cx_format_size(w), 56); /* id@0 x@8 n@16 vals@24 label@32 big@40 fl@48 */
    memset(img, 0, sizeof img);
    le(img, 40, 4); le(img + 4, 2, 4);          /* the side area is always little-endian */
    le(img + 8, 96, 8); le(img + 16, 12, 8);     /* vals: 3 x int32 at 96 */
    le(img + 24, 112, 8); le(img + 32, 6, 8);    /* label at 112 */
    uint8_t *fx = img + 40;
    be(fx, (uint32_t)-5, 4); be(fx + 8, dbits(6.5), 8); be(fx + 16, 3, 2);
    be(fx + 24, 0xdeadbeef, 8); be(fx + 32, 0xfeedface, 8); /* sender's pointers: junk */
    be(fx + 40, 0x8000000000000001ULL, 8);
    be(fx + 48, fbits(0.5f), 4); be(fx + 52, fbits(-2.0f), 4);
    be(img + 96, 7, 4); be(img + 100, (uint32_t)-8, 4); be(img + 104, 9, 4);
    memcpy(img + 112, "hello", 6);
    struct cx_filter *flt;
    const char *expr = "id == -5 && x == 6.5 && n == 3 && len(vals) == 3 && vals[1] == -8 && "
                       "vals[n - 1] == 9 && label == \"hello\" && big == 9223372036854775809 && "
                       "fl[0] == 0.5 && fl[1] < 0";
    CX_CHECK_EQ_INT(cx_filter_compile(expr, w, &flt), 0);
    char text[4096];
    cx_filter_describe(flt, text, sizeof text);
    CX_CHECK(strstr(text, "byte-swapped") != NULL);
    CX_CHECK_EQ_INT(cx_filter_eval(flt, img, 118), 1);
    cx_filter_free(flt);
    CX_CHECK_EQ_INT(cx_filter_compile("vals[0] == 7 && id < 0", w, &flt), 0);
    CX_CHECK_EQ_INT(cx_filter_eval(flt, img, 118), 1);
    be(fx + 16, 4, 2); /* a count of 4 that the 12-byte part cannot hold */
    CX_CHECK_EQ_INT(cx_filter_eval(flt, img, 118), -EBADMSG);
    cx_filter_free(flt);
    cx_format_free(w);
}

CX_TEST(i386_sender_4_byte_pointers_longs_alignment)
{
    struct cx_arch i386 = {0, 4, 4, 4};
    struct cx_format *w = from_json(
        "{\"name\":\"r32\",\"fields\":[{\"name\":\"id\",\"type\":\"int32\"},"
        "{\"name\":\"x\",\"type\":\"double\"},{\"name\":\"n\",\"type\":\"long\"},"
        "{\"name\":\"vals\",\"type\":\"float[n]\"},{\"name\":\"label\",\"type\":\"string\"}]}",
        &i386);
    CX_CHECK(w != NULL);
    CX_CHECK_EQ_INT(cx_format_size(w), 24); /* id@0 x@4 n@12 vals@16 label@20 */
    memset(img, 0, sizeof img);
    le(img, 40, 4); le(img + 4, 2, 4);
    le(img + 8, 64, 8); le(img + 16, 8, 8);   /* 2 floats at 64 */
    le(img + 24, 72, 8); le(img + 32, 3, 8);  /* "ab" */
    uint8_t *fx = img + 40;
    le(fx, 42, 4); le(fx + 4, dbits(-1.25), 8); le(fx + 12, 2, 4);
    le(fx + 16, 0x1000, 4); le(fx + 20, 0x2000, 4);
    le(img + 64, fbits(0.5f), 4); le(img + 68, fbits(2.0f), 4);
    memcpy(img + 72, "ab", 3);
    struct cx_filter *flt;
    CX_CHECK_EQ_INT(cx_filter_compile("id == 42 && x == -1.25 && n == 2 && vals[1] == 2 && "
                                      "vals[0] * 4 == 2 && label == \"ab\" && len(label) == 2",
                                      w, &flt), 0);
    CX_CHECK_EQ_INT(cx_filter_eval(flt, img, 75), 1);
    CX_CHECK_EQ_INT(cx_filter_eval(flt, img, 74), -EBADMSG);
    cx_filter_free(flt);
    cx_format_free(w);
}

CX_TEST(json_schema_format_and_empty_side_area)
{
    struct cx_format *w = from_json(
        "{\"name\":\"tiny\",\"fields\":[{\"name\":\"a\",\"type\":\"int16\"},"
        "{\"name\":\"len\",\"type\":\"uint8\"}]}", NULL);
    CX_CHECK(w != NULL);
    struct { int16_t a; uint8_t len; } t = {-2, 9};
    struct cx_enc enc;
    CX_CHECK_EQ_INT(cx_encode(w, &t, &enc), 0);
    long n = cx_enc_gather(&enc, img, sizeof img);
    CX_CHECK(n > 0);
    struct cx_filter *flt;
    /* a field named like the builtin: len(...) is the call, len alone the field */
    CX_CHECK_EQ_INT(cx_filter_compile("a == -2 && len == 9", w, &flt), 0);
    CX_CHECK_EQ_INT(cx_filter_eval(flt, img, (size_t)n), 1);
    CX_CHECK_EQ_INT(cx_filter_eval(flt, img, 4), -EBADMSG);
    cx_filter_free(flt);
    cx_format_free(w);
}

CX_TEST(eval_keeps_no_state_between_events)
{
    /* eval keeps no state in the filter: two interleaved evaluations give their own
     * answers (the channel calls eval from several source threads). */
    CX_CHECK_EQ_INT(make_event(NULL), 0);
    struct cx_filter *flt;
    CX_CHECK_EQ_INT(cx_filter_compile("i32 < 0", fmt, &flt), 0);
    static _Alignas(8) uint8_t other[4096];
    memcpy(other, wire, wire_len);
    size_t other_len = wire_len;
    CX_CHECK_EQ_INT(make_event(NULL), 0);
    struct ev *e2 = (struct ev *)(other + 8 + 16 * 6);
    e2->i32 = 5;
    CX_CHECK_EQ_INT(cx_filter_eval(flt, other, other_len), 0);
    CX_CHECK_EQ_INT(cx_filter_eval(flt, wire, wire_len), 1);
    CX_CHECK_EQ_INT(cx_filter_eval(flt, other, other_len), 0);
    cx_filter_free(flt);
}

CX_TEST_MAIN()
