/* A listing of a compiled filter, for debugging and for tests that check what the
 * compiler folded (cx_filter_describe). */
#include "filter/cx_filter_int.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

const char *cx__op_name(uint8_t op)
{
    static const char *const names[] = {
        [OP_END] = "end", [OP_PUSH] = "push", [OP_PUSHS] = "pushs", [OP_LOADK] = "loadk",
        [OP_LOAD] = "load", [OP_IDX] = "idx", [OP_VIDX] = "vidx", [OP_STRK] = "strk",
        [OP_STR] = "str", [OP_SSLOT] = "sslot", [OP_LENSLOT] = "lenslot",
        [OP_LENSTR] = "lenstr", [OP_I2F] = "i2f", [OP_U2F] = "u2f", [OP_NEG] = "neg",
        [OP_NOT] = "not", [OP_TRUTH] = "truth", [OP_ADD] = "add", [OP_SUB] = "sub",
        [OP_MUL] = "mul", [OP_DIV] = "div", [OP_MOD] = "mod", [OP_LT] = "lt", [OP_LE] = "le",
        [OP_GT] = "gt", [OP_GE] = "ge", [OP_EQ] = "eq", [OP_NE] = "ne", [OP_SEQ] = "seq",
        [OP_SNE] = "sne", [OP_JZ] = "jz", [OP_JNZ] = "jnz", [OP_POP] = "pop",
        [OP_FN] = "fn", [OP_MIN] = "min", [OP_MAX] = "max", [OP_SEQNO] = "seqno",
        [OP_RED] = "reduce", [OP_REDA] = "reducea", [OP_STATE] = "state", [OP_WHEN] = "when",
        [OP_OUT] = "out", [OP_SHARE] = "share",
    };
    return op < sizeof names / sizeof names[0] && names[op] ? names[op] : "?";
}

struct out { char *p; size_t cap, len; };

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int n = vsnprintf(room ? o->p + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

static const char *mode_name(uint8_t op, uint8_t m)
{
    if (op >= OP_LT && op <= OP_NE) {
        static const char *const cm[] = {"int", "uint", "float", "int:uint", "uint:int"};
        return m < 5 ? cm[m] : "?";
    }
    static const char *const ty[] = {"int", "uint", "float", "string"};
    return m < 4 ? ty[m] : "?";
}

long cx_filter_describe(const struct cx_filter *f, char *out, size_t cap)
{
    struct out o = {out, cap, 0};
    if (cap)
        out[0] = '\0';
    if (!f)
        return 0;
    put(&o, "filter \"%s\" on '%s': %u instructions, stack %u%s\n", f->expr,
        f->fmt->structs[0].name, f->ncode, f->max_stack, f->swap ? ", byte-swapped" : "");
    if (f->program)
        put(&o, "program -> '%s': %u outputs, %u states, worst case %llu steps\n",
            f->out_fmt ? f->out_fmt->structs[0].name : "-", f->nout, f->nstate,
            (unsigned long long)f->cost);
    for (uint32_t pc = 0; pc < f->ncode; pc++) {
        const struct cx__insn *in = &f->code[pc];
        put(&o, "%4u %-7s", pc, cx__op_name(in->op));
        switch (in->op) {
        case OP_PUSH:
            if (in->mode == TY_FLT)
                put(&o, " %.17g", in->k.d);
            else if (in->mode == TY_UINT)
                put(&o, " %" PRIu64 "u", in->k.u);
            else
                put(&o, " %" PRId64, in->k.i);
            break;
        case OP_PUSHS: put(&o, " \"%.*s\"", (int)in->b, f->pool + in->a); break;
        case OP_LOADK: case OP_LOAD:
            put(&o, " kind %u size %u +%" PRIu64, in->kind, in->size, in->b);
            break;
        case OP_IDX: put(&o, " <%" PRIu64 " *%" PRIu64, in->b, in->k.u); break;
        case OP_VIDX: put(&o, " slot %u *%" PRIu64, in->a, in->k.u); break;
        case OP_STRK: case OP_STR: put(&o, " char[%" PRIu64 "] +%" PRIu64, in->b, in->k.u); break;
        case OP_SSLOT: case OP_LENSLOT: case OP_LENSTR:
            put(&o, " slot %u (%s)", in->a, f->fmt->slots[in->a].path);
            break;
        case OP_JZ: case OP_JNZ: put(&o, " -> %u", in->a); break;
        case OP_FN: {
            static const char *const fn[] = {"sqrt", "abs", "int", "float"};
            put(&o, " %s", in->mode < 4 ? fn[in->mode] : "?");
            break;
        }
        case OP_RED: case OP_REDA: {
            static const char *const red[] = {"sum", "mean", "max", "min"};
            put(&o, " %s kind %u size %u ", in->mode < 4 ? red[in->mode] : "?", in->kind,
                in->size);
            if (in->k.u & 1)
                put(&o, "slot %u (%s)", in->a, f->fmt->slots[in->a].path);
            else
                put(&o, "[%u] +%" PRIu64, in->a, in->b);
            break;
        }
        case OP_STATE: {
            static const char *const sf[] = {"count", "every", "changed", "prev", "total",
                                             "wsum", "wmean", "wmax", "wmin"};
            put(&o, " %s #%u", in->mode < 9 ? sf[in->mode] : "?", in->a);
            if (in->k.i)
                put(&o, " n %" PRId64, in->k.i);
            break;
        }
        case OP_OUT: put(&o, " #%u +%u", in->a, f->out[in->a].off); break;
        case OP_MIN: case OP_MAX: case OP_WHEN:
            put(&o, " %s", mode_name(OP_ADD, in->mode));
            break;
        case OP_NEG: case OP_NOT: case OP_TRUTH: case OP_ADD: case OP_SUB: case OP_MUL:
        case OP_DIV: case OP_MOD: case OP_LT: case OP_LE: case OP_GT: case OP_GE: case OP_EQ:
        case OP_NE:
            put(&o, " %s", mode_name(in->op, in->mode));
            break;
        default: break;
        }
        put(&o, "\n");
    }
    return (long)o.len;
}
