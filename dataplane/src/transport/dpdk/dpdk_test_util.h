/* Helpers of the dpdk tests: starting this test binary again in another role (the EAL
 * cannot be forked, so every extra DPDK process is a fresh exec, optionally inside a network
 * namespace), the memif switch process and its ports' EAL arguments, main() with roles,
 * network namespaces with a veth pair, and the two-process session (ordered exchange and
 * 64 MiB each way) both ends of a cross-process test run. */
#ifndef DPDK_TEST_UTIL_H
#define DPDK_TEST_UTIL_H

#define _GNU_SOURCE
#include "stack/cx_stack.h"
#include "transport/conformance.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

extern char **environ;

/* Starts `/proc/self/exe argv...` with extra environment entries ("K=V", NULL-terminated),
 * inside network namespace netns (NULL = ours). With out_fd, the child's stdout comes back
 * on a pipe; with err_file, its stderr goes to that file. The child dies with us
 * (PR_SET_PDEATHSIG). Returns the pid or -errno. */
static inline pid_t tu_spawn_to(const char *netns, char *const *env_extra, char *const *argv,
                                int *out_fd, const char *err_file)
{
    static char *envp[512];
    int n = 0;
    for (char *const *e = env_extra; e && *e && n < 64; e++) envp[n++] = *e;
    for (char **e = environ; *e && n < 510; e++) {
        int dup = 0; /* ours win over inherited ones */
        for (char *const *x = env_extra; x && *x && !dup; x++) {
            size_t k = strcspn(*x, "=");
            dup = !strncmp(*e, *x, k + 1);
        }
        if (!dup)
            envp[n++] = *e;
    }
    envp[n] = NULL;
    int nsfd = -1, pfd[2] = {-1, -1};
    if (netns) {
        char path[256];
        snprintf(path, sizeof path, "/run/netns/%s", netns);
        if ((nsfd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
            return -errno;
    }
    int efd = err_file ? open(err_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;
    if (out_fd && pipe(pfd) < 0)
        return -errno;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) { /* only async-signal-safe calls until exec */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET) < 0)
            _exit(126);
        if (out_fd)
            dup2(pfd[1], 1);
        if (efd >= 0)
            dup2(efd, 2);
        syscall(SYS_close_range, 3u, ~0u, 0u); /* no DPDK socket of ours may leak to it */
        execve("/proc/self/exe", argv, envp);
        _exit(127);
    }
    if (nsfd >= 0)
        close(nsfd);
    if (efd >= 0)
        close(efd);
    if (out_fd) {
        close(pfd[1]);
        *out_fd = pfd[0];
    }
    return pid < 0 ? -errno : pid;
}

static inline pid_t tu_spawn(const char *netns, char *const *env_extra, char *const *argv,
                             int *out_fd)
{
    return tu_spawn_to(netns, env_extra, argv, out_fd, NULL);
}

/* Copies a child's log to our stderr: all of it, or (quiet) without the libbpf/libxdp
 * notices AF_XDP prints on every start. Removes the file. */
static inline void tu_show_log(const char *path, int quiet)
{
    FILE *f = fopen(path, "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!quiet || (strncmp(line, "libbpf: ", 8) && strncmp(line, "libxdp: ", 8)))
            fputs(line, stderr);
    if (f)
        fclose(f);
    unlink(path);
}

/* Reads the child's stdout until a line starting with `want` (0) or EOF/timeout (-1). */
static inline int tu_wait_line(int fd, const char *want, int timeout_ms)
{
    char buf[512];
    size_t n = 0;
    double t0 = cx_conf_now();
    while ((cx_conf_now() - t0) * 1000 < timeout_ms) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t r = read(fd, buf + n, sizeof buf - 1 - n);
        if (r <= 0)
            return -1;
        n += (size_t)r;
        buf[n] = 0;
        if (strstr(buf, want))
            return 0;
        if (n == sizeof buf - 1)
            n = 0;
    }
    return -1;
}

/* Waits up to timeout_ms for pid; kills it after that. Returns its exit status (0..255),
 * or 1000 + signal, or -1 on timeout. */
static inline int tu_wait_exit(pid_t pid, int timeout_ms)
{
    double t0 = cx_conf_now();
    int st;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
        if (r < 0)
            return -1;
        if ((cx_conf_now() - t0) * 1000 > timeout_ms) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return -1;
        }
        usleep(20000);
    }
}

/* Waits for two processes that work together: when one fails (non-zero exit), the other
 * gets 2 s more; after timeout_ms both are killed. Statuses as tu_wait_exit. */
