/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CDI specs the device plugin writes when a device-list strategy is a CDI one, as NVIDIA's
 * plugin does at start-up (nvidia-compat.md §1.6, cdi.md §5, §7): one spec per class of the kind
 * k8s.device-plugin.nvidia.com/<class> in the spec directory, named <vendor>-<class>.json, so that
 * every name Allocate hands out resolves. The gpu class holds one device per physical device the
 * resources advertise, named as Allocate names it (the UUID, or the index with
 * --device-id-strategy=index), plus "all"; imex-channel one device per configured channel; the
 * features (gdrcopy, gds, mofed) a device "all" with their device nodes. A class that would be
 * empty gets no file (NVIDIA drops empty specs), and writing removes the file of such a class, so a
 * reload that turns a feature off leaves nothing stale behind.
 */
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dp.h"
#include "nvcdi.h"

static const char *const class_names[DP_CDI_N] = {"gpu", "imex-channel", "gdrcopy", "gds", "mofed"};

/* Device nodes of a feature, as globs under the dev root. */
static const char *const gdrcopy_nodes[] = {"/dev/gdrdrv", NULL};
static const char *const gds_nodes[] = {"/dev/nvidia-fs*", NULL};
static const char *const mofed_nodes[] = {"/dev/infiniband/*", NULL};

const char *dp_cdi_class_name(enum dp_cdi_class c)
{
    return c < DP_CDI_N ? class_names[c] : NULL;
}

bool dp_cdi_wanted(const struct dp_config *cfg)
{
    return (cfg->device_list_strategy & (DP_LIST_CDI_ANNOTATIONS | DP_LIST_CDI_CRI)) != 0;
}

static const char *dev_root(const struct dp_config *cfg)
{
    const char *root = cfg->dev_root && cfg->dev_root[0] ? cfg->dev_root : cfg->driver_root;
    return root && strcmp(root, "/") != 0 ? root : "";
}

static bool hooks_disabled(const struct dp_config *cfg)
{
    for (char **h = cfg->cdi_disable_hooks; h && *h; h++)
        if (strcmp(*h, "all") == 0)
            return true;
    return false;
}

void dp_cdi_release(struct dp_cdi *c)
{
    for (size_t i = 0; i < DP_CDI_N; i++)
        c->specs[i] = cdi_spec_free(c->specs[i]);
}

static int new_spec(enum dp_cdi_class c, struct diag *d, struct cdi_spec **ret)
{
    char kind[128];
    snprintf(kind, sizeof(kind), DP_CDI_VENDOR "/%s", class_names[c]);
    return cdi_spec_new(kind, d, ret);
}

/* ---- gpu ---- */

/* The name Allocate gives the physical device of dev (nvcdi_qualified_name_for_id's part after
 * '='): the UUID, or the index form. */
static const char *physical_name(const struct dp_config *cfg, const struct dp_device *dev)
{
    return cfg->device_id_strategy == DP_ID_INDEX ? dev->index_id : dev->uuid;
}

static int add_gpu_device(const struct nvcdi *nv, const struct dp_config *cfg,
                          const struct gpu_inventory *inv, const struct dp_device *dev,
                          struct cdi_spec *spec, struct cdi_edits *all, struct diag *d)
{
    const struct gpu_device *gpu = &inv->devices[dev->gpu];
    const struct gpu_mig_device *mig = dev->mig >= 0 ? &gpu->migs[dev->mig] : NULL;
    const char *name = physical_name(cfg, dev);
    struct cdi_device *cd = NULL;
    /* Replicas share their device; a GPU NVML cannot reach is advertised Unhealthy and never
     * allocated (a rebuild adds it once it answers again). */
    if (gpu->error || cdi_spec_find_device(spec, name))
        return 0;
    int r = cdi_spec_add_device(spec, name, d, &cd);
    if (r >= 0)
        r = nvcdi_add_device_edits(nv, gpu, mig, &cd->edits, d);
    if (r >= 0)
        r = cdi_edits_merge(all, &cd->edits);
    return r;
}

static int build_gpu(const struct dp_config *cfg, const struct gpu_inventory *inv,
                     const struct dp_resources *res, struct diag *d, struct cdi_spec **ret)
{
    _cleanup_(nvcdi_freep) struct nvcdi *nv = NULL;
    _cleanup_(cdi_spec_freep) struct cdi_spec *spec = NULL;
    struct cdi_device *dall = NULL;
    struct cdi_edits all;
    const struct nvcdi_options opts = {
        .kind = NVCDI_KIND_DEVICE_PLUGIN,
        .driver_root = cfg->driver_root,
        .dev_root = cfg->dev_root,
        .hook_path = cfg->nvidia_cdi_hook_path,
        .strategies = cfg->device_id_strategy == DP_ID_INDEX ? NVCDI_NAME_INDEX : NVCDI_NAME_UUID,
        .no_hooks = hooks_disabled(cfg),
    };
    int r = nvcdi_new(inv, &opts, d, &nv);
    if (r >= 0)
        r = new_spec(DP_CDI_GPU, d, &spec);
    if (r < 0)
        return r;
    cdi_edits_init(&all);
    for (size_t i = 0; i < res->n && r >= 0; i++)
        for (size_t k = 0; k < res->items[i].n_devices && r >= 0; k++)
            r = add_gpu_device(nv, cfg, inv, &res->items[i].devices[k], spec, &all, d);
    if (r >= 0 && spec->devices.len > 0)
        r = cdi_spec_add_device(spec, "all", d, &dall);
    if (r >= 0 && dall)
        r = cdi_edits_merge(&dall->edits, &all);
    cdi_edits_release(&all);
    if (r >= 0 && spec->devices.len > 0)
        r = nvcdi_add_common_edits(nv, &spec->edits, d);
    if (r < 0)
        return r == -ENOMEM ? diag_fail(d, r, "out of memory") : r;
    *ret = spec->devices.len > 0 ? TAKE_PTR(spec) : NULL;
    return 0;
}

