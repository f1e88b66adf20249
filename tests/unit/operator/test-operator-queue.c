/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The operator's work queue: keys coalesce, a key being processed is never handed out twice and
 * comes back once done when it was added meanwhile, the back-off sequence 100 ms → 3 s and its
 * reset, requeue-after (the earlier delay wins), and when the caller must look again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "operator-queue.h"

static struct op_queue *queue(void)
{
    struct op_queue *q = NULL;
    assert_int_equal(op_queue_new(NULL, &q), 0);
    return q;
}

static void test_coalesce(void **state)
{
    (void)state;
    struct op_queue *q = queue();
    char key[OP_QUEUE_KEY_MAX];
    assert_int_equal(op_queue_next_ms(q, 0), OP_QUEUE_NEVER);
    assert_false(op_queue_get(q, 0, key));
    for (int i = 0; i < 5; i++)
        assert_int_equal(op_queue_add(q, "policy", 10), 0);
    assert_int_equal(op_queue_add(q, "labels", 11), 0);
    assert_int_equal(op_queue_len(q), 2);
    assert_int_equal(op_queue_next_ms(q, 12), 0);
    /* in the order they became ready, each once */
    assert_true(op_queue_get(q, 12, key));
    assert_string_equal(key, "policy");
    assert_true(op_queue_get(q, 12, key));
    assert_string_equal(key, "labels");
    assert_false(op_queue_get(q, 12, key));
    op_queue_done(q, "policy", 13);
    op_queue_done(q, "labels", 13);
    assert_int_equal(op_queue_len(q), 0);
    assert_int_equal(op_queue_next_ms(q, 13), OP_QUEUE_NEVER);
    op_queue_free(q);
}

static void test_processing(void **state)
{
    (void)state;
    struct op_queue *q = queue();
    char key[OP_QUEUE_KEY_MAX];
    assert_int_equal(op_queue_add(q, "policy", 0), 0);
    assert_true(op_queue_get(q, 0, key));
    /* events while the pass runs: not handed out again until it is done, then once */
    assert_int_equal(op_queue_add(q, "policy", 1), 0);
    assert_int_equal(op_queue_add(q, "policy", 2), 0);
    assert_false(op_queue_get(q, 3, key));
    assert_int_equal(op_queue_next_ms(q, 3), OP_QUEUE_NEVER);
    op_queue_done(q, "policy", 4);
    assert_int_equal(op_queue_next_ms(q, 4), 0);
    assert_true(op_queue_get(q, 4, key));
    assert_string_equal(key, "policy");
    op_queue_done(q, "policy", 5);
    assert_false(op_queue_get(q, 5, key));
    /* a delay coming due during processing: ready after done, no busy loop before */
    assert_int_equal(op_queue_add(q, "policy", 10), 0);
    assert_true(op_queue_get(q, 10, key));
    assert_int_equal(op_queue_add_after(q, "policy", 10, 50), 0);
    assert_int_equal(op_queue_next_ms(q, 20), 40);
    assert_int_equal(op_queue_next_ms(q, 70), OP_QUEUE_NEVER);
    assert_false(op_queue_get(q, 70, key));
    op_queue_done(q, "policy", 80);
    assert_true(op_queue_get(q, 80, key));
    op_queue_done(q, "policy", 81);
    assert_int_equal(op_queue_next_ms(q, 81), OP_QUEUE_NEVER);
    op_queue_free(q);
}

static void test_backoff(void **state)
{
    (void)state;
    struct op_queue *q = queue();
    char key[OP_QUEUE_KEY_MAX];
    static const uint64_t want[] = {100, 200, 400, 800, 1600, 3000, 3000, 3000};
    uint64_t now = 1000;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        uint64_t delay = 0;
        assert_int_equal(op_queue_add_rate_limited(q, "policy", now, &delay), 0);
        assert_int_equal(delay, want[i]);
        assert_int_equal(op_queue_failures(q, "policy"), i + 1);
        assert_int_equal(op_queue_next_ms(q, now), want[i]);
        assert_false(op_queue_get(q, now + want[i] - 1, key));
        now += want[i];
        assert_true(op_queue_get(q, now, key));
        op_queue_done(q, "policy", now);
    }
    /* a success resets the sequence */
    op_queue_forget(q, "policy");
    assert_int_equal(op_queue_failures(q, "policy"), 0);
    uint64_t delay = 0;
    assert_int_equal(op_queue_add_rate_limited(q, "policy", now, &delay), 0);
    assert_int_equal(delay, 100);
    /* the back-off is per key */
    assert_int_equal(op_queue_add_rate_limited(q, "labels", now, &delay), 0);
    assert_int_equal(delay, 100);
    op_queue_free(q);

    /* other bounds */
    const struct op_queue_options o = {.backoff_base_ms = 5, .backoff_max_ms = 12};
    assert_int_equal(op_queue_new(&o, &q), 0);
    static const uint64_t want2[] = {5, 10, 12, 12};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(op_queue_add_rate_limited(q, "k", 0, &delay), 0);
        assert_int_equal(delay, want2[i]);
    }
    op_queue_free(q);
}

