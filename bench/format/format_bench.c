/* Encode and decode cost per event, Conflux against its peers, in the shape of ECho's
 * Table 2 (seed echo-event-delivery.txt, section 3.3) plus the type-extension case of 3.4.
 *
 * The event: struct ev { int64 id; double x; uint32 n; double *vals; char *label; } with n
 * chosen so that the event's data is about 100 B, 1 KB, 10 KB, 100 KB, 1 MB.
 *   conflux-homog   encode: cx_encode (iovec + side area); decode: cx_decode in place
 *   conflux-extra   the sender's format has an extra int64 in front of all fields (ECho's
 *                   worst case): decode runs the relocating plan into an output buffer
 *   protobuf-c      encode: event__pack into a reused buffer; decode: event__unpack + free
 *   msgpack-c       encode: pack into a cleared sbuffer; decode: unpack + copy into struct
 *   xml-expat       encode: snprintf XML text; decode: expat parse + strtod into struct
 *   memcpy          encode: copy fields + array into a buffer; decode: copy back
 * Each cell is the median over R repetitions of a batch timed with CLOCK_MONOTONIC.
 */
#include "event.pb-c.h"
#include "common/cx_error.h"
#include "format/cx_codec.h"
#include "format/cx_format_registry.h"

#include <expat.h>
#include <msgpack.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

struct ev { int64_t id; double x; uint32_t n; double *vals; char *label; };
struct ev2 { int64_t extra; int64_t id; double x; uint32_t n; double *vals; char *label; };

static const struct cx_field ev_f[] = {
    {"id", "int64", 8, offsetof(struct ev, id)}, {"x", "double", 8, offsetof(struct ev, x)},
    {"n", "uint32", 4, offsetof(struct ev, n)}, {"vals", "double[n]", 8, offsetof(struct ev, vals)},
    {"label", "string", sizeof(char *), offsetof(struct ev, label)}, {NULL}};
static const struct cx_field ev2_f[] = {
    {"extra", "int64", 8, offsetof(struct ev2, extra)},
    {"id", "int64", 8, offsetof(struct ev2, id)}, {"x", "double", 8, offsetof(struct ev2, x)},
    {"n", "uint32", 4, offsetof(struct ev2, n)}, {"vals", "double[n]", 8, offsetof(struct ev2, vals)},
    {"label", "string", sizeof(char *), offsetof(struct ev2, label)}, {NULL}};
static const struct cx_struct_decl ev_d[] = {{"ev", ev_f, sizeof(struct ev)}, {NULL}};
static const struct cx_struct_decl ev2_d[] = {{"ev", ev2_f, sizeof(struct ev2)}, {NULL}};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static volatile uint64_t sink;
static const struct cx_format *F1, *F2;
static struct ev E;
static struct ev2 E2;
static uint8_t *wire, *wire2, *outb, *pbuf, *xbuf;
static size_t wire_len, wire2_len, outb_cap, pbuf_cap, xbuf_cap;
static size_t pb_len, mp_len, x_len, mc_len;
static msgpack_sbuffer sbuf;
static struct ev D; /* decode target of the peers */
static double *dvals;

/* --- one encode and one decode per method --------------------------------------------- */

static void enc_cx(void)
{
    struct cx_enc e;
    if (cx_encode(F1, &E, &e) < 0) abort();
    sink += e.length;
}
static void dec_cx(void)
{
    void *ev;
    if (cx_decode(F1, cx_format_token(F1), wire, wire_len, NULL, 0, &ev) < 0) abort();
    sink += ((struct ev *)ev)->n;
}
static void enc_cx2(void)
{
    struct cx_enc e;
    if (cx_encode(F2, &E2, &e) < 0) abort();
    sink += e.length;
}
static void dec_cx2(void)
{
    void *ev;
    if (cx_decode(F1, cx_format_token(F2), wire2, wire2_len, outb, outb_cap, &ev) < 0) abort();
    sink += ((struct ev *)ev)->n;
}

static void enc_pb(void)
{
    Event m = EVENT__INIT;
    m.id = E.id;
    m.x = E.x;
    m.n_vals = E.n;
    m.vals = E.vals;
    m.label = E.label;
    pb_len = event__pack(&m, pbuf);
    sink += pb_len;
}
static void dec_pb(void)
{
    Event *m = event__unpack(NULL, pb_len, pbuf);
    if (!m) abort();
    sink += m->n_vals;
    event__free_unpacked(m, NULL);
}

