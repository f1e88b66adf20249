/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CDI device names of NVIDIA devices under NVIDIA's naming strategies, and the mapping from the
 * device plugin's device ids to qualified CDI names. The device plugin and the spec it writes must
 * agree on names exactly, so both go through these functions.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nvcdi.h"

int nvcdi_name_strategy_parse(const char *s, enum nvcdi_name_strategy *ret)
{
    if (!s)
        return -EINVAL;
    if (strcmp(s, "index") == 0)
        *ret = NVCDI_NAME_INDEX;
    else if (strcmp(s, "uuid") == 0)
        *ret = NVCDI_NAME_UUID;
    else if (strcmp(s, "type-index") == 0)
        *ret = NVCDI_NAME_TYPE_INDEX;
    else
        return -EINVAL;
    return 0;
}

static int format_name(const struct gpu_device *gpu, const struct gpu_mig_device *mig,
                       enum nvcdi_name_strategy strategy, char *buf, size_t size)
{
    switch (strategy) {
    case NVCDI_NAME_INDEX:
        if (mig)
            return snprintf(buf, size, "%u:%u", gpu->index, mig->index);
        return snprintf(buf, size, "%u", gpu->index);
    case NVCDI_NAME_UUID:
        return snprintf(buf, size, "%s", mig ? mig->uuid : gpu->uuid);
    case NVCDI_NAME_TYPE_INDEX:
        if (mig)
            return snprintf(buf, size, "mig%u:%u", gpu->index, mig->index);
        return snprintf(buf, size, "gpu%u", gpu->index);
    }
    return -1;
}

int nvcdi_device_name(const struct gpu_device *gpu, const struct gpu_mig_device *mig,
                      enum nvcdi_name_strategy strategy, char buf[static NVCDI_NAME_MAX])
{
    char name[NVCDI_NAME_MAX];
    int n = format_name(gpu, mig, strategy, name, sizeof(name));
    if (n < 0 || (size_t)n >= sizeof(name) || !cdi_valid_device_name(name))
        return -EINVAL;
    memcpy(buf, name, (size_t)n + 1);
    return 0;
}

int nvcdi_qualified_name(const char *kind, const struct gpu_device *gpu,
                         const struct gpu_mig_device *mig, enum nvcdi_name_strategy strategy,
                         char **ret)
{
    char name[NVCDI_NAME_MAX];
    int r = nvcdi_device_name(gpu, mig, strategy, name);
    if (r < 0)
        return r;
    return cdi_qualified_name(kind, name, NULL, ret);
}

int nvcdi_qualified_name_for_id(const char *kind, const char *device_id, char **ret)
{
    _cleanup_free_ char *id = NULL;
    if (!device_id)
        return -EINVAL;
    /* A time-slicing or MPS replica "<id>::<r>" is the physical device <id>. */
    const char *replica = strstr(device_id, "::");
    id = replica ? strndup(device_id, (size_t)(replica - device_id)) : strdup(device_id);
    if (!id)
        return -ENOMEM;
    return cdi_qualified_name(kind, id, NULL, ret);
}
