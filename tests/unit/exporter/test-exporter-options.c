/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of `gpuplane exporter`'s options: dcgm-exporter's defaults, each flag in its short, long
 * and Go one-dash spellings, the variables, flag > environment, bad values, and the DCGM-only
 * options accepted and reported.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "exporter-options.h"

static const char *const ENV[] = {
    "DCGM_EXPORTER_COLLECTORS",
    "DCGM_EXPORTER_LISTEN",
    "DCGM_EXPORTER_INTERVAL",
    "DCGM_EXPORTER_KUBERNETES",
    "DCGM_EXPORTER_NO_HOSTNAME",
    "NODE_NAME",
    "DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE",
    "NVIDIA_RESOURCE_NAMES",
    "DCGM_REMOTE_HOSTENGINE_INFO",
    "DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX",
    "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS",
    "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID",
};

static void clear_env(void)
{
    for (size_t i = 0; i < ARRAY_SIZE(ENV); i++)
        unsetenv(ENV[i]);
}

/* Parses argv (NULL-terminated, without the command) into o; returns parse's result. */
static int parse(struct exporter_options *o, struct diag *d, const char *const *args)
{
    char *argv[32] = {"exporter"};
    int argc = 1;
    for (; args && args[argc - 1]; argc++)
        argv[argc] = (char *)args[argc - 1];
    diag_init(d);
    exporter_options_init(o);
    return exporter_options_parse(argc, argv, o, d);
}

static void test_defaults(void **state)
{
    struct exporter_options o;
    struct diag d;
    clear_env();
    setenv("NODE_NAME", "gpu-node-1", 1);
    assert_int_equal(parse(&o, &d, NULL), 0);
    assert_null(o.collectors);
    assert_string_equal(o.address, ":9400");
    assert_int_equal(o.collect_interval_ms, 30000);
    assert_int_equal(o.xid_window_ms, 300000);
    assert_false(o.kubernetes);
    assert_int_equal(o.gpu_id_type, EXPORTER_ID_UID);
    assert_string_equal(o.pod_resources_socket, EXPORTER_DEFAULT_POD_RESOURCES);
    assert_string_equal(o.devices, "f");
    assert_string_equal(o.hostname, "gpu-node-1");
    exporter_options_release(&o);
    clear_env();
}

static void test_flags_and_env(void **state)
{
    struct exporter_options o;
    struct diag d;
    clear_env();
    setenv("DCGM_EXPORTER_LISTEN", "127.0.0.1:9500", 1);
    setenv("DCGM_EXPORTER_INTERVAL", "10000", 1);
    setenv("DCGM_EXPORTER_KUBERNETES", "true", 1);
    const char *const args[] = {"-f",
                                "/etc/c.csv",
                                "--collect-interval=5000",
                                "-n",
                                "-kubernetes-gpu-id-type=device-name",
                                "-d",
                                "g:0,2-3",
                                NULL};
    assert_int_equal(parse(&o, &d, args), 0);
    assert_string_equal(o.collectors, "/etc/c.csv");
    assert_string_equal(o.address, "127.0.0.1:9500"); /* from the environment */
    assert_int_equal(o.collect_interval_ms, 5000);    /* the flag wins */
    assert_true(o.kubernetes);
    assert_true(o.no_hostname);
    assert_int_equal(o.gpu_id_type, EXPORTER_ID_DEVICE_NAME);
    assert_string_equal(o.devices, "g:0,2-3");
    exporter_options_release(&o);
    clear_env();
}

/* Joins a NULL-terminated list with '|' (NULL: "(none)"). */
static void join(char *const *list, char *buf, size_t n)
{
    size_t len = 0;
    snprintf(buf, n, "%s", list ? "" : "(none)");
    for (size_t i = 0; list && list[i] && len < n; i++) {
        int k = snprintf(buf + len, n - len, "%s%s", i ? "|" : "", list[i]);
        len += k > 0 ? (size_t)k : 0;
    }
}

/* --kubernetes-pod-label-allowlist-regex is a urfave/cli string slice: commas split every value,
 * parts are trimmed (empty ones kept), the flag repeats, and flags replace the variable's list. */
