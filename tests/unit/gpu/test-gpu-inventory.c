/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The inventory read through the real mock NVML library: every bundled node profile (a DGX H100 on
 * NVSwitch, A100s with MIG devices, PCIe T4s, a DGX with a lost GPU), a GPU lost at run time, a
 * scratch profile that exercises every PCIe level, direct NVLink peers and the sysfs NUMA fallback,
 * and the JSON document built from all of them.
 */
#include "gpu-internal.h"
#include "gpu-test.h"

#define MIB(x) ((uint64_t)(x) << 20)

static const char *link_at(const struct gpu_inventory *inv, size_t i, size_t j, char buf[16])
{
    return gpu_link_name(gpu_inventory_link(inv, i, j), buf);
}

static void assert_all_pairs(const struct gpu_inventory *inv, const char *want, size_t skip)
{
    char buf[16];
    for (size_t i = 0; i < inv->n_devices; i++)
        for (size_t j = 0; j < inv->n_devices; j++) {
            if (i == skip || j == skip)
                continue;
            const char *got = link_at(inv, i, j, buf);
            if (strcmp(got, i == j ? "X" : want) != 0)
                fail_msg("link %zu-%zu: %s, want %s", i, j, got, i == j ? "X" : want);
        }
}

static void test_dgx_h100(void **state)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = test_open("dgx-h100");
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = test_read(nvml, NULL);
    int per_node[2] = {0, 0};

    assert_string_equal(inv->driver_version, "550.54.15");
    assert_int_equal(inv->cuda_driver_version, 12040);
    assert_int_equal(inv->n_devices, 8);
    for (size_t i = 0; i < 8; i++) {
        const struct gpu_device *dev = &inv->devices[i];
        assert_int_equal(dev->index, i);
        assert_int_equal(dev->error, 0);
        assert_false(dev->lost);
        assert_int_equal(strncmp(dev->uuid, "GPU-", 4), 0);
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(dev->uuid, inv->devices[j].uuid);
        assert_ptr_equal(gpu_inventory_find(inv, dev->uuid), dev);
        assert_string_equal(dev->name, "NVIDIA H100 80GB HBM3");
        assert_int_equal(dev->memory_bytes, MIB(81559));
        assert_int_equal(dev->cc_major, 9);
        assert_int_equal(dev->cc_minor, 0);
        assert_int_equal(dev->architecture, NVML_DEVICE_ARCH_HOPPER);
        assert_int_equal(dev->pci_device_id, 0x233010DE);
        assert_int_equal(dev->minor, i);
        assert_true(dev->mig_capable);
        assert_false(dev->mig_enabled);
        assert_int_equal(dev->n_migs, 0);
        assert_int_equal(dev->nvlinks_active, 18);
        assert_true(dev->nvswitch);
        assert_true(dev->numa_node == 0 || dev->numa_node == 1);
        per_node[dev->numa_node]++;
    }
    assert_int_equal(per_node[0], 4);
    assert_int_equal(per_node[1], 4);
    assert_string_equal(inv->devices[0].pci_bus_id, "00000000:18:00.0");
    assert_string_equal(inv->devices[0].sysfs_bus_id, "0000:18:00.0");
    assert_string_equal(inv->devices[4].sysfs_bus_id, "0000:9a:00.0");
    assert_all_pairs(inv, "NV18", SIZE_MAX);
    /* under the NVLink, the PCIe path is still known */
    assert_int_equal(gpu_inventory_link(inv, 0, 1)->pcie, GPU_LINK_PIX);
    assert_int_equal(gpu_inventory_link(inv, 0, 2)->pcie, GPU_LINK_NODE);
    assert_int_equal(gpu_inventory_link(inv, 0, 4)->pcie, GPU_LINK_SYS);
    assert_int_equal(gpu_inventory_link(inv, 3, 5)->nvlinks, 18);
    assert_null(gpu_inventory_link(inv, 0, 8));
    assert_null(gpu_inventory_find(inv, "GPU-00000000-0000-0000-0000-000000000000"));
}

