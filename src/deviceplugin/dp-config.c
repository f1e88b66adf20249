/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The device plugin's settings: their defaults, the table that names each one as a flag, an
 * environment variable and a config-file key, the text form every source is reduced to, the strict
 * loader of NVIDIA's `version: v1` config file (with gpuplane's health section and per-GPU
 * replicas), the checks NVIDIA makes at start-up, and the JSON rendering for --print-config.
 * Command-line and environment handling is in dp-flags.c.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dp-config.h"

static_assert(sizeof(enum dp_mig_strategy) == sizeof(int), "enum fields are written as int");

#define DEFAULT_KUBELET_SOCKET "/var/lib/kubelet/device-plugins/kubelet.sock"
#define WHY_MAX 256

/* NVIDIA's default ignored XIDs (§1.8): application faults and recoverable engine errors. */
static const unsigned default_ignored_xids[] = {13, 31, 43, 45, 68, 109};

static const char *const mig_names[] = {"none", "single", "mixed", NULL};
static const char *const id_names[] = {"uuid", "index", NULL};
static const char *const policy_names[] = {"distributed", "packed", NULL};
static const char *const discovery_names[] = {"auto", "nvml", "tegra", NULL};
/* In DP_LIST_* bit order. */
static const char *const list_names[] = {"envvar", "volume-mounts", "cdi-annotations", "cdi-cri",
                                         NULL};

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

static int fail_enum(const char *const *names, const char *value, char *why, size_t why_size)
{
    char want[128];
    want_text(names, want, sizeof(want));
    snprintf(why, why_size, "invalid value \"%s\": want %s", value, want);
    return -EINVAL;
}

static int set_string(char **field, const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return -ENOMEM;
    free(*field);
    *field = copy;
    return 0;
}

static char **strv_free(char **v)
{
    if (v)
        for (size_t i = 0; v[i]; i++)
            free(v[i]);
    free(v);
    return NULL;
}

static size_t strv_len(char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

/* Appends a copy of s[0..len) to the NULL-terminated *v. */
static int strv_push(char ***v, const char *s, size_t len)
{
    size_t n = strv_len(*v);
    char **nv = realloc(*v, (n + 2) * sizeof(char *));
    if (!nv)
        return -ENOMEM;
    *v = nv;
    nv[n] = strndup(s, len);
    nv[n + 1] = NULL;
    return nv[n] ? 0 : -ENOMEM;
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
        if (len > 0 && strv_push(&v, s, len) < 0) {
            strv_free(v);
            return -ENOMEM;
        }
        p = end ? end + 1 : p + strlen(p);
    }
    *ret = v;
    return 0;
}

static void add_warning(struct dp_config *cfg, const char *fmt, ...) _printf_(2, 3);
static void add_warning(struct dp_config *cfg, const char *fmt, ...)
{
    char msg[WHY_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* A warning lost to a failed allocation is not worth failing the configuration for. */
    (void)!strv_push(&cfg->warnings, msg, strlen(msg));
}

/* Go's strconv.ParseBool, which NVIDIA's flags and variables go through. */
static int parse_bool(const char *s, bool *ret)
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
    int i = name_index(list_names, s);
    if (i < 0)
        return -EINVAL;
    *ret = 1u << i;
    return 0;
}

/* ---- health ---- */

static void xid_set(struct dp_health *h, unsigned xid, bool ignored)
{
    uint64_t bit = (uint64_t)1 << (xid % 64);
    if (ignored)
        h->ignored[xid / 64] |= bit;
    else
        h->ignored[xid / 64] &= ~bit;
}

static void xid_set_all(struct dp_health *h, bool ignored)
{
    for (unsigned x = 1; x <= DP_XID_MAX; x++)
        xid_set(h, x, ignored);
}

bool dp_health_xid_ignored(const struct dp_health *h, unsigned long long xid)
{
    if (xid < 1 || xid > DP_XID_MAX)
        return false;
    return h->ignored[xid / 64] & ((uint64_t)1 << (xid % 64));
}

static bool xid_all_ignored(const struct dp_health *h)
{
    for (unsigned x = 1; x <= DP_XID_MAX; x++)
        if (!dp_health_xid_ignored(h, x))
            return false;
    return true;
}

/* ---- lifecycle ---- */

int dp_config_init(struct dp_config *cfg)
{
    *cfg = (struct dp_config){
        .fail_on_init_error = true,
        .device_list_strategy = DP_LIST_ENVVAR,
        .health = {.enabled = true, .probe_interval_ms = 5000, .recovery_window_ms = 60000},
    };
    cli_common_init(&cfg->common);
    for (size_t i = 0; i < ARRAY_SIZE(default_ignored_xids); i++)
        xid_set(&cfg->health, default_ignored_xids[i], true);
    cfg->driver_root = strdup("/");
    cfg->dev_root = strdup("");
    cfg->cdi_annotation_prefix = strdup("cdi.k8s.io/");
    cfg->nvidia_cdi_hook_path = strdup("/usr/bin/nvidia-ctk");
    cfg->container_driver_root = strdup("/driver-root");
    cfg->mps_root = strdup("");
    cfg->kubelet_socket = strdup(DEFAULT_KUBELET_SOCKET);
    cfg->cdi_spec_dir = strdup("/var/run/cdi");
    cfg->cdi_feature_flags = calloc(1, sizeof(char *));
    cfg->cdi_disable_hooks = calloc(1, sizeof(char *));
    cfg->warnings = calloc(1, sizeof(char *));
    if (!cfg->driver_root || !cfg->dev_root || !cfg->cdi_annotation_prefix ||
        !cfg->nvidia_cdi_hook_path || !cfg->container_driver_root || !cfg->mps_root ||
        !cfg->kubelet_socket || !cfg->cdi_spec_dir || !cfg->cdi_feature_flags ||
        !cfg->cdi_disable_hooks || !cfg->warnings)
        return -ENOMEM;
    return 0;
}

static void patterns_free(struct dp_resource_pattern *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(p[i].pattern);
        free(p[i].name);
    }
    free(p);
}

static void sharing_release(struct dp_sharing *sh)
{
    for (size_t i = 0; i < sh->n_resources; i++) {
        struct dp_shared_resource *res = &sh->resources[i];
        free(res->name);
        free(res->advertised);
        for (size_t j = 0; j < res->n_devices; j++)
            free(res->devices[j].id);
        free(res->devices);
    }
    free(sh->resources);
    *sh = (struct dp_sharing){0};
}

