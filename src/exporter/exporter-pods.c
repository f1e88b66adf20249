/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pod-resources mapping of `gpuplane exporter` (exporter-pods.h). Which ids mean what is
 * dcgm-exporter's (internal/pkg/transformation/kubernetes.go): the time-slicing and MPS replicas
 * of NVIDIA's device plugin are `<id>::<n>`, GKE's device plugin names partitions
 * `nvidia<N>/gi<M>` and shares `…/vgpu<K>`; anything else is the id itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "exporter-pods.h"

#define GPU_RESOURCE "nvidia.com/gpu"
#define MIG_PREFIX "nvidia.com/mig-"
#define ID_MAX 256

bool exporter_pods_resource_wanted(const char *name, const char *const *extra)
{
    if (!name)
        return false;
    if (strcmp(name, GPU_RESOURCE) == 0 || strncmp(name, MIG_PREFIX, strlen(MIG_PREFIX)) == 0)
        return true;
    for (size_t i = 0; extra && extra[i]; i++)
        if (strcmp(name, extra[i]) == 0)
            return true;
    return false;
}

/* A small non-negative decimal that runs to the end of s; -1 otherwise. */
static int number(const char *s)
{
    long v = 0;
    if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 6)
        return -1;
    for (; *s; s++)
        v = v * 10 + (*s - '0');
    return (int)v;
}

int exporter_pods_parse_id(const char *id, char **ret_device, int *ret_gi, int *ret_vgpu)
{
    char buf[ID_MAX];
    int gi = -1, vgpu = -1;
    if (strlen(id) >= sizeof(buf))
        return -EINVAL;
    snprintf(buf, sizeof(buf), "%s", id);
    char *sep = strstr(buf, "::");
    if (sep) { /* NVIDIA's replicas */
        vgpu = number(sep + 2);
        *sep = '\0';
    }
    char *slash = strrchr(buf, '/');
    if (slash && strncmp(slash + 1, "vgpu", 4) == 0 && number(slash + 5) >= 0) {
        vgpu = number(slash + 5);
        *slash = '\0';
    }
    slash = strrchr(buf, '/');
    if (slash && strncmp(slash + 1, "gi", 2) == 0 && number(slash + 3) >= 0) {
        gi = number(slash + 3);
        *slash = '\0';
    }
    if (!buf[0])
        return -EINVAL;
    char *device = strdup(buf);
    if (!device)
        return -ENOMEM;
    *ret_device = device;
    *ret_gi = gi;
    *ret_vgpu = vgpu;
    return 0;
}

static void ref_release(struct exporter_pod_ref *r)
{
    free(r->device);
    free(r->pod);
    free(r->namespace_);
    free(r->container);
    free(r->claim_name);
    free(r->claim_namespace);
    free(r->driver);
    free(r->pool);
    free(r->dra_device);
}

void exporter_pods_release(struct exporter_pods *p)
{
    for (size_t i = 0; i < p->n; i++)
        ref_release(&p->v[i]);
    free(p->v);
    *p = (struct exporter_pods){0};
}

static char *dup_or_empty(const char *s, bool *fail)
{
    char *r = strdup(s ? s : "");
    if (!r)
        *fail = true;
    return r;
}

/* Appends a zeroed entry for the pod and container; NULL on -ENOMEM. */
static struct exporter_pod_ref *add(struct exporter_pods *p, size_t *alloc,
                                    const V1__PodResources *pod, const V1__ContainerResources *c)
{
    if (p->n == *alloc) {
        size_t n = *alloc ? *alloc * 2 : 16;
        struct exporter_pod_ref *v = realloc(p->v, n * sizeof(*v));
        if (!v)
            return NULL;
        p->v = v;
        *alloc = n;
    }
    struct exporter_pod_ref *r = &p->v[p->n];
    bool fail = false;
    *r = (struct exporter_pod_ref){.gi = -1, .vgpu = -1};
    r->pod = dup_or_empty(pod->name, &fail);
    r->namespace_ = dup_or_empty(pod->namespace_, &fail);
    r->container = dup_or_empty(c->name, &fail);
    p->n++;
    return fail ? NULL : r;
}

static int add_devices(struct exporter_pods *p, size_t *alloc, const V1__PodResources *pod,
                       const V1__ContainerResources *c, const struct exporter_pods_options *o)
{
    for (size_t i = 0; i < c->n_devices; i++) {
        const V1__ContainerDevices *dev = c->devices[i];
        if (!exporter_pods_resource_wanted(dev->resource_name, o->extra_resources))
            continue;
        for (size_t j = 0; j < dev->n_device_ids; j++) {
            char *device = NULL;
            int gi, vgpu;
            int r = exporter_pods_parse_id(dev->device_ids[j], &device, &gi, &vgpu);
            if (r == -EINVAL)
                continue;
            struct exporter_pod_ref *ref = r < 0 ? NULL : add(p, alloc, pod, c);
            if (!ref) {
                free(device);
                return -ENOMEM;
            }
            ref->device = device;
            ref->gi = gi;
            ref->vgpu = vgpu;
        }
    }
    return 0;
}

static int add_claims(struct exporter_pods *p, size_t *alloc, const V1__PodResources *pod,
                      const V1__ContainerResources *c)
{
    for (size_t i = 0; i < c->n_dynamic_resources; i++) {
        const V1__DynamicResource *dr = c->dynamic_resources[i];
        for (size_t j = 0; j < dr->n_claim_resources; j++) {
            const V1__ClaimResource *cr = dr->claim_resources[j];
            struct exporter_pod_ref *ref = add(p, alloc, pod, c);
            bool fail = !ref;
            if (ref) {
                ref->claim_name = dup_or_empty(dr->claim_name, &fail);
                ref->claim_namespace = dup_or_empty(dr->claim_namespace, &fail);
                ref->driver = dup_or_empty(cr->driver_name, &fail);
                ref->pool = dup_or_empty(cr->pool_name, &fail);
                ref->dra_device = dup_or_empty(cr->device_name, &fail);
            }
            if (fail)
                return -ENOMEM;
        }
    }
    return 0;
}

int exporter_pods_from_list(const V1__ListPodResourcesResponse *resp,
                            const struct exporter_pods_options *o, struct exporter_pods *ret)
{
    struct exporter_pods p = {0};
    size_t alloc = 0;
    int r = 0;
    for (size_t i = 0; r >= 0 && i < resp->n_pod_resources; i++) {
        const V1__PodResources *pod = resp->pod_resources[i];
        for (size_t k = 0; r >= 0 && k < pod->n_containers; k++) {
            r = add_devices(&p, &alloc, pod, pod->containers[k], o);
            if (r >= 0 && o->dra)
                r = add_claims(&p, &alloc, pod, pod->containers[k]);
        }
    }
    if (r < 0) {
        exporter_pods_release(&p);
        return r;
    }
    *ret = p;
    return 0;
}