static const struct gpu_mig_device *find_mig(const struct gpu_device *dev, const char *uuid)
{
    for (size_t m = 0; m < dev->n_migs; m++)
        if (strcmp(dev->migs[m].uuid, uuid) == 0)
            return &dev->migs[m];
    fail_msg("no MIG device %s on GPU %u", uuid, dev->index);
    return NULL;
}

static void assert_mig(const struct gpu_device *dev, const char *uuid, const char *profile,
                       unsigned placement_start, unsigned placement_size, uint64_t mib)
{
    const struct gpu_mig_device *mig = find_mig(dev, uuid);
    assert_string_equal(mig->profile, profile);
    assert_int_equal(mig->placement_start, placement_start);
    assert_int_equal(mig->placement_size, placement_size);
    assert_int_equal(mig->memory_bytes, MIB(mib));
    assert_true(mig->multiprocessors > 0);
}

/* Copy, decoder, encoder, JPEG and OFA engines, in that order. */
static void assert_engines(const struct gpu_mig_device *mig, const unsigned want[static 5])
{
    const unsigned got[5] = {mig->copy_engines, mig->decoders, mig->encoders, mig->jpeg_engines,
                             mig->ofa_engines};
    assert_true(mig->engines_known);
    for (size_t i = 0; i < 5; i++)
        if (got[i] != want[i])
            fail_msg("%s (%s): engine %zu is %u, want %u", mig->uuid, mig->profile, i, got[i],
                     want[i]);
}

static void test_a100_mig(void **state)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = test_open("a100-mig");
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = test_read(nvml, NULL);

    assert_int_equal(inv->n_devices, 4);
    const struct gpu_device *g0 = &inv->devices[0], *g1 = &inv->devices[1];
    assert_true(g0->mig_enabled);
    assert_int_equal(g0->n_migs, 4);
    assert_mig(g0, "MIG-6129f8b4-2bcf-4087-a0c3-2cd8458057d6", "3g.20gb", 4, 4, 19968);
    assert_mig(g0, "MIG-eea63077-a70f-460e-b318-14156cba9966", "2g.10gb", 0, 2, 9984);
    assert_mig(g0, "MIG-ef6c445d-3bb2-47b0-bea4-b7e16699dd96", "1g.5gb", 2, 1, 4864);
    assert_mig(g0, "MIG-d7e0f2c7-4329-4742-b88c-20a54f711b04", "1g.5gb", 3, 1, 4864);
    assert_int_equal(find_mig(g0, "MIG-eea63077-a70f-460e-b318-14156cba9966")->gi_slices, 2);

    assert_true(g1->mig_enabled);
    assert_int_equal(g1->n_migs, 3);
    assert_mig(g1, "MIG-a15ba067-c684-4201-be49-b60dfeee5260", "3g.20gb", 0, 4, 19968);
    assert_mig(g1, "MIG-ce395b76-e454-45a5-bbc1-c61a2e663ea1", "1c.3g.20gb", 4, 4, 19968);
    assert_mig(g1, "MIG-87a7c223-6f8c-4104-9824-8cb913487064", "2c.3g.20gb", 4, 4, 19968);
    const struct gpu_mig_device *split = find_mig(g1, "MIG-87a7c223-6f8c-4104-9824-8cb913487064");
    assert_int_equal(split->ci_slices, 2);
    assert_int_equal(split->gi_slices, 3);
    assert_int_equal(split->ci_id, 1);
    assert_int_equal(find_mig(g1, "MIG-ce395b76-e454-45a5-bbc1-c61a2e663ea1")->gi_id, split->gi_id);

    /* Engine counts of the A100 GPU instance profiles (`nvidia-smi mig -lgip`); compute instances
     * report their GPU instance's engines, which they share. */
    static const unsigned a100_3g[5] = {3, 2, 0, 0, 0}, a100_2g[5] = {2, 1, 0, 0, 0},
                          a100_1g[5] = {1, 0, 0, 0, 0};
    assert_engines(find_mig(g0, "MIG-6129f8b4-2bcf-4087-a0c3-2cd8458057d6"), a100_3g);
    assert_engines(find_mig(g0, "MIG-eea63077-a70f-460e-b318-14156cba9966"), a100_2g);
    assert_engines(find_mig(g0, "MIG-ef6c445d-3bb2-47b0-bea4-b7e16699dd96"), a100_1g);
    assert_engines(find_mig(g1, "MIG-ce395b76-e454-45a5-bbc1-c61a2e663ea1"), a100_3g);
    assert_engines(split, a100_3g);

    for (size_t i = 2; i < 4; i++) {
        assert_true(inv->devices[i].mig_capable);
        assert_false(inv->devices[i].mig_enabled);
        assert_int_equal(inv->devices[i].n_migs, 0);
    }
    assert_int_equal(g0->architecture, NVML_DEVICE_ARCH_AMPERE);
    assert_all_pairs(inv, "NV12", SIZE_MAX);
}

