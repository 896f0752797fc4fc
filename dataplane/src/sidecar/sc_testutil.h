/* Helpers for the sidecar tests (header only, not part of the library): run build/bin/confluxd
 * in either role as a real process, read its "listening" line, speak HTTP/1.1 to it. */
#ifndef SC_TESTUTIL_H
#define SC_TESTUTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CONFLUXD "build/bin/confluxd"

struct proc {
    pid_t pid;
    int out;            /* its stdout */
    int err;            /* its stderr (a pipe), or -1 when inherited */
    char line[512];     /* its first stdout line */
};

/* Starts confluxd with argv (NULL-terminated, without the program name); waits up to 10 s
 * for its first stdout line. keep_err: capture stderr in p->err instead of inheriting it.
 * Returns 0, or -1 when it exited or said nothing (p->line then holds what it printed). */
static inline int proc_start(struct proc *p, const char *const *args, int keep_err)
{
    int o[2], e[2] = {-1, -1};
    memset(p, 0, sizeof *p);
    if (pipe(o) < 0 || (keep_err && pipe(e) < 0))
        return -1;
    const char *argv[32] = {CONFLUXD};
    for (int i = 0; args[i] && i < 30; i++)
        argv[i + 1] = args[i];
    if ((p->pid = fork()) == 0) {
        dup2(o[1], 1);
        if (keep_err)
            dup2(e[1], 2);
        close(o[0]);
        if (keep_err)
            close(e[0]);
        execv(CONFLUXD, (char *const *)argv);
        _exit(127);
    }
    close(o[1]);
    if (keep_err)
        close(e[1]);
    p->out = o[0];
    p->err = keep_err ? e[0] : -1;
    size_t n = 0;
    struct pollfd pf = {.fd = p->out, .events = POLLIN};
    while (n < sizeof p->line - 1 && poll(&pf, 1, 10000) == 1) {
        ssize_t r = read(p->out, p->line + n, 1);
        if (r <= 0)
            break;
        if (p->line[n] == '\n') {
            p->line[n] = 0;
            return 0;
        }
        n++;
    }
    p->line[n] = 0;
    return -1;
}

/* Sends sig and waits up to 10 s; returns the exit status (or 128 + signal, or -1). */
static inline int proc_stop(struct proc *p, int sig)
{
    if (p->pid <= 0)
        return -1;
    kill(p->pid, sig);
    int st = 0;
    for (int i = 0; i < 1000; i++) {
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid) {
            p->pid = 0;
            close(p->out);
            if (p->err >= 0)
                close(p->err);
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(10000);
    }
    kill(p->pid, SIGKILL);
    waitpid(p->pid, &st, 0);
    p->pid = 0;
    return -1;
}

#define CONFLUX_CLI "build/bin/conflux"

/* Runs the conflux CLI with args (stderr into out too); returns its exit status. */
static inline int run_cli(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline int run_cli(char *out, size_t cap, const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(cmd, sizeof cmd, "%s ", CONFLUX_CLI);
    vsnprintf(cmd + n, sizeof cmd - (size_t)n, fmt, ap);
    va_end(ap);
    strncat(cmd, " 2>&1", sizeof cmd - strlen(cmd) - 1);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t got = fread(out, 1, cap - 1, p);
    out[got] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Waits up to `seconds` for a child: its exit status (128 + signal when killed), or -1
 * after killing it when it did not end in time. */
static inline int wait_child(pid_t pid, int seconds)
{
    int st;
    for (int i = 0; i < seconds * 100; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

/* Reads what is left on fd (after the process ended) into buf. */
static inline size_t slurp(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    ssize_t r;
    while (n < cap - 1 && (r = read(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = 0;
    return n;
}

/* GET path from hostport ("127.0.0.1:9464"); returns the status code (-1 on failure) and
 * the body in body[cap]. */
static inline int http_get(const char *hostport, const char *path, char *body, size_t cap)
{
    char host[64];
    unsigned port;
    if (sscanf(hostport, "%63[^:]:%u", host, &port) != 2)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &sa.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    char req[512];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, hostport);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    static char resp[1 << 20];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof resp - 1 && (r = read(fd, resp + got, sizeof resp - 1 - got)) > 0)
        got += (size_t)r;
    resp[got] = 0;
    close(fd);
    int code = -1;
    if (sscanf(resp, "HTTP/1.%*d %d", &code) != 1)
        return -1;
    const char *b = strstr(resp, "\r\n\r\n");
    snprintf(body, cap, "%s", b ? b + 4 : "");
    return code;
}

/* The Nth space-separated word of s (0-based) into out. */
static inline const char *word(const char *s, int n, char *out, size_t cap)
{
    out[0] = 0;
    for (int i = 0; *s; i++) {
        size_t l = strcspn(s, " ");
        if (i == n) {
            snprintf(out, cap, "%.*s", (int)l, s);
            break;
        }
        s += l;
        while (*s == ' ')
            s++;
    }
    return out;
}

#endif
