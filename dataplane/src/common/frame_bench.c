/* Nanoseconds per frame header: encode, decode, and the two together (every message pays
 * both, once per side). Not part of the library or the tests (*_bench.c); build and run:
 *
 *   cc -std=gnu11 -O2 -Isrc -o build/frame_bench src/common/frame_bench.c \
 *      src/common/cx_frame.c src/common/cx_error.c -pthread && build/frame_bench [iterations]
 *
 * Add -DCX_FRAME_PORTABLE_CHECK to time the table code that CPUs without a CRC-32C
 * instruction run.
 * Prints one JSON line. The headers vary per iteration (seq, length) as on a real link. */
#include "common/cx_frame.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000000;
    if (n <= 0) {
        fprintf(stderr, "usage: %s [iterations > 0]\n", argv[0]);
        return 2;
    }
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .flags = CX_FRAME_F_ACK, .channel = 7,
                             .format = 0xfeedfacecafebeefull, .ack = 5};
    static uint8_t buf[64][CX_FRAME_HDR_SIZE];
    uint64_t sink = 0;

    double t0 = now();
    for (long i = 0; i < n; i++) {
        h.seq = (uint64_t)i;
        h.length = h.msg_length = (uint32_t)(i & 0xffff);
        cx_frame_encode(&h, buf[i & 63]);
    }
    double enc = now() - t0;

    struct cx_frame_hdr g;
    t0 = now();
    for (long i = 0; i < n; i++) {
        if (cx_frame_decode(buf[i & 63], CX_FRAME_HDR_SIZE, &g) != 0)
            return 1;
        sink += g.seq;
    }
    double dec = now() - t0;

    t0 = now();
    for (long i = 0; i < n; i++) {
        h.seq = (uint64_t)i;
        h.length = h.msg_length = (uint32_t)(i & 0xffff);
        cx_frame_encode(&h, buf[i & 63]);
        if (cx_frame_decode(buf[i & 63], CX_FRAME_HDR_SIZE, &g) != 0)
            return 1;
        sink += g.length;
    }
    double both = now() - t0;

    printf("{\"iterations\":%ld,\"encode_ns\":%.2f,\"decode_ns\":%.2f,\"encode_decode_ns\":%.2f,"
           "\"sink\":%llu}\n", n, enc / (double)n * 1e9, dec / (double)n * 1e9,
           both / (double)n * 1e9, (unsigned long long)(sink & 1));
    return 0;
}
