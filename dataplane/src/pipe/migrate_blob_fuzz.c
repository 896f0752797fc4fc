/* libFuzzer target: the migration blob comes from another process (pi_migrate_in), so its
 * decoder must reject any input cleanly, and whatever it accepts must encode back to the
 * same bytes. An input starting with '!' gets a valid checksum first, so the fuzzer reaches
 * the checks behind the CRC (name length, kind, version) instead of stopping at it. */
#include "pipe/cx_pipe_int.h"
#include "common/cx_crc32c.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *in = malloc(size ? size : 1);
    if (!in)
        return 0;
    memcpy(in, data, size);
    const uint8_t *blob = in;
    size_t len = size;
    if (size > 0 && in[0] == '!') {
        blob = in + 1;
        len = size - 1;
        if (len >= 4) {
            uint32_t crc = cx_crc32c(0, blob, len - 4);
            for (int i = 0; i < 4; i++)
                in[1 + len - 4 + (size_t)i] = (uint8_t)(crc >> (8 * i));
        }
    }
    struct pi_blob b;
    if (pi_blob_decode(blob, len, &b) == 0) {
        if (pi_blob_size(b.name) != len)
            abort();
        uint8_t *again = malloc(len);
        if (!again)
            abort();
        if (pi_blob_encode(&b, again) != len || memcmp(again, blob, len) != 0)
            abort();
        free(again);
    }
    free(in);
    return 0;
}
