/* The sidecar's engine: one thread holds the Unix socket and every application connection
 * in an epoll set; a connection whose socket turns readable (a hello, a wake-up byte, a
 * hang-up) goes onto a work queue, and a worker serves it until it has nothing left to do
 * within its spin window, then gives it back to the set. Workers start on demand (up to
 * SC_MAX_WORKERS, for calls that block, like a pi_read with a deadline) and exit after
 * SC_WORKER_IDLE_S idle, so 10,000 idle connections cost a socket, a region and a struct
 * each, not a thread, and an idle sidecar has no thread awake. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sidecar/cx_sidecar_int.h"
#include "common/cx_error.h"
#include "sidecar/cx_sc_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SC_MAX_WORKERS 256
#define SC_WORKER_IDLE_S 5

static int arm(struct cx_sidecar *sc, struct sc_conn *c, int op)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.ptr = c};
    return epoll_ctl(sc->epfd, op, c->fd, &ev);
}

static void *worker_main(void *arg)
{
    struct cx_sidecar *sc = arg;
    pthread_mutex_lock(&sc->qmu);
    for (;;) {
        while (!sc->qhead && !sc->engine_stopping) {
            struct timespec dl;
            clock_gettime(CLOCK_REALTIME, &dl);
            dl.tv_sec += SC_WORKER_IDLE_S;
            sc->idle_workers++;
            int rc = pthread_cond_timedwait(&sc->qcv, &sc->qmu, &dl);
            sc->idle_workers--;
            if (rc == ETIMEDOUT && !sc->qhead)
                goto out;
        }
        if (!sc->qhead)
            goto out;
        struct sc_conn *c = sc->qhead;
        sc->qhead = c->qnext;
        if (!sc->qhead)
            sc->qtail = NULL;
        sc->qlen--;
        pthread_mutex_unlock(&sc->qmu);
        if (cx__sc_conn_serve(c) && arm(sc, c, EPOLL_CTL_MOD) == 0) {
        } else {
            cx__sc_conn_close(c);
        }
        pthread_mutex_lock(&sc->qmu);
    }
out:
    sc->workers--;
    pthread_cond_broadcast(&sc->qcv);
    pthread_mutex_unlock(&sc->qmu);
    return NULL;
}

/* Queues a connection with work; starts a worker when every idle one is spoken for. */
static void dispatch(struct cx_sidecar *sc, struct sc_conn *c)
{
    pthread_mutex_lock(&sc->qmu);
    c->qnext = NULL;
    if (sc->qtail)
        sc->qtail->qnext = c;
    else
        sc->qhead = c;
    sc->qtail = c;
    sc->qlen++;
    if (sc->qlen > sc->idle_workers && sc->workers < SC_MAX_WORKERS) {
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&at, 1u << 20);
        if (pthread_create(&t, &at, worker_main, sc) == 0)
            sc->workers++;
        pthread_attr_destroy(&at);
    }
    pthread_cond_signal(&sc->qcv);
    pthread_mutex_unlock(&sc->qmu);
}

/* Out of descriptors: accept with the one held in reserve and close at once, so the
 * application gets a clear refusal and the listening socket stops reporting readable. */
static void refuse_one(struct cx_sidecar *sc)
{
    static _Atomic uint64_t last_log;
    if (sc->spare_fd >= 0) {
        close(sc->spare_fd);
        int fd = accept4(sc->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0)
            close(fd);
        sc->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    uint64_t now = cx__sc_now_ns();
    if (now - last_log > 1000000000u) {
        last_log = now;
        cx_sc_log("warn", "out of file descriptors: refusing an application connection",
                  "\"connections\":%d", sc->nconns);
    }
}

static void accept_all(struct cx_sidecar *sc)
{
    for (;;) {
        int fd = accept4(sc->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if ((errno == EMFILE || errno == ENFILE) && sc->spare_fd >= 0) {
                refuse_one(sc);
                continue;
            }
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return;
        }
        struct sc_conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        c->sc = sc;
        c->fd = fd;
        pthread_mutex_lock(&sc->mu);
        c->next = sc->conns;
        if (sc->conns)
            sc->conns->prev = c;
        sc->conns = c;
        sc->nconns++;
        pthread_mutex_unlock(&sc->mu);
        if (arm(sc, c, EPOLL_CTL_ADD) < 0)
            cx__sc_conn_close(c);
    }
}

static void *engine_main(void *arg)
{
    struct cx_sidecar *sc = arg;
    struct epoll_event evs[64];
    for (;;) {
        int n = epoll_wait(sc->epfd, evs, 64, -1);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &sc->stop_pipe)
                return NULL;
            if (p == &sc->lfd)
                accept_all(sc);
            else
                dispatch(sc, p);
        }
    }
    return NULL;
}

int cx__sc_engine_start(struct cx_sidecar *sc)
{
    pthread_mutex_init(&sc->qmu, NULL);
    pthread_cond_init(&sc->qcv, NULL);
    sc->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    /* accept until EAGAIN, never blocking the engine */
    if (fcntl(sc->lfd, F_SETFL, fcntl(sc->lfd, F_GETFL) | O_NONBLOCK) < 0)
        return cx_err_set(errno, "socket: %s", strerror(errno));
    if ((sc->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
        return cx_err_set(errno, "epoll: %s", strerror(errno));
    struct epoll_event l = {.events = EPOLLIN, .data.ptr = &sc->lfd};
    struct epoll_event s = {.events = EPOLLIN, .data.ptr = &sc->stop_pipe};
    if (epoll_ctl(sc->epfd, EPOLL_CTL_ADD, sc->lfd, &l) < 0 ||
        epoll_ctl(sc->epfd, EPOLL_CTL_ADD, sc->stop_pipe[0], &s) < 0)
        return cx_err_set(errno, "epoll: %s", strerror(errno));
    int rc = pthread_create(&sc->engine, NULL, engine_main, sc);
    if (rc)
        return cx_err_set(rc, "engine thread: %s", strerror(rc));
    sc->engine_on = 1;
    return 0;
}

void cx__sc_engine_stop_accepting(struct cx_sidecar *sc)
{
    if (sc->epfd >= 0)
        epoll_ctl(sc->epfd, EPOLL_CTL_DEL, sc->lfd, NULL);
}

int cx__sc_engine_stop(struct cx_sidecar *sc, int wait_s)
{
    int left = 0;
    if (sc->engine_on) {
        if (write(sc->stop_pipe[1], "x", 1) < 0) { /* the pipe is empty: cannot fail */
        }
        pthread_join(sc->engine, NULL);
        sc->engine_on = 0;
    }
    pthread_mutex_lock(&sc->qmu);
    sc->engine_stopping = 1;
    pthread_cond_broadcast(&sc->qcv);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += wait_s;
    while (sc->workers > 0 && pthread_cond_timedwait(&sc->qcv, &sc->qmu, &dl) == 0) {
    }
    left = sc->workers;
    pthread_mutex_unlock(&sc->qmu);
    if (sc->epfd >= 0)
        close(sc->epfd);
    if (sc->spare_fd >= 0)
        close(sc->spare_fd);
    sc->epfd = sc->spare_fd = -1;
    return left;
}
