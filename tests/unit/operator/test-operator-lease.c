/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leader election's state machine with client-go's rules: create a missing Lease, wait while
 * another holder's record keeps changing, take it over once it has not changed for the lease
 * duration on our own clock, take a released one at once, renew keeping acquireTime, count
 * transitions, a 409 that changes nothing, the renew deadline; and the MicroTime format and
 * identity.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "operator-lease.h"

#define US(s) ((int64_t)(s)*1000000)

static struct op_lease_record rec(const char *holder, int32_t dur, int64_t acq, int64_t renew,
                                  int32_t transitions)
{
    struct op_lease_record r = {
        .duration_s = dur, .acquire_us = acq, .renew_us = renew, .transitions = transitions};
    snprintf(r.holder, sizeof(r.holder), "%s", holder);
    return r;
}

static void test_create_and_renew(void **state)
{
    (void)state;
    struct op_lease_sm sm;
    struct op_lease_record w;
    op_lease_sm_init(&sm, "me_1", 15000, 10000);
    assert_int_equal(op_lease_sm_step(&sm, NULL, 1000, US(100), &w), OP_LEASE_CREATE);
    assert_string_equal(w.holder, "me_1");
    assert_int_equal(w.duration_s, 15);
    assert_int_equal(w.acquire_us, US(100));
    assert_int_equal(w.renew_us, US(100));
    assert_int_equal(w.transitions, 0);
    assert_false(sm.leader);
    op_lease_sm_written(&sm, true, &w, 1010);
    assert_true(sm.leader);
    assert_false(op_lease_sm_lost(&sm, 1010 + 9999));
    /* renew: acquireTime and transitions kept, renewTime moves */
    struct op_lease_record live = w;
    assert_int_equal(op_lease_sm_step(&sm, &live, 3000, US(102), &w), OP_LEASE_UPDATE);
    assert_int_equal(w.acquire_us, US(100));
    assert_int_equal(w.renew_us, US(102));
    assert_int_equal(w.transitions, 0);
    op_lease_sm_written(&sm, true, &w, 3010);
    assert_true(sm.leader);
    /* renewals failing: lost at the deadline, counted from the last success */
    op_lease_sm_written(&sm, false, &w, 5000);
    assert_true(sm.leader);
    assert_false(op_lease_sm_lost(&sm, 3010 + 9999));
    assert_true(op_lease_sm_lost(&sm, 3010 + 10000));
}

static void test_wait_then_take_over(void **state)
{
    (void)state;
    struct op_lease_sm sm;
    struct op_lease_record w;
    op_lease_sm_init(&sm, "me_2", 15000, 10000);
    /* someone else holds it and keeps renewing: wait, however old its times look to us */
    struct op_lease_record other = rec("other_1", 15, US(1), US(2), 3);
    assert_int_equal(op_lease_sm_step(&sm, &other, 100000, US(999999), &w), OP_LEASE_WAIT);
    other.renew_us = US(4);
    assert_int_equal(op_lease_sm_step(&sm, &other, 110000, US(999999), &w), OP_LEASE_WAIT);
    /* the record stops changing: expired 15 s after we last saw it change, not before */
    assert_int_equal(op_lease_sm_step(&sm, &other, 124999, US(5), &w), OP_LEASE_WAIT);
    assert_int_equal(op_lease_sm_step(&sm, &other, 125000, US(5), &w), OP_LEASE_UPDATE);
    assert_string_equal(w.holder, "me_2");
    assert_int_equal(w.transitions, 4);
    assert_int_equal(w.acquire_us, US(5));
    assert_int_equal(w.renew_us, US(5));
    assert_false(sm.leader);
    /* the update conflicts (someone wrote first): still not leader */
    op_lease_sm_written(&sm, false, &w, 125010);
    assert_false(sm.leader);
    assert_false(op_lease_sm_lost(&sm, 999999));
    /* the winner's record is new to us: wait a whole lease again */
    struct op_lease_record winner = rec("third_3", 15, US(5), US(5), 4);
    assert_int_equal(op_lease_sm_step(&sm, &winner, 127000, US(7), &w), OP_LEASE_WAIT);
    assert_int_equal(op_lease_sm_step(&sm, &winner, 141999, US(7), &w), OP_LEASE_WAIT);
    assert_int_equal(op_lease_sm_step(&sm, &winner, 142000, US(7), &w), OP_LEASE_UPDATE);
    op_lease_sm_written(&sm, true, &w, 142010);
    assert_true(sm.leader);
    assert_int_equal(w.transitions, 5);
}

