/* The calls of the application API (api/cx_api_calls.h) that the sidecar protocol does not
 * carry yet: through a sidecar they fail cleanly with ENOTSUP, in each call's own error
 * convention (pi_*: -1 and errno; channel calls: a negative errno; strings: "" as for
 * "none"), and cx_errmsg() says so. A call routed to the sidecar gets its real cx_sc_*
 * in cx_sc_client.c and leaves this file (two definitions fail the link). */
#include "api/cx_api.h"
#include "common/cx_error.h"

#include <errno.h>

static int unrouted(const char *call)
{
    return cx_err_set(ENOTSUP, "%s is not available through a sidecar yet", call);
}

static int pi_unrouted(const char *call)
{
    errno = -unrouted(call);
    return -1;
}

long cx_sc_pi_migrate_out(int d, int hold_ms, void *blob, size_t cap)
{
    (void)d, (void)hold_ms, (void)blob, (void)cap;
    return pi_unrouted("pi_migrate_out");
}

int cx_sc_pi_migrate_in(const void *blob, size_t len, int s)
{
    (void)blob, (void)len, (void)s;
    return pi_unrouted("pi_migrate_in");
}
