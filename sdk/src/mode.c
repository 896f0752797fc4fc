/* The two modes of the SDK's libconflux (sdk/README.md, "Mode"): every pipe and channel call
 * of conflux.h goes to a sidecar (confluxd --role=sidecar, over its Unix socket and shared
 * rings: dataplane/src/sidecar/cx_sc_client.h) when CONFLUX_SOCKET is set, and runs in this
 * process otherwise.
 *
 * The embedded implementations are the data plane's own functions, renamed at build time
 * to cx_embedded_<name> (the Makefile runs objcopy --redefine-syms=src/embedded.map over
 * libconflux.a), so the public names here can choose. The mode is chosen once per process,
 * at the first call. */
#include "channel/cx_chan.h"
#include "pipe/cx_pipe.h"
#include "sidecar/cx_sc_client.h"

#define EMB(name) cx_embedded_##name

/* the renamed embedded calls */
int EMB(pi_space_open)(const char *addr, const struct pi_options *opts);
int EMB(pi_space_close)(int s);
int EMB(pi_attach)(const char *name, int s);
int EMB(pi_create)(const char *name, int s, int mode);
long EMB(pi_read)(int d, void *b, size_t len, const struct cx_format *t);
long EMB(pi_read_timeout)(int d, void *b, size_t len, const struct cx_format *t, int timeout_ms);
long EMB(pi_write)(int d, const void *b, size_t len, const struct cx_format *t);
int EMB(pi_close)(int d);
int EMB(pi_abandon)(int d);
int EMB(pi_detach)(int d);
int EMB(pi_seek)(int d, uint64_t seg);
int64_t EMB(pi_tell)(int d);
int EMB(pi_unlink)(const char *name, int s);
int EMB(pi_reader_stats)(int d, struct pi_reader_stats *out);
int EMB(cx_chan_ctx_create)(const struct cx_chan_ctx_opts *o, struct cx_chan_ctx **out);
const char *EMB(cx_chan_ctx_addr)(const struct cx_chan_ctx *ctx);
void EMB(cx_chan_ctx_destroy)(struct cx_chan_ctx *ctx);
int EMB(cx_chan_create)(struct cx_chan_ctx *ctx, const struct cx_chan_opts *o, struct cx_chan **out);
int EMB(cx_chan_open)(struct cx_chan_ctx *ctx, const char *id, int timeout_ms, struct cx_chan **out);
const char *EMB(cx_chan_id)(const struct cx_chan *ch);
const struct cx_format *EMB(cx_chan_format)(const struct cx_chan *ch);
enum cx_chan_mode EMB(cx_chan_mode)(const struct cx_chan *ch);
void EMB(cx_chan_close)(struct cx_chan *ch);
int EMB(cx_chan_source)(struct cx_chan *ch, const struct cx_format *fmt, struct cx_chan_source **out);
int EMB(cx_chan_submit)(struct cx_chan_source *s, const void *event);
int EMB(cx_chan_submit_wait)(struct cx_chan_source *s, const void *event, int timeout_ms);
int EMB(cx_chan_submit_owned)(struct cx_chan_source *s, void *event,
                              void (*release)(void *arg, void *event), void *arg, int timeout_ms);
void EMB(cx_chan_source_close)(struct cx_chan_source *s);
int EMB(cx_chan_sink)(struct cx_chan *ch, const struct cx_chan_sink_opts *o, cx_chan_handler fn,
                      void *arg, struct cx_chan_sink **out);
void EMB(cx_chan_sink_close)(struct cx_chan_sink *k);
size_t EMB(cx_chan_sink_error)(struct cx_chan_sink *k, char *out, size_t cap);
void EMB(cx_chan_stats)(struct cx_chan *ch, struct cx_chan_stats *out);
int EMB(cx_chan_wait_members)(struct cx_chan *ch, unsigned sources, unsigned sinks, int timeout_ms);

#define PICK(name, ...) (cx_sc_enabled() ? cx_sc_##name(__VA_ARGS__) : EMB(name)(__VA_ARGS__))
#define PICK_CHAN(name, ...) (cx_sc_enabled() ? cx_sc_##name(__VA_ARGS__) : EMB(cx_##name)(__VA_ARGS__))

