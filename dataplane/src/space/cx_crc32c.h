/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of the space's
 * on-disk records. Software table implementation; thread-safe (the table is built once). */
#ifndef CX_CRC32C_H
#define CX_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extends `crc` (0 to start) with len bytes at p and returns the new value. p may be NULL
 * when len is 0. cx_crc32c(0, "123456789", 9) == 0xE3069283. */
uint32_t cx_crc32c(uint32_t crc, const void *p, size_t len);

#endif
