/* Address strings of the network drivers: "scheme://rest".
 *   tcp://127.0.0.1:5555   IPv4 literal or host name, port (0 = any free port)
 *   shm:///path/to.sock    a Unix socket path (the shm driver's rendezvous)
 *   shm://@name            an abstract Unix socket (no file; per network namespace)
 *   ucx://127.0.0.1:5556   the TCP control connection that exchanges UCX worker addresses
 */
#ifndef CX_ADDR_H
#define CX_ADDR_H

#include <netinet/in.h>
#include <stddef.h>

/* If addr starts with "<scheme>://", returns a pointer to what follows, else NULL. */
const char *cx_addr_strip(const char *addr, const char *scheme);

/* Parses "host:port" (after the scheme) into sa. Returns 0 or -EINVAL (cx_errmsg set). */
int cx_addr_inet(const char *hostport, struct sockaddr_in *sa);

/* Formats sa as "<scheme>://a.b.c.d:port" into out[cap]. */
void cx_addr_format_inet(const char *scheme, const struct sockaddr_in *sa, char *out, size_t cap);

/* Creates a listening TCP socket on hostport (SO_REUSEADDR, backlog 64, non-blocking) and
 * writes the bound address to *bound. Returns the fd or a negative errno. */
int cx_tcp_listen_fd(const char *hostport, struct sockaddr_in *bound);

/* Connects a blocking TCP socket to hostport. Returns the fd or a negative errno
 * (-ECONNREFUSED when nobody listens; -ETIMEDOUT when nothing answers within
 * CX_TCP_CONNECT_TIMEOUT_MS: an address whose host is gone, such as a deleted pod's IP that
 * DNS still gives, would otherwise hold the caller for the kernel's two minutes of SYN
 * retries). */
#define CX_TCP_CONNECT_TIMEOUT_MS 5000
int cx_tcp_connect_fd(const char *hostport);

/* Sets TCP_NODELAY, large send/receive buffers (4 MiB, capped by the kernel) and
 * O_NONBLOCK on a connected socket. */
void cx_tcp_tune(int fd);

/* Reads or writes exactly n bytes on a blocking fd. 0, or -ECONNRESET on EOF, -errno. */
int cx_fd_read_full(int fd, void *buf, size_t n);
int cx_fd_write_full(int fd, const void *buf, size_t n);

#endif
