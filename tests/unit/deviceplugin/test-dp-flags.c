/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the device plugin's command line and environment: every flag under NVIDIA's names and
 * aliases, the accepted spellings (--flag value, --flag=value, -flag, boolean forms), every
 * variable, precedence flag > environment > file > default, NVIDIA's DP_*_HEALTHCHECKS semantics,
 * and the messages that name the flag or variable a bad value came from.
 */
#include <unistd.h>

#include "dp-test.h"
#include "dp.h"

#define MAX_ARGS 16

/* Parses a NULL-terminated argument list into cfg (initialised here; the caller releases). */
static int parse(struct dp_config *cfg, struct diag *d, const char *const *args)
{
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = (char *)"device-plugin";
    for (size_t i = 0; args[i]; i++) {
        assert_true(argc <= MAX_ARGS);
        argv[argc++] = (char *)args[i];
    }
    argv[argc] = NULL;
    diag_init(d);
    assert_int_equal(dp_config_init(cfg), 0);
    return dp_config_parse_args(argc, argv, cfg, d);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

struct flag_case {
    const char *args[4];
    const char *path;
    const char *json;
};

static const struct flag_case flag_cases[] = {
    {{"--mig-strategy", "mixed"}, "flags.migStrategy", "\"mixed\""},
    {{"--mig-strategy=single"}, "flags.migStrategy", "\"single\""},
    {{"-mig-strategy=single"}, "flags.migStrategy", "\"single\""},
    {{"-mig-strategy", "mixed"}, "flags.migStrategy", "\"mixed\""},
    {{"--fail-on-init-error=false"}, "flags.failOnInitError", "false"},
    {{"--fail-on-init-error=0"}, "flags.failOnInitError", "false"},
    {{"--fail-on-init-error=F"}, "flags.failOnInitError", "false"},
    {{"--fail-on-init-error=FALSE"}, "flags.failOnInitError", "false"},
    {{"--driver-root", "/run/nvidia/driver"}, "flags.nvidiaDriverRoot", "\"/run/nvidia/driver\""},
    {{"--nvidia-driver-root=/d"}, "flags.nvidiaDriverRoot", "\"/d\""},
    {{"--dev-root=/"}, "flags.nvidiaDevRoot", "\"/\""},
    {{"--nvidia-dev-root", "/host"}, "flags.nvidiaDevRoot", "\"/host\""},
    {{"--pass-device-specs"}, "flags.plugin.passDeviceSpecs", "true"},
    {{"--pass-device-specs=true"}, "flags.plugin.passDeviceSpecs", "true"},
    {{"--pass-device-specs=True"}, "flags.plugin.passDeviceSpecs", "true"},
    {{"--pass-device-specs=t"}, "flags.plugin.passDeviceSpecs", "true"},
    {{"--pass-device-specs=1"}, "flags.plugin.passDeviceSpecs", "true"},
    {{"--pass-device-specs", "--pass-device-specs=false"}, "flags.plugin.passDeviceSpecs", "false"},
    {{"--device-list-strategy", "volume-mounts"},
     "flags.plugin.deviceListStrategy",
     "[\"volume-mounts\"]"},
    {{"--device-list-strategy=cdi-annotations,cdi-cri"},
     "flags.plugin.deviceListStrategy",
     "[\"cdi-annotations\",\"cdi-cri\"]"},
    {{"--device-list-strategy=envvar", "--device-list-strategy", "cdi-cri"},
     "flags.plugin.deviceListStrategy",
     "[\"envvar\",\"cdi-cri\"]"},
    {{"--device-id-strategy", "index"}, "flags.plugin.deviceIDStrategy", "\"index\""},
    {{"--gdrcopy-enabled"}, "flags.gdrcopyEnabled", "true"},
    {{"--gds-enabled"}, "flags.gdsEnabled", "true"},
    {{"--mofed-enabled"}, "flags.mofedEnabled", "true"},
    {{"--cdi-annotation-prefix=nvidia.cdi.k8s.io/"},
     "flags.plugin.cdiAnnotationPrefix",
     "\"nvidia.cdi.k8s.io/\""},
    {{"--nvidia-cdi-hook-path=/h"}, "flags.plugin.nvidiaCTKPath", "\"/h\""},
    {{"--nvidia-ctk-path", "/c"}, "flags.plugin.nvidiaCTKPath", "\"/c\""},
    {{"--driver-root-ctr-path=/x"}, "flags.plugin.containerDriverRoot", "\"/x\""},
    {{"--container-driver-root=/y"}, "flags.plugin.containerDriverRoot", "\"/y\""},
    {{"--mps-root", "/run/nvidia/mps"}, "flags.mpsRoot", "\"/run/nvidia/mps\""},
    {{"--shared-devices-allocation-policy=packed"},
     "flags.plugin.sharedDevicesAllocationPolicy",
     "\"packed\""},
    {{"--device-discovery-strategy=nvml"}, "flags.deviceDiscoveryStrategy", "\"nvml\""},
    {{"--imex-channel-ids=0"}, "imex.channelIDs", "[0]"},
    {{"--imex-channel-ids="}, "imex.channelIDs", "[]"},
    {{"--imex-required"}, "imex.required", "true"},
    {{"--kubelet-socket", "/k/kubelet.sock"}, "flags.plugin.kubeletSocket", "\"/k/kubelet.sock\""},
    {{"--kubelet-socket="}, "flags.plugin.kubeletSocket", "\"\""},
    {{"--cdi-spec-dir", "/run/cdi"}, "flags.plugin.cdiSpecDir", "\"/run/cdi\""},
    {{"--cdi-feature-flags=a,b", "--cdi-feature-flags", "c"},
     "flags.plugin.cdiFeatureFlags",
     "[\"a\",\"b\",\"c\"]"},
    {{"--cdi-disable-hooks=all"}, "flags.plugin.cdiDisableHooks", "[\"all\"]"},
};

static void test_every_flag(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(flag_cases) / sizeof(flag_cases[0]); i++) {
        const struct flag_case *c = &flag_cases[i];
        struct dp_config cfg;
        struct diag d;
        int r = parse(&cfg, &d, c->args);
        if (r < 0)
            print_error("case %zu: %s\n", i, d.msg);
        assert_int_equal(r, 0);
        test_assert_json_at(&cfg, c->path, c->json);
        dp_config_release(&cfg);
    }
}

