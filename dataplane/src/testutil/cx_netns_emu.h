/* Internal to cx_netns.c: the impairment used when the kernel has no netem qdisc
 * (CONFIG_NET_SCH_NETEM unset). Same knobs as netem, built from what such kernels keep:
 *
 *   loss P%       iptables: raw PREROUTING -i <receiving end> -m statistic --probability P -j DROP
 *                 (dropped on arrival, so the sender's send() never sees an error)
 *   duplicate P%  iptables: mangle POSTROUTING -o <sending end> -m statistic -j TEE --gateway <peer>
 *                 (the kernel sends a copy of the packet to the peer)
 *   delay T       an NFQUEUE stage: mangle POSTROUTING -o <sending end> -j NFQUEUE; a thread of
 *   reorder P%    this process, inside the namespace, reads each queued packet's id over
 *                 nfnetlink and releases it after T, except P% released at once (so they
 *                 overtake the delayed ones), like netem's "delay T reorder P%"
 *   limit N       the queue length of that stage (beyond it packets pass undelayed)
 *
 * Only libc and the kernel's UAPI headers; the rules are made with the iptables command. */
#ifndef CX_NETNS_EMU_H
#define CX_NETNS_EMU_H

struct cx_netns_emu_params {
    double loss, duplicate, reorder; /* fractions 0..1 */
    long delay_us;
    unsigned limit;
};

/* Parses netem-style arguments ("loss 10% duplicate 5% reorder 25% delay 1ms limit 10000";
 * correlation percentages after a value are accepted and ignored). */
int cx_netns_emu_parse(const char *netem, struct cx_netns_emu_params *out);

struct cx_netns_emu;

/* Impairs traffic leaving dev (in namespace ns) towards peer_ns / peer_dev / peer_ip. */
int cx_netns_emu_start(const char *ns, const char *dev, const char *peer_ns, const char *peer_dev,
                       const char *peer_ip, const struct cx_netns_emu_params *prm,
                       struct cx_netns_emu **out);

/* Stops the delay thread (releasing what it holds). The rules go with the namespaces. */
void cx_netns_emu_stop(struct cx_netns_emu *e);

/* Packets the delay stage saw, released at once (overtaking), released after the delay. */
void cx_netns_emu_counts(const struct cx_netns_emu *e, unsigned long long out[3]);

#endif
