/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of `gpuplane dra-driver`'s command line and environment (dra-main.c): NVIDIA's flag and
 * variable names with their defaults, the spellings Go's flag library accepts (-flag, --flag value,
 * --flag=value), aliases, flag over variable, the usage errors (and that their messages name what
 * was wrong), and the fault point names (dra-fault.c).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dra-internal.h"

#define MAX_ARGS 16
#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static const char *const VARIABLES[] = {
    "NODE_NAME",
    "DRIVER_NAME",
    "KUBELET_REGISTRAR_DIRECTORY_PATH",
    "KUBECONFIG",
    "KUBE_API_QPS",
    "KUBELET_PLUGINS_DIRECTORY_PATH",
    "CDI_ROOT",
    "KUBE_API_BURST",
    "NVIDIA_DRIVER_ROOT",
    "NVIDIA_DEV_ROOT",
    "NVIDIA_CDI_HOOK_PATH",
    "GPUPLANE_SYSFS_ROOT",
    "HEALTHCHECK_PORT",
    "GPUPLANE_HEALTH_RECOVERY_WINDOW",
    DRA_FAULT_ENV,
};

static int setup(void **state)
{
    for (size_t i = 0; i < ARRAY_SIZE(VARIABLES); i++)
        unsetenv(VARIABLES[i]);
    return 0;
}

/* Parses a NULL-terminated argument list into o (initialised here; the caller releases). */
static int parse(struct dra_options *o, struct diag *d, const char *const *args)
{
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = (char *)"dra-driver";
    for (size_t i = 0; args[i]; i++) {
        assert_true(argc <= MAX_ARGS);
        argv[argc++] = (char *)args[i];
    }
    argv[argc] = NULL;
    diag_init(d);
    dra_options_init(o);
    return dra_options_parse(argc, argv, o, d);
}

static void test_defaults(void **state)
{
    struct dra_options o;
    struct diag d;
    assert_int_equal(parse(&o, &d, ARGS("--node-name=n1")), 0);
    assert_string_equal(o.node_name, "n1");
    assert_string_equal(o.driver_name, "gpu.nvidia.com");
    assert_string_equal(o.registrar_dir, "/var/lib/kubelet/plugins_registry");
    assert_string_equal(o.plugins_dir, "/var/lib/kubelet/plugins");
    assert_string_equal(o.cdi_root, "/var/run/cdi");
    assert_string_equal(o.driver_root, "/");
    assert_null(o.kubeconfig);
    assert_int_equal(o.healthcheck_port, -1);
    assert_int_equal(o.kube_burst, 10);
    assert_true(o.kube_qps == 5.0);
    assert_int_equal(o.recovery_window_s, 60);
    assert_false(o.list_fault_points);
    dra_options_release(&o);
}

/* --mock without a driver root leaves it unset: the daemon then makes the simulated node's. */
static void test_mock_leaves_the_driver_root_unset(void **state)
{
    struct dra_options o;
    struct diag d;
    assert_int_equal(parse(&o, &d, ARGS("--node-name=n1", "--mock=dgx-h100")), 0);
    assert_null(o.driver_root);
    dra_options_release(&o);
    assert_int_equal(parse(&o, &d, ARGS("--node-name=n1", "--mock=dgx-h100", "--driver-root=/")),
                     0);
    assert_string_equal(o.driver_root, "/");
    dra_options_release(&o);
}

static void test_spellings_and_aliases(void **state)
{
    const char *const *const cases[] = {
        ARGS("--node-name", "n2", "--cdi-root", "/c"),
        ARGS("-node-name=n2", "-cdi-root", "/c"),
        ARGS("--node-name=n2", "--cdi-root=/x", "--cdi-root=/c"),
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct dra_options o;
        struct diag d;
        assert_int_equal(parse(&o, &d, cases[i]), 0);
        assert_string_equal(o.node_name, "n2");
        assert_string_equal(o.cdi_root, "/c");
        dra_options_release(&o);
    }
    struct dra_options o;
    struct diag d;
    assert_int_equal(
        parse(&o, &d,
              ARGS("--node-name=n", "--driver-root=/run/nvidia/driver", "--dev-root=/",
                   "--healthcheck-port=0", "--kube-allow-insecure", "--kube-api-qps=2.5")),
        0);
    assert_string_equal(o.driver_root, "/run/nvidia/driver");
    assert_string_equal(o.dev_root, "/");
    assert_int_equal(o.healthcheck_port, 0);
    assert_true(o.allow_insecure);
    assert_true(o.kube_qps == 2.5);
    dra_options_release(&o);
    /* any negative port disables the health service, as NVIDIA's flag */
    assert_int_equal(parse(&o, &d, ARGS("--node-name=n", "--healthcheck-port=-5")), 0);
    assert_int_equal(o.healthcheck_port, -5);
    dra_options_release(&o);
}

