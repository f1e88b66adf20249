/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Node profiles: the YAML file (docs/mock-nvml.md) that says which GPUs the mock pretends to have,
 * loaded into a struct mock_node. Loading is strict, since a profile is test input written by hand:
 * an unknown key, a wrong type, a value out of range, an overlapping MIG placement or a duplicate
 * UUID fails the load with "file:line:col: message" pointing at the offending value.
 *
 * Per-GPU keys are looked up in the GPU's own mapping first and in `defaults` second, so a profile
 * states what all GPUs share once. All arrays of the node (GPUs, GPU instances, compute instances,
 * device handles) are sized before they are filled, so the pointers NVML hands out never move.
 *
 * This file holds the node's lifetime and the top-level sections (driver, paths, NVSwitches,
 * topology overrides); one GPU is read by mock-profile-gpu.c, its NVLink and MIG sections by
 * mock-profile-nvlink.c and mock-profile-mig.c, with the small readers of mock-profile-read.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock-profile-internal.h"

static const char *const top_keys[] = {"driver",   "driverRoot", "events", "nvswitch",
                                       "topology", "defaults",   "gpus",   NULL};

static const struct name_value levels[] = {
    {"internal", NVML_TOPOLOGY_INTERNAL}, {"single", NVML_TOPOLOGY_SINGLE},
    {"multiple", NVML_TOPOLOGY_MULTIPLE}, {"hostbridge", NVML_TOPOLOGY_HOSTBRIDGE},
    {"node", NVML_TOPOLOGY_NODE},         {"system", NVML_TOPOLOGY_SYSTEM},
};

/* ---- node lifetime ---- */

struct mock_node *mock_node_free(struct mock_node *node)
{
    if (!node)
        return NULL;
    free(node->events_path);
    free(node->driver_root);
    free(node->gpus);
    free(node->handles);
    free(node->gis);
    free(node->cis);
    free(node->switches);
    free(node->overrides);
    free(node);
    return NULL;
}

struct nvmlDevice_st *mock_find_uuid(const struct mock_node *node, const char *uuid)
{
    for (size_t i = 0; i < node->n_gpus; i++)
        if (strcmp(node->gpus[i].uuid, uuid) == 0)
            return node->gpus[i].handle;
    for (size_t i = 0; i < node->n_cis; i++)
        if (node->cis[i].dev && strcmp(node->cis[i].uuid, uuid) == 0)
            return node->cis[i].dev;
    return NULL;
}

/* ---- top-level sections ---- */

static int load_driver(struct loader *L, const json_t *root)
{
    static const char *const keys[] = {"version", "cuda", "nvml", NULL};
    struct mock_node *node = L->node;
    json_t *obj;
    int64_t cuda = 0;
    char def[MOCK_STR_MAX + 8];
    int r;

    r = doc_get_object(L->doc, root, "driver", false, L->d, &obj);
    if (r < 0)
        return r;
    if (!obj) {
        obj = json_object();
        if (!obj)
            return -ENOMEM;
    } else
        json_incref(obj);
    r = doc_check_keys(L->doc, obj, keys, L->d);
    if (r >= 0)
        r = mock_read_str(L, obj, "version", false, "550.54.15", node->driver_version,
                          NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);
    snprintf(def, sizeof(def), "12.%s", node->driver_version);
    if (r >= 0)
        r = mock_read_str(L, obj, "nvml", false, def, node->nvml_version,
                          NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE);
    if (r >= 0)
        r = doc_get_int(L->doc, obj, "cuda", false, 12040, 1000, 99990, L->d, &cuda);
    if (r >= 0)
        node->cuda_version = (int)cuda;
    json_decref(obj);
    return r;
}

/* A path relative to the profile's directory. */
static int load_path(struct loader *L, const json_t *root, const char *key, const char *dir,
                     char **ret)
{
    const char *s;
    char *p;
    int r;

    r = doc_get_string(L->doc, root, key, false, NULL, L->d, &s);
    if (r < 0 || !s)
        return r;
    if (!*s)
        return doc_fail(L->doc, json_object_get(root, key), L->d, -EINVAL, "\"%s\": empty path",
                        key);
    if (s[0] == '/' || !dir)
        p = strdup(s);
    else if (asprintf(&p, "%s/%s", dir, s) < 0)
        p = NULL;
    if (!p)
        return -ENOMEM;
    *ret = p;
    return 0;
}

