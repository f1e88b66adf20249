/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ResourceSlices of this node, built from the GPU inventory (see dra-slices.h). Devices are
 * described the way NVIDIA's gpu.nvidia.com driver describes them, so that the claims and
 * DeviceClasses written for it select the same devices here; every name and value is checked as the
 * API server would check it, because a slice the server refuses would leave the node's devices
 * unpublished with no better message than the server's.
 *
 * Empty values are left out rather than published empty: the API server drops empty lists and
 * maps when it stores an object, and the publisher compares what it wants with what it reads back.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dalloc-names.h"
#include "dra-claim.h"
#include "dra-slices.h"

/* The API's limits (resource.k8s.io/v1 ResourceSliceSpec and Device). */
#define SLICE_DEVICES_MAX 128
#define SLICE_DEVICES_TAINTED_MAX 64 /* when any device of the slice has taints */
#define DEVICE_ATTRS_MAX 32          /* attributes and capacities together */
#define ATTR_STRING_MAX 64           /* string and version values */

#define QUANTITY_MAX 32

/* nvmlBrandType_t as NVIDIA's Go bindings spell it (nvml-abi.md 5.2). */
static const char *const brand_names[] = {
    "Unknown",   "Quadro",      "Tesla",     "NVS",        "Grid",      "GeForce",
    "Titan",     "NvidiaVApps", "NvidiaVPC", "NvidiaVCS",  "NvidiaVWS", "NvidiaCloudGaming",
    "QuadroRTX", "NvidiaRTX",   "Nvidia",    "GeForceRTX", "TitanRTX",
};

static const char *brand_name(unsigned brand)
{
    return brand < ARRAY_SIZE(brand_names) ? brand_names[brand] : "Unknown";
}

/* json_object_set_new that reports failure instead of ignoring it. */
static int set(json_t *obj, const char *key, json_t *value)
{
    if (!value)
        return -ENOMEM;
    return json_object_set_new(obj, key, value) == 0 ? 0 : -ENOMEM;
}

static int append(json_t *array, json_t *value)
{
    if (!value)
        return -ENOMEM;
    return json_array_append_new(array, value) == 0 ? 0 : -ENOMEM;
}

static int attr_typed(json_t *attrs, const char *name, const char *type, json_t *value)
{
    json_t *a = json_object();
    if (!a) {
        json_decref(value);
        return -ENOMEM;
    }
    if (set(a, type, value) < 0) {
        json_decref(a);
        return -ENOMEM;
    }
    return set(attrs, name, a);
}

/* Strings longer than the API allows are cut: a long product name must not keep a GPU unpublished.
 * Cut on a UTF-8 character boundary so the value stays valid text. */
static int attr_string(json_t *attrs, const char *name, const char *value)
{
    size_t len = strnlen(value, ATTR_STRING_MAX + 1);
    if (len > ATTR_STRING_MAX) {
        len = ATTR_STRING_MAX;
        while (len > 0 && ((unsigned char)value[len] & 0xC0) == 0x80)
            len--;
    }
    return attr_typed(attrs, name, "string", json_stringn(value, len));
}

static int attr_version(json_t *attrs, const char *name, const char *value)
{
    return attr_typed(attrs, name, "version", json_string(value));
}

static int attr_int(json_t *attrs, const char *name, long long value)
{
    return attr_typed(attrs, name, "int", json_integer(value));
}

/*
 * A quantity in the form the API server stores it (its canonical form), so that a slice read back
 * compares equal to the one built: numbers divisible by 1024 with the largest exact binary suffix
 * ("81559Mi", "40Gi"), other numbers with the largest exact decimal suffix of a power of 1000
 * ("42", "2k"), as the server keeps the suffix family the value was written in.
 */
