/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cdiVersion: the versions loaders accept and the minimum one a spec needs. Loaders reject a spec
 * that declares a version lower than what its content needs ("the spec version must be at least
 * v<min>"), and old runtimes reject versions newer than they know; so, like NVIDIA's generator, we
 * declare the lowest version that supports every feature used (cdi.md §2).
 */
#include <string.h>

#include "cdi-internal.h"

/* Oldest first; the index is the order. */
static const char *const VERSIONS[] = {
    "0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0",
};

static int version_index(const char *v)
{
    if (!v)
        return -1;
    if (v[0] == 'v')
        v++;
    for (size_t i = 0; i < ARRAY_SIZE(VERSIONS); i++)
        if (strcmp(v, VERSIONS[i]) == 0)
            return (int)i;
    return -1;
}

bool cdi_valid_version(const char *version)
{
    return version_index(version) >= 0;
}

int cdi_version_compare(const char *a, const char *b)
{
    return version_index(a) - version_index(b);
}

static const char *max_version(const char *a, const char *b)
{
    return cdi_version_compare(a, b) >= 0 ? a : b;
}

static bool uses_host_path(const struct cdi_edits *e)
{
    for (size_t i = 0; i < e->device_nodes.len; i++)
        if (VEC_AT(&e->device_nodes, struct cdi_device_node, i)->host_path)
            return true;
    return false;
}

static bool uses_mount_type(const struct cdi_edits *e)
{
    for (size_t i = 0; i < e->mounts.len; i++)
        if (VEC_AT(&e->mounts, struct cdi_mount, i)->type)
            return true;
    return false;
}

static const char *edits_min_version(const struct cdi_edits *e)
{
    if (e->additional_gids.len > 0)
        return "0.7.0";
    if (uses_host_path(e))
        return "0.5.0";
    if (uses_mount_type(e))
        return "0.4.0";
    return "0.3.0";
}

static const char *device_min_version(const struct cdi_device *dev)
{
    const char *v = edits_min_version(&dev->edits);
    if (dev->annotations.len > 0)
        v = max_version(v, "0.6.0");
    /* Names starting with a digit ("0", "1:0") came with 0.5.0. */
    if ('0' <= dev->name[0] && dev->name[0] <= '9')
        v = max_version(v, "0.5.0");
    return v;
}

const char *cdi_spec_min_version(const struct cdi_spec *spec)
{
    const char *v = edits_min_version(&spec->edits);
    if (spec->annotations.len > 0 || strchr(spec->class, '.'))
        v = max_version(v, "0.6.0");
    for (size_t i = 0; i < spec->devices.len; i++)
        v = max_version(v, device_min_version(*VEC_AT(&spec->devices, struct cdi_device *, i)));
    return v;
}

const char *cdi_spec_version(const struct cdi_spec *spec)
{
    return spec->version ? spec->version : cdi_spec_min_version(spec);
}