static void test_allowlist_slice(void **state)
{
    static const struct {
        const char *env;
        const char *args[5];
        const char *want;
    } cases[] = {
        {NULL, {NULL}, "(none)"},
        {"^app, team ,x{1,2}", {NULL}, "^app|team|x{1|2}"},
        {"", {NULL}, ""},
        {"env", {"--kubernetes-pod-label-allowlist-regex", "a,b", NULL}, "a|b"},
        {NULL,
         {"--kubernetes-pod-label-allowlist-regex=a", "-kubernetes-pod-label-allowlist-regex",
          " b ,", NULL},
         "a|b|"},
    };
    char got[128];
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct exporter_options o;
        struct diag d;
        clear_env();
        if (cases[i].env)
            setenv("DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX", cases[i].env, 1);
        assert_int_equal(parse(&o, &d, cases[i].args), 0);
        join(o.pod_label_allowlist, got, sizeof(got));
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("case %zu: got \"%s\", want \"%s\"", i, got, cases[i].want);
        exporter_options_release(&o);
    }
    clear_env();
    setenv("DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS", "true", 1);
    setenv("NODE_NAME", "gpu-node-1", 1);
    const char *const args[] = {"--kubernetes-enable-pod-uid", NULL};
    struct exporter_options o;
    struct diag d;
    assert_int_equal(parse(&o, &d, args), 0);
    assert_true(o.pod_labels && o.pod_uid);
    assert_string_equal(o.node_name, "gpu-node-1");
    exporter_options_release(&o);
    clear_env();
    assert_int_equal(parse(&o, &d, NULL), 0);
    assert_null(o.node_name); /* the host name is the hostname label's, not a node's */
    exporter_options_release(&o);
}

static void test_bad_values(void **state)
{
    static const char *const cases[][3] = {
        {"-c", "0", "invalid value \"0\""},
        {"-c", "5s", "want milliseconds"},
        {"--kubernetes-gpu-id-type", "index", "want uid or device-name"},
        {"-k=maybe", NULL, "want true or false"},
        {"-d", "x", "--devices"},
        {"--bogus", NULL, "bogus"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct exporter_options o;
        struct diag d;
        clear_env();
        const char *const args[] = {cases[i][0], cases[i][1], NULL};
        assert_int_equal(parse(&o, &d, args), -EINVAL);
        assert_non_null(strstr(d.msg, cases[i][2]));
        assert_non_null(strstr(d.msg, "--help"));
        exporter_options_release(&o);
    }
}

static void test_dcgm_only_reported(void **state)
{
    struct exporter_options o;
    struct diag d;
    char buf[256];
    clear_env();
    assert_int_equal(parse(&o, &d, NULL), 0);
    exporter_options_ignored(&o, buf, sizeof(buf));
    assert_string_equal(buf, "");
    exporter_options_release(&o);
    setenv("DCGM_REMOTE_HOSTENGINE_INFO", "localhost:5555", 1);
    const char *const args[] = {"--web-systemd-socket", NULL};
    assert_int_equal(parse(&o, &d, args), 0);
    exporter_options_ignored(&o, buf, sizeof(buf));
    assert_string_equal(buf, "--remote-hostengine-info, --web-systemd-socket");
    exporter_options_release(&o);
    clear_env();
}

static void test_devices(void **state)
{
    struct exporter_devices sel;
    assert_int_equal(exporter_devices_parse("f", &sel), 0);
    assert_true(sel.kind == 'f' && sel.all && exporter_devices_has(&sel, 1023));
    assert_int_equal(exporter_devices_parse("g:0,2-3", &sel), 0);
    assert_true(sel.kind == 'g' && !sel.all);
    assert_true(exporter_devices_has(&sel, 0) && exporter_devices_has(&sel, 2) &&
                exporter_devices_has(&sel, 3));
    assert_false(exporter_devices_has(&sel, 1) || exporter_devices_has(&sel, 4) ||
                 exporter_devices_has(&sel, 5000));
    assert_int_equal(exporter_devices_parse("i:7", &sel), 0);
    assert_true(sel.kind == 'i' && exporter_devices_has(&sel, 7) && !exporter_devices_has(&sel, 6));
    static const char *const bad[] = {"x",    "f:",  "g:1,",   "g:3-1", "g:1-",
                                      "g:-1", "g:a", "g:1024", "g0",    "i:1,,2"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(exporter_devices_parse(bad[i], &sel), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),   cmocka_unit_test(test_flags_and_env),
        cmocka_unit_test(test_bad_values), cmocka_unit_test(test_dcgm_only_reported),
        cmocka_unit_test(test_devices),    cmocka_unit_test(test_allowlist_slice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
