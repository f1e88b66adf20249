/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The table that names each setting as a flag, an environment variable and a config-file key, the
 * names of the enum values, and the text form every source is reduced to: dp_setting_apply() parses
 * a setting as a flag or a variable gives it (Go's forms: ParseBool, comma-separated lists).
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dp-config-internal.h"

static_assert(sizeof(enum dp_mig_strategy) == sizeof(int), "enum fields are written as int");

static const char *const mig_names[] = {"none", "single", "mixed", NULL};
static const char *const id_names[] = {"uuid", "index", NULL};
static const char *const policy_names[] = {"distributed", "packed", NULL};
static const char *const discovery_names[] = {"auto", "nvml", "tegra", NULL};
/* In DP_LIST_* bit order. */
const char *const dp_list_names[] = {"envvar", "volume-mounts", "cdi-annotations", "cdi-cri", NULL};

/* ---- small helpers ---- */

static int name_index(const char *const *names, const char *s)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -1;
}

/* "a, b or c" */
static void want_text(const char *const *names, char *buf, size_t size)
{
    size_t n = 0, len = 0;
    while (names[n])
        n++;
    buf[0] = '\0';
    for (size_t i = 0; i < n && len < size; i++) {
        const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
        int w = snprintf(buf + len, size - len, "%s%s", sep, names[i]);
        if (w < 0)
            return;
        len += (size_t)w;
    }
}

int dp_fail_enum(const char *const *names, const char *value, char *why, size_t why_size)
{
    char want[128];
    want_text(names, want, sizeof(want));
    snprintf(why, why_size, "invalid value \"%s\": want %s", value, want);
    return -EINVAL;
}

/* Splits "a, b,,c" into {"a", "b", "c"}: items are trimmed, empty ones dropped, as Go's flag
 * library does for string-slice environment variables. The caller frees *ret. */
static int split_list(const char *value, char ***ret)
{
    char **v = calloc(1, sizeof(char *));
    if (!v)
        return -ENOMEM;
    for (const char *p = value; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *s = p;
        while (len > 0 && isspace((unsigned char)*s)) {
            s++;
            len--;
        }
        while (len > 0 && isspace((unsigned char)s[len - 1]))
            len--;
        if (len > 0 && dp_strv_push(&v, s, len) < 0) {
            dp_strv_free(v);
            return -ENOMEM;
        }
        p = end ? end + 1 : p + strlen(p);
    }
    *ret = v;
    return 0;
}

/* Go's strconv.ParseBool, which NVIDIA's flags and variables go through. */
int dp_parse_bool(const char *s, bool *ret)
{
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True", NULL};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False", NULL};
    if (name_index(yes, s) >= 0) {
        *ret = true;
        return 0;
    }
    if (name_index(no, s) >= 0) {
        *ret = false;
        return 0;
    }
    return -EINVAL;
}

/* A decimal number without sign or junk, at most max. */
static int parse_uint(const char *s, unsigned long max, unsigned long *ret)
{
    if (!isdigit((unsigned char)s[0]))
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v > max)
        return -EINVAL;
    *ret = v;
    return 0;
}

/* ---- enum names ---- */

const char *dp_mig_strategy_to_string(enum dp_mig_strategy s)
{
    return (unsigned)s < ARRAY_SIZE(mig_names) - 1 ? mig_names[s] : "?";
}

const char *dp_id_strategy_to_string(enum dp_id_strategy s)
{
    return (unsigned)s < ARRAY_SIZE(id_names) - 1 ? id_names[s] : "?";
}

const char *dp_alloc_policy_to_string(enum dp_alloc_policy p)
{
    return (unsigned)p < ARRAY_SIZE(policy_names) - 1 ? policy_names[p] : "?";
}

const char *dp_discovery_to_string(enum dp_discovery s)
{
    return (unsigned)s < ARRAY_SIZE(discovery_names) - 1 ? discovery_names[s] : "?";
}

static int enum_from_string(const char *const *names, const char *s, int *ret)
{
    int i = name_index(names, s);
    if (i < 0)
        return -EINVAL;
    *ret = i;
    return 0;
}

