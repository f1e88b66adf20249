/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Other threads talking to the loop: ev_wake_signal() from a thread, coalescing of wake-ups,
 * ev_post() from a thread (order kept, run on the loop thread), and posts still queued when the
 * loop is freed.
 */
#include <pthread.h>

#include "ev-test.h"

struct wake_ctx {
    struct ev_loop *loop;
    struct ev_wake *wake;
    pthread_t loop_thread;
    int calls;
    bool on_loop_thread;
};

static void on_wake(struct ev_wake *w, void *userdata)
{
    struct wake_ctx *ctx = userdata;

    ctx->calls++;
    ctx->on_loop_thread = pthread_equal(pthread_self(), ctx->loop_thread);
    ev_loop_stop(ctx->loop, 5);
}

static void *wake_thread(void *arg)
{
    struct wake_ctx *ctx = arg;

    ev_wake_signal(ctx->wake);
    return NULL;
}

static void test_wake_from_thread(void **state)
{
    struct wake_ctx ctx = {.loop = test_loop_new(), .loop_thread = pthread_self()};
    pthread_t th;

    assert_int_equal(ev_wake_add(ctx.loop, on_wake, &ctx, &ctx.wake), 0);
    test_deadline(ctx.loop, TEST_DEADLINE_MS);
    assert_int_equal(pthread_create(&th, NULL, wake_thread, &ctx), 0);

    assert_int_equal(ev_loop_run(ctx.loop), 5);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(ctx.calls, 1);
    assert_true(ctx.on_loop_thread);

    ctx.wake = ev_wake_del(ctx.wake);
    ev_loop_free(ctx.loop);
}

static void on_wake_count(struct ev_wake *w, void *userdata)
{
    struct wake_ctx *ctx = userdata;

    ctx->calls++;
}

static void on_stop_zero(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    ev_loop_stop(userdata, 0);
}

static void test_wakes_coalesce(void **state)
{
    struct wake_ctx ctx = {.loop = test_loop_new()};
    struct ev_timer *stop = NULL;

    assert_int_equal(ev_wake_add(ctx.loop, on_wake_count, &ctx, &ctx.wake), 0);
    for (int i = 0; i < 3; i++)
        ev_wake_signal(ctx.wake);
    assert_int_equal(ev_timer_add(ctx.loop, 50, 0, on_stop_zero, ctx.loop, &stop), 0);
    test_deadline(ctx.loop, TEST_DEADLINE_MS);

    assert_int_equal(ev_loop_run(ctx.loop), 0);
    assert_int_equal(ctx.calls, 1);
    ev_loop_free(ctx.loop);
}

#define N_POSTS 100

struct post_ctx {
    struct ev_loop *loop;
    pthread_t loop_thread;
    int seen;
    int post_errors;
    bool out_of_order;
    bool off_loop_thread;
};

struct post_item {
    struct post_ctx *ctx;
    int seq;
};

static void on_post(void *userdata)
{
    struct post_item *item = userdata;
    struct post_ctx *ctx = item->ctx;

    if (item->seq != ctx->seen)
        ctx->out_of_order = true;
    if (!pthread_equal(pthread_self(), ctx->loop_thread))
        ctx->off_loop_thread = true;
    ctx->seen++;
    if (ctx->seen == N_POSTS)
        ev_loop_stop(ctx->loop, 0);
    free(item);
}

static void *post_thread(void *arg)
{
    struct post_ctx *ctx = arg;

    for (int i = 0; i < N_POSTS; i++) {
        struct post_item *item = malloc(sizeof(*item));

        if (item)
            *item = (struct post_item){.ctx = ctx, .seq = i};
        /* Counted here, read by the test only after the join. */
        if (!item || ev_post(ctx->loop, on_post, item) < 0) {
            free(item);
            ctx->post_errors++;
        }
    }
    return NULL;
}

static void test_post_from_thread(void **state)
{
    struct post_ctx ctx = {.loop = test_loop_new(), .loop_thread = pthread_self()};
    pthread_t th;

    test_deadline(ctx.loop, TEST_DEADLINE_MS);
    assert_int_equal(pthread_create(&th, NULL, post_thread, &ctx), 0);

    assert_int_equal(ev_loop_run(ctx.loop), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(ctx.post_errors, 0);
    assert_int_equal(ctx.seen, N_POSTS);
    assert_false(ctx.out_of_order);
    assert_false(ctx.off_loop_thread);
    ev_loop_free(ctx.loop);
}

static void test_posts_run_when_loop_freed(void **state)
{
    struct post_ctx ctx = {.loop = test_loop_new(), .loop_thread = pthread_self()};

    for (int i = 0; i < 3; i++) {
        struct post_item *item = malloc(sizeof(*item));

        assert_non_null(item);
        *item = (struct post_item){.ctx = &ctx, .seq = i};
        assert_int_equal(ev_post(ctx.loop, on_post, item), 0);
    }
    ev_loop_free(ctx.loop);
    assert_int_equal(ctx.seen, 3);
    assert_false(ctx.out_of_order);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wake_from_thread),
        cmocka_unit_test(test_wakes_coalesce),
        cmocka_unit_test(test_post_from_thread),
        cmocka_unit_test(test_posts_run_when_loop_freed),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
