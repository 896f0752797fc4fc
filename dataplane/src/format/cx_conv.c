/* Numeric element conversion (cx_conv.h): the kernel table (the reference the kernels
 * must match is cx_conv_ref.c).
 *
 * Every kernel is the same simple loop (load with or without byte swap, convert, store),
 * stamped out by the X-macros below for each (source type, target type, swap) and for each
 * instruction-set variant. The loops are written so the compiler vectorises them: unaligned
 * loads and stores through memcpy, restrict pointers, and every range rule as a select
 * (clamp first, then an always-defined conversion) rather than a branch; float to integer
 * converts a block of 256 in the source's precision and redoes the block by the exact
 * rules when a value in it is out of that fast range. The file is
 * compiled with -O3 (module.mk): GCC's -O2 cost model ("very cheap") leaves loops with a
 * remainder unvectorised. x86-64 GCC builds also stamp AVX2 and AVX-512 variants
 * (function target attributes, one table each) and pick one at run time from the CPU:
 * AVX-512DQ has the packed int64 <-> double conversions the baseline lacks. The AVX-512
 * variant uses 512-bit vectors (GCC's choice for that target): with prefer-vector-width=256
 * twice as many pairs were over 1.5x a 1 KB memcpy on the AMD EPYC we measured. */
#include "format/cx_conv.h"

#include <float.h>
#include <math.h>

/* --- the kernels ---------------------------------------------------------------------- */

/* The numeric types: C type, storage type (unsigned for integers), byte swap, class
 * (I signed, U unsigned, F floating) as a source and as a target. */
#define CT_i8 int8_t
#define CT_i16 int16_t
#define CT_i32 int32_t
#define CT_i64 int64_t
#define CT_u8 uint8_t
#define CT_u16 uint16_t
#define CT_u32 uint32_t
#define CT_u64 uint64_t
#define CT_f32 float
#define CT_f64 double
#define UT_i8 uint8_t
#define UT_i16 uint16_t
#define UT_i32 uint32_t
#define UT_i64 uint64_t
#define UT_u8 uint8_t
#define UT_u16 uint16_t
#define UT_u32 uint32_t
#define UT_u64 uint64_t
#define UT_f32 uint32_t
#define UT_f64 uint64_t
#define ST_i8 uint8_t
#define ST_i16 uint16_t
#define ST_i32 uint32_t
#define ST_i64 uint64_t
#define ST_u8 uint8_t
#define ST_u16 uint16_t
#define ST_u32 uint32_t
#define ST_u64 uint64_t
#define ST_f32 float
#define ST_f64 double
#define BS_i8 bs8
#define BS_i16 __builtin_bswap16
#define BS_i32 __builtin_bswap32
#define BS_i64 __builtin_bswap64
#define BS_u8 bs8
#define BS_u16 __builtin_bswap16
#define BS_u32 __builtin_bswap32
#define BS_u64 __builtin_bswap64
#define BS_f32 __builtin_bswap32
#define BS_f64 __builtin_bswap64
#define SC_i8 I
#define SC_i16 I
#define SC_i32 I
#define SC_i64 I
#define SC_u8 U
#define SC_u16 U
#define SC_u32 U
#define SC_u64 U
#define SC_f32 F
#define SC_f64 F
#define DC_i8 I
#define DC_i16 I
#define DC_i32 I
#define DC_i64 I
#define DC_u8 U
#define DC_u16 U
#define DC_u32 U
#define DC_u64 U
#define DC_f32 F4
#define DC_f64 F8

/* Index order of the table: the source list and the target list are the same ten types. */
enum { T_i8, T_i16, T_i32, T_i64, T_u8, T_u16, T_u32, T_u64, T_f32, T_f64, T_COUNT };
#define FOR_SRC(K, ...)                                                                    \
    K(i8, __VA_ARGS__) K(i16, __VA_ARGS__) K(i32, __VA_ARGS__) K(i64, __VA_ARGS__)         \
    K(u8, __VA_ARGS__) K(u16, __VA_ARGS__) K(u32, __VA_ARGS__) K(u64, __VA_ARGS__)         \
    K(f32, __VA_ARGS__) K(f64, __VA_ARGS__)
