/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ResourceSlices built from the bundled mock node profiles (through the mock NVML library) with
 * a scratch sysfs tree for the PCIe roots: NVIDIA's attribute names, types and values on full GPUs
 * and MIG devices (engine counts included; unread ones left out), capacities as canonical
 * quantities, the taint of unhealthy devices, the pool generation, a lost GPU left out; and, on
 * hand-made inventories, the version normalisation, the split into several slices at the API's
 * limits and the names the API would refuse.
 */
#include <inttypes.h>

#include "dra-slices.h"
#include "gpu-test.h"

#define MIB(x) ((uint64_t)(x) << 20)

/* ---- scratch sysfs ---- */

static void mkdir_p(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        mkdir(buf, 0755);
        *p = '/';
    }
    mkdir(buf, 0755);
}

/* <root>/sys/bus/pci/devices/<bdf> -> ../../../devices/<pci root>/<port>/<bdf>, as the kernel
 * links it (the target need not exist: only the link is read). */
static void link_device(const char *root, const char *bdf, const char *pci_root)
{
    char dir[1024], path[2048], target[1024];
    assert_true(snprintf(dir, sizeof(dir), "%s/sys/bus/pci/devices", root) < (int)sizeof(dir));
    mkdir_p(dir);
    assert_true(snprintf(path, sizeof(path), "%s/%s", dir, bdf) < (int)sizeof(path));
    assert_true(snprintf(target, sizeof(target), "../../../devices/%s/%s:01.0/%s", pci_root,
                         pci_root + 3, bdf) < (int)sizeof(target));
    assert_int_equal(symlink(target, path), 0);
}

/* ---- reading the result ---- */

static json_t *devices_of(json_t *slices, size_t i)
{
    return json_object_get(json_object_get(json_array_get(slices, i), "spec"), "devices");
}

static json_t *device(json_t *slices, const char *name)
{
    size_t i, j;
    json_t *s, *d;
    json_array_foreach(slices, i, s)
    {
        json_array_foreach(json_object_get(json_object_get(s, "spec"), "devices"), j, d)
        {
            if (strcmp(json_string_value(json_object_get(d, "name")), name) == 0)
                return d;
        }
    }
    fail_msg("no device %s", name);
    return NULL;
}

/* The value of attribute name, which must be of type type ("string", "int", "version"), as
 * text; NULL when the device has no such attribute. */
static const char *attr(json_t *dev, const char *name, const char *type)
{
    static char buf[64];
    json_t *a = json_object_get(json_object_get(dev, "attributes"), name);
    if (!a)
        return NULL;
    assert_int_equal(json_object_size(a), 1);
    json_t *v = json_object_get(a, type);
    if (!v)
        fail_msg("%s is not a %s", name, type);
    if (json_is_integer(v)) {
        snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return buf;
    }
    assert_true(json_is_string(v));
    return json_string_value(v);
}

static const char *cap(json_t *dev, const char *name)
{
    json_t *c = json_object_get(json_object_get(dev, "capacity"), name);
    return c ? json_string_value(json_object_get(c, "value")) : NULL;
}

static void assert_attr(json_t *dev, const char *name, const char *type, const char *want)
{
    const char *got = attr(dev, name, type);
    if (!got || strcmp(got, want) != 0)
        fail_msg("%s: %s = %s, want %s", json_string_value(json_object_get(dev, "name")), name,
                 got ? got : "(none)", want);
}

static json_t *build(const struct gpu_inventory *inv, const struct dra_slices_options *opts,
                     int64_t generation)
{
    json_t *slices = NULL;
    struct diag d;
    diag_init(&d);
    int r = dra_slices_build(inv, opts, generation, &d, &slices);
    if (r < 0)
        fail_msg("dra_slices_build: %d %s", r, d.msg);
    assert_non_null(slices);
    return slices;
}

/* ---- the mock profiles ---- */

