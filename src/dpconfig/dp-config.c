/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The device plugin's settings as a struct: its defaults and lifecycle, the XID sets of the health
 * policy, resource names, and the checks NVIDIA makes at start-up once every source has been
 * applied; plus the small helpers the other dp-config-*.c files share (dp-config-internal.h). The
 * settings table is in dp-config-settings.c, the config file loader in dp-config-file.c, the JSON
 * rendering in dp-config-json.c. The device plugin's command line and environment are handled in
 * src/deviceplugin/dp-flags.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "dp-config-internal.h"

#define DEFAULT_KUBELET_SOCKET "/var/lib/kubelet/device-plugins/kubelet.sock"

/* NVIDIA's default ignored XIDs (§1.8): application faults and recoverable engine errors. */
static const unsigned default_ignored_xids[] = {13, 31, 43, 45, 68, 109};

/* ---- small helpers ---- */

int dp_set_string(char **field, const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return -ENOMEM;
    free(*field);
    *field = copy;
    return 0;
}

char **dp_strv_free(char **v)
{
    if (v)
        for (size_t i = 0; v[i]; i++)
            free(v[i]);
    free(v);
    return NULL;
}

size_t dp_strv_len(char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

/* Appends a copy of s[0..len) to the NULL-terminated *v. */
int dp_strv_push(char ***v, const char *s, size_t len)
{
    size_t n = dp_strv_len(*v);
    char **nv = realloc(*v, (n + 2) * sizeof(char *));
    if (!nv)
        return -ENOMEM;
    *v = nv;
    nv[n] = strndup(s, len);
    nv[n + 1] = NULL;
    return nv[n] ? 0 : -ENOMEM;
}

void dp_config_warn(struct dp_config *cfg, const char *fmt, ...)
{
    char msg[DP_WHY_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* A warning lost to a failed allocation is not worth failing the configuration for. */
    (void)!dp_strv_push(&cfg->warnings, msg, strlen(msg));
}

/* ---- durations ---- */

/* A duration as Go writes it, integers only: "500ms", "5s", "1m30s", "2h"; "0" alone is 0. */
int dp_duration_parse(const char *s, unsigned long *ret_ms)
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
void dp_duration_format(unsigned long ms, char buf[static 32])
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

/* ---- health ---- */

void dp_xid_set(struct dp_health *h, unsigned xid, bool ignored)
{
    uint64_t bit = (uint64_t)1 << (xid % 64);
    if (ignored)
        h->ignored[xid / 64] |= bit;
    else
        h->ignored[xid / 64] &= ~bit;
}

void dp_xid_set_all(struct dp_health *h, bool ignored)
{
    for (unsigned x = 1; x <= DP_XID_MAX; x++)
        dp_xid_set(h, x, ignored);
}

bool dp_health_xid_ignored(const struct dp_health *h, unsigned long long xid)
{
    if (xid < 1 || xid > DP_XID_MAX)
        return false;
    return h->ignored[xid / 64] & ((uint64_t)1 << (xid % 64));
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
        dp_xid_set(&cfg->health, default_ignored_xids[i], true);
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
    free(cfg->gfd.sleep_interval);
    free(cfg->gfd.output_file);
    free(cfg->gfd.machine_type_file);
    dp_strv_free(cfg->cdi_feature_flags);
    dp_strv_free(cfg->cdi_disable_hooks);
    dp_strv_free(cfg->warnings);
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
