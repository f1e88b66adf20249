/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Topology in the mock: PCIe common ancestors from PCIe switches and NUMA nodes (DGX H100, T4
 * server) and from an explicit override table, NVLink through NVSwitches (remote type SWITCH,
 * remote PCI the switch's) and direct GPU-to-GPU links (remote PCI the peer's), link bounds,
 * inactive links, and the same queries on MIG handles.
 */
#include "mock-test.h"

static nvmlGpuTopologyLevel_t level(unsigned a, unsigned b)
{
    nvmlGpuTopologyLevel_t l = (nvmlGpuTopologyLevel_t)-1;

    assert_int_equal(N.nvmlDeviceGetTopologyCommonAncestor(dev(a), dev(b), &l), NVML_SUCCESS);
    return l;
}

static void test_dgx_levels(void **state)
{
    (void)state;
    init_profile("dgx-h100");
    assert_int_equal(level(0, 0), NVML_TOPOLOGY_INTERNAL);
    assert_int_equal(level(0, 1), NVML_TOPOLOGY_SINGLE);
    assert_int_equal(level(1, 0), NVML_TOPOLOGY_SINGLE);
    assert_int_equal(level(6, 7), NVML_TOPOLOGY_SINGLE);
    assert_int_equal(level(0, 2), NVML_TOPOLOGY_NODE);
    assert_int_equal(level(5, 7), NVML_TOPOLOGY_NODE);
    assert_int_equal(level(0, 4), NVML_TOPOLOGY_SYSTEM);
    assert_int_equal(level(3, 4), NVML_TOPOLOGY_SYSTEM);
    assert_int_equal(N.nvmlDeviceGetTopologyCommonAncestor(dev(0), dev(1), NULL),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_t4_levels(void **state)
{
    (void)state;
    init_profile("pcie-t4");
    assert_int_equal(level(0, 1), NVML_TOPOLOGY_NODE);
    assert_int_equal(level(2, 3), NVML_TOPOLOGY_NODE);
    assert_int_equal(level(1, 2), NVML_TOPOLOGY_SYSTEM);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_nvswitch(void **state)
{
    static const char *const switches[] = {"00000000:05:00.0", "00000000:06:00.0",
                                           "00000000:07:00.0", "00000000:08:00.0"};
    unsigned per_switch[4] = {0};

    (void)state;
    init_profile("dgx-h100");
    for (unsigned g = 0; g < 8; g++) {
        nvmlDevice_t d = dev(g);
        unsigned active = 0;

        for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
            nvmlEnableState_t on;
            nvmlIntNvLinkDeviceType_t type;
            nvmlPciInfo_t pci;
            nvmlReturn_t r = N.nvmlDeviceGetNvLinkState(d, l, &on);

            if (l >= 18) {
                assert_int_equal(r, NVML_ERROR_NOT_SUPPORTED);
                continue;
            }
            assert_int_equal(r, NVML_SUCCESS);
            active += on == NVML_FEATURE_ENABLED;
            assert_int_equal(N.nvmlDeviceGetNvLinkRemoteDeviceType(d, l, &type), NVML_SUCCESS);
            assert_int_equal(type, NVML_NVLINK_DEVICE_TYPE_SWITCH);
            assert_int_equal(N.nvmlDeviceGetNvLinkRemotePciInfo_v2(d, l, &pci), NVML_SUCCESS);
            assert_int_equal(pci.pciDeviceId, 0x22A310DE);
            for (unsigned s = 0; s < 4; s++)
                if (strcmp(pci.busId, switches[s]) == 0 && g == 0)
                    per_switch[s]++;
        }
        assert_int_equal(active, 18);
        {
            nvmlEnableState_t on;

            assert_int_equal(N.nvmlDeviceGetNvLinkState(d, NVML_NVLINK_MAX_LINKS, &on),
                             NVML_ERROR_INVALID_ARGUMENT);
            assert_int_equal(N.nvmlDeviceGetNvLinkState(d, 0, NULL), NVML_ERROR_INVALID_ARGUMENT);
        }
    }
    /* 18 links over 4 switches: every switch gets some, all accounted for. */
    assert_int_equal(per_switch[0] + per_switch[1] + per_switch[2] + per_switch[3], 18);
    for (unsigned s = 0; s < 4; s++)
        assert_true(per_switch[s] >= 4);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static const char direct_profile[] =
    "topology:\n"
    "  - {gpus: [0, 2], level: hostbridge}\n"
    "defaults:\n"
    "  name: \"NVIDIA A100-SXM4-40GB\"\n"
    "  architecture: ampere\n"
    "  computeCapability: 8.0\n"
    "  memory: 40960\n"
    "  pciDeviceId: 0x20B010DE\n"
    "gpus:\n"
    "  - {busId: \"0000:07:00.0\", numa: 0, nvlink: {peers: {\"1\": 4, \"2\": 2}}}\n"
    "  - {busId: \"0000:0f:00.0\", numa: 0, nvlink: {peers: {\"0\": 4}, down: [3]}}\n"
    "  - {busId: \"0000:47:00.0\", numa: 1, nvlink: {peers: {\"0\": 2}}}\n";

static void test_direct_links(void **state)
{
    nvmlPciInfo_t pci;
    nvmlIntNvLinkDeviceType_t type;
    nvmlEnableState_t on;
    nvmlDevice_t d0;

    (void)state;
    setenv("MOCK_NVML_PROFILE", tmp_write("direct.yaml", direct_profile), 1);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    d0 = dev(0);
    for (unsigned l = 0; l < 6; l++) {
        assert_int_equal(N.nvmlDeviceGetNvLinkRemoteDeviceType(d0, l, &type), NVML_SUCCESS);
        assert_int_equal(type, NVML_NVLINK_DEVICE_TYPE_GPU);
        assert_int_equal(N.nvmlDeviceGetNvLinkRemotePciInfo_v2(d0, l, &pci), NVML_SUCCESS);
        assert_string_equal(pci.busId, l < 4 ? "00000000:0F:00.0" : "00000000:47:00.0");
        assert_int_equal(pci.pciDeviceId, 0x20B010DE);
    }
    assert_int_equal(N.nvmlDeviceGetNvLinkState(d0, 6, &on), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlDeviceGetNvLinkState(dev(1), 3, &on), NVML_SUCCESS);
    assert_int_equal(on, NVML_FEATURE_DISABLED);
    assert_int_equal(N.nvmlDeviceGetNvLinkState(dev(1), 2, &on), NVML_SUCCESS);
    assert_int_equal(on, NVML_FEATURE_ENABLED);
    assert_int_equal(N.nvmlDeviceGetNvLinkRemotePciInfo_v2(dev(2), 1, &pci), NVML_SUCCESS);
    assert_string_equal(pci.busId, "00000000:07:00.0");
    /* The override, both ways; the rest from NUMA. */
    assert_int_equal(level(0, 2), NVML_TOPOLOGY_HOSTBRIDGE);
    assert_int_equal(level(2, 0), NVML_TOPOLOGY_HOSTBRIDGE);
    assert_int_equal(level(1, 2), NVML_TOPOLOGY_SYSTEM);
    assert_int_equal(level(0, 1), NVML_TOPOLOGY_NODE);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_mig_handles(void **state)
{
    nvmlDevice_t mig;
    nvmlEnableState_t on;
    nvmlGpuTopologyLevel_t l;
    unsigned numa;

    (void)state;
    init_profile("a100-mig");
    assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(dev(0), 0, &mig), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetNvLinkState(mig, 0, &on), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlDeviceGetTopologyCommonAncestor(mig, dev(1), &l),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlDeviceGetNumaNodeId(mig, &numa), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlDeviceGetNvLinkState(dev(0), 11, &on), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetNvLinkState(dev(0), 12, &on), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dgx_levels),  cmocka_unit_test(test_t4_levels),
        cmocka_unit_test(test_nvswitch),    cmocka_unit_test(test_direct_links),
        cmocka_unit_test(test_mig_handles),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
