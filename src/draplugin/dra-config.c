/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The opaque device configs a claim (or its class) hands to gpu.nvidia.com: NVIDIA's
 * resource.nvidia.com/v1beta1 GpuConfig and MigDeviceConfig (nvidia-compat.md §5.3). They are
 * decoded the way NVIDIA's driver decodes them, strictly: a field the API does not define is an
 * error naming its path, not something silently ignored, because a misspelt "stratgy" that
 * quietly left a GPU exclusive would be found only in production. Defaults follow NVIDIA's
 * normalisation: no sharing or no strategy means time-slicing with the default interval. The other
 * kinds of that API (VfioDeviceConfig, the ComputeDomain configs) belong to features gpuplane does
 * not have; they are refused by name so the user learns why rather than "unknown kind".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cel-quantity.h"
#include "dra-claim.h"

#define API_VERSION "resource.nvidia.com/v1beta1"
#define WANT "want GpuConfig or MigDeviceConfig of " API_VERSION

static const char *const unsupported_kinds[] = {
    "VfioDeviceConfig",
    "ComputeDomainChannelConfig",
    "ComputeDomainDaemonConfig",
};

static const char *const interval_names[] = {
    [DRA_TIMESLICE_DEFAULT] = "Default",
    [DRA_TIMESLICE_SHORT] = "Short",
    [DRA_TIMESLICE_MEDIUM] = "Medium",
    [DRA_TIMESLICE_LONG] = "Long",
};

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    default:
        return "null";
    }
}

/* A strict decoder's first complaint: a key of obj that is not in allowed (NULL-terminated). */
static int check_keys(const json_t *obj, const char *path, const char *const *allowed,
                      struct diag *d)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        size_t i = 0;
        while (allowed[i] && strcmp(allowed[i], key) != 0)
            i++;
        if (!allowed[i])
            return diag_fail(d, -EINVAL, "unknown field \"%s%s%s\"", path, path[0] ? "." : "", key);
    }
    return 0;
}

/* Go decodes 50.0 into an int; the range check keeps the cast defined. */
static bool integral(double x)
{
    return x >= -9e15 && x <= 9e15 && x == (double)(int64_t)x;
}

/* obj[key] when present and not null (Go leaves a null field unset); *ret NULL when absent.
 * -EINVAL when present with another type than want. */
static int get_field(const json_t *obj, const char *path, const char *key, json_type want,
                     struct diag *d, json_t **ret)
{
    json_t *v = json_object_get(obj, key);
    *ret = NULL;
    if (!v || json_is_null(v))
        return 0;
    bool ok = json_typeof(v) == want ||
              (want == JSON_INTEGER && json_is_real(v) && integral(json_real_value(v)));
    if (!ok) {
        const char *w = want == JSON_OBJECT   ? "an object"
                        : want == JSON_STRING ? "a string"
                                              : "an integer";
        return diag_fail(d, -EINVAL, "%s%s%s: expected %s, got %s", path, path[0] ? "." : "", key,
                         w, type_name(v));
    }
    *ret = v;
    return 0;
}

/* A Quantity as Kubernetes' JSON decoder takes it (a string, or a bare number), checked and not
 * negative; *ret is the text as given. */
static int get_quantity(const json_t *v, const char *what, struct diag *d, char **ret)
{
    char buf[64];
    const char *s;
    struct cel_quantity q;
    struct diag qd;
    if (json_is_string(v))
        s = json_string_value(v);
    else if (json_is_integer(v) &&
             snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v)) > 0)
        s = buf;
    else
        return diag_fail(d, -EINVAL, "%s: expected a quantity, got %s", what, type_name(v));
    diag_init(&qd);
    if (cel_quantity_parse(s, strlen(s), &qd, &q) < 0)
        return diag_fail(d, -EINVAL, "%s: invalid quantity \"%s\": %s", what, s, qd.msg);
    if (cel_quantity_sign(&q) < 0)
        return diag_fail(d, -EINVAL, "%s: must not be negative, got \"%s\"", what, s);
    *ret = strdup(s);
    return *ret ? 0 : -ENOMEM;
}

