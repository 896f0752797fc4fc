/* Reader groups' bookkeeping (cx_spgroup.h), driven with a clock of the test's own: leases
 * in order and disjoint, the in-flight cap, acks all or none, the floor over runs of acks,
 * hand-back on leave, on the owner's departure and at the ack deadline (redelivered first,
 * delivery count + 1), and the end only when nothing is left. */
#include "common/cx_error.h"
#include "common/cx_test.h"
#include "space/cx_spgroup.h"

#include <errno.h>

CX_TEST(leases_are_disjoint_in_order_and_capped)
{
    struct cx_spgroup *list = NULL, *g = cx_spgroup_get(&list, "w", 1, 10);
    CX_CHECK(g != NULL);
    CX_CHECK(cx_spgroup_get(&list, "w", 1, 99) == g); /* found, floor untouched */
    CX_CHECK_EQ_INT((long)g->floor, 10);
    uint64_t a, b;
    int owner_a, owner_b;
    CX_CHECK_EQ_INT(cx_spgroup_join(g, &owner_a, 0, &a), 0);
    CX_CHECK_EQ_INT(cx_spgroup_join(g, &owner_b, 1000, &b), 0);
    CX_CHECK(a != b);
    struct cx_spgroup_lease l;
    CX_CHECK_EQ_INT(cx_spgroup_next(g, a, 12, 0, 0, &l), 0);
    CX_CHECK_EQ_INT((long)l.pos, 10);
    CX_CHECK_EQ_INT((long)l.deliveries, 1);
    CX_CHECK_EQ_INT(cx_spgroup_next(g, b, 12, 0, 0, &l), 0);
    CX_CHECK_EQ_INT((long)l.pos, 11);
    CX_CHECK_EQ_INT(cx_spgroup_next(g, a, 12, 0, 0, &l), -EAGAIN); /* none written yet */
    CX_CHECK_EQ_INT(cx_spgroup_next(g, 77, 12, 0, 0, &l), -ESRCH);
    for (int i = 1; i < CX_GROUP_INFLIGHT; i++)
        CX_CHECK_EQ_INT(cx_spgroup_next(g, a, 1000, 0, 0, &l), 0);
    CX_CHECK_EQ_INT(cx_spgroup_next(g, a, 1000, 0, 0, &l), -ENOBUFS);
    CX_CHECK_EQ_INT((long)cx_spgroup_inflight(g), CX_GROUP_INFLIGHT + 1);
    cx_spgroup_free_all(&list);
    CX_CHECK(list == NULL);
}

CX_TEST(acks_move_the_floor_over_runs)
{
    struct cx_spgroup *list = NULL, *g = cx_spgroup_get(&list, "w", 1, 0);
    uint64_t a, b;
    int o;
    cx_spgroup_join(g, &o, 0, &a);
    cx_spgroup_join(g, &o, 0, &b);
    struct cx_spgroup_lease l;
    for (int i = 0; i < 3; i++) {
        CX_CHECK_EQ_INT(cx_spgroup_next(g, a, 10, 0, 0, &l), 0); /* a: 0 2 4 */
        CX_CHECK_EQ_INT(cx_spgroup_next(g, b, 10, 0, 0, &l), 0); /* b: 1 3 5 */
    }
    uint64_t bad[] = {2, 1};
    CX_CHECK_EQ_INT(cx_spgroup_ack(g, a, bad, 2, 0), -ENOENT); /* 1 is b's: none acked */
    CX_CHECK(strstr(cx_errmsg(), "segment 1") != NULL);
    uint64_t twice[] = {2, 2};
    CX_CHECK_EQ_INT(cx_spgroup_ack(g, a, twice, 2, 0), -ENOENT);
    uint64_t a24[] = {2, 4};
    CX_CHECK_EQ_INT(cx_spgroup_ack(g, a, a24, 2, 0), 0); /* above the floor: it stays */
    CX_CHECK_EQ_INT((long)g->floor, 0);
    uint64_t b1[] = {1};
    CX_CHECK_EQ_INT(cx_spgroup_ack(g, b, b1, 1, 0), 0);
    uint64_t a0[] = {0};
    CX_CHECK_EQ_INT(cx_spgroup_ack(g, a, a0, 1, 0), 1); /* 0 1 2 acked: floor 3 */
    CX_CHECK_EQ_INT((long)g->floor, 3);
    uint64_t b3[] = {3};
    CX_CHECK_EQ_INT(cx_spgroup_ack(g, b, b3, 1, 0), 1); /* 3 4: floor 5 */
    CX_CHECK_EQ_INT((long)g->floor, 5);
    CX_CHECK_EQ_INT(cx_spgroup_ack(g, b, b3, 1, 0), -ENOENT); /* acked already */
    cx_spgroup_free_all(&list);
}

