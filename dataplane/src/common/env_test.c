/* cx_env: numeric settings from the environment, one parser for every module. */
#include "common/cx_env.h"
#include "common/cx_error.h"
#include "common/cx_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Runs cx_env_u64 with stderr captured into `log`. */
static uint64_t read_logged(const char *name, uint64_t dflt, uint64_t min, uint64_t max, char *log, size_t cap)
{
    fflush(stderr);
    int saved = dup(2);
    FILE *tmp = tmpfile();
    dup2(fileno(tmp), 2);
    uint64_t v = cx_env_u64(name, dflt, min, max);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(log, 1, cap - 1, tmp);
    log[n] = 0;
    fclose(tmp);
    return v;
}

CX_TEST(unset_and_empty_take_the_default_quietly)
{
    char log[256];
    unsetenv("CX_TEST_A");
    CX_CHECK(read_logged("CX_TEST_A", 42, 1, 100, log, sizeof log) == 42);
    setenv("CX_TEST_A", "", 1);
    CX_CHECK(read_logged("CX_TEST_A", 42, 1, 100, log, sizeof log) == 42);
    CX_CHECK_STR(log, "");
}

CX_TEST(whole_numbers_in_range_are_taken)
{
    char log[256];
    setenv("CX_TEST_B", "7", 1);
    CX_CHECK(read_logged("CX_TEST_B", 42, 1, 100, log, sizeof log) == 7);
    setenv("CX_TEST_B", "0x40", 1);
    CX_CHECK(read_logged("CX_TEST_B", 42, 1, 100, log, sizeof log) == 64);
    setenv("CX_TEST_B", "100", 1);
    CX_CHECK(read_logged("CX_TEST_B", 42, 1, 100, log, sizeof log) == 100);
    CX_CHECK_STR(log, "");
}

CX_TEST(bad_values_take_the_default_and_warn_once_per_name)
{
    static const char *bad[] = {"abc", "10ms", "-5", "101", "0", "99999999999999999999999"};
    char log[256];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char name[32];
        snprintf(name, sizeof name, "CX_TEST_BAD%zu", i);
        setenv(name, bad[i], 1);
        CX_CHECK(read_logged(name, 42, 1, 100, log, sizeof log) == 42);
        CX_CHECK(strstr(log, name) != NULL);
        CX_CHECK(strstr(log, bad[i]) != NULL);
        CX_CHECK(strstr(log, "1..100; using 42") != NULL);
    }
    setenv("CX_TEST_BAD0", "xyz", 1); /* the same name again: no second line */
    CX_CHECK(read_logged("CX_TEST_BAD0", 42, 1, 100, log, sizeof log) == 42);
    CX_CHECK_STR(log, "");
}

CX_TEST(a_warning_leaves_the_callers_error_alone)
{
    char log[256];
    cx_err_set(EIO, "the caller's error");
    setenv("CX_TEST_C", "nope", 1);
    CX_CHECK(read_logged("CX_TEST_C", 3, 1, 9, log, sizeof log) == 3);
    CX_CHECK_STR(cx_errmsg(), "the caller's error");
}

CX_TEST(parse_refuses_with_name_and_range)
{
    uint64_t v = 0;
    CX_CHECK_EQ_INT(cx_env_parse_u64("CONFLUX_X", "9k", 576, 65535, &v), -EINVAL);
    CX_CHECK_STR(cx_errmsg(), "CONFLUX_X='9k' is not a number in 576..65535");
    CX_CHECK_EQ_INT(cx_env_parse_u64("CONFLUX_X", " 1500", 576, 65535, &v), 0);
    CX_CHECK(v == 1500);
}

CX_TEST_MAIN()
