/* conflux.h — the public C API of Conflux, for applications (the SDK).
 *
 * One header for the three things an application does with Conflux:
 *
 *   formats    describe the C struct an event or a pipe segment is made of, by a field list
 *              (PBIO style, with offsetof) or by the JSON schema a Channel resource carries;
 *              events travel in the sender's layout and readers convert by field name
 *   channels   ECho-style event channels: create one (this process is its contact point),
 *              open it elsewhere by id, add sources and sinks; events go from each source
 *              straight to each sink
 *   pipes      the π-channel calls: pi_space_open, pi_create, pi_write, pi_close, pi_attach,
 *              pi_read, pi_seek, pi_tell, pi_detach, pi_unlink: named, persistent,
 *              single-writer multi-reader pipes of segments kept by a space server;
 *              pi_abandon lets go of a writer without ending its pipe (a writer restarted
 *              with PI_APPEND continues it)
 *
 * Mode (sdk/README.md, "Mode"), chosen once per process at the first call:
 *   SIDECAR   when CONFLUX_SOCKET is set (the operator sets it in workflow pods): every pipe
 *             and channel call goes to the pod's `confluxd --role=sidecar` over that Unix
 *             socket, segments and events through shared-memory rings; the sidecar owns the
 *             pod's links. Sink handlers run on one event thread of the library.
 *   EMBEDDED  otherwise: libconflux runs inside the application's process (its own progress
 *             and in-bound threads, its own links to the space server and other processes).
 * The calls, their arguments and their errors are the same in both modes; the few
 * differences (e.g. events between the processes of one pod never touch a link) are listed
 * in dataplane/src/sidecar/README.md.
 *
 * How this header is built: it includes the data plane's own module headers, which are the
 * declarations libconflux is compiled with, so the two cannot drift apart. An installed SDK
 * (`make -C sdk install PREFIX=...`) holds them all under include/conflux/; build with
 * pkg-config only:
 *
 *     cc app.c $(pkg-config --cflags --libs conflux)     # #include <conflux.h>
 *
 * In this repository, `make -C sdk lib` stages such an install in sdk/build/stage.
 *
 * What each included header gives (each call is documented there, next to its declaration):
 *
 *   api/conflux_version.h       conflux_version()    the library's version at run time;
 *                               CONFLUX_VERSION_*    the header's
 *   common/cx_error.h           cx_errmsg()          the calling thread's last error message
 *                               cx_errcode()         its errno;  cx_err_clear()
 *   format/cx_format.h          cx_format_create()   a format from a field list (explicit or
 *                                                    automatic C offsets)
 *                               cx_format_from_json() a format from a JSON schema
 *                               cx_format_token/name/size/describe(), cx_format_free()
 *   format/cx_format_registry.h cx_format_registry_insert()  hands a format to the process's
 *                                                    registry (required before a format is
 *                                                    used on a channel); _lookup(token)
 *   format/cx_reflect.h         cx_reflect_open[_format](), cx_reflect_get(),
 *                               cx_reflect_json()    read an event of a format this program
 *                                                    was not built for (untyped sinks)
 *   channel/cx_chan.h           cx_chan_ctx_create/destroy()  the per-process runtime
 *                               cx_chan_create/open/close/id() channels
 *                               cx_chan_source(), cx_chan_submit[_wait|_owned]()  sources
 *                               cx_chan_sink(), cx_chan_sink_close/error()         sinks
 *                                                    (typed, untyped, derived: a filter
 *                                                    or transform program and a projection
 *                                                    run at the source: conditions, fields
 *                                                    computed into the projection format,
 *                                                    reductions, state between events;
 *                                                    the language is defined in
 *                                                    docs/filter-language.md, and
 *                                                    docs/guide.md has an example)
 *                               cx_chan_stats(), cx_chan_wait_members()
 *   pipe/cx_pipe.h              pi_space_open/close(), pi_create(PI_CREATE | PI_APPEND),
 *                               pi_write(), pi_close(), pi_abandon(), pi_attach(), pi_read[_timeout](),
 *                               pi_seek(), pi_tell(), pi_detach(), pi_unlink(),
 *                               pi_attach_named(), pi_ack() (durable named readers:
 *                               resume after the last acknowledged segment),
 *                               pi_attach_group() (reader groups: members share a
 *                               pipe's segments, each handed to one member),
 *                               pi_reader_stats()
 *
 * A user's guide with complete, tested programs (C, Python, Go): docs/guide.md.
 *
 * Errors: channel and format calls return 0 or a negative errno; pi_* calls return -1 and
 * set errno (pi_read: -1 with errno EPIPE at the end of the pipe). Either way cx_errmsg()
 * names what was wrong ("pipe 'results' has a writer already").
 *
 * Versioning (api/conflux_version.h): semantic, a MINOR release adds calls, a MAJOR one may
 * change them; 0.x: the API may still change between minor versions. The shared library
 * exports exactly the calls of these headers (its soname follows MAJOR); conflux_version()
 * != CONFLUX_VERSION_STRING means the program runs with another library than it was built for.
 */
#ifndef CONFLUX_H
#define CONFLUX_H

#include "api/conflux_version.h"
#include "common/cx_error.h"
#include "format/cx_format.h"
#include "format/cx_format_registry.h"
#include "format/cx_reflect.h"
#include "channel/cx_chan.h"
#include "pipe/cx_pipe.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A format from a JSON schema, handed to the registry in one step (what channels and pipes
 * want). json is NUL-terminated. Returns 0 and the registered format in *out (it lives until
 * the process ends), or a negative errno with cx_errmsg() giving the byte or field at fault. */
static inline int conflux_format_json(const char *json, const struct cx_format **out)
{
    struct cx_format *f;
    int rc = cx_format_from_json(json, strlen(json), NULL, &f);
    if (rc < 0)
        return rc;
    return cx_format_registry_insert(f, out);
}

/* The three calls of the space client that conflux_format_publish needs, declared here so
 * that applications do not include the space's internal headers (sdk/tests/header_test.c
 * compiles both together, which fails if these ever drift from space/cx_space_client.h). */
struct cx_space_client;
int cx_space_connect(const char *addr, struct cx_space_client **out);
void cx_space_disconnect(struct cx_space_client *c);
int cx_space_format_put(struct cx_space_client *c, const struct cx_format *f, uint64_t *token);

/* Stores f's description in the format service of the space at space_addr (the address
 * given to pi_space_open), so a reader in another process whose struct differs from the
 * writer's (other field order, widths, extra or missing fields) can convert the writer's
 * segments. pi_write already does this on the first use of each format on a space, so a
 * pipe writer needs it only to publish a format before writing with it (or for readers of
 * formats it never writes). Idempotent.
 * Returns 0, or a negative errno with cx_errmsg() set (space unreachable, ...). */
static inline int conflux_format_publish(const char *space_addr, const struct cx_format *f)
{
    struct cx_space_client *c;
    int rc = cx_space_connect(space_addr, &c);
    if (rc < 0)
        return cx_err_wrap(rc, "publishing format '%s'", cx_format_name(f));
    rc = cx_space_format_put(c, f, NULL);
    char msg[256];
    snprintf(msg, sizeof msg, "%s", rc < 0 ? cx_errmsg() : "");
    cx_space_disconnect(c);
    return rc < 0 ? cx_err_set(-rc, "publishing format '%s': %s", cx_format_name(f), msg) : 0;
}

#ifdef __cplusplus
}
#endif
#endif
