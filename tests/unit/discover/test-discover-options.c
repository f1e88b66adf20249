/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of `gpuplane discover`'s options, as a table: each flag (in Go's spellings), each variable
 * and each config-file key, precedence flag > environment > file > default, sleep intervals (Go
 * durations, infinite, bad ones), the shares taken from the device plugin's example configs, and
 * errors with the option or the file position they come from. Then re-parsing (SIGHUP reload) and
 * the --help text.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "discover-internal.h"
#include "test-tmpdir.h"

#define MAX_ARGS 8
#define MAX_ENV 4
#define MAX_CHECKS 4

/* Every variable the options read, cleared before each case. */
static const char *const VARS[] = {
    "GFD_MIG_STRATEGY",
    "MIG_STRATEGY",
    "GFD_FAIL_ON_INIT_ERROR",
    "GFD_ONESHOT",
    "GFD_NO_TIMESTAMP",
    "GFD_SLEEP_INTERVAL",
    "GFD_OUTPUT_FILE",
    "GFD_MACHINE_TYPE_FILE",
    "GFD_USE_NODE_FEATURE_API",
    "GFD_CONFIG_FILE",
    "CONFIG_FILE",
    "DEVICE_DISCOVERY_STRATEGY",
    "NODE_NAME",
    "NAMESPACE",
    "POD_NAME",
    "KUBECONFIG",
};

/*
 * One case: arguments and variables ("@CFG" stands for the case's config file, "@EX" for
 * examples/device-plugin), the file's text (NULL: none written), and either the fields expected
 * ("field=value", rendered by field_text) or the error and a part of its message.
 */
struct tcase {
    const char *name;
    const char *args[MAX_ARGS];
    const char *env[MAX_ENV];
    const char *file;
    const char *want[MAX_CHECKS];
    int err;
    const char *msg;
};

#define GFD(body) "version: v1\nflags:\n  gfd:\n" body

