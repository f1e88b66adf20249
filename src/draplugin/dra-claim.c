/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A ResourceClaim as NodePrepareResources sees it. The kubelet names a claim only by namespace,
 * name and UID, so the driver reads the claim from the API and must check what the kubelet assumes
 * (kubelet-apis.md §5.3): the same UID (a claim deleted and re-created under the same name is
 * another claim), an allocation, and a reservation for a pod. Then it takes the allocation's
 * results that are its own on this node (gpuplane publishes one pool per node, named after it) and
 * finds for each the opaque config that applies, by NVIDIA's rules (nvidia-compat.md §5.3):
 * class configs before claim configs, the last one that names the result's request wins, and a
 * config that names no request applies to every result of its kind (a GpuConfig to full GPUs, a
 * MigDeviceConfig to MIG devices). A config that names a request outright but is of the wrong kind
 * for the device is an error, as in NVIDIA's driver. Every config of this driver is decoded, used
 * or not, so that a broken one is reported on the first prepare and not when a later allocation
 * happens to hit it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dra-checkpoint.h"
#include "dra-claim.h"

/* One opaque config of this driver, in the order of precedence. */
struct claim_config {
    size_t number;          /* 1-based position in status.allocation.devices.config */
    const json_t *requests; /* borrowed; NULL or [] = every request */
    struct dra_config config;
};

struct decoder {
    const char *driver, *node;
    struct diag *d;
    struct claim_config *configs;
    size_t n_configs;
    struct vec devices; /* struct dra_claim_device */
};

static void device_release(struct dra_claim_device *dev)
{
    free(dev->request);
    free(dev->base_request);
    free(dev->pool);
    free(dev->device);
    free(dev->share_id);
    dra_config_release(&dev->config);
}

struct dra_claim *dra_claim_free(struct dra_claim *c)
{
    if (!c)
        return NULL;
    for (size_t i = 0; i < c->n_devices; i++)
        device_release(&c->devices[i]);
    free(c->devices);
    free(c->uid);
    free(c->ns);
    free(c->name);
    free(c);
    return NULL;
}

char **dra_strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
    return NULL;
}

static void decoder_release(struct decoder *dec)
{
    for (size_t i = 0; i < dec->n_configs; i++)
        dra_config_release(&dec->configs[i].config);
    free(dec->configs);
    for (size_t i = 0; i < dec->devices.len; i++)
        device_release(VEC_AT(&dec->devices, struct dra_claim_device, i));
    vec_release(&dec->devices);
}

/* A string member, required or not; -EINVAL with "<what>.<key>: ..." otherwise. */
static int get_string(const json_t *obj, const char *key, bool required, const char *what,
                      struct diag *d, const char **ret)
{
    json_t *v = json_object_get(obj, key);
    *ret = NULL;
    if (!v || json_is_null(v)) {
        if (required)
            return diag_fail(d, -EINVAL, "%s.%s: missing", what, key);
        return 0;
    }
    if (!json_is_string(v))
        return diag_fail(d, -EINVAL, "%s.%s: expected a string", what, key);
    if (required && !json_string_value(v)[0])
        return diag_fail(d, -EINVAL, "%s.%s: empty", what, key);
    *ret = json_string_value(v);
    return 0;
}

/* An optional member of the given type (null counts as absent). */
static int get_typed(const json_t *obj, const char *key, json_type type, const char *what,
                     struct diag *d, json_t **ret)
{
    json_t *v = json_object_get(obj, key);
    *ret = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (json_typeof(v) != type)
        return diag_fail(d, -EINVAL, "%s.%s: expected %s", what, key,
                         type == JSON_OBJECT ? "an object" : "an array");
    *ret = v;
    return 0;
}

/* ---- configs ---- */

static int check_requests(const json_t *requests, const char *what, struct diag *d)
{
    size_t i;
    json_t *r;
    json_array_foreach(requests, i, r)
    {
        if (!json_is_string(r) || !json_string_value(r)[0])
            return diag_fail(d, -EINVAL, "%s: requests[%zu]: expected a request name", what, i);
    }
    return 0;
}