int pi_space_open(const char *addr, const struct pi_options *opts) { return PICK(pi_space_open, addr, opts); }
int pi_space_close(int s) { return PICK(pi_space_close, s); }
int pi_attach(const char *name, int s) { return PICK(pi_attach, name, s); }
int pi_create(const char *name, int s, int mode) { return PICK(pi_create, name, s, mode); }
long pi_read(int d, void *b, size_t len, const struct cx_format *t) { return PICK(pi_read, d, b, len, t); }
long pi_read_timeout(int d, void *b, size_t len, const struct cx_format *t, int timeout_ms)
{
    return PICK(pi_read_timeout, d, b, len, t, timeout_ms);
}
long pi_write(int d, const void *b, size_t len, const struct cx_format *t) { return PICK(pi_write, d, b, len, t); }
int pi_close(int d) { return PICK(pi_close, d); }
int pi_abandon(int d) { return PICK(pi_abandon, d); }
int pi_detach(int d) { return PICK(pi_detach, d); }
int pi_seek(int d, uint64_t seg) { return PICK(pi_seek, d, seg); }
int64_t pi_tell(int d) { return PICK(pi_tell, d); }
int pi_unlink(const char *name, int s) { return PICK(pi_unlink, name, s); }
int pi_reader_stats(int d, struct pi_reader_stats *out) { return PICK(pi_reader_stats, d, out); }

int cx_chan_ctx_create(const struct cx_chan_ctx_opts *o, struct cx_chan_ctx **out)
{
    return PICK_CHAN(chan_ctx_create, o, out);
}
const char *cx_chan_ctx_addr(const struct cx_chan_ctx *ctx) { return PICK_CHAN(chan_ctx_addr, ctx); }
void cx_chan_ctx_destroy(struct cx_chan_ctx *ctx)
{
    if (cx_sc_enabled())
        cx_sc_chan_ctx_destroy(ctx);
    else
        EMB(cx_chan_ctx_destroy)(ctx);
}
int cx_chan_create(struct cx_chan_ctx *ctx, const struct cx_chan_opts *o, struct cx_chan **out)
{
    return PICK_CHAN(chan_create, ctx, o, out);
}
int cx_chan_open(struct cx_chan_ctx *ctx, const char *id, int timeout_ms, struct cx_chan **out)
{
    return PICK_CHAN(chan_open, ctx, id, timeout_ms, out);
}
const char *cx_chan_id(const struct cx_chan *ch) { return PICK_CHAN(chan_id, ch); }
const struct cx_format *cx_chan_format(const struct cx_chan *ch) { return PICK_CHAN(chan_format, ch); }
enum cx_chan_mode cx_chan_mode(const struct cx_chan *ch) { return PICK_CHAN(chan_mode, ch); }
void cx_chan_close(struct cx_chan *ch)
{
    if (cx_sc_enabled())
        cx_sc_chan_close(ch);
    else
        EMB(cx_chan_close)(ch);
}
int cx_chan_source(struct cx_chan *ch, const struct cx_format *fmt, struct cx_chan_source **out)
{
    return PICK_CHAN(chan_source, ch, fmt, out);
}
int cx_chan_submit(struct cx_chan_source *s, const void *event) { return PICK_CHAN(chan_submit, s, event); }
int cx_chan_submit_wait(struct cx_chan_source *s, const void *event, int timeout_ms)
{
    return PICK_CHAN(chan_submit_wait, s, event, timeout_ms);
}
int cx_chan_submit_owned(struct cx_chan_source *s, void *event, void (*release)(void *arg, void *event),
                         void *arg, int timeout_ms)
{
    return PICK_CHAN(chan_submit_owned, s, event, release, arg, timeout_ms);
}
void cx_chan_source_close(struct cx_chan_source *s)
{
    if (cx_sc_enabled())
        cx_sc_chan_source_close(s);
    else
        EMB(cx_chan_source_close)(s);
}
int cx_chan_sink(struct cx_chan *ch, const struct cx_chan_sink_opts *o, cx_chan_handler fn, void *arg,
                 struct cx_chan_sink **out)
{
    return PICK_CHAN(chan_sink, ch, o, fn, arg, out);
}
void cx_chan_sink_close(struct cx_chan_sink *k)
{
    if (cx_sc_enabled())
        cx_sc_chan_sink_close(k);
    else
        EMB(cx_chan_sink_close)(k);
}
size_t cx_chan_sink_error(struct cx_chan_sink *k, char *out, size_t cap)
{
    return PICK_CHAN(chan_sink_error, k, out, cap);
}
void cx_chan_stats(struct cx_chan *ch, struct cx_chan_stats *out)
{
    if (cx_sc_enabled())
        cx_sc_chan_stats(ch, out);
    else
        EMB(cx_chan_stats)(ch, out);
}
int cx_chan_wait_members(struct cx_chan *ch, unsigned sources, unsigned sinks, int timeout_ms)
{
    return PICK_CHAN(chan_wait_members, ch, sources, sinks, timeout_ms);
}
