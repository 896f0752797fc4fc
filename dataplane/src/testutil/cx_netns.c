/* Network namespaces for tests; see cx_netns.h. The iproute2 tools do the netlink work
 * (namespaces as /run/netns bind mounts, veth, addresses, qdiscs): they are the reference
 * for those steps and keep this file small. */
#define _GNU_SOURCE
#include "testutil/cx_netns.h"

#include "common/cx_error.h"
#include "testutil/cx_netns_emu.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int cx_netns_run(char *const argv[], char *out, size_t cap)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return cx_err_set(errno, "netns: pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[1]);
    if (rc != 0) {
        close(pfd[0]);
        return cx_err_set(rc, "netns: cannot run %s: %s", argv[0], strerror(rc));
    }
    size_t got = 0;
    char sink[512];
    for (;;) { /* drain the pipe even when out is NULL, so the child never blocks */
        char *dst = out && got + 1 < cap ? out + got : sink;
        size_t room = out && got + 1 < cap ? cap - 1 - got : sizeof sink;
        ssize_t r = read(pfd[0], dst, room);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (dst != sink)
            got += (size_t)r;
    }
    close(pfd[0]);
    if (out && cap)
        out[got] = 0;
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return cx_err_set(errno, "netns: waitpid: %s", strerror(errno));
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    return cx_err_set(EINTR, "netns: %s killed by signal %d", argv[0], WTERMSIG(st));
}

/* Runs a command given as words (NULL-terminated); a non-zero exit becomes an error whose
 * message names the command and repeats its output. */
static int run_words(const char *const *words)
{
    char out[1024], cmd[512] = "";
    int rc = cx_netns_run((char *const *)words, out, sizeof out);
    if (rc == 0)
        return 0;
    for (const char *const *w = words; *w; w++)
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), "%s%s", w == words ? "" : " ", *w);
    out[strcspn(out, "\n")] = 0;
    if (rc < 0)
        return cx_err_wrap(rc, "netns: '%s'", cmd);
    return cx_err_set(EIO, "netns: '%s' failed (exit %d): %s", cmd, rc, out);
}

#define RUN(...) run_words((const char *const[]){__VA_ARGS__, NULL})

const char *cx_netns_unavailable(void)
{
    if (geteuid() != 0)
        return "network namespaces need root (run the test as root)";
    char out[256];
    int rc = cx_netns_run((char *const[]){"ip", "netns", "list", NULL}, out, sizeof out);
    if (rc < 0)
        return "the 'ip' command (iproute2) is not installed";
    if (rc != 0)
        return "'ip netns list' fails here (no network namespace support?)";
    rc = cx_netns_run((char *const[]){"tc", "-V", NULL}, out, sizeof out);
    if (rc != 0)
        return "the 'tc' command (iproute2) is not installed";
    return NULL;
}

/* Parses "<prefix><pid>[ab]"; returns the pid or 0 when name is not one of ours. */
static long owner_pid(const char *prefix, const char *name)
{
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0)
        return 0;
    char *end;
    long pid = strtol(name + n, &end, 10);
    if (end == name + n || pid <= 0 || (end[0] != 'a' && end[0] != 'b') || end[1])
        return 0;
    return pid;
}

int cx_netns_clean_stale(const char *prefix)
{
    DIR *d = opendir("/run/netns");
    if (!d)
        return 0;
    char stale[32][CX_NETNS_NAME_MAX];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 32) {
        long pid = owner_pid(prefix, e->d_name);
        size_t len = strlen(e->d_name);
        if (pid && len < CX_NETNS_NAME_MAX && kill((pid_t)pid, 0) < 0 && errno == ESRCH)
            memcpy(stale[n++], e->d_name, len + 1);
    }
    closedir(d);
    for (int i = 0; i < n; i++)
        RUN("ip", "netns", "del", stale[i]);
    cx_err_clear();
    return n;
}

/* ---- the at-exit safety net: pairs a test forgot (returned early) are removed ---- */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static char reg[8][2][CX_NETNS_NAME_MAX];
static int reg_hooked;

static void reg_cleanup(void)
{
    pthread_mutex_lock(&reg_lock);
    for (int i = 0; i < 8; i++)
        for (int s = 0; s < 2; s++)
            if (reg[i][s][0]) {
                RUN("ip", "netns", "del", reg[i][s]);
                reg[i][s][0] = 0;
            }
    pthread_mutex_unlock(&reg_lock);
}

static void reg_set(const struct cx_netns_pair *p, int add)
{
    pthread_mutex_lock(&reg_lock);
    if (!reg_hooked) {
        atexit(reg_cleanup);
        reg_hooked = 1;
    }
    for (int i = 0; i < 8; i++) {
        if (add ? reg[i][0][0] == 0 : strcmp(reg[i][0], p->ns[0]) == 0) {
            for (int s = 0; s < 2; s++)
                snprintf(reg[i][s], CX_NETNS_NAME_MAX, "%s", add ? p->ns[s] : "");
            break;
        }
    }
    pthread_mutex_unlock(&reg_lock);
}

