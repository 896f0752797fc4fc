/* The choice of backend (api/cx_api.h) and the calls the sidecar protocol does not carry yet.
 * The choice is made once per process, so each case runs in a child of its own. */
#define _GNU_SOURCE
#include "api/cx_api.h"

#include "common/cx_error.h"
#include "common/cx_test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs fn in a child; its exit status (0 = every check held). */
static int in_child(int (*fn)(void))
{
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0)
        _exit(fn());
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#define EXPECT(cond)                                                            \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "  child %s:%d: %s (%s)\n", __FILE__, __LINE__, #cond, \
                    cx_errmsg());                                               \
            return 1;                                                           \
        }                                                                       \
    } while (0)

static int no_socket_is_embedded(void)
{
    unsetenv("CONFLUX_SOCKET");
    char out[PI_LINK_MAX];
    EXPECT(pi_link(4242, out, sizeof out) == -1 && errno == EBADF); /* the runtime's own answer */
    EXPECT(cx_api_backend() == &cx_api_embedded);
    EXPECT(strcmp(cx_api_backend()->name, "embedded") == 0);
    return 0;
}

static int socket_is_sidecar(void)
{
    setenv("CONFLUX_SOCKET", "/nonexistent/conflux.sock", 1);
    errno = 0;
    EXPECT(pi_shutdown() == -1 && errno != 0 && strstr(cx_errmsg(), "sidecar")); /* carried: no sidecar there */
    EXPECT(cx_api_backend() == &cx_api_sidecar);
    /* a routed call without a sidecar there fails with an errno, no crash */
    errno = 0;
    EXPECT(pi_space_open("tcp://127.0.0.1:1", NULL) == -1 && errno != 0);
    return 0;
}

static int use_embedded_wins_over_the_socket(void)
{
    setenv("CONFLUX_SOCKET", "/nonexistent/conflux.sock", 1);
    cx_api_use_embedded();
    EXPECT(cx_api_backend() == &cx_api_embedded);
    char out[PI_LINK_MAX];
    EXPECT(pi_link(4242, out, sizeof out) == -1 && errno == EBADF);
    return 0;
}

CX_TEST(without_conflux_socket_calls_run_embedded) { CX_CHECK_EQ_INT(in_child(no_socket_is_embedded), 0); }
CX_TEST(with_conflux_socket_calls_go_to_the_sidecar) { CX_CHECK_EQ_INT(in_child(socket_is_sidecar), 0); }
CX_TEST(use_embedded_fixes_the_choice) { CX_CHECK_EQ_INT(in_child(use_embedded_wins_over_the_socket), 0); }

/* Every row has both backends (the link fails first; this names the row if a NULL slipped in). */
CX_TEST(every_row_has_both_backends)
{
    int rows = 0;
#define CX_API_TEST_ROW(kind, ret, name, impl, params, args)                           \
    do {                                                                                \
        rows++;                                                                         \
        if (!cx_api_embedded.impl || !cx_api_sidecar.impl)                              \
            fprintf(stderr, "  %s: a backend is missing\n", #name), *cx_failed = 1;    \
    } while (0);
    CX_API_CALLS(CX_API_TEST_ROW)
#undef CX_API_TEST_ROW
    CX_CHECK(rows > 0);
}

CX_TEST(version_is_compiled_in) { CX_CHECK_STR(conflux_version(), CONFLUX_VERSION_STRING); }

CX_TEST_MAIN()