CX_TEST(departed_members_leases_come_first_and_the_end_waits_for_them)
{
    struct cx_spgroup *list = NULL, *g = cx_spgroup_get(&list, "w", 1, 0);
    uint64_t a, b, c;
    int oa, ob, oc;
    cx_spgroup_join(g, &oa, 0, &a);
    cx_spgroup_join(g, &ob, 100, &b); /* ack wait 100 ms */
    cx_spgroup_join(g, &oc, 0, &c);
    struct cx_spgroup_lease l;
    CX_CHECK_EQ_INT(cx_spgroup_next(g, a, 6, 1, 0, &l), 0); /* a: 0 1 */
    CX_CHECK_EQ_INT(cx_spgroup_next(g, a, 6, 1, 0, &l), 0);
    CX_CHECK_EQ_INT(cx_spgroup_next(g, b, 6, 1, 0, &l), 0); /* b: 2 3 */
    CX_CHECK_EQ_INT(cx_spgroup_next(g, b, 6, 1, 0, &l), 0);
    CX_CHECK_EQ_INT(cx_spgroup_next(g, c, 6, 1, 0, &l), 0); /* c: 4 5 */
    CX_CHECK_EQ_INT(cx_spgroup_next(g, c, 6, 1, 0, &l), 0);
    CX_CHECK_EQ_INT(cx_spgroup_next(g, c, 6, 1, 0, &l), -EAGAIN); /* others hold some */
    CX_CHECK_EQ_INT(cx_spgroup_leave(g, a), 0);                  /* a leaves: 0 1 back */
    CX_CHECK_EQ_INT(cx_spgroup_leave(g, a), -ESRCH);
    CX_CHECK_EQ_INT(cx_spgroup_next(g, c, 6, 1, 50, &l), 0);
    CX_CHECK_EQ_INT((long)l.pos, 0);
    CX_CHECK_EQ_INT((long)l.deliveries, 2);
    CX_CHECK_EQ_INT(cx_spgroup_next(g, c, 6, 1, 50, &l), 0);
    CX_CHECK_EQ_INT((long)l.pos, 1);
    /* b's deadline (100 ms after its last lease at 0) passes: its 2 3 come back */
    CX_CHECK_EQ_INT(cx_spgroup_next(g, c, 6, 1, 99, &l), -EAGAIN);
    CX_CHECK_EQ_INT(cx_spgroup_next(g, c, 6, 1, 101, &l), 0);
    CX_CHECK_EQ_INT((long)l.pos, 2);
    CX_CHECK_EQ_INT((long)g->expired, 1);
    CX_CHECK_EQ_INT(cx_spgroup_next(g, b, 6, 1, 101, &l), -ESRCH); /* b is gone */
    CX_CHECK_EQ_INT(cx_spgroup_next(g, c, 6, 1, 101, &l), 0);
    CX_CHECK_EQ_INT((long)l.pos, 3);
    /* c holds everything left: the end (for c) */
    CX_CHECK_EQ_INT(cx_spgroup_next(g, c, 6, 1, 101, &l), -EPIPE);
    /* c's owner goes: all six back, a new member gets them, lowest first */
    cx_spgroup_owner_gone(list, &oc);
    CX_CHECK_EQ_INT(g->nmember, 0);
    uint64_t d;
    cx_spgroup_join(g, &oa, 0, &d);
    for (int i = 0; i < 6; i++) {
        CX_CHECK_EQ_INT(cx_spgroup_next(g, d, 6, 1, 200, &l), 0);
        CX_CHECK_EQ_INT((long)l.pos, i);
    }
    uint64_t all[] = {5, 4, 3, 2, 1, 0};
    CX_CHECK_EQ_INT(cx_spgroup_ack(g, d, all, 6, 200), 1);
    CX_CHECK_EQ_INT((long)g->floor, 6);
    CX_CHECK_EQ_INT(cx_spgroup_next(g, d, 6, 1, 200, &l), -EPIPE);
    cx_spgroup_free_all(&list);
}

CX_TEST(members_are_capped)
{
    struct cx_spgroup *list = NULL, *g = cx_spgroup_get(&list, "w", 1, 0);
    uint64_t m;
    int o;
    for (int i = 0; i < CX_GROUP_MEMBERS; i++)
        CX_CHECK_EQ_INT(cx_spgroup_join(g, &o, 0, &m), 0);
    CX_CHECK_EQ_INT(cx_spgroup_join(g, &o, 0, &m), -EUSERS);
    cx_spgroup_free_all(&list);
}

CX_TEST_MAIN()