static const char *const dgx_roots[8] = {"pci0000:15", "pci0000:15", "pci0000:37", "pci0000:37",
                                         "pci0000:97", "pci0000:97", "pci0000:b7", "pci0000:b7"};

static void test_dgx_h100(void **state)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = test_open("dgx-h100");
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = test_read(nvml, NULL);
    _cleanup_free_ char *root = test_tmpdir();
    char name[16], want[16];

    for (size_t i = 0; i < inv->n_devices; i++)
        link_device(root, inv->devices[i].sysfs_bus_id, dgx_roots[i]);
    struct dra_slices_options opts = {
        .node = "dgx-h100-0", .driver = "gpu.nvidia.com", .sysfs_root = root};
    _cleanup_json_ json_t *slices = build(inv, &opts, 1);

    assert_int_equal(json_array_size(slices), 1);
    json_t *s = json_array_get(slices, 0), *spec = json_object_get(s, "spec");
    assert_string_equal(json_string_value(json_object_get(s, "apiVersion")), "resource.k8s.io/v1");
    assert_string_equal(json_string_value(json_object_get(s, "kind")), "ResourceSlice");
    assert_string_equal(json_string_value(json_object_get(json_object_get(s, "metadata"), "name")),
                        "dgx-h100-0-gpu.nvidia.com-0");
    assert_string_equal(json_string_value(json_object_get(spec, "driver")), "gpu.nvidia.com");
    assert_string_equal(json_string_value(json_object_get(spec, "nodeName")), "dgx-h100-0");
    json_t *pool = json_object_get(spec, "pool");
    assert_string_equal(json_string_value(json_object_get(pool, "name")), "dgx-h100-0");
    assert_int_equal(json_integer_value(json_object_get(pool, "generation")), 1);
    assert_int_equal(json_integer_value(json_object_get(pool, "resourceSliceCount")), 1);

    json_t *devices = devices_of(slices, 0);
    assert_int_equal(json_array_size(devices), 8);
    for (size_t i = 0; i < 8; i++) {
        const struct gpu_device *gpu = &inv->devices[i];
        json_t *dev = json_array_get(devices, i);
        snprintf(name, sizeof(name), "gpu-%u", gpu->minor);
        assert_string_equal(json_string_value(json_object_get(dev, "name")), name);
        assert_attr(dev, "type", "string", "gpu");
        assert_attr(dev, "uuid", "string", gpu->uuid);
        assert_attr(dev, "productName", "string", "NVIDIA H100 80GB HBM3");
        assert_attr(dev, "brand", "string", "Nvidia");
        assert_attr(dev, "architecture", "string", "Hopper");
        assert_attr(dev, "cudaComputeCapability", "version", "9.0.0");
        assert_attr(dev, "driverVersion", "version", "550.54.15");
        assert_attr(dev, "cudaDriverVersion", "version", "12.4.0");
        assert_attr(dev, "resource.kubernetes.io/pciBusID", "string", gpu->sysfs_bus_id);
        assert_attr(dev, "resource.kubernetes.io/pcieRoot", "string", dgx_roots[i]);
        snprintf(want, sizeof(want), "%u", gpu->index);
        assert_attr(dev, "index", "int", want);
        snprintf(want, sizeof(want), "%u", gpu->minor);
        assert_attr(dev, "minor", "int", want);
        assert_int_equal(json_object_size(json_object_get(dev, "attributes")), 12);
        assert_string_equal(cap(dev, "memory"), "81559Mi");
        assert_int_equal(json_object_size(json_object_get(dev, "capacity")), 1);
        assert_null(json_object_get(dev, "taints"));
    }
    assert_attr(json_array_get(devices, 0), "resource.kubernetes.io/pciBusID", "string",
                "0000:18:00.0");
    test_rmtree(root);
}