int dp_mig_strategy_from_string(const char *s, enum dp_mig_strategy *ret)
{
    int v;
    int r = enum_from_string(mig_names, s, &v);
    if (r >= 0)
        *ret = (enum dp_mig_strategy)v;
    return r;
}

int dp_id_strategy_from_string(const char *s, enum dp_id_strategy *ret)
{
    int v;
    int r = enum_from_string(id_names, s, &v);
    if (r >= 0)
        *ret = (enum dp_id_strategy)v;
    return r;
}

int dp_alloc_policy_from_string(const char *s, enum dp_alloc_policy *ret)
{
    int v;
    int r = enum_from_string(policy_names, s, &v);
    if (r >= 0)
        *ret = (enum dp_alloc_policy)v;
    return r;
}

int dp_discovery_from_string(const char *s, enum dp_discovery *ret)
{
    int v;
    int r = enum_from_string(discovery_names, s, &v);
    if (r >= 0)
        *ret = (enum dp_discovery)v;
    return r;
}

int dp_list_strategy_from_string(const char *s, unsigned *ret)
{
    int i = name_index(dp_list_names, s);
    if (i < 0)
        return -EINVAL;
    *ret = 1u << i;
    return 0;
}

/* ---- settings from text ---- */

static int apply_strings(char ***field, const char *value)
{
    char **v = NULL;
    int r = split_list(value, &v);
    if (r < 0)
        return r;
    dp_strv_free(*field);
    *field = v;
    return 0;
}

static int apply_list_strategy(struct dp_config *cfg, const char *value, char *why, size_t why_size)
{
    char **v = NULL;
    unsigned bits = 0;
    int r = split_list(value, &v);
    if (r < 0)
        return r;
    for (size_t i = 0; v[i] && r >= 0; i++) {
        unsigned bit;
        r = dp_list_strategy_from_string(v[i], &bit);
        if (r < 0)
            dp_fail_enum(dp_list_names, v[i], why, why_size);
        bits |= r >= 0 ? bit : 0;
    }
    if (r >= 0 && !bits) {
        char want[128];
        want_text(dp_list_names, want, sizeof(want));
        snprintf(why, why_size, "want at least one of %s", want);
        r = -EINVAL;
    }
    dp_strv_free(v);
    if (r >= 0)
        cfg->device_list_strategy = bits;
    return r;
}

/* NVIDIA supports one IMEX channel, 0: the only valid lists are [] and [0]. */
static int apply_channels(struct dp_config *cfg, const char *value, char *why, size_t why_size)
{
    char **v = NULL;
    int r = split_list(value, &v);
    if (r < 0)
        return r;
    size_t n = dp_strv_len(v);
    unsigned long id = 0;
    if (n > 1 || (n == 1 && (parse_uint(v[0], UINT32_MAX, &id) < 0 || id != 0))) {
        snprintf(why, why_size, "invalid value \"%s\": the only valid channel lists are [] and [0]",
                 value);
        dp_strv_free(v);
        return -EINVAL;
    }
    dp_strv_free(v);
    unsigned *ids = n ? calloc(1, sizeof(unsigned)) : NULL;
    if (n && !ids)
        return -ENOMEM;
    free(cfg->imex_channel_ids);
    cfg->imex_channel_ids = ids;
    cfg->n_imex_channel_ids = n;
    return 0;
}

/* DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS, NVIDIA's semantics (§1.8): malformed entries
 * are skipped, as NVIDIA does, with a warning for the daemon to log. */
static void apply_xids(struct dp_config *cfg, const char *var, const char *value, bool disable)
{
    char **v = NULL;
    if (split_list(value, &v) < 0) {
        dp_config_warn(cfg, "%s: out of memory, ignored", var);
        return;
    }
    for (size_t i = 0; v[i]; i++) {
        unsigned long xid;
        bool all = strcasecmp(v[i], "all") == 0;
        if (disable && (all || strcasecmp(v[i], "xids") == 0))
            cfg->health.enabled = false;
        else if (all)
            dp_xid_set_all(&cfg->health, false);
        else if (parse_uint(v[i], DP_XID_MAX, &xid) == 0 && xid > 0)
            dp_xid_set(&cfg->health, (unsigned)xid, disable);
        else
            dp_config_warn(cfg, "%s: ignoring \"%s\": want all%s or an XID from 1 to %d", var, v[i],
                           disable ? ", xids" : "", DP_XID_MAX);
    }
    dp_strv_free(v);
}