#define FOR_DST(K, ...)                                                                    \
    K(i8, __VA_ARGS__) K(i16, __VA_ARGS__) K(i32, __VA_ARGS__) K(i64, __VA_ARGS__)         \
    K(u8, __VA_ARGS__) K(u16, __VA_ARGS__) K(u32, __VA_ARGS__) K(u64, __VA_ARGS__)         \
    K(f32, __VA_ARGS__) K(f64, __VA_ARGS__)

static inline uint8_t bs8(uint8_t v) { return v; }

/* Float to integer with the reference's clamps, as selects: the value is clamped into
 * range before the conversion, so the conversion is always defined. */
static inline uint64_t f2s(double v)
{
    double c = v == v ? v : 0.0;
    c = c < -0x1p63 ? -0x1p63 : c;
    c = c > 0x1.fffffffffffffp62 ? 0x1.fffffffffffffp62 : c;
    int64_t i = (int64_t)c;
    return v >= 0x1p63 ? (uint64_t)INT64_MAX : (uint64_t)i;
}

static inline uint64_t f2u(double v)
{
    double c = v > 0 ? v : 0.0; /* NaN and v <= 0 -> 0 */
    c = c > 0x1.fffffffffffffp63 ? 0x1.fffffffffffffp63 : c;
    uint64_t u = (uint64_t)c;
    return v >= 0x1p64 ? UINT64_MAX : u;
}

static inline float d2f(double v)
{
    float f = (float)v;
    f = v > FLT_MAX ? INFINITY : f;
    return v < -FLT_MAX ? -INFINITY : f;
}

/* CV_<source class>_<target class>(x, storage type) */
#define CV_I_I(x, T) ((T)(x))
#define CV_I_U(x, T) ((T)(x))
#define CV_U_I(x, T) ((T)(x))
#define CV_U_U(x, T) ((T)(x))
#define CV_I_F4(x, T) ((float)(double)(x)) /* (float)x may round differently for 64 bits */
#define CV_U_F4(x, T) ((float)(double)(x))
#define CV32_I_F4(x, T) ((float)(x))        /* exact through double: the same, one step */
#define CV32_U_F4(x, T) ((float)(x))
#define CV_I_F8(x, T) ((double)(x))
#define CV_U_F8(x, T) ((double)(x))
#define CV_F_I(x, T) ((T)f2s((double)(x)))
#define CV_F_U(x, T) ((T)f2u((double)(x)))
#define CV_F_F4(x, T) d2f((double)(x))
#define CV_F_F8(x, T) ((double)(x))
#define CV32_I_I CV_I_I
#define CV32_I_U CV_I_U
#define CV32_U_I CV_U_I
#define CV32_U_U CV_U_U
#define CV32_I_F8 CV_I_F8
#define CV32_U_F8 CV_U_F8
#define CAT4(a, b, c, d) CAT4_(a, b, c, d)
#define CAT4_(a, b, c, d) a##b##c##d
/* CVP_<type>: the CV family of a source type (sources of up to 32 bits convert to float
 * in one step) */
#define CVP_i8 CV32_
#define CVP_i16 CV32_
#define CVP_i32 CV32_
#define CVP_i64 CV_
#define CVP_u8 CV32_
#define CVP_u16 CV32_
#define CVP_u32 CV32_
#define CVP_u64 CV_
#define CVP_f32 CV_
#define CVP_f64 CV_
#define CV(S, D) CAT4(CVP_##S, SC_##S, _, DC_##D)

/* Float to integer, fast path: the conversion in the source's own precision and in the
 * narrowest integer that holds every result of the target (FT), for values in its range
 * (|x| < FB; unsigned targets clamp x <= 0 and NaN to 0 first); a block with any value
 * out of that range (rare: NaN, huge) is done again by the exact rules. */
