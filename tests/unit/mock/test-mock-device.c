/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mock's life cycle and plain device queries: reference-counted init, the errors before init
 * and without a profile, NVIDIA's error texts, identity, memory (v1 and v2), PCI, handle lookup by
 * UUID and bus id, buffer sizes, bad arguments, and a GPU lost from the start.
 */
#include "mock-test.h"

static void test_uninitialized(void **state)
{
    unsigned n;
    char buf[96];
    nvmlDevice_t d;

    (void)state;
    assert_int_equal(N.nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(N.nvmlSystemGetDriverVersion(buf, sizeof(buf)), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(N.nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
}

static void test_no_profile(void **state)
{
    unsigned n;

    (void)state;
    unsetenv("MOCK_NVML_PROFILE");
    assert_int_equal(N.nvmlInit_v2(), NVML_ERROR_DRIVER_NOT_LOADED);
    assert_int_equal(N.nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
    assert_null(N.profile_error());
}

static void test_refcount(void **state)
{
    unsigned n;
    nvmlDevice_t d;

    (void)state;
    init_profile("dgx-h100");
    assert_int_equal(N.nvmlInitWithFlags(NVML_INIT_FLAG_NO_GPUS), NVML_SUCCESS);
    d = dev(0);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
    /* Still initialised once: the handle is still good. */
    assert_int_equal(N.nvmlDeviceGetIndex(d, &n), NVML_SUCCESS);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetIndex(d, &n), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(N.nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
}

static void test_error_strings(void **state)
{
    static const struct {
        nvmlReturn_t r;
        const char *text;
    } cases[] = {
        {NVML_SUCCESS, "Success"},
        {NVML_ERROR_UNINITIALIZED, "Uninitialized"},
        {NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument"},
        {NVML_ERROR_NOT_SUPPORTED, "Not Supported"},
        {NVML_ERROR_NO_PERMISSION, "Insufficient Permissions"},
        {NVML_ERROR_NOT_FOUND, "Not Found"},
        {NVML_ERROR_INSUFFICIENT_SIZE, "Insufficient Size"},
        {NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded"},
        {NVML_ERROR_TIMEOUT, "Timeout"},
        {NVML_ERROR_FUNCTION_NOT_FOUND, "Function Not Found"},
        {NVML_ERROR_GPU_IS_LOST, "GPU is lost"},
        {NVML_ERROR_UNKNOWN, "Unknown Error"},
        {(nvmlReturn_t)12345, "Unknown Error"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_string_equal(N.nvmlErrorString(cases[i].r), cases[i].text);
}

static void test_system(void **state)
{
    char buf[80];
    int cuda;

    (void)state;
    init_profile("dgx-h100");
    assert_int_equal(N.nvmlSystemGetDriverVersion(buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "550.54.15");
    assert_int_equal(N.nvmlSystemGetNVMLVersion(buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "12.550.54.15");
    assert_int_equal(N.nvmlSystemGetCudaDriverVersion_v2(&cuda), NVML_SUCCESS);
    assert_int_equal(cuda, 12040);
    assert_int_equal(N.nvmlSystemGetDriverVersion(buf, 9), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(N.nvmlSystemGetDriverVersion(buf, 10), NVML_SUCCESS);
    assert_int_equal(N.nvmlSystemGetDriverVersion(NULL, 80), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlSystemGetCudaDriverVersion_v2(NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_identity_h100(void **state)
{
    char buf[96];
    unsigned n, u;
    int major, minor;
    nvmlBrandType_t brand;
    nvmlDeviceArchitecture_t arch;
    nvmlEnableState_t pm;
    nvmlDevice_t d;

    (void)state;
    init_profile("dgx-h100");
    assert_int_equal(N.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    assert_int_equal(n, 8);
    d = dev(3);
    assert_int_equal(N.nvmlDeviceGetUUID(d, buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "GPU-a26430da-2b38-42ea-81f5-3a5231980d4e");
    assert_int_equal(N.nvmlDeviceGetUUID(d, buf, 40), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(N.nvmlDeviceGetUUID(d, buf, 41), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetName(d, buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "NVIDIA H100 80GB HBM3");
    assert_int_equal(N.nvmlDeviceGetIndex(d, &u), NVML_SUCCESS);
    assert_int_equal(u, 3);
    assert_int_equal(N.nvmlDeviceGetMinorNumber(d, &u), NVML_SUCCESS);
    assert_int_equal(u, 3);
    assert_int_equal(N.nvmlDeviceGetSerial(d, buf, 30), NVML_SUCCESS);
    assert_string_equal(buf, "1652823050104");
    assert_int_equal(N.nvmlDeviceGetVbiosVersion(d, buf, 32), NVML_SUCCESS);
    assert_string_equal(buf, "96.00.99.00.01");
    assert_int_equal(N.nvmlDeviceGetBrand(d, &brand), NVML_SUCCESS);
    assert_int_equal(brand, NVML_BRAND_NVIDIA);
    assert_int_equal(N.nvmlDeviceGetArchitecture(d, &arch), NVML_SUCCESS);
    assert_int_equal(arch, NVML_DEVICE_ARCH_HOPPER);
    assert_int_equal(N.nvmlDeviceGetCudaComputeCapability(d, &major, &minor), NVML_SUCCESS);
    assert_int_equal(major, 9);
    assert_int_equal(minor, 0);
    assert_int_equal(N.nvmlDeviceGetPersistenceMode(d, &pm), NVML_SUCCESS);
    assert_int_equal(pm, NVML_FEATURE_ENABLED);
    assert_int_equal(N.nvmlDeviceGetNumaNodeId(d, &u), NVML_SUCCESS);
    assert_int_equal(u, 0);
    assert_int_equal(N.nvmlDeviceGetNumaNodeId(dev(4), &u), NVML_SUCCESS);
    assert_int_equal(u, 1);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_distinct_uuids(void **state)
{
    static const char *const profiles[] = {"dgx-h100", "a100-mig", "pcie-t4", "lost-gpu"};
    char seen[64][96];
    size_t n_seen = 0;

    (void)state;
    for (size_t p = 0; p < 4; p++) {
        unsigned n;

        init_profile(profiles[p]);
        assert_int_equal(N.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
        for (unsigned i = 0; i < n; i++) {
            nvmlDevice_t d;

            if (N.nvmlDeviceGetHandleByIndex_v2(i, &d) != NVML_SUCCESS)
                continue;
            assert_int_equal(N.nvmlDeviceGetUUID(d, seen[n_seen], 96), NVML_SUCCESS);
            assert_int_equal(strlen(seen[n_seen]), 40);
            assert_memory_equal(seen[n_seen], "GPU-", 4);
            for (size_t k = 0; k < n_seen; k++)
                assert_string_not_equal(seen[k], seen[n_seen]);
            n_seen++;
        }
        assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
    }
    assert_int_equal(n_seen, 8 + 4 + 4 + 7);
}

static void test_memory(void **state)
{
    nvmlMemory_t m;
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    nvmlDevice_t d;

    (void)state;
    init_profile("dgx-h100");
    d = dev(0);
    assert_int_equal(N.nvmlDeviceGetMemoryInfo(d, &m), NVML_SUCCESS);
    assert_true(m.total == 81559ULL << 20);
    assert_true(m.used == 527ULL << 20);
    assert_true(m.free == m.total - m.used);
    assert_int_equal(N.nvmlDeviceGetMemoryInfo_v2(d, &m2), NVML_SUCCESS);
    assert_true(m2.total == 81559ULL << 20);
    assert_true(m2.reserved == 527ULL << 20);
    assert_true(m2.used == 0);
    assert_true(m2.free == m2.total - m2.reserved);
    m2.version = 0x01000028;
    assert_int_equal(N.nvmlDeviceGetMemoryInfo_v2(d, &m2), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    assert_int_equal(N.nvmlDeviceGetMemoryInfo(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetMemoryInfo_v2(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_pci(void **state)
{
    static const struct {
        const char *profile;
        unsigned index;
        const char *bus_id, *legacy;
        unsigned device_id;
    } cases[] = {
        {"dgx-h100", 0, "00000000:18:00.0", "0000:18:00.0", 0x233010DE},
        {"dgx-h100", 7, "00000000:DB:00.0", "0000:DB:00.0", 0x233010DE},
        {"a100-mig", 1, "00000000:0F:00.0", "0000:0F:00.0", 0x20B010DE},
        {"pcie-t4", 2, "00000000:AF:00.0", "0000:AF:00.0", 0x1EB810DE},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        nvmlPciInfo_t pci;
        nvmlDevice_t d, same;

        init_profile(cases[i].profile);
        d = dev(cases[i].index);
        assert_int_equal(N.nvmlDeviceGetPciInfo_v3(d, &pci), NVML_SUCCESS);
        assert_string_equal(pci.busId, cases[i].bus_id);
        assert_string_equal(pci.busIdLegacy, cases[i].legacy);
        assert_int_equal(pci.pciDeviceId, cases[i].device_id);
        assert_int_equal(pci.domain, 0);
        assert_int_equal(N.nvmlDeviceGetHandleByPciBusId_v2(cases[i].bus_id, &same), NVML_SUCCESS);
        assert_ptr_equal(same, d);
        assert_int_equal(N.nvmlDeviceGetHandleByPciBusId_v2(cases[i].legacy, &same), NVML_SUCCESS);
        assert_ptr_equal(same, d);
        assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
    }
}

static void test_lookup(void **state)
{
    nvmlDevice_t d;

    (void)state;
    init_profile("dgx-h100");
    assert_int_equal(N.nvmlDeviceGetHandleByUUID("GPU-262a61d8-bd8b-475c-a4d0-14075f47dc64", &d),
                     NVML_SUCCESS);
    assert_ptr_equal(d, dev(7));
    assert_int_equal(N.nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000", &d),
                     NVML_ERROR_NOT_FOUND);
    assert_int_equal(N.nvmlDeviceGetHandleByUUID(NULL, &d), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetHandleByPciBusId_v2("0000:2a:00.0", &d), NVML_SUCCESS);
    assert_ptr_equal(d, dev(1));
    assert_int_equal(N.nvmlDeviceGetHandleByPciBusId_v2("0000:2b:00.0", &d), NVML_ERROR_NOT_FOUND);
    assert_int_equal(N.nvmlDeviceGetHandleByPciBusId_v2("not a bus id", &d),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(8, &d), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(0, NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_bad_handles(void **state)
{
    char buf[96];
    unsigned u;
    int fake[8] = {0};
    nvmlDevice_t d;

    (void)state;
    init_profile("dgx-h100");
    d = dev(0);
    assert_int_equal(N.nvmlDeviceGetUUID(NULL, buf, sizeof(buf)), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetUUID((nvmlDevice_t)fake, buf, sizeof(buf)),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetUUID((nvmlDevice_t)((char *)d + 1), buf, sizeof(buf)),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetUUID(d, NULL, sizeof(buf)), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetIndex(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
    /* A handle of a finished init is stale. */
    init_profile("dgx-h100");
    assert_int_equal(N.nvmlDeviceGetIndex((nvmlDevice_t)fake, &u), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_t4_not_supported(void **state)
{
    unsigned cur, pend, count;
    nvmlEnableState_t active;
    nvmlDevice_t d;
    int major, minor;

    (void)state;
    init_profile("pcie-t4");
    d = dev(0);
    assert_int_equal(N.nvmlDeviceGetMigMode(d, &cur, &pend), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlDeviceGetMaxMigDeviceCount(d, &count), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlDeviceGetNvLinkState(d, 0, &active), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlDeviceGetCudaComputeCapability(d, &major, &minor), NVML_SUCCESS);
    assert_int_equal(major * 10 + minor, 75);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_lost_from_start(void **state)
{
    unsigned n;
    nvmlDevice_t d;

    (void)state;
    init_profile("lost-gpu");
    assert_int_equal(N.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    assert_int_equal(n, 8);
    assert_int_equal(N.nvmlDeviceGetHandleByIndex_v2(5, &d), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(N.nvmlDeviceGetHandleByUUID("GPU-74d8b5b5-c59a-433a-80a6-3ce438d4fb99", &d),
                     NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(N.nvmlDeviceGetHandleByPciBusId_v2("0000:ab:00.0", &d),
                     NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(N.nvmlDeviceGetIndex(dev(4), &n), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetIndex(dev(6), &n), NVML_SUCCESS);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uninitialized),
        cmocka_unit_test(test_no_profile),
        cmocka_unit_test(test_refcount),
        cmocka_unit_test(test_error_strings),
        cmocka_unit_test(test_system),
        cmocka_unit_test(test_identity_h100),
        cmocka_unit_test(test_distinct_uuids),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_pci),
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_bad_handles),
        cmocka_unit_test(test_t4_not_supported),
        cmocka_unit_test(test_lost_from_start),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
