/* Helper shared by tests that run UCX (header only, not part of the library). */
#ifndef UCX_TEST_ENV_H
#define UCX_TEST_ENV_H

#include <stdlib.h>

/* The tests' UCX transports, unless the caller set their own: loopback only, and not cma
 * (without peer-failure support UCX aborts the process when a peer dies in the middle of a
 * process_vm_readv; ../transport/README.md). Call before the first UCX context. */
static inline void ucx_test_env(void)
{
    setenv("UCX_NET_DEVICES", "lo", 0);
    setenv("UCX_TLS", "tcp,posix,sysv,self", 0);
}

#endif
