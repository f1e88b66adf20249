/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MIG in the mock: the GPU instance profile tables of A100-SXM4-40GB and H100 80GB (each profile's
 * name recomputed with NVIDIA's naming rule from its memory and the parent's total memory), the MIG
 * devices of a100-mig.yaml with their GPU and compute instances and attributes, and the error codes
 * of MIG calls on GPUs without MIG, with MIG disabled, and on MIG handles.
 */
#include <math.h>

#include "mock-test.h"

/* G of "<G>g" by GPU instance profile index, and the suffix (NVIDIA's rule, docs §5.6). */
static unsigned gi_slices(unsigned index, const char **suffix)
{
    static const unsigned g[] = {1, 2, 3, 4, 7, 8, 6, 1, 2, 1, 1, 2, 4, 1, 2, 1, 2};

    *suffix = "";
    if (index == 7 || index == 8)
        *suffix = "+me";
    return g[index];
}

static unsigned ci_slices(unsigned index)
{
    static const unsigned c[] = {1, 2, 3, 4, 7, 8, 6, 1, 7};

    return c[index];
}

/* The compute instance profile index spanning a whole GPU instance of profile gi_index. */
static unsigned full_ci(unsigned gi_index)
{
    const char *suffix;
    unsigned g = gi_slices(gi_index, &suffix);

    for (unsigned j = 0; j < 5; j++)
        if (ci_slices(j) == g)
            return j;
    fail();
    return 0;
}

static void mig_name(unsigned gi_index, unsigned ci_index, unsigned long long mem_mib,
                     unsigned long long parent_bytes, char *buf, size_t len)
{
    const char *suffix;
    unsigned g = gi_slices(gi_index, &suffix), c = ci_slices(ci_index);
    double frac = ceil((double)mem_mib * 1048576.0 / (double)parent_bytes * 8.0) / 8.0;
    double gb = round(frac * ceil((double)parent_bytes / 1073741824.0));

    if (c == g)
        snprintf(buf, len, "%ug.%.0fgb%s", g, gb, suffix);
    else
        snprintf(buf, len, "%uc.%ug.%.0fgb%s", c, g, gb, suffix);
}