/* ---- imex channels and features ---- */

/* Adds every node matching pattern (a glob of a container path) under root; counts them. */
static int add_nodes(struct cdi_edits *e, const char *root, const char *pattern, size_t *count)
{
    char host[4096];
    glob_t g = {0};
    snprintf(host, sizeof(host), "%s%s", root, pattern);
    int gr = glob(host, 0, NULL, &g);
    int r = gr == 0 || gr == GLOB_NOMATCH ? 0 : -EIO;
    for (size_t i = 0; gr == 0 && i < g.gl_pathc && r >= 0; i++) {
        struct stat st;
        const char *path = g.gl_pathv[i];
        if (stat(path, &st) < 0 || S_ISDIR(st.st_mode))
            continue;
        r = cdi_edits_add_device_node(
            e, &(struct cdi_device_node){.path = path + strlen(root), .host_path = path});
        *count += r >= 0;
    }
    globfree(&g);
    return r;
}

static int build_imex(const struct dp_config *cfg, struct diag *d, struct cdi_spec **ret)
{
    _cleanup_(cdi_spec_freep) struct cdi_spec *spec = NULL;
    int r = new_spec(DP_CDI_IMEX_CHANNEL, d, &spec);
    for (size_t i = 0; i < cfg->n_imex_channel_ids && r >= 0; i++) {
        char rel[96], name[16];
        struct cdi_edits e;
        struct cdi_device *cd;
        size_t found = 0;
        snprintf(rel, sizeof(rel), "/dev/nvidia-caps-imex-channels/channel%u",
                 cfg->imex_channel_ids[i]);
        snprintf(name, sizeof(name), "%u", cfg->imex_channel_ids[i]);
        cdi_edits_init(&e);
        r = add_nodes(&e, dev_root(cfg), rel, &found);
        if (r >= 0 && found > 0 && (r = cdi_spec_add_device(spec, name, d, &cd)) >= 0)
            r = cdi_edits_merge(&cd->edits, &e);
        cdi_edits_release(&e);
    }
    if (r < 0)
        return r;
    *ret = spec->devices.len > 0 ? TAKE_PTR(spec) : NULL;
    return 0;
}

static int build_feature(const struct dp_config *cfg, enum dp_cdi_class c,
                         const char *const *patterns, struct diag *d, struct cdi_spec **ret)
{
    _cleanup_(cdi_spec_freep) struct cdi_spec *spec = NULL;
    struct cdi_device *cd = NULL;
    size_t found = 0;
    int r = new_spec(c, d, &spec);
    if (r >= 0)
        r = cdi_spec_add_device(spec, "all", d, &cd);
    for (size_t i = 0; patterns[i] && r >= 0; i++)
        r = add_nodes(&cd->edits, dev_root(cfg), patterns[i], &found);
    if (r < 0)
        return r;
    *ret = found > 0 ? TAKE_PTR(spec) : NULL;
    return 0;
}

int dp_cdi_build(const struct dp_config *cfg, const struct gpu_inventory *inv,
                 const struct dp_resources *res, struct diag *d, struct dp_cdi *ret)
{
    struct dp_cdi c = {0};
    int r = 0;
    if (dp_cdi_wanted(cfg)) {
        r = build_gpu(cfg, inv, res, d, &c.specs[DP_CDI_GPU]);
        if (r >= 0)
            r = build_imex(cfg, d, &c.specs[DP_CDI_IMEX_CHANNEL]);
        if (r >= 0 && cfg->gdrcopy_enabled)
            r = build_feature(cfg, DP_CDI_GDRCOPY, gdrcopy_nodes, d, &c.specs[DP_CDI_GDRCOPY]);
        if (r >= 0 && cfg->gds_enabled)
            r = build_feature(cfg, DP_CDI_GDS, gds_nodes, d, &c.specs[DP_CDI_GDS]);
        if (r >= 0 && cfg->mofed_enabled)
            r = build_feature(cfg, DP_CDI_MOFED, mofed_nodes, d, &c.specs[DP_CDI_MOFED]);
    }
    if (r < 0) {
        dp_cdi_release(&c);
        return d->msg[0] ? r : diag_fail(d, r, "cannot build the CDI specs: %s", strerror(-r));
    }
    *ret = c;
    return 0;
}

int dp_cdi_write(const struct dp_cdi *c, const char *dir, struct diag *d)
{
    int r = 0;
    for (size_t i = 0; i < DP_CDI_N && r >= 0; i++) {
        if (c->specs[i]) {
            r = cdi_spec_write(c->specs[i], dir, NULL, CDI_FORMAT_JSON, d, NULL);
        } else {
            char kind[128];
            snprintf(kind, sizeof(kind), DP_CDI_VENDOR "/%s", class_names[i]);
            r = cdi_spec_remove(dir, kind, NULL, d);
        }
    }
    return r;
}

int dp_cdi_remove(const char *dir, struct diag *d)
{
    static const struct dp_cdi none = {0};
    return dp_cdi_write(&none, dir, d);
}
