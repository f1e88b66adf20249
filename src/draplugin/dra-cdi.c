/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The per-claim CDI spec (nvidia-compat.md §5.3): kind k8s.gpu.nvidia.com/claim, one transient
 * file k8s.gpu.nvidia.com-claim_<claim UID>.yaml in the CDI root, one device "<UID>-<device>"
 * per device of the claim, the driver's shared edits (control nodes, libraries, hooks) at spec
 * level. The names are NVIDIA's, so a container that names a CDI device of a claim prepared by
 * NVIDIA's driver names the same thing here. The file is validated, written to a temporary name
 * and renamed (cdi_spec_write), so a runtime scanning the directory never reads half a spec.
 *
 * Sharing: time-slicing is a setting of the GPU, not of the container, so it adds nothing here
 * (the config is kept with the claim). MPS adds what NVIDIA's driver injects for its per-claim
 * control daemon: CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps, the claim's pipe directory mounted
 * there and its shm directory at /dev/shm. gpuplane creates both directories so the container
 * starts; it does not start a control daemon itself, and CUDA without one runs without MPS.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dra-checkpoint.h"
#include "dra-claim.h"

#define MPS_DIR_MODE 0755

static const char *const MPS_MOUNT_OPTIONS[] = {"rw", "nosuid", "nodev", "bind", NULL};

static int check_uid(const char *uid, struct diag *d)
{
    if (!uid || !dra_claim_uid_valid(uid))
        return diag_fail(d, -EINVAL, "invalid claim UID \"%s\"", uid ? uid : "");
    return 0;
}

int dra_cdi_path(const char *cdi_root, const char *uid, char *buf, size_t n)
{
    _cleanup_free_ char *name = NULL;
    if (!uid || !dra_claim_uid_valid(uid))
        return -EINVAL;
    int r = cdi_spec_file_name(NVCDI_KIND_CLAIM, uid, CDI_FORMAT_YAML, NULL, &name);
    if (r < 0)
        return r;
    size_t len = strlen(cdi_root);
    const char *sep = len > 0 && cdi_root[len - 1] == '/' ? "" : "/";
    int k = snprintf(buf, n, "%s%s%s", cdi_root, sep, name);
    return k < 0 || (size_t)k >= n ? -ENAMETOOLONG : 0;
}

static int mps_dir(const struct dra_cdi_options *opts, const char *uid, const char *leaf,
                   char **ret)
{
    const char *root = opts && opts->mps_root ? opts->mps_root : DRA_MPS_ROOT_DEFAULT;
    if (asprintf(ret, "%s/%s%s%s", root, uid, leaf ? "/" : "", leaf ? leaf : "") < 0)
        return -ENOMEM;
    return 0;
}

static int add_mps_edits(struct cdi_edits *e, const struct dra_cdi_options *opts, const char *uid,
                         struct diag *d)
{
    _cleanup_free_ char *pipe = NULL;
    _cleanup_free_ char *shm = NULL;
    int r = mps_dir(opts, uid, "pipe", &pipe);
    if (r >= 0)
        r = mps_dir(opts, uid, "shm", &shm);
    if (r < 0)
        return r;
    r = file_mkdir_p(pipe, MPS_DIR_MODE);
    if (r >= 0)
        r = file_mkdir_p(shm, MPS_DIR_MODE);
    if (r < 0)
        return diag_fail(d, r, "cannot create the MPS directories under %s: %s", pipe,
                         strerror(-r));
    r = cdi_edits_add_env(e, "CUDA_MPS_PIPE_DIRECTORY", DRA_MPS_PIPE_DIR);
    if (r >= 0)
        r = cdi_edits_add_mount(e, pipe, DRA_MPS_PIPE_DIR, NULL, MPS_MOUNT_OPTIONS);
    if (r >= 0)
        r = cdi_edits_add_mount(e, shm, "/dev/shm", NULL, MPS_MOUNT_OPTIONS);
    return r;
}

/* Adds the device of dev to spec (once: a claim may hold one device under several requests or
 * share IDs) and its qualified name to ids[i]. */