/* Decodes config entry i of list when it is an opaque config of this driver from source. */
static int take_config(struct decoder *dec, const json_t *entry, size_t i, const char *source)
{
    char what[48];
    const char *src, *driver;
    json_t *requests, *opaque;
    struct diag cd;
    snprintf(what, sizeof(what), "config #%zu", i + 1);
    if (!json_is_object(entry))
        return diag_fail(dec->d, -EINVAL, "%s: expected an object", what);
    int r = get_string(entry, "source", true, what, dec->d, &src);
    if (r >= 0 && strcmp(src, "FromClass") != 0 && strcmp(src, "FromClaim") != 0)
        r = diag_fail(dec->d, -EINVAL, "%s: unknown source \"%s\"", what, src);
    if (r >= 0)
        r = get_typed(entry, "requests", JSON_ARRAY, what, dec->d, &requests);
    if (r >= 0 && requests)
        r = check_requests(requests, what, dec->d);
    if (r >= 0)
        r = get_typed(entry, "opaque", JSON_OBJECT, what, dec->d, &opaque);
    if (r < 0 || strcmp(src, source) != 0 || !opaque)
        return r;
    snprintf(what, sizeof(what), "config #%zu: opaque", i + 1);
    r = get_string(opaque, "driver", true, what, dec->d, &driver);
    if (r < 0 || strcmp(driver, dec->driver) != 0)
        return r;
    struct claim_config *c = &dec->configs[dec->n_configs];
    diag_init(&cd);
    r = dra_config_decode(json_object_get(opaque, "parameters"), &cd, &c->config);
    if (r < 0)
        return diag_fail(dec->d, r, "config #%zu: %s", i + 1, cd.msg);
    c->number = i + 1;
    c->requests = requests;
    dec->n_configs++;
    return 0;
}

static int take_configs(struct decoder *dec, const json_t *list)
{
    static const char *const sources[] = {"FromClass", "FromClaim"};
    size_t n = json_array_size(list);
    if (n == 0)
        return 0;
    dec->configs = calloc(n, sizeof(*dec->configs));
    if (!dec->configs)
        return -ENOMEM;
    for (size_t s = 0; s < ARRAY_SIZE(sources); s++)
        for (size_t i = 0; i < n; i++) {
            int r = take_config(dec, json_array_get(list, i), i, sources[s]);
            if (r < 0)
                return r;
        }
    return 0;
}

/* Whether a config's requests name the result's request ("gpu" names "gpu/a" too). */
static bool names_request(const json_t *requests, const char *request, const char *base)
{
    size_t i;
    json_t *r;
    json_array_foreach(requests, i, r)
    {
        const char *s = json_string_value(r);
        if (strcmp(s, request) == 0 || strcmp(s, base) == 0)
            return true;
    }
    return false;
}

static int pick_config(struct decoder *dec, struct dra_claim_device *dev, enum dra_device_type type)
{
    bool mig = type == DRA_DEVICE_MIG;
    for (size_t k = dec->n_configs; k-- > 0;) {
        const struct claim_config *c = &dec->configs[k];
        if (json_array_size(c->requests) == 0) {
            if (c->config.mig != mig)
                continue;
        } else if (!names_request(c->requests, dev->request, dev->base_request)) {
            continue;
        } else if (c->config.mig != mig) {
            return diag_fail(dec->d, -EINVAL,
                             "config #%zu: a %s cannot apply to %s %s (request \"%s\")", c->number,
                             c->config.mig ? "MigDeviceConfig" : "GpuConfig",
                             mig ? "the MIG device" : "the full GPU", dev->device, dev->request);
        }
        return dra_config_copy(&c->config, &dev->config);
    }
    dev->config =
        (struct dra_config){.sharing = DRA_SHARING_NONE, .mps_active_thread_percentage = -1};
    return 0;
}

/* ---- results ---- */

static int dup_or_null(const char *s, char **ret)
{
    *ret = NULL;
    if (s && !(*ret = strdup(s)))
        return -ENOMEM;
    return 0;
}

static int fill_device(struct dra_claim_device *dev, const char *request, const char *pool,
                       const char *device, const char *share_id)
{
    size_t base = strcspn(request, "/");
    int r = dup_or_null(request, &dev->request);
    if (r >= 0)
        r = dup_or_null(pool, &dev->pool);
    if (r >= 0)
        r = dup_or_null(device, &dev->device);
    if (r >= 0)
        r = dup_or_null(share_id, &dev->share_id);
    if (r >= 0 && !(dev->base_request = strndup(request, base)))
        r = -ENOMEM;
    return r;
}

static int take_result(struct decoder *dec, const json_t *res, size_t i)
{
    char what[48];
    const char *request, *driver, *pool, *device, *share_id;
    enum dra_device_type type;
    struct dra_claim_device dev = {0};
    snprintf(what, sizeof(what), "result #%zu", i + 1);
    if (!json_is_object(res))
        return diag_fail(dec->d, -EINVAL, "%s: expected an object", what);
    int r = get_string(res, "request", true, what, dec->d, &request);
    if (r >= 0)
        r = get_string(res, "driver", true, what, dec->d, &driver);
    if (r >= 0)
        r = get_string(res, "pool", true, what, dec->d, &pool);
    if (r >= 0)
        r = get_string(res, "device", true, what, dec->d, &device);
    if (r >= 0)
        r = get_string(res, "shareID", false, what, dec->d, &share_id);
    if (r < 0 || strcmp(driver, dec->driver) != 0 || strcmp(pool, dec->node) != 0)
        return r;
    json_t *admin = json_object_get(res, "adminAccess");
    if (admin && !json_is_null(admin) && !json_is_boolean(admin))
        return diag_fail(dec->d, -EINVAL, "%s.adminAccess: expected a boolean", what);
    if (request[0] == '/' || request[strlen(request) - 1] == '/')
        return diag_fail(dec->d, -EINVAL, "%s.request: invalid request name \"%s\"", what, request);
    if (dra_device_type(device, &type) < 0)
        return diag_fail(dec->d, -EINVAL, "%s: device \"%s\" is not a device gpuplane publishes",
                         what, device);
    /* The share ID ends up in checkpoints and answers; it has the shape of a UID. */
    if (share_id && !dra_claim_uid_valid(share_id))
        return diag_fail(dec->d, -EINVAL, "%s.shareID: invalid \"%s\"", what, share_id);
    dev.admin_access = json_is_true(admin);
    r = fill_device(&dev, request, pool, device, share_id);
    if (r >= 0)
        r = pick_config(dec, &dev, type);
    if (r >= 0)
        r = vec_push(&dec->devices, &dev);
    if (r < 0)
        device_release(&dev);
    return r;
}

