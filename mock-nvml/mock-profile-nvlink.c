/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `nvlink` section of a GPU: links to NVSwitches or direct links to peer GPUs (numbered in
 * ascending peer order), links that are down, and the check that both ends of every direct link
 * agree on how many links there are.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mock-profile-internal.h"

static int read_peers(struct loader *L, const json_t *peers, struct mock_gpu *gpu)
{
    const char *key;
    json_t *v;
    unsigned links[MOCK_MAX_GPUS] = {0}, n = 0;

    json_object_foreach((json_t *)peers, key, v)
    {
        char *end;
        unsigned long peer = strtoul(key, &end, 10);

        if (!*key || *end || peer >= L->node->n_gpus || peer == gpu->index)
            return doc_fail(L->doc, v, L->d, -EINVAL,
                            "\"peers\": key \"%s\" is not the index of another GPU", key);
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > NVML_NVLINK_MAX_LINKS)
            return doc_fail(L->doc, v, L->d, -EINVAL, "\"peers\": expected a link count 1..%d",
                            NVML_NVLINK_MAX_LINKS);
        links[peer] = (unsigned)json_integer_value(v);
        n += links[peer];
    }
    if (n > NVML_NVLINK_MAX_LINKS)
        return doc_fail(L->doc, peers, L->d, -EINVAL, "\"peers\": more than %d links in all",
                        NVML_NVLINK_MAX_LINKS);
    /* Links are numbered in ascending peer order. */
    for (unsigned p = 0; p < MOCK_MAX_GPUS; p++)
        for (unsigned k = 0; k < links[p]; k++)
            gpu->nvlink.peer[gpu->nvlink.n_links++] = (int)p;
    return 0;
}

static int read_down(struct loader *L, const json_t *obj, struct mock_gpu *gpu)
{
    json_t *down, *v;
    size_t i;
    int r;

    r = doc_get_array(L->doc, obj, "down", false, L->d, &down);
    if (r < 0)
        return r;
    json_array_foreach(down, i, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= gpu->nvlink.n_links)
            return doc_fail(L->doc, v, L->d, -EINVAL, "\"down\": expected a link number below %u",
                            gpu->nvlink.n_links);
        gpu->nvlink.down |= 1ULL << json_integer_value(v);
    }
    return 0;
}

int mock_read_nvlink(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    static const char *const keys[] = {"switch", "peers", "down", NULL};
    json_t *obj, *peers;
    unsigned links = 0;
    int r;

    r = doc_get_object(L->doc, mock_pick(L, g, "nvlink"), "nvlink", false, L->d, &obj);
    if (r < 0 || !obj)
        return r;
    L->nvlink[gpu->index] = obj;
    r = doc_check_keys(L->doc, obj, keys, L->d);
    if (r >= 0)
        r = doc_get_object(L->doc, obj, "peers", false, L->d, &peers);
    if (r < 0)
        return r;
    if (!json_object_get(obj, "switch") == !peers)
        return doc_fail(L->doc, obj, L->d, -EINVAL,
                        "\"nvlink\": expected exactly one of \"switch\" and \"peers\"");
    if (peers)
        r = read_peers(L, peers, gpu);
    else {
        r = mock_read_uint(L, obj, "switch", true, 0, NVML_NVLINK_MAX_LINKS, &links);
        if (r >= 0 && links == 0)
            r = doc_fail(L->doc, json_object_get(obj, "switch"), L->d, -EINVAL,
                         "\"switch\": expected a link count 1..%d", NVML_NVLINK_MAX_LINKS);
        gpu->nvlink.n_links = links;
        gpu->nvlink.to_switch = true;
    }
    return r < 0 ? r : read_down(L, obj, gpu);
}

static unsigned links_between(const struct mock_gpu *a, unsigned b)
{
    unsigned n = 0;

    for (unsigned l = 0; !a->nvlink.to_switch && l < a->nvlink.n_links; l++)
        n += a->nvlink.peer[l] == (int)b;
    return n;
}

/* Direct links must be described the same way from both ends. */
int mock_check_peers(struct loader *L)
{
    const struct mock_node *node = L->node;

    for (unsigned i = 0; i < node->n_gpus; i++)
        for (unsigned j = 0; j < node->n_gpus; j++) {
            unsigned ij = links_between(&node->gpus[i], j), ji = links_between(&node->gpus[j], i);

            if (ij != ji)
                return doc_fail(L->doc, L->nvlink[i], L->d, -EINVAL,
                                "\"nvlink\": GPU %u has %u links to GPU %u, which has %u back", i,
                                ij, j, ji);
        }
    return 0;
}
