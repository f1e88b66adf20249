/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of `gpuplane validate`'s options, as a table: NVIDIA's flags in their spellings (two
 * dashes, one dash, short aliases, `=` or a separate value, bare booleans), its variables, flags
 * winning over variables, the check from the first argument or COMPONENT, wait's file names, and
 * usage errors naming the flag or variable at fault. Then the value parsers (booleans, seconds,
 * durations) and the --help pages.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "validate-internal.h"

#define MAX_ARGS 10
#define MAX_ENV 4
#define MAX_CHECKS 5

/* Every variable the options read, cleared before each case. */
static const char *const VARS[] = {
    "COMPONENT",
    "WITH_WAIT",
    "WITH_WORKLOAD",
    "CLEANUP_ALL",
    "OUTPUT_DIR",
    "SLEEP_INTERVAL_SECONDS",
    "NODE_NAME",
    "OPERATOR_NAMESPACE",
    "MIG_STRATEGY",
    "METRICS_PORT",
    "DEFAULT_GPU_WORKLOAD_CONFIG",
    "DISABLE_DEV_CHAR_SYMLINK_CREATION",
    "HOST_ROOT",
    "DRIVER_INSTALL_DIR",
    "DRIVER_INSTALL_DIR_CTR_PATH",
    "DRIVER_VALIDATION_SKIP_GPU_INIT",
    "HOST_ROOT_CTR_PATH",
    "PLUGIN_RETRIES",
    "CDI_SPEC_DIRS",
    "CONTAINERD_CONFIG",
    "CRIO_CONFIG",
    "VALIDATOR_RUNTIME_CLASS",
};

/* One case: arguments after "validate", variables, and either the fields expected
 * ("field=value", see field_text) or the error and a part of its message. */
struct tcase {
    const char *name;
    const char *args[MAX_ARGS];
    const char *env[MAX_ENV];
    const char *want[MAX_CHECKS];
    int err;
    const char *msg;
};