static const struct tcase CASES[] = {
    /* defaults */
    {"defaults",
     {0},
     {0},
     NULL,
     {"mig=none", "fail=true", "oneshot=false", "notimestamp=false"},
     0,
     NULL},
    {"defaults 2",
     {0},
     {0},
     NULL,
     {"sleep=60000", "nfapi=true", "discovery=auto", "shares="},
     0,
     NULL},
    {"default paths",
     {0},
     {0},
     NULL,
     {"output=" DISCOVER_DEFAULT_OUTPUT, "machine=" DISCOVER_DEFAULT_MACHINE_FILE, "config=(null)",
      "node=(null)"},
     0,
     NULL},

    /* --mig-strategy, GFD_MIG_STRATEGY, MIG_STRATEGY */
    {"mig flag =", {"--mig-strategy=single"}, {0}, NULL, {"mig=single"}, 0, NULL},
    {"mig flag space", {"--mig-strategy", "mixed"}, {0}, NULL, {"mig=mixed"}, 0, NULL},
    {"mig one dash", {"-mig-strategy=mixed"}, {0}, NULL, {"mig=mixed"}, 0, NULL},
    {"mig GFD env", {0}, {"GFD_MIG_STRATEGY=single"}, NULL, {"mig=single"}, 0, NULL},
    {"mig env alias", {0}, {"MIG_STRATEGY=mixed"}, NULL, {"mig=mixed"}, 0, NULL},
    {"mig GFD env first",
     {0},
     {"GFD_MIG_STRATEGY=single", "MIG_STRATEGY=mixed"},
     NULL,
     {"mig=single"},
     0,
     NULL},
    {"mig flag over env",
     {"--mig-strategy=none"},
     {"MIG_STRATEGY=mixed"},
     NULL,
     {"mig=none"},
     0,
     NULL},
    {"mig bad flag",
     {"--mig-strategy=all"},
     {0},
     NULL,
     {0},
     -EINVAL,
     "--mig-strategy: invalid value \"all\": want none, single or mixed"},
    {"mig bad env",
     {0},
     {"MIG_STRATEGY=Single"},
     NULL,
     {0},
     -EINVAL,
     "MIG_STRATEGY: invalid value \"Single\""},

    /* booleans */
    {"fail false", {"--fail-on-init-error=false"}, {0}, NULL, {"fail=false"}, 0, NULL},
    {"fail env", {0}, {"GFD_FAIL_ON_INIT_ERROR=0"}, NULL, {"fail=false"}, 0, NULL},
    {"fail bare",
     {"--fail-on-init-error"},
     {"GFD_FAIL_ON_INIT_ERROR=false"},
     NULL,
     {"fail=true"},
     0,
     NULL},
    {"oneshot", {"--oneshot"}, {0}, NULL, {"oneshot=true"}, 0, NULL},
    {"oneshot one dash", {"-oneshot"}, {0}, NULL, {"oneshot=true"}, 0, NULL},
    {"oneshot env", {0}, {"GFD_ONESHOT=TRUE"}, NULL, {"oneshot=true"}, 0, NULL},
    {"oneshot flag over env",
     {"--oneshot=false"},
     {"GFD_ONESHOT=true"},
     NULL,
     {"oneshot=false"},
     0,
     NULL},
    {"oneshot empty env", {0}, {"GFD_ONESHOT="}, NULL, {"oneshot=false"}, 0, NULL},
    {"oneshot bad",
     {"--oneshot=yes"},
     {0},
     NULL,
     {0},
     -EINVAL,
     "--oneshot: invalid value \"yes\": want true or false"},
    {"oneshot bad env",
     {0},
     {"GFD_ONESHOT=on"},
     NULL,
     {0},
     -EINVAL,
     "GFD_ONESHOT: invalid value \"on\""},
    {"no timestamp", {"--no-timestamp"}, {0}, NULL, {"notimestamp=true"}, 0, NULL},
    {"no timestamp env", {0}, {"GFD_NO_TIMESTAMP=t"}, NULL, {"notimestamp=true"}, 0, NULL},
    {"nfapi false", {"--use-node-feature-api=false"}, {0}, NULL, {"nfapi=false"}, 0, NULL},
    {"nfapi env", {0}, {"GFD_USE_NODE_FEATURE_API=false"}, NULL, {"nfapi=false"}, 0, NULL},
    {"print labels", {"--print-labels"}, {0}, NULL, {"print=true"}, 0, NULL},

    /* --sleep-interval: Go durations and infinite */
    {"sleep 60s", {"--sleep-interval=60s"}, {0}, NULL, {"sleep=60000"}, 0, NULL},
    {"sleep 1m30s", {"--sleep-interval", "1m30s"}, {0}, NULL, {"sleep=90000"}, 0, NULL},
    {"sleep 500ms", {"--sleep-interval=500ms"}, {0}, NULL, {"sleep=500"}, 0, NULL},
    {"sleep 2h45m", {"--sleep-interval=2h45m"}, {0}, NULL, {"sleep=9900000"}, 0, NULL},
    {"sleep 1.5h", {"--sleep-interval=1.5h"}, {0}, NULL, {"sleep=5400000"}, 0, NULL},
    {"sleep .5s", {"--sleep-interval=.5s"}, {0}, NULL, {"sleep=500"}, 0, NULL},
    {"sleep 1us rounds up", {"--sleep-interval=1us"}, {0}, NULL, {"sleep=1"}, 0, NULL},
    {"sleep micro sign", {"--sleep-interval=1500\xc2\xb5s"}, {0}, NULL, {"sleep=2"}, 0, NULL},
    {"sleep ns", {"--sleep-interval=2000000ns"}, {0}, NULL, {"sleep=2"}, 0, NULL},
    {"sleep infinite", {"--sleep-interval=infinite"}, {0}, NULL, {"sleep=infinite"}, 0, NULL},
    {"sleep env", {0}, {"GFD_SLEEP_INTERVAL=10s"}, NULL, {"sleep=10000"}, 0, NULL},
    {"sleep flag over env",
     {"--sleep-interval=2s"},
     {"GFD_SLEEP_INTERVAL=infinite"},
     NULL,
     {"sleep=2000"},
     0,
     NULL},
    {"sleep no unit",
     {"--sleep-interval=60"},
     {0},
     NULL,
     {0},
     -EINVAL,
     "--sleep-interval: invalid duration \"60\": want a number with a unit"},
    {"sleep unknown unit",
     {"--sleep-interval=1d"},
     {0},
     NULL,
     {0},
     -EINVAL,
     "invalid duration \"1d\""},
    {"sleep negative",
     {"--sleep-interval=-5s"},
     {0},
     NULL,
     {0},
     -EINVAL,
     "invalid duration \"-5s\""},
    {"sleep zero", {"--sleep-interval=0"}, {0}, NULL, {0}, -EINVAL, "must be more than 0"},
    {"sleep zero s", {"--sleep-interval=0s"}, {0}, NULL, {0}, -EINVAL, "must be more than 0"},
    {"sleep empty", {"--sleep-interval="}, {0}, NULL, {0}, -EINVAL, "invalid duration \"\""},
    {"sleep trailing number",
     {"--sleep-interval=5s5"},
     {0},
     NULL,
     {0},
     -EINVAL,
     "invalid duration \"5s5\""},
    {"sleep lone unit", {"--sleep-interval=s"}, {0}, NULL, {0}, -EINVAL, "invalid duration \"s\""},
    {"sleep lone dot", {"--sleep-interval=.s"}, {0}, NULL, {0}, -EINVAL, "invalid duration \".s\""},
    {"sleep Infinite",
     {"--sleep-interval=Infinite"},
     {0},
     NULL,
     {0},
     -EINVAL,
     "invalid duration \"Infinite\""},
    {"sleep too long", {"--sleep-interval=3000000h"}, {0}, NULL, {0}, -EINVAL, "out of range"},
    {"sleep huge number",
     {"--sleep-interval=99999999999999999999s"},
     {0},
     NULL,
     {0},
     -EINVAL,
     "out of range"},
    {"sleep bad env",
     {0},
     {"GFD_SLEEP_INTERVAL=often"},
     NULL,
     {0},
     -EINVAL,
     "GFD_SLEEP_INTERVAL: invalid duration \"often\""},

    /* paths and names */
    {"output long", {"--output-file=/tmp/a"}, {0}, NULL, {"output=/tmp/a"}, 0, NULL},
    {"output -o", {"-o", "/tmp/b"}, {0}, NULL, {"output=/tmp/b"}, 0, NULL},
    {"output -o=", {"-o=/tmp/c"}, {0}, NULL, {"output=/tmp/c"}, 0, NULL},
    {"output -oPATH", {"-o/tmp/d"}, {0}, NULL, {"output=/tmp/d"}, 0, NULL},
    {"output env", {0}, {"GFD_OUTPUT_FILE=/tmp/e"}, NULL, {"output=/tmp/e"}, 0, NULL},
    {"output flag over env",
     {"-o", "/tmp/f"},
     {"GFD_OUTPUT_FILE=/tmp/e"},
     NULL,
     {"output=/tmp/f"},
     0,
     NULL},
    {"machine", {"--machine-type-file=/tmp/m"}, {0}, NULL, {"machine=/tmp/m"}, 0, NULL},
    {"machine env", {0}, {"GFD_MACHINE_TYPE_FILE=/tmp/n"}, NULL, {"machine=/tmp/n"}, 0, NULL},
    {"discovery", {"--device-discovery-strategy=nvml"}, {0}, NULL, {"discovery=nvml"}, 0, NULL},
    {"discovery env", {0}, {"DEVICE_DISCOVERY_STRATEGY=tegra"}, NULL, {"discovery=tegra"}, 0, NULL},
    {"discovery bad",
     {"--device-discovery-strategy=cuda"},
     {0},
     NULL,
     {0},
     -EINVAL,
     "invalid value \"cuda\": want auto, nvml or tegra"},
    {"kube flags",
     {"--node-name=n1", "--namespace=gpu", "--pod-name=gfd-x", "--kubeconfig=/k"},
     {0},
     NULL,
     {"node=n1", "namespace=gpu", "pod=gfd-x", "kubeconfig=/k"},
     0,
     NULL},
    {"kube env",
     {0},
     {"NODE_NAME=n2", "NAMESPACE=ns", "POD_NAME=p", "KUBECONFIG=/kc"},
     NULL,
     {"node=n2", "namespace=ns", "pod=p", "kubeconfig=/kc"},
     0,
     NULL},
    {"kube flag over env", {"--node-name=n3"}, {"NODE_NAME=n2"}, NULL, {"node=n3"}, 0, NULL},

    /* common options */
    {"verbosity", {"-v=3"}, {0}, NULL, {"verbosity=3"}, 0, NULL},
    {"mock", {"--mock=dgx-h100"}, {0}, NULL, {"mock=dgx-h100"}, 0, NULL},
    {"help", {"--help", "--sleep-interval=bad"}, {0}, NULL, {"help=true"}, 0, NULL},

    /* usage errors */
    {"unknown", {"--bogus"}, {0}, NULL, {0}, -EINVAL, "unknown option \"--bogus\""},
    {"stray", {"extra"}, {0}, NULL, {0}, -EINVAL, "unexpected argument \"extra\""},
    {"missing value", {"--node-name"}, {0}, NULL, {0}, -EINVAL, "missing value for option"},
    {"help pointer", {"--bogus"}, {0}, NULL, {0}, -EINVAL, "(see 'gpuplane discover --help')"},

    /* config file keys */
    {"file mig",
     {"--config-file=@CFG"},
     {0},
     "version: v1\nflags:\n  migStrategy: single\n",
     {"mig=single", "config=@CFG"},
     0,
     NULL},
    {"file fail",
     {"--config-file=@CFG"},
     {0},
     "flags:\n  failOnInitError: false\n",
     {"fail=false"},
     0,
     NULL},
    {"file discovery",
     {"--config-file=@CFG"},
     {0},
     "flags:\n  deviceDiscoveryStrategy: nvml\n",
     {"discovery=nvml"},
     0,
     NULL},
    {"file nfapi",
     {"--config-file=@CFG"},
     {0},
     "flags:\n  useNodeFeatureAPI: false\n",
     {"nfapi=false"},
     0,
     NULL},
    {"file gfd booleans",
     {"--config-file=@CFG"},
     {0},
     GFD("    oneshot: true\n    noTimestamp: true\n"),
     {"oneshot=true", "notimestamp=true"},
     0,
     NULL},
    {"file gfd sleep",
     {"--config-file=@CFG"},
     {0},
     GFD("    sleepInterval: 5m\n"),
     {"sleep=300000"},
     0,
     NULL},
    {"file gfd infinite",
     {"--config-file=@CFG"},
     {0},
     GFD("    sleepInterval: infinite\n"),
     {"sleep=infinite"},
     0,
     NULL},
    {"file gfd paths",
     {"--config-file=@CFG"},
     {0},
     GFD("    outputFile: /out/gfd\n    machineTypeFile: /m/product\n"),
     {"output=/out/gfd", "machine=/m/product"},
     0,
     NULL},
    {"file gfd null",
     {"--config-file=@CFG"},
     {0},
     GFD("    oneshot: null\n"),
     {"oneshot=false"},
     0,
     NULL},
    {"file by GFD_CONFIG_FILE",
     {0},
     {"GFD_CONFIG_FILE=@CFG"},
     GFD("    oneshot: true\n"),
     {"oneshot=true", "config=@CFG"},
     0,
     NULL},
    {"file by CONFIG_FILE",
     {0},
     {"CONFIG_FILE=@CFG"},
     GFD("    oneshot: true\n"),
     {"oneshot=true"},
     0,
     NULL},
    {"file GFD_CONFIG_FILE first",
     {0},
     {"GFD_CONFIG_FILE=@CFG", "CONFIG_FILE=/nonexistent.yaml"},
     GFD("    oneshot: true\n"),
     {"oneshot=true"},
     0,
     NULL},
    {"file empty flag: none",
     {"--config-file="},
     {"CONFIG_FILE=@CFG"},
     GFD("    oneshot: true\n"),
     {"oneshot=false", "config=(null)"},
     0,
     NULL},
    {"empty file", {"--config-file=@CFG"}, {0}, "", {"mig=none", "sleep=60000"}, 0, NULL},

    /* precedence over the file */
    {"env over file",
     {"--config-file=@CFG"},
     {"MIG_STRATEGY=mixed"},
     "flags:\n  migStrategy: single\n",
     {"mig=mixed"},
     0,
     NULL},
    {"flag over env over file",
     {"--config-file=@CFG", "--mig-strategy=none"},
     {"MIG_STRATEGY=mixed"},
     "flags:\n  migStrategy: single\n",
     {"mig=none"},
     0,
     NULL},
    {"env bool over file",
     {"--config-file=@CFG"},
     {"GFD_ONESHOT=false"},
     GFD("    oneshot: true\n"),
     {"oneshot=false"},
     0,
     NULL},
    {"flag sleep over file",
     {"--config-file=@CFG", "--sleep-interval=10s"},
     {0},
     GFD("    sleepInterval: 5m\n"),
     {"sleep=10000"},
     0,
     NULL},
    {"env nfapi over file",
     {"--config-file=@CFG"},
     {"GFD_USE_NODE_FEATURE_API=true"},
     "flags:\n  useNodeFeatureAPI: false\n",
     {"nfapi=true"},
     0,
     NULL},
    {"flag output over file",
     {"--config-file=@CFG", "-o", "/x"},
     {0},
     GFD("    outputFile: /out/gfd\n"),
     {"output=/x"},
     0,
     NULL},

    /* config file errors, with positions */
    {"file bad sleep",
     {"--config-file=@CFG"},
     {0},
     GFD("    sleepInterval: \"10\"\n"),
     {0},
     -EINVAL,
     "config.yaml:4:21: \"sleepInterval\": invalid duration \"10\""},
    {"file zero sleep",
     {"--config-file=@CFG"},
     {0},
     GFD("    oneshot: true\n    sleepInterval: 0s\n"),
     {0},
     -EINVAL,
     "config.yaml:5:20: \"sleepInterval\": invalid duration \"0s\": must be more than 0"},
    {"file bad sleep, flag given",
     {"--config-file=@CFG", "--sleep-interval=1s"},
     {0},
     GFD("    sleepInterval: soon\n"),
     {0},
     -EINVAL,
     "config.yaml:4:20:"},
    {"file gfd type",
     {"--config-file=@CFG"},
     {0},
     GFD("    oneshot: \"yes\"\n"),
     {0},
     -EINVAL,
     "config.yaml:4:15: \"oneshot\": expected a boolean, got string"},
    {"file gfd sleep type",
     {"--config-file=@CFG"},
     {0},
     GFD("    sleepInterval: 60\n"),
     {0},
     -EINVAL,
     "config.yaml:4:20: \"sleepInterval\": expected a string, got integer"},
    {"file gfd unknown key",
     {"--config-file=@CFG"},
     {0},
     GFD("    oneShot: true\n"),
     {0},
     -EINVAL,
     "config.yaml:4:5:"},
    {"file bad mig",
     {"--config-file=@CFG"},
     {0},
     "version: v1\nflags:\n  migStrategy: foo\n",
     {0},
     -EINVAL,
     "config.yaml:3:16: \"migStrategy\": invalid value \"foo\": want none, single or mixed"},
    {"file bad version",
     {"--config-file=@CFG"},
     {0},
     "version: v2\n",
     {0},
     -EINVAL,
     "config.yaml:1:10: unknown version: v2 (want v1)"},
    {"file missing",
     {"--config-file=/nonexistent/gfd.yaml"},
     {0},
     NULL,
     {0},
     -ENOENT,
     "/nonexistent/gfd.yaml"},

    /* shares, from the device plugin's examples */
    {"shares time-slicing",
     {"--config-file=@EX/time-slicing.yaml"},
     {0},
     NULL,
     {"shares=nvidia.com/gpu:4:renamed:time-slicing"},
     0,
     NULL},
    {"shares mig-mixed",
     {"--config-file=@EX/mig-mixed.yaml"},
     {0},
     NULL,
     {"mig=mixed",
      "shares=nvidia.com/mig-1g.10gb:2:plain:time-slicing,nvidia.com/mig-2g.20gb:3:plain:time-"
      "slicing"},
     0,
     NULL},
    {"shares rename",
     {"--config-file=@EX/rename.yaml"},
     {0},
     NULL,
     {"shares=nvidia.com/h100:8:renamed:time-slicing,nvidia.com/gpu:3:plain:time-slicing"},
     0,
     NULL},
    {"shares none in health.yaml",
     {"--config-file=@EX/health.yaml"},
     {0},
     NULL,
     {"shares="},
     0,
     NULL},
    {"shares none in demo.yaml", {"--config-file=@EX/demo.yaml"}, {0}, NULL, {"shares="}, 0, NULL},
    {"shares mps",
     {"--config-file=@CFG"},
     {0},
     "sharing:\n  mps:\n    resources:\n    - name: gpu\n      replicas: 2\n",
     {"shares=nvidia.com/gpu:2:plain:mps"},
     0,
     NULL},
    {"shares mps wins",
     {"--config-file=@CFG"},
     {0},
     "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 4\n"
     "  mps:\n    renameByDefault: true\n    resources:\n    - name: gpu\n      replicas: 3\n",
     {"shares=nvidia.com/gpu:3:renamed:mps"},
     0,
     NULL},
    {"shares bad replicas",
     {"--config-file=@CFG"},
     {0},
     "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n      replicas: 0\n",
     {0},
     -EINVAL,
     "config.yaml:5:17: \"replicas\": 0 is out of range"},
};