static int add_device(const struct nvcdi *nv, const struct gpu_inventory *inv,
                      const struct dra_claim *claim, const struct dra_claim_device *dev,
                      const struct dra_cdi_options *opts, struct cdi_spec *spec, struct diag *d,
                      char **ret_id)
{
    _cleanup_free_ char *name = NULL;
    const struct gpu_device *gpu;
    const struct gpu_mig_device *mig;
    struct cdi_device *cd = NULL;
    if (dra_device_find(inv, dev->device, &gpu, &mig) < 0)
        return diag_fail(d, -ENOENT,
                         "claim %s: device %s is not on this node (or NVML cannot reach it)",
                         claim->uid, dev->device);
    if (asprintf(&name, "%s-%s", claim->uid, dev->device) < 0)
        return -ENOMEM;
    int r = 0;
    if (!cdi_spec_find_device(spec, name)) {
        r = cdi_spec_add_device(spec, name, d, &cd);
        if (r >= 0)
            r = nvcdi_add_device_edits(nv, gpu, mig, &cd->edits, d);
        if (r >= 0 && dev->config.sharing == DRA_SHARING_MPS)
            r = add_mps_edits(&cd->edits, opts, claim->uid, d);
    }
    if (r >= 0)
        r = cdi_qualified_name(NVCDI_KIND_CLAIM, name, d, ret_id);
    return r;
}

int dra_cdi_write_with(const struct nvcdi *nv, const struct gpu_inventory *inv,
                       const char *cdi_root, const struct dra_claim *claim,
                       const struct dra_cdi_options *opts, struct diag *d, char ***ret_ids)
{
    _cleanup_(cdi_spec_freep) struct cdi_spec *spec = NULL;
    char **ids = NULL;
    int r = check_uid(claim->uid, d);
    if (r < 0)
        return r;
    ids = calloc(claim->n_devices + 1, sizeof(*ids));
    if (!ids)
        return diag_fail(d, -ENOMEM, "out of memory");
    r = cdi_spec_new(NVCDI_KIND_CLAIM, d, &spec);
    for (size_t i = 0; i < claim->n_devices && r >= 0; i++)
        r = add_device(nv, inv, claim, &claim->devices[i], opts, spec, d, &ids[i]);
    if (r >= 0 && claim->n_devices > 0)
        r = nvcdi_add_common_edits(nv, &spec->edits, d);
    if (r >= 0 && claim->n_devices > 0)
        r = cdi_spec_write(spec, cdi_root, claim->uid, CDI_FORMAT_YAML, d, NULL);
    /* Nothing to inject: no file (a spec without devices is invalid), and none left over. */
    if (r >= 0 && claim->n_devices == 0)
        r = cdi_spec_remove(cdi_root, NVCDI_KIND_CLAIM, claim->uid, d);
    if (r < 0) {
        dra_strv_free(ids);
        return r == -ENOMEM ? diag_fail(d, r, "out of memory") : r;
    }
    *ret_ids = ids;
    return 0;
}

int dra_cdi_write(const struct nvcdi *nv, const struct gpu_inventory *inv, const char *cdi_root,
                  const struct dra_claim *claim, struct diag *d, char ***ret_ids)
{
    return dra_cdi_write_with(nv, inv, cdi_root, claim, NULL, d, ret_ids);
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)type, (void)ftw;
    return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

/* rm -rf <mps root>/<uid>, as NVIDIA's driver removes it: what a control daemon left in the pipe
 * directory (its pipes, its log) goes with it. The UID was checked, so the path stays under the
 * root; links are removed, never followed. A directory this process cannot even see (missing, or
 * behind one it may not search) is one it never created. */
static int remove_mps_dirs(const struct dra_cdi_options *opts, const char *uid, struct diag *d)
{
    _cleanup_free_ char *top = NULL;
    struct stat st;
    int r = mps_dir(opts, uid, NULL, &top);
    if (r < 0 || lstat(top, &st) < 0)
        return r;
    if (nftw(top, remove_entry, 8, FTW_DEPTH | FTW_PHYS) < 0)
        return diag_fail(d, negative_errno(), "cannot remove the MPS directory %s: %s", top,
                         strerror(errno));
    return 0;
}

int dra_cdi_remove_with(const char *cdi_root, const char *uid, const struct dra_cdi_options *opts,
                        struct diag *d)
{
    int r = check_uid(uid, d);
    if (r >= 0)
        r = cdi_spec_remove(cdi_root, NVCDI_KIND_CLAIM, uid, d);
    if (r >= 0)
        r = remove_mps_dirs(opts, uid, d);
    return r;
}

int dra_cdi_remove(const char *cdi_root, const char *uid, struct diag *d)
{
    return dra_cdi_remove_with(cdi_root, uid, NULL, d);
}