void dp_config_release(struct dp_config *cfg)
{
    free(cfg->driver_root);
    free(cfg->dev_root);
    free(cfg->cdi_annotation_prefix);
    free(cfg->nvidia_cdi_hook_path);
    free(cfg->container_driver_root);
    free(cfg->mps_root);
    free(cfg->kubelet_socket);
    free(cfg->cdi_spec_dir);
    free(cfg->config_file);
    strv_free(cfg->cdi_feature_flags);
    strv_free(cfg->cdi_disable_hooks);
    strv_free(cfg->warnings);
    free(cfg->imex_channel_ids);
    patterns_free(cfg->gpu_patterns, cfg->n_gpu_patterns);
    patterns_free(cfg->mig_patterns, cfg->n_mig_patterns);
    sharing_release(&cfg->time_slicing);
    sharing_release(&cfg->mps);
    cli_common_release(&cfg->common);
    *cfg = (struct dp_config){0};
}

const struct dp_sharing *dp_config_sharing(const struct dp_config *cfg)
{
    if (cfg->mps.configured)
        return &cfg->mps;
    if (cfg->time_slicing.configured)
        return &cfg->time_slicing;
    return NULL;
}

/* ---- resource names ---- */

/* RFC 1123 subdomain: dot-separated labels of [a-z0-9-], each starting and ending alphanumeric. */
static bool dns1123_subdomain(const char *s, size_t n)
{
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool edge = i == 0 || i + 1 == n || s[i - 1] == '.' || s[i + 1] == '.';
        if (c == '.' && !edge)
            continue;
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
            continue;
        if (c == '-' && !edge)
            continue;
        return false;
    }
    return true;
}

int dp_resource_name_normalize(const char *s, char **ret, const char **ret_why)
{
    const char *slash = strchr(s, '/');
    _cleanup_free_ char *full = NULL;

    if (!*s) {
        *ret_why = "a resource name cannot be empty";
        return -EINVAL;
    }
    if (asprintf(&full, "%s%s", slash ? "" : DP_RESOURCE_PREFIX, s) < 0) {
        full = NULL;
        return -ENOMEM;
    }
    slash = strchr(full, '/');
    if (strchr(slash + 1, '/')) {
        *ret_why = "want <prefix>/<name> with a single '/'";
        return -EINVAL;
    }
    if (strlen(full) > DP_RESOURCE_NAME_MAX) {
        *ret_why = "longer than 63 characters";
        return -EINVAL;
    }
    if (!dns1123_subdomain(full, (size_t)(slash - full)) ||
        !dns1123_subdomain(slash + 1, strlen(slash + 1))) {
        *ret_why = "want lower-case letters, digits, '-' and '.' (a DNS-1123 subdomain) on each "
                   "side of the '/'";
        return -EINVAL;
    }
    *ret = TAKE_PTR(full);
    return 0;
}

/* ---- settings from text ---- */

#define FIELD(cfg, s, type) ((type *)(void *)((char *)(cfg) + (s)->offset))

static int apply_strings(char ***field, const char *value)
{
    char **v = NULL;
    int r = split_list(value, &v);
    if (r < 0)
        return r;
    strv_free(*field);
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
            fail_enum(list_names, v[i], why, why_size);
        bits |= r >= 0 ? bit : 0;
    }
    if (r >= 0 && !bits) {
        char want[128];
        want_text(list_names, want, sizeof(want));
        snprintf(why, why_size, "want at least one of %s", want);
        r = -EINVAL;
    }
    strv_free(v);
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
    size_t n = strv_len(v);
    unsigned long id = 0;
    if (n > 1 || (n == 1 && (parse_uint(v[0], UINT32_MAX, &id) < 0 || id != 0))) {
        snprintf(why, why_size, "invalid value \"%s\": the only valid channel lists are [] and [0]",
                 value);
        strv_free(v);
        return -EINVAL;
    }
    strv_free(v);
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
        add_warning(cfg, "%s: out of memory, ignored", var);
        return;
    }
    for (size_t i = 0; v[i]; i++) {
        unsigned long xid;
        bool all = strcasecmp(v[i], "all") == 0;
        if (disable && (all || strcasecmp(v[i], "xids") == 0))
            cfg->health.enabled = false;
        else if (all)
            xid_set_all(&cfg->health, false);
        else if (parse_uint(v[i], DP_XID_MAX, &xid) == 0 && xid > 0)
            xid_set(&cfg->health, (unsigned)xid, disable);
        else
            add_warning(cfg, "%s: ignoring \"%s\": want all%s or an XID from 1 to %d", var, v[i],
                        disable ? ", xids" : "", DP_XID_MAX);
    }
    strv_free(v);
}