/* Without sysfs entries the root is not known, and not guessed. */
static void test_no_pcie_root(void **state)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = test_open("pcie-t4");
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = test_read(nvml, NULL);
    _cleanup_free_ char *root = test_tmpdir();
    char dir[4096];

    /* a link that leads nowhere under devices/pci... */
    snprintf(dir, sizeof(dir), "%s/sys/bus/pci/devices", root);
    mkdir_p(dir);
    snprintf(dir, sizeof(dir), "%s/sys/bus/pci/devices/%s", root, inv->devices[1].sysfs_bus_id);
    assert_int_equal(symlink("../../../devices/platform/x", dir), 0);
    link_device(root, inv->devices[2].sysfs_bus_id, "pci0000:af");

    struct dra_slices_options opts = {
        .node = "pcie-t4-0", .driver = "gpu.nvidia.com", .sysfs_root = root};
    _cleanup_json_ json_t *slices = build(inv, &opts, 1);
    json_t *devices = devices_of(slices, 0);
    assert_int_equal(json_array_size(devices), 4);
    assert_null(attr(json_array_get(devices, 0), "resource.kubernetes.io/pcieRoot", "string"));
    assert_null(attr(json_array_get(devices, 1), "resource.kubernetes.io/pcieRoot", "string"));
    assert_attr(json_array_get(devices, 2), "resource.kubernetes.io/pcieRoot", "string",
                "pci0000:af");
    json_t *t4 = json_array_get(devices, 0);
    assert_attr(t4, "brand", "string", "Nvidia"); /* what the profile says */
    assert_attr(t4, "architecture", "string", "Turing");
    assert_attr(t4, "cudaComputeCapability", "version", "7.5.0");
    assert_attr(t4, "productName", "string", "Tesla T4");
    assert_string_equal(cap(t4, "memory"), "15Gi");
    test_rmtree(root);
}