/* H100 profiles have JPEG and OFA engines and more copy engines than slices (7g.80gb has 8), so
 * each count is told apart from the others and from the slice count. */
static const char H100_MIG_PROFILE[] =
    "defaults:\n"
    "  name: \"NVIDIA H100 80GB HBM3\"\n"
    "  architecture: hopper\n"
    "  computeCapability: \"9.0\"\n"
    "  memory: 81559\n"
    "gpus:\n"
    "  - busId: \"0000:18:00.0\"\n"
    "    mig:\n"
    "      capable: true\n"
    "      enabled: true\n"
    "      instances:\n"
    "        - {profile: 1g.10gb+me, placement: 0, uuid: "
    "MIG-00000000-0000-4000-8000-000000000001}\n"
    "        - {profile: 1g.20gb, placement: 2, uuid: MIG-00000000-0000-4000-8000-000000000002}\n"
    "        - {profile: 3g.40gb, placement: 4, uuid: MIG-00000000-0000-4000-8000-000000000003}\n"
    "  - busId: \"0000:2a:00.0\"\n"
    "    mig:\n"
    "      capable: true\n"
    "      enabled: true\n"
    "      instances:\n"
    "        - {profile: 7g.80gb, uuid: MIG-00000000-0000-4000-8000-000000000004}\n";

static void test_h100_mig_engines(void **state)
{
    char *dir = test_tmpdir();
    char profile[4200];
    snprintf(profile, sizeof(profile), "%s/node.yaml", dir);
    test_write_file(profile, H100_MIG_PROFILE);
    struct gpu_nvml *nvml = test_open(profile);
    struct gpu_inventory *inv = test_read(nvml, NULL);
    static const unsigned me[5] = {1, 1, 0, 1, 1}, wide[5] = {1, 1, 0, 1, 0},
                          three[5] = {3, 3, 0, 3, 0}, seven[5] = {8, 7, 0, 7, 1};

    assert_int_equal(inv->n_devices, 2);
    assert_int_equal(inv->devices[0].n_migs, 3);
    const struct gpu_mig_device *m =
        find_mig(&inv->devices[0], "MIG-00000000-0000-4000-8000-000000000001");
    assert_string_equal(m->profile, "1g.10gb+me");
    assert_engines(m, me);
    m = find_mig(&inv->devices[0], "MIG-00000000-0000-4000-8000-000000000002");
    assert_string_equal(m->profile, "1g.20gb");
    assert_engines(m, wide);
    m = find_mig(&inv->devices[0], "MIG-00000000-0000-4000-8000-000000000003");
    assert_string_equal(m->profile, "3g.40gb");
    assert_engines(m, three);
    assert_int_equal(inv->devices[1].n_migs, 1);
    m = find_mig(&inv->devices[1], "MIG-00000000-0000-4000-8000-000000000004");
    assert_string_equal(m->profile, "7g.80gb");
    assert_engines(m, seven);

    gpu_inventory_free(inv);
    gpu_nvml_close(nvml);
    test_rmtree(dir);
    free(dir);
}

