/* The bare DPDK peer's server: echoes pings, counts streamed payload and answers each
 * window's end with the count, its CPU seconds and the window's number, and runs the
 * bidirectional tests the client asks for. */
#define _GNU_SOURCE
#include "dpdk_bare.h"

#include <rte_ethdev.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile int srv_stop; /* SIGTERM: leave the loop, clean the EAL's files up */
static void on_term(int sig) { (void)sig; srv_stop = 1; }
void server_signals(void) { signal(SIGTERM, on_term); }
static uint64_t srv_bytes, srv_data_frames;
static uint8_t *srv_buf;

/* Serves one frame: echoes, counts, window ends. Returns its mark; a command's mbuf is the
 * caller's to free, every other one is consumed. */
static uint8_t serve_frame(struct rte_mbuf *m)
{
    uint8_t mk = mark(m);
    if (mk == M_DATA || mk == M_WEND) srv_bytes += m->data_len - HDRS;
    srv_data_frames += mk == M_DATA;
    if (mk == M_ECHO) {
        address(m); /* back to the sender */
        send_burst(&m, 1);
        return mk;
    }
    if (mk == M_WEND) { /* the count, the window's number, our CPU seconds */
        struct rte_mbuf *a = frame(M_WEND, 0, NULL);
        uint64_t tag = num(m, 22);
        double cpu = proc_cpu();
        memcpy(rte_pktmbuf_mtod(a, uint8_t *) + 14, &srv_bytes, 8);
        memcpy(rte_pktmbuf_mtod(a, uint8_t *) + 22, &tag, 8);
        memcpy(rte_pktmbuf_mtod(a, uint8_t *) + 30, &cpu, 8);
        send_burst(&a, 1);
    }
    else if (mk == M_RESET) srv_bytes = 0;
    if (mk != M_BILAT && mk != M_BIBW && mk != M_HSTREAM) rte_pktmbuf_free(m);
    return mk;
}

static void srv_drain(void)
{
    struct rte_mbuf *m[BURST];
    uint16_t n = rte_eth_rx_burst(0, 0, m, BURST);
    for (uint16_t i = 0; i < n; i++) {
        uint8_t mk = serve_frame(m[i]);
        if (mk == M_BILAT || mk == M_BIBW || mk == M_HSTREAM) rte_pktmbuf_free(m[i]); /* no command inside a command */
    }
}

/* Each round: our message out, then wait for the client's (counted from base on). */
static void srv_bilat(uint64_t rounds, size_t size, uint64_t base)
{
    size_t fr = frames_of(size);
    double t0 = now();
    for (uint64_t i = 0; i < rounds; i++) {
        send_msg(size, M_PEER, M_PEER, srv_buf);
        while (srv_data_frames - base < (i + 1) * fr) {
            srv_drain();
            if (now() - t0 > WAIT_S * 10) return;
        }
    }
}

static void srv_bibw(uint64_t n, size_t size)
{
    drain_fn = srv_drain;
    for (uint64_t i = 0; i < n; i++) {
        send_msg(size, M_PEER, i == n - 1 ? M_PEND : M_PEER, srv_buf);
        srv_drain();
    }
    drain_fn = NULL;
}

int srv_idle_sleep;

int server(void)
{
    struct rte_mbuf *m[BURST];
    struct rte_eth_link l;
    double last_check = now();
    unsigned idle = 0;
    srv_buf = calloc(1, 1 << 20);
    while (!srv_stop) {
        uint16_t n = rte_eth_rx_burst(0, 0, m, BURST);
        uint8_t cmd = 0;
        uint64_t a = 0, b = 0, base = 0;
        for (uint16_t i = 0; i < n; i++) {
            uint8_t mk = serve_frame(m[i]);
            if (mk == M_BILAT || mk == M_BIBW) { /* run once the rest of the burst is served */
                cmd = mk, a = num(m[i], 14), b = num(m[i], 22), base = srv_data_frames;
                rte_pktmbuf_free(m[i]);
            } else if (mk == M_HSTREAM) {
                hot_srv_stream(m[i]);
                rte_pktmbuf_free(m[i]);
            } else if (mk == M_QUIT) {
                goto out;
            }
        }
        if (n) idle = 0;
        else if (srv_idle_sleep && ++idle > 2000) /* as memif_switch: 20 us, then 200 us */
            usleep(idle > 20000 ? 200 : 20);
        if (b > (1u << 20)) b = 1u << 20;
        if (cmd == M_BILAT) srv_bilat(a, b, base);
        else if (cmd == M_BIBW) srv_bibw(a, b);
        if (!n && is_memif && now() - last_check > 0.2) {
            last_check = now();
            rte_eth_link_get_nowait(0, &l);
            if (!l.link_status) break; /* the client left */
        }
    }
out:
    stop();
    return 0;
}

