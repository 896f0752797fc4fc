/* The application API, one row per call: the one list from which libconflux's public
 * functions, its two backends' declarations (api/cx_api.h), the shared library's export list
 * (sdk/src/conflux.map.in) and the Python binding's declarations (sdk/python/gen_calls.py)
 * are made. No includes: the rows are expanded where the types are known.
 *
 * CX_API_CALLS: the calls that run in the process (embedded) or through the pod's sidecar.
 *   X(kind, ret, name, impl, params, args)
 *   kind    R returns a value, V returns nothing
 *   name    the public name (pipe/cx_pipe.h, channel/cx_chan.h declare it)
 *   impl    the backends' suffix: cx_embedded_<impl> (pipe/, channel/) and cx_sc_<impl>
 *           (sidecar/cx_sc_client*.c); a row without both fails libconflux's link
 *   params  the parameter list as in the public header (a differing one fails to compile)
 *   args    the parameter names, passed on
 *
 * CX_API_LOCAL_CALLS: public calls that are the same code in both modes (formats, errors,
 * the version); only the export list uses them.  X(name) */
#ifndef CX_API_CALLS_H
#define CX_API_CALLS_H

#define CX_API_CALLS(X)                                                                           \
    X(R, int, pi_space_open, pi_space_open, (const char *addr, const struct pi_options *opts),   \
      (addr, opts))                                                                               \
    X(R, int, pi_space_close, pi_space_close, (int s), (s))                                       \
    X(R, int, pi_attach, pi_attach, (const char *name, int s), (name, s))                         \
    X(R, int, pi_create, pi_create, (const char *name, int s, int mode), (name, s, mode))         \
    X(R, long, pi_read, pi_read, (int d, void *b, size_t len, const struct cx_format *t),         \
      (d, b, len, t))                                                                             \
    X(R, long, pi_read_timeout, pi_read_timeout,                                                  \
      (int d, void *b, size_t len, const struct cx_format *t, int timeout_ms),                    \
      (d, b, len, t, timeout_ms))                                                                 \
    X(R, long, pi_write, pi_write, (int d, const void *b, size_t len, const struct cx_format *t), \
      (d, b, len, t))                                                                             \
    X(R, int, pi_close, pi_close, (int d), (d))                                                   \
    X(R, int, pi_abandon, pi_abandon, (int d), (d))                                               \
    X(R, int, pi_detach, pi_detach, (int d), (d))                                                 \
    X(R, int, pi_seek, pi_seek, (int d, uint64_t seg), (d, seg))                                  \
    X(R, int64_t, pi_tell, pi_tell, (int d), (d))                                                 \
    X(R, int, pi_unlink, pi_unlink, (const char *name, int s), (name, s))                         \
    X(R, int, pi_shutdown, pi_shutdown, (void), ())                                               \
    X(R, int, pi_reader_stats, pi_reader_stats, (int d, struct pi_reader_stats *out), (d, out))   \
    X(R, int, pi_writer_stats, pi_writer_stats, (int d, struct pi_writer_stats *out), (d, out))   \
    X(R, long, pi_migrate_out, pi_migrate_out, (int d, int hold_ms, void *blob, size_t cap),      \
      (d, hold_ms, blob, cap))                                                                    \
    X(R, int, pi_migrate_in, pi_migrate_in, (const void *blob, size_t len, int s),                \
      (blob, len, s))                                                                             \
    X(R, int, pi_link, pi_link, (int d, char *out, size_t cap), (d, out, cap))                    \
    X(R, int, pi_attach_named, pi_attach_named, (const char *name, int s, const char *cursor),    \
      (name, s, cursor))                                                                          \
    X(R, int, pi_ack, pi_ack, (int d), (d))                                                       \
    X(R, int, pi_attach_group, pi_attach_group, (const char *name, int s, const char *group),     \
      (name, s, group))                                                                           \
    X(R, int, cx_chan_ctx_create, chan_ctx_create,                                                \
      (const struct cx_chan_ctx_opts *o, struct cx_chan_ctx **out), (o, out))                     \
    X(R, const char *, cx_chan_ctx_addr, chan_ctx_addr, (const struct cx_chan_ctx *ctx), (ctx))   \
    X(R, const char *, cx_chan_ctx_fabric, chan_ctx_fabric, (const struct cx_chan_ctx *ctx),      \
      (ctx))                                                                                      \
    X(R, const char *, cx_chan_ctx_fabric_addr, chan_ctx_fabric_addr,                             \
      (const struct cx_chan_ctx *ctx), (ctx))                                                     \
    X(R, int, cx_chan_ctx_link, chan_ctx_link,                                                    \
      (struct cx_chan_ctx *ctx, const char *addr, char *out, size_t cap), (ctx, addr, out, cap))  \
    X(R, int, cx_chan_ctx_drive, chan_ctx_drive, (struct cx_chan_ctx *ctx, long timeout_us),      \
      (ctx, timeout_us))                                                                          \
    X(V, void, cx_chan_ctx_destroy, chan_ctx_destroy, (struct cx_chan_ctx *ctx), (ctx))           \
    X(R, int, cx_chan_create, chan_create,                                                        \
      (struct cx_chan_ctx *ctx, const struct cx_chan_opts *o, struct cx_chan **out),              \
      (ctx, o, out))                                                                              \
    X(R, int, cx_chan_open, chan_open,                                                            \
      (struct cx_chan_ctx *ctx, const char *id, int timeout_ms, struct cx_chan **out),            \
      (ctx, id, timeout_ms, out))                                                                 \
    X(R, const char *, cx_chan_id, chan_id, (const struct cx_chan *ch), (ch))                     \
    X(R, const struct cx_format *, cx_chan_format, chan_format, (const struct cx_chan *ch), (ch)) \
    X(R, enum cx_chan_mode, cx_chan_mode, chan_mode, (const struct cx_chan *ch), (ch))            \
    X(V, void, cx_chan_close, chan_close, (struct cx_chan *ch), (ch))                             \
    X(R, int, cx_chan_source, chan_source,                                                        \
      (struct cx_chan *ch, const struct cx_format *fmt, struct cx_chan_source **out),             \
      (ch, fmt, out))                                                                             \
    X(R, int, cx_chan_submit, chan_submit, (struct cx_chan_source *s, const void *event),         \
      (s, event))                                                                                 \
    X(R, int, cx_chan_submit_wait, chan_submit_wait,                                              \
      (struct cx_chan_source *s, const void *event, int timeout_ms), (s, event, timeout_ms))      \
    X(R, int, cx_chan_submit_owned, chan_submit_owned,                                            \
      (struct cx_chan_source *s, void *event, void (*release)(void *arg, void *event), void *arg, \
       int timeout_ms),                                                                           \
      (s, event, release, arg, timeout_ms))                                                       \
    X(V, void, cx_chan_source_close, chan_source_close, (struct cx_chan_source *s), (s))          \
    X(R, int, cx_chan_sink, chan_sink,                                                            \
      (struct cx_chan *ch, const struct cx_chan_sink_opts *o, cx_chan_handler fn, void *arg,      \
       struct cx_chan_sink **out),                                                                \
      (ch, o, fn, arg, out))                                                                      \
    X(V, void, cx_chan_sink_close, chan_sink_close, (struct cx_chan_sink *k), (k))                \
    X(R, size_t, cx_chan_sink_error, chan_sink_error,                                             \
      (struct cx_chan_sink *k, char *out, size_t cap), (k, out, cap))                             \
    X(V, void, cx_chan_stats, chan_stats, (struct cx_chan *ch, struct cx_chan_stats *out),        \
      (ch, out))                                                                                  \
    X(R, int, cx_chan_wait_members, chan_wait_members,                                            \
      (struct cx_chan *ch, unsigned sources, unsigned sinks, int timeout_ms),                     \
      (ch, sources, sinks, timeout_ms))

#define CX_API_LOCAL_CALLS(X)                                                                     \
    X(conflux_version)                                                                            \
    X(cx_errmsg) X(cx_errcode) X(cx_err_clear) X(cx_err_set) X(cx_err_wrap)                       \
    X(cx_arch_native) X(cx_format_create) X(cx_format_from_json) X(cx_format_free)                \
    X(cx_format_token) X(cx_format_name) X(cx_format_size) X(cx_format_arch)                      \
    X(cx_format_describe) X(cx_format_from_description)                                           \
    X(cx_format_registry_insert) X(cx_format_registry_lookup) X(cx_format_registry_set_fetch)     \
    X(cx_format_registry_count)                                                                   \
    X(cx_reflect_open) X(cx_reflect_open_format) X(cx_reflect_count) X(cx_reflect_field)          \
    X(cx_reflect_get) X(cx_reflect_json)                                                          \
    X(cx_space_connect) X(cx_space_disconnect) X(cx_space_format_put)

#endif