static void test_pcie_t4(void **state)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = test_open("pcie-t4");
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = test_read(nvml, NULL);
    char buf[16];

    assert_int_equal(inv->n_devices, 4);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(inv->devices[i].nvlinks_active, 0);
        assert_false(inv->devices[i].nvswitch);
        assert_false(inv->devices[i].mig_capable);
        assert_int_equal(inv->devices[i].cc_major, 7);
        assert_int_equal(inv->devices[i].cc_minor, 5);
        assert_string_equal(inv->devices[i].name, "Tesla T4");
    }
    assert_string_equal(link_at(inv, 0, 1, buf), "NODE");
    assert_string_equal(link_at(inv, 2, 3, buf), "NODE");
    assert_string_equal(link_at(inv, 0, 2, buf), "SYS");
    assert_string_equal(link_at(inv, 3, 1, buf), "SYS");
    assert_string_equal(link_at(inv, 2, 2, buf), "X");
    assert_int_equal(gpu_inventory_link(inv, 0, 1)->nvlinks, 0);
}

static void assert_healthy_except(const struct gpu_inventory *inv, size_t lost)
{
    for (size_t i = 0; i < inv->n_devices; i++) {
        if (i == lost)
            continue;
        assert_false(inv->devices[i].lost);
        assert_int_equal(inv->devices[i].error, 0);
        assert_int_equal(strncmp(inv->devices[i].uuid, "GPU-", 4), 0);
    }
}

static void assert_lost_row(const struct gpu_inventory *inv, size_t lost)
{
    char buf[16];
    for (size_t j = 0; j < inv->n_devices; j++) {
        assert_string_equal(link_at(inv, lost, j, buf), j == lost ? "X" : "N/A");
        assert_string_equal(link_at(inv, j, lost, buf), j == lost ? "X" : "N/A");
    }
}

static void test_lost_gpu(void **state)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = test_open("lost-gpu");
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = test_read(nvml, NULL);

    assert_int_equal(inv->n_devices, 8);
    const struct gpu_device *lost = &inv->devices[5];
    assert_true(lost->lost);
    assert_int_equal(lost->error, NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(lost->index, 5);
    assert_string_equal(lost->uuid, ""); /* its handle could not even be acquired */
    assert_healthy_except(inv, 5);
    assert_lost_row(inv, 5);
    assert_all_pairs(inv, "NV18", 5);
}

/* A GPU lost after the driver attached it: the handle is fine, every call on it is not. */
static void test_lost_at_run_time(void **state)
{
    char *dir = test_tmpdir();
    char events[4200];
    snprintf(events, sizeof(events), "%s/events.jsonl", dir);
    test_write_file(events, "{\"gpu\": 2, \"type\": \"lost\"}\n");
    assert_int_equal(setenv("MOCK_NVML_EVENTS", events, 1), 0);
    struct gpu_nvml *nvml = test_open("pcie-t4");
    struct gpu_inventory *inv = test_read(nvml, NULL);

    assert_int_equal(inv->n_devices, 4);
    assert_true(inv->devices[2].lost);
    assert_int_equal(inv->devices[2].index, 2);
    assert_int_equal(inv->devices[2].error, NVML_ERROR_GPU_IS_LOST);
    assert_healthy_except(inv, 2);
    assert_lost_row(inv, 2);

    gpu_inventory_free(inv);
    gpu_nvml_close(nvml);
    assert_int_equal(unsetenv("MOCK_NVML_EVENTS"), 0);
    test_rmtree(dir);
    free(dir);
}

