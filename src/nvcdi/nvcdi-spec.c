/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Builds NVIDIA GPU specs the way nvidia-ctk does (cdi.md §7): per device only its own device
 * nodes, everything shared (control nodes, libraries, tools, hooks) once at spec level, and a
 * device "all" that is the union of every device. Host paths are the driver root (or dev root)
 * joined with the container path, so a containerised driver under /run/nvidia/driver is mounted
 * from there while containers see the usual paths.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "nvcdi-internal.h"

static const char *const MOUNT_OPTIONS[] = {"ro", "nosuid", "nodev", "rbind", "rprivate", NULL};
static const char *const HOOK_ENV[] = {"NVIDIA_CTK_DEBUG=false", NULL};

static void free_strs(struct vec *v)
{
    for (size_t i = 0; i < v->len; i++)
        free(*VEC_AT(v, char *, i));
    vec_release(v);
}

struct nvcdi *nvcdi_free(struct nvcdi *nv)
{
    if (!nv)
        return NULL;
    free(nv->kind);
    free(nv->root);
    free(nv->dev_root);
    free(nv->hook_path);
    free(nv->driver_version);
    free(nv->libcuda_dir);
    free_strs(&nv->nodes);
    free_strs(&nv->mounts);
    free_strs(&nv->lib_dirs);
    free_strs(&nv->links);
    vec_release(&nv->caps);
    free(nv);
    return NULL;
}

bool nvcdi_valid_driver_version(const char *v)
{
    if (!v[0] || strlen(v) >= GPU_VERSION_MAX)
        return false;
    for (const char *p = v; *p; p++)
        if (!strchr("0123456789.abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-", *p))
            return false;
    return v[0] != '.' && v[0] != '-';
}

static bool needs_caps(const struct gpu_inventory *inv)
{
    for (size_t i = 0; i < inv->n_devices; i++)
        if (!inv->devices[i].error && inv->devices[i].n_migs > 0)
            return true;
    return false;
}

static int set_roots(struct nvcdi *nv, const struct nvcdi_options *opts, struct diag *d)
{
    const char *root = opts->driver_root && opts->driver_root[0] ? opts->driver_root : "/";
    int r = nvcdi_check_root(root, "NVIDIA driver root", d, &nv->root);
    if (r < 0)
        return r;
    if (opts->dev_root && opts->dev_root[0])
        return nvcdi_check_root(opts->dev_root, "device root", d, &nv->dev_root);
    nv->dev_root = strdup(nv->root);
    return nv->dev_root ? 0 : -ENOMEM;
}

static int set_options(struct nvcdi *nv, const struct nvcdi_options *opts, struct diag *d)
{
    const char *kind = opts->kind ? opts->kind : NVCDI_KIND;
    const char *hook = opts->hook_path ? opts->hook_path : NVCDI_HOOK_PATH;
    unsigned all = NVCDI_NAME_INDEX | NVCDI_NAME_UUID | NVCDI_NAME_TYPE_INDEX;
    if (!cdi_valid_kind(kind))
        return diag_fail(d, -EINVAL, "invalid CDI kind \"%s\" (want vendor/class)", kind);
    if (hook[0] != '/' || strchr(hook, '\n'))
        return diag_fail(d, -EINVAL, "the CDI hook path \"%s\" must be absolute", hook);
    if (opts->strategies & ~all)
        return diag_fail(d, -EINVAL, "unknown device name strategy bits 0x%x", opts->strategies);
    nv->strategies = opts->strategies ? opts->strategies : NVCDI_NAME_DEFAULT;
    nv->no_all_device = opts->no_all_device;
    nv->no_hooks = opts->no_hooks;
    nv->kind = strdup(kind);
    nv->hook_path = strdup(hook);
    return nv->kind && nv->hook_path ? 0 : -ENOMEM;
}

int nvcdi_new(const struct gpu_inventory *inv, const struct nvcdi_options *opts, struct diag *d,
              struct nvcdi **ret)
{
    _cleanup_(nvcdi_freep) struct nvcdi *nv = NULL;
    static const struct nvcdi_options defaults = {0};
    if (!opts)
        opts = &defaults;
    if (!nvcdi_valid_driver_version(inv->driver_version))
        return diag_fail(d, -EINVAL, "unusable driver version \"%s\" from NVML",
                         inv->driver_version);
    nv = calloc(1, sizeof(*nv));
    if (!nv)
        return -ENOMEM;
    vec_init(&nv->nodes, sizeof(char *), CDI_LIST_MAX);
    vec_init(&nv->mounts, sizeof(char *), CDI_LIST_MAX);
    vec_init(&nv->lib_dirs, sizeof(char *), CDI_LIST_MAX);
    vec_init(&nv->links, sizeof(char *), CDI_LIST_MAX);
    vec_init(&nv->caps, sizeof(struct nvcdi_cap), CDI_LIST_MAX);
    nv->driver_version = strdup(inv->driver_version);
    if (!nv->driver_version)
        return -ENOMEM;
    int r = set_options(nv, opts, d);
    if (r >= 0)
        r = set_roots(nv, opts, d);
    if (r >= 0)
        r = nvcdi_scan(nv, needs_caps(inv), d);
    if (r < 0)
        return r == -ENOMEM ? diag_fail(d, r, "out of memory") : r;
    *ret = TAKE_PTR(nv);
    return 0;
}

