/* CRC-32C; see cx_crc32c.h. The x86 crc32 instruction when the CPU has it (SSE4.2: three
 * independent streams would go faster still, one is ~8 bytes per cycle), else tables
 * (slicing-by-8). Every segment's payload is checked when stored and again when read, and
 * every frame header on every network link, so this is on the hot paths.
 * -DCX_FRAME_PORTABLE_CHECK builds the table code only (to test it end to end on x86). */
#include "common/cx_crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && !defined(CX_FRAME_PORTABLE_CHECK)
#include <nmmintrin.h>
#define CRC_X86 1
#endif

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static int hw;

static void build_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
#ifdef CRC_X86
    __builtin_cpu_init();
    hw = __builtin_cpu_supports("sse4.2");
#endif
}

#ifdef CRC_X86
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *b, size_t len)
{
    uint64_t c = ~crc;
    for (; len >= 8; b += 8, len -= 8) {
        uint64_t w;
        memcpy(&w, b, 8); /* little-endian load: the reflected CRC's byte order */
        c = _mm_crc32_u64(c, w);
    }
    uint32_t c32 = (uint32_t)c;
    for (; len; b++, len--)
        c32 = _mm_crc32_u8(c32, *b);
    return ~c32;
}
#endif

/* Built before main, so the hot paths take no pthread_once; the once covers a CRC computed
 * from another constructor. */
__attribute__((constructor)) static void build_early(void) { pthread_once(&table_once, build_table); }

int cx_crc32c_hw(void)
{
    pthread_once(&table_once, build_table);
    return hw;
}

uint32_t cx_crc32c(uint32_t crc, const void *p, size_t len)
{
#ifdef CRC_X86
    if (cx_crc32c_hw())
        return crc_hw(crc, p, len);
#endif
    return cx_crc32c_portable(crc, p, len);
}

uint32_t cx_crc32c_portable(uint32_t crc, const void *p, size_t len)
{
    pthread_once(&table_once, build_table);
    const uint8_t *b = p;
    crc = ~crc;
    while (len >= 8) { /* slicing-by-8, byte loads only: no alignment or endianness issue */
        uint32_t lo = crc ^ ((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                             (uint32_t)b[3] << 24);
        crc = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^ table[5][(lo >> 16) & 0xff] ^
              table[4][lo >> 24] ^ table[3][b[4]] ^ table[2][b[5]] ^ table[1][b[6]] ^
              table[0][b[7]];
        b += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ table[0][(crc ^ *b++) & 0xff];
    return ~crc;
}