/* ---- helpers ---- */

struct fixture {
    char dir[64];
    char cfg[96];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/test-discover-options-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->cfg, sizeof(f->cfg), "%s/config.yaml", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(test_tmpdir_remove(f->dir), 0);
    free(f);
    return 0;
}

static void clear_env(void)
{
    for (size_t i = 0; i < sizeof(VARS) / sizeof(VARS[0]); i++)
        unsetenv(VARS[i]);
}

/* in with "@CFG" replaced by the case's file and "@EX" by the examples directory. */
static void expand(const struct fixture *f, const char *in, char *out, size_t n)
{
    const char *p;
    if ((p = strstr(in, "@CFG")))
        snprintf(out, n, "%.*s%s%s", (int)(p - in), in, f->cfg, p + 4);
    else if ((p = strstr(in, "@EX")))
        snprintf(out, n, "%.*s%s%s", (int)(p - in), in, EXAMPLES_DIR, p + 3);
    else
        snprintf(out, n, "%s", in);
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    assert_int_equal(fputs(text, fp) >= 0, 1);
    assert_int_equal(fclose(fp), 0);
}

static const char *bool_text(bool b)
{
    return b ? "true" : "false";
}

/* One field of o as text, for "field=value" checks. */
static void field_text(const struct discover_options *o, const char *field, char *buf, size_t n)
{
    static const char *const mig[] = {"none", "single", "mixed"};
    size_t len = 0;
    if (strcmp(field, "mig") == 0)
        snprintf(buf, n, "%s", mig[o->mig]);
    else if (strcmp(field, "fail") == 0)
        snprintf(buf, n, "%s", bool_text(o->fail_on_init_error));
    else if (strcmp(field, "oneshot") == 0)
        snprintf(buf, n, "%s", bool_text(o->oneshot));
    else if (strcmp(field, "notimestamp") == 0)
        snprintf(buf, n, "%s", bool_text(o->no_timestamp));
    else if (strcmp(field, "nfapi") == 0)
        snprintf(buf, n, "%s", bool_text(o->use_node_feature_api));
    else if (strcmp(field, "print") == 0)
        snprintf(buf, n, "%s", bool_text(o->print_labels));
    else if (strcmp(field, "help") == 0)
        snprintf(buf, n, "%s", bool_text(o->common.help));
    else if (strcmp(field, "verbosity") == 0)
        snprintf(buf, n, "%d", o->common.verbosity);
    else if (strcmp(field, "mock") == 0)
        snprintf(buf, n, "%s", o->common.mock ? o->common.mock : "(null)");
    else if (strcmp(field, "sleep") == 0 && o->sleep_interval_ms == DISCOVER_SLEEP_INFINITE)
        snprintf(buf, n, "infinite");
    else if (strcmp(field, "sleep") == 0)
        snprintf(buf, n, "%llu", (unsigned long long)o->sleep_interval_ms);
    else if (strcmp(field, "shares") == 0) {
        buf[0] = '\0';
        for (size_t i = 0; i < o->n_shares && len < n; i++) {
            const struct discover_share *s = &o->shares[i];
            int w = snprintf(buf + len, n - len, "%s%s:%u:%s:%s", i ? "," : "", s->resource,
                             s->replicas, s->renamed ? "renamed" : "plain", s->strategy);
            assert_true(w > 0);
            len += (size_t)w;
        }
    } else {
        const char *v = NULL;
        if (strcmp(field, "output") == 0)
            v = o->output_file;
        else if (strcmp(field, "machine") == 0)
            v = o->machine_type_file;
        else if (strcmp(field, "config") == 0)
            v = o->config_file;
        else if (strcmp(field, "discovery") == 0)
            v = o->discovery_strategy;
        else if (strcmp(field, "node") == 0)
            v = o->node_name;
        else if (strcmp(field, "namespace") == 0)
            v = o->namespace_;
        else if (strcmp(field, "pod") == 0)
            v = o->pod_name;
        else if (strcmp(field, "kubeconfig") == 0)
            v = o->kubeconfig;
        else
            fail_msg("unknown field %s", field);
        snprintf(buf, n, "%s", v ? v : "(null)");
    }
}

