/* consumer: a component that reads a pipe of samples, in its own smaller struct.
 *
 *     consumer SPACE PIPE
 *
 * It declares only the fields it needs, in its own order and widths, with the JSON schema a
 * Channel resource would carry; each segment is converted from the writer's layout. It may
 * start before the producer, while it writes, or after it finished: the space keeps the
 * pipe. Prints the number of samples and segments, the energy sum and whether the steps
 * came in order.
 */
#include "conflux.h"

#include <stdint.h>
#include <stdio.h>

struct reading {
    double energy;
    int32_t step;
};

static const char reading_schema[] =
    "{\"name\":\"sample\",\"fields\":[{\"name\":\"energy\",\"type\":\"double\"},"
    "{\"name\":\"step\",\"type\":\"int32\"}]}";

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s SPACE PIPE\n", argv[0]);
        return 2;
    }
    const struct cx_format *fmt;
    if (conflux_format_json(reading_schema, &fmt) < 0) {
        fprintf(stderr, "consumer: %s\n", cx_errmsg());
        return 1;
    }
    int s = pi_space_open(argv[1], NULL);
    int r = s < 0 ? -1 : pi_attach(argv[2], s);
    if (r < 0) {
        fprintf(stderr, "consumer: %s\n", cx_errmsg());
        return 1;
    }
    static struct reading buf[65536];
    long n, samples = 0, segments = 0;
    double energy = 0;
    int in_order = 1;
    while ((n = pi_read(r, buf, sizeof buf / sizeof buf[0], fmt)) >= 0) {
        for (long i = 0; i < n; i++) {
            in_order &= buf[i].step == samples + i;
            energy += buf[i].energy;
        }
        samples += n;
        segments++;
    }
    if (errno != EPIPE) { /* -1 with EPIPE is the end of the pipe; anything else failed */
        fprintf(stderr, "consumer: %s\n", cx_errmsg());
        return 1;
    }
    pi_detach(r);
    pi_space_close(s);
    printf("consumer: %ld samples in %ld segments, energy sum %.1f, steps %s\n", samples, segments,
           energy, in_order ? "in order" : "OUT OF ORDER");
    return in_order ? 0 : 1;
}
