/* JSON line logs (cx_sc_log.h). One fprintf per line, so lines from threads never mix. */
#include "sidecar/cx_sc_log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static char g_common[1024];
static int g_quiet;

void cx_sc_log_setup(const char *common_json, int quiet)
{
    snprintf(g_common, sizeof g_common, "%s", common_json ? common_json : "");
    g_quiet = quiet;
}

char *cx_sc_json_str(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    if (cap < 3)
        return out;
    out[n++] = '"';
    for (; s && *s && n + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
        } else {
            out[n++] = (char)c;
        }
    }
    out[n++] = '"';
    out[n] = 0;
    return out;
}

void cx_sc_log(const char *level, const char *msg, const char *fields, ...)
{
    if (g_quiet && strcmp(level, "info") == 0)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[40], m[1024], extra[2048] = "";
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    if (fields) {
        va_list ap;
        va_start(ap, fields);
        vsnprintf(extra, sizeof extra, fields, ap);
        va_end(ap);
    }
    fprintf(stderr, "{\"ts\":\"%s.%03ldZ\",\"level\":\"%s\",\"msg\":%s%s%s%s%s}\n", when,
            ts.tv_nsec / 1000000, level, cx_sc_json_str(m, sizeof m, msg), g_common[0] ? "," : "",
            g_common, extra[0] ? "," : "", extra);
}
