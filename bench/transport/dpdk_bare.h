/* The bare DPDK peer's port and frames (dpdk_pingpong.c is the program): the EAL and one
 * ethdev port (memif or af_packet), frames of the dpdk driver's sizes marked with what they
 * are, sending with back-pressure, clocks. */
#ifndef DPDK_BARE_H
#define DPDK_BARE_H

#include <rte_mbuf.h>

#include <stddef.h>
#include <stdint.h>

#define HDRS 90u      /* Ethernet 14 + IPv4 20 + UDP 8 + Conflux frame header 48 */
#define PAYLOAD 1424u /* per full frame at MTU 1500 */
#define BURST 32
#define WAIT_S 10.0

/* Every frame is addressed (MAC 02:cf:00:00:00:<id>, so a learning switch or a Linux bridge
 * forwards it: the hot-spot's ends), has the local experimental ethertype 0x88b5 (stray
 * kernel frames on a veth do not), says what it is at byte 38 and carries numbers at bytes
 * 14, 22 and 30. A frame for another id is not ours (a switch floods the unknown). */
enum {
    M_ECHO = 0xab,  /* answer with the same frame (lat) */
    M_DATA = 0xcd,  /* count its payload */
    M_WEND = 0xee,  /* count, then answer with the payload bytes counted since M_RESET */
    M_RESET = 0xc1, /* zero the count */
    M_BILAT = 0xc2, /* run bilat: n = rounds, size in the frame (both as u64 at 14, 22) */
    M_BIBW = 0xc3,  /* run bibw likewise */
    M_PEER = 0xd0,  /* a message frame the server sends in bilat/bibw */
    M_PEND = 0xd1,  /* the last frame of the server's bibw stream */
    M_QUIT = 0xdd,
    M_HSTREAM = 0xc4, /* hot-spot: stream windows to the hot node (dpdk_bare_hot.c) */
    M_HWEND = 0xc5,   /* the last frame of such a window */
    M_HACK = 0xc6,    /* the hot node's answer to it */
};
#define HOT_ID 200 /* the hot node's (and the pair's client's) id; servers are 1..N */

double now(void);
int cmp(const void *a, const void *b); /* qsort of doubles */
void spin_ns(double ns);               /* computes (busy arithmetic) for about ns */
double proc_cpu(void);                 /* this process's user + system seconds */
double thread_cpu(void);               /* CLOCK_THREAD_CPUTIME_ID */
void fail(const char *what) __attribute__((noreturn));

extern int is_memif; /* the port is memif (it has a link state), else af_packet */
/* Starts the EAL and port 0: role "server" or "client", port a memif socket path,
 * switch:<path>:<id> (memif client interface <id> of bench/micro's memif_switch) or
 * af_packet:<iface>; the server prints "ready" once the port runs. */
void start(const char *role, const char *port);
void stop(void); /* stops the port and the EAL, removes the EAL's runtime directory */

extern uint8_t frame_src, frame_dst; /* this end's id, the id frames go to */
uint8_t mark(struct rte_mbuf *m);                 /* what a frame is (0: not ours) */
uint8_t sender(struct rte_mbuf *m);               /* the id a frame came from */
void address(struct rte_mbuf *m);                 /* from frame_src to frame_dst */
uint64_t num(struct rte_mbuf *m, unsigned off);   /* the number at byte off */
extern uint64_t frame_tag; /* written at byte 22 of every frame: bw's window number */
struct rte_mbuf *frame(uint8_t mk, size_t len, const uint8_t *src);
/* bibw: both ends stream at once, so an end whose transmit ring is full receives meanwhile
 * (else both could wait on full rings forever); drain_fn is that end's receiver. */
extern void (*drain_fn)(void);
void send_burst(struct rte_mbuf **m, unsigned k);
void send_ctl(uint8_t mk, uint64_t a, uint64_t b); /* a at byte 14, b at 22 */
/* Sends one message of size bytes as frames marked mk, the last one marked last_mk. */
void send_msg(size_t size, uint8_t mk, uint8_t last_mk, const uint8_t *src);
size_t frames_of(size_t size);

/* The server (dpdk_bare_server.c): answers until the client is gone, M_QUIT or SIGTERM
 * (server_signals, called before start, so a server waiting for its client stops too). */
void server_signals(void);
extern volatile int srv_stop;
extern int srv_idle_sleep; /* back off with short sleeps when idle (the hot-spot's servers) */
int server(void);

/* The hot-spot (dpdk_bare_hot.c), the client against servers 1..peers: every round an
 * 8-byte ping to each, then their echoes; every server streaming `windows` windows of q
 * messages at once, each window answered. Print a JSON line each. */
void hot_lat(long rounds, int peers);
void hot_bw(long windows, size_t size, long q, int peers);
void hot_srv_stream(struct rte_mbuf *cmd); /* the server's side of hot_bw */

#endif