/* Runs c's arguments (after the case's environment is set) into o, initialised here. */
static int run(const struct fixture *f, const struct tcase *c, struct discover_options *o,
               struct diag *d, char storage[MAX_ARGS][256])
{
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = (char *)DISCOVER_COMMAND;
    for (size_t i = 0; i < MAX_ARGS && c->args[i]; i++) {
        expand(f, c->args[i], storage[i], 256);
        argv[argc++] = storage[i];
    }
    argv[argc] = NULL;
    diag_init(d);
    discover_options_init(o);
    return discover_options_parse(argc, argv, o, d);
}

static void set_case_env(const struct fixture *f, const struct tcase *c)
{
    clear_env();
    for (size_t i = 0; i < MAX_ENV && c->env[i]; i++) {
        char buf[256];
        const char *eq = strchr(c->env[i], '=');
        assert_non_null(eq);
        expand(f, eq + 1, buf, sizeof(buf));
        char name[64];
        snprintf(name, sizeof(name), "%.*s", (int)(eq - c->env[i]), c->env[i]);
        assert_int_equal(setenv(name, buf, 1), 0);
    }
}

/* Whether c gives what it wants; each mismatch is printed, so one run shows them all. */
static bool check_case(const struct fixture *f, const struct tcase *c)
{
    bool ok = true;
    struct discover_options o;
    struct diag d;
    char storage[MAX_ARGS][256];
    if (c->file)
        write_file(f->cfg, c->file);
    else
        unlink(f->cfg);
    set_case_env(f, c);
    int r = run(f, c, &o, &d, storage);
    if (c->err) {
        if (r != c->err || !strstr(d.msg, c->msg)) {
            print_error("%s: got %d \"%s\", want %d with \"%s\"\n", c->name, r, d.msg, c->err,
                        c->msg);
            ok = false;
        }
    } else {
        if (r != 0) {
            print_error("%s: got %d \"%s\"\n", c->name, r, d.msg);
            ok = false;
        }
        for (size_t i = 0; r == 0 && i < MAX_CHECKS && c->want[i]; i++) {
            char want[512], got[512], field[32];
            const char *eq = strchr(c->want[i], '=');
            assert_non_null(eq);
            snprintf(field, sizeof(field), "%.*s", (int)(eq - c->want[i]), c->want[i]);
            expand(f, eq + 1, want, sizeof(want));
            field_text(&o, field, got, sizeof(got));
            if (strcmp(got, want) != 0) {
                print_error("%s: %s is \"%s\", want \"%s\"\n", c->name, field, got, want);
                ok = false;
            }
        }
    }
    discover_options_release(&o);
    clear_env();
    return ok;
}

