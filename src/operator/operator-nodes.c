/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Node labelling rules (operator-nodes.h): the merge patch a node needs, from its labels and the
 * operator's own annotation. Pure: the daemon feeds it cached nodes and sends what comes out.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "operator-nodes.h"

#define D(x) OP_LABEL_DEPLOY_PREFIX x

const char *const op_deploy_labels[] = {
    D("driver"),        D("container-toolkit"),     D("operator-validator"), D("device-plugin"),
    D("dcgm-exporter"), D("gpu-feature-discovery"), D("dra-driver"),         NULL,
};
#define DRA_LABEL D("dra-driver")

/* Container-workload labels of NVIDIA operands gpuplane does not deploy: left alone on a GPU node
 * (another deployment may run them), removed with the rest where no operand may run. */
static const char *const other_container_labels[] = {
    D("dcgm"),
    D("node-status-exporter"),
    D("mig-manager"),
    NULL,
};

/* NVIDIA's labels of the VM workloads: a container node never keeps them (NVIDIA's rule). */
static const char *const vm_labels[] = {
    D("sandbox-device-plugin"),
    D("kata-sandbox-device-plugin"),
    D("sandbox-validator"),
    D("vfio-manager"),
    D("kata-manager"),
    D("cc-manager"),
    D("vgpu-manager"),
    D("vgpu-device-manager"),
    NULL,
};

/* In every workload config (NVIDIA v26.x); removed only where no operand may run. */
static const char *const all_config_labels[] = {
    D("client"),
    NULL,
};

static const char *const GPU_PCI_LABELS[] = {
    OP_NFD_PREFIX "pci-10de.present",
    OP_NFD_PREFIX "pci-0302_10de.present",
    OP_NFD_PREFIX "pci-0300_10de.present",
};

static const char *label(const json_t *labels, const char *key)
{
    return json_string_value(json_object_get(labels, key));
}

bool op_node_has_gpu(const json_t *labels)
{
    for (size_t i = 0; i < ARRAY_SIZE(GPU_PCI_LABELS); i++) {
        const char *v = label(labels, GPU_PCI_LABELS[i]);
        if (v && strcmp(v, "true") == 0)
            return true;
    }
    return false;
}

bool op_node_gpu_present(const json_t *labels)
{
    const char *v = label(labels, OP_LABEL_GPU_PRESENT);
    return v && strcmp(v, "true") == 0;
}

bool op_node_has_nfd(const json_t *labels)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)labels, key, v)
    {
        if (strncmp(key, OP_NFD_PREFIX, strlen(OP_NFD_PREFIX)) == 0)
            return true;
    }
    return false;
}

static bool tag_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

bool op_node_os_tag(const json_t *labels, char *buf, size_t n)
{
    const char *id = label(labels, OP_NFD_PREFIX "system-os_release.ID");
    const char *version = label(labels, OP_NFD_PREFIX "system-os_release.VERSION_ID");
    if (!id || !version || !*id || !*version)
        return false;
    size_t vlen = strlen(version);
    if (strcmp(id, "rhel") == 0 || strcmp(id, "rocky") == 0 || strcmp(id, "ol") == 0)
        vlen = strcspn(version, ".");
    int k = snprintf(buf, n, "%s%.*s", id, (int)vlen, version);
    if (k < 0 || (size_t)k >= n || k > 100)
        return false;
    for (int i = 0; i < k; i++)
        if (!tag_char(buf[i]))
            return false;
    return true;
}

/* ---- the patch ---- */

struct work {
    const json_t *labels; /* as on the node */
    json_t *patch;        /* key -> "value" | null: only changes */
    json_t *owned;        /* the keys the operator added: key -> true */
};

/* The value key will have once the patch is applied, or NULL. */
static const char *value_after(const struct work *w, const char *key)
{
    const json_t *p = json_object_get(w->patch, key);
    if (p)
        return json_string_value(p); /* NULL for a removal */
    return label(w->labels, key);
}