static void test_a100_mig(void **state)
{
    static const char *const want_names[] = {
        "gpu-0-mig-3g20gb-9-4",
        "gpu-0-mig-2g10gb-14-0",
        "gpu-0-mig-1g5gb-19-2",
        "gpu-0-mig-1g5gb-19-3",
        "gpu-1-mig-3g20gb-9-0",
        "gpu-1-mig-1c3g20gb-9-4",
        "gpu-1-mig-2c3g20gb-9-4",
        "gpu-2",
        "gpu-3",
    };
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = test_open("a100-mig");
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = test_read(nvml, NULL);
    _cleanup_free_ char *root = test_tmpdir();

    for (size_t i = 0; i < inv->n_devices; i++)
        link_device(root, inv->devices[i].sysfs_bus_id, i < 2 ? "pci0000:00" : "pci0000:40");
    struct dra_slices_options opts = {
        .node = "a100-mig-0", .driver = "gpu.nvidia.com", .sysfs_root = root};
    _cleanup_json_ json_t *slices = build(inv, &opts, 3);
    json_t *devices = devices_of(slices, 0);

    assert_int_equal(json_array_size(devices), ARRAY_SIZE(want_names));
    for (size_t i = 0; i < ARRAY_SIZE(want_names); i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(devices, i), "name")),
                            want_names[i]);

    json_t *mig = device(slices, "gpu-0-mig-3g20gb-9-4");
    assert_attr(mig, "type", "string", "mig");
    assert_attr(mig, "uuid", "string", "MIG-6129f8b4-2bcf-4087-a0c3-2cd8458057d6");
    assert_attr(mig, "parentUUID", "string", inv->devices[0].uuid);
    assert_attr(mig, "profile", "string", "3g.20gb");
    assert_attr(mig, "productName", "string", "NVIDIA A100-SXM4-40GB");
    assert_attr(mig, "brand", "string", "Nvidia");
    assert_attr(mig, "architecture", "string", "Ampere");
    assert_attr(mig, "cudaComputeCapability", "version", "8.0.0");
    assert_attr(mig, "driverVersion", "version", "550.54.15");
    assert_attr(mig, "cudaDriverVersion", "version", "12.4.0");
    assert_attr(mig, "resource.kubernetes.io/pciBusID", "string", "0000:07:00.0");
    assert_attr(mig, "resource.kubernetes.io/pcieRoot", "string", "pci0000:00");
    assert_null(attr(mig, "index", "int"));
    assert_int_equal(json_object_size(json_object_get(mig, "attributes")), 12);
    assert_string_equal(cap(mig, "multiprocessors"), "42");
    assert_string_equal(cap(mig, "memory"), "19968Mi");
    for (unsigned s = 0; s < 8; s++) {
        char slice[32];
        snprintf(slice, sizeof(slice), "memorySlice%u", s);
        if (s >= 4)
            assert_string_equal(cap(mig, slice), "1");
        else
            assert_null(cap(mig, slice));
    }
    /* the engines of the 3g.20gb GPU instance, under NVIDIA's names */
    assert_string_equal(cap(mig, "copyEngines"), "3");
    assert_string_equal(cap(mig, "decoders"), "2");
    assert_string_equal(cap(mig, "encoders"), "0");
    assert_string_equal(cap(mig, "jpegEngines"), "0");
    assert_string_equal(cap(mig, "ofaEngines"), "0");
    assert_int_equal(json_object_size(json_object_get(mig, "capacity")), 11);

    json_t *small = device(slices, "gpu-0-mig-1g5gb-19-2");
    assert_string_equal(cap(small, "memory"), "4864Mi");
    assert_string_equal(cap(small, "memorySlice2"), "1");
    assert_string_equal(cap(small, "multiprocessors"), "14");
    assert_string_equal(cap(small, "copyEngines"), "1");
    assert_string_equal(cap(small, "decoders"), "0"); /* zero is published, not left out */
    assert_int_equal(json_object_size(json_object_get(small, "capacity")), 8);
    json_t *two = device(slices, "gpu-0-mig-2g10gb-14-0");
    assert_string_equal(cap(two, "copyEngines"), "2");
    assert_string_equal(cap(two, "decoders"), "1");
    json_t *ci = device(slices, "gpu-1-mig-2c3g20gb-9-4");
    assert_attr(ci, "profile", "string", "2c.3g.20gb");
    assert_attr(ci, "parentUUID", "string", inv->devices[1].uuid);
    assert_string_equal(cap(ci, "multiprocessors"), "28");
    /* a compute instance has its GPU instance's engines, shared with its siblings */
    assert_string_equal(cap(ci, "copyEngines"), "3");
    assert_string_equal(cap(ci, "decoders"), "2");
    assert_null(cap(device(slices, "gpu-2"), "copyEngines"));

    json_t *full = device(slices, "gpu-2");
    assert_attr(full, "type", "string", "gpu");
    assert_attr(full, "resource.kubernetes.io/pcieRoot", "string", "pci0000:40");
    assert_string_equal(cap(full, "memory"), "40Gi");
    test_rmtree(root);
}

/* Engine counts the inventory could not read are left out, not published as zero. */
static void test_mig_engines_unknown(void **state)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = test_open("a100-mig");
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = test_read(nvml, NULL);
    struct dra_slices_options opts = {
        .node = "a100-mig-0", .driver = "gpu.nvidia.com", .sysfs_root = "/nonexistent"};
    static const char *const engines[] = {"copyEngines", "decoders", "encoders", "jpegEngines",
                                          "ofaEngines"};

    assert_true(inv->devices[0].migs[0].engines_known);
    inv->devices[0].migs[0].engines_known = false;
    _cleanup_json_ json_t *slices = build(inv, &opts, 1);
    json_t *unknown = device(slices, "gpu-0-mig-3g20gb-9-4");
    json_t *known = device(slices, "gpu-0-mig-2g10gb-14-0");
    for (size_t i = 0; i < ARRAY_SIZE(engines); i++) {
        assert_null(cap(unknown, engines[i]));
        assert_non_null(cap(known, engines[i]));
    }
    assert_string_equal(cap(unknown, "multiprocessors"), "42");
    assert_string_equal(cap(unknown, "memory"), "19968Mi");
}

