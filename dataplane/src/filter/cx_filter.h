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
 * THE LANGUAGE is defined in one place, docs/filter-language.md: conditions over field
 * paths (a.b, arr[i], len()), C's operators with exact int/uint comparison, string
 * equality; programs of several statements ("cond; field = expr; ...") whose computed
 * fields go into an output format; math (sqrt abs min max), conversions (int float),
 * reductions over an array's elements (sum mean max min), seq(), share() (routing among
 * the sinks with one program: cx_filter_run_member), and stateful calls (count
 * every changed prev total wsum wmean wmax wmin) whose memory the caller keeps between
 * events (cx_filter_state_size). A division by zero, an index past the end and the other
 * documented cases drop the event. Every program is bounded per event: its worst case
 * (instructions + elements reduced) must fit CX_FILTER_BUDGET, or it is refused.
 *
 * LIMITS (past one, compile fails with -E2BIG): at most CX_FILTER_MAX_EXPR bytes of text,
 * CX_FILTER_MAX_DEPTH levels of nesting, CX_FILTER_MAX_CODE instructions,
 * CX_FILTER_MAX_STACK stack values, and the CX_FILTER_MAX_* counts below.
 *
 * Events from any architecture the format layer describes (big-endian, 32-bit) are read in
 * their own byte order and sizes, exactly as cx_reflect does; nothing is converted.
 */
#ifndef CX_FILTER_H
#define CX_FILTER_H

#include "format/cx_format.h"

#include <stdbool.h>
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

/* Compiles a program (docs/filter-language.md) for input events of format `in`
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

/* The same for a program that calls share(key): it runs for member `member` (0-based) of
 * a stage of `members` sinks with this program, and share(key) holds only for the member
 * key mod members (so each event goes to one member). cx_filter_run is member 0 of 1. */
int cx_filter_run_member(const struct cx_filter *f, void *state, const void *event, size_t len,
                         uint64_t seq, uint64_t member, uint64_t members,
                         union cx_filter_value *res);

/* Whether the program calls share(). */
bool cx_filter_shares(const struct cx_filter *f);

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
