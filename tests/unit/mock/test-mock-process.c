/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Running processes in the mock: the profile's processes answered by the three forms of
 * nvmlDeviceGetComputeRunningProcesses with NVML's sizing protocol (INSUFFICIENT_SIZE and the count
 * needed, NULL pointers refused), a MIG GPU's processes on its compute instances (the GPU's handle
 * lists them all, a MIG device's only its own), memory info counting them, process utilisation
 * (samples only on full GPUs outside MIG mode, NOT_FOUND with none or none newer), process and
 * process-exit lines, bad profiles and bad lines, and a lost GPU.
 */
#include "mock-test.h"

#define MIB 1048576ull

static const char PROFILE[] =
    "defaults:\n"
    "  name: \"NVIDIA A100-SXM4-40GB\"\n"
    "  architecture: ampere\n"
    "  computeCapability: \"8.0\"\n"
    "  memory: 40960\n"
    "  mig: {capable: true}\n"
    "gpus:\n"
    "  - busId: \"0000:07:00.0\"\n"
    "    memoryUsed: 100\n"
    "    processes:\n"
    "      - {pid: 100, memory: 1024, smUtil: 30, memUtil: 10}\n"
    "      - {pid: 200, smUtil: 5}\n"
    "  - busId: \"0000:0f:00.0\"\n"
    "    mig:\n"
    "      capable: true\n"
    "      enabled: true\n"
    "      instances:\n"
    "        - {profile: 3g.20gb, placement: 4, id: 2, computeInstances: [{profile: 1c}, "
    "{profile: 2c}]}\n"
    "        - {profile: 1g.5gb, placement: 0, id: 7}\n"
    "    processes:\n"
    "      - {pid: 300, memory: 2048, gi: 2, ci: 1}\n"
    "      - {pid: 301, memory: 512, gi: 7}\n"
    "  - busId: \"0000:47:00.0\"\n";

static const char *events;

static void init(void)
{
    events = tmp_write("procs.jsonl", "");
    assert_int_equal(setenv("MOCK_NVML_EVENTS", events, 1), 0);
    assert_int_equal(setenv("MOCK_NVML_PROFILE", tmp_write("procs.yaml", PROFILE), 1), 0);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
}

static nvmlDevice_t mig_dev(unsigned gpu, unsigned index)
{
    nvmlDevice_t d = NULL;

    assert_int_equal(N.nvmlDeviceGetMigDeviceHandleByIndex(dev(gpu), index, &d), NVML_SUCCESS);
    return d;
}