/* Every flag of the table is reachable under each of its names. */
static void test_table_flags_reachable(void **state)
{
    (void)state;
    for (size_t i = 0; i < dp_n_settings; i++) {
        const struct dp_setting *s = &dp_settings[i];
        const char *names[] = {s->flag, s->flag_alias};
        for (size_t n = 0; n < 2; n++) {
            char arg[128];
            struct dp_config cfg;
            struct diag d;
            if (!names[n] || strcmp(names[n], "config-file") == 0)
                continue;
            snprintf(arg, sizeof(arg), "--%s=%s", names[n],
                     s->kind == DP_KIND_BOOL            ? "true"
                     : s->kind == DP_KIND_ENUM          ? s->names[1]
                     : s->kind == DP_KIND_CHANNELS      ? "0"
                     : s->kind == DP_KIND_LIST_STRATEGY ? "cdi-cri"
                                                        : "/x");
            int r = parse(&cfg, &d, ARGS(arg));
            if (r < 0)
                print_error("%s: %s\n", arg, d.msg);
            assert_int_equal(r, 0);
            dp_config_release(&cfg);
        }
    }
}

struct env_case {
    const char *var;
    const char *value;
    const char *path;
    const char *json;
};

static const struct env_case env_cases[] = {
    {"MIG_STRATEGY", "mixed", "flags.migStrategy", "\"mixed\""},
    {"FAIL_ON_INIT_ERROR", "false", "flags.failOnInitError", "false"},
    {"FAIL_ON_INIT_ERROR", "", "flags.failOnInitError", "true"}, /* empty = unset */
    {"NVIDIA_DRIVER_ROOT", "/run/nvidia/driver", "flags.nvidiaDriverRoot",
     "\"/run/nvidia/driver\""},
    {"NVIDIA_DEV_ROOT", "/", "flags.nvidiaDevRoot", "\"/\""},
    {"PASS_DEVICE_SPECS", "true", "flags.plugin.passDeviceSpecs", "true"},
    {"DEVICE_LIST_STRATEGY", "cdi-annotations, cdi-cri", "flags.plugin.deviceListStrategy",
     "[\"cdi-annotations\",\"cdi-cri\"]"},
    {"DEVICE_LIST_STRATEGY", "", "flags.plugin.deviceListStrategy", "[\"envvar\"]"},
    {"DEVICE_ID_STRATEGY", "index", "flags.plugin.deviceIDStrategy", "\"index\""},
    {"GDRCOPY_ENABLED", "1", "flags.gdrcopyEnabled", "true"},
    {"GDS_ENABLED", "true", "flags.gdsEnabled", "true"},
    {"MOFED_ENABLED", "TRUE", "flags.mofedEnabled", "true"},
    {"CDI_ANNOTATION_PREFIX", "x.io/", "flags.plugin.cdiAnnotationPrefix", "\"x.io/\""},
    {"NVIDIA_CDI_HOOK_PATH", "/h", "flags.plugin.nvidiaCTKPath", "\"/h\""},
    {"NVIDIA_CTK_PATH", "/c", "flags.plugin.nvidiaCTKPath", "\"/c\""},
    {"DRIVER_ROOT_CTR_PATH", "/x", "flags.plugin.containerDriverRoot", "\"/x\""},
    {"CONTAINER_DRIVER_ROOT", "/y", "flags.plugin.containerDriverRoot", "\"/y\""},
    {"MPS_ROOT", "/run/nvidia/mps", "flags.mpsRoot", "\"/run/nvidia/mps\""},
    {"SHARED_DEVICES_ALLOCATION_POLICY", "packed", "flags.plugin.sharedDevicesAllocationPolicy",
     "\"packed\""},
    {"DEVICE_DISCOVERY_STRATEGY", "tegra", "flags.deviceDiscoveryStrategy", "\"tegra\""},
    {"IMEX_CHANNEL_IDS", "0", "imex.channelIDs", "[0]"},
    {"IMEX_REQUIRED", "true", "imex.required", "true"},
    {"KUBELET_SOCKET", "/k.sock", "flags.plugin.kubeletSocket", "\"/k.sock\""},
    {"KUBELET_SOCKET", "", "flags.plugin.kubeletSocket", "\"\""}, /* "" = never register */
    {"CDI_SPEC_DIR", "/run/cdi", "flags.plugin.cdiSpecDir", "\"/run/cdi\""},
    {"CDI_FEATURE_FLAGS", "a,b", "flags.plugin.cdiFeatureFlags", "[\"a\",\"b\"]"},
    {"CDI_DISABLE_HOOKS", "all", "flags.plugin.cdiDisableHooks", "[\"all\"]"},
    {"DP_DISABLE_HEALTHCHECKS", "all", "health.enabled", "false"},
    {"DP_DISABLE_HEALTHCHECKS", "XIDs", "health.enabled", "false"},
    {"DP_DISABLE_HEALTHCHECKS", "79, 94", "health.ignoredXids", "[13,31,43,45,68,79,94,109]"},
    {"DP_ENABLE_HEALTHCHECKS", "109,13", "health.ignoredXids", "[31,43,45,68]"},
    {"DP_ENABLE_HEALTHCHECKS", "ALL", "health.ignoredXids", "[]"},
    {"DP_ENABLE_HEALTHCHECKS", "all", "health.enabled", "true"},
};

