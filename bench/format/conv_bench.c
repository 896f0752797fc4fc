/* Numeric array conversion against memcpy: for every (source type, byte order) -> target
 * type pair, the time the conversion plan of a sender's {uint32 n; S v[n]} to a receiver's
 * {uint32 n; D v[n]} takes to convert v (the plan's element op, as cx_decode runs it),
 * against a memcpy of the target bytes (n * sizeof D), at target arrays of 1 KB, 100 KB
 * and 1 MB. Each event is decoded once first and checked against the reference.
 *
 * Each repetition times a batch of conversions (~1 ms), then a batch of memcpys, then a batch
 * of the per-element reference conversion (what every conversion cost before the kernel
 * table), and takes the ratios within that repetition; the report gives the median ratio
 * and its spread (min-max) over the repetitions, and the medians in microseconds. A
 * narrowing pair (int64 -> int8) reads up to 8x the bytes it writes, so it is also timed
 * against a memcpy of its source bytes (ratio_to_source_memcpy).
 *
 *   conv_bench [repetitions] [json path]
 */
#include "common/cx_error.h"
#include "format/cx_codec.h"
#include "format/cx_conv.h"
#include "format/cx_format_registry.h"
#include "format/cx_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ty { const char *name; uint8_t kind; uint32_t size; };
static const struct ty types[] = {
    {"int8", CX_K_INT, 1},   {"int16", CX_K_INT, 2},   {"int32", CX_K_INT, 4},
    {"int64", CX_K_INT, 8},  {"uint8", CX_K_UINT, 1},  {"uint16", CX_K_UINT, 2},
    {"uint32", CX_K_UINT, 4}, {"uint64", CX_K_UINT, 8}, {"float", CX_K_FLOAT, 4},
    {"double", CX_K_FLOAT, 8},
};
#define NT (sizeof types / sizeof types[0])
static const size_t sizes[] = {1024, 100 * 1024, 1024 * 1024};
static const char *size_names[] = {"1 KB", "100 KB", "1 MB"};
#define NS (sizeof sizes / sizeof sizes[0])
#define MAXREP 63

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    double c[MAXREP];
    memcpy(c, v, n * sizeof *v);
    qsort(c, (size_t)n, sizeof c[0], cmpd);
    return c[n / 2];
}

static const struct cx_format *format_of(const struct ty *t, bool be)
{
    char js[256];
    snprintf(js, sizeof js, "{\"name\":\"arr\",\"fields\":[{\"name\":\"n\",\"type\":\"uint32\"},"
             "{\"name\":\"v\",\"type\":\"%s[n]\"}]}", t->name);
    struct cx_arch a = {be, 8, 8, 8};
    struct cx_format *f;
    const struct cx_format *r = NULL;
    if (cx_format_from_json(js, strlen(js), be ? &a : NULL, &f) < 0 ||
        cx_format_registry_insert(f, &r) < 0) {
        fprintf(stderr, "conv_bench: format %s: %s\n", t->name, cx_errmsg());
        exit(1);
    }
    return r;
}

static void put(uint8_t *p, uint64_t v, int n, bool be)
{
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * (be ? n - 1 - i : i)));
}

/* The event: side area (one slot), fixed part {n, v} of 16 bytes, the array at 40. */
static size_t build_event(uint8_t *buf, const struct ty *s, bool be, uint32_t n)
{
    put(buf, 24, 4, false);
    put(buf + 4, 1, 4, false);
    put(buf + 8, 40, 8, false);
    put(buf + 16, (uint64_t)n * s->size, 8, false);
    memset(buf + 24, 0, 16);
    put(buf + 24, n, 4, be);
    uint8_t *a = buf + 40;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t u;
        if (s->kind == CX_K_FLOAT) {
            double d = (double)(i % 1000) * 0.37 - 150.0;
            if (s->size == 4) {
                float f = (float)d;
                uint32_t x;
                memcpy(&x, &f, 4);
                u = x;
            } else {
                memcpy(&u, &d, 8);
            }
        } else {
            u = (uint64_t)((int64_t)(i % 251) - 100);
        }
        put(a + (size_t)i * s->size, u, (int)s->size, be);
    }
    return 40 + (size_t)n * s->size;
}

