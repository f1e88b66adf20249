/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `mig` section of a GPU: MIG capability and mode, the profile table, and the GPU and compute
 * instances with their placements, ids and UUIDs, checked the way the driver would check them
 * (a free, valid placement; no more instances of a profile than the table allows).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock-profile-internal.h"

struct mig_build {
    struct mock_gpu *gpu;
    uint8_t used;      /* memory slices taken */
    unsigned count[7]; /* instances per profile of the table */
};

static int read_ci(struct loader *L, const json_t *o, struct nvmlGpuInstance_st *gi,
                   unsigned *free_slices)
{
    static const char *const keys[] = {"profile", "uuid", NULL};
    struct nvmlComputeInstance_st *ci = &L->node->cis[L->ci_next];
    const char *profile;
    char *end, seed[128];
    unsigned long c;
    unsigned index;
    int r;

    r = doc_check_keys(L->doc, o, keys, L->d);
    if (r >= 0)
        r = doc_get_string(L->doc, o, "profile", true, NULL, L->d, &profile);
    if (r < 0)
        return r;
    c = strtoul(profile, &end, 10);
    if (strcmp(end, "c") != 0 || c == 0 || c > 8 ||
        !mock_mig_ci_profile(gi->prof->slices, (unsigned)c, &index))
        return doc_fail(L->doc, json_object_get(o, "profile"), L->d, -EINVAL,
                        "\"profile\": \"%s\" is not a compute instance size of a %s GPU instance",
                        profile, gi->prof->name);
    if (c > *free_slices)
        return doc_fail(L->doc, o, L->d, -EINVAL,
                        "compute instances exceed the %u slices of GPU instance %s",
                        gi->prof->slices, gi->prof->name);
    ci->gi = gi;
    ci->id = (unsigned)gi->n_cis;
    ci->slices = (unsigned)c;
    ci->profile_index = index;
    ci->start = gi->prof->slices - *free_slices;
    *free_slices -= (unsigned)c;
    if (c == gi->prof->slices)
        snprintf(ci->profile_name, sizeof(ci->profile_name), "%s", gi->prof->name);
    else
        snprintf(ci->profile_name, sizeof(ci->profile_name), "%luc.%s", c, gi->prof->name);
    snprintf(seed, sizeof(seed), "%s/%u/%u", gi->gpu->uuid, gi->id, ci->id);
    r = mock_read_uuid(L, o, "MIG-", seed, ci->uuid);
    if (r < 0)
        return r;
    L->ci_next++;
    gi->n_cis++;
    return 0;
}

static int read_cis(struct loader *L, const json_t *inst, struct nvmlGpuInstance_st *gi)
{
    unsigned free_slices = gi->prof->slices;
    json_t *list, *o, *whole;
    size_t i;
    int r;

    r = doc_get_array(L->doc, inst, "computeInstances", false, L->d, &list);
    if (r < 0)
        return r;
    gi->cis = &L->node->cis[L->ci_next];
    if (list) {
        if (json_object_get(inst, "uuid"))
            return doc_fail(L->doc, json_object_get(inst, "uuid"), L->d, -EINVAL,
                            "\"uuid\": give the UUIDs of the compute instances instead");
        json_array_foreach(list, i, o)
        {
            r = read_ci(L, o, gi, &free_slices);
            if (r < 0)
                return r;
        }
        return 0;
    }
    /* One compute instance spanning the GPU instance, named by the instance's own uuid key. */
    whole = json_object();
    if (!whole ||
        json_object_set_new(whole, "profile", json_sprintf("%uc", gi->prof->slices)) < 0 ||
        (json_object_get(inst, "uuid") &&
         json_object_set(whole, "uuid", json_object_get(inst, "uuid")) < 0)) {
        json_decref(whole);
        return -ENOMEM;
    }
    r = read_ci(L, whole, gi, &free_slices);
    json_decref(whole);
    return r;
}

static bool placement_ok(const struct mig_build *b, const struct mock_gi_profile *p, unsigned start)
{
    bool valid = false;
    uint8_t mask;

    for (unsigned i = 0; i < p->n_starts; i++)
        valid |= p->starts[i] == start;
    mask = (uint8_t)(((1u << p->mem_slices) - 1) << start);
    return valid && (b->used & mask) == 0;
}

static int read_placement(struct loader *L, const json_t *inst, struct mig_build *b,
                          const struct mock_gi_profile *p, unsigned *ret)
{
    const json_t *v = json_object_get(inst, "placement");
    unsigned start = 0;
    int r;

    if (!v) {
        for (unsigned i = 0; i < p->n_starts; i++)
            if (placement_ok(b, p, p->starts[i])) {
                *ret = p->starts[i];
                return 0;
            }
        return doc_fail(L->doc, inst, L->d, -EINVAL, "no free placement left for %s", p->name);
    }
    r = mock_read_uint(L, inst, "placement", false, 0, MOCK_MEM_SLICES - 1, &start);
    if (r < 0)
        return r;
    if (!placement_ok(b, p, start))
        return doc_fail(L->doc, v, L->d, -EINVAL,
                        "\"placement\": %u is not a valid free placement for %s", start, p->name);
    *ret = start;
    return 0;
}

