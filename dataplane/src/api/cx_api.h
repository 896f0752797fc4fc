/* The application API's two backends (api/cx_api_calls.h lists the calls): embedded, the
 * pipe and channel runtimes of this process (cx_embedded_<impl>, in pipe/ and channel/),
 * and sidecar, the same calls made through the pod's confluxd --role=sidecar
 * (cx_sc_<impl>, sidecar/cx_sc_client*.c). The public functions (pi_write, cx_chan_submit,
 * ...) call the backend chosen once per process, at the first call: the sidecar when
 * CONFLUX_SOCKET is set (or cx_sc_connect succeeded before), else embedded. */
#ifndef CX_API_H
#define CX_API_H

#include "api/conflux_version.h"
#include "api/cx_api_calls.h"
#include "channel/cx_chan.h"
#include "pipe/cx_pipe.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CX_API_DECLARE_BACKENDS(kind, ret, name, impl, params, args) \
    ret cx_embedded_##impl params;                                   \
    ret cx_sc_##impl params;
CX_API_CALLS(CX_API_DECLARE_BACKENDS)
#undef CX_API_DECLARE_BACKENDS

/* One backend: a function per call of the table. */
#define CX_API_MEMBER(kind, ret, name, impl, params, args) ret(*impl) params;
struct cx_api_backend {
    const char *name; /* "embedded" or "sidecar" */
    CX_API_CALLS(CX_API_MEMBER)
};
#undef CX_API_MEMBER

extern const struct cx_api_backend cx_api_embedded;
extern const struct cx_api_backend cx_api_sidecar;

/* The backend of this process (chosen at the first call, then fixed). */
const struct cx_api_backend *cx_api_backend(void);

/* Fixes the embedded backend whatever the environment says: for confluxd, whose sidecar
 * serves the calls of applications with this process's own runtimes (a sidecar must never
 * route to a sidecar). Call it before any other call of the API. */
void cx_api_use_embedded(void);

#ifdef __cplusplus
}
#endif
#endif
