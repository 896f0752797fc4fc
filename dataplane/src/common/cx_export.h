/* CX_EXPORT marks a call of the public API (the table in api/cx_api_calls.h). The data plane
 * is compiled with -fvisibility=hidden, so only these calls are visible outside the shared
 * library; the SDK's version script, made from the same table, exports exactly them. */
#ifndef CX_EXPORT_H
#define CX_EXPORT_H

#define CX_EXPORT __attribute__((visibility("default")))

#endif
