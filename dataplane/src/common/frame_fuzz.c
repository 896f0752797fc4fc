/* libFuzzer target: the frame header parsers (network and in-memory) must reject any input
 * cleanly, and whatever they accept must encode back to the same bytes. */
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
    /* the in-memory decoder: the same property, with the unchecked spelling when the
     * input used it */
    if (cx_frame_decode_local(data, size, &h) == 0) {
        uint8_t again[CX_FRAME_HDR_SIZE];
        if (data[3] & CX_FRAME_F_UNCHECKED)
            cx_frame_encode_unchecked(&h, again);
        else
            cx_frame_encode(&h, again);
        if (memcmp(again, data, CX_FRAME_HDR_SIZE) != 0 || (h.flags & CX_FRAME_F_UNCHECKED))
            abort();
    }
    return 0;
}