static const char SCRATCH_PROFILE[] =
    "defaults:\n"
    "  name: \"Tesla T4\"\n"
    "  architecture: turing\n"
    "  computeCapability: \"7.5\"\n"
    "  memory: 15360\n"
    "  numa: -1\n"
    "topology:\n"
    "  - {gpus: [0, 2], level: multiple}\n"
    "  - {gpus: [0, 3], level: hostbridge}\n"
    "  - {gpus: [1, 2], level: internal}\n"
    "gpus:\n"
    "  - {busId: \"0000:3b:00.0\", pciSwitch: 0, nvlink: {peers: {\"1\": 4}}}\n"
    "  - {busId: \"0000:5e:00.0\", pciSwitch: 0, nvlink: {peers: {\"0\": 4}}}\n"
    "  - {busId: \"0000:af:00.0\"}\n"
    "  - {busId: \"0000:d8:00.0\"}\n";

static void write_numa(const char *root, const char *bdf, const char *text)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s", root, bdf);
    assert_int_equal(file_mkdir_p(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s/numa_node", root, bdf);
    test_write_file(path, text);
}

/* Every PCIe level, direct NVLink peers, and NUMA from sysfs when NVML has no answer. */
static void test_scratch_topology_and_sysfs_numa(void **state)
{
    char *dir = test_tmpdir();
    char profile[4200], buf[16];
    snprintf(profile, sizeof(profile), "%s/node.yaml", dir);
    test_write_file(profile, SCRATCH_PROFILE);
    write_numa(dir, "0000:3b:00.0", "1\n");
    write_numa(dir, "0000:5e:00.0", "0\n");
    write_numa(dir, "0000:d8:00.0", "-1\n");
    struct gpu_nvml *nvml = test_open(profile);
    struct gpu_inventory *inv = test_read(nvml, &(struct gpu_read_options){.sysfs_root = dir});

    assert_int_equal(inv->n_devices, 4);
    assert_int_equal(inv->devices[0].numa_node, 1);
    assert_int_equal(inv->devices[1].numa_node, 0);
    assert_int_equal(inv->devices[2].numa_node, -1); /* no file */
    assert_int_equal(inv->devices[3].numa_node, -1);
    assert_string_equal(link_at(inv, 0, 1, buf), "NV4");
    assert_int_equal(gpu_inventory_link(inv, 0, 1)->pcie, GPU_LINK_PIX);
    assert_int_equal(inv->devices[0].nvlinks_active, 4);
    assert_false(inv->devices[0].nvswitch);
    assert_string_equal(link_at(inv, 0, 2, buf), "PXB");
    assert_string_equal(link_at(inv, 3, 0, buf), "PHB");
    assert_string_equal(link_at(inv, 1, 2, buf), "PIX");
    assert_string_equal(link_at(inv, 1, 3, buf), "SYS");
    assert_string_equal(link_at(inv, 2, 3, buf), "SYS");

    gpu_inventory_free(inv);
    gpu_nvml_close(nvml);
    test_rmtree(dir);
    free(dir);
}

static void test_skip_topology(void **state)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = test_open("dgx-h100");
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv =
        test_read(nvml, &(struct gpu_read_options){.skip_topology = true});
    char buf[16];

    assert_int_equal(inv->n_devices, 8);
    assert_string_equal(link_at(inv, 0, 0, buf), "X");
    assert_string_equal(link_at(inv, 0, 1, buf), "N/A");
    assert_int_equal(inv->devices[0].nvlinks_active, 0);
    assert_int_equal(inv->devices[0].memory_bytes, MIB(81559));
}

/* ---- JSON ---- */

static json_t *inventory_json(const char *profile)
{
    struct gpu_nvml *nvml = test_open(profile);
    struct gpu_inventory *inv = test_read(nvml, NULL);
    json_t *doc = NULL;
    assert_int_equal(gpu_inventory_to_json(inv, &doc), 0);
    assert_non_null(doc);
    gpu_inventory_free(inv);
    gpu_nvml_close(nvml);
    return doc;
}

static void assert_keys(const json_t *obj, const char *const *keys)
{
    assert_true(json_is_object(obj));
    size_t n = 0;
    for (; keys[n]; n++)
        if (!json_object_get(obj, keys[n]))
            fail_msg("missing key %s", keys[n]);
    assert_int_equal(json_object_size(obj), n);
}

