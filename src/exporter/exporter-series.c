/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The join of devices with pods (exporter-series.h). Which entries name which series follows
 * dcgm-exporter's toDeviceToPod, toDeviceToSharingPods and toDeviceToPodsDRA
 * (internal/pkg/transformation/kubernetes.go); where it differs (DRA MIG devices labelling their
 * GPU instance, DRA labels with virtual GPUs too, claims matched by UUID whatever the id type) is
 * said in docs/exporter.md.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporter-series.h"

/* A pod using the device of a series, and what its entry resolved to. */
struct use {
    const struct exporter_pod_ref *ref;
    bool dra;
    struct exporter_dra_device dra_dev; /* dra only */
};

/* Whether uuid is one of the MIG devices (compute instances) of GPU instance gi of g. */
static bool in_instance(const struct gpu_device *g, unsigned gi, const char *uuid)
{
    for (size_t m = 0; m < g->n_migs; m++)
        if (g->migs[m].gi_id == gi && strcmp(g->migs[m].uuid, uuid) == 0)
            return true;
    return false;
}

/* Whether the device plugin's entry r names the device of dv. A MIG UUID names its GPU instance
 * through any of its compute instances, as upstream's GetMIGDeviceInfoByID gives the GPU
 * instance. */
static bool device_matches(const struct exporter_join *j, const struct exporter_dev *dv,
                           const struct exporter_pod_ref *r)
{
    const struct gpu_device *g = &j->inv->devices[dv->gpu];
    char name[32];
    snprintf(name, sizeof(name), "nvidia%zu", dv->gpu);
    if (dv->mig >= 0)
        return in_instance(g, g->migs[dv->mig].gi_id, r->device) ||
               (strcmp(r->device, name) == 0 && r->gi == (int)g->migs[dv->mig].gi_id);
    return r->gi < 0 && (strcmp(r->device, g->uuid) == 0 ||
                         (j->id_type == EXPORTER_ID_DEVICE_NAME && strcmp(r->device, name) == 0));
}

/* Whether the claim result r names the device of dv, through NVIDIA's slices: a GPU by its UUID;
 * a MIG device the series of its GPU instance, or its GPU's series when the GPU is exported whole
 * (-d g). *ret gets what the slice says. */
static bool claim_matches(const struct exporter_join *j, const struct exporter_dev *dv,
                          const struct exporter_pod_ref *r, struct exporter_dra_device *ret)
{
    const struct gpu_device *g = &j->inv->devices[dv->gpu];
    if (strcmp(r->driver, EXPORTER_DRA_DRIVER) != 0 ||
        !exporter_slices_find(j->slices, r->pool, r->dra_device, ret))
        return false;
    if (ret->kind == EXPORTER_DRA_GPU)
        return dv->mig < 0 && strcmp(ret->uuid, g->uuid) == 0;
    if (strcmp(ret->parent_uuid, g->uuid) != 0)
        return false;
    return dv->mig < 0 || in_instance(g, g->migs[dv->mig].gi_id, ret->uuid);
}

static bool same_container(const struct exporter_pod_ref *a, const struct exporter_pod_ref *b)
{
    return strcmp(a->pod, b->pod) == 0 && strcmp(a->namespace_, b->namespace_) == 0 &&
           strcmp(a->container, b->container) == 0;
}

/*
 * The pods of device dv into uses (room for j->pods->n): its claims, each pod and container once,
 * as upstream's processedPods; else the device plugins' entries, only the first without virtual
 * GPUs. Returns how many.
 */
static size_t device_uses(const struct exporter_join *j, const struct exporter_dev *dv,
                          struct use *uses)
{
    size_t n = 0;
    for (size_t i = 0; j->pods && j->slices && i < j->pods->n; i++) {
        const struct exporter_pod_ref *r = &j->pods->v[i];
        struct exporter_dra_device dd;
        bool seen = false;
        if (r->device || !claim_matches(j, dv, r, &dd))
            continue;
        for (size_t k = 0; k < n && !seen; k++)
            seen = same_container(uses[k].ref, r);
        if (!seen)
            uses[n++] = (struct use){.ref = r, .dra = true, .dra_dev = dd};
    }
    if (n > 0)
        return n;
    for (size_t i = 0; j->pods && i < j->pods->n; i++) {
        const struct exporter_pod_ref *r = &j->pods->v[i];
        if (!r->device || !device_matches(j, dv, r))
            continue;
        uses[n++] = (struct use){.ref = r};
        if (!j->virtual_gpus)
            break;
    }
    return n;
}