static void test_lost_gpu_left_out(void **state)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = test_open("lost-gpu");
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = test_read(nvml, NULL);
    struct dra_slices_options opts = {
        .node = "n", .driver = "gpu.nvidia.com", .sysfs_root = "/nonexistent"};

    assert_true(inv->devices[5].lost);
    _cleanup_json_ json_t *slices = build(inv, &opts, 1);
    json_t *devices = devices_of(slices, 0);
    assert_int_equal(json_array_size(devices), 7);
    size_t i;
    json_t *dev;
    json_array_foreach(devices, i, dev)
    {
        assert_string_not_equal(attr(dev, "uuid", "string"), inv->devices[5].uuid);
        assert_string_not_equal(attr(dev, "index", "int"), "5");
    }
}

static void test_taints(void **state)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = test_open("a100-mig");
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = test_read(nvml, NULL);
    bool unhealthy[4] = {true, false, false, true};
    struct dra_slices_options opts = {.node = "a100-mig-0",
                                      .driver = "gpu.nvidia.com",
                                      .sysfs_root = "/nonexistent",
                                      .unhealthy = unhealthy};
    _cleanup_json_ json_t *slices = build(inv, &opts, 1);
    size_t i;
    json_t *dev;

    json_array_foreach(devices_of(slices, 0), i, dev)
    {
        const char *name = json_string_value(json_object_get(dev, "name"));
        json_t *taints = json_object_get(dev, "taints");
        bool want = strncmp(name, "gpu-0-", 6) == 0 || strcmp(name, "gpu-3") == 0;
        if (!want) {
            assert_null(taints);
            continue;
        }
        assert_int_equal(json_array_size(taints), 1);
        json_t *t = json_array_get(taints, 0);
        assert_string_equal(json_string_value(json_object_get(t, "key")), DRA_TAINT_UNHEALTHY);
        assert_string_equal(json_string_value(json_object_get(t, "effect")), "NoSchedule");
        /* the API server stamps timeAdded itself */
        assert_null(json_object_get(t, "timeAdded"));
    }
}

static void test_generation(void **state)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = test_open("pcie-t4");
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = test_read(nvml, NULL);
    struct dra_slices_options opts = {.node = "n", .driver = "gpu.nvidia.com"};
    json_t *slices = NULL;
    struct diag d;

    _cleanup_json_ json_t *a = build(inv, &opts, 0), *b = build(inv, &opts, 41);
    json_t *pool = json_object_get(json_object_get(json_array_get(b, 0), "spec"), "pool");
    assert_int_equal(json_integer_value(json_object_get(pool, "generation")), 41);
    /* the generation is the only difference */
    json_object_set_new(pool, "generation", json_integer(0));
    assert_true(json_equal(a, b));

    diag_init(&d);
    assert_int_equal(dra_slices_build(inv, &opts, -1, &d, &slices), -EINVAL);
    assert_null(slices);
}

/* ---- hand-made inventories ---- */

static struct gpu_inventory *fake_inventory(size_t n)
{
    struct gpu_inventory *inv = calloc(1, sizeof(*inv));
    assert_non_null(inv);
    inv->devices = calloc(n ? n : 1, sizeof(*inv->devices));
    assert_non_null(inv->devices);
    inv->n_devices = n;
    snprintf(inv->driver_version, sizeof(inv->driver_version), "535.104.05");
    inv->cuda_driver_version = 12020;
    for (size_t i = 0; i < n; i++) {
        struct gpu_device *g = &inv->devices[i];
        g->index = (unsigned)i;
        g->minor = (unsigned)i;
        snprintf(g->uuid, sizeof(g->uuid), "GPU-%zu", i);
        snprintf(g->name, sizeof(g->name), "NVIDIA Test");
        g->cc_major = 8;
        g->cc_minor = 6;
        g->architecture = 8; /* Ada */
        g->brand = 15;
        g->memory_bytes = MIB(24576);
        g->numa_node = -1;
    }
    return inv;
}