static void test_requeue_after(void **state)
{
    (void)state;
    struct op_queue *q = queue();
    char key[OP_QUEUE_KEY_MAX];
    assert_int_equal(op_queue_add_after(q, "policy", 0, 5000), 0);
    assert_int_equal(op_queue_len(q), 1);
    assert_int_equal(op_queue_next_ms(q, 1000), 4000);
    /* a later delay does not push it back; an earlier one brings it forward */
    assert_int_equal(op_queue_add_after(q, "policy", 1000, 9000), 0);
    assert_int_equal(op_queue_next_ms(q, 1000), 4000);
    assert_int_equal(op_queue_add_after(q, "policy", 1000, 1000), 0);
    assert_int_equal(op_queue_next_ms(q, 1000), 1000);
    assert_false(op_queue_get(q, 1999, key));
    assert_true(op_queue_get(q, 2000, key));
    assert_string_equal(key, "policy");
    op_queue_done(q, "policy", 2000);
    assert_int_equal(op_queue_next_ms(q, 2000), OP_QUEUE_NEVER);
    /* a zero delay is an add */
    assert_int_equal(op_queue_add_after(q, "labels", 3000, 0), 0);
    assert_int_equal(op_queue_next_ms(q, 3000), 0);
    /* a delayed key that is also ready now comes out once now, and again when its delay ends */
    assert_int_equal(op_queue_add_after(q, "policy", 3000, 100), 0);
    assert_int_equal(op_queue_add(q, "policy", 3000), 0);
    assert_true(op_queue_get(q, 3000, key));
    assert_string_equal(key, "labels");
    assert_true(op_queue_get(q, 3000, key));
    assert_string_equal(key, "policy");
    op_queue_done(q, "labels", 3001);
    op_queue_done(q, "policy", 3001);
    assert_int_equal(op_queue_next_ms(q, 3001), 99);
    assert_true(op_queue_get(q, 3100, key));
    op_queue_done(q, "policy", 3100);
    assert_int_equal(op_queue_next_ms(q, 3100), OP_QUEUE_NEVER);
    /* a pass that ended ready drops a requeue an earlier one asked for */
    assert_int_equal(op_queue_add_after(q, "policy", 4000, 5000), 0);
    assert_int_equal(op_queue_add(q, "policy", 4000), 0);
    assert_true(op_queue_get(q, 4000, key));
    op_queue_clear_delay(q, "policy");
    op_queue_done(q, "policy", 4001);
    assert_int_equal(op_queue_next_ms(q, 4001), OP_QUEUE_NEVER);
    assert_int_equal(op_queue_len(q), 0);
    op_queue_free(q);
}

static void test_keys(void **state)
{
    (void)state;
    struct op_queue *q = queue();
    char key[OP_QUEUE_KEY_MAX];
    char longkey[OP_QUEUE_KEY_MAX + 1];
    memset(longkey, 'k', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    assert_int_equal(op_queue_add(q, "", 0), -EINVAL);
    assert_int_equal(op_queue_add(q, longkey, 0), -EINVAL);
    char name[16];
    for (int i = 0; i < 64; i++) {
        snprintf(name, sizeof(name), "k%d", i);
        assert_int_equal(op_queue_add(q, name, 0), 0);
    }
    assert_int_equal(op_queue_add(q, "one-too-many", 0), -ENOBUFS);
    /* handed out and done, slots come back */
    for (int i = 0; i < 64; i++) {
        assert_true(op_queue_get(q, 0, key));
        op_queue_done(q, key, 0);
    }
    assert_int_equal(op_queue_add(q, "one-too-many", 0), 0);
    /* done for a key never handed out is harmless */
    op_queue_done(q, "nothing", 0);
    op_queue_forget(q, "nothing");
    op_queue_free(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coalesce), cmocka_unit_test(test_processing),
        cmocka_unit_test(test_backoff),  cmocka_unit_test(test_requeue_after),
        cmocka_unit_test(test_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
