/* The Conflux SDK version: the one place it is written. conflux.h gives it to programs at
 * compile time (CONFLUX_VERSION_*), the library at run time (conflux_version()), and the
 * SDK's Makefile names the shared library and conflux.pc after it. Semantic: a MINOR
 * release adds calls, a MAJOR one may change them; 0.x may still change between minors. */
#ifndef CONFLUX_VERSION_H
#define CONFLUX_VERSION_H

#include "common/cx_export.h"

#define CONFLUX_VERSION_MAJOR 0
#define CONFLUX_VERSION_MINOR 1
#define CONFLUX_VERSION_PATCH 0
#define CONFLUX_VERSION_STRING "0.1.0"
/* One comparable number: MAJOR * 10000 + MINOR * 100 + PATCH. */
#define CONFLUX_VERSION_NUMBER \
    (CONFLUX_VERSION_MAJOR * 10000 + CONFLUX_VERSION_MINOR * 100 + CONFLUX_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library this program runs with ("0.1.0"), compiled into it: a program
 * built with another header's CONFLUX_VERSION_STRING sees the skew. */
CX_EXPORT const char *conflux_version(void);

#ifdef __cplusplus
}
#endif
#endif