static const char *const DOC_KEYS[] = {"driverVersion", "cudaDriverVersion", "nvmlVersion",
                                       "gpus",          "topology",          NULL};
static const char *const GPU_KEYS[] = {
    "index",        "uuid",       "name",        "pciBusId",
    "minor",        "numaNode",   "memoryBytes", "computeCapability",
    "architecture", "migCapable", "migEnabled",  "nvlinks",
    "lost",         "error",      "migDevices",  "pciClass",
    "fabric",       "vgpu",       NULL};
static const char *const MIG_KEYS[] = {"uuid",        "profile",         "giId",        "ciId",
                                       "memoryBytes", "multiprocessors", "copyEngines", "decoders",
                                       "encoders",    "jpegEngines",     "ofaEngines",  "placement",
                                       NULL};

static void test_json_dgx_h100(void **state)
{
    _cleanup_json_ json_t *doc = inventory_json("dgx-h100");
    assert_keys(doc, DOC_KEYS);
    assert_string_equal(json_string_value(json_object_get(doc, "cudaDriverVersion")), "12.4");
    assert_string_equal(json_string_value(json_object_get(doc, "driverVersion")), "550.54.15");
    json_t *gpus = json_object_get(doc, "gpus");
    assert_int_equal(json_array_size(gpus), 8);
    json_t *g = json_array_get(gpus, 4);
    assert_keys(g, GPU_KEYS);
    assert_int_equal(json_integer_value(json_object_get(g, "index")), 4);
    assert_string_equal(json_string_value(json_object_get(g, "pciBusId")), "00000000:9A:00.0");
    assert_int_equal(json_integer_value(json_object_get(g, "numaNode")), 1);
    assert_int_equal(json_integer_value(json_object_get(g, "memoryBytes")), MIB(81559));
    assert_string_equal(json_string_value(json_object_get(g, "computeCapability")), "9.0");
    assert_string_equal(json_string_value(json_object_get(g, "architecture")), "Hopper");
    assert_true(json_is_true(json_object_get(g, "migCapable")));
    assert_true(json_is_false(json_object_get(g, "lost")));
    assert_true(json_is_null(json_object_get(g, "error")));
    assert_int_equal(json_integer_value(json_object_get(g, "nvlinks")), 18);
    assert_int_equal(json_array_size(json_object_get(g, "migDevices")), 0);
    assert_string_equal(json_string_value(json_object_get(g, "pciClass")), "0x030200");
    json_t *fabric = json_object_get(g, "fabric");
    assert_string_equal(json_string_value(json_object_get(fabric, "clusterUuid")),
                        "c6d1ec5e-4e43-4d0e-9c5f-9d1b2a3c4e5f");
    assert_int_equal(json_integer_value(json_object_get(fabric, "cliqueId")), 32766);
    assert_true(json_is_null(json_object_get(g, "vgpu")));
    json_t *matrix = json_object_get(json_object_get(doc, "topology"), "matrix");
    assert_int_equal(json_array_size(matrix), 8);
    assert_int_equal(json_array_size(json_array_get(matrix, 7)), 8);
    assert_string_equal(json_string_value(json_array_get(json_array_get(matrix, 2), 2)), "X");
    assert_string_equal(json_string_value(json_array_get(json_array_get(matrix, 2), 6)), "NV18");
}

static void test_json_lost_gpu(void **state)
{
    _cleanup_json_ json_t *doc = inventory_json("lost-gpu");
    json_t *g = json_array_get(json_object_get(doc, "gpus"), 5);
    assert_keys(g, GPU_KEYS);
    assert_true(json_is_true(json_object_get(g, "lost")));
    assert_string_equal(json_string_value(json_object_get(g, "error")), "GPU is lost");
    assert_true(json_is_null(json_object_get(g, "uuid")));
    assert_true(json_is_null(json_object_get(g, "computeCapability")));
    assert_int_equal(json_integer_value(json_object_get(g, "index")), 5);
    json_t *row = json_array_get(json_object_get(json_object_get(doc, "topology"), "matrix"), 5);
    assert_string_equal(json_string_value(json_array_get(row, 0)), "N/A");
}

