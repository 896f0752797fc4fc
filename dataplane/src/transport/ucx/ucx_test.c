/* The ucx driver through the conformance suite. UCX_TLS is respected; unless the caller
 * set them, the tests use UCX_TLS=tcp,posix,sysv,self and UCX_NET_DEVICES=lo (loopback
 * only). Run with e.g. UCX_TLS=tcp or UCX_TLS=posix,self to test one transport. */
#define _GNU_SOURCE
#include "transport/conformance.h"
#include "testutil/hostile_peer.h"
#include "testutil/ucx_test_env.h"

#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>

#ifdef CX_HAVE_UCX
#include <ucs/config/global_opts.h>
extern const struct cx_driver_ops cx_ucx_ops;
#define UCX_OPS (&cx_ucx_ops)
static const char *ready(void)
{
    ucx_test_env();
    /* a killed peer leaves requests that UCX lists one by one, as warnings, when the
     * survivor's worker is destroyed; UCX_LOG_LEVEL is read before main, so lower it here */
    if (!getenv("UCX_LOG_LEVEL"))
        ucs_global_opts.log_component.log_level = UCS_LOG_LEVEL_ERROR;
    return NULL;
}
#else
static int nothing(const char *a, struct cx_link **o) { (void)a, (void)o; return -ENOSYS; }
static int nolisten(const char *a, struct cx_listener **o) { (void)a, (void)o; return -ENOSYS; }
static const char *noaddr(struct cx_listener *l) { (void)l; return ""; }
static void noclose(struct cx_listener *l) { (void)l; }
static const struct cx_driver_ops absent = {.name = "ucx", .connect = nothing, .listen = nolisten,
                                            .listener_addr = noaddr, .listener_close = noclose};
#define UCX_OPS (&absent)
static const char *ready(void) { return "UCX not built in (pkg-config ucx not found: install libucx-dev)"; }
#endif

static void mkaddr(char *buf, size_t cap) { snprintf(buf, cap, "ucx://127.0.0.1:0"); }

CX_DECLARE_TRANSPORT_TESTS(ucx, UCX_OPS, mkaddr, ready)

/* accept_start: a peer that connects and says nothing, and one that announces a 4 GiB
 * worker address, hold no one: a real peer connecting meanwhile is accepted and carries a
 * message while the silent one is still pending; the liar is refused at once, and the
 * silent one fails with -ETIMEDOUT at the deadline and its connection is closed. */
CX_TEST(ucx_accept_start_serves_a_peer_while_a_silent_one_waits)
{
    const char *skip = ready();
    if (skip)
        CX_SKIP(skip);
#ifdef CX_HAVE_UCX
    enum { HS_MS = 3000 };
    char addr[64];
    mkaddr(addr, sizeof addr);
    struct cx_listener *l;
    CX_CHECK_EQ_INT(UCX_OPS->listen(addr, &l), 0);
    const char *laddr = UCX_OPS->listener_addr(l);
    int silent = hp_connect(laddr), liar = hp_connect(laddr);
    CX_CHECK(silent >= 0 && liar >= 0);
    uint32_t huge = 0xffffffffu;
    CX_CHECK(send(liar, &huge, 4, MSG_NOSIGNAL) == 4);
    struct cx_link *ks = NULL, *kl = NULL, *kg = NULL;
    double t0 = hp_now_ms();
    while ((!ks || !kl) && hp_now_ms() - t0 < 5000) {
        struct cx_link *k;
        if (UCX_OPS->accept_start(l, HS_MS, &k) == 0)
            *(!ks ? &ks : &kl) = k;
    }
    CX_CHECK(ks && kl);
    struct cx_conf_conn c = {.ops = UCX_OPS, .addr = laddr};
    pthread_t th;
    pthread_create(&th, NULL, cx_conf_connector, &c);
    struct cx_conf_rx rx = {0};
    int rs = 0, rl = 0, rg = 0, sent = 0;
    while (rx.next < 1 && hp_now_ms() - t0 < HS_MS - 500) {
        struct cx_link *k;
        if (!kg && UCX_OPS->accept_start(l, HS_MS, &k) == 0)
            kg = k;
        if (rs >= 0)
            rs = cx_link_progress(ks, cx_conf_on_msg, &rx, 16);
        if (rl >= 0)
            rl = cx_link_progress(kl, cx_conf_on_msg, &rx, 16);
        if (kg && rg >= 0)
            rg = cx_link_progress(kg, cx_conf_on_msg, &rx, 16);
        if (kg && rg >= 0 && !sent && __atomic_load_n(&c.link, __ATOMIC_ACQUIRE)) {
            pthread_join(th, NULL);
            uint8_t buf[16];
            sent = c.rc == 0 && cx_conf_send_seq(c.link, 0, buf) == 0 &&
                   cx_link_flush(c.link, NULL, NULL, 2000) == 0;
        }
    }
    double served_ms = hp_now_ms() - t0;
    if (!sent)
        pthread_join(th, NULL);
    int still_pending = rs == 0;
    fprintf(stderr, "  a real peer served in %.0f ms beside a silent one (pending: %d) and a "
            "liar (%d: %s)\n", served_ms, still_pending, rl, rl < 0 ? cx_errmsg() : "");
    while (rs >= 0 && hp_now_ms() - t0 < HS_MS + 5000)
        rs = cx_link_progress(ks, cx_conf_on_msg, &rx, 16);
    CX_CHECK(sent && rx.next == 1 && rx.bad == 0);
    CX_CHECK(still_pending);
    CX_CHECK_EQ_INT(rl, -EPROTO);
    CX_CHECK_EQ_INT(rs, -ETIMEDOUT);
    CX_CHECK(strstr(cx_errmsg(), "handshake not done within") != NULL);
    cx_link_close(ks);
    cx_link_close(kl);
    CX_CHECK(hp_closed_by_server(silent, 2000) && hp_closed_by_server(liar, 2000));
    close(silent);
    close(liar);
    cx_link_close(kg);
    if (c.rc == 0)
        cx_link_close(c.link);
    UCX_OPS->listener_close(l);
#endif
}