/* ---- the claim ---- */

static int check_claim(const json_t *obj, const char *uid, struct diag *d, const char **ret_ns,
                       const char **ret_name, json_t **ret_alloc)
{
    const char *muid;
    json_t *meta, *status, *reserved;
    if (!json_is_object(obj))
        return diag_fail(d, -EINVAL, "the claim is not a JSON object");
    int r = get_typed(obj, "metadata", JSON_OBJECT, "claim", d, &meta);
    if (r >= 0 && !meta)
        r = diag_fail(d, -EINVAL, "claim.metadata: missing");
    if (r >= 0)
        r = get_string(meta, "uid", true, "metadata", d, &muid);
    if (r >= 0)
        r = get_string(meta, "namespace", true, "metadata", d, ret_ns);
    if (r >= 0)
        r = get_string(meta, "name", true, "metadata", d, ret_name);
    if (r < 0)
        return r;
    if (strcmp(muid, uid) != 0)
        return diag_fail(d, -EINVAL,
                         "UID mismatch: ResourceClaim %s/%s has UID %s, the kubelet asked for %s "
                         "(the claim was replaced)",
                         *ret_ns, *ret_name, muid, uid);
    r = get_typed(obj, "status", JSON_OBJECT, "claim", d, &status);
    if (r >= 0 && status)
        r = get_typed(status, "allocation", JSON_OBJECT, "status", d, ret_alloc);
    if (r < 0)
        return r;
    if (!status || !*ret_alloc)
        return diag_fail(d, -EINVAL, "ResourceClaim %s/%s is not allocated", *ret_ns, *ret_name);
    r = get_typed(status, "reservedFor", JSON_ARRAY, "status", d, &reserved);
    if (r < 0)
        return r;
    if (json_array_size(reserved) == 0)
        return diag_fail(d, -EINVAL, "ResourceClaim %s/%s is not reserved for any pod", *ret_ns,
                         *ret_name);
    return 0;
}

static int make_claim(struct decoder *dec, const char *uid, const char *ns, const char *name,
                      struct dra_claim **ret)
{
    _cleanup_(dra_claim_freep) struct dra_claim *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    int r = dup_or_null(uid, &c->uid);
    if (r >= 0)
        r = dup_or_null(ns, &c->ns);
    if (r >= 0)
        r = dup_or_null(name, &c->name);
    if (r < 0)
        return r;
    c->devices = vec_detach(&dec->devices, &c->n_devices);
    *ret = TAKE_PTR(c);
    return 0;
}

int dra_claim_decode(json_t *obj, const char *uid, const char *driver, const char *node,
                     struct diag *d, struct dra_claim **ret)
{
    struct decoder dec = {.driver = driver, .node = node, .d = d};
    const char *ns = NULL, *name = NULL;
    json_t *alloc = NULL, *devices = NULL, *results = NULL, *configs = NULL;
    vec_init(&dec.devices, sizeof(struct dra_claim_device), 0);
    int r = check_claim(obj, uid, d, &ns, &name, &alloc);
    if (r >= 0)
        r = get_typed(alloc, "devices", JSON_OBJECT, "allocation", d, &devices);
    if (r >= 0 && devices)
        r = get_typed(devices, "results", JSON_ARRAY, "allocation.devices", d, &results);
    if (r >= 0 && devices)
        r = get_typed(devices, "config", JSON_ARRAY, "allocation.devices", d, &configs);
    if (r >= 0)
        r = take_configs(&dec, configs);
    for (size_t i = 0; r >= 0 && i < json_array_size(results); i++)
        r = take_result(&dec, json_array_get(results, i), i);
    if (r >= 0)
        r = make_claim(&dec, uid, ns, name, ret);
    if (r == -ENOMEM)
        r = diag_fail(d, r, "out of memory");
    decoder_release(&dec);
    return r;
}