static void test_json_mig(void **state)
{
    _cleanup_json_ json_t *doc = inventory_json("a100-mig");
    json_t *g = json_array_get(json_object_get(doc, "gpus"), 1);
    json_t *migs = json_object_get(g, "migDevices");
    assert_int_equal(json_array_size(migs), 3);
    size_t found = 0, i;
    json_t *m;
    json_array_foreach(migs, i, m)
    {
        assert_keys(m, MIG_KEYS);
        if (strcmp(json_string_value(json_object_get(m, "uuid")),
                   "MIG-87a7c223-6f8c-4104-9824-8cb913487064") != 0)
            continue;
        found++;
        assert_string_equal(json_string_value(json_object_get(m, "profile")), "2c.3g.20gb");
        assert_int_equal(json_integer_value(json_object_get(m, "ciId")), 1);
        assert_int_equal(json_integer_value(json_object_get(m, "memoryBytes")), MIB(19968));
        json_t *placement = json_object_get(m, "placement");
        assert_int_equal(json_integer_value(json_object_get(placement, "start")), 4);
        assert_int_equal(json_integer_value(json_object_get(placement, "size")), 4);
        /* the engines of its 3g.20gb GPU instance; a count of 0 is a number, not null */
        assert_int_equal(json_integer_value(json_object_get(m, "copyEngines")), 3);
        assert_int_equal(json_integer_value(json_object_get(m, "decoders")), 2);
        assert_true(json_is_integer(json_object_get(m, "encoders")));
        assert_int_equal(json_integer_value(json_object_get(m, "encoders")), 0);
        assert_int_equal(json_integer_value(json_object_get(m, "jpegEngines")), 0);
        assert_int_equal(json_integer_value(json_object_get(m, "ofaEngines")), 0);
    }
    assert_int_equal(found, 1);
}

/* Engine counts NVML did not give (a GPU instance profile it did not describe) are null. */
static void test_json_mig_engines_unknown(void **state)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = test_open("a100-mig");
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = test_read(nvml, NULL);
    _cleanup_json_ json_t *doc = NULL;
    static const char *const engines[] = {"copyEngines", "decoders", "encoders", "jpegEngines",
                                          "ofaEngines"};

    assert_true(inv->devices[0].n_migs > 1);
    inv->devices[0].migs[0].engines_known = false;
    assert_int_equal(gpu_inventory_to_json(inv, &doc), 0);
    json_t *migs = json_object_get(json_array_get(json_object_get(doc, "gpus"), 0), "migDevices");
    json_t *unknown = json_array_get(migs, 0), *known = json_array_get(migs, 1);
    assert_keys(unknown, MIG_KEYS);
    for (size_t i = 0; i < ARRAY_SIZE(engines); i++) {
        assert_true(json_is_null(json_object_get(unknown, engines[i])));
        assert_true(json_is_integer(json_object_get(known, engines[i])));
    }
    assert_true(json_integer_value(json_object_get(known, "copyEngines")) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dgx_h100),
        cmocka_unit_test(test_a100_mig),
        cmocka_unit_test(test_h100_mig_engines),
        cmocka_unit_test(test_pcie_t4),
        cmocka_unit_test(test_lost_gpu),
        cmocka_unit_test(test_lost_at_run_time),
        cmocka_unit_test(test_scratch_topology_and_sysfs_numa),
        cmocka_unit_test(test_skip_topology),
        cmocka_unit_test(test_json_dgx_h100),
        cmocka_unit_test(test_json_lost_gpu),
        cmocka_unit_test(test_json_mig),
        cmocka_unit_test(test_json_mig_engines_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