static void enc_mp(void)
{
    msgpack_sbuffer_clear(&sbuf);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sbuf, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 4);
    msgpack_pack_int64(&pk, E.id);
    msgpack_pack_double(&pk, E.x);
    msgpack_pack_array(&pk, E.n);
    for (uint32_t i = 0; i < E.n; i++)
        msgpack_pack_double(&pk, E.vals[i]);
    size_t l = strlen(E.label);
    msgpack_pack_str(&pk, l);
    msgpack_pack_str_body(&pk, E.label, l);
    mp_len = sbuf.size;
    sink += mp_len;
}
static void dec_mp(void)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    if (msgpack_unpack_next(&u, sbuf.data, sbuf.size, NULL) != MSGPACK_UNPACK_SUCCESS) abort();
    msgpack_object *a = u.data.via.array.ptr;
    D.id = a[0].via.i64;
    D.x = a[1].via.f64;
    D.n = a[2].via.array.size;
    for (uint32_t i = 0; i < D.n; i++)
        dvals[i] = a[2].via.array.ptr[i].via.f64;
    D.vals = dvals;
    sink += D.n;
    msgpack_unpacked_destroy(&u);
}

static void enc_xml(void)
{
    size_t o = (size_t)snprintf((char *)xbuf, xbuf_cap, "<ev><id>%lld</id><x>%.17g</x><vals>",
                                (long long)E.id, E.x);
    for (uint32_t i = 0; i < E.n; i++)
        o += (size_t)snprintf((char *)xbuf + o, xbuf_cap - o, "<v>%.17g</v>", E.vals[i]);
    o += (size_t)snprintf((char *)xbuf + o, xbuf_cap - o, "</vals><label>%s</label></ev>", E.label);
    x_len = o;
    sink += o;
}
struct xst { char text[64]; size_t tl; };
static void xs(void *ud, const XML_Char *name, const XML_Char **at)
{
    (void)name; (void)at;
    ((struct xst *)ud)->tl = 0;
}
static void xe(void *ud, const XML_Char *name)
{
    struct xst *s = ud;
    s->text[s->tl < 63 ? s->tl : 63] = '\0';
    if (!strcmp(name, "v")) dvals[D.n++] = strtod(s->text, NULL);
    else if (!strcmp(name, "id")) D.id = strtoll(s->text, NULL, 10);
    else if (!strcmp(name, "x")) D.x = strtod(s->text, NULL);
    s->tl = 0;
}
static void xc(void *ud, const XML_Char *t, int len)
{
    struct xst *s = ud;
    for (int i = 0; i < len && s->tl < 63; i++)
        s->text[s->tl++] = t[i];
}
static void dec_xml(void)
{
    struct xst st = {.tl = 0};
    XML_Parser p = XML_ParserCreate(NULL);
    XML_SetUserData(p, &st);
    XML_SetElementHandler(p, xs, xe);
    XML_SetCharacterDataHandler(p, xc);
    D.n = 0;
    if (XML_Parse(p, (const char *)xbuf, (int)x_len, 1) != XML_STATUS_OK) abort();
    XML_ParserFree(p);
    sink += D.n;
}

static void enc_mc(void)
{
    memcpy(pbuf, &E, sizeof E);
    memcpy(pbuf + sizeof E, E.vals, E.n * sizeof(double));
    mc_len = sizeof E + E.n * sizeof(double);
    sink += mc_len;
}
static void dec_mc(void)
{
    memcpy(&D, pbuf, sizeof D);
    memcpy(dvals, pbuf + sizeof D, D.n * sizeof(double));
    sink += D.n;
}

/* --- timing --------------------------------------------------------------------------- */

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median over reps of the per-call time (microseconds) of fn, batches of ~2 ms. */
static double measure(void (*fn)(void), int reps)
{
    fn();
    double t0 = now();
    fn();
    double one = now() - t0;
    long iters = one > 0 ? (long)(2e-3 / one) : 100000;
    if (iters < 1) iters = 1;
    if (iters > 1000000) iters = 1000000;
    double v[64];
    for (int r = 0; r < reps; r++) {
        t0 = now();
        for (long i = 0; i < iters; i++)
            fn();
        v[r] = (now() - t0) / iters * 1e6;
    }
    qsort(v, (size_t)reps, sizeof v[0], cmpd);
    return v[reps / 2];
}

