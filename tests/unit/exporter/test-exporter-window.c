/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Events counted over a sliding window (DCGM_EXP_XID_ERRORS_COUNT, DCGM_EXP_CLOCK_EVENTS_COUNT):
 * what falls out of the window and when, counting values and bits, a full ring dropping its
 * oldest, and dcgm-exporter's names of the clock event reasons.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "exporter-internal.h"

static void expect_counts(struct exporter_window *w, uint64_t now, uint64_t bits,
                          const struct exporter_window_count *want, size_t n_want)
{
    struct exporter_window_count *got = NULL;
    size_t n = 99;
    assert_int_equal(exporter_window_counts(w, now, bits, &got, &n), 0);
    assert_int_equal(n, n_want);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(got[i].key, want[i].key);
        assert_int_equal(got[i].count, want[i].count);
    }
    free(got);
}

static void test_values(void **state)
{
    (void)state;
    struct exporter_window w;
    assert_int_equal(exporter_window_init(&w, 1000, 16), 0);
    expect_counts(&w, 5000, 0, NULL, 0);
    exporter_window_add(&w, 5000, 79);
    exporter_window_add(&w, 5100, 13);
    exporter_window_add(&w, 5600, 79);
    expect_counts(&w, 5600, 0, (const struct exporter_window_count[]){{13, 1}, {79, 2}}, 2);
    /* Exactly span old still counts (DCGM's "since" is inclusive); a millisecond later it goes. */
    expect_counts(&w, 6000, 0, (const struct exporter_window_count[]){{13, 1}, {79, 2}}, 2);
    expect_counts(&w, 6001, 0, (const struct exporter_window_count[]){{13, 1}, {79, 1}}, 2);
    expect_counts(&w, 6101, 0, (const struct exporter_window_count[]){{79, 1}}, 1);
    expect_counts(&w, 9000, 0, NULL, 0);
    exporter_window_release(&w);
}

static void test_bits(void **state)
{
    (void)state;
    struct exporter_window w;
    assert_int_equal(exporter_window_init(&w, 60000, 8), 0);
    exporter_window_add(&w, 1, 0x1);
    exporter_window_add(&w, 2, 0x4 | 0x20);
    exporter_window_add(&w, 3, 0x4 | 0x400); /* 0x400 is not a bit dcgm-exporter knows */
    exporter_window_add(&w, 4, 0);
    expect_counts(&w, 10, EXPORTER_CLOCK_EVENT_BITS,
                  (const struct exporter_window_count[]){{0x1, 1}, {0x4, 2}, {0x20, 1}}, 3);
    exporter_window_release(&w);
}

/* A full ring forgets its oldest entries, never grows. */
static void test_full(void **state)
{
    (void)state;
    struct exporter_window w;
    assert_int_equal(exporter_window_init(&w, 100000, 4), 0);
    for (uint64_t i = 0; i < 10; i++)
        exporter_window_add(&w, 1000 + i, i);
    expect_counts(&w, 2000, 0,
                  (const struct exporter_window_count[]){{6, 1}, {7, 1}, {8, 1}, {9, 1}}, 4);
    exporter_window_release(&w);
    /* A window that has not run for span yet keeps what it has (no underflow). */
    assert_int_equal(exporter_window_init(&w, 300000, 4), 0);
    exporter_window_add(&w, 5, 31);
    expect_counts(&w, 10, 0, (const struct exporter_window_count[]){{31, 1}}, 1);
    exporter_window_release(&w);
}

static void test_names(void **state)
{
    (void)state;
    static const char *const names[] = {
        "gpu_idle",   "clocks_setting", "power_cap",      "hw_slowdown",    "sync_boost",
        "sw_thermal", "hw_thermal",     "hw_power_brake", "display_clocks",
    };
    for (unsigned b = 0; b < 9; b++)
        assert_string_equal(exporter_clock_event_name(UINT64_C(1) << b), names[b]);
    assert_true((EXPORTER_CLOCK_EVENT_BITS >> 9) == 0);
    assert_string_equal(exporter_clock_event_name(0x200), "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_bits),
        cmocka_unit_test(test_full),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
