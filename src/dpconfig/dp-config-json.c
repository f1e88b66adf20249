/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The effective configuration as a config-file-shaped JSON document, for --print-config: the table
 * settings under their keys, then the resources, sharing and health sections. Loading it back gives
 * the same configuration.
 */
#include <errno.h>
#include <string.h>

#include "dp-config-internal.h"

static bool xid_all_ignored(const struct dp_health *h)
{
    for (unsigned x = 1; x <= DP_XID_MAX; x++)
        if (!dp_health_xid_ignored(h, x))
            return false;
    return true;
}

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
        return json_boolean(*DP_FIELD(cfg, s, bool));
    case DP_KIND_STRING:
        return json_string(*DP_FIELD(cfg, s, char *) ?: "");
    case DP_KIND_ENUM:
        return json_string(s->names[*DP_FIELD(cfg, s, int)]);
    case DP_KIND_STRINGS:
        return strv_json(*DP_FIELD(cfg, s, char **));
    case DP_KIND_LIST_STRATEGY:
        a = json_array();
        for (unsigned i = 0; a && dp_list_names[i]; i++)
            if ((cfg->device_list_strategy & (1u << i)) &&
                json_array_append_new(a, json_string(dp_list_names[i])) < 0)
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
    dp_duration_format(h->probe_interval_ms, probe);
    dp_duration_format(h->recovery_window_ms, window);
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
