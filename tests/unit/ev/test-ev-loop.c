/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The loop and fd watches: readiness on a pipe, enabling a disabled watch, hang-up, deleting
 * watches from callbacks while a batch is being dispatched (the case the deferred free exists for),
 * and the run/stop contract.
 */
#include <fcntl.h>
#include <unistd.h>

#include "ev-test.h"

struct pipe_ctx {
    struct ev_loop *loop;
    int fds[2];
    struct ev_io *io[2];
    int calls;
    uint32_t revents;
    bool enabled_by_timer;
};

static void pipe_open(int fds[2])
{
    assert_int_equal(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
}

static void pipe_close(int fds[2])
{
    for (int i = 0; i < 2; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
        fds[i] = -1;
    }
}

static void write_byte(int fd, char c)
{
    assert_int_equal(write(fd, &c, 1), 1);
}

static void on_read_stop(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    struct pipe_ctx *ctx = userdata;
    char c = 0;

    ctx->calls++;
    ctx->revents = revents;
    assert_int_equal(read(fd, &c, 1), 1);
    assert_int_equal(c, 'x');
    ev_loop_stop(ctx->loop, 7);
}

static void test_io_pipe_readable(void **state)
{
    struct pipe_ctx ctx = {.loop = test_loop_new()};

    pipe_open(ctx.fds);
    test_deadline(ctx.loop, TEST_DEADLINE_MS);
    assert_int_equal(ev_io_add(ctx.loop, ctx.fds[0], EV_READ, on_read_stop, &ctx, &ctx.io[0]), 0);
    write_byte(ctx.fds[1], 'x');

    assert_int_equal(ev_loop_run(ctx.loop), 7);
    assert_int_equal(ctx.calls, 1);
    assert_true(ctx.revents & EV_READ);

    ctx.io[0] = ev_io_del(ctx.io[0]);
    assert_null(ctx.io[0]);
    ev_loop_free(ctx.loop);
    pipe_close(ctx.fds);
}

static void on_enable_timer(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct pipe_ctx *ctx = userdata;

    ctx->enabled_by_timer = true;
    assert_int_equal(ev_io_modify(ctx->io[0], EV_READ), 0);
}

static void on_read_after_enable(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    struct pipe_ctx *ctx = userdata;

    assert_true(ctx->enabled_by_timer);
    on_read_stop(io, fd, revents, userdata);
}

/* A watch added with no events stays silent on a readable fd until ev_io_modify() enables it. */
static void test_io_added_disabled_then_modified(void **state)
{
    struct pipe_ctx ctx = {.loop = test_loop_new()};
    struct ev_timer *t = NULL;

    pipe_open(ctx.fds);
    test_deadline(ctx.loop, TEST_DEADLINE_MS);
    assert_int_equal(ev_io_add(ctx.loop, ctx.fds[0], 0, on_read_after_enable, &ctx, &ctx.io[0]), 0);
    write_byte(ctx.fds[1], 'x');
    assert_int_equal(ev_timer_add(ctx.loop, 20, 0, on_enable_timer, &ctx, &t), 0);

    assert_int_equal(ev_loop_run(ctx.loop), 7);
    assert_int_equal(ctx.calls, 1);

    ev_loop_free(ctx.loop);
    pipe_close(ctx.fds);
}

static void on_hup(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    struct pipe_ctx *ctx = userdata;
    char c;

    ctx->revents = revents;
    assert_int_equal(read(fd, &c, 1), 0);
    ev_loop_stop(ctx->loop, 0);
}

static void test_io_hangup_is_readable(void **state)
{
    struct pipe_ctx ctx = {.loop = test_loop_new()};

    pipe_open(ctx.fds);
    test_deadline(ctx.loop, TEST_DEADLINE_MS);
    assert_int_equal(ev_io_add(ctx.loop, ctx.fds[0], EV_READ, on_hup, &ctx, &ctx.io[0]), 0);
    close(ctx.fds[1]);
    ctx.fds[1] = -1;

    assert_int_equal(ev_loop_run(ctx.loop), 0);
    assert_int_equal(ctx.revents & (EV_READ | EV_HUP), EV_READ | EV_HUP);

    ev_loop_free(ctx.loop);
    pipe_close(ctx.fds);
}

static void test_io_bad_args(void **state)
{
    struct pipe_ctx ctx = {.loop = test_loop_new()};
    struct ev_io *io = NULL;

    pipe_open(ctx.fds);
    assert_int_equal(ev_io_add(ctx.loop, -1, EV_READ, on_hup, &ctx, &io), -EBADF);
    assert_int_equal(ev_io_add(ctx.loop, ctx.fds[0], 1u << 7, on_hup, &ctx, &io), -EINVAL);
    assert_null(io);
    assert_int_equal(ev_io_add(ctx.loop, ctx.fds[0], EV_READ, on_hup, &ctx, &ctx.io[0]), 0);
    assert_int_equal(ev_io_add(ctx.loop, ctx.fds[0], EV_READ, on_hup, &ctx, &io), -EEXIST);
    assert_null(io);

    ev_loop_free(ctx.loop);
    pipe_close(ctx.fds);
}

static void on_writable(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    struct pipe_ctx *ctx = userdata;

    ctx->revents = revents;
    ev_loop_stop(ctx->loop, 0);
}

static void test_io_writable(void **state)
{
    struct pipe_ctx ctx = {.loop = test_loop_new()};

    pipe_open(ctx.fds);
    test_deadline(ctx.loop, TEST_DEADLINE_MS);
    assert_int_equal(ev_io_add(ctx.loop, ctx.fds[1], EV_WRITE, on_writable, &ctx, &ctx.io[1]), 0);

    assert_int_equal(ev_loop_run(ctx.loop), 0);
    assert_int_equal(ctx.revents, EV_WRITE);

    ev_loop_free(ctx.loop);
    pipe_close(ctx.fds);
}

static void on_read_del_self(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    struct pipe_ctx *ctx = userdata;

    ctx->calls++;
    /* The byte stays unread: a watch that survived would be called again at once. */
    ctx->io[0] = ev_io_del(io);
}

static void on_stop_zero(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    ev_loop_stop(userdata, 0);
}

static void test_io_del_from_own_callback(void **state)
{
    struct pipe_ctx ctx = {.loop = test_loop_new()};
    struct ev_timer *t = NULL;

    pipe_open(ctx.fds);
    assert_int_equal(ev_io_add(ctx.loop, ctx.fds[0], EV_READ, on_read_del_self, &ctx, &ctx.io[0]),
                     0);
    write_byte(ctx.fds[1], 'x');
    assert_int_equal(ev_timer_add(ctx.loop, 50, 0, on_stop_zero, ctx.loop, &t), 0);

    assert_int_equal(ev_loop_run(ctx.loop), 0);
    assert_int_equal(ctx.calls, 1);
    assert_null(ctx.io[0]);

    ev_loop_free(ctx.loop);
    pipe_close(ctx.fds);
}

struct batch_ctx {
    struct ev_loop *loop;
    int fds[2][2];
    struct ev_io *io[2];
    int calls;
};

/* Whichever watch runs first deletes both and stops the loop; the stop lets the batch finish, so
 * the other watch's event is still dispatched and must be skipped. */
static void on_read_del_both(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    struct batch_ctx *ctx = userdata;

    ctx->calls++;
    ctx->io[0] = ev_io_del(ctx->io[0]);
    ctx->io[1] = ev_io_del(ctx->io[1]);
    ev_loop_stop(ctx->loop, 0);
}

static void test_io_del_other_in_same_batch(void **state)
{
    struct batch_ctx ctx = {.loop = test_loop_new()};

    test_deadline(ctx.loop, TEST_DEADLINE_MS);
    for (int i = 0; i < 2; i++) {
        pipe_open(ctx.fds[i]);
        assert_int_equal(
            ev_io_add(ctx.loop, ctx.fds[i][0], EV_READ, on_read_del_both, &ctx, &ctx.io[i]), 0);
        write_byte(ctx.fds[i][1], 'x');
    }

    assert_int_equal(ev_loop_run(ctx.loop), 0);
    assert_int_equal(ctx.calls, 1);

    ev_loop_free(ctx.loop);
    for (int i = 0; i < 2; i++)
        pipe_close(ctx.fds[i]);
}

static void on_nested_run(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct ev_loop *loop = userdata;

    ev_loop_stop(loop, ev_loop_run(loop));
}

static void test_run_is_not_reentrant(void **state)
{
    struct ev_loop *loop = test_loop_new();
    struct ev_timer *t = NULL;

    test_deadline(loop, TEST_DEADLINE_MS);
    assert_int_equal(ev_timer_add(loop, 0, 0, on_nested_run, loop, &t), 0);
    assert_int_equal(ev_loop_run(loop), -EBUSY);
    ev_loop_free(loop);
}

static void test_stop_before_run_and_rerun(void **state)
{
    struct ev_loop *loop = test_loop_new();
    struct ev_timer *t = NULL;

    ev_loop_stop(loop, 3);
    assert_int_equal(ev_loop_run(loop), 3);

    /* The stop was consumed: a second run waits for a new one. */
    assert_int_equal(ev_timer_add(loop, 10, 0, on_stop_zero, loop, &t), 0);
    test_deadline(loop, TEST_DEADLINE_MS);
    assert_int_equal(ev_loop_run(loop), 0);
    ev_loop_free(loop);
}

static void test_free_null_and_leftover_handles(void **state)
{
    struct ev_loop *loop = test_loop_new();
    struct ev_io *io = NULL;
    struct ev_timer *t = NULL;
    int fds[2];

    assert_null(ev_loop_free(NULL));
    assert_null(ev_io_del(NULL));
    assert_null(ev_timer_del(NULL));
    assert_null(ev_signal_del(NULL));
    assert_null(ev_wake_del(NULL));
    assert_null(ev_work_pool_free(NULL));

    /* Handles the caller never deleted are released by the loop (valgrind checks). */
    pipe_open(fds);
    assert_int_equal(ev_io_add(loop, fds[0], EV_READ, on_hup, NULL, &io), 0);
    assert_int_equal(ev_timer_add(loop, 1000, 1000, on_stop_zero, loop, &t), 0);
    assert_null(ev_loop_free(loop));
    pipe_close(fds);
}

static void test_cleanup_attribute(void **state)
{
    _cleanup_(ev_loop_freep) struct ev_loop *loop = test_loop_new();
    _cleanup_(ev_timer_delp) struct ev_timer *t = NULL;

    /* Declared after the loop, so deleted before it. */
    assert_int_equal(ev_timer_add(loop, 1000, 0, on_stop_zero, loop, &t), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_io_pipe_readable),
        cmocka_unit_test(test_io_added_disabled_then_modified),
        cmocka_unit_test(test_io_hangup_is_readable),
        cmocka_unit_test(test_io_bad_args),
        cmocka_unit_test(test_io_writable),
        cmocka_unit_test(test_io_del_from_own_callback),
        cmocka_unit_test(test_io_del_other_in_same_batch),
        cmocka_unit_test(test_run_is_not_reentrant),
        cmocka_unit_test(test_stop_before_run_and_rerun),
        cmocka_unit_test(test_free_null_and_leftover_handles),
        cmocka_unit_test(test_cleanup_attribute),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
