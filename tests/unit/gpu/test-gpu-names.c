/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure functions of the gpu module, table-driven: NVIDIA's MIG profile naming rule (every
 * suffix and the <C>c.<G>g form, on A100 40GB and H100 80GB memory figures), topology link names
 * and level mapping, architecture names, the NVML-to-sysfs bus id form, and the sysfs numa_node
 * reader on a scratch sysfs tree.
 */
#include <sys/stat.h>

#include "gpu-internal.h"
#include "gpu-test.h"

#define MIB(x) ((uint64_t)(x) << 20)
#define A100_40GB MIB(40960)
#define H100_80GB MIB(81559)

static void test_mig_profile_names(void **state)
{
    static const struct {
        unsigned gi, ci;
        uint64_t mib, parent;
        const char *name;
    } cases[] = {
        {NVML_GPU_INSTANCE_PROFILE_1_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 4864, A100_40GB,
         "1g.5gb"},
        {NVML_GPU_INSTANCE_PROFILE_2_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, 9984, A100_40GB,
         "2g.10gb"},
        {NVML_GPU_INSTANCE_PROFILE_3_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, 19968, A100_40GB,
         "3g.20gb"},
        {NVML_GPU_INSTANCE_PROFILE_4_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE, 19968, A100_40GB,
         "4g.20gb"},
        {NVML_GPU_INSTANCE_PROFILE_7_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE, 40192, A100_40GB,
         "7g.40gb"},
        {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 9984,
         A100_40GB, "1g.10gb"},
        {NVML_GPU_INSTANCE_PROFILE_1_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 9856, H100_80GB,
         "1g.10gb"},
        {NVML_GPU_INSTANCE_PROFILE_3_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, 40192, H100_80GB,
         "3g.40gb"},
        {NVML_GPU_INSTANCE_PROFILE_7_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE, 80384, H100_80GB,
         "7g.80gb"},
        /* compute instances smaller than their GPU instance */
        {NVML_GPU_INSTANCE_PROFILE_2_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 9984, A100_40GB,
         "1c.2g.10gb"},
        {NVML_GPU_INSTANCE_PROFILE_3_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, 19968, A100_40GB,
         "2c.3g.20gb"},
        {NVML_GPU_INSTANCE_PROFILE_7_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE_NVL, 80384,
         H100_80GB, "7g.80gb"},
        {NVML_GPU_INSTANCE_PROFILE_1_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1, 4864,
         A100_40GB, "1g.5gb"},
        /* suffixes */
        {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 4864,
         A100_40GB, "1g.5gb+me"},
        {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 9856,
         H100_80GB, "1g.10gb+me"},
        {NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, 9984,
         A100_40GB, "2g.10gb+me"},
        {NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 9856,
         H100_80GB, "1g.10gb+me.all"},
        {NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, 19968,
         H100_80GB, "2g.20gb+me.all"},
        {NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 9856,
         H100_80GB, "1g.10gb+gfx"},
        {NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX, NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, 19968,
         H100_80GB, "2g.20gb+gfx"},
        {NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX, NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE, 40192,
         H100_80GB, "4g.40gb+gfx"},
        {NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 9856,
         H100_80GB, "1g.10gb-me"},
        {NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 19968,
         H100_80GB, "1c.2g.20gb-me"},
        /* a share of exactly k/8 must not round up to (k+1)/8 */
        {NVML_GPU_INSTANCE_PROFILE_1_SLICE, NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE, 5120, A100_40GB,
         "1g.5gb"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char buf[GPU_PROFILE_MAX] = "unchanged";
        int r = gpu_mig_profile_name(cases[i].gi, cases[i].ci, cases[i].mib, cases[i].parent, buf);
        if (r != 0 || strcmp(buf, cases[i].name) != 0)
            fail_msg("case %zu: got %d \"%s\", want \"%s\"", i, r, buf, cases[i].name);
    }
}

static void test_mig_profile_name_errors(void **state)
{
    char buf[GPU_PROFILE_MAX];
    assert_int_equal(gpu_mig_profile_name(NVML_GPU_INSTANCE_PROFILE_COUNT, 0, 4864, A100_40GB, buf),
                     -EINVAL);
    assert_int_equal(
        gpu_mig_profile_name(0, NVML_COMPUTE_INSTANCE_PROFILE_COUNT, 4864, A100_40GB, buf),
        -EINVAL);
    assert_int_equal(gpu_mig_profile_name(0, 0, 4864, 0, buf), -EINVAL);
}

static void test_link_names(void **state)
{
    static const struct {
        struct gpu_link link;
        const char *name;
    } cases[] = {
        {{GPU_LINK_SELF, GPU_LINK_SELF, 0}, "X"},
        {{GPU_LINK_NVLINK, GPU_LINK_PIX, 18}, "NV18"},
        {{GPU_LINK_NVLINK, GPU_LINK_SYS, 4}, "NV4"},
        {{GPU_LINK_PIX, GPU_LINK_PIX, 0}, "PIX"},
        {{GPU_LINK_PXB, GPU_LINK_PXB, 0}, "PXB"},
        {{GPU_LINK_PHB, GPU_LINK_PHB, 0}, "PHB"},
        {{GPU_LINK_NODE, GPU_LINK_NODE, 0}, "NODE"},
        {{GPU_LINK_SYS, GPU_LINK_SYS, 0}, "SYS"},
        {{GPU_LINK_UNKNOWN, GPU_LINK_UNKNOWN, 0}, "N/A"},
    };
    char buf[16];
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
        assert_string_equal(gpu_link_name(&cases[i].link, buf), cases[i].name);
    assert_string_equal(gpu_link_name(NULL, buf), "N/A");
}

static void test_topology_levels(void **state)
{
    assert_int_equal(gpu_topology_level(NVML_SUCCESS, NVML_TOPOLOGY_INTERNAL), GPU_LINK_PIX);
    assert_int_equal(gpu_topology_level(NVML_SUCCESS, NVML_TOPOLOGY_SINGLE), GPU_LINK_PIX);
    assert_int_equal(gpu_topology_level(NVML_SUCCESS, NVML_TOPOLOGY_MULTIPLE), GPU_LINK_PXB);
    assert_int_equal(gpu_topology_level(NVML_SUCCESS, NVML_TOPOLOGY_HOSTBRIDGE), GPU_LINK_PHB);
    assert_int_equal(gpu_topology_level(NVML_SUCCESS, NVML_TOPOLOGY_NODE), GPU_LINK_NODE);
    assert_int_equal(gpu_topology_level(NVML_SUCCESS, NVML_TOPOLOGY_SYSTEM), GPU_LINK_SYS);
    assert_int_equal(gpu_topology_level(NVML_ERROR_GPU_IS_LOST, NVML_TOPOLOGY_NODE),
                     GPU_LINK_UNKNOWN);
}

static void test_architecture_names(void **state)
{
    assert_string_equal(gpu_architecture_name(NVML_DEVICE_ARCH_HOPPER), "Hopper");
    assert_string_equal(gpu_architecture_name(NVML_DEVICE_ARCH_AMPERE), "Ampere");
    assert_string_equal(gpu_architecture_name(NVML_DEVICE_ARCH_ADA), "Ada Lovelace");
    assert_string_equal(gpu_architecture_name(NVML_DEVICE_ARCH_TURING), "Turing");
    assert_string_equal(gpu_architecture_name(NVML_DEVICE_ARCH_UNKNOWN), "Unknown");
    assert_string_equal(gpu_architecture_name(77), "Unknown");
}

static void test_bus_id_to_sysfs(void **state)
{
    char out[GPU_BUS_ID_MAX];
    gpu_bus_id_to_sysfs("00000000:3B:00.0", out);
    assert_string_equal(out, "0000:3b:00.0");
    gpu_bus_id_to_sysfs("00000001:DB:1F.7", out);
    assert_string_equal(out, "0001:db:1f.7");
    gpu_bus_id_to_sysfs("0000:AF:00.0", out); /* already 4 digits: only lower-cased */
    assert_string_equal(out, "0000:af:00.0");
}

static void make_numa_file(const char *root, const char *bdf, const char *text)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s", root, bdf);
    assert_int_equal(file_mkdir_p(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/sys/bus/pci/devices/%s/numa_node", root, bdf);
    test_write_file(path, text);
}

static void test_sysfs_numa_node(void **state)
{
    char *root = test_tmpdir();
    make_numa_file(root, "0000:3b:00.0", "1\n");
    make_numa_file(root, "0000:5e:00.0", "-1\n");
    make_numa_file(root, "0000:af:00.0", "banana\n");
    make_numa_file(root, "0000:d8:00.0", "0");

    assert_int_equal(gpu_sysfs_numa_node(root, "0000:3b:00.0"), 1);
    assert_int_equal(gpu_sysfs_numa_node(root, "0000:5e:00.0"), -1);
    assert_int_equal(gpu_sysfs_numa_node(root, "0000:af:00.0"), -1);
    assert_int_equal(gpu_sysfs_numa_node(root, "0000:d8:00.0"), 0);
    assert_int_equal(gpu_sysfs_numa_node(root, "0000:00:01.0"), -1); /* no such device */
    assert_int_equal(gpu_sysfs_numa_node(root, ""), -1);
    assert_int_equal(gpu_sysfs_numa_node(root, "../../../etc"), -1);
    test_rmtree(root);
    free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mig_profile_names),  cmocka_unit_test(test_mig_profile_name_errors),
        cmocka_unit_test(test_link_names),         cmocka_unit_test(test_topology_levels),
        cmocka_unit_test(test_architecture_names), cmocka_unit_test(test_bus_id_to_sysfs),
        cmocka_unit_test(test_sysfs_numa_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