int dp_setting_apply(const struct dp_setting *s, struct dp_config *cfg, const char *value,
                     char *why, size_t why_size)
{
    int i;
    why[0] = '\0';
    switch (s->kind) {
    case DP_KIND_BOOL:
        if (parse_bool(value, FIELD(cfg, s, bool)) == 0)
            return 0;
        snprintf(why, why_size, "invalid value \"%s\": want true or false", value);
        return -EINVAL;
    case DP_KIND_STRING:
        return set_string(FIELD(cfg, s, char *), value);
    case DP_KIND_ENUM:
        if (enum_from_string(s->names, value, &i) < 0)
            return fail_enum(s->names, value, why, why_size);
        *FIELD(cfg, s, int) = i;
        return 0;
    case DP_KIND_STRINGS:
        return apply_strings(FIELD(cfg, s, char **), value);
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
     DP_KIND_STRING, OFF(driver_root), NULL, "root of the driver installation (default /)"},
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

/* ---- the config file ---- */

struct loader {
    const struct doc *doc;
    struct diag *d;
    struct dp_config *cfg;
};

/* A member that is present and not null: NVIDIA's flags are nullable pointers, null = unset. */
static json_t *member(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return v && !json_is_null(v) ? v : NULL;
}

/* Fails at v, or at the member key of obj when v (a shared true/false/null) has no position. */
static int fail_at(const struct loader *l, const json_t *obj, const char *key, const json_t *v,
                   const char *fmt, ...) _printf_(5, 6);
static int fail_at(const struct loader *l, const json_t *obj, const char *key, const json_t *v,
                   const char *fmt, ...)
{
    char msg[DIAG_MSG_MAX];
    int line, col;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (!doc_position(l->doc, v, &line, &col)) {
        /* A shared true/false/null has no position of its own: a typed reader that refuses it
         * reports its key's, which is the place to point at. */
        struct diag at;
        int64_t unused;
        diag_init(&at);
        (void)!doc_get_int(l->doc, obj, key, true, 0, INT64_MIN, INT64_MAX, &at, &unused);
        if (at.line > 0)
            return diag_fail_at(l->d, -EINVAL, doc_name(l->doc), at.line, at.col, "%s", msg);
        return doc_fail(l->doc, obj, l->d, -EINVAL, "%s", msg);
    }
    return diag_fail_at(l->d, -EINVAL, doc_name(l->doc), line, col, "%s", msg);
}

/* The text form of a sequence of strings (or integers): items joined with ','. Each item is
 * checked by the setting's own parser first, so an error points at the item. */
static int join_items(const struct loader *l, const struct dp_setting *s, const char *leaf,
                      json_t *seq, struct strbuf *out)
{
    size_t i;
    json_t *item;
    bool ints = s->kind == DP_KIND_CHANNELS;
    json_array_foreach(seq, i, item)
    {
        unsigned bit;
        if (ints ? !json_is_integer(item) : !json_is_string(item))
            return fail_at(l, seq, leaf, item, "\"%s\": expected a sequence of %s, got %s", leaf,
                           ints ? "integers" : "strings", doc_type_name(item));
        if (s->kind == DP_KIND_LIST_STRATEGY &&
            dp_list_strategy_from_string(json_string_value(item), &bit) < 0) {
            char why[WHY_MAX];
            fail_enum(list_names, json_string_value(item), why, sizeof(why));
            return doc_fail(l->doc, item, l->d, -EINVAL, "\"%s\": %s", leaf, why);
        }
        int r = i ? strbuf_addch(out, ',') : 0;
        if (r >= 0)
            r = ints ? strbuf_addf(out, "%" JSON_INTEGER_FORMAT, json_integer_value(item))
                     : strbuf_addstr(out, json_string_value(item));
        if (r < 0)
            return r;
    }
    return 0;
}

/* The text form of a file value, after checking its YAML type against the setting's kind. */
static int value_text(const struct loader *l, const struct dp_setting *s, const json_t *obj,
                      const char *leaf, json_t *v, struct strbuf *out)
{
    switch (s->kind) {
    case DP_KIND_BOOL:
        if (!json_is_boolean(v))
            return fail_at(l, obj, leaf, v, "\"%s\": expected a boolean, got %s", leaf,
                           doc_type_name(v));
        return strbuf_addstr(out, json_is_true(v) ? "true" : "false");
    case DP_KIND_STRINGS:
    case DP_KIND_LIST_STRATEGY:
        if (json_is_array(v))
            return join_items(l, s, leaf, v, out);
        if (!json_is_string(v))
            return fail_at(l, obj, leaf, v, "\"%s\": expected a string or a sequence, got %s", leaf,
                           doc_type_name(v));
        return strbuf_addstr(out, json_string_value(v));
    case DP_KIND_CHANNELS:
        if (!json_is_array(v))
            return fail_at(l, obj, leaf, v, "\"%s\": expected a sequence, got %s", leaf,
                           doc_type_name(v));
        return join_items(l, s, leaf, v, out);
    default:
        if (!json_is_string(v))
            return fail_at(l, obj, leaf, v, "\"%s\": expected a string, got %s", leaf,
                           doc_type_name(v));
        return strbuf_addstr(out, json_string_value(v));
    }
}

/* The settings whose key is directly inside section ("flags", "flags.plugin", "imex"). */
static const char *leaf_in(const struct dp_setting *s, const char *section)
{
    size_t n = strlen(section);
    if (!s->key || strncmp(s->key, section, n) != 0 || s->key[n] != '.')
        return NULL;
    return strchr(s->key + n + 1, '.') ? NULL : s->key + n + 1;
}

static int check_section_keys(const struct loader *l, const json_t *obj, const char *section,
                              const char *const *extra)
{
    const char *allowed[ARRAY_SIZE(dp_settings) + 4];
    size_t n = 0;
    for (size_t i = 0; i < dp_n_settings; i++)
        if (leaf_in(&dp_settings[i], section))
            allowed[n++] = leaf_in(&dp_settings[i], section);
    for (size_t i = 0; extra && extra[i] && n + 1 < ARRAY_SIZE(allowed); i++)
        allowed[n++] = extra[i];
    allowed[n] = NULL;
    return doc_check_keys(l->doc, obj, allowed, l->d);
}

/* Applies every table setting that lives in section (a mapping, checked for unknown keys). */
static int load_section(const struct loader *l, const json_t *obj, const char *section,
                        const char *const *extra)
{
    int r = check_section_keys(l, obj, section, extra);
    for (size_t i = 0; i < dp_n_settings && r >= 0; i++) {
        const struct dp_setting *s = &dp_settings[i];
        const char *leaf = leaf_in(s, section);
        json_t *v = leaf ? member(obj, leaf) : NULL;
        if (!v)
            continue;
        _cleanup_strbuf_ struct strbuf text = STRBUF_INIT;
        char why[WHY_MAX];
        r = value_text(l, s, obj, leaf, v, &text);
        if (r < 0)
            break;
        r = dp_setting_apply(s, l->cfg, strbuf_str(&text), why, sizeof(why));
        if (r == -EINVAL)
            r = fail_at(l, obj, leaf, v, "\"%s\": %s", leaf, why);
    }
    return r;
}

/* flags.gfd belongs to GPU Feature Discovery: checked, then ignored, as NVIDIA's plugin does. */
static int load_gfd(const struct loader *l, const json_t *gfd)
{
    static const char *const keys[] = {"oneshot",    "noTimestamp",     "sleepInterval",
                                       "outputFile", "machineTypeFile", NULL};
    static const bool is_bool[] = {true, true, false, false, false};
    int r = doc_check_keys(l->doc, gfd, keys, l->d);
    for (size_t i = 0; keys[i] && r >= 0; i++) {
        json_t *v = member(gfd, keys[i]);
        if (v && (is_bool[i] ? !json_is_boolean(v) : !json_is_string(v)))
            r = fail_at(l, gfd, keys[i], v, "\"%s\": expected a %s, got %s", keys[i],
                        is_bool[i] ? "boolean" : "string", doc_type_name(v));
    }
    return r;
}

static int load_flags(const struct loader *l, const json_t *flags)
{
    static const char *const extra[] = {"plugin", "gfd", "useNodeFeatureAPI", NULL};
    json_t *plugin = NULL, *gfd = NULL;
    int r = load_section(l, flags, "flags", extra);
    if (r >= 0)
        r = doc_get_object(l->doc, flags, "plugin", false, l->d, &plugin);
    if (r >= 0 && plugin)
        r = load_section(l, plugin, "flags.plugin", NULL);
    if (r >= 0)
        r = doc_get_object(l->doc, flags, "gfd", false, l->d, &gfd);
    if (r >= 0 && gfd)
        r = load_gfd(l, gfd);
    if (r >= 0 && member(flags, "useNodeFeatureAPI"))
        r = doc_get_bool(l->doc, flags, "useNodeFeatureAPI", false, false, l->d,
                         &l->cfg->use_node_feature_api);
    return r;
}

/* A resource name from the file, normalised; errors at v. */
static int resource_name(const struct loader *l, const json_t *obj, const char *key, json_t *v,
                         char **ret)
{
    const char *why = NULL;
    if (!json_is_string(v))
        return fail_at(l, obj, key, v, "\"%s\": expected a string, got %s", key, doc_type_name(v));
    int r = dp_resource_name_normalize(json_string_value(v), ret, &why);
    if (r == -EINVAL)
        return doc_fail(l->doc, v, l->d, r, "\"%s\": invalid resource name \"%s\": %s", key,
                        json_string_value(v), why);
    return r;
}

/* resources.gpus[] / resources.mig[]: {pattern, name}. */
static int load_patterns(const struct loader *l, const json_t *seq,
                         struct dp_resource_pattern **ret, size_t *ret_n)
{
    static const char *const keys[] = {"pattern", "name", NULL};
    size_t n = json_array_size(seq), i;
    json_t *item;
    struct dp_resource_pattern *p = calloc(n ? n : 1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    *ret = p;
    json_array_foreach(seq, i, item)
    {
        const char *pattern = NULL;
        int r = doc_check_keys(l->doc, item, keys, l->d);
        if (r >= 0)
            r = doc_get_string(l->doc, item, "pattern", true, NULL, l->d, &pattern);
        if (r >= 0 && !*pattern)
            r = doc_fail(l->doc, json_object_get(item, "pattern"), l->d, -EINVAL,
                         "\"pattern\": a pattern cannot be empty");
        if (r >= 0 && !json_object_get(item, "name"))
            r = doc_fail(l->doc, item, l->d, -EINVAL, "missing required key \"name\"");
        if (r >= 0)
            r = resource_name(l, item, "name", json_object_get(item, "name"), &p[i].name);
        if (r >= 0 && !(p[i].pattern = strdup(pattern)))
            r = -ENOMEM;
        *ret_n = i + (p[i].name ? 1 : 0);
        if (r < 0)
            return r;
    }
    return 0;
}

static int load_resources(const struct loader *l, const json_t *res)
{
    static const char *const keys[] = {"gpus", "mig", NULL};
    json_t *gpus = NULL, *mig = NULL;
    struct dp_config *cfg = l->cfg;
    int r = doc_check_keys(l->doc, res, keys, l->d);
    if (r >= 0)
        r = doc_get_array(l->doc, res, "gpus", false, l->d, &gpus);
    if (r >= 0)
        r = doc_get_array(l->doc, res, "mig", false, l->d, &mig);
    if (r >= 0 && gpus)
        r = load_patterns(l, gpus, &cfg->gpu_patterns, &cfg->n_gpu_patterns);
    if (r >= 0 && mig)
        r = load_patterns(l, mig, &cfg->mig_patterns, &cfg->n_mig_patterns);
    return r;
}

/* ---- sharing ---- */

/* A device reference: GPU index, "<gpu>:<mig>", or a GPU-/MIG- UUID (any MIG UUID form). */
static bool valid_device_id(const char *s)
{
    size_t digits = strspn(s, "0123456789");
    if (digits > 0 && digits <= 4 && !s[digits])
        return true;
    if (digits > 0 && digits <= 4 && s[digits] == ':') {
        size_t mig = strspn(s + digits + 1, "0123456789");
        return mig > 0 && mig <= 4 && !s[digits + 1 + mig];
    }
    if (strncmp(s, "GPU-", 4) != 0 && strncmp(s, "MIG-", 4) != 0)
        return false;
    size_t rest = strspn(s + 4, "0123456789abcdefABCDEFGHIJKLMNOPQRSTUVWXYZghijklmnopqrstuvwxyz-/");
    return rest > 0 && !s[4 + rest];
}

/* One entry of devices: an index, an id string, or gpuplane's {device, replicas}. */
static int load_device(const struct loader *l, const json_t *seq, json_t *item, int res_replicas,
                       struct dp_shared_device *ret)
{
    static const char *const keys[] = {"device", "replicas", NULL};
    json_t *ref = item;
    int64_t replicas = res_replicas;
    int r = 0;
    char buf[32];
    if (json_is_object(item)) {
        r = doc_check_keys(l->doc, item, keys, l->d);
        if (r >= 0 && !json_object_get(item, "device"))
            r = doc_fail(l->doc, item, l->d, -EINVAL, "missing required key \"device\"");
        if (r >= 0)
            r = doc_get_int(l->doc, item, "replicas", res_replicas == 0, res_replicas, 1,
                            DP_MAX_REPLICAS, l->d, &replicas);
        if (r < 0)
            return r;
        ref = json_object_get(item, "device");
    }
    const char *id = json_is_string(ref) ? json_string_value(ref) : buf;
    if (json_is_integer(ref) && json_integer_value(ref) >= 0)
        snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(ref));
    else if (!json_is_string(ref))
        return fail_at(l, ref == item ? seq : item, "device", ref,
                       "expected a GPU index, a device id or {device, replicas}, got %s",
                       doc_type_name(ref));
    if (!valid_device_id(id))
        return doc_fail(l->doc, ref, l->d, -EINVAL,
                        "invalid device \"%s\": want a GPU index, <gpu>:<mig> indices, or a "
                        "GPU-/MIG- UUID",
                        id);
    if (replicas == 0)
        return doc_fail(l->doc, item, l->d, -EINVAL,
                        "device \"%s\" has no replicas: set them here or on the resource", id);
    ret->replicas = (int)replicas;
    ret->id = strdup(id);
    return ret->id ? 0 : -ENOMEM;
}

static int load_device_list(const struct loader *l, json_t *seq, struct dp_shared_resource *res)
{
    size_t i;
    json_t *item;
    if (json_array_size(seq) == 0)
        return doc_fail(l->doc, seq, l->d, -EINVAL, "\"devices\": no devices listed");
    res->devices = calloc(json_array_size(seq), sizeof(*res->devices));
    if (!res->devices)
        return -ENOMEM;
    json_array_foreach(seq, i, item)
    {
        int r = load_device(l, seq, item, res->replicas, &res->devices[i]);
        if (r < 0)
            return r;
        res->n_devices = i + 1;
        for (size_t j = 0; j < i; j++)
            if (strcmp(res->devices[j].id, res->devices[i].id) == 0)
                return doc_fail(l->doc, item, l->d, -EINVAL, "duplicate device \"%s\"",
                                res->devices[i].id);
    }
    res->devices_kind = DP_DEVICES_LIST;
    return 0;
}

/* devices: all | count | list (NVIDIA parses and then ignores it; gpuplane honours it). */
static int load_devices(const struct loader *l, const json_t *obj, json_t *v,
                        struct dp_shared_resource *res)
{
    if (!v || (json_is_string(v) && strcmp(json_string_value(v), "all") == 0)) {
        res->devices_kind = DP_DEVICES_ALL;
        return 0;
    }
    if (json_is_string(v))
        return doc_fail(l->doc, v, l->d, -EINVAL,
                        "\"devices\": invalid value \"%s\": the only valid string is \"all\"",
                        json_string_value(v));
    if (json_is_integer(v)) {
        json_int_t n = json_integer_value(v);
        if (n < 1 || n > 4096)
            return doc_fail(
                l->doc, v, l->d, -EINVAL,
                "\"devices\": a count must be from 1 to 4096, got %" JSON_INTEGER_FORMAT, n);
        res->devices_kind = DP_DEVICES_COUNT;
        res->devices_count = (int)n;
        return 0;
    }
    if (json_is_array(v))
        return load_device_list(l, v, res);
    return fail_at(l, obj, "devices", v,
                   "\"devices\": expected \"all\", a count or a sequence, got %s",
                   doc_type_name(v));
}

/* Every device listed carries its own replicas, so the resource need not say. */
static bool devices_all_have_replicas(const json_t *devices)
{
    size_t i;
    json_t *item;
    if (!json_is_array(devices) || json_array_size(devices) == 0)
        return false;
    json_array_foreach(devices, i, item)
    {
        if (!json_is_object(item) || !json_object_get(item, "replicas"))
            return false;
    }
    return true;
}

static bool is_pattern_name(const struct dp_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->n_gpu_patterns; i++)
        if (strcmp(cfg->gpu_patterns[i].name, name) == 0)
            return true;
    for (size_t i = 0; i < cfg->n_mig_patterns; i++)
        if (strcmp(cfg->mig_patterns[i].name, name) == 0)
            return true;
    return false;
}

