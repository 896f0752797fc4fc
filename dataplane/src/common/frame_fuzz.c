/* libFuzzer target: the frame header parser must reject any input cleanly, and whatever it
 * accepts must encode back to the same bytes. */
#include "common/cx_frame.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cx_frame_hdr h;
    if (cx_frame_decode(data, size, &h) == 0) {
        uint8_t again[CX_FRAME_HDR_SIZE];
        cx_frame_encode(&h, again);
        if (memcmp(again, data, CX_FRAME_HDR_SIZE) != 0)
            abort();
    }
    return 0;
}
