/* The public functions of the application API, each one call through the backend of the
 * process (cx_api.h); the rows of api/cx_api_calls.h make them all. */
#include "api/cx_api.h"

#include "common/cx_export.h"
#include "sidecar/cx_sc_client.h"

#define CX_API_EMBEDDED(kind, ret, name, impl, params, args) .impl = cx_embedded_##impl,
#define CX_API_SIDECAR(kind, ret, name, impl, params, args) .impl = cx_sc_##impl,
const struct cx_api_backend cx_api_embedded = {.name = "embedded", CX_API_CALLS(CX_API_EMBEDDED)};
const struct cx_api_backend cx_api_sidecar = {.name = "sidecar", CX_API_CALLS(CX_API_SIDECAR)};

static const struct cx_api_backend *chosen;

const struct cx_api_backend *cx_api_backend(void)
{
    const struct cx_api_backend *b = __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
    if (__builtin_expect(b != NULL, 1))
        return b;
    const struct cx_api_backend *want = cx_sc_enabled() ? &cx_api_sidecar : &cx_api_embedded;
    /* two first calls at once agree on the first one's choice */
    if (!__atomic_compare_exchange_n(&chosen, &b, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return b;
    return want;
}

void cx_api_use_embedded(void) { __atomic_store_n(&chosen, &cx_api_embedded, __ATOMIC_RELEASE); }

const char *conflux_version(void) { return CONFLUX_VERSION_STRING; }

/* kind R returns the backend's result; V only calls it (C has no `return f()` of void) */
#define CX_API_BODY_R(impl, args) return cx_api_backend()->impl args;
#define CX_API_BODY_V(impl, args) cx_api_backend()->impl args;
#define CX_API_PUBLIC(kind, ret, name, impl, params, args) \
    CX_EXPORT ret name params { CX_API_BODY_##kind(impl, args) }
CX_API_CALLS(CX_API_PUBLIC)
