/* Derived-channel filters (seed echo-event-delivery.txt, section 2: derived event channels
 * with source-side filtering). A sink installs a filter expression; every source compiles
 * it once per event format and runs it on each event's wire form before sending, so an
 * event the sink does not want never crosses the network.
 *
 *     struct cx_filter *flt;
 *     if (cx_filter_compile("pos.x > 0.5 && len(vals) >= 2 && label != \"idle\"", fmt, &flt) < 0)
 *         fprintf(stderr, "%s\n", cx_errmsg());           // "col 7: unknown field 'x'"
 *     int keep = cx_filter_eval(flt, wire, wire_len);      // 1 pass, 0 drop, <0 bad event
 *     cx_filter_free(flt);
 *
 * THE LANGUAGE
 *   literals     42  0x2a  -7 (unary minus)  1.5  2e-3  .5  'c' (the byte value)
 *                true false (1 and 0)  "text" with escapes \" \\ \n \t \r \0 \xHH
 *   fields       a dotted path into the format: id, pos.x, pts[2].y, vals[i + 1]; an
 *                index is any integer expression; fixed multi-dimensional arrays are
 *                flattened (m[5] of a double[2][3]); no spaces inside a field name
 *   len(path)    element count of a fixed or variable array (its declared count for a fixed
 *                one, this event's count for a variable one); for a string field, its
 *                length up to the NUL (a NULL string has length 0)
 *   operators    by precedence, loosest first (all binary ones left-associative):
 *                ||   &&   == !=   < <= > >=   + -   * / %   unary - !   () [] .
 *
 * TYPES AND PROMOTION. Every value is an int (signed 64-bit), a uint (unsigned 64-bit), a
 * float (double) or a string.
 *   - int8..int64, enum, char (its byte, 0..255), bool (0 or 1, whatever its width) and
 *     uint8..uint32 fields are int; a 64-bit unsigned field is uint; float and double
 *     fields are float; string fields, and char arrays used without an index (up to their
 *     first NUL), are strings. An integer literal is int up to INT64_MAX, else uint.
 *   - Arithmetic: if either side is a float, both become double. Otherwise if either is a
 *     uint the operation is on uint, else on int; integer results wrap modulo 2^64 (no
 *     trap, no undefined behaviour: INT64_MIN / -1 is INT64_MIN). / truncates toward zero
 *     as in C; % is C's remainder (fmod for floats). Unary minus of a uint gives the int
 *     with the same bits, so -9223372036854775808 is INT64_MIN.
 *   - Comparisons: if either side is a float, both become double; otherwise an int and a
 *     uint compare by their mathematical values (-1 < 18446744073709551615 holds, unlike
 *     C). Strings compare with == and != only (byte equality), with string literals or
 *     other string fields; a NULL string equals "".
 *   - && || ! take any number (non-zero is true, as in C), give int 0 or 1, and && and ||
 *     short-circuit (so `len(vals) > 0 && vals[0] > 3` never reads past the array).
 *   - The filter passes the event when its value is non-zero; it must be a number.
 *   - Division or remainder by zero (integer or float) and an index past the end of an
 *     array (or negative) make the whole filter return 0 for that event: the event is
 *     dropped, nothing crashes, and no error is reported.
 *
 * LIMITS (a longer or deeper expression is rejected at compile time, -E2BIG): at most
 * CX_FILTER_MAX_EXPR bytes of text, CX_FILTER_MAX_DEPTH levels of nesting (parentheses,
 * unary operators, indices, len()), CX_FILTER_MAX_CODE instructions and
 * CX_FILTER_MAX_STACK values on the evaluation stack.
 *
 * Events from any architecture the format layer describes (big-endian, 32-bit) are read in
 * their own byte order and sizes, exactly as cx_reflect does; nothing is converted.
 */
#ifndef CX_FILTER_H
#define CX_FILTER_H

