/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Allocate answer, exactly as NVIDIA's plugin builds it (nvidia-compat.md §1.6): validate the
 * ids, turn them into physical ids (the UUID or the index, replicas folded into their device),
 * then, in NVIDIA's order: CDI names (annotation and/or CRI field), MPS, feature variables — and
 * stop there when every strategy is a CDI one — then NVIDIA_VISIBLE_DEVICES (envvar), the
 * volume-mounts list, and the device nodes with --pass-device-specs. A container runtime reads
 * these bytes, so the shapes matter more than anything else here.
 *
 * The response is built from malloc'd pieces only, so protobuf_c_message_free_unpacked() frees it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "dp.h"
#include "nvcdi.h"

#define CDI_VENDOR_CLASS "k8s.device-plugin.nvidia.com/"
#define VOLUME_MOUNTS_ROOT "/var/run/nvidia-container-devices"

typedef V1beta1__ContainerAllocateResponse Resp;
typedef V1beta1__ContainerAllocateResponse__EnvsEntry EnvEntry;
typedef V1beta1__ContainerAllocateResponse__AnnotationsEntry AnnEntry;

static const char *const control_nodes[DP_N_NODES] = {
    "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset"};

static const char *dev_root(const struct dp_config *cfg)
{
    return cfg->dev_root && cfg->dev_root[0] ? cfg->dev_root : cfg->driver_root;
}

/* root + path, without a doubled '/' ("/" + "/dev/x" is "/dev/x"). The caller frees. */
static char *join_root(const char *root, const char *path)
{
    size_t n = root ? strlen(root) : 0;
    while (n > 0 && root[n - 1] == '/')
        n--;
    char *s = NULL;
    if (asprintf(&s, "%.*s%s", (int)n, n ? root : "", path) < 0)
        return NULL;
    return s;
}

void dp_alloc_ctx_init(struct dp_alloc_ctx *ctx, const struct dp_config *cfg)
{
    *ctx = (struct dp_alloc_ctx){.cfg = cfg};
    for (size_t i = 0; i < DP_N_NODES; i++) {
        _cleanup_free_ char *p = join_root(dev_root(cfg), control_nodes[i]);
        struct stat st;
        ctx->node_present[i] = p && stat(p, &st) == 0;
    }
}

/* ---- growing the response ---- */

static int grow(void *arrayp, size_t n, size_t elem)
{
    void **array = arrayp;
    void *p = realloc(*array, (n + 1) * elem);
    if (!p)
        return -ENOMEM;
    *array = p;
    return 0;
}

/* Sets key to value, which it takes (also on failure); a NULL value is -ENOMEM. */
static int set_env_take(Resp *c, const char *key, char *value)
{
    _cleanup_free_ char *v = value;
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < c->n_envs; i++) {
        if (strcmp(c->envs[i]->key, key) != 0)
            continue;
        free(c->envs[i]->value);
        c->envs[i]->value = TAKE_PTR(v);
        return 0;
    }
    EnvEntry *e = malloc(sizeof(*e));
    if (!e || grow(&c->envs, c->n_envs, sizeof(*c->envs)) < 0)
        return free(e), -ENOMEM;
    v1beta1__container_allocate_response__envs_entry__init(e);
    c->envs[c->n_envs++] = e;
    e->key = strdup(key);
    e->value = TAKE_PTR(v);
    return e->key ? 0 : -ENOMEM;
}

static int set_env(Resp *c, const char *key, const char *value)
{
    return set_env_take(c, key, strdup(value));
}

static int add_annotation(Resp *c, const char *key, const char *value)
{
    AnnEntry *e = malloc(sizeof(*e));
    if (!e || grow(&c->annotations, c->n_annotations, sizeof(*c->annotations)) < 0)
        return free(e), -ENOMEM;
    v1beta1__container_allocate_response__annotations_entry__init(e);
    c->annotations[c->n_annotations++] = e;
    e->key = strdup(key);
    e->value = strdup(value);
    return e->key && e->value ? 0 : -ENOMEM;
}

static int add_mount(Resp *c, const char *container_path, const char *host_path)
{
    V1beta1__Mount *m = malloc(sizeof(*m));
    if (!m || grow(&c->mounts, c->n_mounts, sizeof(*c->mounts)) < 0)
        return free(m), -ENOMEM;
    v1beta1__mount__init(m);
    c->mounts[c->n_mounts++] = m;
    m->container_path = strdup(container_path);
    m->host_path = strdup(host_path);
    return m->container_path && m->host_path ? 0 : -ENOMEM;
}