/* A device node at rel in the container, from <root>rel on the host. */
static int add_node(struct cdi_edits *e, const char *root, const char *rel)
{
    char host[PATH_MAX];
    int n = snprintf(host, sizeof(host), "%s%s", root, rel);
    if (n < 0 || (size_t)n >= sizeof(host))
        return -ENAMETOOLONG;
    return cdi_edits_add_device_node(e, &(struct cdi_device_node){.path = rel, .host_path = host});
}

static int add_mounts(const struct nvcdi *nv, struct cdi_edits *e)
{
    char host[PATH_MAX * 2];
    int r = 0;
    for (size_t i = 0; i < nv->mounts.len && r >= 0; i++) {
        const char *rel = *VEC_AT(&nv->mounts, char *, i);
        snprintf(host, sizeof(host), "%s%s", nv->root, rel);
        r = cdi_edits_add_mount(e, host, rel, NULL, MOUNT_OPTIONS);
    }
    return r;
}

/* One createContainer hook "nvidia-cdi-hook <command> <args...>"; each of the n strings of list
 * (may be 0) follows flag ("--link", "--folder"). */
static int add_hook(const struct nvcdi *nv, struct cdi_edits *e, const char *command,
                    const char *arg, const char *flag, const struct vec *list)
{
    struct vec argv;
    const char *null = NULL;
    /* nvidia-ctk (the device plugin's default hook path) takes the hooks as "nvidia-ctk hook". */
    const char *base = strrchr(nv->hook_path, '/') + 1;
    bool ctk = strcmp(base, "nvidia-ctk") == 0;
    const char *head[] = {ctk ? "nvidia-ctk" : "nvidia-cdi-hook", ctk ? "hook" : NULL, command,
                          arg};
    vec_init(&argv, sizeof(char *), CDI_LIST_MAX);
    int r = 0;
    for (size_t i = 0; i < ARRAY_SIZE(head) && r >= 0; i++)
        if (head[i])
            r = vec_push(&argv, &head[i]);
    for (size_t i = 0; list && i < list->len && r >= 0; i++) {
        r = vec_push(&argv, &flag);
        if (r >= 0)
            r = vec_push(&argv, vec_at(list, i));
    }
    if (r >= 0)
        r = vec_push(&argv, &null);
    if (r >= 0)
        r = cdi_edits_add_hook(e, "createContainer", nv->hook_path, argv.items, HOOK_ENV, 0);
    vec_release(&argv);
    return r;
}

static int add_hooks(const struct nvcdi *nv, struct cdi_edits *e)
{
    char compat[GPU_VERSION_MAX + 32];
    int r = 0;
    snprintf(compat, sizeof(compat), "--host-driver-version=%s", nv->driver_version);
    if (nv->links.len > 0)
        r = add_hook(nv, e, "create-symlinks", NULL, "--link", &nv->links);
    if (r >= 0)
        r = add_hook(nv, e, "enable-cuda-compat", compat, NULL, NULL);
    if (r >= 0)
        r = add_hook(nv, e, "update-ldcache", NULL, "--folder", &nv->lib_dirs);
    if (r >= 0)
        r = add_hook(nv, e, "disable-device-node-modification", NULL, NULL, NULL);
    return r;
}

int nvcdi_add_common_edits(const struct nvcdi *nv, struct cdi_edits *e, struct diag *d)
{
    /* "void" keeps a legacy nvidia-container-runtime hook from injecting devices a second time. */
    int r = cdi_edits_add_env(e, "NVIDIA_VISIBLE_DEVICES", "void");
    if (r >= 0 && nv->libcuda_dir)
        r = cdi_edits_add_env(e, "NVIDIA_CTK_LIBCUDA_DIR", nv->libcuda_dir);
    for (size_t i = 0; i < nv->nodes.len && r >= 0; i++)
        r = add_node(e, nv->dev_root, *VEC_AT(&nv->nodes, char *, i));
    if (r >= 0)
        r = add_mounts(nv, e);
    if (r >= 0 && !nv->no_hooks)
        r = add_hooks(nv, e);
    if (r < 0)
        return diag_fail(d, r, "cannot build the common CDI edits: %s", strerror(-r));
    return 0;
}