static void test_every_env(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(env_cases) / sizeof(env_cases[0]); i++) {
        const struct env_case *c = &env_cases[i];
        struct dp_config cfg;
        struct diag d;
        assert_int_equal(setenv(c->var, c->value, 1), 0);
        int r = parse(&cfg, &d, ARGS(NULL));
        unsetenv(c->var);
        if (r < 0)
            print_error("case %zu: %s\n", i, d.msg);
        assert_int_equal(r, 0);
        test_assert_json_at(&cfg, c->path, c->json);
        dp_config_release(&cfg);
    }
}

/* NVIDIA_CDI_HOOK_PATH is read before its older name NVIDIA_CTK_PATH. */
static void test_env_alias_order(void **state)
{
    struct dp_config cfg;
    struct diag d;
    (void)state;
    setenv("NVIDIA_CDI_HOOK_PATH", "/new", 1);
    setenv("NVIDIA_CTK_PATH", "/old", 1);
    assert_int_equal(parse(&cfg, &d, ARGS(NULL)), 0);
    test_clear_env();
    assert_string_equal(cfg.nvidia_cdi_hook_path, "/new");
    dp_config_release(&cfg);
}

/* NVIDIA: DP_ENABLE_HEALTHCHECKS numbers win over DP_DISABLE_HEALTHCHECKS numbers, but "all" in
 * DP_DISABLE_HEALTHCHECKS turns the checker off whatever DP_ENABLE_HEALTHCHECKS says (v0.20.0).
 * Malformed entries are skipped with a warning for the daemon to log. */
