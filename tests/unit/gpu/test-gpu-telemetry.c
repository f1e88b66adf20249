/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Telemetry through the mock library and the bundled profiles: every metric of an H100 in its unit
 * and in the range the profile and the mock's documented wander allow; counters that never step
 * back; what a T4 lacks learnt once, reported once and never asked again; MIG devices answering
 * memory (and GPM on Hopper) only; lost GPUs failing with -ENODEV (from the start, and at run time
 * until they recover); values changed by event lines. Waits for time to pass poll with a deadline.
 */
#include <fcntl.h>
#include <math.h>
#include <time.h>

#include "gpu-internal.h"
#include "gpu-test.h"

#define BIT(m) (UINT64_C(1) << (m))
#define ALL (BIT(GPU_METRIC_COUNT) - 1)
#define GPM_BITS                                                                                   \
    (BIT(GPU_METRIC_GR_ENGINE_ACTIVE) | BIT(GPU_METRIC_TENSOR_ACTIVE) | BIT(GPU_METRIC_DRAM_ACTIVE))
#define REMAP_BITS                                                                                 \
    (BIT(GPU_METRIC_UNCORRECTABLE_REMAPPED_ROWS) | BIT(GPU_METRIC_CORRECTABLE_REMAPPED_ROWS) |     \
     BIT(GPU_METRIC_ROW_REMAP_FAILURE))
#define FB_BITS (BIT(GPU_METRIC_FB_FREE) | BIT(GPU_METRIC_FB_USED) | BIT(GPU_METRIC_FB_RESERVED))
#define DEADLINE_S 20.0 /* generous: valgrind runs these tests too */

struct ctx {
    char *dir;
    char events[4200];
    struct gpu_nvml *nvml;
    struct gpu_inventory *inv;
    struct gpu_telemetry *t;
};

static struct ctx *setup_profile(const char *profile)
{
    struct ctx *c = calloc(1, sizeof(*c));
    assert_non_null(c);
    c->dir = test_tmpdir();
    snprintf(c->events, sizeof(c->events), "%s/events.jsonl", c->dir);
    test_write_file(c->events, "");
    assert_int_equal(setenv("MOCK_NVML_EVENTS", c->events, 1), 0);
    c->nvml = test_open(profile);
    c->inv = test_read(c->nvml, NULL);
    assert_int_equal(gpu_telemetry_new(c->nvml, c->inv, &c->t), 0);
    return c;
}

static void teardown_ctx(struct ctx *c)
{
    gpu_telemetry_free(c->t);
    gpu_inventory_free(c->inv);
    gpu_nvml_close(c->nvml);
    assert_int_equal(unsetenv("MOCK_NVML_EVENTS"), 0);
    test_rmtree(c->dir);
    free(c->dir);
    free(c);
}