static int add_cdi(Resp *c, const char *name)
{
    V1beta1__CDIDevice *d = malloc(sizeof(*d));
    if (!d || grow(&c->cdi_devices, c->n_cdi_devices, sizeof(*c->cdi_devices)) < 0)
        return free(d), -ENOMEM;
    v1beta1__cdidevice__init(d);
    c->cdi_devices[c->n_cdi_devices++] = d;
    d->name = strdup(name);
    return d->name ? 0 : -ENOMEM;
}

/* A device node, once per container path, host path under the dev root, "rw". */
static int add_spec(Resp *c, const struct dp_config *cfg, const char *path)
{
    for (size_t i = 0; i < c->n_devices; i++)
        if (strcmp(c->devices[i]->container_path, path) == 0)
            return 0;
    V1beta1__DeviceSpec *s = malloc(sizeof(*s));
    if (!s || grow(&c->devices, c->n_devices, sizeof(*c->devices)) < 0)
        return free(s), -ENOMEM;
    v1beta1__device_spec__init(s);
    c->devices[c->n_devices++] = s;
    s->container_path = strdup(path);
    s->host_path = join_root(dev_root(cfg), path);
    s->permissions = strdup("rw");
    return s->container_path && s->host_path && s->permissions ? 0 : -ENOMEM;
}

/* ---- ids ---- */

/* The physical ids of the request, in request order, each once. */
struct ids {
    const char *v[256];
    const struct dp_device *dev[256];
    size_t n;
};

static int fail(struct dp_error *err, enum rpc_code code, const char *fmt, ...) _printf_(3, 4);
static int fail(struct dp_error *err, enum rpc_code code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err->code = code;
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    return -EINVAL;
}

/* Adds the physical id of dev unless the request already named it (two replicas of one GPU). */
static int add_id(const struct dp_config *cfg, struct ids *ids, const struct dp_device *dev,
                  struct dp_error *err)
{
    const char *phys = cfg->device_id_strategy == DP_ID_INDEX ? dev->index_id : dev->uuid;
    for (size_t k = 0; k < ids->n; k++)
        if (strcmp(ids->v[k], phys) == 0)
            return 0;
    if (ids->n == ARRAY_SIZE(ids->v))
        return fail(err, RPC_INVALID_ARGUMENT, "too many devices in one request");
    ids->dev[ids->n] = dev;
    ids->v[ids->n++] = phys;
    return 0;
}

static int validate(const struct dp_alloc_ctx *ctx, const struct dp_resource *r,
                    const V1beta1__ContainerAllocateRequest *creq, struct ids *ids,
                    struct dp_error *err)
{
    bool replica = false;
    ids->n = 0;
    for (size_t i = 0; i < creq->n_devices_ids; i++) {
        const char *id = creq->devices_ids[i];
        const struct dp_device *dev = dp_resource_find(r, id);
        if (!dev)
            return fail(err, RPC_INVALID_ARGUMENT,
                        "invalid allocation request for \"%s\": unknown device: %s", r->name, id);
        if (!dev->healthy)
            return fail(err, RPC_FAILED_PRECONDITION,
                        "invalid allocation request for \"%s\": device %s is unhealthy", r->name,
                        id);
        replica |= dev->replica >= 0;
        int ret = add_id(ctx->cfg, ids, dev, err);
        if (ret < 0)
            return ret;
    }
    if (replica && r->fail_requests_greater_than_one && creq->n_devices_ids > 1)
        return fail(err, RPC_INVALID_ARGUMENT,
                    "maximum request size for shared resources is 1; found %zu",
                    creq->n_devices_ids);
    return 0;
}

static char *join_ids(const struct ids *ids)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    for (size_t i = 0; i < ids->n; i++)
        if ((i && strbuf_addch(&sb, ',') < 0) || strbuf_addstr(&sb, ids->v[i]) < 0)
            return NULL;
    return strbuf_detach(&sb, NULL);
}

static char *join_channels(const struct dp_config *cfg)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    for (size_t i = 0; i < cfg->n_imex_channel_ids; i++)
        if (strbuf_addf(&sb, i ? ",%u" : "%u", cfg->imex_channel_ids[i]) < 0)
            return NULL;
    return strbuf_detach(&sb, NULL);
}

/* ---- the strategies ---- */

