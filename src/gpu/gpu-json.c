/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The inventory as one JSON document: what `gpuplane info --json` prints and what scripts and tests
 * parse. The shape is a published interface (docs/gpu-inventory.md): keys are added, never renamed
 * or retyped, and an unknown value is null rather than a sentinel number. Error texts come from a
 * fixed table, not from the loaded library, so the document is the same whichever NVML produced it.
 */
#include <errno.h>
#include <stdio.h>

#include "gpu-internal.h"
#include "gpu-nvml-errors.h"

/* json_object_set_new that reports failure instead of leaking or ignoring it. */
static int set(json_t *obj, const char *key, json_t *value)
{
    if (!value)
        return -ENOMEM;
    return json_object_set_new(obj, key, value) == 0 ? 0 : -ENOMEM;
}

static json_t *string_or_null(const char *s)
{
    return s && s[0] ? json_string(s) : json_null();
}

static json_t *int_or_null(long long v, bool known)
{
    return known ? json_integer(v) : json_null();
}

static json_t *placement_json(const struct gpu_mig_device *mig)
{
    return json_pack("{s:I,s:I}", "start", (json_int_t)mig->placement_start, "size",
                     (json_int_t)mig->placement_size);
}

static json_t *mig_json(const struct gpu_mig_device *mig)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    if (set(o, "uuid", string_or_null(mig->uuid)) < 0 ||
        set(o, "profile", string_or_null(mig->profile)) < 0 ||
        set(o, "giId", json_integer(mig->gi_id)) < 0 ||
        set(o, "ciId", json_integer(mig->ci_id)) < 0 ||
        set(o, "memoryBytes", json_integer((json_int_t)mig->memory_bytes)) < 0 ||
        set(o, "multiprocessors", json_integer(mig->multiprocessors)) < 0 ||
        set(o, "copyEngines", int_or_null(mig->copy_engines, mig->engines_known)) < 0 ||
        set(o, "decoders", int_or_null(mig->decoders, mig->engines_known)) < 0 ||
        set(o, "encoders", int_or_null(mig->encoders, mig->engines_known)) < 0 ||
        set(o, "jpegEngines", int_or_null(mig->jpeg_engines, mig->engines_known)) < 0 ||
        set(o, "ofaEngines", int_or_null(mig->ofa_engines, mig->engines_known)) < 0 ||
        set(o, "placement", placement_json(mig)) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *migs_json(const struct gpu_device *dev)
{
    json_t *a = json_array();
    for (size_t m = 0; a && m < dev->n_migs; m++) {
        if (json_array_append_new(a, mig_json(&dev->migs[m])) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *compute_capability(const struct gpu_device *dev)
{
    char buf[32];
    if (dev->cc_major < 0 || dev->cc_minor < 0)
        return json_null();
    snprintf(buf, sizeof(buf), "%d.%d", dev->cc_major, dev->cc_minor);
    return json_string(buf);
}

static json_t *architecture(const struct gpu_device *dev)
{
    if (dev->architecture == NVML_DEVICE_ARCH_UNKNOWN)
        return json_null();
    return json_string(gpu_architecture_name(dev->architecture));
}

/* Identity and placement: the facts that do not depend on the GPU being healthy. */
static int add_identity(json_t *o, const struct gpu_device *dev)
{
    bool known = !dev->lost;
    if (set(o, "index", json_integer(dev->index)) < 0 ||
        set(o, "uuid", string_or_null(dev->uuid)) < 0 ||
        set(o, "name", string_or_null(dev->name)) < 0 ||
        set(o, "pciBusId", string_or_null(dev->pci_bus_id)) < 0 ||
        set(o, "minor", int_or_null(dev->minor, known)) < 0 ||
        set(o, "numaNode", int_or_null(dev->numa_node, dev->numa_node >= 0)) < 0)
        return -ENOMEM;
    return 0;
}

static json_t *pci_class_json(const struct gpu_device *dev)
{
    char buf[16];
    if (!dev->pci_class)
        return json_null();
    snprintf(buf, sizeof(buf), "0x%06x", (unsigned)dev->pci_class);
    return json_string(buf);
}

static json_t *fabric_json(const struct gpu_device *dev)
{
    if (!dev->fabric_attached)
        return json_null();
    return json_pack("{s:s,s:I}", "clusterUuid", dev->fabric_cluster_uuid, "cliqueId",
                     (json_int_t)dev->fabric_clique_id);
}

static json_t *vgpu_json(const struct gpu_device *dev)
{
    if (!dev->vgpu_guest)
        return json_null();
    return json_pack("{s:s,s:s}", "hostDriverVersion", dev->vgpu_host_driver_version,
                     "hostDriverBranch", dev->vgpu_host_driver_branch);
}

static int add_capabilities(json_t *o, const struct gpu_device *dev)
{
    if (set(o, "memoryBytes", int_or_null((json_int_t)dev->memory_bytes, dev->memory_bytes > 0)) <
            0 ||
        set(o, "computeCapability", compute_capability(dev)) < 0 ||
        set(o, "architecture", architecture(dev)) < 0 ||
        set(o, "migCapable", json_boolean(dev->mig_capable)) < 0 ||
        set(o, "migEnabled", json_boolean(dev->mig_enabled)) < 0 ||
        set(o, "nvlinks", json_integer(dev->nvlinks_active)) < 0 ||
        set(o, "pciClass", pci_class_json(dev)) < 0 || set(o, "fabric", fabric_json(dev)) < 0 ||
        set(o, "vgpu", vgpu_json(dev)) < 0 || set(o, "lost", json_boolean(dev->lost)) < 0 ||
        set(o, "error", dev->error ? json_string(nvml_error_text(dev->error)) : json_null()) < 0 ||
        set(o, "migDevices", migs_json(dev)) < 0)
        return -ENOMEM;
    return 0;
}

static json_t *device_json(const struct gpu_device *dev)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    if (add_identity(o, dev) < 0 || add_capabilities(o, dev) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *matrix_row(const struct gpu_inventory *inv, size_t i)
{
    json_t *row = json_array();
    for (size_t j = 0; row && j < inv->n_devices; j++) {
        char buf[16];
        const char *name = gpu_link_name(gpu_inventory_link(inv, i, j), buf);
        if (json_array_append_new(row, json_string(name)) < 0) {
            json_decref(row);
            return NULL;
        }
    }
    return row;
}

static json_t *topology_json(const struct gpu_inventory *inv)
{
    json_t *matrix = json_array();
    for (size_t i = 0; matrix && i < inv->n_devices; i++) {
        if (json_array_append_new(matrix, matrix_row(inv, i)) < 0) {
            json_decref(matrix);
            return NULL;
        }
    }
    return matrix ? json_pack("{s:o}", "matrix", matrix) : NULL;
}

static json_t *cuda_version(int v)
{
    char buf[32];
    if (v <= 0)
        return json_null();
    snprintf(buf, sizeof(buf), "%d.%d", v / 1000, (v % 1000) / 10);
    return json_string(buf);
}

static json_t *gpus_json(const struct gpu_inventory *inv)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < inv->n_devices; i++) {
        if (json_array_append_new(a, device_json(&inv->devices[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

int gpu_inventory_to_json(const struct gpu_inventory *inv, json_t **ret)
{
    _cleanup_json_ json_t *doc = json_object();
    if (!doc)
        return -ENOMEM;
    if (set(doc, "driverVersion", string_or_null(inv->driver_version)) < 0 ||
        set(doc, "cudaDriverVersion", cuda_version(inv->cuda_driver_version)) < 0 ||
        set(doc, "nvmlVersion", string_or_null(inv->nvml_version)) < 0 ||
        set(doc, "gpus", gpus_json(inv)) < 0 || set(doc, "topology", topology_json(inv)) < 0)
        return -ENOMEM;
    *ret = TAKE_PTR(doc);
    return 0;
}