static void append(const struct ctx *c, const char *line)
{
    int fd = open(c->events, O_WRONLY | O_APPEND | O_CLOEXEC);
    assert_true(fd >= 0);
    size_t len = strlen(line);
    assert_int_equal(write(fd, line, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

static struct gpu_sample read_ok(struct ctx *c, size_t gpu, int mig, uint64_t want,
                                 uint64_t *unsupported)
{
    struct gpu_sample s;
    uint64_t u = 0;
    int r = gpu_telemetry_read(c->t, gpu, mig, want, &s, &u);
    if (r != 0)
        fail_msg("gpu_telemetry_read(%zu, %d): %d", gpu, mig, r);
    if (unsupported)
        *unsupported = u;
    return s;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void assert_between(const struct gpu_sample *s, enum gpu_metric m, double lo, double hi)
{
    if (!(s->have & BIT(m)))
        fail_msg("metric %d missing", (int)m);
    if (s->v[m] < lo || s->v[m] > hi)
        fail_msg("metric %d = %f, not in [%f, %f]", (int)m, s->v[m], lo, hi);
}

static bool whole(double v)
{
    return v == floor(v);
}

/* The profile's telemetry of dgx-h100 GPU 0, within the documented wander. */
static void test_h100_every_metric(void **state)
{
    struct ctx *c = setup_profile("dgx-h100");
    uint64_t unsupported = 0;

    struct gpu_sample s = read_ok(c, 0, -1, ALL, &unsupported);
    /* Not a vGPU guest; GPM needs a second sample before it has values. */
    assert_int_equal(unsupported, BIT(GPU_METRIC_VGPU_LICENSE_STATUS));
    assert_int_equal(s.have, ALL & ~BIT(GPU_METRIC_VGPU_LICENSE_STATUS) & ~GPM_BITS);
    assert_between(&s, GPU_METRIC_SM_CLOCK, 1755, 1755);
    assert_between(&s, GPU_METRIC_MEM_CLOCK, 2619, 2619);
    assert_between(&s, GPU_METRIC_MEMORY_TEMP, 50, 54);
    assert_between(&s, GPU_METRIC_GPU_TEMP, 46, 50);
    assert_between(&s, GPU_METRIC_POWER_USAGE, 420 * 0.95, 420 * 1.05);
    assert_true(whole(s.v[GPU_METRIC_POWER_USAGE] * 1000)); /* mW / 1000 */
    assert_between(&s, GPU_METRIC_TOTAL_ENERGY, 0, 1e12);
    assert_between(&s, GPU_METRIC_PCIE_REPLAY, 0, 0);
    assert_between(&s, GPU_METRIC_GPU_UTIL, 40, 50);
    assert_between(&s, GPU_METRIC_MEM_COPY_UTIL, 25, 35);
    assert_between(&s, GPU_METRIC_ENC_UTIL, 0, 5);
    assert_between(&s, GPU_METRIC_DEC_UTIL, 0, 5);
    /* 81559 MiB, 527 reserved by the driver, nothing allocated. */
    assert_between(&s, GPU_METRIC_FB_FREE, 81032, 81032);
    assert_between(&s, GPU_METRIC_FB_USED, 0, 0);
    assert_between(&s, GPU_METRIC_FB_RESERVED, 527, 527);
    assert_between(&s, GPU_METRIC_NVLINK_BANDWIDTH_TOTAL, 0, 1e15);
    assert_between(&s, GPU_METRIC_UNCORRECTABLE_REMAPPED_ROWS, 0, 0);
    assert_between(&s, GPU_METRIC_CORRECTABLE_REMAPPED_ROWS, 0, 0);
    assert_between(&s, GPU_METRIC_ROW_REMAP_FAILURE, 0, 0);
    /* KB/s * 1024 = B/s. */
    assert_between(&s, GPU_METRIC_PCIE_TX_BYTES, 250000 * 0.9 * 1024, 250000 * 1.1 * 1024);
    assert_between(&s, GPU_METRIC_PCIE_RX_BYTES, 900000 * 0.9 * 1024, 900000 * 1.1 * 1024);
    assert_true(whole(s.v[GPU_METRIC_PCIE_TX_BYTES] / 1024));
    assert_between(&s, GPU_METRIC_CLOCK_EVENT_REASONS, 0, 0); /* busy: no reason */

    /* The second read has GPM, as ratios. */
    s = read_ok(c, 0, -1, ALL, &unsupported);
    assert_int_equal(unsupported, 0);
    assert_int_equal(s.have, ALL & ~BIT(GPU_METRIC_VGPU_LICENSE_STATUS));
    assert_between(&s, GPU_METRIC_GR_ENGINE_ACTIVE, 0.40, 0.50);
    assert_between(&s, GPU_METRIC_TENSOR_ACTIVE, 0.20, 0.30);
    assert_between(&s, GPU_METRIC_DRAM_ACTIVE, 0.25, 0.35);

    /* GPU 7 is idle and has remapped a row. */
    s = read_ok(c, 7, -1, ALL, NULL);
    assert_between(&s, GPU_METRIC_GPU_UTIL, 0, 5);
    assert_between(&s, GPU_METRIC_POWER_USAGE, 72.5 * 0.95, 72.5 * 1.05);
    assert_between(&s, GPU_METRIC_SM_CLOCK, 345, 345);
    assert_between(&s, GPU_METRIC_CORRECTABLE_REMAPPED_ROWS, 1, 1);
    assert_between(&s, GPU_METRIC_NVLINK_BANDWIDTH_TOTAL, 0, 0);  /* no traffic */
    assert_between(&s, GPU_METRIC_CLOCK_EVENT_REASONS, 0x1, 0x1); /* GpuIdle */
    teardown_ctx(c);
}

/* Only what was asked for is read and returned. */
static void test_want_subset(void **state)
{
    struct ctx *c = setup_profile("dgx-h100");
    uint64_t want = BIT(GPU_METRIC_POWER_USAGE) | BIT(GPU_METRIC_FB_USED);
    struct gpu_sample s = read_ok(c, 1, -1, want, NULL);
    assert_int_equal(s.have, want);
    teardown_ctx(c);
}

/* Energy, NVLink data and replays never decrease, and grow as time passes. */
static void test_counters_monotonic(void **state)
{
    struct ctx *c = setup_profile("dgx-h100");
    const uint64_t want = BIT(GPU_METRIC_TOTAL_ENERGY) | BIT(GPU_METRIC_NVLINK_BANDWIDTH_TOTAL) |
                          BIT(GPU_METRIC_PCIE_REPLAY);
    struct gpu_sample first = read_ok(c, 3, -1, want, NULL);
    struct gpu_sample prev = first, s;
    double deadline = now_s() + DEADLINE_S;

    assert_int_equal(first.have, want);
    assert_true(whole(first.v[GPU_METRIC_NVLINK_BANDWIDTH_TOTAL]));
    for (;;) {
        s = read_ok(c, 3, -1, want, NULL);
        for (enum gpu_metric m = 0; m < GPU_METRIC_COUNT; m++)
            if (want & BIT(m))
                assert_true(s.v[m] >= prev.v[m]);
        if (s.v[GPU_METRIC_TOTAL_ENERGY] > first.v[GPU_METRIC_TOTAL_ENERGY] &&
            s.v[GPU_METRIC_NVLINK_BANDWIDTH_TOTAL] > first.v[GPU_METRIC_NVLINK_BANDWIDTH_TOTAL])
            break;
        if (now_s() > deadline)
            fail_msg("counters did not grow");
        prev = s;
    }
    teardown_ctx(c);
}

/* Counts the field-value calls, to see that an unsupported metric is not asked again. */
static nvmlReturn_t (*real_field_values)(nvmlDevice_t, int, nvmlFieldValue_t *);
static unsigned field_calls;

static nvmlReturn_t counting_field_values(nvmlDevice_t device, int n, nvmlFieldValue_t *values)
{
    field_calls++;
    return real_field_values(device, n, values);
}

static void test_t4_unsupported_learnt_once(void **state)
{
    struct ctx *c = setup_profile("pcie-t4");
    uint64_t unsupported = 0;

    real_field_values = c->nvml->fn.nvmlDeviceGetFieldValues;
    c->nvml->fn.nvmlDeviceGetFieldValues = counting_field_values;

    struct gpu_sample s = read_ok(c, 0, -1, ALL, &unsupported);
    /* No HBM, no NVLink, no vGPU; remapped rows are Ampere+, GPM Hopper+. */
    assert_int_equal(unsupported, BIT(GPU_METRIC_MEMORY_TEMP) |
                                      BIT(GPU_METRIC_NVLINK_BANDWIDTH_TOTAL) |
                                      BIT(GPU_METRIC_VGPU_LICENSE_STATUS) | REMAP_BITS | GPM_BITS);
    assert_int_equal(s.have, ALL & ~unsupported);
    assert_int_equal(field_calls, 1);
    assert_between(&s, GPU_METRIC_POWER_USAGE, 32.5 * 0.95, 32.5 * 1.05);
    assert_between(&s, GPU_METRIC_DEC_UTIL, 15, 25);
    assert_between(&s, GPU_METRIC_FB_FREE, 15360 - 257, 15360 - 257);

    /* Reported once, never asked again: a read of memory temperature alone calls nothing. */
    s = read_ok(c, 0, -1, ALL, &unsupported);
    assert_int_equal(unsupported, 0);
    assert_int_equal(field_calls, 2); /* the replay counter still is read */
    s = read_ok(c, 0, -1, BIT(GPU_METRIC_MEMORY_TEMP), &unsupported);
    assert_int_equal(unsupported, 0);
    assert_int_equal(s.have, 0);
    assert_int_equal(field_calls, 2);

    /* Another T4 learns for itself. */
    s = read_ok(c, 1, -1, BIT(GPU_METRIC_MEMORY_TEMP), &unsupported);
    assert_int_equal(unsupported, BIT(GPU_METRIC_MEMORY_TEMP));
    assert_int_equal(field_calls, 3);
    c->nvml->fn.nvmlDeviceGetFieldValues = real_field_values;
    teardown_ctx(c);
}

/* MIG devices answer memory (their GPU instance's); the rest is learnt unsupported. */
static void test_a100_mig_memory(void **state)
{
    struct ctx *c = setup_profile("a100-mig");
    uint64_t unsupported = 0;
    const struct gpu_device *gpu0 = &c->inv->devices[0];

    assert_true(gpu0->n_migs >= 1);
    for (size_t i = 0; i < gpu0->n_migs; i++) {
        struct gpu_sample s = read_ok(c, 0, (int)i, ALL, &unsupported);
        assert_int_equal(s.have, FB_BITS);
        assert_int_equal(unsupported, ALL & ~FB_BITS);
        assert_between(&s, GPU_METRIC_FB_FREE, (double)(gpu0->migs[i].memory_bytes >> 20),
                       (double)(gpu0->migs[i].memory_bytes >> 20));
        assert_between(&s, GPU_METRIC_FB_USED, 0, 0);
        assert_between(&s, GPU_METRIC_FB_RESERVED, 0, 0);
    }
    /* 3g.20gb first: 19968 MiB. */
    struct gpu_sample s = read_ok(c, 0, 0, FB_BITS, &unsupported);
    assert_between(&s, GPU_METRIC_FB_FREE, 19968, 19968);
    assert_int_equal(unsupported, 0);

    /* The MIG-enabled GPU itself has no utilisation; a GPU with MIG off has. */
    s = read_ok(c, 0, -1, ALL, &unsupported);
    assert_true(unsupported & BIT(GPU_METRIC_GPU_UTIL));
    assert_true(s.have & BIT(GPU_METRIC_POWER_USAGE));
    assert_true(s.have & BIT(GPU_METRIC_MEMORY_TEMP));
    s = read_ok(c, 2, -1, ALL, &unsupported);
    assert_between(&s, GPU_METRIC_GPU_UTIL, 55, 65);
    assert_true(unsupported & GPM_BITS); /* Ampere */

    assert_int_equal(gpu_telemetry_read(c->t, 0, (int)gpu0->n_migs, ALL, &s, NULL), -EINVAL);
    assert_int_equal(gpu_telemetry_read(c->t, c->inv->n_devices, -1, ALL, &s, NULL), -EINVAL);
    teardown_ctx(c);
}

static void test_lost_gpu(void **state)
{
    struct ctx *c = setup_profile("lost-gpu");
    struct gpu_sample s;
    uint64_t unsupported = 0xdead;

    assert_int_equal(gpu_telemetry_read(c->t, 5, -1, ALL, &s, &unsupported), -ENODEV);
    assert_int_equal(unsupported, 0xdead); /* not written on failure */
    s = read_ok(c, 4, -1, ALL, NULL);
    assert_true(s.have & BIT(GPU_METRIC_POWER_USAGE));
    teardown_ctx(c);
}

static void test_lost_at_run_time(void **state)
{
    struct ctx *c = setup_profile("dgx-h100");
    struct gpu_sample s = read_ok(c, 3, -1, ALL, NULL);

    append(c, "{\"gpu\": 3, \"type\": \"lost\"}\n");
    assert_int_equal(gpu_telemetry_read(c->t, 3, -1, ALL, &s, NULL), -ENODEV);
    assert_int_equal(gpu_telemetry_read(c->t, 3, -1, BIT(GPU_METRIC_FB_FREE), &s, NULL), -ENODEV);
    s = read_ok(c, 2, -1, ALL, NULL);
    append(c, "{\"gpu\": 3, \"type\": \"recover\"}\n");
    s = read_ok(c, 3, -1, ALL, NULL);
    assert_true(s.have & BIT(GPU_METRIC_GPU_UTIL));
    teardown_ctx(c);
}

static void test_events_change_values(void **state)
{
    struct ctx *c = setup_profile("dgx-h100");
    const uint64_t energy = BIT(GPU_METRIC_TOTAL_ENERGY);
    struct gpu_sample before = read_ok(c, 2, -1, ALL, NULL);

    append(c, "{\"gpu\": 2, \"type\": \"telemetry\", \"gpuUtil\": 95, \"powerWatts\": 650}\n");
    struct gpu_sample s = read_ok(c, 2, -1, ALL, NULL);
    assert_between(&s, GPU_METRIC_GPU_UTIL, 90, 100);
    assert_between(&s, GPU_METRIC_POWER_USAGE, 650 * 0.95, 650 * 1.05);
    assert_true(s.v[GPU_METRIC_TOTAL_ENERGY] >= before.v[GPU_METRIC_TOTAL_ENERGY]);
    assert_between(&s, GPU_METRIC_MEM_COPY_UTIL, 25, 35); /* untouched */

    /* Without wander the values are exact. */
    append(c, "{\"gpu\": \"GPU-45b05de2-bfa2-4c0f-a483-cf2ceb04c086\", \"type\": \"telemetry\", "
              "\"wander\": false, \"temperature\": 83, \"memoryUsed\": 40000}\n");
    s = read_ok(c, 2, -1, ALL, NULL);
    assert_between(&s, GPU_METRIC_GPU_UTIL, 95, 95);
    assert_between(&s, GPU_METRIC_POWER_USAGE, 650, 650);
    assert_between(&s, GPU_METRIC_GPU_TEMP, 83, 83);
    assert_between(&s, GPU_METRIC_FB_USED, 40000, 40000);
    assert_between(&s, GPU_METRIC_FB_FREE, 81559 - 527 - 40000, 81559 - 527 - 40000);

    append(c, "{\"gpu\": 1, \"type\": \"remap\", \"correctable\": 2, \"uncorrectable\": 1, "
              "\"failure\": true}\n");
    append(c, "{\"gpu\": 1, \"type\": \"pcie-replay\", \"count\": 3}\n");
    append(c, "{\"gpu\": 1, \"type\": \"pcie-replay\"}\n");
    append(c, "{\"gpu\": 1, \"type\": \"remap\", \"bogus\": 1}\n"); /* skipped, with a message */
    append(c, "{\"gpu\": 1, \"type\": \"telemetry\", \"clocksEventReasons\": 36}\n");
    append(c, "{\"gpu\": 1, \"type\": \"telemetry\", \"clocksEventReasons\": 512}\n"); /* skipped */
    s = read_ok(c, 1, -1, ALL, NULL);
    assert_between(&s, GPU_METRIC_CORRECTABLE_REMAPPED_ROWS, 2, 2);
    assert_between(&s, GPU_METRIC_UNCORRECTABLE_REMAPPED_ROWS, 1, 1);
    assert_between(&s, GPU_METRIC_ROW_REMAP_FAILURE, 1, 1);
    assert_between(&s, GPU_METRIC_PCIE_REPLAY, 4, 4);
    assert_between(&s, GPU_METRIC_CLOCK_EVENT_REASONS, 0x24, 0x24);

    /* Energy keeps growing at the new power. */
    double deadline = now_s() + DEADLINE_S;
    struct gpu_sample a = read_ok(c, 2, -1, energy, NULL), b;
    do {
        b = read_ok(c, 2, -1, energy, NULL);
        assert_true(b.v[GPU_METRIC_TOTAL_ENERGY] >= a.v[GPU_METRIC_TOTAL_ENERGY]);
        if (now_s() > deadline)
            fail_msg("energy did not grow");
    } while (b.v[GPU_METRIC_TOTAL_ENERGY] == a.v[GPU_METRIC_TOTAL_ENERGY]);
    teardown_ctx(c);
}

/* A profile of one's own: exact values without wander, a vGPU licence, a link that is down. */
static const char EXACT_PROFILE[] =
    "gpus:\n"
    "  - busId: \"0000:3b:00.0\"\n"
    "    name: \"NVIDIA H100 80GB HBM3\"\n"
    "    memory: 81559\n"
    "    memoryUsed: 1000\n"
    "    computeCapability: \"9.0\"\n"
    "    architecture: hopper\n"
    "    nvlink: {switch: 4, down: [1]}\n"
    "    telemetry: {wander: false, powerWatts: 100.25, gpuUtil: 12, vgpuLicense: licensed,\n"
    "                nvlinkKiBPerSecond: 1000, memoryTemperature: 40, pcieReplays: 7}\n";

static void test_exact_profile(void **state)
{
    char *dir = test_tmpdir();
    char path[4200];
    snprintf(path, sizeof(path), "%s/exact.yaml", dir);
    test_write_file(path, EXACT_PROFILE);
    struct ctx *c = setup_profile(path);
    uint64_t unsupported = 0;

    struct gpu_sample s = read_ok(c, 0, -1, ALL, &unsupported);
    assert_int_equal(unsupported, 0);
    assert_between(&s, GPU_METRIC_POWER_USAGE, 100.25, 100.25);
    assert_between(&s, GPU_METRIC_GPU_UTIL, 12, 12);
    assert_between(&s, GPU_METRIC_VGPU_LICENSE_STATUS, 1, 1);
    assert_between(&s, GPU_METRIC_MEMORY_TEMP, 40, 40);
    assert_between(&s, GPU_METRIC_PCIE_REPLAY, 7, 7);
    assert_between(&s, GPU_METRIC_FB_USED, 1000, 1000);
    assert_between(&s, GPU_METRIC_FB_RESERVED, 0, 0);
    /* Three active links (link 1 is down), TX and RX alike: six equal counters. */
    double deadline = now_s() + DEADLINE_S;
    do {
        s = read_ok(c, 0, -1, BIT(GPU_METRIC_NVLINK_BANDWIDTH_TOTAL), NULL);
        assert_int_equal(fmod(s.v[GPU_METRIC_NVLINK_BANDWIDTH_TOTAL], 6), 0);
        if (now_s() > deadline)
            fail_msg("NVLink counters did not grow");
    } while (s.v[GPU_METRIC_NVLINK_BANDWIDTH_TOTAL] == 0);
    teardown_ctx(c);
    test_rmtree(dir);
    free(dir);
}

/* GPM of MIG devices: their GPU instance sampled through the parent (Hopper). */
static const char H100_MIG_PROFILE[] =
    "gpus:\n"
    "  - busId: \"0000:3b:00.0\"\n"
    "    name: \"NVIDIA H100 80GB HBM3\"\n"
    "    memory: 81559\n"
    "    computeCapability: \"9.0\"\n"
    "    architecture: hopper\n"
    "    mig:\n"
    "      capable: true\n"
    "      enabled: true\n"
    "      instances:\n"
    "        - {profile: 3g.40gb, computeInstances: [{profile: 1c}, {profile: 2c}]}\n"
    "        - {profile: 1g.10gb}\n"
    "    telemetry: {wander: false, gpuUtil: 50, tensorUtil: 20, memUtil: 30}\n";

static void test_mig_gpm(void **state)
{
    char *dir = test_tmpdir();
    char path[4200];
    snprintf(path, sizeof(path), "%s/h100-mig.yaml", dir);
    test_write_file(path, H100_MIG_PROFILE);
    struct ctx *c = setup_profile(path);
    uint64_t unsupported = 0;

    assert_int_equal(c->inv->devices[0].n_migs, 3);
    for (int m = 0; m < 3; m++) {
        struct gpu_sample s = read_ok(c, 0, m, ALL, &unsupported);
        assert_int_equal(s.have, FB_BITS);
        assert_int_equal(unsupported, ALL & ~FB_BITS & ~GPM_BITS);
        s = read_ok(c, 0, m, ALL, &unsupported);
        assert_int_equal(unsupported, 0);
        assert_int_equal(s.have, FB_BITS | GPM_BITS);
        assert_between(&s, GPU_METRIC_GR_ENGINE_ACTIVE, 0.5, 0.5);
        assert_between(&s, GPU_METRIC_TENSOR_ACTIVE, 0.2, 0.2);
        assert_between(&s, GPU_METRIC_DRAM_ACTIVE, 0.3, 0.3);
    }
    /* The GPU itself, in MIG mode, samples too. */
    struct gpu_sample s = read_ok(c, 0, -1, GPM_BITS, NULL);
    s = read_ok(c, 0, -1, GPM_BITS, NULL);
    assert_between(&s, GPU_METRIC_GR_ENGINE_ACTIVE, 0.5, 0.5);

    /* Lost: MIG devices fail too, and come back. */
    append(c, "{\"gpu\": 0, \"type\": \"lost\"}\n");
    assert_int_equal(gpu_telemetry_read(c->t, 0, 1, ALL, &s, NULL), -ENODEV);
    append(c, "{\"gpu\": 0, \"type\": \"recover\"}\n");
    s = read_ok(c, 0, 1, ALL, NULL);
    assert_int_equal(s.have, FB_BITS); /* a new GPM baseline */
    teardown_ctx(c);
    test_rmtree(dir);
    free(dir);
}

/* Profiles with bad telemetry do not load; the reason names the key. */
static void test_bad_profile(void **state)
{
    static const char *const bad[][2] = {
        {"telemetry: {gpuUtil: 150}", "gpuUtil"},
        {"telemetry: {bogus: 1}", "bogus"},
        {"telemetry: {vgpuLicense: maybe}", "vgpuLicense"},
        {"telemetry: {remappedRows: {correctable: -1}}", "correctable"},
        {"telemetry: {clocksEventReasons: 1024}", "clocksEventReasons"},
    };
    char *dir = test_tmpdir();
    char path[4200], text[1024];

    snprintf(path, sizeof(path), "%s/bad.yaml", dir);
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        struct gpu_nvml *nvml = NULL;
        struct diag d;
        snprintf(text, sizeof(text),
                 "gpus:\n  - {busId: \"0000:3b:00.0\", name: \"Tesla T4\", memory: 15360,\n"
                 "     computeCapability: \"7.5\", architecture: turing, %s}\n",
                 bad[i][0]);
        test_write_file(path, text);
        test_use_profile(path);
        diag_init(&d);
        assert_true(gpu_nvml_open(MOCK_NVML_LIB, &d, &nvml) < 0);
        if (!strstr(d.msg, bad[i][1]) || !strstr(d.msg, "bad.yaml:"))
            fail_msg("%s: %s", bad[i][0], d.msg);
    }
    test_rmtree(dir);
    free(dir);
}

/* A driver without the newer calls: the older ones stand in, what has no stand-in is unsupported.
 */
static void test_older_driver(void **state)
{
    struct ctx *c = setup_profile("dgx-h100");
    uint64_t unsupported = 0;

    c->nvml->fn.nvmlDeviceGetMemoryInfo_v2 = NULL;
    c->nvml->fn.nvmlDeviceGetTemperatureV = NULL;
    c->nvml->fn.nvmlGpmQueryDeviceSupport = NULL;
    c->nvml->fn.nvmlDeviceGetCurrentClocksEventReasons = NULL;
    struct gpu_sample s = read_ok(c, 0, -1, ALL, &unsupported);
    assert_true(s.have & BIT(GPU_METRIC_CLOCK_EVENT_REASONS)); /* under its older name */
    assert_int_equal(unsupported,
                     BIT(GPU_METRIC_FB_RESERVED) | BIT(GPU_METRIC_VGPU_LICENSE_STATUS) | GPM_BITS);
    /* v1's used includes what the driver reserves. */
    assert_between(&s, GPU_METRIC_FB_USED, 527, 527);
    assert_between(&s, GPU_METRIC_FB_FREE, 81032, 81032);
    assert_between(&s, GPU_METRIC_GPU_TEMP, 46, 50);
    teardown_ctx(c);
}

static void test_is_integer(void **state)
{
    for (enum gpu_metric m = 0; m < GPU_METRIC_COUNT; m++) {
        bool fractional = m == GPU_METRIC_POWER_USAGE || m == GPU_METRIC_GR_ENGINE_ACTIVE ||
                          m == GPU_METRIC_TENSOR_ACTIVE || m == GPU_METRIC_DRAM_ACTIVE;
        assert_int_equal(gpu_metric_is_integer(m), !fractional);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_h100_every_metric),
        cmocka_unit_test(test_want_subset),
        cmocka_unit_test(test_counters_monotonic),
        cmocka_unit_test(test_t4_unsupported_learnt_once),
        cmocka_unit_test(test_a100_mig_memory),
        cmocka_unit_test(test_lost_gpu),
        cmocka_unit_test(test_lost_at_run_time),
        cmocka_unit_test(test_events_change_values),
        cmocka_unit_test(test_exact_profile),
        cmocka_unit_test(test_mig_gpm),
        cmocka_unit_test(test_bad_profile),
        cmocka_unit_test(test_older_driver),
        cmocka_unit_test(test_is_integer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