static volatile uint64_t sink;
static const struct cx_format *L, *W;
static uint8_t *wire, *outb, *msrc;
static size_t wire_len, out_cap, mbytes;
static const struct ty *S, *D;
static bool SW;
static uint32_t N;

static const struct cx__plan *ELEM;

static void run_conv(void)
{
    cx__plan_run_elems(ELEM, wire + 40, outb + 16, N, S->size, D->size);
    sink += outb[16];
}

/* Decodes the event once (the whole path) and compares its array with the reference's. */
static void check_decode(void)
{
    void *ev;
    const struct cx__plan *p;
    if (cx_decode(L, cx_format_token(W), wire, wire_len, outb, out_cap, &ev) < 0 ||
        cx__plan_get(W, L, &p) < 0) {
        fprintf(stderr, "conv_bench: decode: %s\n", cx_errmsg());
        exit(1);
    }
    ELEM = p->vops[0].elem;
    uint8_t *arr;
    memcpy(&arr, (uint8_t *)ev + 8, sizeof arr);
    cx__conv_ref(S->kind, S->size, SW, D->kind, D->size, wire + 40, msrc, N);
    if (*(uint32_t *)ev != N || memcmp(arr, msrc, (size_t)N * D->size)) {
        fprintf(stderr, "conv_bench: %s -> %s: decoded array differs from the reference\n",
                S->name, D->name);
        exit(1);
    }
    memset(msrc, 1, (size_t)N * D->size);
}
static void run_memcpy(void)
{
    memcpy(outb + 16, msrc, mbytes);
    sink += outb[16];
}
static size_t sbytes;
static void run_memcpy_src(void) /* narrowing pairs read more than they write */
{
    memcpy(outb + 16, msrc, sbytes);
    sink += outb[16];
}
static void run_ref(void)
{
    cx__conv_ref(S->kind, S->size, SW, D->kind, D->size, wire + 40, outb + 16, N);
    sink += outb[16];
}

static long iters_for(void (*fn)(void), double batch)
{
    fn();
    double t0 = now();
    fn();
    double one = now() - t0;
    long it = one > 0 ? (long)(batch / one) : 1000;
    return it < 1 ? 1 : it > 1000000 ? 1000000 : it;
}

static double time_batch(void (*fn)(void), long iters)
{
    double t0 = now();
    for (long i = 0; i < iters; i++)
        fn();
    return (now() - t0) / iters * 1e6;
}

