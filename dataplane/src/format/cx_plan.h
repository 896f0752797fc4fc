/* Conversion plans (internal to the format module): how to turn the fixed part of a wire
 * struct into a local struct, compiled to a flat op list, plus one op per local pointer
 * slot. Built by cx__plan_get at the first sight of a (wire, local) pair and cached for the
 * process's lifetime (shared cache, and a small per-thread cache in front of it). */
#ifndef CX_PLAN_H
#define CX_PLAN_H

#include "format/cx_conv.h"
#include "format/cx_format_int.h"

enum cx__opcode {
    CX__OP_COPY,    /* memcpy len bytes src -> dst (adjacent copies merged) */
    CX__OP_SWAP,    /* count scalars of ssize bytes, byte-reversed (kern) */
    CX__OP_CONV,    /* count scalars: (skind, ssize, swap) -> (dkind, dsize) by kern, or
                     * by cx__conv_ref when the pair has no kernel (bool targets); an array
                     * field, or a run of like fields laid out back to back, is one op */
    CX__OP_DEFAULT, /* store the declared default `def` as (dkind, dsize) */
    CX__OP_NESTED,  /* count structs: sub plan with strides */
};

struct cx__plan;

struct cx__op {
    uint8_t code, skind, ssize, dkind, dsize, swap;
    uint32_t src, dst, len, count, sstride, dstride;
    const struct cx__plan *sub;
    cx__conv_fn kern;       /* SWAP / CONV: the element kernel chosen at compile time */
    double def;
};

/* One local string or variable array. */
struct cx__vop {
    int32_t wslot;          /* wire slot, -1 when the sender lacks it */
    uint32_t dst;           /* offset of the local pointer */
    uint8_t is_var;
    uint32_t lesize;        /* local element size */
    uint32_t llen_off;      /* local length field */
    uint8_t llen_kind, llen_size;
    const struct cx__plan *elem; /* element conversion (var arrays) */
    bool direct;            /* elements need no conversion: may point into the buffer */
};

struct cx__plan {
    const struct cx_format *wire, *local;
    uint32_t wsi, lsi;      /* struct indices in wire and local */
    uint32_t wsize, lsize;
    uint32_t nops, nvops;
    struct cx__op *ops;
    struct cx__vop *vops;
    bool clear;             /* some local bytes are not written by ops: zero first */
    bool identity;          /* ops are one COPY of lsize bytes at 0 -> 0 and vops direct */
    uint32_t head_len;      /* lsize less the pointer fields that end the top struct */
    bool scalar;            /* element plan of one scalar op (count scaled at run time) */
    uint32_t nsubs;
    struct cx__plan **subs; /* owned sub plans */
};

/* The cached plan for (wire, local), building it on first use. Returns 0 and *plan, or a
 * negative errno with a message (-EPROTO for kinds that cannot convert). Looks in the
 * calling thread's small cache first (no lock), then in the shared cache (read lock).
 * Plans are never freed: each thread's cache holds bare pointers to them, so code that
 * ever frees plans must first invalidate every thread's cache (a generation counter the
 * lookups compare). */
int cx__plan_get(const struct cx_format *wire, const struct cx_format *local,
                 const struct cx__plan **plan);

/* Runs the fixed ops of p from src (wire struct) to dst (local struct). */
void cx__plan_run_fixed(const struct cx__plan *p, const uint8_t *src, uint8_t *dst);

/* Converts n elements with an element plan. */
void cx__plan_run_elems(const struct cx__plan *p, const uint8_t *src, uint8_t *dst,
                        uint64_t n, uint32_t sstride, uint32_t dstride);

#endif