static void test_versions_and_quantities(void **state)
{
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = fake_inventory(4);
    struct dra_slices_options opts = {.node = "n", .driver = "gpu.nvidia.com"};

    inv->devices[1].memory_bytes = 1000;         /* decimal suffix */
    inv->devices[2].memory_bytes = 1536;         /* neither: plain */
    inv->devices[3].cc_major = -1;               /* unknown: left out */
    inv->devices[3].memory_bytes = MIB(1) + 512; /* 1049088 = 1024.5 Ki: plain */
    _cleanup_json_ json_t *s1 = build(inv, &opts, 1);
    json_t *g0 = device(s1, "gpu-0");
    assert_attr(g0, "driverVersion", "version", "535.104.5");
    assert_attr(g0, "cudaDriverVersion", "version", "12.2.0");
    assert_attr(g0, "cudaComputeCapability", "version", "8.6.0");
    assert_attr(g0, "architecture", "string", "Ada Lovelace");
    assert_attr(g0, "brand", "string", "GeForceRTX");
    assert_null(attr(g0, "resource.kubernetes.io/pciBusID", "string"));
    assert_string_equal(cap(g0, "memory"), "24Gi");
    assert_string_equal(cap(device(s1, "gpu-1"), "memory"), "1k");
    assert_string_equal(cap(device(s1, "gpu-2"), "memory"), "1536");
    assert_string_equal(cap(device(s1, "gpu-3"), "memory"), "1049088");
    assert_null(attr(device(s1, "gpu-3"), "cudaComputeCapability", "version"));

    snprintf(inv->driver_version, sizeof(inv->driver_version), "550.54");
    inv->cuda_driver_version = 0;
    inv->devices[0].brand = 99;
    _cleanup_json_ json_t *s2 = build(inv, &opts, 1);
    g0 = device(s2, "gpu-0");
    assert_attr(g0, "driverVersion", "version", "550.54.0");
    assert_null(attr(g0, "cudaDriverVersion", "version"));
    assert_attr(g0, "brand", "string", "Unknown");

    snprintf(inv->driver_version, sizeof(inv->driver_version), "unknown");
    _cleanup_json_ json_t *s3 = build(inv, &opts, 1);
    assert_null(attr(device(s3, "gpu-0"), "driverVersion", "version"));

    /* a product name longer than the API's 64 characters is cut, not refused */
    memset(inv->devices[0].name, 'x', 80);
    inv->devices[0].name[80] = '\0';
    _cleanup_json_ json_t *s4 = build(inv, &opts, 1);
    assert_int_equal(strlen(attr(device(s4, "gpu-0"), "productName", "string")), 64);
}

static void assert_split(json_t *slices, size_t n_slices, size_t per_slice, size_t total)
{
    char want[64];
    assert_int_equal(json_array_size(slices), n_slices);
    size_t seen = 0;
    for (size_t i = 0; i < n_slices; i++) {
        json_t *s = json_array_get(slices, i);
        json_t *pool = json_object_get(json_object_get(s, "spec"), "pool");
        snprintf(want, sizeof(want), "n-gpu.nvidia.com-%zu", i);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(s, "metadata"), "name")), want);
        assert_int_equal(json_integer_value(json_object_get(pool, "resourceSliceCount")), n_slices);
        size_t n = json_array_size(devices_of(slices, i));
        assert_true(n <= per_slice);
        seen += n;
    }
    assert_int_equal(seen, total);
}