/* ---- tests ---- */

static void test_table(void **state)
{
    size_t failed = 0;
    for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++)
        failed += !check_case(*state, &CASES[i]);
    assert_int_equal(failed, 0);
}

/* A reload re-runs parse with the same argv on the same struct: the file's new content counts,
 * and what the file no longer says goes back to its default. */
static void test_reparse(void **state)
{
    const struct fixture *f = *state;
    const struct tcase c = {"reload", {"--config-file=@CFG", "--node-name=n1"}, {0}, NULL, {0}, 0,
                            NULL};
    struct discover_options o;
    struct diag d;
    char storage[MAX_ARGS][256];
    clear_env();
    write_file(f->cfg, "version: v1\nflags:\n  gfd:\n    sleepInterval: 5s\n"
                       "sharing:\n  timeSlicing:\n    resources:\n    - name: gpu\n"
                       "      replicas: 2\n");
    assert_int_equal(run(f, &c, &o, &d, storage), 0);
    assert_int_equal(o.sleep_interval_ms, 5000);
    assert_int_equal(o.n_shares, 1);

    char *argv[] = {(char *)DISCOVER_COMMAND, storage[0], storage[1], NULL};
    write_file(f->cfg, "version: v1\nflags:\n  gfd:\n    oneshot: true\n");
    assert_int_equal(discover_options_parse(3, argv, &o, &d), 0);
    assert_int_equal(o.sleep_interval_ms, DISCOVER_DEFAULT_SLEEP_MS);
    assert_true(o.oneshot);
    assert_int_equal(o.n_shares, 0);
    assert_null(o.shares);
    assert_string_equal(o.node_name, "n1");

    /* A released and re-initialised struct gives the same. */
    discover_options_release(&o);
    discover_options_init(&o);
    assert_int_equal(discover_options_parse(3, argv, &o, &d), 0);
    assert_true(o.oneshot);
    assert_string_equal(o.node_name, "n1");

    /* A bad reload reports the file's position; the struct is still released cleanly. */
    write_file(f->cfg, "version: v1\nflags:\n  gfd:\n    sleepInterval: x\n");
    assert_int_equal(discover_options_parse(3, argv, &o, &d), -EINVAL);
    assert_non_null(strstr(d.msg, "config.yaml:4:20:"));
    discover_options_release(&o);
}