static void add(struct exporter_label *out, size_t *n, const char *key, const char *value)
{
    if (value && *value) /* an empty label is no label to Prometheus */
        out[(*n)++] = (struct exporter_label){key, value};
}

/* A series' labels for the use u: the pod, its UID (uid, or NULL), the replica of a virtual GPU
 * (written into number), the claim. Returns how many. */
static size_t use_labels(const struct exporter_join *j, const struct use *u, const char *uid,
                         char *number, size_t number_size, struct exporter_label *out)
{
    const struct exporter_pod_ref *r = u->ref;
    size_t n = 0;
    out[n++] = (struct exporter_label){"pod", r->pod};
    out[n++] = (struct exporter_label){"namespace", r->namespace_};
    out[n++] = (struct exporter_label){"container", r->container};
    add(out, &n, "pod_uid", uid);
    if (j->virtual_gpus && r->vgpu >= 0) {
        snprintf(number, number_size, "%d", r->vgpu);
        add(out, &n, "vgpu", number);
    }
    if (u->dra) {
        out[n++] = (struct exporter_label){"dra_claim_name", r->claim_name};
        out[n++] = (struct exporter_label){"dra_claim_namespace", r->claim_namespace};
        out[n++] = (struct exporter_label){"dra_driver_name", r->driver};
        out[n++] = (struct exporter_label){"dra_pool_name", r->pool};
        out[n++] = (struct exporter_label){"dra_device_name", r->dra_device};
        if (u->dra_dev.kind == EXPORTER_DRA_MIG) {
            add(out, &n, "dra_mig_profile", u->dra_dev.profile);
            add(out, &n, "dra_mig_device_uuid", u->dra_dev.uuid);
        }
    }
    return n;
}

/* Appends the bare series of device dv; NULL when the set is full. */
static struct exporter_series *series_add(struct exporter_series_set *set,
                                          const struct exporter_join *j,
                                          const struct exporter_dev *dv)
{
    static const struct exporter_counts none;
    const struct exporter_counts *wc = j->counts ? &j->counts[dv->gpu] : &none;
    const struct gpu_device *g = &j->inv->devices[dv->gpu];
    if (set->n == set->cap)
        return NULL;
    struct exporter_series *s = &set->v[set->n];
    *s = (struct exporter_series){
        .gpu = (unsigned)dv->gpu,
        .uuid = g->uuid,
        .pci_bus_id = g->pci_bus_id,
        .model_name = g->name,
        .mig_profile = dv->mig >= 0 ? g->migs[dv->mig].profile : NULL,
        .gpu_instance_id = dv->mig >= 0 ? g->migs[dv->mig].gi_id : 0,
        .sample = dv->sample,
        .have_xid = j->last_xid != NULL,
        .last_xid = j->last_xid ? j->last_xid[dv->gpu] : 0,
        .labels = &set->labels[set->n * EXPORTER_SERIES_LABELS_MAX],
        .xid_counts = wc->xid,
        .n_xid_counts = wc->n_xid,
        .clock_event_counts = wc->clock,
        .n_clock_event_counts = wc->n_clock,
    };
    set->n++;
    return s;
}

/* A series of use u of device dv with its pod's labels: pod_uid when uid is not NULL, the pod's
 * own labels from meta (NULL: none). NULL when the set is full. */
static struct exporter_series *add_labelled(struct exporter_series_set *set,
                                            const struct exporter_join *j,
                                            const struct exporter_dev *dv, const struct use *u,
                                            const char *uid,
                                            const struct exporter_podmeta_pod *meta)
{
    size_t k = set->n;
    struct exporter_series *s = series_add(set, j, dv);
    if (!s)
        return NULL;
    s->n_labels = use_labels(j, u, uid, set->numbers[k], sizeof(set->numbers[k]),
                             &set->labels[k * EXPORTER_SERIES_LABELS_MAX]);
    if (meta && j->pod_labels) {
        s->pod_labels = meta->labels;
        s->n_pod_labels = meta->n_labels;
    }
    return s;
}

/* The series of use u of device dv, for every field but those split per process. */
static void add_use(struct exporter_series_set *set, const struct exporter_join *j,
                    const struct exporter_dev *dv, const struct use *u, uint64_t split)
{
    struct exporter_podmeta_pod meta = {0};
    bool known = exporter_podmeta_find(j->podmeta, u->ref->namespace_, u->ref->pod, &meta);
    struct exporter_series *s =
        add_labelled(set, j, dv, u, known && j->pod_uid ? meta.uid : NULL, known ? &meta : NULL);
    if (s && split) {
        s->fields = EXPORTER_FIELDS_EXCEPT;
        s->field_metrics = split;
    }
}