/* Only names the plugin can advertise can be shared: a typo would otherwise share nothing. */
static int check_shareable(const struct loader *l, const json_t *v, const char *name)
{
    if (strcmp(name, DP_RESOURCE_PREFIX "gpu") == 0 ||
        strncmp(name, DP_RESOURCE_PREFIX "mig-", strlen(DP_RESOURCE_PREFIX "mig-")) == 0 ||
        is_pattern_name(l->cfg, name))
        return 0;
    return doc_fail(
        l->doc, v, l->d, -EINVAL,
        "\"name\": unknown resource \"%s\": want nvidia.com/gpu, nvidia.com/mig-<profile> "
        "or a name from resources",
        name);
}

static int advertised_name(const struct loader *l, const json_t *obj, const struct dp_sharing *sh,
                           struct dp_shared_resource *res)
{
    json_t *rename = member(obj, "rename");
    if (rename) {
        res->renamed = true;
        return resource_name(l, obj, "rename", rename, &res->advertised);
    }
    if (!sh->rename_by_default)
        return set_string(&res->advertised, res->name);
    if (strlen(res->name) + strlen(".shared") > DP_RESOURCE_NAME_MAX)
        return doc_fail(l->doc, json_object_get(obj, "name"), l->d, -EINVAL,
                        "\"name\": \"%s.shared\" (renameByDefault) is longer than 63 characters",
                        res->name);
    if (asprintf(&res->advertised, "%s.shared", res->name) < 0) {
        res->advertised = NULL;
        return -ENOMEM;
    }
    return 0;
}