static void test_usage(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    assert_non_null(fp);
    discover_usage(fp);
    assert_int_equal(fclose(fp), 0);
    static const char *const parts[] = {
        "Usage: gpuplane discover [OPTIONS]",
        "--mig-strategy=STRATEGY",
        "[$GFD_MIG_STRATEGY, $MIG_STRATEGY]",
        "--fail-on-init-error",
        "[$GFD_FAIL_ON_INIT_ERROR]",
        "--oneshot",
        "--no-timestamp",
        "--sleep-interval=DURATION",
        "infinite",
        "[$GFD_SLEEP_INTERVAL]",
        "  -o, --output-file=PATH",
        "[$GFD_OUTPUT_FILE]",
        "--machine-type-file=PATH",
        "--use-node-feature-api",
        "[$GFD_USE_NODE_FEATURE_API]",
        "--config-file=PATH",
        "[$GFD_CONFIG_FILE, $CONFIG_FILE]",
        "--device-discovery-strategy=STRATEGY",
        "[$DEVICE_DISCOVERY_STRATEGY]",
        "--node-name=NAME",
        "[$NODE_NAME]",
        "--namespace=NAMESPACE",
        "--pod-name=NAME",
        "--kubeconfig=PATH",
        "--print-labels",
        "--mock=PROFILE",
        "Examples:",
        "gpuplane discover --mock=a100-mig --mig-strategy=mixed --print-labels",
    };
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        if (!strstr(text, parts[i]))
            fail_msg("--help lacks \"%s\"", parts[i]);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_table, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reparse, setup, teardown),
        cmocka_unit_test(test_usage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