static void test_healthcheck_env(void **state)
{
    struct dp_config cfg;
    struct diag d;
    (void)state;
    setenv("DP_DISABLE_HEALTHCHECKS", "79,94,x", 1);
    setenv("DP_ENABLE_HEALTHCHECKS", "94,13,2000", 1);
    assert_int_equal(parse(&cfg, &d, ARGS(NULL)), 0);
    assert_true(cfg.health.enabled);
    assert_true(dp_health_xid_ignored(&cfg.health, 79));
    assert_false(dp_health_xid_ignored(&cfg.health, 94));
    assert_false(dp_health_xid_ignored(&cfg.health, 13));
    assert_string_equal(cfg.warnings[0],
                        "DP_DISABLE_HEALTHCHECKS: ignoring \"x\": want all, xids or an XID from 1 "
                        "to 1023");
    assert_string_equal(cfg.warnings[1],
                        "DP_ENABLE_HEALTHCHECKS: ignoring \"2000\": want all or an XID from 1 to "
                        "1023");
    assert_null(cfg.warnings[2]);
    dp_config_release(&cfg);

    setenv("DP_DISABLE_HEALTHCHECKS", "all", 1);
    setenv("DP_ENABLE_HEALTHCHECKS", "79", 1);
    assert_int_equal(parse(&cfg, &d, ARGS(NULL)), 0);
    assert_false(cfg.health.enabled);
    dp_config_release(&cfg);
    test_clear_env();
}

/* A scratch config file; the caller unlinks and frees the path. */
static char *write_config(const char *text)
{
    char *path = strdup("/tmp/test-dp-flags-XXXXXX");
    assert_non_null(path);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    assert_int_equal(close(fd), 0);
    return path;
}

