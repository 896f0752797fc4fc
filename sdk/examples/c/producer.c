/* producer: a component that writes simulation samples to a Conflux pipe.
 *
 *     producer SPACE PIPE SEGMENTS [SAMPLES_PER_SEGMENT]
 *     producer tcp://127.0.0.1:7400 samples 20 256
 *
 * Each segment is an array of `struct sample` in this program's own layout; readers convert
 * to theirs by field name (see consumer.c, which declares a smaller struct). Sample k has
 * step k, time k / 1000 and energy k / 2.
 */
#include "conflux.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct sample {
    int64_t step;
    double time;
    float pos[3];
    double energy;
};

static const struct cx_field sample_fields[] = {
    {"step", "int64", 0, offsetof(struct sample, step), NULL},
    {"time", "double", 0, offsetof(struct sample, time), NULL},
    {"pos", "float[3]", 0, offsetof(struct sample, pos), NULL},
    {"energy", "double", 0, offsetof(struct sample, energy), NULL},
    {NULL, NULL, 0, 0, NULL}};

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s SPACE PIPE SEGMENTS [SAMPLES_PER_SEGMENT]\n", argv[0]);
        return 2;
    }
    const char *space = argv[1], *pipe = argv[2];
    long segments = atol(argv[3]), per = argc > 4 ? atol(argv[4]) : 256;
    if (segments < 1 || per < 1) {
        fprintf(stderr, "%s: SEGMENTS and SAMPLES_PER_SEGMENT must be positive\n", argv[0]);
        return 2;
    }

    /* The format of struct sample, registered in this process and published to the space's
     * format service so that readers in other processes can convert from it. */
    const struct cx_struct_decl decl[] = {{"sample", sample_fields, sizeof(struct sample)}, {NULL, NULL, 0}};
    struct cx_format *made;
    const struct cx_format *fmt;
    if (cx_format_create(decl, NULL, &made) < 0 || cx_format_registry_insert(made, &fmt) < 0 ||
        conflux_format_publish(space, fmt) < 0) {
        fprintf(stderr, "producer: format: %s\n", cx_errmsg());
        return 1;
    }

    int s = pi_space_open(space, NULL);
    int w = s < 0 ? -1 : pi_create(pipe, s, PI_CREATE);
    if (w < 0) {
        fprintf(stderr, "producer: %s\n", cx_errmsg());
        return 1;
    }
    struct sample *buf = calloc((size_t)per, sizeof *buf);
    for (long seg = 0; seg < segments; seg++) {
        for (long i = 0; i < per; i++) {
            int64_t k = seg * per + i;
            buf[i] = (struct sample){.step = k, .time = k / 1000.0, .pos = {1, 2, 3}, .energy = k / 2.0};
        }
        if (pi_write(w, buf, (size_t)per, fmt) != per) {
            fprintf(stderr, "producer: %s\n", cx_errmsg());
            return 1;
        }
    }
    free(buf);
    /* pi_close returns once the space holds every segment: the pipe outlives this process. */
    if (pi_close(w) < 0 || pi_space_close(s) < 0) {
        fprintf(stderr, "producer: %s\n", cx_errmsg());
        return 1;
    }
    printf("producer: wrote %ld segments of %ld samples to '%s'\n", segments, per, pipe);
    return 0;
}