static int decode_timeslicing(const json_t *ts, struct diag *d, struct dra_config *c)
{
    static const char *const keys[] = {"interval", NULL};
    json_t *v;
    int r = check_keys(ts, "sharing.timeSlicingConfig", keys, d);
    if (r >= 0)
        r = get_field(ts, "sharing.timeSlicingConfig", "interval", JSON_STRING, d, &v);
    if (r < 0 || !v)
        return r;
    for (size_t i = 0; i < ARRAY_SIZE(interval_names); i++)
        if (strcmp(json_string_value(v), interval_names[i]) == 0) {
            c->interval = (enum dra_timeslice)i;
            return 0;
        }
    return diag_fail(d, -EINVAL,
                     "sharing.timeSlicingConfig.interval: unknown interval \"%s\" (want Default, "
                     "Short, Medium or Long)",
                     json_string_value(v));
}

static int decode_per_device(const json_t *map, struct diag *d, struct dra_config *c)
{
    _cleanup_json_ json_t *out = json_object();
    const char *key;
    json_t *v;
    if (!out)
        return -ENOMEM;
    json_object_foreach((json_t *)map, key, v)
    {
        _cleanup_free_ char *q = NULL;
        char what[128];
        snprintf(what, sizeof(what), "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit[%.60s]",
                 key);
        if (!key[0])
            return diag_fail(d, -EINVAL, "%s: empty device name", what);
        int r = get_quantity(v, what, d, &q);
        if (r < 0)
            return r;
        if (json_object_set_new(out, key, json_string(q)) < 0)
            return -ENOMEM;
    }
    c->mps_per_device_limits = TAKE_PTR(out);
    return 0;
}

static int decode_mps(const json_t *mps, struct diag *d, struct dra_config *c)
{
    static const char *const keys[] = {"defaultActiveThreadPercentage",
                                       "defaultPinnedDeviceMemoryLimit",
                                       "defaultPerDevicePinnedMemoryLimit", NULL};
    const char *path = "sharing.mpsConfig";
    json_t *pct, *limit, *per;
    int r = check_keys(mps, path, keys, d);
    if (r >= 0)
        r = get_field(mps, path, "defaultActiveThreadPercentage", JSON_INTEGER, d, &pct);
    if (r >= 0)
        r = get_field(mps, path, "defaultPerDevicePinnedMemoryLimit", JSON_OBJECT, d, &per);
    if (r < 0)
        return r;
    if (pct) {
        double p = json_is_real(pct) ? json_real_value(pct) : (double)json_integer_value(pct);
        if (p < 0 || p > 100)
            return diag_fail(d, -EINVAL,
                             "%s.defaultActiveThreadPercentage: must be between 0 and 100", path);
        c->mps_active_thread_percentage = (int)p;
    }
    limit = json_object_get(mps, "defaultPinnedDeviceMemoryLimit");
    if (limit && !json_is_null(limit)) {
        r = get_quantity(limit, "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit", d,
                         &c->mps_pinned_memory_limit);
        if (r < 0)
            return r;
    }
    return per ? decode_per_device(per, d, c) : 0;
}

static int decode_sharing(const json_t *sharing, struct diag *d, struct dra_config *c)
{
    static const char *const gpu_keys[] = {"strategy", "timeSlicingConfig", "mpsConfig", NULL};
    static const char *const mig_keys[] = {"strategy", "mpsConfig", NULL};
    json_t *strategy, *ts = NULL, *mps;
    int r = check_keys(sharing, "sharing", c->mig ? mig_keys : gpu_keys, d);
    if (r >= 0)
        r = get_field(sharing, "sharing", "strategy", JSON_STRING, d, &strategy);
    if (r >= 0 && !c->mig)
        r = get_field(sharing, "sharing", "timeSlicingConfig", JSON_OBJECT, d, &ts);
    if (r >= 0)
        r = get_field(sharing, "sharing", "mpsConfig", JSON_OBJECT, d, &mps);
    if (r < 0)
        return r;
    const char *s = strategy ? json_string_value(strategy) : "";
    if (!s[0] || strcmp(s, "TimeSlicing") == 0) {
        c->sharing = DRA_SHARING_TIMESLICING;
        if (mps)
            return diag_fail(d, -EINVAL,
                             "sharing.mpsConfig: not allowed with strategy TimeSlicing");
        return ts ? decode_timeslicing(ts, d, c) : 0;
    }
    if (strcmp(s, "MPS") == 0) {
        c->sharing = DRA_SHARING_MPS;
        if (ts)
            return diag_fail(d, -EINVAL,
                             "sharing.timeSlicingConfig: not allowed with strategy MPS");
        return mps ? decode_mps(mps, d, c) : 0;
    }
    return diag_fail(d, -EINVAL,
                     "sharing.strategy: unknown strategy \"%s\" (want TimeSlicing or MPS)", s);
}