#ifdef CX_HAVE_UCX
/* Whether sig's handler is one of libucs's. */
static int ucs_handles(int sig)
{
    struct sigaction sa;
    Dl_info di;
    return sigaction(sig, NULL, &sa) == 0 && sa.sa_handler != SIG_DFL &&
           sa.sa_handler != SIG_IGN && dladdr((void *)sa.sa_handler, &di) && di.dli_fname &&
           strstr(di.dli_fname, "libucs") != NULL;
}
#endif

/* UCX's crash handlers stay out of the process. The checks run in a fresh process (this
 * binary again, running only this test with CX_UCX_SIGNALS_PROBE set), since libucs
 * installs its handlers when it is loaded: "default" (UCX_ERROR_SIGNALS unset) wants, after
 * a link made the UCX context, UCX_ERROR_SIGNALS "" and no error signal handled by libucs;
 * "BUS" (the user's choice) wants the variable untouched and SIGBUS still libucs's. In the
 * test run itself it does nothing: the next two tests start it. */
CX_TEST(ucx_error_signals_probe)
{
    const char *mode = getenv("CX_UCX_SIGNALS_PROBE");
    if (!mode)
        return;
#ifdef CX_HAVE_UCX
    ready();
    struct cx_link *a = NULL, *b = NULL;
    CX_CHECK_EQ_INT(cx_conf_pair(UCX_OPS, mkaddr, &a, &b), 0);
    cx_link_close(a);
    cx_link_close(b);
    const char *v = getenv("UCX_ERROR_SIGNALS");
    int user = strcmp(mode, "default") != 0;
    CX_CHECK(v && strcmp(v, user ? mode : "") == 0);
    CX_CHECK(!ucs_handles(SIGSEGV) && !ucs_handles(SIGILL) && !ucs_handles(SIGFPE));
    CX_CHECK(ucs_handles(SIGBUS) == user);
#endif
}

/* Runs the probe in a fresh process with UCX_ERROR_SIGNALS set to value (NULL: unset). */
static int probe(const char *value)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("CX_UCX_SIGNALS_PROBE", value ? value : "default", 1);
        if (value)
            setenv("UCX_ERROR_SIGNALS", value, 1);
        else
            unsetenv("UCX_ERROR_SIGNALS");
        execl("/proc/self/exe", "ucx_test", "ucx_error_signals_probe", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

CX_TEST(ucx_error_signal_handlers_are_not_installed_by_default)
{
    const char *skip = ready();
    if (skip)
        CX_SKIP(skip);
    CX_CHECK_EQ_INT(probe(NULL), 0);
}

CX_TEST(ucx_error_signals_set_by_the_user_are_kept)
{
    const char *skip = ready();
    if (skip)
        CX_SKIP(skip);
    CX_CHECK_EQ_INT(probe("BUS"), 0);
}

CX_TEST_MAIN()

/* Under AddressSanitizer: after a peer is SIGKILLed (ucx_peer_killed), UCX never finishes
 * (nor cancels) the rendezvous fetches and sends that were under way, so the driver leaks
 * their items and pool buffers on purpose rather than risk UCX writing into freed memory
 * (see cx_ucx_xfer.c cx_ucx_drain and transport/README.md). Only those allocation sites
 * (a queued fetch, a copied send, a pool buffer) are suppressed. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:rx_enqueue\nleak:send_copied\nleak:map_buf\n";
}