static inline void tu_wait_pair(pid_t a, pid_t b, int timeout_ms, int *sa, int *sb)
{
    double t0 = cx_conf_now(), failed_at = 0;
    int st;
    *sa = a > 0 ? -2 : -1, *sb = b > 0 ? -2 : -1; /* -2: still running */
    while (*sa == -2 || *sb == -2) {
        for (int i = 0; i < 2; i++) {
            pid_t p = i ? b : a;
            int *s = i ? sb : sa;
            if (*s == -2 && waitpid(p, &st, WNOHANG) == p) {
                *s = WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
                if (*s != 0 && !failed_at)
                    failed_at = cx_conf_now();
            }
        }
        double now = cx_conf_now();
        if ((now - t0) * 1000 > timeout_ms || (failed_at && now - failed_at > 2)) {
            for (int i = 0; i < 2; i++)
                if ((i ? *sb : *sa) == -2) {
                    kill(i ? b : a, SIGKILL);
                    waitpid(i ? b : a, NULL, 0);
                    *(i ? sb : sa) = -1;
                }
        }
        usleep(20000);
    }
}

static inline void tu_stop(pid_t *pid)
{
    if (*pid > 0) {
        kill(*pid, SIGTERM);
        if (tu_wait_exit(*pid, 3000) < 0)
            fprintf(stderr, "  (a helper process ignored SIGTERM and was killed)\n");
        *pid = 0;
    }
}

/* Removes DPDK's runtime directory of an EAL file prefix (a killed process leaves it). */
static inline void tu_rm_runtime(const char *prefix)
{
    char dir[256], f[600];
    snprintf(dir, sizeof dir, "/var/run/dpdk/%s", prefix);
    DIR *d = opendir(dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(f, sizeof f, "%s/%s", dir, e->d_name);
            unlink(f);
        }
    closedir(d);
    rmdir(dir);
}