static void test_flag_over_environment(void **state)
{
    struct dra_options o;
    struct diag d;
    setenv("NODE_NAME", "from-env", 1);
    setenv("KUBELET_PLUGINS_DIRECTORY_PATH", "/env/plugins", 1);
    setenv("HEALTHCHECK_PORT", "51515", 1);
    assert_int_equal(parse(&o, &d, ARGS("--kubelet-plugins-directory-path=/flag/plugins")), 0);
    assert_string_equal(o.node_name, "from-env");
    assert_string_equal(o.plugins_dir, "/flag/plugins");
    assert_int_equal(o.healthcheck_port, 51515);
    dra_options_release(&o);
    setup(state);
}

static void test_kubeconfig_variable_left_to_the_client(void **state)
{
    /* KUBECONFIG may be a list of files: the kube client picks the first itself. */
    struct dra_options o;
    struct diag d;
    setenv("KUBECONFIG", "/a:/b", 1);
    assert_int_equal(parse(&o, &d, ARGS("--node-name=n")), 0);
    assert_null(o.kubeconfig);
    dra_options_release(&o);
    assert_int_equal(parse(&o, &d, ARGS("--node-name=n", "--kubeconfig=/k")), 0);
    assert_string_equal(o.kubeconfig, "/k");
    dra_options_release(&o);
    setup(state);
}

struct usage_case {
    const char *args[4];
    const char *env;
    const char *needle; /* in the message */
};

static void test_usage_errors(void **state)
{
    static const struct usage_case cases[] = {
        {{NULL}, NULL, "--node-name (or NODE_NAME) is required"},
        {{"--node-name=n", "--bogus"}, NULL, "unknown option \"--bogus\""},
        {{"--node-name=n", "--healthcheck-port=x"}, NULL, "healthcheck-port"},
        {{"--node-name=n", "--healthcheck-port=70000"}, NULL, "--healthcheck-port"},
        {{"--node-name=n", "--cdi-root=relative"}, NULL, "not an absolute path \"relative\""},
        {{"--node-name=n", "--kube-api-qps=0"}, NULL, "kube-api-qps"},
        {{"--node-name=n", "--kube-api-burst=0"}, NULL, "--kube-api-burst"},
        {{"--node-name=n", "--kube-allow-insecure=maybe"}, NULL, "kube-allow-insecure"},
        {{"--node-name=n", "extra"}, NULL, "unexpected argument \"extra\""},
        {{"--node-name"}, NULL, "missing value"},
        {{"--node-name=n"}, "HEALTHCHECK_PORT", "HEALTHCHECK_PORT"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct dra_options o;
        struct diag d;
        const char *args[5] = {0};
        memcpy(args, cases[i].args, sizeof(cases[i].args));
        if (cases[i].env)
            setenv(cases[i].env, "not-a-number", 1);
        assert_int_equal(parse(&o, &d, args), -EINVAL);
        if (!strstr(d.msg, cases[i].needle))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, d.msg, cases[i].needle);
        dra_options_release(&o);
        setup(state);
    }
}

static void test_help_and_fault_list_need_no_node(void **state)
{
    struct dra_options o;
    struct diag d;
    assert_int_equal(parse(&o, &d, ARGS("--help")), 0);
    assert_true(o.common.help);
    dra_options_release(&o);
    assert_int_equal(parse(&o, &d, ARGS("--list-fault-points")), 0);
    assert_true(o.list_fault_points);
    dra_options_release(&o);
}

static void test_fault_points(void **state)
{
    struct diag d;
    size_t n = 0;
    for (; dra_fault_points[n]; n++)
        ;
    assert_int_equal(n, 7);
    diag_init(&d);
    assert_int_equal(dra_fault_init(&d), 0); /* unset: nothing armed */
    dra_fault("prepare-after-cdi");          /* and so this returns */
    setenv(DRA_FAULT_ENV, "prepare-after-cdi", 1);
    assert_int_equal(dra_fault_init(&d), 0);
    dra_fault("prepare-before-started"); /* another point: returns */
    setenv(DRA_FAULT_ENV, "prepare-after-cdx", 1);
    assert_int_equal(dra_fault_init(&d), -EINVAL);
    assert_non_null(strstr(d.msg, "unknown fault point"));
    unsetenv(DRA_FAULT_ENV);
    assert_int_equal(dra_fault_init(&d), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_defaults, setup),
        cmocka_unit_test_setup(test_mock_leaves_the_driver_root_unset, setup),
        cmocka_unit_test_setup(test_spellings_and_aliases, setup),
        cmocka_unit_test_setup(test_flag_over_environment, setup),
        cmocka_unit_test_setup(test_kubeconfig_variable_left_to_the_client, setup),
        cmocka_unit_test_setup(test_usage_errors, setup),
        cmocka_unit_test_setup(test_help_and_fault_list_need_no_node, setup),
        cmocka_unit_test_setup(test_fault_points, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