static void test_split_at_limits(void **state)
{
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = fake_inventory(200);
    bool unhealthy[200] = {false};
    struct dra_slices_options opts = {
        .node = "n", .driver = "gpu.nvidia.com", .unhealthy = unhealthy};

    _cleanup_json_ json_t *s1 = build(inv, &opts, 1);
    assert_split(s1, 2, 128, 200);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(devices_of(s1, 1), 0), "name")),
        "gpu-128");
    /* with a taint, 64 devices per slice */
    unhealthy[150] = true;
    _cleanup_json_ json_t *s2 = build(inv, &opts, 1);
    assert_split(s2, 4, 64, 200);
    /* 128 exactly fit in one */
    inv->n_devices = 128;
    _cleanup_json_ json_t *s3 = build(inv, &opts, 1);
    assert_split(s3, 1, 128, 128);
}

/* No device at all: one slice without devices, so the pool and its generation are still seen. */
static void test_empty_pool(void **state)
{
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = fake_inventory(2);
    struct dra_slices_options opts = {.node = "n", .driver = "gpu.nvidia.com"};
    inv->devices[0].lost = true;
    inv->devices[0].error = 15;
    inv->devices[1].error = 999;
    _cleanup_json_ json_t *slices = build(inv, &opts, 2);
    assert_int_equal(json_array_size(slices), 1);
    json_t *spec = json_object_get(json_array_get(slices, 0), "spec");
    assert_null(json_object_get(spec, "devices"));
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(spec, "pool"), "resourceSliceCount")),
        1);
}

static void test_refused_names(void **state)
{
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = fake_inventory(1);
    static const struct {
        const char *node, *driver, *why;
    } cases[] = {
        {"Node_1", "gpu.nvidia.com", "node name \"Node_1\""},
        {"n", "-gpu.nvidia.com", "driver name \"-gpu.nvidia.com\""},
        {"n", "a-driver-name-that-is-longer-than-sixty-three-characters.example.com",
         "driver name"},
        {NULL, "gpu.nvidia.com", "required"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct dra_slices_options opts = {.node = cases[i].node, .driver = cases[i].driver};
        json_t *slices = NULL;
        struct diag d;
        diag_init(&d);
        assert_int_equal(dra_slices_build(inv, &opts, 1, &d, &slices), -EINVAL);
        assert_null(slices);
        if (!strstr(d.msg, cases[i].why))
            fail_msg("case %zu: \"%s\" does not say %s", i, d.msg, cases[i].why);
    }

    /* a node name the API accepts whose slice names would be too long */
    char node[254];
    memset(node, 'a', 240);
    node[240] = '\0';
    struct dra_slices_options opts = {.node = node, .driver = "gpu.nvidia.com"};
    json_t *slices = NULL;
    struct diag d;
    diag_init(&d);
    assert_int_equal(dra_slices_build(inv, &opts, 1, &d, &slices), -EINVAL);
    assert_non_null(strstr(d.msg, "slice name"));

    /* a MIG profile that makes no device name */
    struct gpu_mig_device mig = {.profile = "...", .placement_size = 1};
    inv->devices[0].mig_enabled = true;
    inv->devices[0].n_migs = 1;
    inv->devices[0].migs = &mig;
    opts.node = "n";
    diag_init(&d);
    assert_true(dra_slices_build(inv, &opts, 1, &d, &slices) < 0);
    inv->devices[0].n_migs = 0;
    inv->devices[0].migs = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dgx_h100),          cmocka_unit_test(test_no_pcie_root),
        cmocka_unit_test(test_a100_mig),          cmocka_unit_test(test_mig_engines_unknown),
        cmocka_unit_test(test_lost_gpu_left_out), cmocka_unit_test(test_taints),
        cmocka_unit_test(test_generation),        cmocka_unit_test(test_versions_and_quantities),
        cmocka_unit_test(test_split_at_limits),   cmocka_unit_test(test_empty_pool),
        cmocka_unit_test(test_refused_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