static const struct method {
    const char *name;
    void (*enc)(void), (*dec)(void);
} methods[] = {
    {"conflux-homog", enc_cx, dec_cx},   {"conflux-extra", enc_cx2, dec_cx2},
    {"protobuf-c", enc_pb, dec_pb},      {"msgpack-c", enc_mp, dec_mp},
    {"xml-expat", enc_xml, dec_xml},     {"memcpy", enc_mc, dec_mc},
};
#define NM (sizeof methods / sizeof methods[0])
static const size_t sizes[] = {100, 1000, 10000, 100000, 1000000};
static const char *size_names[] = {"100 B", "1 KB", "10 KB", "100 KB", "1 MB"};
#define NS (sizeof sizes / sizeof sizes[0])

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 7;
    const char *json_path = argc > 2 ? argv[2] : "format.json";
    if (reps < 1 || reps > 63) reps = 7;
    struct cx_format *f;
    if (cx_format_create(ev_d, NULL, &f) < 0 || cx_format_registry_insert(f, &F1) < 0 ||
        cx_format_create(ev2_d, NULL, &f) < 0 || cx_format_registry_insert(f, &F2) < 0) {
        fprintf(stderr, "format: %s\n", cx_errmsg());
        return 1;
    }
    size_t maxn = sizes[NS - 1] / 8 + 8;
    double *vals = malloc(maxn * sizeof *vals);
    dvals = malloc(maxn * sizeof *dvals);
    for (size_t i = 0; i < maxn; i++) vals[i] = i * 0.37 + 1.0 / (double)(i + 3);
    size_t cap = maxn * 8 + 4096;
    wire = aligned_alloc(8, cap);
    wire2 = aligned_alloc(8, cap);
    outb = aligned_alloc(8, cap);
    outb_cap = cap;
    pbuf = malloc(cap * 2);
    pbuf_cap = cap * 2;
    xbuf_cap = maxn * 40 + 4096;
    xbuf = malloc(xbuf_cap);
    msgpack_sbuffer_init(&sbuf);
    (void)pbuf_cap;

    static double enc[NM][NS], dec[NM][NS];
    for (size_t s = 0; s < NS; s++) {
        uint32_t n = sizes[s] > 48 ? (uint32_t)((sizes[s] - 40) / 8) : 1;
        E = (struct ev){42, 3.14, n, vals, "label"};
        E2 = (struct ev2){7, 42, 3.14, n, vals, "label"};
        struct cx_enc e;
        cx_encode(F1, &E, &e);
        wire_len = (size_t)cx_enc_gather(&e, wire, cap);
        cx_encode(F2, &E2, &e);
        wire2_len = (size_t)cx_enc_gather(&e, wire2, cap);
        for (size_t m = 0; m < NM; m++) {
            methods[m].enc(); /* prepares the decode input */
            enc[m][s] = measure(methods[m].enc, reps);
            methods[m].enc();
            dec[m][s] = measure(methods[m].dec, reps);
        }
    }

    printf("Encode (send side) and decode (receive side) cost per event, microseconds, "
           "median of %d\n\n| event size |", reps);
    for (size_t m = 0; m < NM; m++) printf(" %s enc | %s dec |", methods[m].name, methods[m].name);
    printf("\n|---|");
    for (size_t m = 0; m < NM; m++) printf("---:|---:|");
    printf("\n");
    for (size_t s = 0; s < NS; s++) {
        printf("| %s |", size_names[s]);
        for (size_t m = 0; m < NM; m++) printf(" %.3f | %.3f |", enc[m][s], dec[m][s]);
        printf("\n");
    }
    printf("\nprotobuf-c / conflux encode at 10 KB: %.0fx\n", enc[2][2] / enc[0][2]);
    FILE *j = fopen(json_path, "w");
    if (!j) { perror(json_path); return 1; }
    fprintf(j, "{\"unit\":\"us_per_event\",\"repetitions\":%d,\"sizes\":[", reps);
    for (size_t s = 0; s < NS; s++) fprintf(j, "%s%zu", s ? "," : "", sizes[s]);
    fprintf(j, "],\"methods\":{");
    for (size_t m = 0; m < NM; m++) {
        fprintf(j, "%s\"%s\":{\"encode\":[", m ? "," : "", methods[m].name);
        for (size_t s = 0; s < NS; s++) fprintf(j, "%s%.4f", s ? "," : "", enc[m][s]);
        fprintf(j, "],\"decode\":[");
        for (size_t s = 0; s < NS; s++) fprintf(j, "%s%.4f", s ? "," : "", dec[m][s]);
        fprintf(j, "]}");
    }
    fprintf(j, "}}\n");
    fclose(j);
    return sink == 0;
}
