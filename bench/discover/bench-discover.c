/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Benchmark of one labelling pass of `gpuplane discover` after NVML is initialised: reading the
 * GPUs (identity, memory, MIG; no topology, as discover reads them) and computing every label, on
 * the mock nodes, per MIG strategy. Prints a Markdown table of p50/p99/max microseconds per pass
 * and for the label computation alone. Not a test: run on demand, results go to docs/benchmarks.md.
 *
 * Usage: bench-discover [passes per row] (default 2000). The mock NVML library is found beside the
 * build (../mock-nvml/) unless GPUPLANE_MOCK_LIB names it.
 */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "discover-internal.h"

#define MAX_PASSES 100000

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct_us(uint64_t *v, size_t n, double p)
{
    size_t i = (size_t)(p * (double)n + 0.999999);
    return (double)v[i ? (i > n ? n : i) - 1 : 0] / 1000.0;
}

static void use_built_mock(void)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (getenv("GPUPLANE_MOCK_LIB") || n <= 0)
        return;
    exe[n] = '\0';
    char lib[4200];
    snprintf(lib, sizeof(lib), "%s/../mock-nvml/libnvidia-ml.so.1", dirname(exe));
    setenv("GPUPLANE_MOCK_LIB", lib, 1);
}

/* One row: passes of read + label on profile with strategy mig. */
static int row(const char *profile, enum discover_mig mig, const char *mig_name, size_t passes)
{
    _cleanup_free_ char *lib = NULL;
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = NULL;
    struct diag d;
    diag_init(&d);
    uint64_t *whole = calloc(passes, sizeof(*whole)), *label = calloc(passes, sizeof(*label));
    int r = whole && label ? gpu_mock_select(profile, &d, &lib) : -ENOMEM;
    if (r >= 0)
        r = gpu_nvml_open(lib, &d, &nvml);
    size_t n_labels = 0, n_gpus = 0;
    for (size_t i = 0; r >= 0 && i < passes; i++) {
        struct gpu_inventory *inv = NULL;
        struct discover_labels l = {0};
        const struct gpu_read_options ropts = {.skip_topology = true};
        uint64_t t0 = now_ns();
        r = gpu_inventory_read(nvml, &ropts, &d, &inv);
        uint64_t t1 = now_ns();
        if (r >= 0) {
            const struct discover_input in = {
                .inv = inv, .mig = mig, .machine = "DGX H100", .timestamp = (int64_t)time(NULL)};
            r = discover_labels_compute(&in, &d, &l);
        }
        uint64_t t2 = now_ns();
        whole[i] = t2 - t0;
        label[i] = t2 - t1;
        n_labels = l.n;
        n_gpus = inv ? inv->n_devices : 0;
        discover_labels_release(&l);
        gpu_inventory_free(inv);
    }
    if (r < 0) {
        fprintf(stderr, "bench-discover: %s: %s\n", profile, d.msg[0] ? d.msg : strerror(-r));
        free(whole);
        free(label);
        return r;
    }
    qsort(whole, passes, sizeof(*whole), cmp_u64);
    qsort(label, passes, sizeof(*label), cmp_u64);
    printf("| %-9s | %-6s | %4zu | %6zu | %8.1f | %8.1f | %8.1f | %9.1f | %9.1f |\n", profile,
           mig_name, n_gpus, n_labels, pct_us(whole, passes, 0.5), pct_us(whole, passes, 0.99),
           pct_us(whole, passes, 1.0), pct_us(label, passes, 0.5), pct_us(label, passes, 0.99));
    free(whole);
    free(label);
    return 0;
}

int main(int argc, char **argv)
{
    size_t passes = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000;
    if (passes == 0 || passes > MAX_PASSES) {
        fprintf(stderr, "usage: bench-discover [passes 1..%d]\n", MAX_PASSES);
        return 2;
    }
    use_built_mock();
    printf("| profile   | MIG    | GPUs | labels | pass p50 µs | pass p99 µs | pass max µs | "
           "labels p50 µs | labels p99 µs |\n");
    printf("|-----------|--------|------|--------|----------|----------|----------|-----------|"
           "-----------|\n");
    int r = row("dgx-h100", DISCOVER_MIG_NONE, "none", passes);
    if (r >= 0)
        r = row("a100-mig", DISCOVER_MIG_SINGLE, "single", passes);
    if (r >= 0)
        r = row("a100-mig", DISCOVER_MIG_MIXED, "mixed", passes);
    if (r >= 0)
        r = row("pcie-t4", DISCOVER_MIG_NONE, "none", passes);
    return r < 0 ? 1 : 0;
}
