/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cuda check. NVIDIA's validator starts a pod that runs CUDA's vectorAdd sample on the node and
 * waits for it to succeed. gpuplane has no CUDA and starts no pods, so it cannot claim that a CUDA
 * kernel ran. What it checks instead, through NVML, are the states that make CUDA work fail on a
 * GPU whose driver otherwise answers:
 *
 *  - the GPU answers NVML at all (not lost, no per-device error);
 *  - no row remapping has failed (the GPU's memory has an uncorrectable error it could not remap
 *    around: CUDA contexts fail until the GPU is serviced);
 *  - a GPU in MIG mode has MIG devices (without them CUDA sees no device on it).
 *
 * Compute mode ("prohibited") and pending page retirement are not read: gpuplane's NVML layer does
 * not ask for them. docs/validate.md says so as well.
 */
#include <errno.h>
#include <string.h>

#include "gpu.h"
#include "validate-internal.h"

/* Appends "; <GPU>: <why>" to buf. */
static void add_problem(char *buf, size_t size, size_t *used, unsigned *count,
                        const struct gpu_device *dev, const char *why)
{
    int w = snprintf(buf + *used, size - *used, "%sGPU %u (%s): %s", *count ? "; " : "", dev->index,
                     dev->uuid[0] ? dev->uuid : "no UUID", why);
    if (w > 0 && (size_t)w < size - *used)
        *used += (size_t)w;
    (*count)++;
}

int validate_cuda(const struct validate_options *o, struct diag *d)
{
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = NULL;
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    _cleanup_(gpu_telemetry_freep) struct gpu_telemetry *tel = NULL;
    const uint64_t remap = 1ull << GPU_METRIC_ROW_REMAP_FAILURE;
    char lib[4096], bad[DIAG_MSG_MAX] = "";
    size_t used = 0;
    unsigned n_bad = 0;
    bool host = false;
    int r = validate_locate_driver(o, &host, lib, sizeof(lib), d);
    if (r != VALIDATE_READY)
        return r;
    r = validate_open_nvml(lib, &nvml, &inv, d);
    if (r != VALIDATE_READY)
        return r;
    if (inv->n_devices == 0) {
        diag_fail(d, -ENODEV, "NVML finds no GPU: nothing to run CUDA work on");
        return VALIDATE_NOT_READY;
    }
    r = gpu_telemetry_new(nvml, inv, &tel);
    if (r < 0)
        return diag_fail(d, r, "cannot read the GPUs' state: %s", strerror(-r));
    for (size_t i = 0; i < inv->n_devices; i++) {
        const struct gpu_device *dev = &inv->devices[i];
        struct gpu_sample s = {0};
        uint64_t unsupported = 0;
        char why[160];
        if (dev->error) {
            snprintf(why, sizeof(why), "%s", gpu_nvml_strerror(nvml, dev->error));
            add_problem(bad, sizeof(bad), &used, &n_bad, dev, why);
            continue;
        }
        if (dev->mig_enabled && dev->n_migs == 0)
            add_problem(bad, sizeof(bad), &used, &n_bad, dev,
                        "MIG mode is on but the GPU has no MIG devices");
        r = gpu_telemetry_read(tel, i, -1, remap, &s, &unsupported);
        if (r == -ENODEV) {
            add_problem(bad, sizeof(bad), &used, &n_bad, dev, "GPU is lost");
            continue;
        }
        if (r >= 0 && (s.have & remap) && s.v[GPU_METRIC_ROW_REMAP_FAILURE] > 0)
            add_problem(bad, sizeof(bad), &used, &n_bad, dev,
                        "a row remapping failed: the GPU needs to be serviced");
    }
    if (n_bad) {
        diag_fail(d, -EIO, "%u of %zu GPUs cannot run CUDA work: %s", n_bad, inv->n_devices, bad);
        return VALIDATE_NOT_READY;
    }
    log_info("every GPU can run CUDA work as NVML sees it", "gpus", LOG_INT(inv->n_devices),
             "driver", inv->driver_version, "host_driver", host ? "true" : "false");
    return VALIDATE_READY;
}