static const struct tcase CASES[] = {
    {"defaults",
     {"driver"},
     {NULL},
     {"command=driver", "output_dir=/run/nvidia/validations", "sleep_ms=5000", "with_wait=false",
      "host_ctr=/host"},
     0,
     NULL},
    {"more defaults",
     {"plugin", "--node-name=n1"},
     {NULL},
     {"plugin_retries=30", "driver_ctr=/run/nvidia/driver", "runtime_class=nvidia",
      "cdi_dirs=/etc/cdi,/var/run/cdi", "with_workload=true"},
     0,
     NULL},
    {"NVIDIA's variables",
     {NULL},
     {"COMPONENT=driver", "WITH_WAIT=true", "OUTPUT_DIR=/tmp/v", "SLEEP_INTERVAL_SECONDS=2"},
     {"command=driver", "with_wait=true", "output_dir=/tmp/v", "sleep_ms=2000"},
     0,
     NULL},
    {"flags win over variables",
     {"driver", "--with-wait=false", "-o", "/x", "-s=0.25"},
     {"WITH_WAIT=1", "OUTPUT_DIR=/tmp/v", "SLEEP_INTERVAL_SECONDS=9"},
     {"with_wait=false", "output_dir=/x", "sleep_ms=250"},
     0,
     NULL},
    {"short aliases with one dash",
     {"-c", "plugin", "-n", "node-a", "-ns", "gpu-operator", "-w"},
     {NULL},
     {"command=plugin", "node_name=node-a", "namespace_=gpu-operator", "with_wait=true"},
     0,
     NULL},
    {"two dashes and =",
     {"--component=toolkit", "--cleanup-all", "--host-root-ctr-path=/h"},
     {NULL},
     {"command=toolkit", "cleanup_all=true", "host_ctr=/h"},
     0,
     NULL},
    {"an argument wins over COMPONENT",
     {"toolkit"},
     {"COMPONENT=driver"},
     {"command=toolkit"},
     0,
     NULL},
    {"Go booleans",
     {"driver", "--driver-validation-skip-gpu-init=T", "--with-workload=0"},
     {"DISABLE_DEV_CHAR_SYMLINK_CREATION=True"},
     {"skip_gpu_init=true", "with_workload=false", "no_dev_char=true"},
     0,
     NULL},
    {"an empty boolean variable is unset",
     {"driver"},
     {"WITH_WAIT="},
     {"with_wait=false"},
     0,
     NULL},
    {"accepted for compatibility",
     {"plugin", "-n", "x", "-m", "mixed", "-p", "8000", "-g", "vm-passthrough"},
     {NULL},
     {"mig_strategy=mixed", "metrics_port=8000", "workload=vm-passthrough"},
     0,
     NULL},
    {"driver paths",
     {"driver", "--host-root", "/", "--driver-install-dir=/run/nvidia/driver"},
     {"DRIVER_INSTALL_DIR_CTR_PATH=/driver-root", "HOST_ROOT_CTR_PATH=/hostfs"},
     {"host_root=/", "driver_ctr=/driver-root", "host_ctr=/hostfs"},
     0,
     NULL},
    {"plugin retries from a variable",
     {"plugin", "--node-name", "n"},
     {"PLUGIN_RETRIES=0"},
     {"plugin_retries=0"},
     0,
     NULL},
    {"toolkit places",
     {"toolkit", "--cdi-spec-dirs=/a,/b", "--containerd-config", "/k3s/config.toml"},
     {"CRIO_CONFIG=/etc/crio/crio.conf.d/x.conf", "VALIDATOR_RUNTIME_CLASS=nvidia-cdi"},
     {"cdi_dirs=/a,/b", "containerd_config=/k3s/config.toml",
      "crio_config=/etc/crio/crio.conf.d/x.conf", "runtime_class=nvidia-cdi"},
     0,
     NULL},
    {"wait takes file names",
     {"wait", "--timeout", "90", "driver-ready", "toolkit-ready"},
     {NULL},
     {"command=wait", "n_files=2", "files[0]=driver-ready", "files[1]=toolkit-ready",
      "timeout_ms=90000"},
     0,
     NULL},
    {"options after the files",
     {"wait", "plugin-ready", "-o", "/v", "--timeout=1m30s"},
     {NULL},
     {"n_files=1", "output_dir=/v", "timeout_ms=90000"},
     0,
     NULL},
    {"a dot file", {"wait", ".driver-ctr-ready"}, {NULL}, {"files[0]=.driver-ctr-ready"}, 0, NULL},
    {"cleanup", {"cleanup", "-o", "/v"}, {NULL}, {"command=cleanup", "output_dir=/v"}, 0, NULL},
    {"help without a check", {"--help"}, {NULL}, {"help=true", "command=none"}, 0, NULL},
    {"help of a check", {"toolkit", "-h"}, {NULL}, {"help=true", "command=toolkit"}, 0, NULL},
    {"help before a wait's files",
     {"wait", "--help"},
     {NULL},
     {"help=true", "command=wait"},
     0,
     NULL},
    {"mock",
     {"cuda", "--mock", "dgx-h100", "-v=2"},
     {NULL},
     {"mock=dgx-h100", "verbosity=2"},
     0,
     NULL},
    /* errors */
    {"no check", {NULL}, {NULL}, {NULL}, -EINVAL, "say which check"},
    {"unknown check", {"drivers"}, {NULL}, {NULL}, -EINVAL, "unknown check \"drivers\""},
    {"NVIDIA-only component",
     {NULL},
     {"COMPONENT=vfio-pci"},
     {NULL},
     -EINVAL,
     "component \"vfio-pci\" is one of NVIDIA's checks"},
    {"wait is no component", {NULL}, {"COMPONENT=wait"}, {NULL}, -EINVAL, "unknown component"},
    {"plugin needs a node", {"plugin"}, {NULL}, {NULL}, -EINVAL, "--node-name or NODE_NAME"},
    {"bad boolean variable",
     {"driver"},
     {"WITH_WAIT=yes"},
     {NULL},
     -EINVAL,
     "WITH_WAIT: invalid value \"yes\""},
    {"bad boolean flag",
     {"driver", "-w=maybe"},
     {NULL},
     {NULL},
     -EINVAL,
     "-w: invalid value \"maybe\""},
    {"zero seconds",
     {"driver", "--sleep-interval-seconds", "0"},
     {NULL},
     {NULL},
     -EINVAL,
     "--sleep-interval-seconds: invalid value \"0\""},
    {"relative output dir",
     {"driver"},
     {"OUTPUT_DIR=run/x"},
     {NULL},
     -EINVAL,
     "OUTPUT_DIR: invalid value \"run/x\": want an absolute path"},
    {"bad MIG strategy", {"driver", "-m", "all"}, {NULL}, {NULL}, -EINVAL, "-m: invalid value"},
    {"bad port", {"driver", "-p", "70000"}, {NULL}, {NULL}, -EINVAL, "-p: invalid value"},
    {"bad retries",
     {"plugin", "-n", "x", "--plugin-retries=-1"},
     {NULL},
     {NULL},
     -EINVAL,
     "--plugin-retries"},
    {"bad timeout", {"wait", "--timeout", "soon", "a-ready"}, {NULL}, {NULL}, -EINVAL, "--timeout"},
    {"unknown option", {"driver", "--frobnicate"}, {NULL}, {NULL}, -EINVAL, "unknown option"},
    {"missing value", {"driver", "--output-dir"}, {NULL}, {NULL}, -EINVAL, "needs a value"},
    {"a stray argument", {"driver", "extra"}, {NULL}, {NULL}, -EINVAL, "unexpected argument"},
    {"bad node name",
     {"plugin", "-n", "../etc"},
     {NULL},
     {NULL},
     -EINVAL,
     "invalid node name \"../etc\""},
    {"bad namespace",
     {"driver"},
     {"OPERATOR_NAMESPACE=Gpu_Operator"},
     {NULL},
     -EINVAL,
     "invalid namespace \"Gpu_Operator\""},
    {"wait without files", {"wait"}, {NULL}, {NULL}, -EINVAL, "names of the files"},
    {"wait with a path", {"wait", "../etc/passwd"}, {NULL}, {NULL}, -EINVAL, "invalid file name"},
    {"wait with a slash", {"wait", "a/b"}, {NULL}, {NULL}, -EINVAL, "invalid file name"},
    {"wait with ..", {"wait", ".."}, {NULL}, {NULL}, -EINVAL, "invalid file name"},
};