static void test_released_and_durations(void **state)
{
    (void)state;
    struct op_lease_sm sm;
    struct op_lease_record w;
    op_lease_sm_init(&sm, "me_3", 3000, 2000);
    /* released by its holder (empty holderIdentity): taken at once */
    struct op_lease_record released = rec("", 1, US(9), US(9), 7);
    assert_int_equal(op_lease_sm_step(&sm, &released, 500, US(10), &w), OP_LEASE_UPDATE);
    assert_int_equal(w.transitions, 8);
    assert_int_equal(w.duration_s, 3);
    /* the record's own duration counts (a 1 s lease is stale after 1 s) */
    struct op_lease_record short_lease = rec("other", 1, US(1), US(1), 0);
    op_lease_sm_init(&sm, "me_3", 15000, 10000);
    assert_int_equal(op_lease_sm_step(&sm, &short_lease, 500, US(10), &w), OP_LEASE_WAIT);
    assert_int_equal(op_lease_sm_step(&sm, &short_lease, 1500, US(10), &w), OP_LEASE_UPDATE);
    /* without one, ours */
    struct op_lease_record no_dur = rec("other", 0, US(1), US(1), 0);
    op_lease_sm_init(&sm, "me_3", 15000, 10000);
    assert_int_equal(op_lease_sm_step(&sm, &no_dur, 0, US(10), &w), OP_LEASE_WAIT);
    assert_int_equal(op_lease_sm_step(&sm, &no_dur, 14999, US(10), &w), OP_LEASE_WAIT);
    assert_int_equal(op_lease_sm_step(&sm, &no_dur, 15000, US(10), &w), OP_LEASE_UPDATE);
    /* a lease duration below a second is written as 1 s */
    op_lease_sm_init(&sm, "me_3", 400, 300);
    assert_int_equal(op_lease_sm_step(&sm, NULL, 0, US(1), &w), OP_LEASE_CREATE);
    assert_int_equal(w.duration_s, 1);
    /* a leader whose lease someone else took waits, and loses at the deadline */
    op_lease_sm_init(&sm, "me_3", 15000, 10000);
    assert_int_equal(op_lease_sm_step(&sm, NULL, 0, US(1), &w), OP_LEASE_CREATE);
    op_lease_sm_written(&sm, true, &w, 0);
    struct op_lease_record thief = rec("thief", 15, US(2), US(2), 1);
    assert_int_equal(op_lease_sm_step(&sm, &thief, 2000, US(3), &w), OP_LEASE_WAIT);
    assert_false(op_lease_sm_lost(&sm, 9999));
    assert_true(op_lease_sm_lost(&sm, 10000));
}

static void test_json(void **state)
{
    (void)state;
    char buf[32];
    int64_t us = 0;
    op_microtime_format(US(1767225600) + 123456, buf); /* 2026-01-01 */
    assert_string_equal(buf, "2026-01-01T00:00:00.123456Z");
    assert_int_equal(op_microtime_parse(buf, &us), 0);
    assert_int_equal(us, US(1767225600) + 123456);
    assert_int_equal(op_microtime_parse("2026-01-01T01:00:00+01:00", &us), 0);
    assert_int_equal(us, US(1767225600));
    assert_int_equal(op_microtime_parse("2026-01-01T00:00:00.5Z", &us), 0);
    assert_int_equal(us, US(1767225600) + 500000);
    assert_int_equal(op_microtime_parse("2026-01-01T00:00:00.123456789Z", &us), 0);
    assert_int_equal(us, US(1767225600) + 123456);
    static const char *const bad[] = {"",
                                      "2026-01-01",
                                      "2026-01-01T00:00:00",
                                      "2026-13-01T00:00:00Z",
                                      "2026-01-01T00:00:00.Z",
                                      "2026-01-01T00:00:00Zjunk",
                                      "2026-01-01T00:00:00.1234567890Z"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(op_microtime_parse(bad[i], &us), -EINVAL);

    struct op_lease_record r = rec("host_abc", 15, US(100) + 1, US(200) + 2, 3), back;
    json_t *spec = op_lease_record_to_json(&r);
    assert_non_null(spec);
    json_t *lease = json_pack("{s:o}", "spec", spec);
    assert_int_equal(op_lease_record_from_json(lease, &back), 0);
    assert_true(op_lease_record_equal(&r, &back));
    assert_string_equal(json_string_value(json_object_get(spec, "renewTime")),
                        "1970-01-01T00:03:20.000002Z");
    assert_int_equal(json_integer_value(json_object_get(spec, "leaseDurationSeconds")), 15);
    json_decref(lease);
    /* an empty spec is a free lease; wrong types are refused */
    lease = json_pack("{s:{}}", "spec");
    assert_int_equal(op_lease_record_from_json(lease, &back), 0);
    assert_string_equal(back.holder, "");
    json_decref(lease);
    lease = json_pack("{s:{s:i}}", "spec", "holderIdentity", 3);
    assert_int_equal(op_lease_record_from_json(lease, &back), -EINVAL);
    json_decref(lease);
    lease = json_pack("{s:{s:s}}", "spec", "renewTime", "yesterday");
    assert_int_equal(op_lease_record_from_json(lease, &back), -EINVAL);
    json_decref(lease);
}

static void test_identity(void **state)
{
    (void)state;
    char a[OP_LEASE_HOLDER_MAX], b[OP_LEASE_HOLDER_MAX];
    assert_int_equal(op_lease_identity(a), 0);
    assert_int_equal(op_lease_identity(b), 0);
    assert_string_not_equal(a, b);
    const char *uuid = strrchr(a, '_');
    assert_non_null(uuid);
    assert_int_equal(strlen(uuid + 1), 36);
    assert_int_equal(uuid[15], '4'); /* version 4 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_and_renew),
        cmocka_unit_test(test_wait_then_take_over),
        cmocka_unit_test(test_released_and_durations),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