static int load_shared_resource(const struct loader *l, const json_t *obj,
                                const struct dp_sharing *sh, struct dp_shared_resource *res)
{
    static const char *const keys[] = {"name", "rename", "replicas", "devices", NULL};
    json_t *devices = member(obj, "devices");
    int64_t replicas = 0;
    int r = doc_check_keys(l->doc, obj, keys, l->d);
    if (r >= 0 && !member(obj, "name"))
        r = doc_fail(l->doc, obj, l->d, -EINVAL, "missing required key \"name\"");
    if (r >= 0)
        r = resource_name(l, obj, "name", json_object_get(obj, "name"), &res->name);
    if (r >= 0)
        r = check_shareable(l, json_object_get(obj, "name"), res->name);
    if (r >= 0)
        r = doc_get_int(l->doc, obj, "replicas", !devices_all_have_replicas(devices), 0, 1,
                        DP_MAX_REPLICAS, l->d, &replicas);
    res->replicas = (int)replicas;
    if (r >= 0)
        r = load_devices(l, obj, devices, res);
    if (r >= 0)
        r = advertised_name(l, obj, sh, res);
    return r;
}

/* Two entries for one resource, or two resources advertised under one name, are a mistake. */
static int check_unique(const struct loader *l, const json_t *seq, const struct dp_sharing *sh,
                        size_t i)
{
    const struct dp_shared_resource *res = &sh->resources[i];
    const json_t *obj = json_array_get(seq, i);
    for (size_t j = 0; j < i; j++) {
        const struct dp_shared_resource *prev = &sh->resources[j];
        int line = 0, col = 0;
        (void)doc_position(l->doc, json_array_get(seq, j), &line, &col);
        if (strcmp(prev->name, res->name) == 0)
            return doc_fail(l->doc, json_object_get(obj, "name"), l->d, -EINVAL,
                            "\"name\": duplicate resource \"%s\" (first at line %d)", res->name,
                            line);
        if (strcmp(prev->advertised, res->advertised) == 0)
            return doc_fail(l->doc, member(obj, "rename") ?: json_object_get(obj, "name"), l->d,
                            -EINVAL,
                            "resource \"%s\" is already advertised by the entry at line %d",
                            res->advertised, line);
    }
    return 0;
}