static int load_switches(struct loader *L, const json_t *root)
{
    static const char *const keys[] = {"busIds", "pciDeviceId", NULL};
    struct mock_node *node = L->node;
    json_t *obj = NULL, *ids = NULL, *v;
    size_t i;
    int r;

    r = doc_get_object(L->doc, root, "nvswitch", false, L->d, &obj);
    if (r >= 0 && obj)
        r = doc_check_keys(L->doc, obj, keys, L->d);
    if (r >= 0 && obj)
        r = doc_get_array(L->doc, obj, "busIds", false, L->d, &ids);
    node->switch_device_id = 0x22A310DEu;
    if (r >= 0 && obj)
        r = mock_read_uint(L, obj, "pciDeviceId", false, 0x22A310DE, 0xFFFFFFFFll,
                           &node->switch_device_id);
    if (r < 0)
        return r;
    if (ids && json_array_size(ids) == 0)
        return doc_fail(L->doc, ids, L->d, -EINVAL, "\"busIds\": at least one switch expected");
    node->n_switches = ids ? json_array_size(ids) : 1;
    node->switches = calloc(node->n_switches, sizeof(*node->switches));
    if (!node->switches)
        return -ENOMEM;
    json_array_foreach(ids, i, v)
    {
        r = mock_read_bus_id(L, v, &node->switches[i]);
        if (r < 0)
            return r;
    }
    return 0;
}

static int load_override(struct loader *L, const json_t *o, struct mock_topology_override *ret)
{
    static const char *const keys[] = {"gpus", "level", NULL};
    const size_t n = L->node->n_gpus;
    json_t *pair;
    unsigned level = 0;
    int r;

    r = doc_check_keys(L->doc, o, keys, L->d);
    if (r >= 0)
        r = doc_get_array(L->doc, o, "gpus", true, L->d, &pair);
    if (r >= 0)
        r = mock_read_name(L, o, "level", NULL, levels, ARRAY_SIZE(levels), &level);
    if (r < 0)
        return r;
    if (json_array_size(pair) != 2 || !json_is_integer(json_array_get(pair, 0)) ||
        !json_is_integer(json_array_get(pair, 1)) ||
        json_integer_value(json_array_get(pair, 0)) < 0 ||
        json_integer_value(json_array_get(pair, 1)) < 0 ||
        (size_t)json_integer_value(json_array_get(pair, 0)) >= n ||
        (size_t)json_integer_value(json_array_get(pair, 1)) >= n)
        return doc_fail(L->doc, pair, L->d, -EINVAL, "\"gpus\": expected two GPU indices below %zu",
                        n);
    ret->a = (unsigned)json_integer_value(json_array_get(pair, 0));
    ret->b = (unsigned)json_integer_value(json_array_get(pair, 1));
    ret->level = (nvmlGpuTopologyLevel_t)level;
    return 0;
}

static int load_topology(struct loader *L, const json_t *root)
{
    struct mock_node *node = L->node;
    json_t *list, *o;
    size_t i;
    int r;

    r = doc_get_array(L->doc, root, "topology", false, L->d, &list);
    if (r < 0 || !list || json_array_size(list) == 0)
        return r;
    node->overrides = calloc(json_array_size(list), sizeof(*node->overrides));
    if (!node->overrides)
        return -ENOMEM;
    json_array_foreach(list, i, o)
    {
        r = load_override(L, o, &node->overrides[i]);
        if (r < 0)
            return r;
        node->n_overrides++;
    }
    return 0;
}

static int load_root(struct loader *L, const json_t *root, const char *dir)
{
    int r;

    r = doc_check_keys(L->doc, root, top_keys, L->d);
    if (r >= 0)
        r = load_driver(L, root);
    if (r >= 0)
        r = load_path(L, root, "events", dir, &L->node->events_path);
    if (r >= 0)
        r = load_path(L, root, "driverRoot", dir, &L->node->driver_root);
    if (r >= 0)
        r = load_switches(L, root);
    if (r >= 0)
        r = mock_load_gpus(L, root);
    if (r >= 0)
        r = load_topology(L, root);
    return r;
}

int mock_profile_load(const char *path, struct diag *d, struct mock_node **ret)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    _cleanup_(mock_node_freep) struct mock_node *node = NULL;
    _cleanup_free_ char *dir = NULL;
    struct loader L = {.d = d};
    const char *slash = strrchr(path, '/');
    int r;

    r = doc_load_file(path, d, &doc);
    if (r < 0)
        return r;
    if (doc_count(doc) != 1)
        return diag_fail(d, -EINVAL, "%s: expected exactly one YAML document", path);
    if (!json_is_object(doc_root(doc, 0)))
        return doc_fail(doc, doc_root(doc, 0), d, -EINVAL, "a profile is a mapping");
    node = calloc(1, sizeof(*node));
    if (slash)
        dir = strndup(path, slash == path ? 1 : (size_t)(slash - path));
    if (!node || (slash && !dir))
        return -ENOMEM;
    L.doc = doc;
    L.node = node;
    r = load_root(&L, doc_root(doc, 0), dir);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(node);
    return 0;
}