static int set_label(struct work *w, const char *key, const char *value)
{
    const char *now = label(w->labels, key);
    int r = 0;
    if (now && strcmp(now, value) == 0)
        json_object_del(w->patch, key);
    else
        r = json_object_set_new(w->patch, key, json_string(value));
    if (r >= 0)
        r = json_object_set_new(w->owned, key, json_true());
    return r < 0 ? -ENOMEM : 0;
}

/* key may be a key of w->owned itself: it is dropped from there last. */
static int remove_label(struct work *w, const char *key)
{
    int r = 0;
    if (!json_object_get(w->labels, key))
        json_object_del(w->patch, key);
    else
        r = json_object_set_new(w->patch, key, json_null()) < 0 ? -ENOMEM : 0;
    json_object_del(w->owned, key);
    return r;
}

static int remove_all(struct work *w, const char *const *keys)
{
    for (size_t i = 0; keys[i]; i++) {
        int r = remove_label(w, keys[i]);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Every deploy label NVIDIA or gpuplane knows, operands excepted. */
static int remove_every_deploy_label(struct work *w)
{
    int r = remove_all(w, op_deploy_labels);
    if (r >= 0)
        r = remove_all(w, other_container_labels);
    if (r >= 0)
        r = remove_all(w, vm_labels);
    if (r >= 0)
        r = remove_all(w, all_config_labels);
    return r;
}

static enum op_workload workload_of(const struct work *w, const struct op_label_config *cfg)
{
    if (!cfg->sandbox)
        return OP_WORKLOAD_CONTAINER;
    const char *v = label(w->labels, OP_LABEL_WORKLOAD);
    if (v && strcmp(v, "container") == 0)
        return OP_WORKLOAD_CONTAINER;
    if (v && strcmp(v, "vm-passthrough") == 0)
        return OP_WORKLOAD_VM_PASSTHROUGH;
    if (v && strcmp(v, "vm-vgpu") == 0)
        return OP_WORKLOAD_VM_VGPU;
    return cfg->default_workload;
}

/* A GPU node's deploy labels. */
static int gpu_node(struct work *w, const struct op_label_config *cfg)
{
    const char *operands = label(w->labels, OP_LABEL_OPERANDS);
    if (operands && strcmp(operands, "false") == 0)
        return remove_every_deploy_label(w);
    if (workload_of(w, cfg) != OP_WORKLOAD_CONTAINER) {
        int r = remove_all(w, op_deploy_labels);
        return r < 0 ? r : remove_all(w, other_container_labels);
    }
    for (size_t i = 0; op_deploy_labels[i]; i++) {
        const char *key = op_deploy_labels[i];
        const char *v = label(w->labels, key);
        int r = 0;
        if (strcmp(key, DRA_LABEL) == 0 && !cfg->dra_driver) {
            /* the DRA driver went off: take back only a label the operator wrote */
            if (json_object_get(w->owned, key) && v && strcmp(v, "true") == 0)
                r = remove_label(w, key);
        } else if (!v || !*v) {
            r = set_label(w, key, "true");
        }
        if (r < 0)
            return r;
    }
    return remove_all(w, vm_labels);
}

/* No ClusterPolicy: the labels the operator added go. */
static int cleanup(struct work *w)
{
    const char *key;
    json_t *v, *tmp;
    json_object_foreach_safe(w->owned, tmp, key, v)
    {
        const char *now = label(w->labels, key);
        int r = 0;
        if (now && (strcmp(key, OP_LABEL_GPU_PRESENT) == 0 || strcmp(now, "true") == 0))
            r = remove_label(w, key);
        else
            json_object_del(w->owned, key);
        if (r < 0)
            return r;
    }
    return 0;
}

/* The listed keys that no longer hold what the operator wrote are no longer its own. */
static void prune_owned(struct work *w)
{
    const char *key;
    json_t *v, *tmp;
    json_object_foreach_safe(w->owned, tmp, key, v)
    {
        const char *now = value_after(w, key);
        bool keep = now && (strcmp(key, OP_LABEL_GPU_PRESENT) == 0 || strcmp(now, "true") == 0);
        if (!keep)
            json_object_del(w->owned, key);
    }
}

static int read_owned(const json_t *node, json_t *owned)
{
    const json_t *ann = json_object_get(json_object_get(node, "metadata"), "annotations");
    const char *list = json_string_value(json_object_get(ann, OP_ANNOTATION_LABELS));
    for (const char *p = list; p && *p;) {
        size_t n = strcspn(p, ",");
        char key[320];
        if (n > 0 && n < sizeof(key)) {
            memcpy(key, p, n);
            key[n] = '\0';
            if (json_object_set_new(owned, key, json_true()) < 0)
                return -ENOMEM;
        }
        p += n + (p[n] == ',');
    }
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The annotation's new value ("" when nothing is owned). */
static char *owned_list(const json_t *owned)
{
    size_t n = json_object_size(owned), i = 0;
    const char **keys = calloc(n + 1, sizeof(*keys));
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    if (!keys)
        return NULL;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)owned, key, v)
    {
        keys[i++] = key;
    }
    qsort(keys, n, sizeof(*keys), cmp_str);
    int r = 0;
    for (i = 0; i < n && r >= 0; i++)
        r = strbuf_addf(&sb, "%s%s", i ? "," : "", keys[i]);
    free(keys);
    return r < 0 ? NULL : strbuf_detach(&sb, NULL);
}

int op_node_label_patch(const json_t *node, const struct op_label_config *cfg, json_t **ret)
{
    const json_t *meta = json_object_get(node, "metadata");
    const json_t *ann = json_object_get(meta, "annotations");
    _cleanup_json_ json_t *patch = json_object();
    _cleanup_json_ json_t *owned = json_object();
    struct work w = {.labels = json_object_get(meta, "labels"), .patch = patch, .owned = owned};
    if (!patch || !owned || read_owned(node, owned) < 0)
        return -ENOMEM;
    int r;
    if (!cfg->policy) {
        r = cleanup(&w);
    } else {
        bool gpu = op_node_has_gpu(w.labels);
        const char *present = label(w.labels, OP_LABEL_GPU_PRESENT);
        r = 0;
        if (gpu && !op_node_gpu_present(w.labels))
            r = set_label(&w, OP_LABEL_GPU_PRESENT, "true");
        else if (!gpu && present && strcmp(present, "true") == 0)
            r = set_label(&w, OP_LABEL_GPU_PRESENT, "false");
        if (r >= 0)
            r = gpu ? gpu_node(&w, cfg) : remove_every_deploy_label(&w);
    }
    if (r < 0)
        return r;
    prune_owned(&w);
    _cleanup_free_ char *list = owned_list(owned);
    if (!list)
        return -ENOMEM;
    const char *old = json_string_value(json_object_get(ann, OP_ANNOTATION_LABELS));
    json_t *ann_patch = NULL;
    if (*list && (!old || strcmp(old, list) != 0))
        ann_patch = json_pack("{s:s}", OP_ANNOTATION_LABELS, list);
    else if (!*list && json_object_get(ann, OP_ANNOTATION_LABELS))
        ann_patch = json_pack("{s:n}", OP_ANNOTATION_LABELS);
    if (json_object_size(patch) == 0 && !ann_patch) {
        *ret = NULL;
        return 0;
    }
    json_t *m = json_object();
    if (!m)
        return json_decref(ann_patch), -ENOMEM;
    if (json_object_size(patch) > 0)
        (void)!json_object_set(m, "labels", patch);
    if (ann_patch)
        (void)!json_object_set_new(m, "annotations", ann_patch);
    *ret = json_pack("{s:o}", "metadata", m);
    return *ret ? 0 : -ENOMEM;
}