static int cdi_names(const struct dp_config *cfg, const struct ids *ids, struct vec *names)
{
    static const char *const features[] = {"gdrcopy", "gds", "mofed"};
    const bool enabled[] = {cfg->gdrcopy_enabled, cfg->gds_enabled, cfg->mofed_enabled};
    char *name = NULL;
    int r = 0;
    for (size_t i = 0; i < ids->n && r >= 0; i++) {
        r = nvcdi_qualified_name_for_id(NVCDI_KIND_DEVICE_PLUGIN, ids->v[i], &name);
        if (r >= 0 && (r = vec_push(names, &name)) < 0)
            free(name);
    }
    for (size_t i = 0; i < cfg->n_imex_channel_ids && r >= 0; i++) {
        r = asprintf(&name, CDI_VENDOR_CLASS "imex-channel=%u", cfg->imex_channel_ids[i]) < 0
                ? -ENOMEM
                : 0;
        if (r >= 0 && (r = vec_push(names, &name)) < 0)
            free(name);
    }
    for (size_t i = 0; i < ARRAY_SIZE(features) && r >= 0; i++) {
        if (!enabled[i])
            continue;
        r = asprintf(&name, CDI_VENDOR_CLASS "%s=all", features[i]) < 0 ? -ENOMEM : 0;
        if (r >= 0 && (r = vec_push(names, &name)) < 0)
            free(name);
    }
    return r;
}