/* sharing.timeSlicing / sharing.mps (NVIDIA's ReplicatedResources). */
static int load_sharing_one(const struct loader *l, const json_t *obj, bool mps,
                            struct dp_sharing *sh)
{
    static const char *const keys[] = {"renameByDefault", "failRequestsGreaterThanOne", "resources",
                                       NULL};
    json_t *seq = NULL, *item;
    size_t i;
    int r = doc_check_keys(l->doc, obj, keys, l->d);
    if (r >= 0)
        r = doc_get_bool(l->doc, obj, "renameByDefault", false, false, l->d,
                         &sh->rename_by_default);
    /* NVIDIA: requests for more than one replica fail by default with MPS only. */
    if (r >= 0)
        r = doc_get_bool(l->doc, obj, "failRequestsGreaterThanOne", false, mps, l->d,
                         &sh->fail_requests_greater_than_one);
    if (r >= 0)
        r = doc_get_array(l->doc, obj, "resources", true, l->d, &seq);
    if (r >= 0 && json_array_size(seq) == 0)
        r = doc_fail(l->doc, seq, l->d, -EINVAL, "\"resources\": no resources specified");
    if (r < 0)
        return r;
    sh->configured = true;
    sh->resources = calloc(json_array_size(seq), sizeof(*sh->resources));
    if (!sh->resources)
        return -ENOMEM;
    json_array_foreach(seq, i, item)
    {
        sh->n_resources = i + 1;
        r = load_shared_resource(l, item, sh, &sh->resources[i]);
        if (r >= 0)
            r = check_unique(l, seq, sh, i);
        if (r < 0)
            return r;
    }
    return 0;
}

static int load_sharing(const struct loader *l, const json_t *sharing)
{
    static const char *const keys[] = {"timeSlicing", "mps", NULL};
    json_t *ts = NULL, *mps = NULL;
    int r = doc_check_keys(l->doc, sharing, keys, l->d);
    if (r >= 0)
        r = doc_get_object(l->doc, sharing, "timeSlicing", false, l->d, &ts);
    if (r >= 0)
        r = doc_get_object(l->doc, sharing, "mps", false, l->d, &mps);
    if (r >= 0 && ts)
        r = load_sharing_one(l, ts, false, &l->cfg->time_slicing);
    if (r >= 0 && mps)
        r = load_sharing_one(l, mps, true, &l->cfg->mps);
    if (r >= 0 && ts && mps)
        add_warning(l->cfg, "sharing.timeSlicing is ignored: sharing.mps is also configured");
    return r;
}

/* ---- health (gpuplane) ---- */

/* A duration as Go writes it, integers only: "500ms", "5s", "1m30s", "2h"; "0" alone is 0. */
static int parse_duration(const char *s, unsigned long *ret_ms)
{
    static const struct {
        const char *unit;
        unsigned long ms;
    } units[] = {{"ms", 1}, {"h", 3600000}, {"m", 60000}, {"s", 1000}};
    unsigned long total = 0;
    if (strcmp(s, "0") == 0) {
        *ret_ms = 0;
        return 0;
    }
    if (!*s)
        return -EINVAL;
    while (*s) {
        size_t digits = strspn(s, "0123456789"), u;
        if (digits == 0 || digits > 9)
            return -EINVAL;
        unsigned long n = strtoul(s, NULL, 10);
        s += digits;
        for (u = 0; u < ARRAY_SIZE(units); u++)
            if (strncmp(s, units[u].unit, strlen(units[u].unit)) == 0)
                break;
        if (u == ARRAY_SIZE(units))
            return -EINVAL;
        s += strlen(units[u].unit);
        total += n * units[u].ms;
        if (total > 366UL * 24 * 3600000)
            return -ERANGE;
    }
    *ret_ms = total;
    return 0;
}

/* The shortest exact form: "5s", "10m", "1500ms", "0s". */
static void format_duration(unsigned long ms, char buf[static 32])
{
    if (ms == 0)
        snprintf(buf, 32, "0s");
    else if (ms % 3600000 == 0)
        snprintf(buf, 32, "%luh", ms / 3600000);
    else if (ms % 60000 == 0)
        snprintf(buf, 32, "%lum", ms / 60000);
    else if (ms % 1000 == 0)
        snprintf(buf, 32, "%lus", ms / 1000);
    else
        snprintf(buf, 32, "%lums", ms);
}

static int load_duration(const struct loader *l, const json_t *obj, const char *key,
                         unsigned long min, unsigned long max, unsigned long *ret)
{
    json_t *v = member(obj, key);
    unsigned long ms = 0;
    char lo[32], hi[32];
    if (!v)
        return 0;
    if (!json_is_string(v))
        return fail_at(l, obj, key, v, "\"%s\": expected a duration string such as \"5s\", got %s",
                       key, doc_type_name(v));
    int r = parse_duration(json_string_value(v), &ms);
    if (r == -EINVAL)
        return doc_fail(l->doc, v, l->d, r,
                        "\"%s\": invalid duration \"%s\": want a number with a unit (ms, s, m, "
                        "h), e.g. \"5s\"",
                        key, json_string_value(v));
    format_duration(min, lo);
    format_duration(max, hi);
    if (r < 0 || ms < min || ms > max)
        return doc_fail(l->doc, v, l->d, -EINVAL, "\"%s\": %s is out of range [%s, %s]", key,
                        json_string_value(v), lo, hi);
    *ret = ms;
    return 0;
}

/* ignoredXids / fatalXids: "all" or a sequence of XIDs, marked ignored or fatal; with replace,
 * every other XID gets the opposite mark first. */