/* The per-process series of use u: the split fields' values summed over its pod's processes,
 * with pod_uid always (as upstream's createPerProcessMetrics); none for a pod whose UID is not
 * known, whose processes cannot be told apart. */
static void add_process_use(struct exporter_series_set *set, const struct exporter_join *j,
                            const struct exporter_dev *dv, const struct use *u,
                            const struct exporter_procs *p, uint64_t split)
{
    static const enum gpu_metric metrics[] = {GPU_METRIC_GPU_UTIL, GPU_METRIC_FB_USED};
    struct exporter_podmeta_pod meta = {0};
    struct gpu_sample sample = dv->sample;
    uint64_t bits = 0;
    if (!exporter_podmeta_find(j->podmeta, u->ref->namespace_, u->ref->pod, &meta))
        return;
    for (size_t i = 0; i < ARRAY_SIZE(metrics); i++) {
        double v;
        if ((split & (UINT64_C(1) << metrics[i])) &&
            exporter_procs_pod_value(p, metrics[i], meta.uid, &v)) {
            sample.v[metrics[i]] = v;
            bits |= UINT64_C(1) << metrics[i];
        }
    }
    struct exporter_series *s = bits ? add_labelled(set, j, dv, u, meta.uid, &meta) : NULL;
    if (!s)
        return;
    s->sample = sample;
    s->fields = EXPORTER_FIELDS_ONLY;
    s->field_metrics = bits;
}

/* The fields of device i split per process: those of GPU_UTIL and FB_USED it has whose process
 * list was read; none without virtual GPUs, pod metadata (the pods' UIDs) or the processes. */
static uint64_t split_fields(const struct exporter_join *j, size_t i, const struct exporter_dev *dv)
{
    const uint64_t util = UINT64_C(1) << GPU_METRIC_GPU_UTIL, fb = UINT64_C(1)
                                                                   << GPU_METRIC_FB_USED;
    uint64_t bits = 0;
    if (!j->virtual_gpus || !j->podmeta || !j->procs)
        return 0;
    if (j->procs[i].util_ok && (dv->sample.have & util))
        bits |= util;
    if (j->procs[i].memory_ok && (dv->sample.have & fb))
        bits |= fb;
    return bits;
}

/* The series of device i and its n uses. */
static void add_device(struct exporter_series_set *set, const struct exporter_join *j, size_t i,
                       const struct exporter_dev *dv, const struct use *uses, size_t n)
{
    uint64_t split = n ? split_fields(j, i, dv) : 0;
    if (n == 0 || split) {
        struct exporter_series *s = series_add(set, j, dv);
        if (s && split) {
            s->fields = EXPORTER_FIELDS_ONLY;
            s->field_metrics = split;
        }
    }
    for (size_t k = 0; k < n; k++) {
        add_use(set, j, dv, &uses[k], split);
        if (split)
            add_process_use(set, j, dv, &uses[k], &j->procs[i], split);
    }
}

bool exporter_series_has_pods(const struct exporter_join *j, const struct exporter_dev *dv)
{
    struct exporter_dra_device dd;
    for (size_t i = 0; j->pods && i < j->pods->n; i++) {
        const struct exporter_pod_ref *r = &j->pods->v[i];
        if (r->device ? device_matches(j, dv, r) : j->slices && claim_matches(j, dv, r, &dd))
            return true;
    }
    return false;
}

void exporter_series_set_release(struct exporter_series_set *s)
{
    free(s->v);
    free(s->labels);
    free(s->numbers);
    *s = (struct exporter_series_set){0};
}

int exporter_series_join(const struct exporter_join *j, const struct exporter_dev *devs, size_t n,
                         struct exporter_series_set *ret)
{
    size_t n_pods = j->pods ? j->pods->n : 0;
    /* A device: its own series, and two per pod using it at most. */
    struct exporter_series_set set = {.cap = n + 2 * n_pods + 1};
    _cleanup_free_ struct use *uses = calloc(n_pods + 1, sizeof(*uses));
    set.v = calloc(set.cap, sizeof(*set.v));
    set.labels = calloc(set.cap * EXPORTER_SERIES_LABELS_MAX, sizeof(*set.labels));
    set.numbers = calloc(set.cap, sizeof(*set.numbers));
    if (!uses || !set.v || !set.labels || !set.numbers) {
        exporter_series_set_release(&set);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        if (!devs[i].ok)
            continue;
        add_device(&set, j, i, &devs[i], uses, device_uses(j, &devs[i], uses));
    }
    *ret = set;
    return 0;
}