static const char *bool_text(bool b)
{
    return b ? "true" : "false";
}

/* The text of a field for "field=value" checks. */
static void field_text(const struct validate_options *o, const char *field, char *buf, size_t n)
{
    const char *name = validate_command_name(o->command);
    if (strcmp(field, "command") == 0)
        snprintf(buf, n, "%s", name ? name : "none");
    else if (strcmp(field, "with_wait") == 0)
        snprintf(buf, n, "%s", bool_text(o->with_wait));
    else if (strcmp(field, "with_workload") == 0)
        snprintf(buf, n, "%s", bool_text(o->with_workload));
    else if (strcmp(field, "cleanup_all") == 0)
        snprintf(buf, n, "%s", bool_text(o->cleanup_all));
    else if (strcmp(field, "skip_gpu_init") == 0)
        snprintf(buf, n, "%s", bool_text(o->skip_gpu_init));
    else if (strcmp(field, "no_dev_char") == 0)
        snprintf(buf, n, "%s", bool_text(o->no_dev_char));
    else if (strcmp(field, "help") == 0)
        snprintf(buf, n, "%s", bool_text(o->common.help));
    else if (strcmp(field, "output_dir") == 0)
        snprintf(buf, n, "%s", o->output_dir);
    else if (strcmp(field, "sleep_ms") == 0)
        snprintf(buf, n, "%llu", (unsigned long long)o->sleep_ms);
    else if (strcmp(field, "timeout_ms") == 0)
        snprintf(buf, n, "%llu", (unsigned long long)o->timeout_ms);
    else if (strcmp(field, "plugin_retries") == 0)
        snprintf(buf, n, "%u", o->plugin_retries);
    else if (strcmp(field, "metrics_port") == 0)
        snprintf(buf, n, "%ld", o->metrics_port);
    else if (strcmp(field, "verbosity") == 0)
        snprintf(buf, n, "%d", o->common.verbosity);
    else if (strcmp(field, "n_files") == 0)
        snprintf(buf, n, "%zu", o->n_files);
    else if (strncmp(field, "files[", 6) == 0)
        snprintf(buf, n, "%s", o->files[field[6] - '0']);
    else {
        static const struct {
            const char *name;
            size_t off;
        } strings[] = {
            {"node_name", offsetof(struct validate_options, node_name)},
            {"namespace_", offsetof(struct validate_options, namespace_)},
            {"host_ctr", offsetof(struct validate_options, host_ctr)},
            {"host_root", offsetof(struct validate_options, host_root)},
            {"driver_ctr", offsetof(struct validate_options, driver_ctr)},
            {"runtime_class", offsetof(struct validate_options, runtime_class)},
            {"cdi_dirs", offsetof(struct validate_options, cdi_dirs)},
            {"containerd_config", offsetof(struct validate_options, containerd_config)},
            {"crio_config", offsetof(struct validate_options, crio_config)},
            {"mig_strategy", offsetof(struct validate_options, mig_strategy)},
            {"workload", offsetof(struct validate_options, workload)},
        };
        for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++)
            if (strcmp(field, strings[i].name) == 0) {
                const char *v = *(char *const *)(const void *)((const char *)o + strings[i].off);
                snprintf(buf, n, "%s", v ? v : "(null)");
                return;
            }
        if (strcmp(field, "mock") == 0) {
            snprintf(buf, n, "%s", o->common.mock ? o->common.mock : "(null)");
            return;
        }
        fail_msg("unknown field %s", field);
    }
}

