/* Hostile peers for the tests of every listener (header only, test code): a raw TCP
 * connection that says nothing or starts a handshake it never finishes (half a TLS
 * ClientHello, part of a ucx worker address), and whether the server closed it yet. Used by ../space/hostile_test.c, ../pipe/pipe_links_test.c and
 * ../channel/channel_test.c. */
#ifndef HOSTILE_PEER_H
#define HOSTILE_PEER_H

#include "common/cx_frame.h"
#include "transport/cx_addr.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static inline double hp_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A raw connection to a server address, non-blocking: TCP for scheme://host:port, a Unix
 * socket for shm://@name (abstract) or shm:///path. -1 on failure. */
static inline int hp_connect(const char *url)
{
    const char *hp = strstr(url, "://");
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (!hp)
        return -1;
    if (strncmp(url, "shm://", 6) == 0) {
        struct sockaddr_un *un = (struct sockaddr_un *)&ss;
        size_t n = strlen(hp + 3);
        if (n == 0 || n >= sizeof un->sun_path)
            return -1;
        un->sun_family = AF_UNIX;
        memcpy(un->sun_path, hp + 3, n);
        if (un->sun_path[0] == '@')
            un->sun_path[0] = '\0';
        len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
    } else {
        if (cx_addr_inet(hp + 3, (struct sockaddr_in *)&ss) < 0)
            return -1;
        len = sizeof(struct sockaddr_in);
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

/* Sends a TLS record header announcing a 512-byte handshake message, and 5 bytes of it.
 * 0 or -1. */
static inline int hp_partial_client_hello(int fd)
{
    static const uint8_t hello[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03};
    return send(fd, hello, sizeof hello, MSG_NOSIGNAL) == (ssize_t)sizeof hello ? 0 : -1;
}

/* Sends the first half of a valid frame header announcing a 1000-byte message: a plain
 * tcp peer that started its first frame and never finishes it. 0 or -1. */
static inline int hp_partial_frame(int fd)
{
    struct cx_frame_hdr h = {.type = CX_FRAME_DATA, .length = 1000};
    uint8_t b[CX_FRAME_HDR_SIZE];
    cx_frame_encode(&h, b);
    return send(fd, b, sizeof b / 2, MSG_NOSIGNAL) == (ssize_t)(sizeof b / 2) ? 0 : -1;
}

/* The start of a handshake, never finished, for a listener of scheme: tls, half a
 * ClientHello; ucx, a 64-byte worker address announced and 5 bytes of it; tcp, half a frame
 * header; shm, nothing (its hello is one message: a partial one is a silent one). 0 or -1. */
static inline int hp_partial_handshake(int fd, const char *scheme)
{
    if (strcmp(scheme, "shm") == 0)
        return 0;
    if (strcmp(scheme, "tcp") == 0)
        return hp_partial_frame(fd);
    if (strcmp(scheme, "ucx") == 0) {
        static const uint8_t addr[] = {64, 0, 0, 0, 1, 2, 3, 4, 5};
        return send(fd, addr, sizeof addr, MSG_NOSIGNAL) == (ssize_t)sizeof addr ? 0 : -1;
    }
    return hp_partial_client_hello(fd);
}

/* 1 once the server closed fd (EOF or reset), waiting up to ms; reads and drops data. */
static inline int hp_closed_by_server(int fd, int ms)
{
    double end = hp_now_ms() + ms;
    char sink[65536];
    do {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        poll(&p, 1, 50);
        ssize_t r = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return 1;
    } while (hp_now_ms() < end);
    return 0;
}

#endif
