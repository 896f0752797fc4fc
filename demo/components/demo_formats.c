/* Formats and small helpers shared by the demo components (demo_formats.h). */
#include "demo_formats.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct cx_field reading_fields[] = {
    {"step", "int64", 0, offsetof(struct reading, step), NULL},
    {"energy", "double[16]", 0, offsetof(struct reading, energy), NULL},
    {NULL, NULL, 0, 0, NULL}};

static const struct cx_field result_v2_fields[] = {
    {"segment", "int64", 0, offsetof(struct result_v2, segment), NULL},
    {"stage", "int32", 0, offsetof(struct result_v2, stage), NULL},
    {"count", "int32", 0, offsetof(struct result_v2, count), NULL},
    {"mean", "double", 0, offsetof(struct result_v2, mean), NULL},
    {"max", "double", 0, offsetof(struct result_v2, max), NULL},
    {NULL, NULL, 0, 0, NULL}};

static const struct cx_field result_v1_fields[] = {
    {"segment", "int64", 0, offsetof(struct result_v1, segment), NULL},
    {"mean", "double", 0, offsetof(struct result_v1, mean), NULL},
    {"count", "int32", 0, offsetof(struct result_v1, count), NULL},
    {NULL, NULL, 0, 0, NULL}};

static const struct cx_field tick_fields[] = {
    {"id", "int64", 0, offsetof(struct tick, id), NULL},
    {"check", "int64", 0, offsetof(struct tick, check), NULL},
    {NULL, NULL, 0, 0, NULL}};

const struct cx_format *demo_register(const char *which)
{
    struct cx_struct_decl decl[2] = {{NULL, NULL, 0}, {NULL, NULL, 0}};
    if (strcmp(which, "reading") == 0)
        decl[0] = (struct cx_struct_decl){"reading", reading_fields, sizeof(struct reading)};
    else if (strcmp(which, "result_v2") == 0)
        decl[0] = (struct cx_struct_decl){"result", result_v2_fields, sizeof(struct result_v2)};
    else if (strcmp(which, "result_v1") == 0)
        decl[0] = (struct cx_struct_decl){"result", result_v1_fields, sizeof(struct result_v1)};
    else if (strcmp(which, "tick") == 0)
        decl[0] = (struct cx_struct_decl){"tick", tick_fields, sizeof(struct tick)};
    else {
        fprintf(stderr, "demo: unknown format '%s'\n", which);
        return NULL;
    }
    struct cx_format *made;
    const struct cx_format *fmt;
    if (cx_format_create(decl, NULL, &made) < 0 || cx_format_registry_insert(made, &fmt) < 0) {
        fprintf(stderr, "demo: format %s: %s\n", which, cx_errmsg());
        return NULL;
    }
    return fmt;
}

long demo_env_long(const char *name, long def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < 1) {
        fprintf(stderr, "demo: %s=%s: want a positive integer\n", name, v);
        exit(2);
    }
    return n;
}

const char *demo_space(const char *component)
{
    const char *s = getenv("CONFLUX_SPACE");
    if (!s || !*s) {
        fprintf(stderr, "%s: CONFLUX_SPACE is not set (the space server, tcp://HOST:PORT)\n", component);
        exit(2);
    }
    return s;
}

int demo_open_space(const char *component, const char *space, const struct cx_format *const *fmts)
{
    for (int tries = 0;; tries++) {
        int rc = 0;
        for (const struct cx_format *const *f = fmts; *f && rc == 0; f++)
            rc = conflux_format_publish(space, *f);
        int s = rc < 0 ? -1 : pi_space_open(space, NULL);
        if (s >= 0)
            return s;
        if (tries == 120) {
            fprintf(stderr, "%s: space %s did not answer in 2 minutes: %s\n", component, space, cx_errmsg());
            exit(1);
        }
        if (tries % 10 == 0)
            demo_log(component, "waiting for the space %s: %s", space, cx_errmsg());
        sleep(1);
    }
}

void demo_log(const char *component, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s: ", component);
    vprintf(fmt, ap);
    printf("\n");
    fflush(stdout);
    va_end(ap);
}

long demo_pipe_count(int s, const char *name, const struct cx_format *t, void *buf, size_t cap,
                     long max, int quiet_ms)
{
    int r = pi_attach(name, s);
    if (r < 0)
        return -1;
    size_t esz = t ? cx_format_size(t) : 1;
    long n = 0, got = 0;
    char scratch[256];
    while (n < max) {
        void *dst = buf ? (char *)buf + (size_t)n * cap : scratch;
        size_t len = (buf ? cap : sizeof scratch) / esz;
        if ((got = pi_read_timeout(r, dst, len, t, quiet_ms)) < 0)
            break;
        n++;
    }
    int err = got < 0 ? errno : 0;
    pi_detach(r);
    if (err && err != EPIPE && err != ETIMEDOUT) {
        errno = err;
        return -1;
    }
    return n;
}

static void on_sigterm(int sig)
{
    (void)sig;
    _exit(0);
}

void demo_exit_on_sigterm(void)
{
    struct sigaction sa = {.sa_handler = on_sigterm};
    sigaction(SIGTERM, &sa, NULL);
}

void demo_idle(void)
{
    for (;;)
        pause();
}