static void run_case(const struct tcase *c)
{
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    struct validate_options o;
    struct diag d;
    for (size_t i = 0; i < ARRAY_SIZE(VARS); i++)
        unsetenv(VARS[i]);
    for (size_t i = 0; i < MAX_ENV && c->env[i]; i++)
        assert_int_equal(putenv((char *)c->env[i]), 0);
    argv[argc++] = (char *)"validate";
    for (size_t i = 0; i < MAX_ARGS && c->args[i]; i++)
        argv[argc++] = (char *)c->args[i];
    argv[argc] = NULL;
    diag_init(&d);
    validate_options_init(&o);
    int r = validate_options_parse(argc, argv, &o, &d);
    if (c->err) {
        if (r != c->err || !strstr(d.msg, c->msg))
            fail_msg("%s: want %d \"%s\", got %d \"%s\"", c->name, c->err, c->msg, r, d.msg);
    } else {
        if (r != 0)
            fail_msg("%s: %d %s", c->name, r, d.msg);
        for (size_t i = 0; i < MAX_CHECKS && c->want[i]; i++) {
            char field[64], got[512];
            const char *eq = strchr(c->want[i], '=');
            snprintf(field, sizeof(field), "%.*s", (int)(eq - c->want[i]), c->want[i]);
            field_text(&o, field, got, sizeof(got));
            if (strcmp(got, eq + 1) != 0)
                fail_msg("%s: %s is \"%s\", want \"%s\"", c->name, field, got, eq + 1);
        }
    }
    validate_options_release(&o);
    for (size_t i = 0; i < ARRAY_SIZE(VARS); i++)
        unsetenv(VARS[i]);
}

static void test_cases(void **state)
{
    for (size_t i = 0; i < ARRAY_SIZE(CASES); i++)
        run_case(&CASES[i]);
}

