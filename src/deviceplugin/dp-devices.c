/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which resources a node advertises and which device ids each holds. First every physical unit (a
 * full GPU or a MIG device) gets its base resource from the MIG strategy and the resource patterns
 * (nvidia-compat.md §1.4); then the sharing section turns selected units into replicas
 * "<uuid>::<r>" under the advertised name (rename, renameByDefault), with per-device replica counts
 * where the config gives them; finally units are grouped by resource name in inventory order.
 * Device ids are always UUIDs, as NVIDIA advertises them; the index form ("0", "1:0") is kept
 * beside each id for --device-id-strategy=index, which only changes what Allocate answers.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp.h"

/* One physical unit and where it ends up. */
struct unit {
    unsigned gpu;
    int mig;
    char base[DP_RESOURCE_NAME_MAX + 1]; /* resource before sharing */
    const char *name;                    /* final resource name (base or a shared entry's) */
    unsigned replicas;                   /* 0: not replicated */
    const struct dp_sharing *sharing;    /* the section that replicated it, or NULL */
};

/* '*' matches any run of characters; the whole string must match (NVIDIA anchors patterns). */
static bool glob_match(const char *p, const char *s)
{
    if (*p == '\0')
        return *s == '\0';
    if (*p == '*') {
        for (const char *t = s;; t++) {
            if (glob_match(p + 1, t))
                return true;
            if (*t == '\0')
                return false;
        }
    }
    return *p == *s && glob_match(p + 1, s + 1);
}

static const char *match_pattern(const struct dp_resource_pattern *pats, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (glob_match(pats[i].pattern, s))
            return pats[i].name;
    return NULL;
}

static int gpu_base_name(const struct dp_config *cfg, const struct gpu_device *dev, char *buf,
                         struct diag *d)
{
    const char *name = DP_RESOURCE_PREFIX "gpu";
    if (cfg->n_gpu_patterns > 0) {
        name = match_pattern(cfg->gpu_patterns, cfg->n_gpu_patterns, dev->name);
        if (!name)
            return diag_fail(d, -EINVAL, "GPU %u (%s) matches no pattern of resources.gpus",
                             dev->index, dev->name);
    }
    snprintf(buf, DP_RESOURCE_NAME_MAX + 1, "%s", name);
    return 0;
}

/* nvidia.com/mig-<profile> with '+' as '.', or the name of a matching resources.mig pattern. */
static int mig_base_name(const struct dp_config *cfg, const struct gpu_mig_device *mig, char *buf,
                         struct diag *d)
{
    if (cfg->n_mig_patterns > 0) {
        const char *name = match_pattern(cfg->mig_patterns, cfg->n_mig_patterns, mig->profile);
        if (!name)
            return diag_fail(d, -EINVAL, "MIG profile %s matches no pattern of resources.mig",
                             mig->profile);
        snprintf(buf, DP_RESOURCE_NAME_MAX + 1, "%s", name);
        return 0;
    }
    int n = snprintf(buf, DP_RESOURCE_NAME_MAX + 1, DP_RESOURCE_PREFIX "mig-%s", mig->profile);
    if (n < 0 || n > DP_RESOURCE_NAME_MAX)
        return diag_fail(d, -EINVAL, "MIG profile %s makes a resource name too long", mig->profile);
    for (char *c = buf; *c; c++)
        if (*c == '+')
            *c = '.';
    return 0;
}

static int push_unit(struct vec *units, unsigned gpu, int mig, const char *base)
{
    struct unit u = {.gpu = gpu, .mig = mig};
    snprintf(u.base, sizeof(u.base), "%s", base);
    return vec_push(units, &u);
}

/* MIG single, NVIDIA's checks in NVIDIA's order: no mix of MIG-enabled and MIG-disabled GPUs,
 * MIG devices on every GPU, and all of one profile. */
static int check_single(const struct gpu_inventory *inv, struct diag *d)
{
    const char *profile = NULL;
    for (size_t i = 0; i < inv->n_devices; i++) {
        const struct gpu_device *dev = &inv->devices[i];
        if (dev->uuid[0] && !dev->mig_enabled)
            return diag_fail(d, -EINVAL,
                             "mig-strategy single: GPU %u has MIG disabled while others have it "
                             "enabled",
                             dev->index);
    }
    for (size_t i = 0; i < inv->n_devices; i++) {
        const struct gpu_device *dev = &inv->devices[i];
        if (dev->uuid[0] && dev->n_migs == 0)
            return diag_fail(d, -EINVAL, "mig-strategy single: GPU %u has no MIG devices",
                             dev->index);
        for (size_t m = 0; m < dev->n_migs; m++) {
            if (profile && strcmp(profile, dev->migs[m].profile) != 0)
                return diag_fail(d, -EINVAL, "mig-strategy single: MIG devices differ (%s and %s)",
                                 profile, dev->migs[m].profile);
            profile = dev->migs[m].profile;
        }
    }
    return 0;
}

