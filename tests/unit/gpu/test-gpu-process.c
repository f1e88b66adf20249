/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Running processes through the mock library: the compute processes of a GPU with their memory
 * (unknown memory kept as such), through the _v3 call and, on an older driver without it, _v2 and
 * the unversioned form; a MIG device's own processes; the newest utilisation sample per process,
 * none on an idle GPU (NVML's NOT_FOUND) and none supported on a MIG device; a list that grows past
 * the first answer's size; a lost GPU failing until it recovers.
 */
#include <fcntl.h>

#include "gpu-internal.h"
#include "gpu-test.h"

static const char PROFILE[] =
    "defaults: {name: \"NVIDIA A100-SXM4-40GB\", architecture: ampere, computeCapability: \"8.0\", "
    "memory: 40960, mig: {capable: true}}\n"
    "gpus:\n"
    "  - busId: \"0000:07:00.0\"\n"
    "    processes: [{pid: 100, memory: 1024, smUtil: 30}, {pid: 200, smUtil: 5}]\n"
    "  - busId: \"0000:0f:00.0\"\n"
    "    mig:\n"
    "      capable: true\n"
    "      enabled: true\n"
    "      instances: [{profile: 3g.20gb, placement: 4, id: 2, computeInstances: [{profile: 1c}, "
    "{profile: 2c}]}]\n"
    "    processes: [{pid: 300, memory: 2048, gi: 2, ci: 1}]\n"
    "  - busId: \"0000:47:00.0\"\n";

struct ctx {
    char *dir;
    char events[4200];
    struct gpu_nvml *nvml;
    struct gpu_inventory *inv;
    struct gpu_telemetry *t;
};

static int setup(void **state)
{
    struct ctx *c = calloc(1, sizeof(*c));
    char profile[4200];
    assert_non_null(c);
    c->dir = test_tmpdir();
    snprintf(c->events, sizeof(c->events), "%s/events.jsonl", c->dir);
    snprintf(profile, sizeof(profile), "%s/node.yaml", c->dir);
    test_write_file(c->events, "");
    test_write_file(profile, PROFILE);
    assert_int_equal(setenv("MOCK_NVML_EVENTS", c->events, 1), 0);
    c->nvml = test_open(profile);
    c->inv = test_read(c->nvml, NULL);
    assert_int_equal(gpu_telemetry_new(c->nvml, c->inv, &c->t), 0);
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    struct ctx *c = *state;
    gpu_telemetry_free(c->t);
    gpu_inventory_free(c->inv);
    gpu_nvml_close(c->nvml);
    unsetenv("MOCK_NVML_EVENTS");
    test_rmtree(c->dir);
    free(c->dir);
    free(c);
    return 0;
}

static void append(const struct ctx *c, const char *line)
{
    int fd = open(c->events, O_WRONLY | O_APPEND | O_CLOEXEC);
    assert_true(fd >= 0);
    size_t len = strlen(line);
    assert_int_equal(write(fd, line, len), (ssize_t)len);
    assert_int_equal(write(fd, "\n", 1), 1);
    assert_int_equal(close(fd), 0);
}

static void check_gpu0(struct ctx *c)
{
    struct gpu_process *p = NULL;
    size_t n = 0;
    assert_int_equal(gpu_processes_read(c->t, 0, -1, &p, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(p[0].pid, 100);
    assert_true(p[0].memory_bytes == 1024ull << 20);
    assert_int_equal(p[1].pid, 200);
    assert_true(p[1].memory_bytes == GPU_PROCESS_MEMORY_UNKNOWN);
    free(p);
}

static void test_processes(void **state)
{
    struct ctx *c = *state;
    struct gpu_process *p = NULL;
    size_t n = 1;

    check_gpu0(c);
    /* An idle GPU: none, and no buffer. */
    assert_int_equal(gpu_processes_read(c->t, 2, -1, &p, &n), 0);
    assert_int_equal(n, 0);
    assert_null(p);
    /* An inventory index or MIG device that does not exist. */
    assert_int_equal(gpu_processes_read(c->t, 9, -1, &p, &n), -EINVAL);
    assert_int_equal(gpu_processes_read(c->t, 0, 0, &p, &n), -EINVAL);
}

static void test_older_drivers(void **state)
{
    struct ctx *c = *state;
    struct gpu_nvml_fns saved = c->nvml->fn;

    c->nvml->fn.nvmlDeviceGetComputeRunningProcesses_v3 = NULL;
    check_gpu0(c);
    c->nvml->fn.nvmlDeviceGetComputeRunningProcesses_v2 = NULL;
    check_gpu0(c);
    c->nvml->fn.nvmlDeviceGetComputeRunningProcesses = NULL;
    struct gpu_process *p = NULL;
    size_t n = 0;
    assert_int_equal(gpu_processes_read(c->t, 0, -1, &p, &n), -EOPNOTSUPP);
    c->nvml->fn = saved;
}

static void test_mig(void **state)
{
    struct ctx *c = *state;
    const struct gpu_device *g = &c->inv->devices[1];
    struct gpu_process_util *u = NULL;
    size_t n = 0;

    assert_int_equal(g->n_migs, 2);
    for (size_t m = 0; m < g->n_migs; m++) {
        struct gpu_process *p = NULL;
        assert_int_equal(gpu_processes_read(c->t, 1, (int)m, &p, &n), 0);
        if (g->migs[m].ci_id == 1) {
            assert_int_equal(n, 1);
            assert_int_equal(p[0].pid, 300);
            assert_true(p[0].memory_bytes == 2048ull << 20);
        } else {
            assert_int_equal(n, 0);
        }
        free(p);
        assert_int_equal(gpu_process_utilization_read(c->t, 1, (int)m, 0, &u, &n), -EOPNOTSUPP);
    }
    /* The GPU in MIG mode keeps no samples either. */
    assert_int_equal(gpu_process_utilization_read(c->t, 1, -1, 0, &u, &n), -EOPNOTSUPP);
}

static void test_utilization(void **state)
{
    struct ctx *c = *state;
    struct gpu_process_util *u = NULL;
    size_t n = 0;

    assert_int_equal(gpu_process_utilization_read(c->t, 0, -1, 0, &u, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(u[0].pid, 100);
    assert_int_equal(u[0].sm_util, 30);
    assert_int_equal(u[1].pid, 200);
    assert_int_equal(u[1].sm_util, 5);
    uint64_t last = u[0].timestamp_us;
    free(u);
    /* Nothing newer than an hour from now; nothing on an idle GPU: empty, not an error. */
    assert_int_equal(gpu_process_utilization_read(c->t, 0, -1, last + 3600000000ull, &u, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(gpu_process_utilization_read(c->t, 2, -1, 0, &u, &n), 0);
    assert_int_equal(n, 0);
    assert_null(u);
}

static void test_many_and_lost(void **state)
{
    struct ctx *c = *state;
    struct gpu_process *p = NULL;
    struct gpu_process_util *u = NULL;
    char line[128];
    size_t n = 0;

    for (unsigned pid = 1000; pid < 1100; pid++) {
        snprintf(line, sizeof(line),
                 "{\"gpu\": 2, \"type\": \"process\", \"pid\": %u, \"memory\": 1, \"smUtil\": 1}",
                 pid);
        append(c, line);
    }
    assert_int_equal(gpu_processes_read(c->t, 2, -1, &p, &n), 0);
    assert_int_equal(n, 100);
    assert_int_equal(p[99].pid, 1099);
    free(p);
    assert_int_equal(gpu_process_utilization_read(c->t, 2, -1, 0, &u, &n), 0);
    assert_int_equal(n, 100);
    free(u);

    append(c, "{\"gpu\": 2, \"type\": \"lost\"}");
    assert_int_equal(gpu_processes_read(c->t, 2, -1, &p, &n), -ENODEV);
    assert_int_equal(gpu_process_utilization_read(c->t, 2, -1, 0, &u, &n), -ENODEV);
    append(c, "{\"gpu\": 2, \"type\": \"recover\"}");
    assert_int_equal(gpu_processes_read(c->t, 2, -1, &p, &n), 0);
    assert_int_equal(n, 100);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_older_drivers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mig, setup, teardown),
        cmocka_unit_test_setup_teardown(test_utilization, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_and_lost, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