static int load_xids(const struct loader *l, const json_t *obj, const char *key, bool ignored,
                     bool replace)
{
    json_t *v = member(obj, key), *item;
    size_t i;
    if (!v)
        return 0;
    if (json_is_string(v) && strcmp(json_string_value(v), "all") == 0) {
        xid_set_all(&l->cfg->health, ignored);
        return 0;
    }
    if (!json_is_array(v))
        return fail_at(l, obj, key, v, "\"%s\": expected \"all\" or a sequence of XIDs, got %s",
                       key, doc_type_name(v));
    json_array_foreach(v, i, item)
    {
        if (!json_is_integer(item))
            return fail_at(l, v, key, item, "\"%s\": expected an XID number, got %s", key,
                           doc_type_name(item));
        if (json_integer_value(item) < 1 || json_integer_value(item) > DP_XID_MAX)
            return doc_fail(l->doc, item, l->d, -EINVAL,
                            "\"%s\": invalid XID %" JSON_INTEGER_FORMAT ": want 1 to %d", key,
                            json_integer_value(item), DP_XID_MAX);
    }
    if (replace)
        xid_set_all(&l->cfg->health, !ignored);
    json_array_foreach(v, i, item)
    {
        xid_set(&l->cfg->health, (unsigned)json_integer_value(item), ignored);
    }
    return 0;
}

static int load_health(const struct loader *l, const json_t *obj)
{
    static const char *const keys[] = {"enabled",       "ignoredXids",    "fatalXids",
                                       "probeInterval", "recoveryWindow", NULL};
    struct dp_health *h = &l->cfg->health;
    unsigned long probe = h->probe_interval_ms;
    int r = doc_check_keys(l->doc, obj, keys, l->d);
    if (r >= 0)
        r = doc_get_bool(l->doc, obj, "enabled", false, h->enabled, l->d, &h->enabled);
    /* ignoredXids replaces the default set; fatalXids then takes XIDs out of it. */
    if (r >= 0)
        r = load_xids(l, obj, "ignoredXids", true, true);
    if (r >= 0)
        r = load_xids(l, obj, "fatalXids", false, false);
    if (r >= 0)
        r = load_duration(l, obj, "probeInterval", 100, 3600000, &probe);
    if (r >= 0)
        r = load_duration(l, obj, "recoveryWindow", 0, 7UL * 24 * 3600000, &h->recovery_window_ms);
    h->probe_interval_ms = (unsigned)probe;
    return r;
}

/* ---- the document ---- */

static int load_version(const struct loader *l, const json_t *root)
{
    const char *version = NULL;
    int r = doc_get_string(l->doc, root, "version", false, "", l->d, &version);
    if (r < 0 || !*version || strcmp(version, "v1") == 0)
        return r;
    return doc_fail(l->doc, json_object_get(root, "version"), l->d, -EINVAL,
                    "unknown version: %s (want v1)", version);
}

static int load_root(const struct loader *l, const json_t *root)
{
    static const char *const keys[] = {"version", "flags",  "resources", "sharing",
                                       "imex",    "health", NULL};
    json_t *flags = NULL, *resources = NULL, *sharing = NULL, *imex = NULL, *health = NULL;
    int r = doc_check_keys(l->doc, root, keys, l->d);
    if (r >= 0)
        r = load_version(l, root);
    if (r >= 0)
        r = doc_get_object(l->doc, root, "flags", false, l->d, &flags);
    if (r >= 0 && flags)
        r = load_flags(l, flags);
    /* resources before sharing: shared names may come from resources. */
    if (r >= 0)
        r = doc_get_object(l->doc, root, "resources", false, l->d, &resources);
    if (r >= 0 && resources)
        r = load_resources(l, resources);
    if (r >= 0)
        r = doc_get_object(l->doc, root, "sharing", false, l->d, &sharing);
    if (r >= 0 && sharing)
        r = load_sharing(l, sharing);
    if (r >= 0)
        r = doc_get_object(l->doc, root, "imex", false, l->d, &imex);
    if (r >= 0 && imex)
        r = load_section(l, imex, "imex", NULL);
    if (r >= 0)
        r = doc_get_object(l->doc, root, "health", false, l->d, &health);
    if (r >= 0 && health)
        r = load_health(l, health);
    return r;
}

static int load_doc(struct dp_config *cfg, const struct doc *doc, struct diag *d)
{
    struct loader l = {.doc = doc, .d = d, .cfg = cfg};
    if (doc_count(doc) > 1)
        return doc_fail(doc, doc_root(doc, 1), l.d, -EINVAL, "expected one document, found %zu",
                        doc_count(doc));
    /* An empty file is an empty configuration, as NVIDIA treats it. */
    if (doc_count(doc) == 0 || json_is_null(doc_root(doc, 0)))
        return 0;
    return load_root(&l, doc_root(doc, 0));
}

int dp_config_load_file(struct dp_config *cfg, const char *path, struct diag *d)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    int r = doc_load_file(path, d, &doc);
    if (r < 0)
        return r;
    r = load_doc(cfg, doc, d);
    if (r >= 0)
        r = set_string(&cfg->config_file, path);
    return r;
}

int dp_config_load_string(struct dp_config *cfg, const char *name, const char *text, size_t len,
                          struct diag *d)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    int r = doc_load_string(name, text, len, d, &doc);
    if (r < 0)
        return r;
    return load_doc(cfg, doc, d);
}

/* ---- start-up checks ---- */

int dp_config_validate(const struct dp_config *cfg, struct diag *d)
{
    if (!cfg->mps.configured)
        return 0;
    if (cfg->mig_strategy == DP_MIG_MIXED)
        return diag_fail(d, -EINVAL, "sharing.mps is not supported with mig strategy \"mixed\"");
    if (!cfg->mps_root || !*cfg->mps_root)
        return diag_fail(d, -EINVAL,
                         "sharing.mps needs an MPS root: set --mps-root, MPS_ROOT or "
                         "flags.mpsRoot (Helm uses /run/nvidia/mps)");
    for (size_t i = 0; i < cfg->mps.n_resources; i++)
        if (strncmp(cfg->mps.resources[i].name, DP_RESOURCE_PREFIX "mig-",
                    strlen(DP_RESOURCE_PREFIX "mig-")) == 0)
            return diag_fail(d, -EINVAL, "sharing.mps: MIG devices cannot be shared with MPS (%s)",
                             cfg->mps.resources[i].name);
    return 0;
}

/* ---- JSON ---- */

/* Adds v to obj under key; v is stolen, even on failure. */
static int put(json_t *obj, const char *key, json_t *v)
{
    return v && json_object_set_new(obj, key, v) == 0 ? 0 : -ENOMEM;
}

static json_t *strv_json(char *const *v)
{
    json_t *a = json_array();
    for (size_t i = 0; a && v && v[i]; i++)
        if (json_array_append_new(a, json_string(v[i])) < 0)
            return json_decref(a), NULL;
    return a;
}