static int read_gi_id(struct loader *L, const json_t *inst, struct mig_build *b,
                      const struct mock_gi_profile *p, unsigned start, unsigned *ret)
{
    unsigned id = 0;
    int r;

    r = mock_read_uint(L, inst, "id", false, mock_mig_default_gi_id(p, start), 14, &id);
    if (r < 0)
        return r;
    for (size_t i = 0; i < b->gpu->n_gis; i++)
        if (b->gpu->gis[i].id == id)
            return doc_fail(L->doc,
                            json_object_get(inst, "id") ? json_object_get(inst, "id") : inst, L->d,
                            -EINVAL, "duplicate GPU instance id %u", id);
    *ret = id;
    return 0;
}

static int read_instance(struct loader *L, const json_t *inst, struct mig_build *b)
{
    static const char *const keys[] = {"profile", "placement",        "id",
                                       "uuid",    "computeInstances", NULL};
    const struct mock_mig_table *t = b->gpu->mig_table;
    struct nvmlGpuInstance_st *gi = &L->node->gis[L->gi_next];
    const struct mock_gi_profile *p;
    const char *name;
    unsigned start = 0, id = 0;
    int r;

    r = doc_check_keys(L->doc, inst, keys, L->d);
    if (r >= 0)
        r = doc_get_string(L->doc, inst, "profile", true, NULL, L->d, &name);
    if (r < 0)
        return r;
    p = mock_mig_profile_by_name(t, name);
    if (!p)
        return doc_fail(L->doc, json_object_get(inst, "profile"), L->d, -EINVAL,
                        "\"profile\": no GPU instance profile \"%s\" in table %s", name, t->name);
    if (++b->count[p - t->p] > p->instances)
        return doc_fail(L->doc, inst, L->d, -EINVAL, "more than %u instances of %s", p->instances,
                        p->name);
    r = read_placement(L, inst, b, p, &start);
    if (r >= 0)
        r = read_gi_id(L, inst, b, p, start, &id);
    if (r < 0)
        return r;
    b->used |= (uint8_t)(((1u << p->mem_slices) - 1) << start);
    *gi = (struct nvmlGpuInstance_st){.gpu = b->gpu, .prof = p, .id = id, .start = start};
    L->gi_next++;
    b->gpu->n_gis++;
    return read_cis(L, inst, gi);
}

static int read_mig_table(struct loader *L, const json_t *mig, struct mock_gpu *gpu)
{
    const char *name;
    int r;

    r = doc_get_string(L->doc, mig, "table", false, NULL, L->d, &name);
    if (r < 0)
        return r;
    gpu->mig_table = name ? mock_mig_table_by_name(name) : mock_mig_table_for_gpu(gpu->name);
    if (name && !gpu->mig_table)
        return doc_fail(L->doc, json_object_get(mig, "table"), L->d, -EINVAL,
                        "\"table\": unknown MIG table \"%s\" (a100-40gb, h100-80gb)", name);
    if (!gpu->mig_table)
        return doc_fail(L->doc, mig, L->d, -EINVAL,
                        "no MIG profile table known for \"%s\": set \"table\"", gpu->name);
    return 0;
}

int mock_read_mig(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    static const char *const keys[] = {"capable", "enabled", "pending", "table", "instances", NULL};
    struct mig_build b = {.gpu = gpu};
    json_t *mig, *list, *inst;
    size_t i;
    int r;

    r = doc_get_object(L->doc, mock_pick(L, g, "mig"), "mig", false, L->d, &mig);
    if (r < 0 || !mig)
        return r;
    r = doc_check_keys(L->doc, mig, keys, L->d);
    if (r >= 0)
        r = doc_get_bool(L->doc, mig, "capable", false, false, L->d, &gpu->mig_capable);
    if (r >= 0)
        r = doc_get_bool(L->doc, mig, "enabled", false, false, L->d, &gpu->mig_enabled);
    if (r >= 0)
        r = doc_get_bool(L->doc, mig, "pending", false, gpu->mig_enabled, L->d, &gpu->mig_pending);
    if (r >= 0)
        r = doc_get_array(L->doc, mig, "instances", false, L->d, &list);
    if (r < 0)
        return r;
    if (!gpu->mig_capable) {
        if (gpu->mig_enabled || gpu->mig_pending || list)
            return doc_fail(L->doc, mig, L->d, -EINVAL,
                            "MIG settings on a GPU that is not MIG capable (set capable: true)");
        return 0;
    }
    r = read_mig_table(L, mig, gpu);
    if (r < 0)
        return r;
    if (list && json_array_size(list) > 0 && !gpu->mig_enabled)
        return doc_fail(L->doc, list, L->d, -EINVAL, "\"instances\": MIG is not enabled");
    gpu->gis = &L->node->gis[L->gi_next];
    json_array_foreach(list, i, inst)
    {
        r = read_instance(L, inst, &b);
        if (r < 0)
            return r;
    }
    return 0;
}
