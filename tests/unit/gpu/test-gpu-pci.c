/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The facts of src/gpu/gpu-pci.c: the vGPU vendor capability of a PCI config space (the host
 * driver record, lists that loop, short reads, a capability that is not NVIDIA's), the PCI class
 * from sysfs, and, through the mock, the class from nvmlDeviceGetPciInfoExt and the NVLink fabric
 * from nvmlDeviceGetGpuFabricInfoV (attached only when registration completed).
 */
#include "gpu-internal.h"
#include "gpu-test.h"

/* A config space with a capability list: MSI at 0x60, then a vendor capability at 0xd4 holding
 * "VF", a record of type 1 (skipped) when skip_record, then the host driver record. */
static void make_config(unsigned char cfg[256], bool skip_record)
{
    memset(cfg, 0, 256);
    cfg[0] = 0xde;
    cfg[1] = 0x10;
    cfg[0x06] = 0x10;
    cfg[0x34] = 0x60;
    cfg[0x60] = 0x05;
    cfg[0x61] = 0xd4;
    unsigned char *cap = cfg + 0xd4;
    unsigned r = 5;
    cap[0] = 0x09;
    cap[3] = 'V';
    cap[4] = 'F';
    if (skip_record) {
        cap[r] = 1;
        cap[r + 1] = 4;
        r += 4;
    }
    cap[r] = 0;
    cap[r + 1] = 22;
    memcpy(cap + r + 2, "535.54", 6);
    memcpy(cap + r + 12, "r535_00", 7);
    cap[2] = (unsigned char)(r + 22);
}

static void test_vgpu_config(void **state)
{
    unsigned char cfg[256];
    char version[GPU_VGPU_VERSION_MAX], branch[GPU_VGPU_VERSION_MAX];

    make_config(cfg, false);
    assert_true(gpu_vgpu_parse_config(cfg, sizeof(cfg), version, branch));
    assert_string_equal(version, "535.54");
    assert_string_equal(branch, "r535_00");

    make_config(cfg, true); /* another record first */
    assert_true(gpu_vgpu_parse_config(cfg, sizeof(cfg), version, branch));
    assert_string_equal(version, "535.54");

    make_config(cfg, false); /* an unprivileged read: 64 bytes */
    assert_false(gpu_vgpu_parse_config(cfg, 64, version, branch));

    make_config(cfg, false);
    cfg[0x06] = 0; /* no capability list */
    assert_false(gpu_vgpu_parse_config(cfg, sizeof(cfg), version, branch));

    make_config(cfg, false);
    cfg[0xd4 + 3] = 'X'; /* a vendor capability, not the vGPU one: a passthrough GPU */
    assert_false(gpu_vgpu_parse_config(cfg, sizeof(cfg), version, branch));

    make_config(cfg, false);
    cfg[0x61] = 0x60; /* MSI points at itself: the walk ends */
    assert_false(gpu_vgpu_parse_config(cfg, sizeof(cfg), version, branch));

    make_config(cfg, true);
    cfg[0xd4 + 6] = 0; /* a record of length 0: a vGPU whose records cannot be walked */
    assert_true(gpu_vgpu_parse_config(cfg, sizeof(cfg), version, branch));
    assert_string_equal(version, "");

    make_config(cfg, false);
    cfg[0xd4 + 2] = 200; /* longer than the config space */
    assert_false(gpu_vgpu_parse_config(cfg, sizeof(cfg), version, branch));
}

static void write_class(const char *root, const char *bus, const char *text)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/sys", root);
    (void)mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/sys/bus", root);
    (void)mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/sys/bus/pci", root);
    (void)mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/sys/bus/pci/devices", root);
    (void)mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s", root, bus);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s/class", root, bus);
    test_write_file(path, text);
}

static void test_sysfs_class(void **state)
{
    char *dir = test_tmpdir();
    write_class(dir, "0000:3b:00.0", "0x030200\n");
    write_class(dir, "0000:5e:00.0", "0x030000\n");
    write_class(dir, "0000:af:00.0", "garbage\n");
    assert_int_equal(gpu_sysfs_pci_class(dir, "0000:3b:00.0"), 0x030200);
    assert_int_equal(gpu_sysfs_pci_class(dir, "0000:5e:00.0"), 0x030000);
    assert_int_equal(gpu_sysfs_pci_class(dir, "0000:af:00.0"), 0);
    assert_int_equal(gpu_sysfs_pci_class(dir, "0000:d8:00.0"), 0); /* no file */
    assert_int_equal(gpu_sysfs_pci_class(dir, "../../etc"), 0);
    test_rmtree(dir);
    free(dir);
}

