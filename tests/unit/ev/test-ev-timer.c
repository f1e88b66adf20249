/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Timers: one-shot fires once, periodic fires repeatedly, re-arming and disarming, deletion from
 * the timer's own callback, and the loop's cached clock. A later timer (or the deadline) is the
 * clock that proves something did not happen again.
 */
#include "ev-test.h"

struct timer_ctx {
    struct ev_loop *loop;
    struct ev_timer *timer;
    int calls;
    uint64_t expirations;
    int stop_after;
    uint64_t fired_at_ms;
};

static void on_count(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct timer_ctx *ctx = userdata;

    ctx->calls++;
    ctx->expirations += expirations;
    ctx->fired_at_ms = ev_loop_now_ms(ctx->loop);
    if (ctx->stop_after > 0 && ctx->calls == ctx->stop_after)
        ev_loop_stop(ctx->loop, 0);
}

static void on_stop_zero(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    ev_loop_stop(userdata, 0);
}

static void test_one_shot_fires_once(void **state)
{
    struct timer_ctx ctx = {.loop = test_loop_new()};
    struct ev_timer *stop = NULL;
    uint64_t start = ev_loop_now_ms(ctx.loop);

    assert_int_equal(ev_timer_add(ctx.loop, 10, 0, on_count, &ctx, &ctx.timer), 0);
    assert_int_equal(ev_timer_add(ctx.loop, 100, 0, on_stop_zero, ctx.loop, &stop), 0);
    test_deadline(ctx.loop, TEST_DEADLINE_MS);

    assert_int_equal(ev_loop_run(ctx.loop), 0);
    assert_int_equal(ctx.calls, 1);
    assert_int_equal(ctx.expirations, 1);
    assert_true(ctx.fired_at_ms >= start + 10);
    assert_true(ev_loop_now_ms(ctx.loop) >= start + 100);
    ev_loop_free(ctx.loop);
}

static void test_periodic_fires_repeatedly(void **state)
{
    struct timer_ctx ctx = {.loop = test_loop_new(), .stop_after = 5};
    uint64_t start = ev_loop_now_ms(ctx.loop);

    assert_int_equal(ev_timer_add(ctx.loop, 5, 5, on_count, &ctx, &ctx.timer), 0);
    test_deadline(ctx.loop, TEST_DEADLINE_MS);

    assert_int_equal(ev_loop_run(ctx.loop), 0);
    assert_int_equal(ctx.calls, 5);
    assert_true(ctx.expirations >= 5);
    assert_true(ctx.fired_at_ms >= start + 25);
    ev_loop_free(ctx.loop);
}

static void test_zero_delay_fires_on_next_iteration(void **state)
{
    struct timer_ctx ctx = {.loop = test_loop_new(), .stop_after = 1};

    assert_int_equal(ev_timer_add(ctx.loop, 0, 0, on_count, &ctx, &ctx.timer), 0);
    test_deadline(ctx.loop, TEST_DEADLINE_MS);
    assert_int_equal(ev_loop_run(ctx.loop), 0);
    assert_int_equal(ctx.calls, 1);
    ev_loop_free(ctx.loop);
}

static void test_set_rearms_and_disarm_stops(void **state)
{
    struct timer_ctx ctx = {.loop = test_loop_new(), .stop_after = 1};
    struct timer_ctx other = {.loop = ctx.loop};

    /* Ten minutes, re-armed to 10 ms: only the re-arm can make it fire within the deadline. */
    assert_int_equal(ev_timer_add(ctx.loop, 600000, 0, on_count, &ctx, &ctx.timer), 0);
    assert_int_equal(ev_timer_set(ctx.timer, 10, 0), 0);
    /* Due before the other, but disarmed. */
    assert_int_equal(ev_timer_add(ctx.loop, 1, 1, on_count, &other, &other.timer), 0);
    assert_int_equal(ev_timer_disarm(other.timer), 0);
    test_deadline(ctx.loop, TEST_DEADLINE_MS);

    assert_int_equal(ev_loop_run(ctx.loop), 0);
    assert_int_equal(ctx.calls, 1);
    assert_int_equal(other.calls, 0);

    ctx.timer = ev_timer_del(ctx.timer);
    other.timer = ev_timer_del(other.timer);
    ev_loop_free(ctx.loop);
}

static void on_count_del_self(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct timer_ctx *ctx = userdata;

    ctx->calls++;
    ctx->timer = ev_timer_del(t);
}

static void test_periodic_deleted_from_own_callback(void **state)
{
    struct timer_ctx ctx = {.loop = test_loop_new()};
    struct ev_timer *stop = NULL;

    assert_int_equal(ev_timer_add(ctx.loop, 1, 1, on_count_del_self, &ctx, &ctx.timer), 0);
    assert_int_equal(ev_timer_add(ctx.loop, 50, 0, on_stop_zero, ctx.loop, &stop), 0);
    test_deadline(ctx.loop, TEST_DEADLINE_MS);

    assert_int_equal(ev_loop_run(ctx.loop), 0);
    assert_int_equal(ctx.calls, 1);
    assert_null(ctx.timer);
    ev_loop_free(ctx.loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_shot_fires_once),
        cmocka_unit_test(test_periodic_fires_repeatedly),
        cmocka_unit_test(test_zero_delay_fires_on_next_iteration),
        cmocka_unit_test(test_set_rearms_and_disarm_stops),
        cmocka_unit_test(test_periodic_deleted_from_own_callback),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