/* The kind of a config: 0 GpuConfig, 1 MigDeviceConfig, or refused with the reason. */
static int check_type(const json_t *params, struct diag *d, bool *ret_mig)
{
    json_t *api, *kind;
    int r = get_field(params, "", "apiVersion", JSON_STRING, d, &api);
    if (r >= 0)
        r = get_field(params, "", "kind", JSON_STRING, d, &kind);
    if (r < 0)
        return r;
    if (!kind)
        return diag_fail(d, -EINVAL, "no kind (" WANT ")");
    const char *k = json_string_value(kind);
    if (!api || strcmp(json_string_value(api), API_VERSION) != 0)
        return diag_fail(d, -EINVAL, "unsupported apiVersion \"%s\" of kind \"%s\" (" WANT ")",
                         api ? json_string_value(api) : "", k);
    for (size_t i = 0; i < ARRAY_SIZE(unsupported_kinds); i++)
        if (strcmp(k, unsupported_kinds[i]) == 0)
            return diag_fail(d, -EINVAL,
                             "kind %s is not supported by gpuplane (only GpuConfig and "
                             "MigDeviceConfig are)",
                             k);
    if (strcmp(k, "GpuConfig") != 0 && strcmp(k, "MigDeviceConfig") != 0)
        return diag_fail(d, -EINVAL, "unsupported kind \"%s\" (" WANT ")", k);
    *ret_mig = strcmp(k, "MigDeviceConfig") == 0;
    return 0;
}

int dra_config_decode(const json_t *params, struct diag *d, struct dra_config *ret)
{
    static const char *const keys[] = {"apiVersion", "kind", "sharing", NULL};
    struct dra_config c = {.sharing = DRA_SHARING_TIMESLICING,
                           .interval = DRA_TIMESLICE_DEFAULT,
                           .mps_active_thread_percentage = -1};
    json_t *sharing;
    if (!json_is_object(params))
        return diag_fail(d, -EINVAL, "parameters: expected an object, got %s",
                         params ? type_name(params) : "nothing");
    int r = check_type(params, d, &c.mig);
    if (r >= 0)
        r = check_keys(params, "", keys, d);
    if (r >= 0)
        r = get_field(params, "", "sharing", JSON_OBJECT, d, &sharing);
    if (r >= 0 && sharing)
        r = decode_sharing(sharing, d, &c);
    if (r < 0) {
        dra_config_release(&c);
        return r;
    }
    *ret = c;
    return 0;
}

void dra_config_release(struct dra_config *c)
{
    free(c->mps_pinned_memory_limit);
    c->mps_pinned_memory_limit = NULL;
    json_decref(c->mps_per_device_limits);
    c->mps_per_device_limits = NULL;
}

int dra_config_copy(const struct dra_config *src, struct dra_config *ret)
{
    struct dra_config c = *src;
    c.mps_pinned_memory_limit = NULL;
    c.mps_per_device_limits = NULL;
    if (src->mps_pinned_memory_limit &&
        !(c.mps_pinned_memory_limit = strdup(src->mps_pinned_memory_limit)))
        return -ENOMEM;
    /* A deep copy: the copies may end up on different threads, and jansson's reference counts
     * are not meant to be shared across them. */
    if (src->mps_per_device_limits &&
        !(c.mps_per_device_limits = json_deep_copy(src->mps_per_device_limits))) {
        dra_config_release(&c);
        return -ENOMEM;
    }
    *ret = c;
    return 0;
}
