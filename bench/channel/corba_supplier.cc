// omniORB supplier for the event-channel benchmark (channel_bench.idl, bench_common.h).
//
//   corba_supplier <ior-file> [--quick | --lat-n N --bw-bytes N --size N] [-ORB options]
//
// Latency: the two-way ping() of an event of each size (round trip / 2). Bandwidth: a
// window of oneway push() calls, then the two-way wait_for() as the window's ack. Prints
// the JSON lines with peer "omniorb", then tells the consumer to quit.
#include "bench_common.h"
#include "channel_bench.hh"

#include <fstream>
#include <string>

static int run(CORBA::ORB_ptr orb, const char *ior_file, const bench_opts &o)
{
    std::ifstream in(ior_file);
    std::string ior;
    if (!(in >> ior)) {
        std::fprintf(stderr, "corba_supplier: no reference in %s\n", ior_file);
        return 1;
    }
    CORBA::Object_var obj = orb->string_to_object(ior.c_str());
    ChannelBench::Consumer_var c = ChannelBench::Consumer::_narrow(obj);
    if (CORBA::is_nil(c)) {
        std::fprintf(stderr, "corba_supplier: %s is not a ChannelBench::Consumer\n", ior_file);
        return 1;
    }
    unsigned char *buf = bench_buffer();
    long pushed = 0;
    for (int si = 0; si < BENCH_NSIZES; si++) {
        size_t size = bench_sizes[si];
        if (o.only && o.only != size)
            continue;
        // The event borrows buf (release = false): no copy on the supplier's side either.
        ChannelBench::Event ev((CORBA::ULong)size, (CORBA::ULong)size, buf, false);
        long n = bench_lat_iters(&o, size);
        double *rtt = new double[n];
        for (long i = -BENCH_WARMUP; i < n; i++) {
            double t0 = bench_now_us();
            ChannelBench::Event_var back = c->ping(ev);
            if (back->length() != size) {
                std::fprintf(stderr, "corba_supplier: echo of the wrong size\n");
                return 1;
            }
            if (i >= 0)
                rtt[i] = bench_now_us() - t0;
        }
        bench_print_latency("omniorb", size, rtt, n);
        delete[] rtt;

        long windows = bench_bw_windows(&o, size);
        double t0 = 0;
        for (long w = -2; w < windows; w++) { // two warm-up windows
            if (w == 0)
                t0 = bench_now_us();
            for (int k = 0; k < BENCH_WINDOW; k++)
                c->push(ev);
            pushed += BENCH_WINDOW;
            CORBA::Long got = c->wait_for((CORBA::Long)pushed);
            if (got < pushed) {
                std::fprintf(stderr, "corba_supplier: consumer has %ld of %ld events\n",
                             (long)got, pushed);
                return 1;
            }
        }
        bench_print_bandwidth("omniorb", size, windows * BENCH_WINDOW, bench_now_us() - t0);
    }
    c->quit();
    std::free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    try {
        CORBA::ORB_var orb = CORBA::ORB_init(argc, argv); // takes the -ORB options out
        bench_opts o;
        if (argc < 2 || bench_parse(argc, argv, 2, &o) < 0) {
            std::fprintf(stderr, "usage: %s <ior-file> [--quick | --lat-n N --bw-bytes N "
                                 "--size N] [-ORB options]\n", argv[0]);
            return 2;
        }
        int rc = run(orb, argv[1], o);
        orb->destroy();
        return rc;
    } catch (const CORBA::Exception &e) {
        std::fprintf(stderr, "corba_supplier: CORBA exception %s\n", e._name());
        return 1;
    }
}