static void check_table(const char *profile, const char *const names[], unsigned long long mib[])
{
    nvmlMemory_t mem;
    nvmlDevice_t d;
    size_t k = 0;

    init_profile(profile);
    d = dev(0);
    assert_int_equal(N.nvmlDeviceGetMemoryInfo(d, &mem), NVML_SUCCESS);
    for (unsigned i = 0; i < NVML_GPU_INSTANCE_PROFILE_COUNT; i++) {
        nvmlGpuInstanceProfileInfo_t info;
        char name[32];
        nvmlReturn_t r = N.nvmlDeviceGetGpuInstanceProfileInfo(d, i, &info);

        if (r == NVML_ERROR_NOT_SUPPORTED)
            continue;
        assert_int_equal(r, NVML_SUCCESS);
        /* The GPU instance profile alone: its full-size compute instance (C == G). */
        mig_name(i, full_ci(i), info.memorySizeMB, mem.total, name, sizeof(name));
        assert_int_equal(info.sliceCount, ci_slices(full_ci(i)));
        assert_string_equal(name, names[k]);
        assert_true(info.memorySizeMB == mib[k]);
        k++;
    }
    assert_non_null(names[k - 1]);
    assert_null(names[k]);
    {
        nvmlGpuInstanceProfileInfo_t info;

        assert_int_equal(
            N.nvmlDeviceGetGpuInstanceProfileInfo(d, NVML_GPU_INSTANCE_PROFILE_COUNT, &info),
            NVML_ERROR_INVALID_ARGUMENT);
    }
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_table_a100(void **state)
{
    /* In profile index order: 0 1 2 3 4 7 9. */
    static const char *const names[] = {"1g.5gb",  "2g.10gb",   "3g.20gb", "4g.20gb",
                                        "7g.40gb", "1g.5gb+me", "1g.10gb", NULL};
    unsigned long long mib[] = {4864, 9984, 19968, 19968, 40192, 4864, 9984};

    (void)state;
    check_table("a100-mig", names, mib);
}

static void test_table_h100(void **state)
{
    static const char *const names[] = {"1g.10gb", "2g.20gb",    "3g.40gb", "4g.40gb",
                                        "7g.80gb", "1g.10gb+me", "1g.20gb", NULL};
    unsigned long long mib[] = {9856, 19968, 40192, 40192, 80384, 9856, 19968};

    (void)state;
    check_table("dgx-h100", names, mib);
}

/* Every MIG device of a100-mig.yaml, named from NVML data alone as gpuplane does. */
static void test_mig_devices(void **state)
{
    static const char *const want[2][4] = {
        {"3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"},
        {"3g.20gb", "1c.3g.20gb", "2c.3g.20gb", NULL},
    };

    (void)state;
    init_profile("a100-mig");
    for (unsigned g = 0; g < 2; g++) {
        nvmlDevice_t parent = dev(g);
        nvmlMemory_t pmem;
        unsigned cur, pend, max;

        assert_int_equal(N.nvmlDeviceGetMigMode(parent, &cur, &pend), NVML_SUCCESS);
        assert_int_equal(cur, NVML_DEVICE_MIG_ENABLE);
        assert_int_equal(pend, NVML_DEVICE_MIG_ENABLE);
        assert_int_equal(N.nvmlDeviceGetMaxMigDeviceCount(parent, &max), NVML_SUCCESS);
        assert_int_equal(max, 7);
        assert_int_equal(N.nvmlDeviceGetMemoryInfo(parent, &pmem), NVML_SUCCESS);
        for (unsigned i = 0; i < max; i++) {
            nvmlDevice_t mig, back;
            nvmlGpuInstance_t gi;
            nvmlComputeInstance_t ci;
            nvmlGpuInstanceInfo_t gii;
            nvmlComputeInstanceInfo_t cii;
            nvmlDeviceAttributes_t attr;
            unsigned gi_id, ci_id, is_mig, gidx = 99, cidx = 99;
            char name[32], full[96], uuid[96];
            nvmlReturn_t r = N.nvmlDeviceGetMigDeviceHandleByIndex(parent, i, &mig);

            if (i >= 4 || (g == 1 && i == 3)) {
                assert_int_equal(r, NVML_ERROR_NOT_FOUND);
                continue;
            }
            assert_int_equal(r, NVML_SUCCESS);
            assert_int_equal(N.nvmlDeviceIsMigDeviceHandle(mig, &is_mig), NVML_SUCCESS);
            assert_int_equal(is_mig, 1);
            assert_int_equal(N.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig, &back),
                             NVML_SUCCESS);
            assert_ptr_equal(back, parent);
            assert_int_equal(N.nvmlDeviceGetGpuInstanceId(mig, &gi_id), NVML_SUCCESS);
            assert_int_equal(N.nvmlDeviceGetComputeInstanceId(mig, &ci_id), NVML_SUCCESS);
            assert_int_equal(N.nvmlDeviceGetAttributes_v2(mig, &attr), NVML_SUCCESS);
            assert_int_equal(N.nvmlDeviceGetGpuInstanceById(parent, gi_id, &gi), NVML_SUCCESS);
            assert_int_equal(N.nvmlGpuInstanceGetInfo(gi, &gii), NVML_SUCCESS);
            assert_ptr_equal(gii.device, parent);
            assert_int_equal(gii.id, gi_id);
            assert_int_equal(N.nvmlGpuInstanceGetComputeInstanceById(gi, ci_id, &ci), NVML_SUCCESS);
            assert_int_equal(N.nvmlComputeInstanceGetInfo_v2(ci, &cii), NVML_SUCCESS);
            assert_ptr_equal(cii.gpuInstance, gi);
            assert_int_equal(cii.id, ci_id);
            for (unsigned p = 0; p < NVML_GPU_INSTANCE_PROFILE_COUNT; p++) {
                nvmlGpuInstanceProfileInfo_t pi;

                if (N.nvmlDeviceGetGpuInstanceProfileInfo(parent, p, &pi) == NVML_SUCCESS &&
                    pi.id == gii.profileId)
                    gidx = p;
            }
            for (unsigned p = 0; p < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; p++) {
                nvmlComputeInstanceProfileInfo_t pi;

                if (N.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, p, 0, &pi) == NVML_SUCCESS &&
                    pi.id == cii.profileId)
                    cidx = p;
            }
            assert_int_not_equal(gidx, 99);
            assert_int_not_equal(cidx, 99);
            mig_name(gidx, cidx, attr.memorySizeMB, pmem.total, name, sizeof(name));
            assert_string_equal(name, want[g][i]);
            assert_int_equal(N.nvmlDeviceGetName(mig, full, sizeof(full)), NVML_SUCCESS);
            assert_non_null(strstr(full, " MIG "));
            assert_string_equal(strstr(full, " MIG ") + 5, want[g][i]);
            assert_int_equal(N.nvmlDeviceGetUUID(mig, uuid, sizeof(uuid)), NVML_SUCCESS);
            assert_memory_equal(uuid, "MIG-", 4);
            assert_int_equal(strlen(uuid), 40);
            assert_int_equal(N.nvmlDeviceGetHandleByUUID(uuid, &back), NVML_SUCCESS);
            assert_ptr_equal(back, mig);
            assert_int_equal(attr.computeInstanceSliceCount, ci_slices(cidx));
            assert_int_equal(attr.multiprocessorCount, 14 * attr.computeInstanceSliceCount);
        }
    }
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_gpu0_layout(void **state)
{
    static const struct {
        unsigned id, profile_id, start, size;
    } want[] = {{2, 9, 4, 4}, {3, 14, 0, 2}, {9, 19, 2, 1}, {10, 19, 3, 1}};
    nvmlGpuInstance_t gi;
    nvmlDevice_t d;

    (void)state;
    init_profile("a100-mig");
    d = dev(0);
    for (size_t i = 0; i < 4; i++) {
        nvmlGpuInstanceInfo_t info;

        assert_int_equal(N.nvmlDeviceGetGpuInstanceById(d, want[i].id, &gi), NVML_SUCCESS);
        assert_int_equal(N.nvmlGpuInstanceGetInfo(gi, &info), NVML_SUCCESS);
        assert_int_equal(info.profileId, want[i].profile_id);
        assert_int_equal(info.placement.start, want[i].start);
        assert_int_equal(info.placement.size, want[i].size);
    }
    assert_int_equal(N.nvmlDeviceGetGpuInstanceById(d, 0, &gi), NVML_ERROR_NOT_FOUND);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_ci_profiles(void **state)
{
    nvmlComputeInstanceProfileInfo_t pi;
    nvmlComputeInstance_t ci;
    nvmlGpuInstance_t gi;

    (void)state;
    init_profile("a100-mig");
    assert_int_equal(N.nvmlDeviceGetGpuInstanceById(dev(0), 2, &gi), NVML_SUCCESS); /* 3g */
    assert_int_equal(N.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 2, 0, &pi), NVML_SUCCESS);
    assert_int_equal(pi.sliceCount, 3);
    assert_int_equal(pi.multiprocessorCount, 42);
    assert_int_equal(N.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 0, 0, &pi), NVML_SUCCESS);
    assert_int_equal(pi.instanceCount, 3);
    assert_int_equal(N.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 3, 0, &pi),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                         gi, NVML_COMPUTE_INSTANCE_PROFILE_COUNT, 0, &pi),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 0, 1, &pi),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlGpuInstanceGetComputeInstanceById(gi, 1, &ci), NVML_ERROR_NOT_FOUND);
    assert_int_equal(N.nvmlGpuInstanceGetInfo((nvmlGpuInstance_t)&pi, NULL),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlComputeInstanceGetInfo_v2((nvmlComputeInstance_t)&pi, NULL),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_mig_errors(void **state)
{
    unsigned cur, pend, max, id;
    nvmlDevice_t d2, mig, out;
    nvmlDeviceAttributes_t attr;
    nvmlGpuInstance_t gi;
    nvmlGpuInstanceProfileInfo_t pi;
    int major, minor;
    unsigned long long types;
    nvmlEventSet_t set;

    (void)state;
    init_profile("a100-mig");
    /* Capable, disabled. */
    d2 = dev(2);
    assert_int_equal(N.nvmlDeviceGetMigMode(d2, &cur, &pend), NVML_SUCCESS);
    assert_int_equal(cur, NVML_DEVICE_MIG_DISABLE);
    assert_int_equal(N.nvmlDeviceGetMaxMigDeviceCount(d2, &max), NVML_SUCCESS);
    assert_int_equal(max, 0);
    assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(d2, 0, &mig),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetGpuInstanceProfileInfo(d2, 0, &pi), NVML_SUCCESS);
    /* Enabled: index past the maximum, full-GPU calls. */
    assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(dev(0), 7, &mig),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetAttributes_v2(dev(0), &attr), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlDeviceGetGpuInstanceId(dev(0), &id), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(dev(0), &out),
                     NVML_ERROR_INVALID_ARGUMENT);
    /* Calls a MIG handle does not answer. */
    assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(dev(0), 0, &mig), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetCudaComputeCapability(mig, &major, &minor),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlDeviceGetMigMode(mig, &cur, &pend), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(mig, 0, &out),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetGpuInstanceById(mig, 2, &gi), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlDeviceGetIndex(mig, &id), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlDeviceGetSupportedEventTypes(mig, &types), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlEventSetCreate(&set), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceRegisterEvents(mig, nvmlEventTypeXidCriticalError, set),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlEventSetFree(set), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetMigMode(dev(0), NULL, &pend), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_mig_memory(void **state)
{
    nvmlMemory_t m;
    nvmlDevice_t mig;

    (void)state;
    init_profile("a100-mig");
    assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(dev(0), 2, &mig), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetMemoryInfo(mig, &m), NVML_SUCCESS);
    assert_true(m.total == 4864ULL << 20);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_a100),  cmocka_unit_test(test_table_h100),
        cmocka_unit_test(test_mig_devices), cmocka_unit_test(test_gpu0_layout),
        cmocka_unit_test(test_ci_profiles), cmocka_unit_test(test_mig_errors),
        cmocka_unit_test(test_mig_memory),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
