/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Signals: SIGTERM and SIGINT sent to the process stop the loop with 0, SIGHUP calls the reload
 * hook, a plain handle sees who sent the signal, and freeing the loop puts the signal mask back.
 * Its own binary, so a signal that escaped the loop kills only this test.
 */
#include <signal.h>
#include <unistd.h>

#include "ev-test.h"

static bool is_blocked(int signo)
{
    sigset_t cur;

    assert_int_equal(pthread_sigmask(SIG_BLOCK, NULL, &cur), 0);
    return sigismember(&cur, signo) == 1;
}

static void test_sigterm_stops_with_zero(void **state)
{
    struct ev_loop *loop = test_loop_new();

    assert_false(is_blocked(SIGTERM));
    assert_int_equal(ev_loop_handle_stop_signals(loop), 0);
    assert_int_equal(ev_loop_handle_stop_signals(loop), 0);
    assert_true(is_blocked(SIGTERM));
    test_deadline(loop, TEST_DEADLINE_MS);
    /* Anything but 0 unless the signal stops the loop. */
    ev_loop_stop(loop, 99);
    assert_int_equal(ev_loop_run(loop), 99);

    assert_int_equal(raise(SIGTERM), 0);
    assert_int_equal(ev_loop_run(loop), 0);

    ev_loop_free(loop);
    assert_false(is_blocked(SIGTERM));
    assert_false(is_blocked(SIGINT));
    assert_false(is_blocked(SIGHUP));
}

static void test_sigint_to_process_stops_with_zero(void **state)
{
    struct ev_loop *loop = test_loop_new();

    assert_int_equal(ev_loop_handle_stop_signals(loop), 0);
    test_deadline(loop, TEST_DEADLINE_MS);
    assert_int_equal(kill(getpid(), SIGINT), 0);
    assert_int_equal(ev_loop_run(loop), 0);
    ev_loop_free(loop);
    assert_false(is_blocked(SIGINT));
}

struct reload_ctx {
    struct ev_loop *loop;
    int calls;
};

static void on_reload(void *userdata)
{
    struct reload_ctx *ctx = userdata;

    ctx->calls++;
    ev_loop_stop(ctx->loop, 42);
}

static void test_sighup_calls_reload_hook(void **state)
{
    struct reload_ctx ctx = {.loop = test_loop_new()};

    assert_int_equal(ev_loop_handle_stop_signals(ctx.loop), 0);
    ev_loop_on_reload(ctx.loop, on_reload, &ctx);
    test_deadline(ctx.loop, TEST_DEADLINE_MS);
    assert_int_equal(kill(getpid(), SIGHUP), 0);

    assert_int_equal(ev_loop_run(ctx.loop), 42);
    assert_int_equal(ctx.calls, 1);
    ev_loop_free(ctx.loop);
}

struct sig_ctx {
    struct ev_loop *loop;
    uint32_t signo;
    uint32_t pid;
};

static void on_signal(struct ev_signal *sig, const struct signalfd_siginfo *si, void *userdata)
{
    struct sig_ctx *ctx = userdata;

    ctx->signo = si->ssi_signo;
    ctx->pid = si->ssi_pid;
    ev_loop_stop(ctx->loop, 0);
}

static void test_signal_handle_and_errors(void **state)
{
    struct sig_ctx ctx = {.loop = test_loop_new()};
    struct ev_signal *sig = NULL, *again = NULL;
    sigset_t usr2;

    assert_int_equal(ev_signal_add(ctx.loop, SIGKILL, on_signal, &ctx, &again), -EINVAL);
    assert_int_equal(ev_signal_add(ctx.loop, 0, on_signal, &ctx, &again), -EINVAL);
    assert_int_equal(ev_signal_add(ctx.loop, _NSIG, on_signal, &ctx, &again), -EINVAL);
    assert_int_equal(ev_signal_add(ctx.loop, SIGUSR1, on_signal, &ctx, &sig), 0);
    assert_int_equal(ev_signal_add(ctx.loop, SIGUSR1, on_signal, &ctx, &again), -EBUSY);
    assert_null(again);
    test_deadline(ctx.loop, TEST_DEADLINE_MS);

    assert_int_equal(kill(getpid(), SIGUSR1), 0);
    assert_int_equal(ev_loop_run(ctx.loop), 0);
    assert_int_equal(ctx.signo, SIGUSR1);
    assert_int_equal(ctx.pid, getpid());

    /* Deleting frees the number for another handle and unblocks it. */
    sig = ev_signal_del(sig);
    assert_false(is_blocked(SIGUSR1));
    assert_int_equal(ev_signal_add(ctx.loop, SIGUSR1, on_signal, &ctx, &sig), 0);

    /* A signal blocked before the handle stays blocked after it. */
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    assert_int_equal(pthread_sigmask(SIG_BLOCK, &usr2, NULL), 0);
    assert_int_equal(ev_signal_add(ctx.loop, SIGUSR2, on_signal, &ctx, &again), 0);
    again = ev_signal_del(again);
    assert_true(is_blocked(SIGUSR2));
    assert_int_equal(pthread_sigmask(SIG_UNBLOCK, &usr2, NULL), 0);

    ev_loop_free(ctx.loop);
    assert_false(is_blocked(SIGUSR1));
}

/* A signal that arrived but was never dispatched is dropped with its handle, not delivered (which
 * for SIGTERM would kill the process) when the mask is restored. */
static void test_undispatched_signal_dropped_on_free(void **state)
{
    struct ev_loop *loop = test_loop_new();

    assert_int_equal(ev_loop_handle_stop_signals(loop), 0);
    assert_int_equal(raise(SIGTERM), 0);
    ev_loop_free(loop);
    assert_false(is_blocked(SIGTERM));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigterm_stops_with_zero),
        cmocka_unit_test(test_sigint_to_process_stops_with_zero),
        cmocka_unit_test(test_sighup_calls_reload_hook),
        cmocka_unit_test(test_signal_handle_and_errors),
        cmocka_unit_test(test_undispatched_signal_dropped_on_free),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