/* flag > env > file > default, one setting at a time and for the health variables. */
static void test_precedence(void **state)
{
    struct dp_config cfg;
    struct diag d;
    char *file = write_config("flags:\n  migStrategy: single\n  plugin:\n"
                              "    deviceListStrategy: [volume-mounts]\n"
                              "health:\n  ignoredXids: [13]\n");
    char arg[256];
    (void)state;
    snprintf(arg, sizeof(arg), "--config-file=%s", file);

    /* default */
    assert_int_equal(parse(&cfg, &d, ARGS("--mig-strategy=none")), 0);
    dp_config_release(&cfg);
    assert_int_equal(parse(&cfg, &d, ARGS(NULL)), 0);
    assert_int_equal(cfg.mig_strategy, DP_MIG_NONE);
    assert_null(cfg.config_file);
    dp_config_release(&cfg);
    /* file over default */
    assert_int_equal(parse(&cfg, &d, ARGS(arg)), 0);
    assert_int_equal(cfg.mig_strategy, DP_MIG_SINGLE);
    assert_int_equal(cfg.device_list_strategy, DP_LIST_VOLUME_MOUNTS);
    assert_string_equal(cfg.config_file, file);
    dp_config_release(&cfg);
    /* env over file */
    setenv("MIG_STRATEGY", "mixed", 1);
    setenv("DP_DISABLE_HEALTHCHECKS", "79", 1);
    assert_int_equal(parse(&cfg, &d, ARGS(arg)), 0);
    assert_int_equal(cfg.mig_strategy, DP_MIG_MIXED);
    assert_int_equal(cfg.device_list_strategy, DP_LIST_VOLUME_MOUNTS);
    test_assert_json_at(&cfg, "health.ignoredXids", "[13,79]");
    dp_config_release(&cfg);
    /* flag over env */
    assert_int_equal(parse(&cfg, &d, ARGS(arg, "--mig-strategy", "none")), 0);
    assert_int_equal(cfg.mig_strategy, DP_MIG_NONE);
    dp_config_release(&cfg);
    /* the flag wins even when it comes before the config file on the command line */
    assert_int_equal(parse(&cfg, &d, ARGS("--mig-strategy=none", arg)), 0);
    assert_int_equal(cfg.mig_strategy, DP_MIG_NONE);
    dp_config_release(&cfg);
    test_clear_env();
    unlink(file);
    free(file);
}

/* CONFIG_FILE names the file; --config-file wins over it; an empty name means no file. */
static void test_config_file_sources(void **state)
{
    struct dp_config cfg;
    struct diag d;
    char *single = write_config("flags: {migStrategy: single}\n");
    char *mixed = write_config("flags: {migStrategy: mixed}\n");
    char arg[256];
    (void)state;
    setenv("CONFIG_FILE", single, 1);
    assert_int_equal(parse(&cfg, &d, ARGS(NULL)), 0);
    assert_int_equal(cfg.mig_strategy, DP_MIG_SINGLE);
    dp_config_release(&cfg);
    snprintf(arg, sizeof(arg), "--config-file=%s", mixed);
    assert_int_equal(parse(&cfg, &d, ARGS(arg)), 0);
    assert_int_equal(cfg.mig_strategy, DP_MIG_MIXED);
    dp_config_release(&cfg);
    assert_int_equal(parse(&cfg, &d, ARGS("--config-file=")), 0);
    assert_int_equal(cfg.mig_strategy, DP_MIG_NONE);
    assert_null(cfg.config_file);
    dp_config_release(&cfg);
    test_clear_env();
    unlink(single);
    unlink(mixed);
    free(single);
    free(mixed);
}

struct bad_case {
    const char *env; /* "VAR=value", or NULL */
    const char *args[4];
    int err;
    const char *msg;
};