static json_t *setting_json(const struct dp_setting *s, const struct dp_config *cfg)
{
    json_t *a;
    switch (s->kind) {
    case DP_KIND_BOOL:
        return json_boolean(*FIELD(cfg, s, bool));
    case DP_KIND_STRING:
        return json_string(*FIELD(cfg, s, char *) ?: "");
    case DP_KIND_ENUM:
        return json_string(s->names[*FIELD(cfg, s, int)]);
    case DP_KIND_STRINGS:
        return strv_json(*FIELD(cfg, s, char **));
    case DP_KIND_LIST_STRATEGY:
        a = json_array();
        for (unsigned i = 0; a && list_names[i]; i++)
            if ((cfg->device_list_strategy & (1u << i)) &&
                json_array_append_new(a, json_string(list_names[i])) < 0)
                return json_decref(a), NULL;
        return a;
    case DP_KIND_CHANNELS:
        a = json_array();
        for (size_t i = 0; a && i < cfg->n_imex_channel_ids; i++)
            if (json_array_append_new(a, json_integer(cfg->imex_channel_ids[i])) < 0)
                return json_decref(a), NULL;
        return a;
    case DP_KIND_XIDS:
        break;
    }
    return NULL;
}

/* The mapping at a dotted path below root ("flags.plugin"), created as needed. */
static json_t *section(json_t *root, const char *key)
{
    char part[64];
    const char *dot;
    json_t *obj = root;
    while (obj && (dot = strchr(key, '.'))) {
        snprintf(part, sizeof(part), "%.*s", (int)(dot - key), key);
        json_t *next = json_object_get(obj, part);
        if (!next && put(obj, part, next = json_object()) < 0)
            return NULL;
        obj = next;
        key = dot + 1;
    }
    return obj;
}

static int settings_json(const struct dp_config *cfg, json_t *root)
{
    for (size_t i = 0; i < dp_n_settings; i++) {
        const struct dp_setting *s = &dp_settings[i];
        if (!s->key)
            continue;
        json_t *obj = section(root, s->key);
        if (!obj || put(obj, strrchr(s->key, '.') + 1, setting_json(s, cfg)) < 0)
            return -ENOMEM;
        if (strcmp(s->key, "flags.deviceDiscoveryStrategy") == 0 &&
            put(obj, "useNodeFeatureAPI", json_boolean(cfg->use_node_feature_api)) < 0)
            return -ENOMEM;
    }
    return 0;
}

static json_t *patterns_json(const struct dp_resource_pattern *p, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(
                a, json_pack("{s:s, s:s}", "pattern", p[i].pattern, "name", p[i].name)) < 0)
            return json_decref(a), NULL;
    return a;
}

static json_t *devices_json(const struct dp_shared_resource *res)
{
    if (res->devices_kind == DP_DEVICES_ALL)
        return json_string("all");
    if (res->devices_kind == DP_DEVICES_COUNT)
        return json_integer(res->devices_count);
    json_t *a = json_array();
    for (size_t i = 0; a && i < res->n_devices; i++) {
        const struct dp_shared_device *dev = &res->devices[i];
        json_t *v = dev->replicas == res->replicas
                        ? json_string(dev->id)
                        : json_pack("{s:s, s:i}", "device", dev->id, "replicas", dev->replicas);
        if (json_array_append_new(a, v) < 0)
            return json_decref(a), NULL;
    }
    return a;
}

static json_t *shared_resource_json(const struct dp_shared_resource *res)
{
    json_t *o = json_pack("{s:s}", "name", res->name);
    if (o && res->renamed && put(o, "rename", json_string(res->advertised)) < 0)
        return json_decref(o), NULL;
    if (o && res->replicas && put(o, "replicas", json_integer(res->replicas)) < 0)
        return json_decref(o), NULL;
    if (o && put(o, "devices", devices_json(res)) < 0)
        return json_decref(o), NULL;
    return o;
}

static json_t *sharing_json(const struct dp_sharing *sh)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < sh->n_resources; i++)
        if (json_array_append_new(a, shared_resource_json(&sh->resources[i])) < 0)
            return json_decref(a), NULL;
    if (!a)
        return NULL;
    return json_pack("{s:b, s:b, s:o}", "renameByDefault", sh->rename_by_default,
                     "failRequestsGreaterThanOne", sh->fail_requests_greater_than_one, "resources",
                     a);
}

static json_t *xids_json(const struct dp_health *h)
{
    if (xid_all_ignored(h))
        return json_string("all");
    json_t *a = json_array();
    for (unsigned x = 1; a && x <= DP_XID_MAX; x++)
        if (dp_health_xid_ignored(h, x) && json_array_append_new(a, json_integer(x)) < 0)
            return json_decref(a), NULL;
    return a;
}

static json_t *health_json(const struct dp_health *h)
{
    char probe[32], window[32];
    format_duration(h->probe_interval_ms, probe);
    format_duration(h->recovery_window_ms, window);
    return json_pack("{s:b, s:o, s:s, s:s}", "enabled", h->enabled, "ignoredXids", xids_json(h),
                     "probeInterval", probe, "recoveryWindow", window);
}

static int sections_json(const struct dp_config *cfg, json_t *root)
{
    json_t *sharing = json_object_get(root, "sharing");
    int r = put(json_object_get(root, "resources"), "gpus",
                patterns_json(cfg->gpu_patterns, cfg->n_gpu_patterns));
    if (r >= 0)
        r = put(json_object_get(root, "resources"), "mig",
                patterns_json(cfg->mig_patterns, cfg->n_mig_patterns));
    if (r >= 0 && cfg->time_slicing.configured)
        r = put(sharing, "timeSlicing", sharing_json(&cfg->time_slicing));
    if (r >= 0 && cfg->mps.configured)
        r = put(sharing, "mps", sharing_json(&cfg->mps));
    if (r >= 0)
        r = put(root, "health", health_json(&cfg->health));
    return r;
}

int dp_config_to_json(const struct dp_config *cfg, json_t **ret)
{
    /* The sections first, so the document reads in the order of NVIDIA's examples. */
    _cleanup_json_ json_t *root = json_pack("{s:s, s:{}, s:{}, s:{}, s:{}}", "version", "v1",
                                            "flags", "resources", "sharing", "imex");
    if (!root)
        return -ENOMEM;
    int r = settings_json(cfg, root);
    if (r >= 0)
        r = sections_json(cfg, root);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(root);
    return 0;
}
