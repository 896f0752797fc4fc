/* Numeric element conversion (internal to the format module): one specialised loop per
 * (source type, byte order) -> (target type) pair, and the per-element reference they must
 * agree with bit for bit. Plans (cx_plan.c) pick a kernel when they are compiled; running a
 * plan then calls it once per array or run of like fields.
 *
 * Semantics (the reference's, kept by every kernel):
 *   integer -> integer   two's complement truncation or extension (sign-extended when the
 *                        source is signed); never clamped
 *   integer -> float     (float)(double)v, (double)v
 *   float -> float       float -> double exact; double -> float rounds to nearest, and a
 *                        value beyond +-FLT_MAX becomes +-infinity; NaN stays NaN
 *   float -> signed      NaN -> 0; clamped to [INT64_MIN, INT64_MAX], toward zero, then
 *                        truncated to the target width
 *   float -> unsigned    NaN and v <= 0 -> 0; clamped to UINT64_MAX, toward zero, then
 *                        truncated to the target width
 *   any -> bool          v != 0 (reference only: no kernel)
 * Kinds map to types by size: int/enum signed, uint/char/bool (as a source) unsigned. */
#ifndef CX_CONV_H
#define CX_CONV_H

#include "format/cx_format_int.h"

#include <stddef.h>

/* Same width and kind family: plans copy or byte-swap these, never convert. */
static inline bool cx__conv_same(uint8_t sk, uint32_t ss, uint8_t dk, uint32_t ds)
{
    return ss == ds && ((cx__is_intlike(sk) && cx__is_intlike(dk) &&
                         (dk != CX_K_BOOL || sk == CX_K_BOOL)) ||
                        (sk == CX_K_FLOAT && dk == CX_K_FLOAT));
}

/* Converts n elements; s and d may be unaligned and must not overlap. */
typedef void (*cx__conv_fn)(const uint8_t *s, uint8_t *d, size_t n);

/* Instruction-set variants of the kernel table (x86-64 builds with GCC have all three;
 * elsewhere only CX__ISA_BASE). */
enum cx__isa { CX__ISA_BASE, CX__ISA_AVX2, CX__ISA_AVX512, CX__ISA_COUNT };

/* The best variant this CPU runs (decided once), and whether it runs a given one. */
enum cx__isa cx__conv_isa(void);
bool cx__conv_isa_ok(enum cx__isa isa);
const char *cx__conv_isa_name(enum cx__isa isa);

/* The kernel for (skind, ssize, swap) -> (dkind, dsize) in the best variant, or NULL when
 * there is none (a bool target, or a size that is no scalar's): then use cx__conv_ref.
 * Same type without swap gives a plain copy kernel; same width with swap a byte swap. */
cx__conv_fn cx__conv_kernel(uint8_t skind, uint32_t ssize, bool swap, uint8_t dkind,
                            uint32_t dsize);
/* The same from a given variant (tests run every variant the CPU has). */
cx__conv_fn cx__conv_kernel_isa(enum cx__isa isa, uint8_t skind, uint32_t ssize, bool swap,
                                uint8_t dkind, uint32_t dsize);

/* The per-element reference: every pair, including bool targets. */
void cx__conv_ref(uint8_t skind, uint32_t ssize, bool swap, uint8_t dkind, uint32_t dsize,
                  const uint8_t *s, uint8_t *d, size_t n);

/* Stores v as (kind, size) with the rules above (declared defaults use it too). */
void cx__store_double(uint8_t *d, uint8_t kind, uint32_t size, double v);

#endif