#define FT_i8 int32_t
#define FT_i16 int32_t
#define FT_i32 int32_t
#define FT_i64 int64_t
#define FT_u8 int32_t
#define FT_u16 int32_t
#define FT_u32 uint32_t
#define FT_u64 uint64_t
#define FB_i8 0x1p31
#define FB_i16 0x1p31
#define FB_i32 0x1p31
#define FB_i64 0x1p63
#define FB_u8 0x1p31
#define FB_u16 0x1p31
#define FB_u32 0x1p32
#define FB_u64 0x1p64
#define FAST_I(S, D, x, y, bad)                                                            \
    {                                                                                      \
        CT_##S a_ = x < 0 ? -x : x;                                                        \
        bad |= !(a_ < (CT_##S)FB_##D); /* NaN too */                                       \
        y = (ST_##D)(FT_##D)(a_ < (CT_##S)FB_##D ? x : 0);                                 \
    }
#define FAST_U(S, D, x, y, bad)                                                            \
    {                                                                                      \
        bad |= !(x < (CT_##S)FB_##D); /* NaN too */                                        \
        CT_##S c_ = x < (CT_##S)FB_##D ? x : 0;                                            \
        c_ = c_ > 0 ? c_ : 0;                                                              \
        y = (ST_##D)(FT_##D)c_;                                                            \
    }

#define LOAD(S, SW, p, x)                                                                  \
    CT_##S x;                                                                              \
    {                                                                                      \
        UT_##S u_;                                                                         \
        memcpy(&u_, p, sizeof u_);                                                         \
        if (SW)                                                                            \
            u_ = BS_##S(u_);                                                               \
        memcpy(&x, &u_, sizeof x);                                                         \
    }
#define EXACT(S, D, SW, s, d, n)                                                           \
    for (size_t i = 0; i < n; i++) {                                                       \
        LOAD(S, SW, s + i * sizeof(CT_##S), x)                                             \
        ST_##D y = CV(S, D)(x, ST_##D);                                                    \
        memcpy(d + i * sizeof y, &y, sizeof y);                                            \
    }
#define KB_PLAIN(S, D, SW) EXACT(S, D, SW, s, d, n)
#define KB_BLOCKED(S, D, SW, FAST)                                                         \
    for (size_t b = 0; b < n; b += 256) {                                                  \
        size_t m = n - b < 256 ? n - b : 256;                                              \
        const uint8_t *sb = s + b * sizeof(CT_##S);                                        \
        uint8_t *db = d + b * sizeof(ST_##D);                                              \
        int bad = 0;                                                                       \
        for (size_t i = 0; i < m; i++) {                                                   \
            LOAD(S, SW, sb + i * sizeof(CT_##S), x)                                        \
            ST_##D y;                                                                      \
            FAST(S, D, x, y, bad)                                                          \
            memcpy(db + i * sizeof y, &y, sizeof y);                                       \
        }                                                                                  \
        if (bad)                                                                           \
            EXACT(S, D, SW, sb, db, m)                                                     \
    }
#define KB_F2I(S, D, SW) KB_BLOCKED(S, D, SW, FAST_I)
#define KB_F2U(S, D, SW) KB_BLOCKED(S, D, SW, FAST_U)
/* KB_<source class>_<target class>: the loop each pair runs */
#define KB_I_I KB_PLAIN
#define KB_I_U KB_PLAIN
#define KB_U_I KB_PLAIN
#define KB_U_U KB_PLAIN
#define KB_I_F4 KB_PLAIN
#define KB_U_F4 KB_PLAIN
#define KB_I_F8 KB_PLAIN
#define KB_U_F8 KB_PLAIN
#define KB_F_F4 KB_PLAIN
#define KB_F_F8 KB_PLAIN
#define KB_F_I KB_F2I
#define KB_F_U KB_F2U

#define KNAME(ISA, S, D, SW) k_##ISA##_##S##_##D##_##SW

#define KERNEL(S, D, SW, ISA, ATTR)                                                        \
    ATTR static void KNAME(ISA, S, D, SW)(const uint8_t *restrict s, uint8_t *restrict d,  \
                                          size_t n)                                        \
    {                                                                                      \
        CAT4(KB_, SC_##S, _, DC_##D)(S, D, SW)                                             \
    }
#define KPAIR(D, S, ISA, ATTR) KERNEL(S, D, 0, ISA, ATTR) KERNEL(S, D, 1, ISA, ATTR)
#define KROW(S, ISA, ATTR) FOR_DST(KPAIR, S, ISA, ATTR)
#define TCELL(D, S, ISA) {KNAME(ISA, S, D, 0), KNAME(ISA, S, D, 1)},
#define TROW(S, ISA) {FOR_DST(TCELL, S, ISA)},

/* One variant: every kernel and its table [source][target][swap]. */
#define VARIANT(ISA, ATTR)                                                                 \
    FOR_SRC(KROW, ISA, ATTR)                                                               \
    static const cx__conv_fn tab_##ISA[T_COUNT][T_COUNT][2] = {FOR_SRC(TROW, ISA)};

VARIANT(base, )

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define CX__CONV_X86 1
VARIANT(avx2, __attribute__((target("avx2,fma,bmi,bmi2"))))
VARIANT(avx512, __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,bmi,bmi2"))))
#endif

/* --- choosing ------------------------------------------------------------------------- */

static const cx__conv_fn (*table_of(enum cx__isa isa))[T_COUNT][2]
{
#ifdef CX__CONV_X86
    if (isa == CX__ISA_AVX512)
        return tab_avx512;
    if (isa == CX__ISA_AVX2)
        return tab_avx2;
#endif
    return isa == CX__ISA_BASE ? tab_base : NULL;
}

bool cx__conv_isa_ok(enum cx__isa isa)
{
#ifdef CX__CONV_X86
    __builtin_cpu_init();
    switch (isa) {
    case CX__ISA_BASE: return true;
    case CX__ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                              __builtin_cpu_supports("bmi2");
    case CX__ISA_AVX512:
        return cx__conv_isa_ok(CX__ISA_AVX2) && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl");
    default: return false;
    }
#else
    return isa == CX__ISA_BASE;
#endif
}

enum cx__isa cx__conv_isa(void)
{
    static int best = -1; /* decided once; a race decides the same */
    int b = __atomic_load_n(&best, __ATOMIC_RELAXED);
    if (b < 0) {
        b = CX__ISA_BASE;
        for (int i = CX__ISA_COUNT - 1; i > CX__ISA_BASE; i--)
            if (cx__conv_isa_ok((enum cx__isa)i)) {
                b = i;
                break;
            }
        __atomic_store_n(&best, b, __ATOMIC_RELAXED);
    }
    return (enum cx__isa)b;
}

const char *cx__conv_isa_name(enum cx__isa isa)
{
    static const char *names[] = {"base", "avx2", "avx512"};
    return (unsigned)isa < CX__ISA_COUNT ? names[isa] : "?";
}

static int type_of(uint8_t kind, uint32_t size)
{
    int lg = size == 1 ? 0 : size == 2 ? 1 : size == 4 ? 2 : size == 8 ? 3 : -1;
    if (lg < 0)
        return -1;
    if (kind == CX_K_FLOAT)
        return size == 4 ? T_f32 : size == 8 ? T_f64 : -1;
    if (cx__is_signed(kind))
        return T_i8 + lg;
    return cx__is_intlike(kind) ? T_u8 + lg : -1;
}

cx__conv_fn cx__conv_kernel_isa(enum cx__isa isa, uint8_t sk, uint32_t ss, bool swap,
                                uint8_t dk, uint32_t ds)
{
    const cx__conv_fn(*tab)[T_COUNT][2] = table_of(isa);
    int st = type_of(sk, ss), dt = type_of(dk, ds);
    if (!tab || st < 0 || dt < 0 || (dk == CX_K_BOOL && sk != CX_K_BOOL))
        return NULL;
    if (dk == CX_K_BOOL && ss != ds)
        return NULL; /* bool to a bool of another width: v != 0, reference only */
    if (cx__conv_same(sk, ss, dk, ds)) /* a bit move: as unsigned of that width */
        st = dt = (sk == CX_K_FLOAT ? (ss == 4 ? T_u32 : T_u64) : type_of(CX_K_UINT, ss));
    return tab[st][dt][swap && ss > 1];
}

cx__conv_fn cx__conv_kernel(uint8_t sk, uint32_t ss, bool swap, uint8_t dk, uint32_t ds)
{
    return cx__conv_kernel_isa(cx__conv_isa(), sk, ss, swap, dk, ds);
}