static bool any_mig_enabled(const struct gpu_inventory *inv)
{
    for (size_t i = 0; i < inv->n_devices; i++)
        if (inv->devices[i].uuid[0] && inv->devices[i].mig_enabled)
            return true;
    return false;
}

static int add_mig_units(const struct dp_config *cfg, const struct gpu_device *dev,
                         struct vec *units, struct diag *d)
{
    char name[DP_RESOURCE_NAME_MAX + 1];
    int r = 0;
    if (dev->n_migs == 0 && cfg->mig_strategy == DP_MIG_MIXED)
        log_warn("MIG-enabled GPU has no MIG devices", "uuid", dev->uuid);
    for (size_t m = 0; m < dev->n_migs && r >= 0; m++) {
        const struct gpu_mig_device *mig = &dev->migs[m];
        if (cfg->mig_strategy == DP_MIG_SINGLE) {
            r = push_unit(units, dev->index, (int)m, DP_RESOURCE_PREFIX "gpu");
            continue;
        }
        if (mig->ci_slices != mig->gi_slices)
            continue; /* 1c.3g.20gb and friends: NVIDIA does not expose them */
        r = mig_base_name(cfg, mig, name, d);
        if (r >= 0)
            r = push_unit(units, dev->index, (int)m, name);
    }
    return r;
}

static int collect_units(const struct dp_config *cfg, const struct gpu_inventory *inv,
                         struct vec *units, struct diag *d)
{
    char name[DP_RESOURCE_NAME_MAX + 1];
    int r = 0;
    bool use_mig = cfg->mig_strategy != DP_MIG_NONE && any_mig_enabled(inv);
    if (use_mig && cfg->mig_strategy == DP_MIG_SINGLE)
        r = check_single(inv, d);
    for (size_t i = 0; i < inv->n_devices && r >= 0; i++) {
        const struct gpu_device *dev = &inv->devices[i];
        if (!dev->uuid[0]) {
            log_warn("GPU without a UUID is not advertised", "index", LOG_INT(dev->index));
            continue;
        }
        if (use_mig && dev->mig_enabled) {
            r = add_mig_units(cfg, dev, units, d);
            continue;
        }
        r = gpu_base_name(cfg, dev, name, d);
        if (r >= 0)
            r = push_unit(units, dev->index, -1, name);
    }
    return r;
}

static void unit_index_id(const struct gpu_inventory *inv, const struct unit *u, char *buf)
{
    const struct gpu_device *dev = &inv->devices[u->gpu];
    if (u->mig < 0)
        snprintf(buf, DP_INDEX_ID_MAX, "%u", dev->index);
    else
        snprintf(buf, DP_INDEX_ID_MAX, "%u:%u", dev->index, dev->migs[u->mig].index);
}

static const char *unit_uuid(const struct gpu_inventory *inv, const struct unit *u)
{
    const struct gpu_device *dev = &inv->devices[u->gpu];
    return u->mig < 0 ? dev->uuid : dev->migs[u->mig].uuid;
}

/* The replicas a list entry gives this unit (by index, "gpu:mig" or UUID), 0 if none names it. */
static unsigned listed_replicas(const struct gpu_inventory *inv,
                                const struct dp_shared_resource *sr, const struct unit *u)
{
    char index_id[DP_INDEX_ID_MAX];
    unit_index_id(inv, u, index_id);
    for (size_t i = 0; i < sr->n_devices; i++) {
        const char *id = sr->devices[i].id;
        if (strcmp(id, index_id) == 0 || strcmp(id, unit_uuid(inv, u)) == 0)
            return (unsigned)sr->devices[i].replicas;
    }
    return 0;
}

static const struct dp_shared_resource *find_shared(const struct dp_sharing *sh, const char *name)
{
    for (size_t i = 0; sh && i < sh->n_resources; i++)
        if (strcmp(sh->resources[i].name, name) == 0)
            return &sh->resources[i];
    return NULL;
}