static void random_uuid(char out[37])
{
    uint8_t b[16] = {0};
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
        for (size_t i = 0; i < sizeof(b); i++)
            b[i] = (uint8_t)rand();
    b[6] = (uint8_t)((b[6] & 0x0F) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3F) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

static int cdi_annotation(const struct dp_alloc_ctx *ctx, Resp *c, const struct vec *names)
{
    char uuid[37];
    _cleanup_free_ char *key = NULL;
    _cleanup_strbuf_ struct strbuf value = STRBUF_INIT;
    (ctx->uuid_fn ? ctx->uuid_fn : random_uuid)(uuid);
    if (asprintf(&key, "%snvidia-device-plugin_%s", ctx->cfg->cdi_annotation_prefix, uuid) < 0)
        return -ENOMEM;
    for (size_t i = 0; i < names->len; i++)
        if ((i && strbuf_addch(&value, ',') < 0) ||
            strbuf_addstr(&value, *VEC_AT(names, char *, i)) < 0)
            return -ENOMEM;
    return add_annotation(c, key, strbuf_str(&value));
}

static void free_names(struct vec *names)
{
    for (size_t i = 0; i < names->len; i++)
        free(*VEC_AT(names, char *, i));
    vec_release(names);
}

static int apply_cdi(const struct dp_alloc_ctx *ctx, Resp *c, const struct ids *ids)
{
    unsigned s = ctx->cfg->device_list_strategy;
    struct vec names;
    vec_init(&names, sizeof(char *), 0);
    int r = cdi_names(ctx->cfg, ids, &names);
    if (r >= 0 && (s & DP_LIST_CDI_ANNOTATIONS) && names.len > 0)
        r = cdi_annotation(ctx, c, &names);
    for (size_t i = 0; r >= 0 && (s & DP_LIST_CDI_CRI) && i < names.len; i++)
        r = add_cdi(c, *VEC_AT(&names, char *, i));
    free_names(&names);
    return r;
}

static int apply_mps(const struct dp_config *cfg, const struct dp_resource *r, Resp *c)
{
    _cleanup_free_ char *pipe = NULL, *host_pipe = NULL, *shm = NULL;
    if (asprintf(&pipe, "/mps/%s/pipe", r->name) < 0)
        return -ENOMEM;
    host_pipe = join_root(cfg->mps_root, pipe + strlen("/mps"));
    shm = join_root(cfg->mps_root, "/shm");
    if (!host_pipe || !shm)
        return -ENOMEM;
    int ret = set_env(c, "CUDA_MPS_PIPE_DIRECTORY", pipe);
    if (ret >= 0)
        ret = add_mount(c, pipe, host_pipe);
    if (ret >= 0)
        ret = add_mount(c, "/dev/shm", shm);
    return ret;
}

static int apply_features(const struct dp_config *cfg, Resp *c)
{
    int r = 0;
    if (cfg->gdrcopy_enabled)
        r = set_env(c, "NVIDIA_GDRCOPY", "enabled");
    if (r >= 0 && cfg->gds_enabled)
        r = set_env(c, "NVIDIA_GDS", "enabled");
    if (r >= 0 && cfg->mofed_enabled)
        r = set_env(c, "NVIDIA_MOFED", "enabled");
    return r;
}

static int apply_envvar(const struct dp_config *cfg, Resp *c, const struct ids *ids)
{
    int r = set_env_take(c, "NVIDIA_VISIBLE_DEVICES", join_ids(ids));
    if (r >= 0 && cfg->n_imex_channel_ids > 0)
        r = set_env_take(c, "NVIDIA_IMEX_CHANNELS", join_channels(cfg));
    return r;
}

static int apply_volume_mounts(const struct dp_config *cfg, Resp *c, const struct ids *ids)
{
    char path[512];
    int r = set_env(c, "NVIDIA_VISIBLE_DEVICES", VOLUME_MOUNTS_ROOT);
    for (size_t i = 0; i < ids->n && r >= 0; i++) {
        snprintf(path, sizeof(path), VOLUME_MOUNTS_ROOT "/%s", ids->v[i]);
        r = add_mount(c, path, "/dev/null");
    }
    for (size_t i = 0; i < cfg->n_imex_channel_ids && r >= 0; i++) {
        snprintf(path, sizeof(path), VOLUME_MOUNTS_ROOT "/imex/%u", cfg->imex_channel_ids[i]);
        r = add_mount(c, path, "/dev/null");
    }
    return r;
}

static int device_nodes(const struct dp_config *cfg, Resp *c, const struct dp_device *dev)
{
    char path[64];
    snprintf(path, sizeof(path), "/dev/nvidia%u", dev->minor);
    int r = add_spec(c, cfg, path);
    for (size_t k = 0; dev->mig >= 0 && k < DP_MIG_CAPS && r >= 0; k++) {
        if (dev->caps[k] < 0)
            continue;
        snprintf(path, sizeof(path), "/dev/nvidia-caps/nvidia-cap%d", dev->caps[k]);
        r = add_spec(c, cfg, path);
    }
    return r;
}

static int apply_specs(const struct dp_alloc_ctx *ctx, Resp *c, const struct ids *ids)
{
    char path[96];
    int r = 0;
    for (size_t i = 0; i < DP_N_NODES && r >= 0; i++)
        if (ctx->node_present[i])
            r = add_spec(c, ctx->cfg, control_nodes[i]);
    for (size_t i = 0; i < ids->n && r >= 0; i++)
        r = device_nodes(ctx->cfg, c, ids->dev[i]);
    for (size_t i = 0; i < ctx->cfg->n_imex_channel_ids && r >= 0; i++) {
        snprintf(path, sizeof(path), "/dev/nvidia-caps-imex-channels/channel%u",
                 ctx->cfg->imex_channel_ids[i]);
        r = add_spec(c, ctx->cfg, path);
    }
    return r;
}

static const unsigned cdi_strategies = DP_LIST_CDI_ANNOTATIONS | DP_LIST_CDI_CRI;

static int build_container(const struct dp_alloc_ctx *ctx, const struct dp_resource *res,
                           const struct ids *ids, Resp *c)
{
    const struct dp_config *cfg = ctx->cfg;
    unsigned s = cfg->device_list_strategy;
    int r = 0;
    if (s & cdi_strategies)
        r = apply_cdi(ctx, c, ids);
    if (r >= 0 && res->mps)
        r = apply_mps(cfg, res, c);
    if (r >= 0)
        r = apply_features(cfg, c);
    if (r < 0 || (s & ~cdi_strategies) == 0)
        return r;
    if (s & DP_LIST_ENVVAR)
        r = apply_envvar(cfg, c, ids);
    if (r >= 0 && (s & DP_LIST_VOLUME_MOUNTS))
        r = apply_volume_mounts(cfg, c, ids);
    if (r >= 0 && cfg->pass_device_specs)
        r = apply_specs(ctx, c, ids);
    return r;
}

static int new_response(size_t n, V1beta1__AllocateResponse **ret)
{
    V1beta1__AllocateResponse *resp = malloc(sizeof(*resp));
    if (!resp)
        return -ENOMEM;
    v1beta1__allocate_response__init(resp);
    resp->container_responses = calloc(n ? n : 1, sizeof(*resp->container_responses));
    if (!resp->container_responses)
        return free(resp), -ENOMEM;
    *ret = resp;
    return 0;
}

static void response_freep(V1beta1__AllocateResponse **p)
{
    if (*p)
        protobuf_c_message_free_unpacked(&(*p)->base, NULL);
}

int dp_allocate(const struct dp_alloc_ctx *ctx, const struct dp_resource *r,
                const V1beta1__AllocateRequest *req, struct dp_error *err,
                V1beta1__AllocateResponse **ret)
{
    _cleanup_(response_freep) V1beta1__AllocateResponse *resp = NULL;
    struct ids ids;
    int ret_code = new_response(req->n_container_requests, &resp);
    for (size_t i = 0; i < req->n_container_requests && ret_code >= 0; i++) {
        ret_code = validate(ctx, r, req->container_requests[i], &ids, err);
        if (ret_code < 0)
            return ret_code;
        Resp *c = malloc(sizeof(*c));
        if (!c)
            return -ENOMEM;
        v1beta1__container_allocate_response__init(c);
        resp->container_responses[resp->n_container_responses++] = c;
        ret_code = build_container(ctx, r, &ids, c);
    }
    if (ret_code < 0)
        return fail(err, RPC_INTERNAL, "out of memory"), ret_code;
    *ret = TAKE_PTR(resp);
    return 0;
}
