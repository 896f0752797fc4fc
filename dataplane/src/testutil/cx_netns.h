/* Network namespaces for tests: two namespaces joined by a veth pair, with addresses,
 * optional tc netem impairment, entering a namespace from one thread, and teardown (also of
 * leftovers from a crashed earlier run). Used by the tls and udp tests; meant for any test
 * that needs a real network between two ends of a link on one machine.
 *
 * It drives the iproute2 tools (`ip`, `tc`) as child processes and uses only libc itself,
 * so it lives in libconflux like any other src/ file (the Makefile puts every non-test .c
 * there); nothing in the data path calls it.
 *
 * Names: a pair made with prefix P by process PID is namespaces "P<PID>a" and "P<PID>b",
 * veth ends of the same names (one in each namespace), addresses 10.213.0.1/24 ("a") and
 * 10.213.0.2/24 ("b"; the namespaces are isolated, so every pair may use the same subnet).
 * Keep P short (at most 6 characters: interface names have 15). A leftover whose PID is no
 * longer alive is removed by cx_netns_clean_stale, which cx_netns_pair_create calls first.
 *
 * Threads: cx_netns_enter moves only the calling thread (setns affects one thread);
 * sockets keep the namespace they were created in, so a test may create a socket inside a
 * namespace, go back with cx_netns_leave and keep driving it from anywhere. A listener's
 * accepted TCP sockets belong to the listener's namespace; a driver that creates a socket in
 * accept (the udp driver) must be accepted from a thread inside that namespace.
 *
 * Errors: 0 or a negative errno with cx_errmsg() set (the failing command and its output).
 */
#ifndef CX_NETNS_H
#define CX_NETNS_H

#include <stddef.h>

#define CX_NETNS_NAME_MAX 16

struct cx_netns_emu;

struct cx_netns_pair {
    char ns[2][CX_NETNS_NAME_MAX];  /* namespace names, [0] = "a", [1] = "b" */
    char dev[2][CX_NETNS_NAME_MAX]; /* the veth end inside ns[i] */
    char ip[2][16];                 /* dotted IPv4 address of dev[i] */
    int live;                       /* 1 between create and destroy */
    const char *impair_method;      /* after cx_netns_impair: "tc netem" or the emulation */
    struct cx_netns_emu *emu[2];    /* the emulation's delay stages (NULL with netem) */
};

/* NULL when namespaces can be made here, else why not (not root, `ip netns` failing...). */
const char *cx_netns_unavailable(void);

/* Removes namespaces named "<prefix><pid>a|b" whose pid is not a live process. Returns how
 * many were removed. */
int cx_netns_clean_stale(const char *prefix);

/* Creates the two namespaces, the veth pair between them, addresses and links up (lo too).
 * On failure everything made so far is removed. The pair is also removed at exit if the
 * caller never calls cx_netns_pair_destroy (a test that returned early). */
int cx_netns_pair_create(const char *prefix, struct cx_netns_pair *p);

/* Impairs the traffic leaving dev[side] (side 0 or 1; -1 = both ends, so both directions).
 * netem is the tc arguments after "netem", e.g.
 * "delay 1ms reorder 25% loss 10% duplicate 5% limit 10000".
 * With a kernel that has the netem qdisc this is `tc qdisc replace dev X root netem ...`.
 * A kernel built without it (CONFIG_NET_SCH_NETEM unset; `tc` then says "Specified qdisc
 * kind is unknown") gets the same loss, duplicate, delay, reorder and limit emulated with
 * iptables rules and an NFQUEUE delay stage run by a thread of this process (see
 * cx_netns_emu.h); p->impair_method says which one is in force. Other netem options are
 * refused (-EINVAL) in the emulation. */
int cx_netns_impair(struct cx_netns_pair *p, int side, const char *netem);

/* For the emulation: packets the delay stage of dev[side] saw, let through at once
 * (overtaking the delayed ones) and delayed; all zero under real netem. */
void cx_netns_impair_counts(const struct cx_netns_pair *p, int side, unsigned long long out[3]);

/* Stops any emulation thread and removes the namespaces (which removes the veth, qdiscs and
 * rules). Safe to call twice. */
void cx_netns_pair_destroy(struct cx_netns_pair *p);

/* Moves the calling thread into namespace ns. Returns an fd of the namespace it left (give
 * it to cx_netns_leave) or a negative errno. */
int cx_netns_enter(const char *ns);

/* Moves the calling thread back to the namespace saved by cx_netns_enter and closes saved. */
int cx_netns_leave(int saved);

/* Runs argv (argv[0] looked up in PATH) and waits for it; its stdout and stderr go into
 * out[cap] (NUL-terminated) when out is not NULL. Returns the exit status (0 = success), or
 * a negative errno when it could not run or was killed. */
int cx_netns_run(char *const argv[], char *out, size_t cap);

#endif