static int add_cap_node(const struct nvcdi *nv, struct cdi_edits *e, const struct gpu_device *gpu,
                        const struct gpu_mig_device *mig, int ci, struct diag *d)
{
    char rel[64];
    unsigned minor;
    if (nvcdi_cap_minor(nv, gpu->minor, mig->gi_id, ci, &minor) < 0)
        return diag_fail(d, -ENOENT,
                         "MIG device %s: no capability minor for gpu%u/gi%u%s in "
                         "%s/proc/driver/nvidia-caps/mig-minors",
                         mig->uuid, gpu->minor, mig->gi_id, ci < 0 ? "" : "/ci", nv->root);
    snprintf(rel, sizeof(rel), "/dev/nvidia-caps/nvidia-cap%u", minor);
    return add_node(e, nv->dev_root, rel);
}

int nvcdi_add_device_edits(const struct nvcdi *nv, const struct gpu_device *gpu,
                           const struct gpu_mig_device *mig, struct cdi_edits *e, struct diag *d)
{
    char rel[64];
    snprintf(rel, sizeof(rel), "/dev/nvidia%u", gpu->minor);
    if (!nvcdi_dev_present(nv, rel))
        return diag_fail(d, -ENOENT,
                         "GPU %u (%s): device node %s%s not found: is the device root right?",
                         gpu->index, gpu->uuid, nv->dev_root, rel);
    int r = add_node(e, nv->dev_root, rel);
    /* A MIG device is reached through its parent's node plus its GI and CI capabilities. */
    if (r >= 0 && mig)
        r = add_cap_node(nv, e, gpu, mig, -1, d);
    if (r >= 0 && mig)
        r = add_cap_node(nv, e, gpu, mig, (int)mig->ci_id, d);
    return r;
}

/* The device under each of nv's names, all with the same edits; they join the union in all. */
static int add_named(const struct nvcdi *nv, struct cdi_spec *spec, const struct gpu_device *gpu,
                     const struct gpu_mig_device *mig, struct cdi_edits *all, struct diag *d)
{
    static const enum nvcdi_name_strategy ORDER[] = {NVCDI_NAME_INDEX, NVCDI_NAME_UUID,
                                                     NVCDI_NAME_TYPE_INDEX};
    struct cdi_edits edits;
    char name[NVCDI_NAME_MAX];
    cdi_edits_init(&edits);
    int r = nvcdi_add_device_edits(nv, gpu, mig, &edits, d);
    for (size_t i = 0; i < ARRAY_SIZE(ORDER) && r >= 0; i++) {
        struct cdi_device *dev;
        if (!(nv->strategies & ORDER[i]))
            continue;
        r = nvcdi_device_name(gpu, mig, ORDER[i], name);
        if (r < 0) {
            r = diag_fail(d, r, "GPU %u: no valid CDI device name for it", gpu->index);
            break;
        }
        r = cdi_spec_add_device(spec, name, d, &dev);
        if (r >= 0)
            r = cdi_edits_merge(&dev->edits, &edits);
    }
    if (r >= 0)
        r = cdi_edits_merge(all, &edits);
    cdi_edits_release(&edits);
    return r;
}

static int add_gpu(const struct nvcdi *nv, struct cdi_spec *spec, const struct gpu_device *gpu,
                   struct cdi_edits *all, struct diag *d)
{
    int r = add_named(nv, spec, gpu, NULL, all, d);
    for (size_t m = 0; m < gpu->n_migs && r >= 0; m++)
        r = add_named(nv, spec, gpu, &gpu->migs[m], all, d);
    return r;
}

static int add_all_device(struct cdi_spec *spec, const struct cdi_edits *all, struct diag *d)
{
    struct cdi_device *dev;
    int r = cdi_spec_add_device(spec, "all", d, &dev);
    return r < 0 ? r : cdi_edits_merge(&dev->edits, all);
}

int nvcdi_spec_new(const struct nvcdi *nv, const struct gpu_inventory *inv, struct diag *d,
                   struct cdi_spec **ret, size_t *ret_skipped)
{
    _cleanup_(cdi_spec_freep) struct cdi_spec *spec = NULL;
    struct cdi_edits all;
    size_t skipped = 0;
    int r = cdi_spec_new(nv->kind, d, &spec);
    if (r < 0)
        return r;
    cdi_edits_init(&all);
    for (size_t i = 0; i < inv->n_devices && r >= 0; i++) {
        /* A GPU NVML cannot talk to (lost, or failing) would only fail the containers using it. */
        if (inv->devices[i].error)
            skipped++;
        else
            r = add_gpu(nv, spec, &inv->devices[i], &all, d);
    }
    if (r >= 0 && spec->devices.len == 0)
        r = diag_fail(d, -ENODEV, "no usable GPUs for a CDI spec");
    if (r >= 0 && !nv->no_all_device)
        r = add_all_device(spec, &all, d);
    cdi_edits_release(&all);
    if (r >= 0)
        r = nvcdi_add_common_edits(nv, &spec->edits, d);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(spec);
    if (ret_skipped)
        *ret_skipped = skipped;
    return 0;
}
