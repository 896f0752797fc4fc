/* The tcp driver through the conformance suite, on loopback. */
#include "transport/conformance.h"

static void mkaddr(char *buf, size_t cap) { snprintf(buf, cap, "tcp://127.0.0.1:0"); }

CX_DECLARE_TRANSPORT_TESTS(tcp, &cx_tcp_ops, mkaddr, NULL)

CX_TEST(tcp_bad_address)
{
    struct cx_listener *l;
    CX_CHECK_EQ_INT(cx_tcp_ops.listen("tcp://127.0.0.1", &l), -EINVAL);
    CX_CHECK_EQ_INT(cx_tcp_ops.listen("tcp://127.0.0.1:99999", &l), -EINVAL);
    CX_CHECK(cx_driver_for("tcp://127.0.0.1:1") == &cx_tcp_ops);
    CX_CHECK(cx_driver_for("carrier-pigeon://x") == NULL);
}

CX_TEST_MAIN()