static void test_bool(void **state)
{
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
    static const char *const bad[] = {"", "yes", "on", "tRUE", "2"};
    bool b;
    for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
        assert_int_equal(validate_parse_bool(yes[i], &b), 0);
        assert_true(b);
        assert_int_equal(validate_parse_bool(no[i], &b), 0);
        assert_false(b);
    }
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
        assert_int_equal(validate_parse_bool(bad[i], &b), -EINVAL);
}

static void test_seconds_and_durations(void **state)
{
    static const struct {
        const char *s;
        int r;
        uint64_t ms;
    } seconds[] =
        {
            {"5", 0, 5000},         {"0.2", 0, 200},    {".5", 0, 500},        {"1.0001", 0, 1001},
            {"86400", 0, 86400000}, {"0", -ERANGE, 0},  {"86401", -ERANGE, 0}, {"", -EINVAL, 0},
            {"5s", -EINVAL, 0},     {"-1", -EINVAL, 0}, {"1e3", -EINVAL, 0},
        },
      durations[] = {
          {"0", 0, 0},
          {"90", 0, 90000},
          {"1.5", 0, 1500},
          {"250ms", 0, 250},
          {"30s", 0, 30000},
          {"2m30s", 0, 150000},
          {"1h", 0, 3600000},
          {"1.5m", 0, 90000},
          {"", -EINVAL, 0},
          {"1m30", -EINVAL, 0},
          {"5d", -EINVAL, 0},
          {"s", -EINVAL, 0},
          {"99999h", -ERANGE, 0},
      };
    for (size_t i = 0; i < ARRAY_SIZE(seconds); i++) {
        uint64_t ms = 0;
        int r = validate_parse_seconds(seconds[i].s, &ms);
        if (r != seconds[i].r || (r == 0 && ms != seconds[i].ms))
            fail_msg("seconds \"%s\": %d %llu", seconds[i].s, r, (unsigned long long)ms);
    }
    for (size_t i = 0; i < ARRAY_SIZE(durations); i++) {
        uint64_t ms = 0;
        int r = validate_parse_duration(durations[i].s, &ms);
        if (r != durations[i].r || (r == 0 && ms != durations[i].ms))
            fail_msg("duration \"%s\": %d %llu", durations[i].s, r, (unsigned long long)ms);
    }
}

/* Each page names its check and lists only its options; no line is wider than 100 columns. */
static void test_help(void **state)
{
    static const struct {
        enum validate_command c;
        const char *has, *lacks;
    } pages[] = {
        {VALIDATE_NONE, "--plugin-retries", NULL},
        {VALIDATE_DRIVER, "--driver-install-dir-ctr-path", "--cdi-spec-dirs"},
        {VALIDATE_TOOLKIT, "--containerd-config", "--node-name"},
        {VALIDATE_PLUGIN, "[$NODE_NAME]", "--host-root="},
        {VALIDATE_CUDA, "--mock", "--node-name"},
        {VALIDATE_WAIT, "--timeout", "--with-wait"},
        {VALIDATE_CLEANUP, "-o, --output-dir", "--sleep-interval-seconds"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(pages); i++) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        assert_non_null(f);
        validate_usage(f, pages[i].c);
        assert_int_equal(fclose(f), 0);
        if (pages[i].c != VALIDATE_NONE) {
            char usage[64];
            snprintf(usage, sizeof(usage), "Usage: gpuplane validate %s",
                     validate_command_name(pages[i].c));
            assert_non_null(strstr(text, usage));
        }
        if (!strstr(text, pages[i].has))
            fail_msg("page %zu lacks %s", i, pages[i].has);
        if (pages[i].lacks && strstr(text, pages[i].lacks))
            fail_msg("page %zu has %s", i, pages[i].lacks);
        for (const char *line = text; *line;) {
            const char *nl = strchr(line, '\n');
            size_t n = nl ? (size_t)(nl - line) : strlen(line);
            if (n > 100)
                fail_msg("page %zu: a line of %zu columns: %.*s", i, n, (int)n, line);
            line += n + (nl ? 1 : 0);
        }
        free(text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_bool),
        cmocka_unit_test(test_seconds_and_durations),
        cmocka_unit_test(test_help),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
