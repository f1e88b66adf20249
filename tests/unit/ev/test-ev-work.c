/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The work pool: work runs off the loop thread and its done function on it with the work's result;
 * freeing a pool with work queued cancels what has not started and still calls every done function
 * exactly once (from the loop, or from ev_loop_free()); a pool may be freed from a done function.
 */
#include <pthread.h>
#include <semaphore.h>
#include <time.h>

#include "ev-test.h"

#define N_ITEMS 100

struct work_ctx {
    struct ev_loop *loop;
    struct ev_work_pool *pool;
    pthread_t loop_thread;
    int done;
    int stop_at;
    bool done_off_loop_thread;
    bool work_on_loop_thread;
    bool bad_result;
    bool free_pool_in_done;
    sem_t started, release;
};

struct work_item {
    struct work_ctx *ctx;
    int index;
    bool ran;    /* written by the worker, read on the loop thread after done */
    bool blocks; /* wait for ctx->release */
    int done_calls;
    int result;
};

static int work_fn(void *userdata)
{
    struct work_item *item = userdata;
    struct work_ctx *ctx = item->ctx;

    if (pthread_equal(pthread_self(), ctx->loop_thread))
        __atomic_store_n(&ctx->work_on_loop_thread, true, __ATOMIC_RELAXED);
    item->ran = true;
    if (item->blocks) {
        sem_post(&ctx->started);
        sem_wait(&ctx->release);
    }
    return item->index * 3;
}

static void done_fn(int result, void *userdata)
{
    struct work_item *item = userdata;
    struct work_ctx *ctx = item->ctx;

    if (!pthread_equal(pthread_self(), ctx->loop_thread))
        ctx->done_off_loop_thread = true;
    /* Either the work's own result after it ran, or a cancellation before it could. */
    if (item->ran ? result != item->index * 3 : result != -ECANCELED)
        ctx->bad_result = true;
    item->done_calls++;
    item->result = result;
    ctx->done++;
    if (ctx->free_pool_in_done)
        ctx->pool = ev_work_pool_free(ctx->pool);
    if (ctx->done == ctx->stop_at)
        ev_loop_stop(ctx->loop, 0);
}

static void ctx_init(struct work_ctx *ctx, struct work_item *items, int n)
{
    *ctx = (struct work_ctx){.loop = test_loop_new(), .loop_thread = pthread_self(), .stop_at = n};
    assert_int_equal(sem_init(&ctx->started, 0, 0), 0);
    assert_int_equal(sem_init(&ctx->release, 0, 0), 0);
    for (int i = 0; i < n; i++)
        items[i] = (struct work_item){.ctx = ctx, .index = i};
}

static void ctx_check(struct work_ctx *ctx, struct work_item *items, int n)
{
    assert_int_equal(ctx->done, n);
    assert_false(ctx->done_off_loop_thread);
    assert_false(ctx->work_on_loop_thread);
    assert_false(ctx->bad_result);
    for (int i = 0; i < n; i++)
        assert_int_equal(items[i].done_calls, 1);
    sem_destroy(&ctx->started);
    sem_destroy(&ctx->release);
}

static void submit_all(struct work_ctx *ctx, struct work_item *items, int n)
{
    for (int i = 0; i < n; i++)
        assert_int_equal(ev_work_submit(ctx->pool, work_fn, done_fn, &items[i]), 0);
}

static void test_hundred_items_two_threads(void **state)
{
    struct work_ctx ctx;
    struct work_item items[N_ITEMS];

    ctx_init(&ctx, items, N_ITEMS);
    assert_int_equal(ev_work_pool_new(ctx.loop, 2, &ctx.pool), 0);
    test_deadline(ctx.loop, TEST_DEADLINE_MS);
    submit_all(&ctx, items, N_ITEMS);

    assert_int_equal(ev_loop_run(ctx.loop), 0);
    ctx_check(&ctx, items, N_ITEMS);
    for (int i = 0; i < N_ITEMS; i++) {
        assert_true(items[i].ran);
        assert_int_equal(items[i].result, i * 3);
    }
    ctx.pool = ev_work_pool_free(ctx.pool);
    ev_loop_free(ctx.loop);
}

static void wait_started(struct work_ctx *ctx)
{
    struct timespec deadline;

    assert_int_equal(clock_gettime(CLOCK_REALTIME, &deadline), 0);
    deadline.tv_sec += TEST_DEADLINE_MS / 1000;
    assert_int_equal(sem_timedwait(&ctx->started, &deadline), 0);
}

/* A one-thread pool, its worker held in items[0] while the rest queue behind it, then let go. */
static void start_one_held(struct work_ctx *ctx, struct work_item *items, int n)
{
    ctx_init(ctx, items, n);
    items[0].blocks = true;
    assert_int_equal(ev_work_pool_new(ctx->loop, 1, &ctx->pool), 0);
    submit_all(ctx, items, n);
    wait_started(ctx);
    sem_post(&ctx->release);
}

/* One thread, held in the first item while the others queue behind it; the pool is freed right
 * after the first item is released. Items the worker did not get to are cancelled (work_fn never
 * runs); every item still gets exactly one done call, on the loop thread, from the next loop run.
 */
static void test_free_pool_with_pending_work(void **state)
{
    struct work_ctx ctx;
    struct work_item items[20];

    start_one_held(&ctx, items, 20);
    ctx.pool = ev_work_pool_free(ctx.pool);
    assert_int_equal(ctx.done, 0);

    test_deadline(ctx.loop, TEST_DEADLINE_MS);
    assert_int_equal(ev_loop_run(ctx.loop), 0);
    ctx_check(&ctx, items, 20);
    assert_true(items[0].ran);
    assert_int_equal(items[0].result, 0);
    ev_loop_free(ctx.loop);
}

/* The loop frees the pool it still has and runs every done function before it is gone. */
static void test_free_loop_with_pool_and_pending_work(void **state)
{
    struct work_ctx ctx;
    struct work_item items[20];

    start_one_held(&ctx, items, 20);
    ev_loop_free(ctx.loop);
    ctx_check(&ctx, items, 20);
}

static void test_free_pool_from_done(void **state)
{
    struct work_ctx ctx;
    struct work_item items[30];

    ctx_init(&ctx, items, 30);
    ctx.free_pool_in_done = true;
    assert_int_equal(ev_work_pool_new(ctx.loop, 3, &ctx.pool), 0);
    test_deadline(ctx.loop, TEST_DEADLINE_MS);
    submit_all(&ctx, items, 30);

    assert_int_equal(ev_loop_run(ctx.loop), 0);
    assert_null(ctx.pool);
    ctx_check(&ctx, items, 30);
    ev_loop_free(ctx.loop);
}

static void test_pool_bad_args(void **state)
{
    struct ev_loop *loop = test_loop_new();
    struct ev_work_pool *pool = NULL;

    assert_int_equal(ev_work_pool_new(loop, 0, &pool), -EINVAL);
    assert_int_equal(ev_work_pool_new(loop, 65, &pool), -EINVAL);
    assert_null(pool);
    ev_loop_free(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hundred_items_two_threads),
        cmocka_unit_test(test_free_pool_with_pending_work),
        cmocka_unit_test(test_free_loop_with_pool_and_pending_work),
        cmocka_unit_test(test_free_pool_from_done),
        cmocka_unit_test(test_pool_bad_args),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