static void quantity_format(uint64_t value, char buf[static QUANTITY_MAX])
{
    static const char *const binary[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    static const char *const decimal[] = {"", "k", "M", "G", "T", "P", "E"};
    size_t i = 0;

    if (value >= 1024 && value % 1024 == 0) {
        while (i + 1 < ARRAY_SIZE(binary) && value % 1024 == 0) {
            value /= 1024;
            i++;
        }
        snprintf(buf, QUANTITY_MAX, "%" PRIu64 "%s", value, binary[i]);
        return;
    }
    while (value != 0 && i + 1 < ARRAY_SIZE(decimal) && value % 1000 == 0) {
        value /= 1000;
        i++;
    }
    snprintf(buf, QUANTITY_MAX, "%" PRIu64 "%s", value, decimal[i]);
}

static int capacity(json_t *caps, const char *name, uint64_t value)
{
    char q[QUANTITY_MAX];
    quantity_format(value, q);
    return set(caps, name, json_pack("{s:s}", "value", q));
}

/*
 * A driver version as semver: up to three dot-separated numbers, missing ones 0, leading zeros
 * dropped ("535.104.05" -> "535.104.5"), anything after the third number ignored. -EINVAL when it
 * does not start that way.
 */
static int semver_from_driver(const char *in, char *buf, size_t n)
{
    unsigned long long part[3] = {0, 0, 0};
    const char *p = in;

    for (size_t i = 0; i < 3; i++) {
        if (*p < '0' || *p > '9')
            return -EINVAL;
        while (*p >= '0' && *p <= '9') {
            if (part[i] > (ULLONG_MAX - 9) / 10)
                return -EINVAL;
            part[i] = part[i] * 10 + (unsigned long long)(*p - '0');
            p++;
        }
        if (*p != '.')
            break;
        p++;
    }
    int r = snprintf(buf, n, "%llu.%llu.%llu", part[0], part[1], part[2]);
    return r > 0 && (size_t)r < n ? 0 : -EINVAL;
}

/*
 * resource.kubernetes.io/pcieRoot: the PCI root complex the device hangs under, the first element
 * after "devices" in the target of /sys/bus/pci/devices/<bdf> ("../../../devices/pci0000:15/
 * 0000:15:01.0/..."). -ENOENT when sysfs does not say.
 */
static int pcie_root(const char *sysfs_root, const char *bdf, char *buf, size_t n)
{
    char path[4096], link[4096];
    const char *root =
        sysfs_root && sysfs_root[0] && strcmp(sysfs_root, "/") != 0 ? sysfs_root : "";

    if (!bdf[0] || strchr(bdf, '/'))
        return -ENOENT;
    int r = snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s", root, bdf);
    if (r < 0 || (size_t)r >= sizeof(path))
        return -ENAMETOOLONG;
    ssize_t len = readlink(path, link, sizeof(link) - 1);
    if (len < 0)
        return -ENOENT;
    link[len] = '\0';

    /* Walk the path elements to the first "devices"; the root is the one after it. */
    const char *p = link;
    while (strncmp(p, "devices/", 8) != 0) {
        p = strchr(p, '/');
        if (!p)
            return -ENOENT;
        p++;
    }
    const char *elem = p + 8;
    size_t elen = strcspn(elem, "/");
    if (elen <= 3 || strncmp(elem, "pci", 3) != 0 || elen >= n || elen > ATTR_STRING_MAX)
        return -ENOENT;
    memcpy(buf, elem, elen);
    buf[elen] = '\0';
    return 0;
}

static void lower_copy(char *dst, const char *src, size_t n)
{
    size_t i = 0;
    for (; src[i] && i + 1 < n; i++)
        dst[i] = (src[i] >= 'A' && src[i] <= 'Z') ? (char)(src[i] - 'A' + 'a') : src[i];
    dst[i] = '\0';
}

/* The attributes a MIG device shares with its parent GPU. Values NVML did not give are left out
 * rather than guessed. */
static int parent_attrs(json_t *attrs, const struct gpu_inventory *inv,
                        const struct gpu_device *gpu, const struct dra_slices_options *opts)
{
    char buf[GPU_VERSION_MAX + 32], root[ATTR_STRING_MAX + 1];
    int r;

    if (gpu->name[0] && (r = attr_string(attrs, "productName", gpu->name)) < 0)
        return r;
    if ((r = attr_string(attrs, "brand", brand_name(gpu->brand))) < 0 ||
        (r = attr_string(attrs, "architecture", gpu_architecture_name(gpu->architecture))) < 0)
        return r;
    if (gpu->cc_major >= 0 && gpu->cc_minor >= 0) {
        snprintf(buf, sizeof(buf), "%d.%d.0", gpu->cc_major, gpu->cc_minor);
        if ((r = attr_version(attrs, "cudaComputeCapability", buf)) < 0)
            return r;
    }
    if (semver_from_driver(inv->driver_version, buf, sizeof(buf)) == 0 &&
        (r = attr_version(attrs, "driverVersion", buf)) < 0)
        return r;
    if (inv->cuda_driver_version > 0) {
        snprintf(buf, sizeof(buf), "%d.%d.0", inv->cuda_driver_version / 1000,
                 inv->cuda_driver_version % 1000 / 10);
        if ((r = attr_version(attrs, "cudaDriverVersion", buf)) < 0)
            return r;
    }
    if (gpu->sysfs_bus_id[0]) {
        lower_copy(buf, gpu->sysfs_bus_id, sizeof(buf));
        if ((r = attr_string(attrs, "resource.kubernetes.io/pciBusID", buf)) < 0)
            return r;
        if (pcie_root(opts->sysfs_root, buf, root, sizeof(root)) == 0 &&
            (r = attr_string(attrs, "resource.kubernetes.io/pcieRoot", root)) < 0)
            return r;
    }
    return 0;
}

static int add_taint(json_t *dev)
{
    json_t *taints = json_pack("[{s:s,s:s}]", "key", DRA_TAINT_UNHEALTHY, "effect", "NoSchedule");
    return set(dev, "taints", taints);
}

/* A device object {name, attributes, capacity} with empty maps, filled by the caller. */
static json_t *device_new(const char *name, json_t **ret_attrs, json_t **ret_caps)
{
    json_t *dev = json_pack("{s:s,s:{},s:{}}", "name", name, "attributes", "capacity");
    if (!dev)
        return NULL;
    *ret_attrs = json_object_get(dev, "attributes");
    *ret_caps = json_object_get(dev, "capacity");
    return dev;
}

static int gpu_device(const struct gpu_inventory *inv, const struct gpu_device *gpu,
                      const struct dra_slices_options *opts, bool unhealthy, json_t *devices)
{
    _cleanup_json_ json_t *dev = NULL;
    json_t *attrs, *caps;
    char name[128];
    int r;

    if ((r = dra_device_name(gpu, NULL, name, sizeof(name))) < 0)
        return r;
    dev = device_new(name, &attrs, &caps);
    if (!dev)
        return -ENOMEM;
    if ((r = attr_string(attrs, "type", "gpu")) < 0)
        return r;
    if (gpu->uuid[0] && (r = attr_string(attrs, "uuid", gpu->uuid)) < 0)
        return r;
    if ((r = parent_attrs(attrs, inv, gpu, opts)) < 0 ||
        (r = attr_int(attrs, "index", gpu->index)) < 0 ||
        (r = attr_int(attrs, "minor", gpu->minor)) < 0)
        return r;
    if (gpu->memory_bytes > 0 && (r = capacity(caps, "memory", gpu->memory_bytes)) < 0)
        return r;
    if (unhealthy && (r = add_taint(dev)) < 0)
        return r;
    return append(devices, TAKE_PTR(dev));
}

/*
 * The engine counts of a MIG device, as NVIDIA names them. Zero is published (a 1g.5gb has no
 * decoder, and a claim may ask for one); counts the inventory could not read are left out rather
 * than published as zero, which a selector would take for the truth.
 */
static int mig_engines(json_t *caps, const struct gpu_mig_device *mig)
{
    int r;

    if (!mig->engines_known)
        return 0;
    if ((r = capacity(caps, "copyEngines", mig->copy_engines)) < 0 ||
        (r = capacity(caps, "decoders", mig->decoders)) < 0 ||
        (r = capacity(caps, "encoders", mig->encoders)) < 0 ||
        (r = capacity(caps, "jpegEngines", mig->jpeg_engines)) < 0 ||
        (r = capacity(caps, "ofaEngines", mig->ofa_engines)) < 0)
        return r;
    return 0;
}

static int mig_device(const struct gpu_inventory *inv, const struct gpu_device *gpu,
                      const struct gpu_mig_device *mig, const struct dra_slices_options *opts,
                      bool unhealthy, json_t *devices)
{
    _cleanup_json_ json_t *dev = NULL;
    json_t *attrs, *caps;
    char name[128];
    int r;

    if ((r = dra_device_name(gpu, mig, name, sizeof(name))) < 0)
        return r;
    dev = device_new(name, &attrs, &caps);
    if (!dev)
        return -ENOMEM;
    if ((r = attr_string(attrs, "type", "mig")) < 0)
        return r;
    if (mig->uuid[0] && (r = attr_string(attrs, "uuid", mig->uuid)) < 0)
        return r;
    if (gpu->uuid[0] && (r = attr_string(attrs, "parentUUID", gpu->uuid)) < 0)
        return r;
    if (mig->profile[0] && (r = attr_string(attrs, "profile", mig->profile)) < 0)
        return r;
    if ((r = parent_attrs(attrs, inv, gpu, opts)) < 0)
        return r;
    if (mig->multiprocessors > 0 &&
        (r = capacity(caps, "multiprocessors", mig->multiprocessors)) < 0)
        return r;
    if ((r = mig_engines(caps, mig)) < 0)
        return r;
    if (mig->memory_bytes > 0 && (r = capacity(caps, "memory", mig->memory_bytes)) < 0)
        return r;
    for (unsigned s = 0; s < mig->placement_size; s++) {
        char slice[32];
        snprintf(slice, sizeof(slice), "memorySlice%u", mig->placement_start + s);
        if ((r = capacity(caps, slice, 1)) < 0)
            return r;
    }
    if (unhealthy && (r = add_taint(dev)) < 0)
        return r;
    return append(devices, TAKE_PTR(dev));
}

/* The checks of the API server on one device, with the device named in the message. */
static int check_device(json_t *dev, struct diag *d)
{
    const char *name = json_string_value(json_object_get(dev, "name"));
    json_t *attrs = json_object_get(dev, "attributes"), *caps = json_object_get(dev, "capacity");
    const char *key, *why;
    json_t *v;

    if ((why = dalloc_name_dns_label(name)))
        return diag_fail(d, -EINVAL, "device name \"%s\": %s", name, why);
    if (json_object_size(attrs) + json_object_size(caps) > DEVICE_ATTRS_MAX)
        return diag_fail(d, -EINVAL, "device %s: more than %d attributes and capacities", name,
                         DEVICE_ATTRS_MAX);
    json_object_foreach(attrs, key, v)
    {
        if ((why = dalloc_name_qualified(key)))
            return diag_fail(d, -EINVAL, "device %s: attribute \"%s\": %s", name, key, why);
    }
    json_object_foreach(caps, key, v)
    {
        if ((why = dalloc_name_qualified(key)))
            return diag_fail(d, -EINVAL, "device %s: capacity \"%s\": %s", name, key, why);
    }
    return 0;
}

/* Drops the maps that stayed empty (see the top of the file). */
static void drop_empty(json_t *dev)
{
    if (json_object_size(json_object_get(dev, "attributes")) == 0)
        json_object_del(dev, "attributes");
    if (json_object_size(json_object_get(dev, "capacity")) == 0)
        json_object_del(dev, "capacity");
}

/* Every device of the node, in NVML index order, a MIG-enabled GPU as its MIG devices. */
static int all_devices(const struct gpu_inventory *inv, const struct dra_slices_options *opts,
                       json_t *devices, bool *ret_tainted)
{
    bool tainted = false;
    int r;

    for (size_t i = 0; i < inv->n_devices; i++) {
        const struct gpu_device *gpu = &inv->devices[i];
        /* A lost or failing GPU cannot be prepared: publishing it would only attract claims. */
        if (gpu->lost || gpu->error != 0)
            continue;
        bool unhealthy = opts->unhealthy && opts->unhealthy[gpu->index];
        r = 0;
        if (!gpu->mig_enabled)
            r = gpu_device(inv, gpu, opts, unhealthy, devices);
        for (size_t m = 0; gpu->mig_enabled && r == 0 && m < gpu->n_migs; m++)
            r = mig_device(inv, gpu, &gpu->migs[m], opts, unhealthy, devices);
        if (r < 0)
            return r;
        /* A MIG-enabled GPU without MIG devices publishes nothing, so taints count only when a
         * device was added. */
        tainted = tainted || (unhealthy && (!gpu->mig_enabled || gpu->n_migs > 0));
    }
    *ret_tainted = tainted;
    return 0;
}

static int check_options(const struct dra_slices_options *opts, struct diag *d)
{
    const char *why;

    if (!opts->node || !opts->driver)
        return diag_fail(d, -EINVAL, "node and driver names are required");
    if ((why = dalloc_name_dns_subdomain(opts->node)))
        return diag_fail(d, -EINVAL, "node name \"%s\": %s", opts->node, why);
    if ((why = dalloc_name_pool(opts->node)))
        return diag_fail(d, -EINVAL, "pool name \"%s\": %s", opts->node, why);
    if ((why = dalloc_name_driver(opts->driver)))
        return diag_fail(d, -EINVAL, "driver name \"%s\": %s", opts->driver, why);
    return 0;
}

static int slice_new(const struct dra_slices_options *opts, size_t i, int64_t generation,
                     size_t count, struct diag *d, json_t **ret)
{
    char name[512];
    const char *why;

    int r = snprintf(name, sizeof(name), "%s-%s-%zu", opts->node, opts->driver, i);
    if (r < 0 || (size_t)r >= sizeof(name))
        return diag_fail(d, -EINVAL, "slice name of node %s and driver %s: too long", opts->node,
                         opts->driver);
    if ((why = dalloc_name_dns_subdomain(name)))
        return diag_fail(d, -EINVAL, "slice name \"%s\": %s", name, why);
    json_t *slice = json_pack("{s:s,s:s,s:{s:s},s:{s:s,s:{s:s,s:I,s:I},s:s}}", "apiVersion",
                              "resource.k8s.io/v1", "kind", "ResourceSlice", "metadata", "name",
                              name, "spec", "driver", opts->driver, "pool", "name", opts->node,
                              "generation", (json_int_t)generation, "resourceSliceCount",
                              (json_int_t)count, "nodeName", opts->node);
    if (!slice)
        return diag_fail(d, -ENOMEM, "out of memory");
    *ret = slice;
    return 0;
}

int dra_slices_build(const struct gpu_inventory *inv, const struct dra_slices_options *opts,
                     int64_t generation, struct diag *d, json_t **ret)
{
    _cleanup_json_ json_t *devices = json_array(), *slices = json_array();
    bool tainted = false;
    int r;

    if (!devices || !slices)
        return diag_fail(d, -ENOMEM, "out of memory");
    if (generation < 0)
        return diag_fail(d, -EINVAL, "pool generation %" PRId64 " is negative", generation);
    if ((r = check_options(opts, d)) < 0)
        return r;
    if ((r = all_devices(inv, opts, devices, &tainted)) < 0)
        return diag_fail(d, r, "building the devices: %s", strerror(-r));

    size_t n = json_array_size(devices), i;
    json_t *dev;
    json_array_foreach(devices, i, dev)
    {
        drop_empty(dev);
        if ((r = check_device(dev, d)) < 0)
            return r;
        for (size_t j = 0; j < i; j++)
            if (json_equal(json_object_get(dev, "name"),
                           json_object_get(json_array_get(devices, j), "name")))
                return diag_fail(d, -EINVAL, "device name %s is not unique",
                                 json_string_value(json_object_get(dev, "name")));
    }

    /* One slice holds the whole pool unless the API's per-slice limit says otherwise; a pool
     * without devices is still published as one empty slice, so that consumers see the current
     * generation and no devices. */
    size_t per_slice = tainted ? SLICE_DEVICES_TAINTED_MAX : SLICE_DEVICES_MAX;
    size_t count = n == 0 ? 1 : (n + per_slice - 1) / per_slice;
    for (size_t s = 0; s < count; s++) {
        _cleanup_json_ json_t *slice = NULL;
        if ((r = slice_new(opts, s, generation, count, d, &slice)) < 0)
            return r;
        if (n > 0) {
            json_t *part = json_array();
            for (size_t k = s * per_slice; part && k < n && k < (s + 1) * per_slice; k++)
                if (json_array_append(part, json_array_get(devices, k)) < 0)
                    json_decref(TAKE_PTR(part));
            if (set(json_object_get(slice, "spec"), "devices", part) < 0)
                return diag_fail(d, -ENOMEM, "out of memory");
        }
        if (append(slices, TAKE_PTR(slice)) < 0)
            return diag_fail(d, -ENOMEM, "out of memory");
    }
    *ret = TAKE_PTR(slices);
    return 0;
}
