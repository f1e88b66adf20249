/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The labels of `gpuplane discover`: every nvidia.com/ label NVIDIA's GPU Feature Discovery puts on
 * a node, computed from the inventory, the MIG strategy, the sharing section of the config file,
 * the machine's DMI product name and a timestamp. Pure: it reads nothing and logs nothing, so the
 * daemon, --print-labels and the tests get the same answer from the same input. What it has to
 * say about the node (several GPU models, fabric IDs that disagree) goes into the set's warnings.
 *
 * The rules, each with the upstream source it follows, are in docs/discover-labels.md. The shape
 * follows GFD's: the full-GPU set per model (MIG-enabled models first, without sharing, then the
 * others with it; a later model overwrites an earlier one), then the MIG strategy's set on top.
 * GPUs with an error are left out, so a node keeps the labels of the GPUs that answer.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "discover-internal.h"

#define LABEL_PREFIX "nvidia.com/"
#define KEY_MAX 160
#define VALUE_MAX 256
#define FULL_GPU_RESOURCE "nvidia.com/gpu"

/* A label set under construction: keys unique (a later set replaces), sorted at the end. */
struct builder {
    struct discover_label *v;
    size_t n, cap;
    char **warnings;
    size_t n_warnings;
    int error; /* the first -ENOMEM; later calls do nothing */
};

static void builder_release(struct builder *b)
{
    for (size_t i = 0; i < b->n; i++) {
        free(b->v[i].key);
        free(b->v[i].value);
    }
    free(b->v);
    for (size_t i = 0; i < b->n_warnings; i++)
        free(b->warnings[i]);
    free(b->warnings);
    *b = (struct builder){0};
}

static void set_value(struct builder *b, const char *key, const char *value)
{
    if (b->error)
        return;
    for (size_t i = 0; i < b->n; i++) {
        if (strcmp(b->v[i].key, key) == 0) {
            char *copy = strdup(value);
            if (!copy) {
                b->error = -ENOMEM;
                return;
            }
            free(b->v[i].value);
            b->v[i].value = copy;
            return;
        }
    }
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        struct discover_label *v = realloc(b->v, cap * sizeof(*v));
        if (!v) {
            b->error = -ENOMEM;
            return;
        }
        b->v = v;
        b->cap = cap;
    }
    char *k = strdup(key);
    char *val = strdup(value);
    if (!k || !val) {
        free(k);
        free(val);
        b->error = -ENOMEM;
        return;
    }
    b->v[b->n++] = (struct discover_label){.key = k, .value = val};
}

/* Sets <resource>.<suffix> (resource "nvidia.com/gpu", "nvidia.com/mig-1g.5gb") to a formatted
 * value. */
