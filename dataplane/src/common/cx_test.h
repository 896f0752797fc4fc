/* A minimal test harness for the data plane's C tests. Each *_test.c file is one binary:
 *
 *     #include "common/cx_test.h"
 *     CX_TEST(frame_roundtrip) { ...; CX_CHECK(x == 1); CX_CHECK_EQ_INT(rc, 0); }
 *     CX_TEST_MAIN()
 *
 * Tests run in declaration order; a failed check prints file:line and the expression and
 * ends that test. The binary ends with the line "N passed, N failed[, N skipped]" and exits
 * non-zero on any failure. A test that cannot run here calls CX_SKIP("why"), which prints
 * the reason: never skip quietly.
 */
#ifndef CX_TEST_H
#define CX_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*cx_test_fn)(int *failed, int *skipped);
struct cx_test_case { const char *name; cx_test_fn fn; };

#define CX_TEST_MAX 512
extern struct cx_test_case cx_test_cases[CX_TEST_MAX];
extern int cx_test_count;

#define CX_TEST(name)                                                                      \
    static void cx_test_##name(int *cx_failed, int *cx_skipped);                        \
    __attribute__((constructor)) static void cx_test_register_##name(void)                \
    {                                                                                      \
        if (cx_test_count < CX_TEST_MAX)                                                   \
            cx_test_cases[cx_test_count++] = (struct cx_test_case){#name, cx_test_##name}; \
    }                                                                                      \
    static void cx_test_##name(__attribute__((unused)) int *cx_failed,                     \
                               __attribute__((unused)) int *cx_skipped)

#define CX_CHECK(cond)                                                                     \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);     \
            *cx_failed = 1;                                                                \
            (void)cx_skipped;                                                              \
            return;                                                                        \
        }                                                                                  \
    } while (0)

#define CX_CHECK_EQ_INT(a, b)                                                              \
    do {                                                                                   \
        long long cx_a_ = (long long)(a), cx_b_ = (long long)(b);                          \
        if (cx_a_ != cx_b_) {                                                              \
            fprintf(stderr, "  %s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, \
                    #a, #b, cx_a_, cx_b_);                                                 \
            *cx_failed = 1;                                                                \
            return;                                                                        \
        }                                                                                  \
    } while (0)

#define CX_CHECK_STR(a, b)                                                                 \
    do {                                                                                   \
        const char *cx_a_ = (a), *cx_b_ = (b);                                             \
        if (!cx_a_ || !cx_b_ || strcmp(cx_a_, cx_b_) != 0) {                               \
            fprintf(stderr, "  %s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__,       \
                    __LINE__, #a, #b, cx_a_ ? cx_a_ : "(null)", cx_b_ ? cx_b_ : "(null)"); \
            *cx_failed = 1;                                                                \
            return;                                                                        \
        }                                                                                  \
    } while (0)

/* Ends the test as skipped, printing why. */
#define CX_SKIP(...)                                                                       \
    do {                                                                                   \
        fprintf(stderr, "  skipped: ");                                                    \
        fprintf(stderr, __VA_ARGS__);                                                      \
        fprintf(stderr, "\n");                                                             \
        *cx_skipped = 1;                                                                   \
        return;                                                                            \
    } while (0)

/* Runs every registered test, or only those whose name contains argv[1]. */
#define CX_TEST_MAIN() CX_TEST_MAIN_AS(main)

/* The same runner under another name, for a binary whose own main() calls it (the dpdk
 * tests' binaries also run as helper processes: dpdk_test_util.h). */
#define CX_TEST_MAIN_AS(runner)                                                            \
    struct cx_test_case cx_test_cases[CX_TEST_MAX];                                        \
    int cx_test_count;                                                                     \
    int runner(int argc, char **argv)                                                      \
    {                                                                                      \
        int passed = 0, failed = 0, skipped = 0;                                           \
        for (int i = 0; i < cx_test_count; i++) {                                          \
            if (argc > 1 && !strstr(cx_test_cases[i].name, argv[1]))                       \
                continue;                                                                  \
            int f = 0, s = 0;                                                              \
            fprintf(stderr, "RUN  %s\n", cx_test_cases[i].name);                           \
            cx_test_cases[i].fn(&f, &s);                                                   \
            fprintf(stderr, "%s %s\n", f ? "FAIL" : s ? "SKIP" : "ok  ",                  \
                    cx_test_cases[i].name);                                                \
            if (f) failed++; else if (s) skipped++; else passed++;                         \
        }                                                                                  \
        printf("%s: %d passed, %d failed, %d skipped\n", argv[0], passed, failed, skipped); \
        return failed ? 1 : 0;                                                             \
    }

#endif
