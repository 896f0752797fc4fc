/* Reading a running sidecar's links from outside (the conflux CLI's `links --sidecar`): a
 * plain HTTP/1.0 GET of its /metrics and the conflux_channel_link series in it. */
#ifndef CX_SC_SCRAPE_H
#define CX_SC_SCRAPE_H

/* Calls fn(arg, channel, link) for every `conflux_channel_link{channel="…",link="…"}` line
 * the sidecar at hostport ("10.0.0.7:9464", IPv4 or a name) serves on /metrics. Returns how
 * many it found, or a negative errno with cx_errmsg() set: -ECONNREFUSED and the like from
 * the connection, -ETIMEDOUT after timeout_ms, -EPROTO for an answer that is not HTTP 200,
 * -EMSGSIZE for a body over 4 MiB. */
int cx_sc_scrape_links(const char *hostport, int timeout_ms,
                       void (*fn)(void *arg, const char *channel, const char *link), void *arg);

#endif