static const struct bad_case bad_cases[] = {
    {NULL,
     {"--mig-strategy", "foo"},
     -EBADMSG,
     "--mig-strategy: invalid value \"foo\": want none, single or mixed"},
    {"MIG_STRATEGY=foo",
     {NULL},
     -EBADMSG,
     "MIG_STRATEGY: invalid value \"foo\": want none, single or mixed"},
    /* a good flag does not hide a bad variable: NVIDIA fails on both */
    {"MIG_STRATEGY=foo",
     {"--mig-strategy=none"},
     -EBADMSG,
     "MIG_STRATEGY: invalid value \"foo\": want none, single or mixed"},
    {NULL,
     {"--device-list-strategy=envvar,cdi"},
     -EBADMSG,
     "--device-list-strategy: invalid value \"cdi\": want envvar, volume-mounts, cdi-annotations "
     "or cdi-cri"},
    {NULL,
     {"--device-list-strategy="},
     -EBADMSG,
     "--device-list-strategy: want at least one of envvar, volume-mounts, cdi-annotations or "
     "cdi-cri"},
    {"DEVICE_LIST_STRATEGY=nope",
     {NULL},
     -EBADMSG,
     "DEVICE_LIST_STRATEGY: invalid value \"nope\": want envvar, volume-mounts, cdi-annotations "
     "or cdi-cri"},
    {NULL,
     {"--device-id-strategy=serial"},
     -EBADMSG,
     "--device-id-strategy: invalid value \"serial\": want uuid or index"},
    {"DEVICE_ID_STRATEGY=UUID",
     {NULL},
     -EBADMSG,
     "DEVICE_ID_STRATEGY: invalid value \"UUID\": want uuid or index"},
    {NULL,
     {"--pass-device-specs=yes"},
     -EBADMSG,
     "--pass-device-specs: invalid value \"yes\": want true or false"},
    {"PASS_DEVICE_SPECS=on",
     {NULL},
     -EBADMSG,
     "PASS_DEVICE_SPECS: invalid value \"on\": want true or false"},
    {NULL,
     {"--fail-on-init-error="},
     -EBADMSG,
     "--fail-on-init-error: invalid value \"\": want true or false"},
    {NULL,
     {"--shared-devices-allocation-policy", "spread"},
     -EBADMSG,
     "--shared-devices-allocation-policy: invalid value \"spread\": want distributed or packed"},
    {"DEVICE_DISCOVERY_STRATEGY=wsl",
     {NULL},
     -EBADMSG,
     "DEVICE_DISCOVERY_STRATEGY: invalid value \"wsl\": want auto, nvml or tegra"},
    {NULL,
     {"--imex-channel-ids=0,1"},
     -EBADMSG,
     "--imex-channel-ids: invalid value \"0,1\": the only valid channel lists are [] and [0]"},
    {"IMEX_CHANNEL_IDS=x",
     {NULL},
     -EBADMSG,
     "IMEX_CHANNEL_IDS: invalid value \"x\": the only valid channel lists are [] and [0]"},
    /* an alias is reported as written */
    {NULL,
     {"--nvidia-ctk-path"},
     -EINVAL,
     "missing value for option \"--nvidia-ctk-path\" (see 'gpuplane device-plugin --help')"},
    /* usage errors */
    {NULL,
     {"--no-such-flag"},
     -EINVAL,
     "unknown option \"--no-such-flag\" (see 'gpuplane device-plugin --help')"},
    {NULL,
     {"--mig-strategy"},
     -EINVAL,
     "missing value for option \"--mig-strategy\" (see 'gpuplane device-plugin --help')"},
    {NULL,
     {"--pass-device-specs", "false"},
     -EINVAL,
     "unexpected argument \"false\" (see 'gpuplane device-plugin --help')"},
    {NULL,
     {"extra"},
     -EINVAL,
     "unexpected argument \"extra\" (see 'gpuplane device-plugin --help')"},
    {NULL,
     {"--print-config=yes"},
     -EINVAL,
     "unknown option \"--print-config=yes\" (see 'gpuplane device-plugin --help')"},
    /* a missing config file, and cross-setting checks */
    {NULL, {"--config-file=/nonexistent/dp.yaml"}, -ENOENT, "/nonexistent/dp.yaml"},
    {"MPS_ROOT=", {"--mig-strategy=mixed"}, 0, ""},
};

static void test_bad_values(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const struct bad_case *c = &bad_cases[i];
        struct dp_config cfg;
        struct diag d;
        char var[64];
        if (c->env) {
            snprintf(var, sizeof(var), "%.*s", (int)(strchr(c->env, '=') - c->env), c->env);
            assert_int_equal(setenv(var, strchr(c->env, '=') + 1, 1), 0);
        }
        int r = parse(&cfg, &d, c->args);
        if (c->env)
            unsetenv(var);
        if (r != c->err || strstr(d.msg, c->msg) != d.msg)
            print_error("case %zu: got %d \"%s\"\n", i, r, d.msg);
        assert_int_equal(r, c->err);
        /* the file name starts the message of a missing file; the rest is strerror's */
        assert_ptr_equal(strstr(d.msg, c->msg), d.msg);
        if (c->err != -ENOENT)
            assert_string_equal(d.msg, c->msg);
        dp_config_release(&cfg);
    }
}