/* Decides name and replicas of every unit. ordinal counts units per base name for `devices: N`. */
static void apply_sharing(const struct dp_config *cfg, const struct gpu_inventory *inv,
                          struct unit *units, size_t n)
{
    const struct dp_sharing *sh = dp_config_sharing(cfg);
    for (size_t i = 0; i < n; i++) {
        struct unit *u = &units[i];
        const struct dp_shared_resource *sr = find_shared(sh, u->base);
        unsigned replicas = 0;
        size_t ordinal = 0;
        u->name = u->base;
        if (!sr)
            continue;
        for (size_t j = 0; j < i; j++)
            ordinal += strcmp(units[j].base, u->base) == 0;
        if (sr->devices_kind == DP_DEVICES_ALL)
            replicas = (unsigned)sr->replicas;
        else if (sr->devices_kind == DP_DEVICES_COUNT)
            replicas = ordinal < (size_t)sr->devices_count ? (unsigned)sr->replicas : 0;
        else
            replicas = listed_replicas(inv, sr, u);
        if (replicas == 0)
            continue;
        u->name = sr->advertised;
        /* One replica keeps the device whole, under the advertised name. */
        u->replicas = replicas >= 2 ? replicas : 0;
        u->sharing = replicas >= 2 ? sh : NULL;
    }
}

/* /proc/driver/nvidia-caps/mig-minors: "gpu<G>/gi<I>/access <minor>", ".../ci<C>/access <minor>".
 */
static int cap_minor(const char *text, unsigned gpu_minor, unsigned gi, int ci)
{
    char key[64];
    if (ci < 0)
        snprintf(key, sizeof(key), "gpu%u/gi%u/access ", gpu_minor, gi);
    else
        snprintf(key, sizeof(key), "gpu%u/gi%u/ci%d/access ", gpu_minor, gi, ci);
    size_t len = strlen(key);
    for (const char *line = text; line && *line;) {
        if (strncmp(line, key, len) == 0) {
            char *end;
            unsigned long v = strtoul(line + len, &end, 10);
            if (end != line + len && v <= 0xFFFFF)
                return (int)v;
        }
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    return -1;
}

static void fill_device(const struct gpu_inventory *inv, const struct unit *u, int replica,
                        const char *mig_minors, struct dp_device *dev)
{
    const struct gpu_device *gpu = &inv->devices[u->gpu];
    *dev = (struct dp_device){.gpu = u->gpu,
                              .mig = u->mig,
                              .replica = replica,
                              .numa = gpu->numa_node,
                              .minor = gpu->minor,
                              .caps = {-1, -1},
                              .healthy = !gpu->error};
    snprintf(dev->uuid, sizeof(dev->uuid), "%s", unit_uuid(inv, u));
    unit_index_id(inv, u, dev->index_id);
    if (replica >= 0)
        snprintf(dev->id, sizeof(dev->id), "%s::%d", dev->uuid, replica);
    else
        snprintf(dev->id, sizeof(dev->id), "%s", dev->uuid);
    if (u->mig >= 0 && mig_minors) {
        const struct gpu_mig_device *mig = &gpu->migs[u->mig];
        dev->caps[0] = cap_minor(mig_minors, gpu->minor, mig->gi_id, -1);
        dev->caps[1] = cap_minor(mig_minors, gpu->minor, mig->gi_id, (int)mig->ci_id);
    }
}

/* "nvidia.com/gpu.shared" -> "nvidia-gpu.shared.sock", as NVIDIA names its sockets. */
static int endpoint_name(const char *resource, char **ret)
{
    const char *slash = strchr(resource, '/');
    char *s = NULL;
    if (asprintf(&s, "nvidia-%s.sock", slash ? slash + 1 : resource) < 0)
        return -ENOMEM;
    *ret = s;
    return 0;
}

static int resource_init(struct dp_resource *r, const char *name, size_t n_devices)
{
    r->name = strdup(name);
    r->devices = calloc(n_devices ? n_devices : 1, sizeof(*r->devices));
    r->by_id = calloc(n_devices ? n_devices : 1, sizeof(*r->by_id));
    if (!r->name || !r->devices || !r->by_id)
        return -ENOMEM;
    return endpoint_name(name, &r->endpoint);
}

static size_t unit_devices(const struct unit *u)
{
    return u->replicas ? u->replicas : 1;
}

static int by_id_cmp(const void *a, const void *b, void *userdata)
{
    const struct dp_device *devs = userdata;
    return strcmp(devs[*(const size_t *)a].id, devs[*(const size_t *)b].id);
}

/* Fills resource r with the devices of every unit named r->name. */
static void fill_resource(struct dp_resource *r, const struct gpu_inventory *inv,
                          const struct unit *units, size_t n, const char *mig_minors)
{
    for (size_t i = 0; i < n; i++) {
        const struct unit *u = &units[i];
        if (strcmp(u->name, r->name) != 0)
            continue;
        if (u->sharing) {
            r->shared = true;
            r->fail_requests_greater_than_one |= u->sharing->fail_requests_greater_than_one;
        }
        for (size_t k = 0; k < unit_devices(u); k++) {
            int replica = u->replicas ? (int)k : -1;
            fill_device(inv, u, replica, mig_minors, &r->devices[r->n_devices]);
            if (u->gpu < TOPO_MAX_GPUS)
                r->per_gpu[u->gpu]++;
            r->by_id[r->n_devices] = r->n_devices;
            r->n_devices++;
        }
    }
    qsort_r(r->by_id, r->n_devices, sizeof(*r->by_id), by_id_cmp, r->devices);
}

static size_t count_devices(const struct unit *units, size_t n, const char *name)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(units[i].name, name) == 0)
            total += unit_devices(&units[i]);
    return total;
}

