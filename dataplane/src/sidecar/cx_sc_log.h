/* Structured logs of the sidecar: one JSON object per line on stderr,
 *   {"ts":"2026-11-23T20:50:01.123Z","level":"info","msg":"app connected","pid":42}
 * Extra members are given as printf-style JSON text; strings go through cx_sc_json_str. */
#ifndef CX_SC_LOG_H
#define CX_SC_LOG_H

#include <stddef.h>

/* Sets fields added to every line (e.g. "\"pod\":\"x\"") and whether info lines print. */
void cx_sc_log_setup(const char *common_json, int quiet);

/* level: "info", "warn" or "error". fields may be NULL or printf-style JSON members
 * without braces. */
void cx_sc_log(const char *level, const char *msg, const char *fields, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes s as a JSON string literal (quotes included) into out[cap]; returns out. */
char *cx_sc_json_str(char *out, size_t cap, const char *s);

#endif
