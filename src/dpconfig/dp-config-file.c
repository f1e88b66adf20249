/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The strict loader of NVIDIA's `version: v1` config file, with gpuplane's health section and
 * per-GPU replicas: the flags, flags.plugin and imex sections go through the settings table (each
 * value is checked for its YAML type, then applied in its text form as a flag would be), the
 * resources, sharing and health sections are read here. Every error points at a line and column.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "dp-config-internal.h"

/* ---- flags, flags.plugin, imex and resources ---- */

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
            char why[DP_WHY_MAX];
            dp_fail_enum(dp_list_names, json_string_value(item), why, sizeof(why));
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
    const char *allowed[DP_SETTINGS_MAX + 4];
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
        char why[DP_WHY_MAX];
        r = value_text(l, s, obj, leaf, v, &text);
        if (r < 0)
            break;
        r = dp_setting_apply(s, l->cfg, strbuf_str(&text), why, sizeof(why));
        if (r == -EINVAL)
            r = fail_at(l, obj, leaf, v, "\"%s\": %s", leaf, why);
    }
    return r;
}

/* A string of flags.gfd, kept for discover; ret untouched when the key is absent or null. */
static int gfd_string(const struct loader *l, const json_t *gfd, const char *key, char **ret)
{
    json_t *v = member(gfd, key);
    if (!v)
        return 0;
    if (!json_is_string(v))
        return fail_at(l, gfd, key, v, "\"%s\": expected a string, got %s", key, doc_type_name(v));
    return dp_set_string(ret, json_string_value(v));
}

/* A boolean of flags.gfd, kept with whether the file set it. */
static int gfd_bool(const struct loader *l, const json_t *gfd, const char *key, bool *ret_has,
                    bool *ret)
{
    json_t *v = member(gfd, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return fail_at(l, gfd, key, v, "\"%s\": expected a boolean, got %s", key, doc_type_name(v));
    *ret_has = true;
    *ret = json_is_true(v);
    return 0;
}

/* flags.gfd belongs to GPU Feature Discovery: checked and kept for `gpuplane discover`; the device
 * plugin ignores it, as NVIDIA's does. The sleep interval is kept as written, with its position:
 * discover parses it (a bad one must not stop the device plugin). */
static int load_gfd(const struct loader *l, const json_t *gfd)
{
    static const char *const keys[] = {"oneshot",    "noTimestamp",     "sleepInterval",
                                       "outputFile", "machineTypeFile", NULL};
    struct dp_gfd *g = &l->cfg->gfd;
    int r = doc_check_keys(l->doc, gfd, keys, l->d);
    if (r >= 0)
        r = gfd_bool(l, gfd, "oneshot", &g->has_oneshot, &g->oneshot);
    if (r >= 0)
        r = gfd_bool(l, gfd, "noTimestamp", &g->has_no_timestamp, &g->no_timestamp);
    if (r >= 0)
        r = gfd_string(l, gfd, "sleepInterval", &g->sleep_interval);
    if (r >= 0 && member(gfd, "sleepInterval"))
        (void)doc_position(l->doc, member(gfd, "sleepInterval"), &g->sleep_interval_line,
                           &g->sleep_interval_col);
    if (r >= 0)
        r = gfd_string(l, gfd, "outputFile", &g->output_file);
    if (r >= 0)
        r = gfd_string(l, gfd, "machineTypeFile", &g->machine_type_file);
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
    if (r >= 0 && member(flags, "useNodeFeatureAPI")) {
        r = doc_get_bool(l->doc, flags, "useNodeFeatureAPI", false, false, l->d,
                         &l->cfg->use_node_feature_api);
        l->cfg->gfd.has_use_node_feature_api = r >= 0;
    }
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
        return dp_set_string(&res->advertised, res->name);
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
        dp_config_warn(l->cfg, "sharing.timeSlicing is ignored: sharing.mps is also configured");
    return r;
}

/* ---- health (gpuplane) ---- */

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
    int r = dp_duration_parse(json_string_value(v), &ms);
    if (r == -EINVAL)
        return doc_fail(l->doc, v, l->d, r,
                        "\"%s\": invalid duration \"%s\": want a number with a unit (ms, s, m, "
                        "h), e.g. \"5s\"",
                        key, json_string_value(v));
    dp_duration_format(min, lo);
    dp_duration_format(max, hi);
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
        dp_xid_set_all(&l->cfg->health, ignored);
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
        dp_xid_set_all(&l->cfg->health, !ignored);
    json_array_foreach(v, i, item)
    {
        dp_xid_set(&l->cfg->health, (unsigned)json_integer_value(item), ignored);
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
        r = dp_set_string(&cfg->config_file, path);
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