int cx_netns_pair_create(const char *prefix, struct cx_netns_pair *p)
{
    memset(p, 0, sizeof *p);
    if (!prefix || !*prefix || strlen(prefix) > 6)
        return cx_err_set(EINVAL, "netns: prefix '%s' must be 1 to 6 characters",
                          prefix ? prefix : "(null)");
    cx_netns_clean_stale(prefix);
    for (int s = 0; s < 2; s++) {
        char name[64]; /* at most 6 + 7 (pid_max is 2^22) + 1 characters */
        snprintf(name, sizeof name, "%s%u%c", prefix, (unsigned)getpid() % 10000000u, 'a' + s);
        memcpy(p->ns[s], name, CX_NETNS_NAME_MAX - 1);
        memcpy(p->dev[s], name, CX_NETNS_NAME_MAX - 1);
        p->ip[s][0] = 0;
        strcat(p->ip[s], s ? "10.213.0.2" : "10.213.0.1");
    }
    /* ours from an earlier test in this process that returned early: start afresh */
    RUN("ip", "netns", "del", p->ns[0]);
    RUN("ip", "netns", "del", p->ns[1]);
    cx_err_clear();
    int rc;
    if ((rc = RUN("ip", "netns", "add", p->ns[0])) < 0)
        return rc;
    if ((rc = RUN("ip", "netns", "add", p->ns[1])) < 0) {
        RUN("ip", "netns", "del", p->ns[0]);
        return rc;
    }
    p->live = 1;
    reg_set(p, 1);
    /* the veth is born with each end already inside its namespace: nothing is ever left
     * in the root namespace, even if we die half way */
    rc = RUN("ip", "link", "add", "name", p->dev[0], "netns", p->ns[0], "type", "veth", "peer",
             "name", p->dev[1], "netns", p->ns[1]);
    for (int s = 0; s < 2 && rc == 0; s++) {
        char cidr[24];
        snprintf(cidr, sizeof cidr, "%s/24", p->ip[s]);
        if ((rc = RUN("ip", "-n", p->ns[s], "addr", "add", cidr, "dev", p->dev[s])) == 0 &&
            (rc = RUN("ip", "-n", p->ns[s], "link", "set", "lo", "up")) == 0)
            rc = RUN("ip", "-n", p->ns[s], "link", "set", p->dev[s], "up");
    }
    if (rc != 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", cx_errmsg());
        cx_netns_pair_destroy(p);
        return cx_err_set(rc < 0 ? -rc : EIO, "%s", msg);
    }
    return 0;
}

int cx_netns_impair(struct cx_netns_pair *p, int side, const char *netem)
{
    if (!p->live || side < -1 || side > 1 || !netem)
        return cx_err_set(EINVAL, "netns: impair needs a live pair, side -1, 0 or 1 and netem args");
    struct cx_netns_emu_params prm;
    int rc = cx_netns_emu_parse(netem, &prm); /* also validates before anything is changed */
    char buf[256];
    snprintf(buf, sizeof buf, "%s", netem);
    const char *words[48] = {"tc", "-n", NULL, "qdisc", "replace", "dev", NULL, "root", "netem"};
    int n = 9;
    for (char *save, *t = strtok_r(buf, " \t", &save); t && n < 46; t = strtok_r(NULL, " \t", &save))
        words[n++] = t;
    words[n] = NULL;
    for (int s = 0; s < 2; s++) {
        if (side != -1 && side != s)
            continue;
        if (!p->impair_method || !strcmp(p->impair_method, "tc netem")) {
            words[2] = p->ns[s];
            words[6] = p->dev[s];
            char out[512];
            int r = cx_netns_run((char *const *)words, out, sizeof out);
            if (r == 0) {
                p->impair_method = "tc netem";
                continue;
            }
            if (r < 0 || !strstr(out, "qdisc kind is unknown")) {
                out[strcspn(out, "\n")] = 0;
                return r < 0 ? r : cx_err_set(EIO, "netns: tc netem on %s failed: %s", p->dev[s], out);
            }
        }
        /* no netem in this kernel: the emulation */
        if (rc < 0)
            return rc;
        if (p->emu[s]) {
            cx_netns_emu_stop(p->emu[s]);
            p->emu[s] = NULL;
        }
        p->impair_method = "iptables statistic/TEE + NFQUEUE delay (kernel has no netem)";
        int o = 1 - s;
        if ((rc = cx_netns_emu_start(p->ns[s], p->dev[s], p->ns[o], p->dev[o], p->ip[o], &prm,
                                     &p->emu[s])) < 0)
            return rc;
    }
    return 0;
}

void cx_netns_impair_counts(const struct cx_netns_pair *p, int side, unsigned long long out[3])
{
    out[0] = out[1] = out[2] = 0;
    if (side >= 0 && side <= 1 && p->emu[side])
        cx_netns_emu_counts(p->emu[side], out);
}

void cx_netns_pair_destroy(struct cx_netns_pair *p)
{
    if (!p->live)
        return;
    for (int s = 0; s < 2; s++) {
        cx_netns_emu_stop(p->emu[s]);
        p->emu[s] = NULL;
    }
    RUN("ip", "netns", "del", p->ns[0]); /* the veth and qdiscs go with their namespace */
    RUN("ip", "netns", "del", p->ns[1]);
    cx_err_clear();
    reg_set(p, 0);
    p->live = 0;
}

int cx_netns_enter(const char *ns)
{
    char path[64 + CX_NETNS_NAME_MAX];
    snprintf(path, sizeof path, "/run/netns/%s", ns);
    int target = open(path, O_RDONLY | O_CLOEXEC);
    if (target < 0)
        return cx_err_set(errno, "netns: open %s: %s", path, strerror(errno));
    int saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (saved < 0) {
        int e = errno;
        close(target);
        return cx_err_set(e, "netns: open /proc/thread-self/ns/net: %s", strerror(e));
    }
    if (setns(target, CLONE_NEWNET) < 0) {
        int e = errno;
        close(target), close(saved);
        return cx_err_set(e, "netns: setns into %s: %s", ns, strerror(e));
    }
    close(target);
    return saved;
}

int cx_netns_leave(int saved)
{
    int rc = setns(saved, CLONE_NEWNET) < 0 ? cx_err_set(errno, "netns: setns back: %s", strerror(errno)) : 0;
    close(saved);
    return rc;
}
