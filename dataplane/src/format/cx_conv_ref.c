/* Numeric element conversion, the per-element reference (cx_conv.h): the rules every kernel
 * must follow bit for bit. Compiled with the library's ordinary flags (not cx_conv.c's), so
 * the kernels are checked against code the vectoriser and its flags never touched. */
#include "format/cx_conv.h"

#include <float.h>
#include <math.h>

void cx__store_double(uint8_t *d, uint8_t kind, uint32_t size, double v)
{
    if (kind == CX_K_FLOAT) {
        if (size == 4) {
            float f = v > FLT_MAX ? INFINITY : v < -FLT_MAX ? -INFINITY : (float)v;
            memcpy(d, &f, 4);
        } else {
            memcpy(d, &v, 8);
        }
        return;
    }
    if (kind == CX_K_BOOL) {
        cx__store_u(d, size, v != 0);
        return;
    }
    if (isnan(v))
        v = 0;
    if (cx__is_signed(kind)) {
        int64_t i = v >= 9.2233720368547758e18 ? INT64_MAX : v <= -9.2233720368547758e18
                                                              ? INT64_MIN : (int64_t)v;
        cx__store_u(d, size, (uint64_t)i);
    } else {
        uint64_t u = v <= 0 ? 0 : v >= 1.8446744073709552e19 ? UINT64_MAX : (uint64_t)v;
        cx__store_u(d, size, u);
    }
}

void cx__conv_ref(uint8_t sk, uint32_t ss, bool swap, uint8_t dk, uint32_t ds,
                  const uint8_t *s, uint8_t *d, size_t n)
{
    if (cx__conv_same(sk, ss, dk, ds)) {
        for (size_t i = 0; i < n; i++, s += ss, d += ds)
            cx__store_u(d, ds, cx__load_u(s, ss, swap));
        return;
    }
    for (size_t i = 0; i < n; i++, s += ss, d += ds) {
        if (sk == CX_K_FLOAT) {
            cx__store_double(d, dk, ds, cx__load_f(s, ss, swap));
        } else if (cx__is_signed(sk)) {
            int64_t v = cx__load_i(s, ss, swap);
            if (dk == CX_K_FLOAT)
                cx__store_double(d, dk, ds, (double)v);
            else
                cx__store_u(d, ds, dk == CX_K_BOOL ? v != 0 : (uint64_t)v);
        } else {
            uint64_t v = cx__load_u(s, ss, swap);
            if (dk == CX_K_FLOAT)
                cx__store_double(d, dk, ds, (double)v);
            else
                cx__store_u(d, ds, dk == CX_K_BOOL ? v != 0 : v);
        }
    }
}