/* An invalid config file comes back as -EBADMSG (exit 1) with file:line:col. */
static void test_bad_file(void **state)
{
    struct dp_config cfg;
    struct diag d;
    char *file = write_config("version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                              "    - name: gpu\n      replicas: 0\n");
    char want[512];
    (void)state;
    setenv("CONFIG_FILE", file, 1);
    assert_int_equal(parse(&cfg, &d, ARGS(NULL)), -EBADMSG);
    snprintf(want, sizeof(want), "%s:6:17: \"replicas\": 0 is out of range [1, 1024]", file);
    assert_string_equal(d.msg, want);
    dp_config_release(&cfg);
    /* the start-up checks run on the merged result */
    test_clear_env();
    unlink(file);
    free(file);
    file = write_config("sharing:\n  mps:\n    resources:\n    - {name: gpu, replicas: 2}\n");
    setenv("CONFIG_FILE", file, 1);
    assert_int_equal(parse(&cfg, &d, ARGS(NULL)), -EBADMSG);
    assert_non_null(strstr(d.msg, "sharing.mps needs an MPS root"));
    dp_config_release(&cfg);
    assert_int_equal(parse(&cfg, &d, ARGS("--mps-root=/run/nvidia/mps")), 0);
    dp_config_release(&cfg);
    setenv("MPS_ROOT", "/m", 1);
    assert_int_equal(parse(&cfg, &d, ARGS("--mig-strategy=mixed")), -EBADMSG);
    assert_string_equal(d.msg, "sharing.mps is not supported with mig strategy \"mixed\"");
    dp_config_release(&cfg);
    test_clear_env();
    unlink(file);
    free(file);
}

static void test_common_options(void **state)
{
    struct dp_config cfg;
    struct diag d;
    (void)state;
    assert_int_equal(parse(&cfg, &d, ARGS("-v=3", "--log-format", "json", "--print-config")), 0);
    assert_int_equal(cfg.common.verbosity, 3);
    assert_int_equal(cfg.common.log_format, LOG_FORMAT_JSON);
    assert_true(cfg.print_config);
    dp_config_release(&cfg);
    assert_int_equal(parse(&cfg, &d, ARGS("--mock", "dgx-h100", "-v", "2")), 0);
    assert_string_equal(cfg.common.mock, "dgx-h100");
    assert_int_equal(cfg.common.verbosity, 2);
    dp_config_release(&cfg);
    /* --help stops before the environment and the file are read */
    setenv("MIG_STRATEGY", "bogus", 1);
    assert_int_equal(parse(&cfg, &d, ARGS("--help")), 0);
    assert_true(cfg.common.help);
    dp_config_release(&cfg);
    assert_int_equal(parse(&cfg, &d, ARGS("-h")), 0);
    assert_true(cfg.common.help);
    dp_config_release(&cfg);
    test_clear_env();
}

static void test_help_lists_every_flag(void **state)
{
    char *text = NULL;
    size_t len = 0;
    (void)state;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    dp_config_print_help(f);
    assert_int_equal(fclose(f), 0);
    for (size_t i = 0; i < dp_n_settings; i++) {
        char want[128];
        if (dp_settings[i].flag) {
            snprintf(want, sizeof(want), "--%s", dp_settings[i].flag);
            assert_non_null(strstr(text, want));
        }
        if (dp_settings[i].env) {
            assert_non_null(strstr(text, dp_settings[i].env));
        }
    }
    assert_non_null(strstr(text, "--print-config"));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_every_flag, test_setup_env),
        cmocka_unit_test_setup(test_table_flags_reachable, test_setup_env),
        cmocka_unit_test_setup(test_every_env, test_setup_env),
        cmocka_unit_test_setup(test_env_alias_order, test_setup_env),
        cmocka_unit_test_setup(test_healthcheck_env, test_setup_env),
        cmocka_unit_test_setup(test_precedence, test_setup_env),
        cmocka_unit_test_setup(test_config_file_sources, test_setup_env),
        cmocka_unit_test_setup(test_bad_values, test_setup_env),
        cmocka_unit_test_setup(test_bad_file, test_setup_env),
        cmocka_unit_test_setup(test_common_options, test_setup_env),
        cmocka_unit_test_setup(test_help_lists_every_flag, test_setup_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
