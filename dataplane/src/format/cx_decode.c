/* Decoding (cx_codec.h): check the event against its wire format, then deliver it in place
 * or run the cached conversion plan. */
#include "format/cx_codec.h"

#include "common/cx_error.h"
#include "format/cx_format_registry.h"
#include "format/cx_plan.h"

#include <inttypes.h>

int cx__event_check(const struct cx_format *f, const uint8_t *buf, size_t len,
                    const uint8_t **fixed)
{
    if (!buf || len < CX__SIDE_HDR)
        return cx_err_set(EPROTO, "event truncated: %zu bytes", len);
    uint64_t side_len = cx__load_u(buf, 4, CX__HOST_BE);
    uint64_t nslots = cx__load_u(buf + 4, 4, CX__HOST_BE);
    if (nslots != f->nslots || side_len != CX__SIDE_HDR + CX__SIDE_SLOT * nslots)
        return cx_err_set(EPROTO, "event side area (%" PRIu64 " bytes, %" PRIu64
                          " slots) does not match format '%s' (%u slots)",
                          side_len, nslots, f->structs[0].name, f->nslots);
    uint64_t fixed_end = side_len + f->structs[0].size;
    if (fixed_end > len)
        return cx_err_set(EPROTO, "event truncated: %zu bytes, format '%s' needs %" PRIu64,
                          len, f->structs[0].name, fixed_end);
    uint64_t data_start = (fixed_end + 7) & ~(uint64_t)7;
    *fixed = buf + side_len;
    for (uint32_t i = 0; i < f->nslots; i++) {
        const struct cx__slot *s = &f->slots[i];
        uint64_t off, n;
        cx__slot_get(buf, i, &off, &n);
        if (n == 0) {
            if (off != 0)
                return cx_err_set(EPROTO, "'%s': empty part at offset %" PRIu64, s->path, off);
        } else {
            if (off & 7 || off < data_start)
                return cx_err_set(EPROTO, "'%s': bad part offset %" PRIu64, s->path, off);
            if (off > len || n > len - off)
                return cx_err_set(EPROTO,
                                  "'%s': part of %" PRIu64 " bytes at %" PRIu64
                                  " past the event's %zu bytes",
                                  s->path, n, off, len);
        }
        if (!s->is_var) {
            if (n && buf[off + n - 1] != '\0')
                return cx_err_set(EPROTO, "'%s': string without its NUL", s->path);
            continue;
        }
        int64_t cnt = cx__slot_count(f, s, *fixed);
        if (cnt < 0)
            return cx_err_set(EPROTO, "'%s': negative length %lld", s->path, (long long)cnt);
        if ((uint64_t)cnt > n / s->esize || (uint64_t)cnt * s->esize != n)
            return cx_err_set(EPROTO,
                              "'%s': length field says %lld elements of %u bytes, part has %"
                              PRIu64 " bytes",
                              s->path, (long long)cnt, s->esize, n);
    }
    return 0;
}

static bool fits(uint64_t n, uint8_t kind, uint8_t size)
{
    if (cx__is_signed(kind))
        return n <= (UINT64_MAX >> (65 - 8 * size));
    return size == 8 || n < ((uint64_t)1 << (8 * size));
}

struct job {
    const struct cx_format *wire;
    const struct cx__plan *plan;
    const uint8_t *fixed;
    bool in_place;
    size_t need;
};

static int prepare(const struct cx_format *local, uint64_t token, const void *buf, size_t len,
                   struct job *j)
{
    int rc;
    if (!local->native)
        return cx_err_set(EINVAL, "local format '%s' does not describe this machine",
                          local->structs[0].name);
    j->wire = token == local->token ? local : cx_format_registry_lookup(token);
    if (!j->wire)
        return -cx_errcode();
    if ((rc = cx__plan_get(j->wire, local, &j->plan)) < 0)
        return rc;
    if ((rc = cx__event_check(j->wire, buf, len, &j->fixed)) < 0)
        return cx_err_wrap(rc, "event of format '%s'", j->wire->structs[0].name);
    bool aligned = ((uintptr_t)buf & 7) == 0;
    j->in_place = j->plan->identity && aligned;
    j->need = j->in_place ? 0 : cx__align_up(j->plan->lsize, 8);
    for (uint32_t i = 0; i < j->plan->nvops; i++) {
        const struct cx__vop *v = &j->plan->vops[i];
        if (!v->is_var || v->wslot < 0)
            continue;
        uint64_t n = (uint64_t)cx__slot_count(j->wire, &j->wire->slots[v->wslot], j->fixed);
        if (!fits(n, v->llen_kind, v->llen_size))
            return cx_err_set(EPROTO, "'%s': %" PRIu64 " elements do not fit the receiver's "
                              "%u-byte length field", local->slots[i].path, n, v->llen_size);
        if (!(v->direct && aligned))
            j->need += ((size_t)n * v->lesize + 7) & ~(size_t)7;
    }
    return 0;
}

