"""libconflux through cffi in ABI mode: no compiler is needed at import time.

The declarations below copy sdk/include/conflux.h (which includes the data plane's module
headers). cffi cannot read that header itself, so tests/test_binding_matches_header.py
compiles these declarations against the real header: a drifted prototype, struct layout or
constant fails that test.

The declarations of the pipe and channel calls are generated from the table of the API
(_calls.py, by gen_calls.py); the rest are written here.

The library is the file named by the environment variable CONFLUX_LIB, else
sdk/build/lib/libconflux.so.0 in this repository, else the installed SDK's that pkg-config
finds (conflux.pc), else the soname libconflux.so.0 as the dynamic loader finds it (the
Debian package libconflux0); any of them in either mode (sdk/README.md, "Mode").
"""
import os
import subprocess

import cffi

from ._calls import ROUTED

# Types: every struct the binding allocates or reads, laid out as in the C headers.
TYPES = """
struct cx_format;
struct cx_space_client;
struct cx_chan_ctx;
struct cx_chan;
struct cx_chan_source;
struct cx_chan_sink;

struct cx_arch { uint8_t big_endian; uint8_t ptr_size; uint8_t long_size; uint8_t align8; };
struct cx_field { const char *name; const char *type; size_t size; size_t offset; const char *dflt; };
struct cx_struct_decl { const char *name; const struct cx_field *fields; size_t size; };

enum cx_kind { CX_K_INT = 1, CX_K_UINT = 2, CX_K_FLOAT = 3, CX_K_CHAR = 4, CX_K_BOOL = 5,
               CX_K_ENUM = 6, CX_K_STRUCT = 7, CX_K_STRING = 8 };
enum cx_shape { CX_SHAPE_ONE = 0, CX_SHAPE_FIXED = 1, CX_SHAPE_VAR = 2 };

struct cx_view { const struct cx_format *f; const uint8_t *buf; size_t len; const uint8_t *fixed; };
struct cx_field_info { const char *name; enum cx_kind kind; enum cx_shape shape; uint32_t size;
                       uint64_t count; const char *type_name; };

enum { PI_CREATE = 1, PI_APPEND = 2 };
struct pi_options { const char *listen; size_t reader_mem; const char *spill_dir; uint32_t window;
                    int timeout_ms; };
struct pi_reader_stats { uint64_t from_space, from_writer, duplicates, spilled, reconnects; };
struct pi_writer_stats { uint64_t direct, held, holds, resumed, expired, resent; };

struct cx_chan_ctx_opts { const char *listen; const char *advertise; int tcp_only;
                          const char *fabric; int linger_ms; };
enum cx_chan_mode { CX_CHAN_BEST_EFFORT = 0, CX_CHAN_RELIABLE = 1 };
struct cx_chan_opts { const struct cx_format *format; enum cx_chan_mode mode; unsigned queue_limit; };
struct cx_chan_event { const void *data; const struct cx_format *format; uint64_t token;
                       const void *wire; size_t wire_len; uint64_t seq; const char *from; };
struct cx_chan_sink_opts { const struct cx_format *format; const char *filter;
                           const struct cx_format *projection; };
struct cx_chan_stats { uint64_t submitted; uint64_t sent; uint64_t sent_bytes; uint64_t queued;
                       uint64_t dropped; uint64_t blocked; uint64_t filtered; uint64_t filtered_bytes;
                       uint64_t projected_bytes_saved; uint64_t delivered; uint64_t received_bytes;
                       uint64_t errors; uint32_t sources, sinks; uint32_t removed;
                       uint32_t shm_sinks; uint32_t net_sinks;
                       uint64_t sent_shm; uint32_t ucx_sinks; uint64_t sent_ucx;
                       uint64_t sent_fast; uint64_t delivered_fast; };
typedef void (*cx_chan_handler)(void *arg, const struct cx_chan_event *ev);
"""

# The calls that are the same code in both modes, exactly as declared in C; the routed
# calls (pipes, channels) come from the table of the API, through _calls.py.
LOCAL_FUNCS = """
const char *conflux_version(void);
const char *cx_errmsg(void);
int cx_errcode(void);
void cx_err_clear(void);

int cx_format_create(const struct cx_struct_decl *decl, const struct cx_arch *arch,
                     struct cx_format **out);
int cx_format_from_json(const char *json, size_t len, const struct cx_arch *arch,
                        struct cx_format **out);
void cx_format_free(struct cx_format *f);
uint64_t cx_format_token(const struct cx_format *f);
const char *cx_format_name(const struct cx_format *f);
size_t cx_format_size(const struct cx_format *f);
int cx_format_registry_insert(struct cx_format *f, const struct cx_format **canon);
const struct cx_format *cx_format_registry_lookup(uint64_t token);

int cx_reflect_open_format(const struct cx_format *f, const void *buf, size_t len,
                           struct cx_view *v);
int cx_reflect_count(const struct cx_view *v);
int cx_reflect_field(const struct cx_view *v, int i, struct cx_field_info *fi);
long cx_reflect_json(const struct cx_view *v, char *out, size_t cap);

int cx_space_connect(const char *addr, struct cx_space_client **out);
void cx_space_disconnect(struct cx_space_client *c);
int cx_space_format_put(struct cx_space_client *c, const struct cx_format *f, uint64_t *token);
"""
FUNCS = LOCAL_FUNCS + ROUTED

# Integer constants that are macros in C (cffi's ABI mode takes literal #defines).
MACROS = """
#define CX_CHAN_QUEUE_DEFAULT 1024
#define CX_CHAN_QUEUE_MAX 1048576
#define CX_FORMAT_MAX_SLOTS 32
#define PI_MIGRATE_MAX 256
#define PI_LINK_MAX 8
"""

ffi = cffi.FFI()
ffi.cdef(TYPES + FUNCS + MACROS)


def _pkg_config_libdir():
    """libdir of an installed SDK (`make -C sdk install`), from its conflux.pc, or None."""
    try:
        out = subprocess.run(["pkg-config", "--variable=libdir", "conflux"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def default_path():
    """The SDK's libconflux of the repository this package sits in (sdk/build/lib), else
    that of an installed SDK found by pkg-config, else the soname for the dynamic loader's
    search (ld.so.cache, LD_LIBRARY_PATH). Each works in both modes: through the sidecar
    when CONFLUX_SOCKET is set, else embedded."""
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.normpath(os.path.join(here, "..", "..", "build", "lib", "libconflux.so.0"))
    if os.path.exists(tree):
        return tree
    libdir = _pkg_config_libdir()
    if libdir and os.path.exists(os.path.join(libdir, "libconflux.so.0")):
        return os.path.join(libdir, "libconflux.so.0")
    return "libconflux.so.0"


def _open():
    path = os.environ.get("CONFLUX_LIB") or default_path()
    try:
        # NODELETE: the library's threads (the pipe in-bound thread, channel progress
        # threads) outlive the interpreter's teardown, which would otherwise dlclose it
        # under them.
        return ffi.dlopen(path, ffi.RTLD_NOW | ffi.RTLD_NODELETE)
    except OSError as e:
        raise ImportError(
            f"conflux: cannot load libconflux from {path} ({e}); build it with "
            f"`make -C sdk lib`, install it (`make -C sdk install`, found by pkg-config) "
            f"or set CONFLUX_LIB to its path") from None


lib = _open()