#define PROFILE                                                                                    \
    "driver: {version: \"550.54.15\", cuda: 12040}\n"                                              \
    "defaults: {name: \"NVIDIA H100 80GB HBM3\", architecture: hopper, computeCapability: "        \
    "\"9.0\", "                                                                                    \
    "memory: 81559}\n"                                                                             \
    "gpus:\n"                                                                                      \
    "  - busId: \"0000:18:00.0\"\n"                                                                \
    "    fabric: {clusterUuid: \"C6D1EC5E-4E43-4D0E-9C5F-9D1B2A3C4E5F\", cliqueId: 7}\n"           \
    "  - busId: \"0000:2a:00.0\"\n"                                                                \
    "    pciClass: 0x030000\n"                                                                     \
    "    fabric: {clusterUuid: \"c6d1ec5e-4e43-4d0e-9c5f-9d1b2a3c4e5f\", cliqueId: 7, "            \
    "state: in-progress}\n"                                                                        \
    "  - busId: \"0000:3a:00.0\"\n"

#ifdef MOCK_NVML_LIB
static void test_mock_class_and_fabric(void **state)
{
    char *dir = test_tmpdir();
    char profile[4200];
    snprintf(profile, sizeof(profile), "%s/node.yaml", dir);
    test_write_file(profile, PROFILE);
    struct gpu_nvml *nvml = test_open(profile);
    struct gpu_inventory *inv = test_read(nvml, NULL);

    assert_int_equal(inv->n_devices, 3);
    assert_int_equal(inv->devices[0].pci_class, 0x030200); /* the default: a 3D controller */
    assert_int_equal(inv->devices[1].pci_class, 0x030000);
    assert_true(inv->devices[0].fabric_attached);
    assert_string_equal(inv->devices[0].fabric_cluster_uuid,
                        "c6d1ec5e-4e43-4d0e-9c5f-9d1b2a3c4e5f");
    assert_int_equal(inv->devices[0].fabric_clique_id, 7);
    assert_false(inv->devices[1].fabric_attached); /* registration not completed */
    assert_false(inv->devices[2].fabric_attached); /* no fabric: NOT_SUPPORTED */
    assert_false(inv->devices[0].vgpu_guest);      /* no config space to read */

    /* The version field is checked as the driver checks it. */
    nvmlGpuFabricInfoV_t info = {.version = 1};
    nvmlDevice_t h = NULL;
    assert_int_equal(NVML_CALL(nvml, nvmlDeviceGetHandleByIndex_v2, 0, &h), NVML_SUCCESS);
    assert_int_equal(NVML_CALL(nvml, nvmlDeviceGetGpuFabricInfoV, h, &info),
                     NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    nvmlPciInfoExt_t ext = {.version = nvmlPciInfoExt_v1};
    assert_int_equal(NVML_CALL(nvml, nvmlDeviceGetPciInfoExt, h, &ext), NVML_SUCCESS);
    assert_int_equal(ext.baseClass, 3);
    assert_int_equal(ext.subClass, 2);
    assert_string_equal(ext.busId, "00000000:18:00.0");

    gpu_inventory_free(inv);
    gpu_nvml_close(nvml);
    test_rmtree(dir);
    free(dir);
}

static void test_mock_bad_fabric(void **state)
{
    char *dir = test_tmpdir();
    char profile[4200];
    struct gpu_nvml *nvml = NULL;
    struct diag d;
    snprintf(profile, sizeof(profile), "%s/node.yaml", dir);
    test_write_file(profile,
                    "defaults: {name: X, architecture: hopper, computeCapability: \"9.0\", "
                    "memory: 1024}\n"
                    "gpus:\n"
                    "  - {busId: \"0000:18:00.0\", fabric: {clusterUuid: nope, "
                    "cliqueId: 1}}\n");
    diag_init(&d);
    test_use_profile(profile);
    assert_true(gpu_nvml_open(MOCK_NVML_LIB, &d, &nvml) < 0);
    assert_non_null(strstr(d.msg, "clusterUuid"));
    test_rmtree(dir);
    free(dir);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vgpu_config),
        cmocka_unit_test(test_sysfs_class),
#ifdef MOCK_NVML_LIB
        cmocka_unit_test(test_mock_class_and_fabric),
        cmocka_unit_test(test_mock_bad_fabric),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
