/* Address parsing and socket helpers shared by the network drivers (see cx_addr.h). */
#include "transport/cx_addr.h"

#include "common/cx_error.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

const char *cx_addr_strip(const char *addr, const char *scheme)
{
    size_t n = strlen(scheme);
    if (!addr || strncmp(addr, scheme, n) != 0 || strncmp(addr + n, "://", 3) != 0)
        return NULL;
    return addr + n + 3;
}

int cx_addr_inet(const char *hostport, struct sockaddr_in *sa)
{
    char host[256];
    const char *colon = hostport ? strrchr(hostport, ':') : NULL;
    if (!colon || (size_t)(colon - hostport) >= sizeof host || colon == hostport)
        return cx_err_set(EINVAL, "address '%s': expected host:port", hostport ? hostport : "");
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || port < 0 || port > 65535)
        return cx_err_set(EINVAL, "address '%s': bad port", hostport);
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa->sin_addr) == 1)
        return 0;
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
        return cx_err_set(EINVAL, "address '%s': cannot resolve host '%s'", hostport, host);
    sa->sin_addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
    freeaddrinfo(res);
    return 0;
}

void cx_addr_format_inet(const char *scheme, const struct sockaddr_in *sa, char *out, size_t cap)
{
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof ip);
    snprintf(out, cap, "%s://%s:%u", scheme, ip, ntohs(sa->sin_port));
}

int cx_tcp_listen_fd(const char *hostport, struct sockaddr_in *bound)
{
    struct sockaddr_in sa;
    int rc = cx_addr_inet(hostport, &sa);
    if (rc < 0)
        return rc;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return cx_err_set(errno, "socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 64) < 0) {
        int e = errno;
        close(fd);
        return cx_err_set(e, "listen on %s: %s", hostport, strerror(e));
    }
    socklen_t len = sizeof *bound;
    getsockname(fd, (struct sockaddr *)bound, &len);
    return fd;
}

int cx_tcp_connect_fd(const char *hostport)
{
    struct sockaddr_in sa;
    int rc = cx_addr_inet(hostport, &sa);
    if (rc < 0)
        return rc;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return cx_err_set(errno, "socket: %s", strerror(errno));
    int e = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 ? 0 : errno;
    if (e == EINPROGRESS || e == EINTR) { /* wait, with a deadline, for the handshake */
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        int n;
        while ((n = poll(&pf, 1, CX_TCP_CONNECT_TIMEOUT_MS)) < 0 && errno == EINTR) {
        }
        socklen_t el = sizeof e;
        if (n == 0)
            e = ETIMEDOUT;
        else if (n < 0)
            e = errno;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
            e = errno;
    }
    if (e) {
        close(fd);
        if (e == ETIMEDOUT)
            return cx_err_set(e, "connect to %s: no answer in %d ms", hostport, CX_TCP_CONNECT_TIMEOUT_MS);
        return cx_err_set(e, "connect to %s: %s", hostport, strerror(e));
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK); /* blocking, as callers expect */
    return fd;
}

void cx_tcp_tune(int fd)
{
    int one = 1, buf = 4 << 20;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

int cx_fd_read_full(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r == 0)
            return cx_err_set(ECONNRESET, "peer closed the connection");
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return cx_err_set(errno, "read: %s", strerror(errno));
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int cx_fd_write_full(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t r = send(fd, p, n, MSG_NOSIGNAL);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return cx_err_set(errno, "write: %s", strerror(errno));
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}