int cx_decode_need(const struct cx_format *local, uint64_t wire_token, const void *buf,
                   size_t len, size_t *need)
{
    struct job j;
    int rc = prepare(local, wire_token, buf, len, &j);
    if (rc < 0)
        return rc;
    *need = j.need;
    return 0;
}

/* The event is in the local format itself, 8-aligned: the common case of a channel whose
 * ends share a format. The plan is the identity, so the event is used where it lies:
 * checked as always, then its variable parts pointed into the buffer. Their length fields
 * are the ones the counts were read from, already in place: nothing else to write. */
#define CX__COPY_FIXED_MAX 256u
static int decode_same(const struct cx_format *f, const struct cx__plan *plan, void *buf,
                       size_t len, void *out, size_t out_cap, void **event)
{
    const uint8_t *fixed;
    int rc = cx__event_check(f, buf, len, &fixed);
    if (rc < 0)
        return cx_err_wrap(rc, "event of format '%s'", f->structs[0].name);
    uint8_t *dst = (uint8_t *)fixed;
    /* A small fixed part goes to out, the pointers patched there: buf is often a link's
     * receive buffer in shared memory, and a write into it takes the sender's cache line
     * away from it (bench/channel: 100-byte events 0.30 -> 0.27 us one way). The pointers
     * that end the struct are not copied, only set: their bytes in buf (the sender's
     * addresses) may lie on a cache line nothing else here needs. */
    if (out && plan->lsize <= CX__COPY_FIXED_MAX && out_cap >= plan->lsize &&
        !((uintptr_t)out & 7)) {
        memcpy(out, fixed, plan->head_len);
        dst = out;
    }
    for (uint32_t i = 0; i < plan->nvops; i++) {
        const struct cx__vop *v = &plan->vops[i];
        void *ptr = NULL;
        uint64_t off, plen;
        if (v->wslot >= 0) {
            cx__slot_get(buf, (uint32_t)v->wslot, &off, &plen);
            if (v->is_var ? cx__slot_count(f, &f->slots[v->wslot], fixed) > 0 : plen != 0)
                ptr = (uint8_t *)buf + off;
        }
        memcpy(dst + v->dst, &ptr, sizeof ptr);
    }
    *event = dst;
    return 0;
}

int cx_decode(const struct cx_format *local, uint64_t wire_token, void *buf, size_t len,
              void *out, size_t out_cap, void **event)
{
    if (wire_token == local->token && local->native && ((uintptr_t)buf & 7) == 0) {
        const struct cx__plan *plan = __atomic_load_n(&local->self_plan, __ATOMIC_ACQUIRE);
        if (!plan) {
            if (cx__plan_get(local, local, &plan) == 0) /* the memo is the format's own */
                __atomic_store_n(&((struct cx_format *)local)->self_plan, plan,
                                 __ATOMIC_RELEASE);
            else
                plan = NULL; /* the general path below reports it */
        }
        if (plan && plan->identity)
            return decode_same(local, plan, buf, len, out, out_cap, event);
    }
    struct job j;
    int rc = prepare(local, wire_token, buf, len, &j);
    if (rc < 0)
        return rc;
    uint8_t *dst;
    if (j.in_place) {
        dst = (uint8_t *)j.fixed;
    } else {
        if (out_cap < j.need)
            return cx_err_set(ENOBUFS, "decoding '%s' needs %zu bytes, got %zu",
                              local->structs[0].name, j.need, out_cap);
        if (!out || ((uintptr_t)out & 7))
            return cx_err_set(EINVAL, "decode output must be 8-aligned");
        dst = out;
        cx__plan_run_fixed(j.plan, j.fixed, dst);
    }
    uint8_t *arena = dst + cx__align_up(j.plan->lsize, 8);
    bool aligned = ((uintptr_t)buf & 7) == 0;
    for (uint32_t i = 0; i < j.plan->nvops; i++) {
        const struct cx__vop *v = &j.plan->vops[i];
        void *ptr = NULL;
        uint64_t n = 0, off, plen;
        if (v->wslot >= 0) {
            const struct cx__slot *ws = &j.wire->slots[v->wslot];
            cx__slot_get(buf, (uint32_t)v->wslot, &off, &plen);
            if (!v->is_var) {
                ptr = plen ? (uint8_t *)buf + off : NULL;
            } else if ((n = (uint64_t)cx__slot_count(j.wire, ws, j.fixed)) > 0) {
                if (v->direct && aligned) {
                    ptr = (uint8_t *)buf + off;
                } else {
                    ptr = arena;
                    cx__plan_run_elems(v->elem, (uint8_t *)buf + off, arena, n, ws->esize,
                                       v->lesize);
                    arena += ((size_t)n * v->lesize + 7) & ~(size_t)7;
                }
            }
        }
        memcpy(dst + v->dst, &ptr, sizeof ptr);
        if (v->is_var)
            cx__store_u(dst + v->llen_off, v->llen_size, n);
    }
    *event = dst;
    return 0;
}
