/* CRC-32C (Castagnoli: reflected polynomial 0x82F63B78, initial value and final xor ~0), the
 * one implementation of Conflux: the frame header check (cx_frame.c), the space's on-disk
 * records and name table, and the migration blobs. Thread-safe (tables built once). */
#ifndef CX_CRC32C_H
#define CX_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extends `crc` (0 to start) with len bytes at p and returns the new value. p may be NULL
 * when len is 0. cx_crc32c(0, "123456789", 9) == 0xE3069283. Uses the CPU's instruction
 * when there is one (SSE4.2), else the tables. */
uint32_t cx_crc32c(uint32_t crc, const void *p, size_t len);

/* The same value from the table code every machine runs (tests and benchmarks compare). */
uint32_t cx_crc32c_portable(uint32_t crc, const void *p, size_t len);

/* 1 when cx_crc32c uses the CPU's CRC-32C instruction (x86-64 SSE4.2). */
int cx_crc32c_hw(void);

#endif