#include "format/cx_format.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CX_FILTER_MAX_EXPR 4096
#define CX_FILTER_MAX_DEPTH 64
#define CX_FILTER_MAX_CODE 1024
#define CX_FILTER_MAX_STACK 64
#define CX_FILTER_MAX_STMT 64    /* statements of a program */
#define CX_FILTER_MAX_OUT 64     /* computed output fields */
#define CX_FILTER_MAX_STATE 64   /* stateful calls */
#define CX_FILTER_BUDGET 65536   /* worst-case steps per event: instructions + elements reduced */
#define CX_FILTER_VAR_ELEMS 4096 /* a variable array reduced: elements counted in the budget */

/* A computed output value (cx_filter_run), typed by its output field. */
union cx_filter_value {
    int64_t i;
    uint64_t u;
    double d;
};

struct cx_filter;

/* Compiles `expr` for events of format `fmt` (any architecture): field paths are resolved
 * to offsets and types once, here. Returns 0 and a new filter in *out, or a negative
 * errno with cx_errmsg() giving the 1-based column at fault and what is wrong:
 *   -EINVAL  a syntax, name or type error: "col 7: unknown field 'x' in format 'particle'",
 *            "col 3: cannot compare string with number", "col 9: expected ')'", ...
 *   -E2BIG   past a limit above
 *   -ENOMEM  out of memory
 * The filter keeps a pointer to fmt, which must outlive it. It is immutable: several
 * threads may evaluate one filter at the same time. */
int cx_filter_compile(const char *expr, const struct cx_format *fmt, struct cx_filter **out);

/* Evaluates the filter on one event in fmt's wire form (cx_encode / cx_enc_gather; see
 * format/cx_codec.h). Every bound is checked first with the format layer's own event
 * checks, so any byte string is safe. Allocates nothing.
 * Returns 1 (pass), 0 (drop), or -EBADMSG with cx_errmsg() for an event that is malformed
 * or truncated for this format, -EINVAL for a NULL filter or event. */
int cx_filter_eval(const struct cx_filter *f, const void *event, size_t len);

/* Compiles a transform program (THE PROGRAM above) for input events of format `in`
 * producing events of the native format `out` (NULL: a program with conditions and state
 * but no computed fields). Errors as cx_filter_compile, plus -E2BIG for a program whose
 * worst case costs more than CX_FILTER_BUDGET steps per event ("col 6: ... over the
 * budget"). `in` and `out` must outlive the filter. */
int cx_filter_compile_xform(const char *prog, const struct cx_format *in,
                            const struct cx_format *out, struct cx_filter **f);

/* Bytes of state a program keeps between events (0 when it has no stateful call), and
 * their initial value: the caller owns the state, one per stream of events. */
size_t cx_filter_state_size(const struct cx_filter *f);
void cx_filter_state_init(const struct cx_filter *f, void *state);

/* Number of computed output fields. */
unsigned cx_filter_outputs(const struct cx_filter *f);

/* Runs a program on one event (as cx_filter_eval) with its state (updated in place; may
 * be NULL only for a stateless program), the source's event number `seq` (for seq()),
 * and res[cx_filter_outputs(f)] receiving the computed fields (may be NULL when there are
 * none). Returns 1 (pass: res is complete), 0 (drop), or -EBADMSG / -EINVAL. */
int cx_filter_run(const struct cx_filter *f, void *state, const void *event, size_t len,
                  uint64_t seq, union cx_filter_value *res);

/* Writes res (from a run that returned 1) into `native`, an event of the output format in
 * its native struct (the other fields untouched). Integers wrap to the field's width. */
void cx_filter_store(const struct cx_filter *f, const union cx_filter_value *res, void *native);

/* Frees a filter. NULL is allowed. */
void cx_filter_free(struct cx_filter *f);

/* The format the filter was compiled for. */
const struct cx_format *cx_filter_format(const struct cx_filter *f);

/* Writes a listing of the compiled program (one instruction per line), for debugging.
 * Writes at most cap bytes including the NUL and returns the length needed (snprintf). */
long cx_filter_describe(const struct cx_filter *f, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
