/* The bare DPDK peer's hot-spot (bench/micro's hotspot_lat and hotspot_bw beside the dpdk
 * driver's): one client, the hot node (id HOT_ID), and servers 1..N, each a process of its
 * own on a port of bench/micro's memif_switch or, over af_packet, on a veth to a Linux
 * bridge; frames go by MAC address. No reliability: a lost ping is sent again after 0.5 s, a
 * lost window end again after 50 ms, and the frames lost are counted ("lost"), the bandwidth
 * counting the bytes that arrived. Frames carry a run and round number at byte 22, so a late
 * answer of an earlier round is never taken for the current one. */
#define _GNU_SOURCE
#include "dpdk_bare.h"

#include <rte_ethdev.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HOT_MAX 16

static uint64_t hot_run; /* the high 32 bits of every tag */

static void send_to(uint8_t id, struct rte_mbuf *m)
{
    frame_dst = id;
    address(m);
    send_burst(&m, 1);
}

void hot_lat(long rounds, int peers)
{
    uint8_t ping[8] = {0};
    long warm = rounds / 10 + 20, lost = 0;
    double t0 = 0;
    hot_run++;
    for (long i = 0; i < warm + rounds; i++) {
        if (i == warm) t0 = now();
        int got[HOT_MAX + 1] = {0}, have = 0;
        frame_tag = hot_run << 32 | (uint64_t)(i + 1);
        for (int j = 1; j <= peers; j++) send_to((uint8_t)j, frame(M_ECHO, sizeof ping, ping));
        double sent = now();
        while (have < peers) {
            struct rte_mbuf *m[BURST];
            uint16_t n = rte_eth_rx_burst(0, 0, m, BURST);
            for (uint16_t x = 0; x < n; x++) {
                uint8_t s = sender(m[x]);
                if (mark(m[x]) == M_ECHO && num(m[x], 22) == frame_tag && s >= 1 && s <= peers && !got[s])
                    got[s] = 1, have++;
            }
            rte_pktmbuf_free_bulk(m, n);
            if (!n && now() - sent > 0.5) { /* lost (af_packet): ask the silent ones again */
                for (int j = 1; j <= peers; j++)
                    if (!got[j]) send_to((uint8_t)j, frame(M_ECHO, sizeof ping, ping)), lost++;
                if (lost > 10000) fail("hot-spot echoes keep being lost");
                sent = now();
            }
        }
    }
    double dt = now() - t0;
    frame_tag = 0;
    printf("{\"driver\":\"dpdk-bare\",\"test\":\"hotspot_lat\",\"as\":\"hotspot_lat\",\"peers\":%d,\"size\":8,"
           "\"n\":%ld,\"one_way_us\":%.3f,\"lost\":%ld}\n", peers, rounds, dt / (double)rounds * 1e6 / 2, lost);
}

void hot_bw(long windows, size_t size, long q, int peers)
{
    uint64_t bytes[HOT_MAX + 1] = {0}, done[HOT_MAX + 1] = {0};
    uint64_t cmd[3];
    int finished = 0;
    hot_run++;
    double t0 = now(), last = t0;
    for (int j = 1; j <= peers; j++) { /* windows at 14, the run at 22, size and q at 30 */
        struct rte_mbuf *m = frame(M_HSTREAM, 0, NULL);
        cmd[0] = (uint64_t)windows, cmd[1] = hot_run << 32, cmd[2] = (uint64_t)size | (uint64_t)q << 32;
        memcpy(rte_pktmbuf_mtod(m, uint8_t *) + 14, cmd, sizeof cmd);
        send_to((uint8_t)j, m);
    }
    while (finished < peers) {
        struct rte_mbuf *m[BURST];
        uint16_t n = rte_eth_rx_burst(0, 0, m, BURST);
        for (uint16_t x = 0; x < n; x++) {
            uint8_t mk = mark(m[x]), s = sender(m[x]);
            uint64_t tag = num(m[x], 22), win = tag & 0xffffffffu;
            if ((mk != M_PEER && mk != M_HWEND) || s < 1 || s > peers) continue;
            if (mk == M_HWEND) { /* always answered: a repeated end means our answer was lost */
                frame_tag = tag;
                send_to(s, frame(M_HACK, 0, NULL));
            }
            if (tag >> 32 != hot_run || (mk == M_HWEND && win <= done[s])) continue; /* old or repeated */
            bytes[s] += m[x]->data_len - HDRS;
            if (mk == M_HWEND) {
                done[s] = win;
                finished += win == (uint64_t)windows;
            }
        }
        rte_pktmbuf_free_bulk(m, n);
        if (n) last = now();
        else if (now() - last > WAIT_S) fail("no hot-spot stream frame for 10 s");
    }
    double dt = now() - t0;
    frame_tag = 0;
    uint64_t got = 0, want = (uint64_t)peers * (uint64_t)windows * (uint64_t)q * size;
    for (int j = 1; j <= peers; j++) got += bytes[j];
    long lost = got < want ? (long)((want - got + PAYLOAD - 1) / PAYLOAD) : 0;
    printf("{\"driver\":\"dpdk-bare\",\"test\":\"hotspot_bw\",\"as\":\"hotspot_bw\",\"peers\":%d,\"size\":%zu,"
           "\"q\":%ld,\"n\":%ld,\"MBps\":%.1f,\"lost\":%ld}\n", peers, size, q, windows * q,
           (double)got / dt / 1e6, lost);
}

/* The server: windows of q messages to the hot node, each window's last frame M_HWEND with
 * the window's tag, the next window once the hot node answered it (the window end sent
 * again every 50 ms meanwhile; after 10 s the stream is given up: the client counts it). */
void hot_srv_stream(struct rte_mbuf *c)
{
    uint64_t windows = num(c, 14), base = num(c, 22), sq = num(c, 30);
    size_t size = (size_t)(sq & 0xffffffffu), q = (size_t)(sq >> 32);
    if (size > (1u << 20) || !q || q > 1024) return;
    uint8_t *buf = calloc(1, size ? size : 1);
    size_t last_len = size - (frames_of(size) - 1) * PAYLOAD;
    for (uint64_t w = 1; w <= windows; w++) {
        frame_tag = base | w;
        for (size_t i = 0; i < q; i++) send_msg(size, M_PEER, i == q - 1 ? M_HWEND : M_PEER, buf);
        double t0 = now(), sent = t0;
        for (int acked = 0; !acked;) {
            struct rte_mbuf *m[BURST];
            uint16_t n = rte_eth_rx_burst(0, 0, m, BURST);
            for (uint16_t x = 0; x < n; x++) acked |= mark(m[x]) == M_HACK && num(m[x], 22) == frame_tag;
            rte_pktmbuf_free_bulk(m, n);
            if (acked || n) continue;
            if (now() - t0 > WAIT_S) goto out;
            if (now() - sent > 0.05) {
                struct rte_mbuf *e = frame(M_HWEND, last_len, buf);
                send_burst(&e, 1);
                sent = now();
            }
        }
    }
out:
    frame_tag = 0;
    free(buf);
}
