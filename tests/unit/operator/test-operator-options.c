/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane operator`'s options: NVIDIA's defaults, its flags in Go's syntax (one dash or two,
 * booleans with or without a value), OPERATOR_NAMESPACE, the zap flags of NVIDIA's Deployment,
 * Go durations, and the refusals of values that cannot work.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "operator-options.h"

static int parse(struct op_options *o, struct diag *d, char **argv)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    op_options_init(o);
    diag_init(d);
    return op_options_parse(argc, argv, o, d);
}

static void test_defaults(void **state)
{
    (void)state;
    struct op_options o;
    struct diag d;
    unsetenv("OPERATOR_NAMESPACE");
    assert_int_equal(parse(&o, &d, (char *[]){"operator", NULL}), 0);
    assert_false(o.leader_elect);
    assert_null(o.leader_elect_namespace);
    assert_int_equal(o.renew_deadline_ms, 10000);
    assert_int_equal(o.lease_duration_ms, 15000);
    assert_int_equal(o.retry_period_ms, 2000);
    assert_string_equal(o.metrics_address, ":8080");
    assert_string_equal(o.health_address, ":8081");
    assert_null(o.namespace_);
    assert_null(o.kubeconfig);
    assert_int_equal(o.requeue_after_ms, 5000);
    assert_int_equal(o.backoff_base_ms, 100);
    assert_int_equal(o.backoff_max_ms, 3000);
    assert_true(o.qps == 20);
    assert_int_equal(o.burst, 30);
    op_options_release(&o);
}

static void test_nvidia_flags(void **state)
{
    (void)state;
    struct op_options o;
    struct diag d;
    setenv("OPERATOR_NAMESPACE", "gpu-operator", 1);
    /* NVIDIA's Deployment args */
    assert_int_equal(parse(&o, &d,
                           (char *[]){"operator", "--leader-elect", "--zap-time-encoding=epoch",
                                      "--zap-log-level=debug", "-leader-lease-renew-deadline",
                                      "1m30s", "--metrics-bind-address=127.0.0.1:0",
                                      "--health-probe-bind-address", "0", NULL}),
                     0);
    assert_true(o.leader_elect);
    assert_int_equal(o.common.verbosity, 1);
    assert_int_equal(o.renew_deadline_ms, 90000);
    assert_int_equal(o.lease_duration_ms, 95000);
    assert_string_equal(o.metrics_address, "127.0.0.1:0");
    assert_string_equal(o.health_address, "0");
    assert_string_equal(o.namespace_, "gpu-operator");
    op_options_release(&o);
    assert_int_equal(
        parse(&o, &d,
              (char *[]){"operator", "--leader-elect=false", "--zap-log-level=4",
                         "--leader-elect-namespace=kube-system", "--leader-lease-duration=3s",
                         "--leader-lease-renew-deadline", "2s", "--leader-lease-retry-period=500ms",
                         "--requeue-after=1s", "--kube-api-qps=50.5", "--kube-api-burst=100",
                         "--kubeconfig=/k", NULL}),
        0);
    assert_false(o.leader_elect);
    assert_int_equal(o.common.verbosity, 4);
    assert_string_equal(o.leader_elect_namespace, "kube-system");
    assert_int_equal(o.lease_duration_ms, 3000);
    assert_int_equal(o.renew_deadline_ms, 2000);
    assert_int_equal(o.retry_period_ms, 500);
    assert_int_equal(o.requeue_after_ms, 1000);
    assert_true(o.qps == 50.5);
    assert_int_equal(o.burst, 100);
    assert_string_equal(o.kubeconfig, "/k");
    op_options_release(&o);
    unsetenv("OPERATOR_NAMESPACE");
}

static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *arg;
        const char *msg;
    } cases[] = {
        {"--leader-lease-renew-deadline=10", "want a duration"},
        {"--leader-lease-renew-deadline=-1s", "want a duration"},
        {"--leader-elect=maybe", "want true or false"},
        {"--zap-log-level=loud", "want debug"},
        {"--kube-api-qps=0", "above 0"},
        {"--kube-api-burst=x", "1 to 10000"},
        {"--no-such-flag", "unknown option"},
        {"--leader-lease-duration=5s", "must be longer than --leader-lease-renew-deadline"},
        {"--leader-lease-retry-period=10s", "must be longer than --leader-lease-retry-period"},
        {"--requeue-after=0", "above 0"},
        {"--backoff-max=10ms", "at least --backoff-base"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct op_options o;
        struct diag d;
        int r = parse(&o, &d, (char *[]){"operator", (char *)cases[i].arg, NULL});
        if (r != -EINVAL || !strstr(d.msg, cases[i].msg))
            fail_msg("%s: got %d \"%s\"", cases[i].arg, r, d.msg);
        op_options_release(&o);
    }
    struct op_options o;
    struct diag d;
    assert_int_equal(parse(&o, &d, (char *[]){"operator", "--help", NULL}), 0);
    assert_true(o.common.help);
    op_options_release(&o);
}

static void test_durations(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        uint64_t ms;
    } ok[] = {
        {"0", 0},       {"10s", 10000},         {"1m30s", 90000}, {"1.5s", 1500},
        {"500ms", 500}, {"2h", 7200000},        {"1500us", 2},    {"1000000ns", 1},
        {"+3s", 3000},  {"1h1m1s1ms", 3661001}, {".5m", 30000},   {"2\xc2\xb5s", 0},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        uint64_t ms = 99;
        if (op_duration_parse(ok[i].s, &ms) != 0 || ms != ok[i].ms)
            fail_msg("%s: %llu", ok[i].s, (unsigned long long)ms);
    }
    static const char *const bad[] = {"", "10", "s", "1x", "-1s", "1..5s", "25h", "1s2", "."};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t ms;
        if (op_duration_parse(bad[i], &ms) != -EINVAL)
            fail_msg("%s accepted", bad[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_nvidia_flags),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_durations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