static bool seen_before(const struct unit *units, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (strcmp(units[j].name, units[i].name) == 0)
            return true;
    return false;
}

static int group_units(const struct dp_config *cfg, const struct gpu_inventory *inv,
                       const struct unit *units, size_t n, const char *mig_minors,
                       struct dp_resources *res)
{
    res->items = calloc(n ? n : 1, sizeof(*res->items));
    if (!res->items)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        if (seen_before(units, i))
            continue;
        struct dp_resource *r = &res->items[res->n++];
        int ret = resource_init(r, units[i].name, count_devices(units, n, units[i].name));
        if (ret < 0)
            return ret;
        fill_resource(r, inv, units, n, mig_minors);
        r->mps = r->shared && dp_config_sharing(cfg) == &cfg->mps;
    }
    return 0;
}

int dp_resources_build(const struct dp_config *cfg, const struct gpu_inventory *inv,
                       const char *mig_minors, struct diag *d, struct dp_resources **ret)
{
    _cleanup_(dp_resources_freep) struct dp_resources *res = calloc(1, sizeof(*res));
    struct vec units;
    vec_init(&units, sizeof(struct unit), 0);
    if (!res)
        return -ENOMEM;
    int r = collect_units(cfg, inv, &units, d);
    if (r >= 0) {
        apply_sharing(cfg, inv, units.items, units.len);
        r = group_units(cfg, inv, units.items, units.len, mig_minors, res);
    }
    vec_release(&units);
    if (r == -ENOMEM)
        return diag_fail(d, r, "out of memory");
    if (r < 0)
        return r;
    *ret = TAKE_PTR(res);
    return 0;
}

struct dp_resources *dp_resources_free(struct dp_resources *res)
{
    if (!res)
        return NULL;
    for (size_t i = 0; i < res->n; i++) {
        free(res->items[i].name);
        free(res->items[i].endpoint);
        free(res->items[i].devices);
        free(res->items[i].by_id);
    }
    free(res->items);
    free(res);
    return NULL;
}

const struct dp_device *dp_resource_find(const struct dp_resource *r, const char *id)
{
    size_t lo = 0, hi = r->n_devices;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct dp_device *dev = &r->devices[r->by_id[mid]];
        int c = strcmp(id, dev->id);
        if (c == 0)
            return dev;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

struct dp_resource *dp_resources_get(const struct dp_resources *res, const char *name)
{
    for (size_t i = 0; i < res->n; i++)
        if (strcmp(res->items[i].name, name) == 0)
            return &res->items[i];
    return NULL;
}

bool dp_resource_same_devices(const struct dp_resource *a, const struct dp_resource *b)
{
    if (a->n_devices != b->n_devices)
        return false;
    for (size_t i = 0; i < a->n_devices; i++) {
        const struct dp_device *x = &a->devices[i], *y = &b->devices[i];
        if (strcmp(x->id, y->id) != 0 || x->healthy != y->healthy || x->numa != y->numa)
            return false;
    }
    return true;
}
