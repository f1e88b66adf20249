/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The names devices carry in gpuplane's ResourceSlices, the same NVIDIA's gpu.nvidia.com driver
 * gives them (nvidia-compat.md §5.2), so that claims, selectors and checkpoints written against
 * NVIDIA's driver keep naming the same devices: "gpu-<minor>" for a full GPU (the minor of
 * /dev/nvidia<minor>, which survives a reordering of NVML indices) and
 * "gpu-<parent minor>-mig-<profile>-<GI profile id>-<placement start>" for a MIG device, the
 * profile made a DNS label. Finding a device by name computes every name of the inventory and
 * compares: an inventory has at most a few hundred devices, and one rule to keep in step is worth
 * more than a parser.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dra-claim.h"

/* "1g.5gb" -> "1g5gb", "1g.10gb+me" -> "1g10gb-me": dots go, upper case is folded, anything else
 * a DNS label cannot hold becomes '-'. */
static void profile_label(const char *profile, char *buf, size_t n)
{
    size_t k = 0;
    for (const char *p = profile; *p && k + 1 < n; p++) {
        char c = *p;
        if (c == '.')
            continue;
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
            c = '-';
        buf[k++] = c;
    }
    buf[k] = '\0';
}

int dra_device_name(const struct gpu_device *gpu, const struct gpu_mig_device *mig, char *buf,
                    size_t n)
{
    char label[GPU_PROFILE_MAX];
    int len;
    if (!mig) {
        len = snprintf(buf, n, "gpu-%u", gpu->minor);
    } else {
        profile_label(mig->profile, label, sizeof(label));
        /* A profile of only dots would leave "--" in the name: not a name NVML ever reports. */
        if (!label[0])
            return -EINVAL;
        len = snprintf(buf, n, "gpu-%u-mig-%s-%u-%u", gpu->minor, label, mig->gi_profile_id,
                       mig->placement_start);
    }
    if (len < 0 || (size_t)len >= n)
        return -ENAMETOOLONG;
    return 0;
}

int dra_device_find(const struct gpu_inventory *inv, const char *name,
                    const struct gpu_device **gpu, const struct gpu_mig_device **mig)
{
    char buf[128];
    /* Every name starts "gpu-<minor>"; the loop below only needs to be right, this is cheap. */
    if (strncmp(name, "gpu-", 4) != 0)
        return -ENOENT;
    for (size_t i = 0; i < inv->n_devices; i++) {
        const struct gpu_device *g = &inv->devices[i];
        /* A GPU NVML cannot reach has no trustworthy minor (it may read as 0 and shadow gpu-0),
         * and nothing can be prepared on it anyway. */
        if (g->error)
            continue;
        if (dra_device_name(g, NULL, buf, sizeof(buf)) >= 0 && strcmp(buf, name) == 0) {
            *gpu = g;
            *mig = NULL;
            return 0;
        }
        for (size_t k = 0; k < g->n_migs; k++) {
            if (dra_device_name(g, &g->migs[k], buf, sizeof(buf)) < 0 || strcmp(buf, name) != 0)
                continue;
            *gpu = g;
            *mig = &g->migs[k];
            return 0;
        }
    }
    return -ENOENT;
}

/* Skips a decimal number without a leading zero (minors print as %u). */
static const char *skip_number(const char *p)
{
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9'))
        return NULL;
    while (*p >= '0' && *p <= '9')
        p++;
    return p;
}

int dra_device_type(const char *name, enum dra_device_type *ret)
{
    if (strncmp(name, "gpu-", 4) != 0)
        return -EINVAL;
    const char *p = skip_number(name + 4);
    if (!p)
        return -EINVAL;
    if (!*p) {
        *ret = DRA_DEVICE_GPU;
        return 0;
    }
    if (strncmp(p, "-mig-", 5) != 0 || !p[5])
        return -EINVAL;
    for (p += 5; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
            return -EINVAL;
    if (p[-1] == '-')
        return -EINVAL;
    *ret = DRA_DEVICE_MIG;
    return 0;
}