struct cell { double conv, mem, ref, ratio, rmin, rmax, rref, rsrc; };

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 7;
    const char *json_path = argc > 2 ? argv[2] : "format-conv.json";
    if (reps < 1 || reps > MAXREP)
        reps = 7;
    double batch = reps <= 3 ? 0.4e-3 : 1e-3; /* quick runs (make bench-quick) take less */
    size_t maxb = sizes[NS - 1] * 8 + 64;
    wire = aligned_alloc(64, maxb + 64);
    outb = aligned_alloc(64, maxb + 64);
    msrc = aligned_alloc(64, maxb);
    out_cap = maxb;
    memset(msrc, 1, maxb);
    memset(outb, 0, maxb);
    const struct cx_format *loc[NT], *wle[NT], *wbe[NT];
    for (size_t t = 0; t < NT; t++) {
        loc[t] = format_of(&types[t], false);
        wle[t] = loc[t];
        wbe[t] = format_of(&types[t], true);
    }
    FILE *j = fopen(json_path, "w");
    if (!j) {
        perror(json_path);
        return 1;
    }
    enum cx__isa isa = cx__conv_isa();
    fprintf(j, "{\"unit\":\"us_per_array\",\"isa\":\"%s\",\"repetitions\":%d,\"sizes\":[",
            cx__conv_isa_name(isa), reps);
    for (size_t s = 0; s < NS; s++)
        fprintf(j, "%s%zu", s ? "," : "", sizes[s]);
    fprintf(j, "],\"pairs\":[");
    printf("Array conversion ({uint32 n; S v[n]} to {uint32 n; D v[n]}: the plan's element "
           "op) against memcpy of the target bytes; kernels: %s; median ratio (min-max) of %d runs, then "
           "the ratio to a memcpy of the source bytes (narrowing pairs read more than they "
           "write) and the per-element reference's ratio\n\n| source | target |",
           cx__conv_isa_name(isa), reps);
    for (size_t s = 0; s < NS; s++)
        printf(" %s conv/memcpy | vs source memcpy | ref/memcpy |", size_names[s]);
    printf("\n|---|---|");
    for (size_t s = 0; s < NS; s++)
        printf("---:|---:|---:|");
    printf("\n");
    int npairs = 0, over = 0;
    double worst = 0;
    for (size_t a = 0; a < NT; a++)
        for (int be = 0; be < 2; be++) {
            if (be && types[a].size == 1)
                continue; /* one byte has no byte order */
            for (size_t b = 0; b < NT; b++) {
                S = &types[a];
                D = &types[b];
                SW = be != CX__HOST_BE;
                bool same = S->size == D->size &&
                            ((S->kind == CX_K_FLOAT) == (D->kind == CX_K_FLOAT));
                if (same && !SW)
                    continue; /* read in place: no conversion */
                L = loc[b];
                W = be ? wbe[a] : wle[a];
                struct cell c[NS];
                for (size_t s = 0; s < NS; s++) {
                    N = (uint32_t)(sizes[s] / D->size);
                    mbytes = sizes[s];
                    sbytes = (size_t)N * S->size;
                    wire_len = build_event(wire, S, be, N);
                    check_decode();
                    long ic = iters_for(run_conv, batch), im = iters_for(run_memcpy, batch),
                         ir = iters_for(run_ref, batch);
                    bool narrow = S->size > D->size;
                    long is = narrow ? iters_for(run_memcpy_src, batch) : 0;
                    double tc[MAXREP], tm[MAXREP], tr[MAXREP], ra[MAXREP], rr[MAXREP],
                        rs[MAXREP];
                    for (int r = 0; r < reps; r++) {
                        tc[r] = time_batch(run_conv, ic);
                        tm[r] = time_batch(run_memcpy, im);
                        tr[r] = time_batch(run_ref, ir);
                        ra[r] = tc[r] / tm[r];
                        rr[r] = tr[r] / tm[r];
                        rs[r] = narrow ? tc[r] / time_batch(run_memcpy_src, is) : ra[r];
                    }
                    c[s] = (struct cell){median(tc, reps), median(tm, reps), median(tr, reps),
                                         median(ra, reps), ra[0], ra[0], median(rr, reps),
                                         median(rs, reps)};
                    for (int r = 1; r < reps; r++) {
                        c[s].rmin = ra[r] < c[s].rmin ? ra[r] : c[s].rmin;
                        c[s].rmax = ra[r] > c[s].rmax ? ra[r] : c[s].rmax;
                    }
                    if (c[s].ratio > 2.0)
                        over++;
                    worst = c[s].ratio > worst ? c[s].ratio : worst;
                }
                printf("| %s%s | %s |", S->name, be ? " BE" : "", D->name);
                for (size_t s = 0; s < NS; s++)
                    printf(" %.2f (%.2f-%.2f) | %.2f | %.1f |", c[s].ratio, c[s].rmin,
                           c[s].rmax, c[s].rsrc, c[s].rref);
                printf("\n");
                fprintf(j, "%s{\"src\":\"%s\",\"src_big_endian\":%s,\"dst\":\"%s\"", npairs ? "," : "",
                        S->name, be ? "true" : "false", D->name);
                const char *keys[] = {"conv_us", "memcpy_us", "ref_us", "ratio", "ratio_min",
                                      "ratio_max", "ref_ratio", "ratio_to_source_memcpy"};
                for (int k = 0; k < 8; k++) {
                    fprintf(j, ",\"%s\":[", keys[k]);
                    for (size_t s = 0; s < NS; s++) {
                        double f[] = {c[s].conv, c[s].mem, c[s].ref, c[s].ratio, c[s].rmin,
                                      c[s].rmax, c[s].rref, c[s].rsrc};
                        fprintf(j, "%s%.4f", s ? "," : "", f[k]);
                    }
                    fprintf(j, "]");
                }
                fprintf(j, "}");
                npairs++;
            }
        }
    fprintf(j, "],\"cells_over_2x\":%d,\"worst_ratio\":%.3f}\n", over, worst);
    fclose(j);
    printf("\n%d pairs x %zu sizes; cells over 2x memcpy: %d; worst ratio %.2f\n", npairs, NS,
           over, worst);
    return sink == 0;
}
