/* CRC-32C: the standard check value, and chaining over pieces of every split and length
 * (whichever implementation this CPU uses, hardware or tables). */
#include "common/cx_test.h"
#include "common/cx_crc32c.h"

CX_TEST(check_value_and_chaining)
{
    CX_CHECK_EQ_INT(cx_crc32c(0, "123456789", 9), 0xE3069283u); /* the catalogued check */
    CX_CHECK_EQ_INT(cx_crc32c(0, "", 0), 0);
    uint8_t buf[300];
    for (int i = 0; i < 300; i++)
        buf[i] = (uint8_t)(i * 131 + 7);
    /* one bit flipped anywhere changes it; any split point chains to the whole */
    for (size_t len = 0; len <= 300; len += 13) {
        uint32_t whole = cx_crc32c(0, buf, len);
        for (size_t cut = 0; cut <= len; cut += 7)
            CX_CHECK_EQ_INT(cx_crc32c(cx_crc32c(0, buf, cut), buf + cut, len - cut), whole);
        if (len) {
            buf[len / 2] ^= 0x10;
            CX_CHECK(cx_crc32c(0, buf, len) != whole);
            buf[len / 2] ^= 0x10;
        }
    }
    /* 32 zero bytes: a second catalogued value (iSCSI, RFC 3720 B.4) */
    uint8_t z[32] = {0};
    CX_CHECK_EQ_INT(cx_crc32c(0, z, 32), 0x8A9136AAu);
}

CX_TEST_MAIN()