_printf_(4, 5) static void set(struct builder *b, const char *resource, const char *suffix,
                               const char *fmt, ...)
{
    char key[KEY_MAX], value[VALUE_MAX];
    va_list ap;

    int n = snprintf(key, sizeof(key), "%s.%s", resource, suffix);
    if (n < 0 || (size_t)n >= sizeof(key))
        return; /* cannot happen with the names used here; never a cut key */
    va_start(ap, fmt);
    n = vsnprintf(value, sizeof(value), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    set_value(b, key, value);
}

_printf_(2, 3) static void warn(struct builder *b, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (b->error)
        return;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    char **w = realloc(b->warnings, (b->n_warnings + 2) * sizeof(*w));
    if (!w) {
        b->error = -ENOMEM;
        return;
    }
    b->warnings = w;
    w[b->n_warnings] = strdup(msg);
    if (!w[b->n_warnings]) {
        b->error = -ENOMEM;
        return;
    }
    w[++b->n_warnings] = NULL;
}

void discover_sanitise(const char *in, char *out, size_t n)
{
    size_t o = 0;
    bool pending_dash = false;

    if (n == 0)
        return;
    for (const char *p = in ? in : ""; *p; p++) {
        char c = *p;
        bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.';
        if (c == ' ') {
            /* Go's strings.Fields + Join: leading and trailing spaces go, inner runs are one '-'.
             */
            pending_dash = o > 0;
            continue;
        }
        if (!keep)
            continue; /* dropped before the spaces are looked at, as the regexp does first */
        if (pending_dash && o + 1 < n)
            out[o++] = '-';
        pending_dash = false;
        if (o + 1 < n)
            out[o++] = c;
    }
    out[o] = '\0';
}

/* NVIDIA's family names by CUDA compute capability (internal/lm/resource.go getArchFamily). */
static const char *family(int major, int minor)
{
    switch (major) {
    case 1:
        return "tesla";
    case 2:
        return "fermi";
    case 3:
        return "kepler";
    case 5:
        return "maxwell";
    case 6:
        return "pascal";
    case 7:
        return minor < 5 ? "volta" : "turing";
    case 8:
        return minor < 9 ? "ampere" : "ada-lovelace";
    case 9:
        return "hopper";
    case 10:
    case 12:
        return "blackwell";
    case 13:
        return "rubin";
    default:
        return "undefined";
    }
}

static const struct discover_share *find_share(const struct discover_input *in,
                                               const char *resource)
{
    for (size_t i = 0; i < in->n_shares; i++)
        if (in->shares[i].resource && strcmp(in->shares[i].resource, resource) == 0)
            return &in->shares[i];
    return NULL;
}

/* How one resource is advertised: GFD's resourceLabeler. with_sharing false is its labeler
 * "without sharing" (MIG-enabled GPUs of the full-GPU set, the -MIG-INVALID set): replicas 0. */
struct resource {
    const char *name;
    unsigned replicas;
    const char *strategy; /* "none" unless replicas > 1 */
    bool shared_suffix;   /* "-SHARED" on the product */
};

static struct resource resource_of(const struct discover_input *in, const char *name,
                                   bool with_sharing)
{
    struct resource r = {.name = name, .replicas = 0, .strategy = "none"};
    if (!with_sharing)
        return r;
    const struct discover_share *s = find_share(in, name);
    r.replicas = s && s->replicas > 0 ? s->replicas : 1;
    if (s && s->replicas > 1) {
        r.strategy = s->strategy && s->strategy[0] ? s->strategy : "time-slicing";
        r.shared_suffix = !s->renamed;
    }
    return r;
}

/* product, count, replicas and sharing-strategy of a resource; the product is the sanitised parts
 * joined with '-' (GFD's getProductName). */
static void set_base(struct builder *b, const struct resource *r, size_t count, const char *model,
                     const char *profile)
{
    char product[VALUE_MAX], part[VALUE_MAX];
    size_t len = 0;

    product[0] = '\0';
    const char *parts[] = {model, profile ? "MIG" : NULL, profile};
    for (size_t i = 0; i < 3; i++) {
        if (!parts[i] || !parts[i][0])
            continue;
        discover_sanitise(parts[i], part, sizeof(part));
        if (!part[0])
            continue;
        int n = snprintf(product + len, sizeof(product) - len, "%s%s", len ? "-" : "", part);
        if (n < 0 || (size_t)n >= sizeof(product) - len)
            break;
        len += (size_t)n;
    }
    if (len && r->shared_suffix)
        (void)snprintf(product + len, sizeof(product) - len, "-SHARED");
    if (product[0])
        set(b, r->name, "product", "%s", product);
    set(b, r->name, "count", "%zu", count);
    set(b, r->name, "replicas", "%u", r->replicas);
    set(b, r->name, "sharing-strategy", "%s", r->strategy);
}

static bool answers(const struct gpu_device *dev)
{
    return dev->error == 0;
}

/* cuda.driver.*, cuda.driver-version.*, cuda.runtime.*, cuda.runtime-version.* */
static void set_versions(struct builder *b, const struct gpu_inventory *inv)
{
    char parts[3][GPU_VERSION_MAX] = {{0}};
    size_t n = 0, len = 0;
    bool ok = inv->driver_version[0] != '\0';

    for (const char *p = inv->driver_version; ok && *p; p++) {
        if (*p == '.') {
            if (++n >= 3)
                ok = false;
            len = 0;
            continue;
        }
        if (len + 1 < sizeof(parts[n]))
            parts[n][len++] = *p;
    }
    if (ok && n >= 1 && parts[0][0] && parts[1][0]) {
        set(b, LABEL_PREFIX "cuda", "driver.major", "%s", parts[0]);
        set(b, LABEL_PREFIX "cuda", "driver.minor", "%s", parts[1]);
        set(b, LABEL_PREFIX "cuda", "driver.rev", "%s", parts[2]);
        set(b, LABEL_PREFIX "cuda", "driver-version.major", "%s", parts[0]);
        set(b, LABEL_PREFIX "cuda", "driver-version.minor", "%s", parts[1]);
        set(b, LABEL_PREFIX "cuda", "driver-version.revision", "%s", parts[2]);
        set(b, LABEL_PREFIX "cuda", "driver-version.full", "%s", inv->driver_version);
    } else {
        warn(b, "driver version \"%s\" does not match the format X.Y[.Z]: no cuda.driver labels",
             inv->driver_version);
    }
    int v = inv->cuda_driver_version;
    if (v > 0) {
        set(b, LABEL_PREFIX "cuda", "runtime.major", "%d", v / 1000);
        set(b, LABEL_PREFIX "cuda", "runtime.minor", "%d", (v % 1000) / 10);
        set(b, LABEL_PREFIX "cuda", "runtime-version.major", "%d", v / 1000);
        set(b, LABEL_PREFIX "cuda", "runtime-version.minor", "%d", (v % 1000) / 10);
        set(b, LABEL_PREFIX "cuda", "runtime-version.full", "%d.%d", v / 1000, (v % 1000) / 10);
    } else {
        warn(b, "the CUDA driver version is unknown: no cuda.runtime labels");
    }
}

/* The full-GPU labels of one model, described by its last GPU (GFD keeps the last device of each
 * name). */
static void set_full_gpu(struct builder *b, const struct discover_input *in,
                         const struct gpu_device *dev, size_t count, bool with_sharing)
{
    struct resource r = resource_of(in, FULL_GPU_RESOURCE, with_sharing);
    set_base(b, &r, count, dev->name, NULL);
    uint64_t mib = dev->memory_bytes >> 20;
    if (mib)
        set(b, FULL_GPU_RESOURCE, "memory", "%llu", (unsigned long long)mib);
    if (dev->cc_major > 0) {
        set(b, FULL_GPU_RESOURCE, "family", "%s", family(dev->cc_major, dev->cc_minor));
        set(b, FULL_GPU_RESOURCE, "compute.major", "%d", dev->cc_major);
        set(b, FULL_GPU_RESOURCE, "compute.minor", "%d", dev->cc_minor);
    }
}

/* The full-GPU set (every strategy): one label set per model, counted over every answering GPU of
 * the model, MIG-enabled ones included. Models with MIG-enabled GPUs come first, labelled without
 * sharing, then models with full GPUs: with several models the last written wins, as in GFD. */
static void set_full_gpus(struct builder *b, const struct discover_input *in)
{
    const struct gpu_inventory *inv = in->inv;
    const struct gpu_device *last = NULL;
    char models[512];
    size_t len = 0, n_models = 0;

    for (int pass = 0; pass < 2; pass++) {
        bool mig_pass = pass == 0;
        for (size_t i = 0; i < inv->n_devices; i++) {
            const struct gpu_device *dev = &inv->devices[i];
            if (!answers(dev) || dev->mig_enabled != mig_pass)
                continue;
            bool later = false;
            size_t count = 0;
            for (size_t j = 0; j < inv->n_devices; j++) {
                const struct gpu_device *o = &inv->devices[j];
                if (!answers(o) || strcmp(o->name, dev->name) != 0)
                    continue;
                count++;
                if (j > i && o->mig_enabled == mig_pass)
                    later = true;
            }
            if (later)
                continue; /* the model's last GPU of this pass describes it */
            set_full_gpu(b, in, dev, count, !mig_pass);
            last = dev;
        }
    }
    /* Every model once, in index order, for the warning. */
    models[0] = '\0';
    for (size_t i = 0; i < inv->n_devices; i++) {
        const struct gpu_device *dev = &inv->devices[i];
        bool first = answers(dev);
        for (size_t j = 0; first && j < i; j++)
            if (answers(&inv->devices[j]) && strcmp(inv->devices[j].name, dev->name) == 0)
                first = false;
        if (!first)
            continue;
        n_models++;
        int n =
            snprintf(models + len, sizeof(models) - len, "%s\"%s\"", len ? ", " : "", dev->name);
        if (n > 0 && (size_t)n < sizeof(models) - len)
            len += (size_t)n;
    }
    if (n_models > 1 && last)
        warn(b,
             "several GPU models on the node (%s): the nvidia.com/gpu labels describe the last, "
             "\"%s\"",
             models, last->name);
}

/* The attribute labels of a MIG device (GFD's nvmlMigDevice.GetAttributes). */
static void set_mig_attributes(struct builder *b, const char *resource,
                               const struct gpu_mig_device *m)
{
    set(b, resource, "memory", "%llu", (unsigned long long)(m->memory_bytes >> 20));
    set(b, resource, "multiprocessors", "%u", m->multiprocessors);
    set(b, resource, "slices.gi", "%u", m->gi_slices);
    set(b, resource, "slices.ci", "%u", m->ci_slices);
    if (m->engines_known) {
        set(b, resource, "engines.copy", "%u", m->copy_engines);
        set(b, resource, "engines.decoder", "%u", m->decoders);
        set(b, resource, "engines.encoder", "%u", m->encoders);
        set(b, resource, "engines.jpeg", "%u", m->jpeg_engines);
        set(b, resource, "engines.ofa", "%u", m->ofa_engines);
    }
}

/* "1g.10gb+me" -> "1g.10gb.me" (GFD's MIG device GetName). */
static void mig_name(const struct gpu_mig_device *m, char out[static GPU_PROFILE_MAX])
{
    size_t i = 0;
    for (; m->profile[i] && i < GPU_PROFILE_MAX - 1; i++)
        out[i] = m->profile[i] == '+' ? '.' : m->profile[i];
    out[i] = '\0';
}

static void set_mig_invalid(struct builder *b, const struct gpu_device *first_mig,
                            const char *reason)
{
    struct resource r = {.name = FULL_GPU_RESOURCE, .replicas = 0, .strategy = ""};
    warn(b, "invalid configuration for mig-strategy=single: %s", reason);
    set_base(b, &r, 0, first_mig->name, "INVALID");
    set(b, FULL_GPU_RESOURCE, "memory", "0");
}

static void set_mig_single(struct builder *b, const struct discover_input *in)
{
    const struct gpu_inventory *inv = in->inv;
    const struct gpu_device *first_mig = NULL, *parent = NULL;
    const struct gpu_mig_device *dev = NULL;
    bool empty = false, full = false, several = false;
    char name[GPU_PROFILE_MAX] = "", other[GPU_PROFILE_MAX];
    size_t count = 0;

    for (size_t i = 0; i < inv->n_devices; i++) {
        const struct gpu_device *g = &inv->devices[i];
        if (!answers(g))
            continue;
        if (!g->mig_enabled) {
            full = true;
            continue;
        }
        if (!first_mig)
            first_mig = g;
        if (g->n_migs == 0)
            empty = true;
        for (size_t j = 0; j < g->n_migs; j++) {
            mig_name(&g->migs[j], other);
            if (!dev) {
                dev = &g->migs[j];
                parent = g;
                memcpy(name, other, sizeof(name));
            } else if (strcmp(name, other) != 0) {
                several = true;
            }
            count++;
        }
    }
    if (!first_mig)
        return; /* no MIG-enabled GPU: the full-GPU set stands */
    if (empty)
        return set_mig_invalid(b, first_mig, "at least one MIG-enabled GPU has no MIG devices");
    if (full)
        return set_mig_invalid(b, first_mig, "GPUs with MIG enabled and disabled on one node");
    if (several)
        return set_mig_invalid(b, first_mig, "more than one MIG device type on the node");
    struct resource r = resource_of(in, FULL_GPU_RESOURCE, true);
    set_base(b, &r, count, parent->name, name);
    set_mig_attributes(b, FULL_GPU_RESOURCE, dev);
    /* What is advertised is a MIG device, which is a compute device whatever the GPU's class. */
    set(b, FULL_GPU_RESOURCE, "mode", "compute");
}

static void set_mig_mixed(struct builder *b, const struct discover_input *in)
{
    const struct gpu_inventory *inv = in->inv;
    char name[GPU_PROFILE_MAX], other[GPU_PROFILE_MAX], resource[KEY_MAX];

    for (size_t i = 0; i < inv->n_devices; i++) {
        const struct gpu_device *g = &inv->devices[i];
        if (!answers(g) || !g->mig_enabled)
            continue;
        for (size_t j = 0; j < g->n_migs; j++) {
            mig_name(&g->migs[j], name);
            /* Once per profile: at its first device, which describes it, with the node's count. */
            bool first = true;
            size_t count = 0;
            for (size_t k = 0; k < inv->n_devices; k++) {
                const struct gpu_device *h = &inv->devices[k];
                if (!answers(h) || !h->mig_enabled)
                    continue;
                for (size_t l = 0; l < h->n_migs; l++) {
                    mig_name(&h->migs[l], other);
                    if (strcmp(name, other) != 0)
                        continue;
                    count++;
                    if (k < i || (k == i && l < j))
                        first = false;
                }
            }
            if (!first)
                continue;
            int n = snprintf(resource, sizeof(resource), LABEL_PREFIX "mig-%s", name);
            if (n < 0 || (size_t)n >= sizeof(resource))
                continue;
            struct resource r = resource_of(in, resource, true);
            set_base(b, &r, count, g->name, name);
            set_mig_attributes(b, resource, &g->migs[j]);
        }
    }
}

/* gpu.mode over the answering GPUs: one class for all, else "unknown" (GFD's newGPUModeLabeler). */
static const char *gpu_mode(const struct gpu_inventory *inv)
{
    uint32_t cls = 0;
    bool any = false;
    for (size_t i = 0; i < inv->n_devices; i++) {
        const struct gpu_device *g = &inv->devices[i];
        if (!answers(g))
            continue;
        if (g->pci_class == 0 || (any && (g->pci_class >> 8) != (cls >> 8)))
            return "unknown";
        cls = g->pci_class;
        any = true;
    }
    switch (cls >> 8) {
    case 0x0300:
        return "graphics";
    case 0x0302:
        return "compute";
    default:
        return "unknown";
    }
}

/* gpu.clique: the fabric IDs of the fabric-attached GPUs, when they all agree (GFD's imex.go). */
static void set_clique(struct builder *b, const struct gpu_inventory *inv)
{
    const struct gpu_device *first = NULL;
    for (size_t i = 0; i < inv->n_devices; i++) {
        const struct gpu_device *g = &inv->devices[i];
        if (!answers(g) || !g->fabric_attached)
            continue;
        if (!first) {
            first = g;
            continue;
        }
        if (strcmp(first->fabric_cluster_uuid, g->fabric_cluster_uuid) != 0) {
            warn(b,
                 "NVLink fabric cluster UUIDs differ (%s on GPU %u, %s on GPU %u): no gpu.clique",
                 first->fabric_cluster_uuid, first->index, g->fabric_cluster_uuid, g->index);
            return;
        }
        if (first->fabric_clique_id != g->fabric_clique_id) {
            warn(b, "NVLink fabric clique IDs differ (%u on GPU %u, %u on GPU %u): no gpu.clique",
                 first->fabric_clique_id, first->index, g->fabric_clique_id, g->index);
            return;
        }
    }
    if (first && first->fabric_cluster_uuid[0])
        set(b, FULL_GPU_RESOURCE, "clique", "%s.%u", first->fabric_cluster_uuid,
            first->fabric_clique_id);
}

static void set_node(struct builder *b, const struct discover_input *in)
{
    const struct gpu_inventory *inv = in->inv;
    bool mig_capable = false, mig_enabled = false, vgpu = false, mps = false;
    const struct gpu_device *vgpu_dev = NULL;
    char machine[VALUE_MAX];

    if (in->timestamp >= 0)
        set(b, LABEL_PREFIX "gfd", "timestamp", "%lld", (long long)in->timestamp);
    discover_sanitise(in->machine ? in->machine : "unknown", machine, sizeof(machine));
    set(b, FULL_GPU_RESOURCE, "machine", "%s", machine);
    set_versions(b, inv);
    for (size_t i = 0; i < inv->n_devices; i++) {
        const struct gpu_device *g = &inv->devices[i];
        if (!answers(g))
            continue;
        mig_capable |= g->mig_capable;
        mig_enabled |= g->mig_enabled;
        if (g->vgpu_guest) {
            vgpu = true;
            vgpu_dev = g;
        }
    }
    for (size_t i = 0; i < in->n_shares; i++)
        if (in->shares[i].strategy && strcmp(in->shares[i].strategy, "mps") == 0)
            mps = true;
    set(b, LABEL_PREFIX "mig", "capable", "%s", mig_capable ? "true" : "false");
    set(b, LABEL_PREFIX "mps", "capable", "%s", mps && !mig_enabled ? "true" : "false");
    set(b, LABEL_PREFIX "vgpu", "present", "%s", vgpu ? "true" : "false");
    if (vgpu_dev) {
        set(b, LABEL_PREFIX "vgpu", "host-driver-version", "%s",
            vgpu_dev->vgpu_host_driver_version);
        set(b, LABEL_PREFIX "vgpu", "host-driver-branch", "%s", vgpu_dev->vgpu_host_driver_branch);
    }
    set(b, FULL_GPU_RESOURCE, "mode", "%s", gpu_mode(inv));
    set_clique(b, inv);
}

static int compare_labels(const void *a, const void *b)
{
    return strcmp(((const struct discover_label *)a)->key, ((const struct discover_label *)b)->key);
}

int discover_labels_compute(const struct discover_input *in, struct diag *d,
                            struct discover_labels *ret)
{
    _cleanup_(builder_release) struct builder b = {0};
    size_t answering = 0;

    if (!in || !in->inv)
        return diag_fail(d, -EINVAL, "no inventory to label");
    if (in->mig != DISCOVER_MIG_NONE && in->mig != DISCOVER_MIG_SINGLE &&
        in->mig != DISCOVER_MIG_MIXED)
        return diag_fail(d, -EINVAL, "unknown MIG strategy %d", (int)in->mig);
    for (size_t i = 0; i < in->inv->n_devices; i++)
        if (answers(&in->inv->devices[i]))
            answering++;
    if (answering) {
        set_node(&b, in);
        set_full_gpus(&b, in);
        if (in->mig == DISCOVER_MIG_SINGLE)
            set_mig_single(&b, in);
        else if (in->mig == DISCOVER_MIG_MIXED)
            set_mig_mixed(&b, in);
        if (in->mig != DISCOVER_MIG_NONE)
            set(&b, LABEL_PREFIX "mig", "strategy", "%s",
                in->mig == DISCOVER_MIG_SINGLE ? "single" : "mixed");
    }
    if (b.error)
        return diag_fail(d, b.error, "out of memory");
    if (b.n)
        qsort(b.v, b.n, sizeof(*b.v), compare_labels);
    *ret = (struct discover_labels){.v = TAKE_PTR(b.v), .n = b.n, .warnings = TAKE_PTR(b.warnings)};
    b.n = b.n_warnings = 0;
    return 0;
}

void discover_labels_release(struct discover_labels *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].key);
        free(l->v[i].value);
    }
    free(l->v);
    for (size_t i = 0; l->warnings && l->warnings[i]; i++)
        free(l->warnings[i]);
    free(l->warnings);
    *l = (struct discover_labels){0};
}

const char *discover_labels_get(const struct discover_labels *l, const char *key)
{
    if (!l || !key)
        return NULL;
    /* Linear: also serves a builder's unsorted set; a node has a few dozen labels. */
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].key, key) == 0)
            return l->v[i].value;
    return NULL;
}

bool discover_labels_equal(const struct discover_labels *a, const struct discover_labels *b)
{
    if (!a || !b)
        return a == b;
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i].key, b->v[i].key) != 0 || strcmp(a->v[i].value, b->v[i].value) != 0)
            return false;
    return true;
}