int dp_setting_apply(const struct dp_setting *s, struct dp_config *cfg, const char *value,
                     char *why, size_t why_size)
{
    int i;
    why[0] = '\0';
    switch (s->kind) {
    case DP_KIND_BOOL:
        if (dp_parse_bool(value, DP_FIELD(cfg, s, bool)) == 0)
            return 0;
        snprintf(why, why_size, "invalid value \"%s\": want true or false", value);
        return -EINVAL;
    case DP_KIND_STRING:
        return dp_set_string(DP_FIELD(cfg, s, char *), value);
    case DP_KIND_ENUM:
        if (enum_from_string(s->names, value, &i) < 0)
            return dp_fail_enum(s->names, value, why, why_size);
        *DP_FIELD(cfg, s, int) = i;
        return 0;
    case DP_KIND_STRINGS:
        return apply_strings(DP_FIELD(cfg, s, char **), value);
    case DP_KIND_LIST_STRATEGY:
        return apply_list_strategy(cfg, value, why, why_size);
    case DP_KIND_CHANNELS:
        return apply_channels(cfg, value, why, why_size);
    case DP_KIND_XIDS:
        apply_xids(cfg, s->env, value, s->offset == 0);
        return 0;
    }
    return -EINVAL;
}

/* ---- the table ---- */

#define OFF(field) offsetof(struct dp_config, field)