static void test_sizing(void **state)
{
    nvmlProcessInfo_t infos[4];
    unsigned n = 0;

    (void)state;
    init();
    /* How many: NULL and 0, then a buffer too small. */
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(dev(0), &n, NULL),
                     NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 2);
    n = 1;
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(dev(0), &n, infos),
                     NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 2);
    n = 4;
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(dev(0), &n, infos), NVML_SUCCESS);
    assert_int_equal(n, 2);
    assert_int_equal(infos[0].pid, 100);
    assert_true(infos[0].usedGpuMemory == 1024 * MIB);
    assert_int_equal(infos[0].gpuInstanceId, NVML_EVENT_NO_INSTANCE);
    assert_int_equal(infos[0].computeInstanceId, NVML_EVENT_NO_INSTANCE);
    assert_int_equal(infos[1].pid, 200);
    assert_true(infos[1].usedGpuMemory == NVML_VALUE_NOT_AVAILABLE);
    /* Bad pointers. */
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(dev(0), NULL, infos),
                     NVML_ERROR_INVALID_ARGUMENT);
    n = 4;
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(dev(0), &n, NULL),
                     NVML_ERROR_INVALID_ARGUMENT);
    /* A GPU with nothing running: success, none. */
    n = 0;
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(dev(2), &n, NULL), NVML_SUCCESS);
    assert_int_equal(n, 0);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_older_forms(void **state)
{
    nvmlProcessInfo_t v2[2];
    nvmlProcessInfo_v1_t v1[3];
    unsigned n = 2;

    (void)state;
    init();
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v2(dev(0), &n, v2), NVML_SUCCESS);
    assert_int_equal(n, 2);
    assert_int_equal(v2[1].pid, 200);
    memset(v1, 0xAB, sizeof(v1));
    n = 3;
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses(dev(0), &n, v1), NVML_SUCCESS);
    assert_int_equal(n, 2);
    assert_int_equal(v1[0].pid, 100);
    assert_true(v1[0].usedGpuMemory == 1024 * MIB);
    assert_int_equal(v1[1].pid, 200);
    assert_int_equal(v1[2].pid, 0xABABABABu); /* 16-byte entries: the third is untouched */
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_mig(void **state)
{
    nvmlProcessInfo_t infos[4];
    nvmlMemory_t mem;
    unsigned n = 4, gi = 0, ci = 0;

    (void)state;
    init();
    /* The GPU's handle: every process with its instance. */
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(dev(1), &n, infos), NVML_SUCCESS);
    assert_int_equal(n, 2);
    assert_int_equal(infos[0].pid, 300);
    assert_int_equal(infos[0].gpuInstanceId, 2);
    assert_int_equal(infos[0].computeInstanceId, 1);
    assert_int_equal(infos[1].gpuInstanceId, 7);
    assert_int_equal(infos[1].computeInstanceId, 0);
    /* A MIG device's handle: its compute instance's only. */
    for (unsigned i = 0; i < 3; i++) {
        nvmlDevice_t m = mig_dev(1, i);
        assert_int_equal(N.nvmlDeviceGetGpuInstanceId(m, &gi), NVML_SUCCESS);
        assert_int_equal(N.nvmlDeviceGetComputeInstanceId(m, &ci), NVML_SUCCESS);
        n = 4;
        assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(m, &n, infos), NVML_SUCCESS);
        if (gi == 2 && ci == 1) {
            assert_int_equal(n, 1);
            assert_int_equal(infos[0].pid, 300);
        } else if (gi == 7) {
            assert_int_equal(n, 1);
            assert_int_equal(infos[0].pid, 301);
        } else {
            assert_int_equal(n, 0);
        }
        /* Memory is the GPU instance's: both compute instances of GI 2 see pid 300's. */
        assert_int_equal(N.nvmlDeviceGetMemoryInfo(m, &mem), NVML_SUCCESS);
        assert_true(mem.used == (gi == 2 ? 2048 * MIB : 512 * MIB));
    }
    /* No utilisation samples in MIG mode or on a MIG device. */
    n = 0;
    assert_int_equal(N.nvmlDeviceGetProcessUtilization(dev(1), NULL, &n, 0),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(N.nvmlDeviceGetProcessUtilization(mig_dev(1, 0), NULL, &n, 0),
                     NVML_ERROR_NOT_SUPPORTED);
    /* The full GPU's used memory: the profile's 100 MiB, or its processes' when more. */
    assert_int_equal(N.nvmlDeviceGetMemoryInfo(dev(0), &mem), NVML_SUCCESS);
    assert_true(mem.used == 1024 * MIB);
    assert_int_equal(N.nvmlDeviceGetMemoryInfo(dev(2), &mem), NVML_SUCCESS);
    assert_true(mem.used == 0);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_utilization(void **state)
{
    nvmlProcessUtilizationSample_t s[4];
    unsigned n = 0;

    (void)state;
    init();
    assert_int_equal(N.nvmlDeviceGetProcessUtilization(dev(0), NULL, &n, 0),
                     NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 2);
    n = 1;
    assert_int_equal(N.nvmlDeviceGetProcessUtilization(dev(0), s, &n, 0),
                     NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 2);
    n = 4;
    assert_int_equal(N.nvmlDeviceGetProcessUtilization(dev(0), s, &n, 0), NVML_SUCCESS);
    assert_int_equal(n, 2);
    assert_int_equal(s[0].pid, 100);
    assert_int_equal(s[0].smUtil, 30);
    assert_int_equal(s[0].memUtil, 10);
    assert_int_equal(s[1].pid, 200);
    assert_int_equal(s[1].smUtil, 5);
    assert_true(s[0].timeStamp > 0);
    /* Nothing newer than a time far ahead; nothing at all on an idle GPU. */
    n = 4;
    assert_int_equal(
        N.nvmlDeviceGetProcessUtilization(dev(0), s, &n, s[0].timeStamp + 3600000000ull),
        NVML_ERROR_NOT_FOUND);
    assert_int_equal(N.nvmlDeviceGetProcessUtilization(dev(2), s, &n, 0), NVML_ERROR_NOT_FOUND);
    assert_int_equal(N.nvmlDeviceGetProcessUtilization(dev(0), s, NULL, 0),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

/* The pids the GPU's handle lists, in order, as "p,p,...". */
static void pids(nvmlDevice_t d, char *buf, size_t size)
{
    nvmlProcessInfo_t infos[8];
    unsigned n = 8;
    size_t len = 0;

    buf[0] = '\0';
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(d, &n, infos), NVML_SUCCESS);
    for (unsigned i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%u", i ? "," : "", infos[i].pid);
}

static void test_lines(void **state)
{
    nvmlProcessUtilizationSample_t s[4];
    char mig_uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], got[128];
    unsigned n = 4;

    (void)state;
    init();
    tmp_append(events, "{\"gpu\": 0, \"type\": \"process\", \"pid\": 400, \"memory\": 10}");
    tmp_append(events, "{\"gpu\": 0, \"type\": \"process\", \"pid\": 100, \"smUtil\": 70}");
    tmp_append(events, "{\"gpu\": 0, \"type\": \"process-exit\", \"pid\": 200}");
    /* Bad lines change nothing. */
    tmp_append(events, "{\"gpu\": 0, \"type\": \"process-exit\", \"pid\": 999}");
    tmp_append(events, "{\"gpu\": 0, \"type\": \"process\", \"pid\": 5, \"gi\": 1}");
    tmp_append(events, "{\"gpu\": 0, \"type\": \"process\", \"pid\": 5, \"memory\": 99999}");
    tmp_append(events, "{\"gpu\": 0, \"type\": \"process\", \"pid\": 0}");
    tmp_append(events, "{\"gpu\": 0, \"type\": \"process\", \"pid\": 6, \"color\": 1}");
    tmp_append(events, "{\"gpu\": 1, \"type\": \"process\", \"pid\": 7}");
    pids(dev(0), got, sizeof(got));
    assert_string_equal(got, "100,400");
    assert_int_equal(N.nvmlDeviceGetProcessUtilization(dev(0), s, &n, 0), NVML_SUCCESS);
    assert_int_equal(n, 2);
    assert_int_equal(s[0].smUtil, 70);
    assert_int_equal(s[1].smUtil, 0);
    pids(dev(1), got, sizeof(got));
    assert_string_equal(got, "300,301");

    /* A MIG UUID names the compute instance. */
    nvmlDevice_t m = mig_dev(1, 0);
    unsigned gi = 0, ci = 0;
    assert_int_equal(N.nvmlDeviceGetUUID(m, mig_uuid, sizeof(mig_uuid)), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetGpuInstanceId(m, &gi), NVML_SUCCESS);
    assert_int_equal(N.nvmlDeviceGetComputeInstanceId(m, &ci), NVML_SUCCESS);
    char line[256];
    snprintf(line, sizeof(line), "{\"gpu\": \"%s\", \"type\": \"process\", \"pid\": 500}",
             mig_uuid);
    tmp_append(events, line);
    pids(m, got, sizeof(got));
    assert_true(strstr(got, "500") != NULL);
    pids(dev(1), got, sizeof(got));
    assert_string_equal(got, "300,301,500");
    /* A re-initialisation starts from the profile again. */
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(N.nvmlInit_v2(), NVML_SUCCESS);
    pids(dev(0), got, sizeof(got));
    assert_string_equal(got, "100,200");
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_lost(void **state)
{
    unsigned n = 0;

    (void)state;
    init();
    tmp_append(events, "{\"gpu\": 0, \"type\": \"lost\"}");
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(dev(0), &n, NULL),
                     NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(N.nvmlDeviceGetProcessUtilization(dev(0), NULL, &n, 0),
                     NVML_ERROR_GPU_IS_LOST);
    tmp_append(events, "{\"gpu\": 0, \"type\": \"recover\"}");
    assert_int_equal(N.nvmlDeviceGetComputeRunningProcesses_v3(dev(0), &n, NULL),
                     NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(N.nvmlShutdown(), NVML_SUCCESS);
}

static void test_bad_profiles(void **state)
{
    static const struct {
        const char *gpu; /* the GPU entry's extra keys */
        const char *what;
    } bad[] = {
        {"processes: [{pid: 1, gi: 2}]", "not in MIG mode"},
        {"processes: [{pid: 1}, {pid: 1}]", "pid 1 listed twice"},
        {"processes: [{memory: 1}]", "\"pid\""},
        {"processes: [{pid: 1, smUtil: 101}]", "\"smUtil\""},
        {"processes: [{pid: 1, name: x}]", "unknown key \"name\""},
        {"mig: {capable: true, enabled: true, instances: [{profile: 1g.5gb, id: 7}]}, "
         "processes: [{pid: 1}]",
         "name one of its compute instances"},
        {"mig: {capable: true, enabled: true, instances: [{profile: 1g.5gb, id: 7}]}, "
         "processes: [{pid: 1, gi: 7, ci: 3}]",
         "name one of its compute instances"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char yaml[1024], name[32];
        snprintf(yaml, sizeof(yaml),
                 "gpus:\n  - {busId: \"0000:07:00.0\", name: \"NVIDIA A100-SXM4-40GB\", memory: "
                 "40960, architecture: ampere, computeCapability: \"8.0\", %s}\n",
                 bad[i].gpu);
        snprintf(name, sizeof(name), "badproc%zu.yaml", i);
        assert_int_equal(setenv("MOCK_NVML_PROFILE", tmp_write(name, yaml), 1), 0);
        assert_int_equal(N.nvmlInit_v2(), NVML_ERROR_UNKNOWN);
        if (!N.profile_error() || !strstr(N.profile_error(), bad[i].what))
            fail_msg("case %zu: got \"%s\", want \"%s\"", i, N.profile_error(), bad[i].what);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizing),       cmocka_unit_test(test_older_forms),
        cmocka_unit_test(test_mig),          cmocka_unit_test(test_utilization),
        cmocka_unit_test(test_lines),        cmocka_unit_test(test_lost),
        cmocka_unit_test(test_bad_profiles),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
