/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the ev tests share: cmocka, and a deadline timer, so a test waits for its condition with the
 * loop itself as the clock and fails with -ETIMEDOUT instead of hanging or sleeping.
 */
#pragma once

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ev.h"

/* Generous: valgrind runs these tests too. */
#define TEST_DEADLINE_MS 10000u

static inline void test_deadline_cb(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    ev_loop_stop(userdata, -ETIMEDOUT);
}

/* The loop owns the returned timer (freed by ev_loop_free()). */
static inline struct ev_timer *test_deadline(struct ev_loop *loop, uint64_t ms)
{
    struct ev_timer *t = NULL;

    assert_int_equal(ev_timer_add(loop, ms, 0, test_deadline_cb, loop, &t), 0);
    return t;
}

static inline struct ev_loop *test_loop_new(void)
{
    struct ev_loop *loop = NULL;

    assert_int_equal(ev_loop_new(&loop), 0);
    assert_non_null(loop);
    return loop;
}