/* Runs a shell command quietly; returns its exit status. */
static inline int tu_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int tu_sh(const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    char full[1100];
    snprintf(full, sizeof full, "%s >/dev/null 2>&1", cmd);
    int st = system(full);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* ---- the memif switch process (dpdk_test_switch.h) and the processes on its ports ---- */

#define TU_EAL_COMMON "--no-huge --no-pci -m 160" /* no hugepages, no hardware */

struct tu_switch {
    char self[64];  /* prefix of every name the test makes (socket, EAL file prefixes) */
    char sock[128]; /* the memif socket, /tmp/<self>.sock */
    int nports;
    pid_t pid;
};

/* Starts this binary as `argv0 --cx-role switch` with nports memif ports, its names under
 * self (EAL file prefix <self>-sw). NULL, or why the memif tests cannot run here (in why). */
static inline const char *tu_switch_start(struct tu_switch *s, const char *self, const char *argv0,
                                          int nports, char *why, size_t cap)
{
    snprintf(s->self, sizeof s->self, "%s", self);
    snprintf(s->sock, sizeof s->sock, "/tmp/%s.sock", self);
    s->nports = nports;
    char prefix[96], n[16];
    snprintf(prefix, sizeof prefix, "%s-sw", self);
    snprintf(n, sizeof n, "%d", nports);
    char *argv[] = {(char *)argv0, "--cx-role", "switch", s->sock, n, prefix, NULL};
    int out = -1;
    s->pid = tu_spawn(NULL, NULL, argv, &out);
    int up = s->pid > 0 && tu_wait_line(out, "ready", 20000) == 0;
    if (out >= 0)
        close(out);
    if (up)
        return NULL;
    snprintf(why, cap, "the memif switch process did not start (see its EAL messages above)");
    return why;
}

/* Stops the switch; removes its socket and the EAL runtime directories of the switch and of
 * the processes on its ports (a killed process leaves them). */
static inline void tu_switch_stop(struct tu_switch *s)
{
    tu_stop(&s->pid);
    if (s->sock[0])
        unlink(s->sock);
    char p[96];
    for (int i = 0; i < s->nports; i++) {
        snprintf(p, sizeof p, "%s-%d", s->self, i);
        tu_rm_runtime(p);
    }
    snprintf(p, sizeof p, "%s-sw", s->self);
    tu_rm_runtime(p);
}

/* The CONFLUX_DPDK_ARGS entry of the process on port id: memif client id, its own EAL
 * file prefix <self>-<id>. */
static inline void tu_switch_port_args(const struct tu_switch *s, int id, char *out, size_t cap)
{
    snprintf(out, cap, "CONFLUX_DPDK_ARGS=" TU_EAL_COMMON " --file-prefix=%s-%d "
             "--vdev=net_memif0,role=client,id=%d,socket=%s,socket-abstract=no", s->self, id, id,
             s->sock);
}

/* ---- main(): the tests, or this binary exec'd again in a role ---- */

#define TU_NO_DPDK "DPDK not built in (pkg-config libdpdk not found: install libdpdk-dev)"

#ifdef CX_HAVE_DPDK
#define TU_RUN_ROLE(run_role, argc, argv) run_role(argc, argv)
#else
#define TU_RUN_ROLE(run_role, argc, argv) ((void)(argc), (void)(argv), 2) /* no roles */
#endif

/* `<binary> --cx-role <role> ...` runs run_role(argc, argv) (its exit status: the role's);
 * anything else runs the tests (cx_test.h). */
#define TU_TEST_MAIN_WITH_ROLES(run_role)                                                  \
    int tu_tests_main(int argc, char **argv);                                              \
    CX_TEST_MAIN_AS(tu_tests_main)                                                         \
    int main(int argc, char **argv)                                                        \
    {                                                                                      \
        if (argc > 2 && !strcmp(argv[1], "--cx-role"))                                     \
            return TU_RUN_ROLE(run_role, argc, argv);                                      \
        return tu_tests_main(argc, argv);                                                  \
    }

/* ---- the dpdk link with the stack the builder puts on a datagram link ---- */

static inline int tu_stack(int rc, struct cx_link *k, struct cx_link **out)
{
    if (rc < 0)
        return rc;
    if ((rc = cx_stack_assemble(&k, 1, out)) < 0)
        cx_link_close(k);
    return rc;
}

/* ---- the cross-process session: both ends run it on their end of one stack ---- */

struct tu_rx {
    struct cx_conf_rx ord;   /* ordered messages on channel 0 */
    struct cx_conf_big big;  /* the 64 MiB message on channel 1 */
    int bye;                 /* channel 2: the peer got everything */
};

static inline void tu_on_msg(void *arg, const struct cx_frame_hdr *h, const void *p, size_t n)
{
    struct tu_rx *r = arg;
    if (h->channel == 0)
        cx_conf_on_msg(&r->ord, h, p, n);
    else if (h->channel == 1)
        cx_conf_on_big(&r->big, h, p, n);
    else
        r->bye = 1;
}

/* 20 000 messages of 0..9 KB each way, checked in order and content, then 64 MiB each way;
 * each end says bye once it has all of it and lingers so the last acks get through.
 * Returns 0 or a description of what failed in why[]. */
static inline int tu_session(struct cx_link *k, char *why, size_t cap)
{
    enum { N = 20000 };
    static uint8_t buf[9000];
    size_t big_n = 64u << 20;
    uint32_t *big = malloc(big_n);
    if (!big)
        return snprintf(why, cap, "out of memory"), -1;
    for (size_t i = 0; i < big_n / 4; i++) big[i] = (uint32_t)(i * 2654435761u);
    struct tu_rx r;
    memset(&r, 0, sizeof r);
    uint64_t sent = 0;
    int big_sent = 0, bye_sent = 0, rc = 0;
    double t0 = cx_conf_now(), t_big = 0, t_bye = 0;
    while (cx_conf_now() - t0 < 90) {
        for (int i = 0; i < 16 && sent < N && cx_link_pending(k) < (4u << 20); i++) {
            size_t n = cx_conf_size(sent);
            for (size_t j = 0; j < n; j++) buf[j] = cx_conf_byte(sent, j);
            struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .seq = sent++};
            struct iovec v = {buf, n};
            if ((rc = cx_link_send(k, &h, &v, 1)) < 0)
                break;
        }
        if (rc < 0)
            break;
        if (sent == N && !big_sent && r.ord.next == N) {
            struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .channel = 1};
            struct iovec v = {big, big_n};
            if ((rc = cx_link_send(k, &h, &v, 1)) < 0)
                break;
            big_sent = 1;
            t_big = cx_conf_now();
        }
        if (big_sent && r.big.got && !bye_sent && cx_link_pending(k) == 0) {
            struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .channel = 2};
            if ((rc = cx_link_send(k, &h, NULL, 0)) < 0)
                break;
            bye_sent = 1;
        }
        if (bye_sent && r.bye && !t_bye)
            t_bye = cx_conf_now();
        if (t_bye && cx_conf_now() - t_bye > 0.5)
            break; /* lingered: the peer has had our last acks */
        rc = cx_link_progress(k, tu_on_msg, &r, 64);
        if (rc < 0) {
            if (bye_sent && r.bye)
                rc = 0; /* the peer finished and closed first */
            break;
        }
    }
    double dt = cx_conf_now() - t0, bt = t_big ? cx_conf_now() - t_big : 0;
    free(big);
    if (rc < 0)
        snprintf(why, cap, "link failed: %s", cx_errmsg());
    else if (r.ord.bad || r.ord.next != N)
        snprintf(why, cap, "ordered: got %llu of %d (bad %d)", (unsigned long long)r.ord.next, N,
                 r.ord.bad);
    else if (r.big.got != 1 || r.big.bad || r.big.len != big_n)
        snprintf(why, cap, "64 MiB: got %d, %zu bytes, bad %d", r.big.got, r.big.len, r.big.bad);
    else if (!r.bye)
        snprintf(why, cap, "no bye from the peer in %.0f s", dt);
    else
        return snprintf(why, cap, "20000 ordered messages and 64 MiB each way in %.2f s "
                                  "(64 MiB phase %.2f s)", dt, bt), 0;
    return -1;
}

#endif