const struct dp_setting dp_settings[] = {
    {"mig-strategy", NULL, "MIG_STRATEGY", NULL, "flags.migStrategy", DP_KIND_ENUM,
     OFF(mig_strategy), mig_names, "how MIG devices are exposed: none, single or mixed"},
    {"fail-on-init-error", NULL, "FAIL_ON_INIT_ERROR", NULL, "flags.failOnInitError", DP_KIND_BOOL,
     OFF(fail_on_init_error), NULL, "fail when NVML cannot be initialised (default true)"},
    {"driver-root", "nvidia-driver-root", "NVIDIA_DRIVER_ROOT", NULL, "flags.nvidiaDriverRoot",
     DP_KIND_STRING, OFF(driver_root), NULL,
     "root of the driver installation (default /; with --mock, the simulated node's own)"},
    {"dev-root", "nvidia-dev-root", "NVIDIA_DEV_ROOT", NULL, "flags.nvidiaDevRoot", DP_KIND_STRING,
     OFF(dev_root), NULL, "root of the /dev tree (default: the driver root)"},
    {"pass-device-specs", NULL, "PASS_DEVICE_SPECS", NULL, "flags.plugin.passDeviceSpecs",
     DP_KIND_BOOL, OFF(pass_device_specs), NULL, "return DeviceSpecs from Allocate"},
    {"device-list-strategy", NULL, "DEVICE_LIST_STRATEGY", NULL, "flags.plugin.deviceListStrategy",
     DP_KIND_LIST_STRATEGY, OFF(device_list_strategy), NULL,
     "envvar, volume-mounts, cdi-annotations, cdi-cri (comma list)"},
    {"device-id-strategy", NULL, "DEVICE_ID_STRATEGY", NULL, "flags.plugin.deviceIDStrategy",
     DP_KIND_ENUM, OFF(device_id_strategy), id_names, "uuid or index"},
    {"gdrcopy-enabled", NULL, "GDRCOPY_ENABLED", NULL, "flags.gdrcopyEnabled", DP_KIND_BOOL,
     OFF(gdrcopy_enabled), NULL, "expose GDRCopy to containers"},
    {"gds-enabled", NULL, "GDS_ENABLED", NULL, "flags.gdsEnabled", DP_KIND_BOOL, OFF(gds_enabled),
     NULL, "expose GPUDirect Storage to containers"},
    {"mofed-enabled", NULL, "MOFED_ENABLED", NULL, "flags.mofedEnabled", DP_KIND_BOOL,
     OFF(mofed_enabled), NULL, "expose MOFED to containers"},
    {"cdi-annotation-prefix", NULL, "CDI_ANNOTATION_PREFIX", NULL,
     "flags.plugin.cdiAnnotationPrefix", DP_KIND_STRING, OFF(cdi_annotation_prefix), NULL,
     "prefix of CDI annotations (default cdi.k8s.io/)"},
    {"nvidia-cdi-hook-path", "nvidia-ctk-path", "NVIDIA_CDI_HOOK_PATH", "NVIDIA_CTK_PATH",
     "flags.plugin.nvidiaCTKPath", DP_KIND_STRING, OFF(nvidia_cdi_hook_path), NULL,
     "the CDI hook in generated specs (default /usr/bin/nvidia-ctk)"},
    {"driver-root-ctr-path", "container-driver-root", "DRIVER_ROOT_CTR_PATH",
     "CONTAINER_DRIVER_ROOT", "flags.plugin.containerDriverRoot", DP_KIND_STRING,
     OFF(container_driver_root), NULL, "the driver root inside this container (/driver-root)"},
    {"mps-root", NULL, "MPS_ROOT", NULL, "flags.mpsRoot", DP_KIND_STRING, OFF(mps_root), NULL,
     "MPS pipe and shm root (required with sharing.mps)"},
    {"shared-devices-allocation-policy", NULL, "SHARED_DEVICES_ALLOCATION_POLICY", NULL,
     "flags.plugin.sharedDevicesAllocationPolicy", DP_KIND_ENUM, OFF(shared_alloc_policy),
     policy_names, "distributed or packed"},
    {"device-discovery-strategy", NULL, "DEVICE_DISCOVERY_STRATEGY", NULL,
     "flags.deviceDiscoveryStrategy", DP_KIND_ENUM, OFF(discovery_strategy), discovery_names,
     "auto, nvml or tegra"},
    {"imex-channel-ids", NULL, "IMEX_CHANNEL_IDS", NULL, "imex.channelIDs", DP_KIND_CHANNELS, 0,
     NULL, "IMEX channels to inject: empty or 0"},
    {"imex-required", NULL, "IMEX_REQUIRED", NULL, "imex.required", DP_KIND_BOOL,
     OFF(imex_required), NULL, "fail when an IMEX channel is missing"},
    {"kubelet-socket", NULL, "KUBELET_SOCKET", NULL, "flags.plugin.kubeletSocket", DP_KIND_STRING,
     OFF(kubelet_socket), NULL, "the kubelet's socket; plugin sockets go in its directory"},
    {"cdi-spec-dir", NULL, "CDI_SPEC_DIR", NULL, "flags.plugin.cdiSpecDir", DP_KIND_STRING,
     OFF(cdi_spec_dir), NULL, "where the CDI specs of cdi-* strategies go (/var/run/cdi)"},
    {"config-file", NULL, "CONFIG_FILE", NULL, NULL, DP_KIND_STRING, OFF(config_file), NULL,
     "the config file (version: v1)"},
    {"cdi-feature-flags", NULL, "CDI_FEATURE_FLAGS", NULL, "flags.plugin.cdiFeatureFlags",
     DP_KIND_STRINGS, OFF(cdi_feature_flags), NULL, "feature flags for CDI spec generation"},
    {"cdi-disable-hooks", NULL, "CDI_DISABLE_HOOKS", NULL, "flags.plugin.cdiDisableHooks",
     DP_KIND_STRINGS, OFF(cdi_disable_hooks), NULL, "hooks left out of CDI specs (all = none)"},
    /* Disable before enable: DP_ENABLE_HEALTHCHECKS overrides DP_DISABLE_HEALTHCHECKS numbers.
     * offset 0 = disable, 1 = enable. */
    {NULL, NULL, "DP_DISABLE_HEALTHCHECKS", NULL, NULL, DP_KIND_XIDS, 0, NULL, NULL},
    {NULL, NULL, "DP_ENABLE_HEALTHCHECKS", NULL, NULL, DP_KIND_XIDS, 1, NULL, NULL},
};

const size_t dp_n_settings = ARRAY_SIZE(dp_settings);
static_assert(ARRAY_SIZE(dp_settings) <= DP_SETTINGS_MAX, "raise DP_SETTINGS_MAX");
