/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Telemetry: the values dcgm-exporter exports by default, read straight from NVML (DCGM is not
 * needed for any of them; shared/reference/dcgm-to-nvml-map.csv names the call behind each). One
 * NVML call per group of metrics: clocks, temperature, the field values (memory temperature, PCIe
 * replays and every NVLink link's throughput counters in one nvmlDeviceGetFieldValues), power,
 * energy, utilisation, encoder, decoder, memory, remapped rows, the vGPU licence, GPM, PCIe
 * throughput and the clock event reasons. Values are converted to dcgm-exporter's units (mW -> W,
 * bytes -> MiB, KB/s -> B/s, GPM percent -> ratio).
 *
 * What a device does not have is learnt once: a metric whose call answers NOT_SUPPORTED, NOT_FOUND
 * or FUNCTION_NOT_FOUND (an older driver) is remembered per device and never asked again, so a
 * T4 without HBM costs no memory-temperature call after the first read, and the caller hears about
 * it exactly once. Other failures (a timeout, no permission) only leave the value out of this read.
 *
 * GPM metrics are differences between two samples: the first read of a device takes the baseline,
 * every later read the next sample and the metrics since the previous read (the exporter reads far
 * more than the 100 ms apart GPM asks for). MIG devices answer what NVML answers on MIG handles
 * (memory), and GPM, which samples their GPU instance through the parent GPU
 * (nvmlGpmMigSampleGet): compute instances of one GPU instance share its values.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu-internal.h"

#define BIT(m) (UINT64_C(1) << (m))
#define ALL_METRICS (BIT(GPU_METRIC_COUNT) - 1)
#define MIB_BYTES 1048576.0

/* Per device (full GPU or MIG device): what is remembered between reads. */
struct tel_device {
    nvmlDevice_t handle;  /* acquired at the first read; valid while NVML is initialised */
    uint64_t unsupported; /* metrics the device answered NOT_SUPPORTED (or alike) for */
    nvmlGpmSample_t gpm[2];
    unsigned gpm_cur; /* gpm[gpm_cur] takes the next sample, the other holds the previous */
    bool gpm_have_prev;
};

struct tel_gpu {
    struct tel_device full;
    size_t n_migs;
    struct tel_device *migs;
};

struct gpu_telemetry {
    struct gpu_nvml *nvml;
    const struct gpu_inventory *inv;
    size_t n_gpus;
    struct tel_gpu *gpus;
    nvmlGpmMetricsGet_t *gpm_get; /* 13 KiB: one buffer for every device, made at first use */
};

/* One read in progress. */
struct reading {
    struct gpu_nvml *nvml;
    struct gpu_telemetry *t;
    struct tel_device *dev;
    nvmlDevice_t h;
    size_t gpu_index;
    int mig_index; /* -1: the full GPU */
    bool mig;
    uint64_t want;        /* wanted and not known to be unsupported */
    uint64_t unsupported; /* learnt in this read */
    bool lost;
    struct gpu_sample s;
};

bool gpu_metric_is_integer(enum gpu_metric m)
{
    switch (m) {
    case GPU_METRIC_POWER_USAGE:
    case GPU_METRIC_GR_ENGINE_ACTIVE:
    case GPU_METRIC_TENSOR_ACTIVE:
    case GPU_METRIC_DRAM_ACTIVE:
        return false;
    default:
        return true;
    }
}

static bool is_unsupported(nvmlReturn_t r, bool mig)
{
    switch (r) {
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_NOT_FOUND:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
        return true;
    case NVML_ERROR_INVALID_ARGUMENT:
        /* Some calls refuse MIG handles outright rather than answering NOT_SUPPORTED. */
        return mig;
    default:
        return false;
    }
}

/* Whether the call that reads bits succeeded; otherwise notes why (unsupported, lost, or a
 * passing failure that only leaves the values out of this read). */
static bool outcome(struct reading *rd, nvmlReturn_t r, uint64_t bits)
{
    if (r == NVML_SUCCESS)
        return true;
    if (r == NVML_ERROR_GPU_IS_LOST)
        rd->lost = true;
    else if (is_unsupported(r, rd->mig))
        rd->unsupported |= bits & rd->want;
    else
        log_debug(4, "NVML telemetry call failed", "error", gpu_nvml_strerror(rd->nvml, (int)r));
    return false;
}

static bool wanted(const struct reading *rd, uint64_t bits)
{
    return (rd->want & bits) != 0;
}

static void set(struct reading *rd, enum gpu_metric m, double v)
{
    if (!(rd->want & BIT(m)))
        return;
    rd->s.v[m] = v;
    rd->s.have |= BIT(m);
}

/* ---- the groups ---- */

static void read_clock(struct reading *rd, enum gpu_metric m, nvmlClockType_t type)
{
    unsigned mhz = 0;

    if (wanted(rd, BIT(m)) &&
        outcome(rd, NVML_CALL(rd->nvml, nvmlDeviceGetClockInfo, rd->h, type, &mhz), BIT(m)))
        set(rd, m, mhz);
}

static void read_temperature(struct reading *rd)
{
    nvmlTemperature_t tv = {.version = nvmlTemperature_v1, .sensorType = NVML_TEMPERATURE_GPU};
    unsigned celsius = 0;
    nvmlReturn_t r;

    if (!wanted(rd, BIT(GPU_METRIC_GPU_TEMP)))
        return;
    r = NVML_CALL(rd->nvml, nvmlDeviceGetTemperatureV, rd->h, &tv);
    if (r == NVML_SUCCESS) {
        set(rd, GPU_METRIC_GPU_TEMP, tv.temperature);
        return;
    }
    /* Drivers before the versioned call have only the older one (deprecated, still exported). */
    if (r == NVML_ERROR_FUNCTION_NOT_FOUND || r == NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        r = NVML_CALL(rd->nvml, nvmlDeviceGetTemperature, rd->h, NVML_TEMPERATURE_GPU, &celsius);
    if (outcome(rd, r, BIT(GPU_METRIC_GPU_TEMP)))
        set(rd, GPU_METRIC_GPU_TEMP, celsius);
}

static bool field_number(const nvmlFieldValue_t *f, double *ret)
{
    switch (f->valueType) {
    case NVML_VALUE_TYPE_DOUBLE:
        *ret = f->value.dVal;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_INT:
        *ret = f->value.uiVal;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
        *ret = (double)f->value.ulVal;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        *ret = (double)f->value.ullVal;
        return true;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        *ret = (double)f->value.sllVal;
        return true;
    case NVML_VALUE_TYPE_SIGNED_INT:
        *ret = f->value.siVal;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT:
        *ret = f->value.usVal;
        return true;
    default:
        return false;
    }
}

/* One entry's value, with its own status judged like a call's. */
static bool field_entry(struct reading *rd, const nvmlFieldValue_t *f, uint64_t bits, double *ret)
{
    return outcome(rd, f->nvmlReturn, bits) && field_number(f, ret);
}

/*
 * NVLink throughput: the TX and RX data counters (KiB) of every link, summed. Links that do not
 * exist answer per entry; the metric is there when any link answered, unsupported when every link
 * said it is not.
 */
static void sum_nvlink(struct reading *rd, const nvmlFieldValue_t *f, size_t n)
{
    const uint64_t bit = BIT(GPU_METRIC_NVLINK_BANDWIDTH_TOTAL);
    double sum = 0;
    size_t answered = 0, unsupported = 0;

    for (size_t i = 0; i < n; i++) {
        double v;

        if (f[i].nvmlReturn == NVML_ERROR_GPU_IS_LOST)
            rd->lost = true;
        else if (f[i].nvmlReturn == NVML_SUCCESS && field_number(&f[i], &v)) {
            sum += v;
            answered++;
        } else if (is_unsupported(f[i].nvmlReturn, rd->mig))
            unsupported++;
    }
    if (answered > 0)
        set(rd, GPU_METRIC_NVLINK_BANDWIDTH_TOTAL, sum);
    else if (n > 0 && unsupported == n)
        rd->unsupported |= bit;
}

static void read_fields(struct reading *rd, const struct gpu_device *gpu)
{
    const uint64_t nvlink = BIT(GPU_METRIC_NVLINK_BANDWIDTH_TOTAL);
    const uint64_t bits = BIT(GPU_METRIC_MEMORY_TEMP) | BIT(GPU_METRIC_PCIE_REPLAY) | nvlink;
    nvmlFieldValue_t f[2 + 2 * NVML_NVLINK_MAX_LINKS];
    size_t n = 0, temp = SIZE_MAX, replay = SIZE_MAX, links_at;
    unsigned links;
    nvmlReturn_t r;
    double v;

    if (!wanted(rd, bits))
        return;
    memset(f, 0, sizeof(f));
    if (wanted(rd, BIT(GPU_METRIC_MEMORY_TEMP))) {
        temp = n;
        f[n++].fieldId = NVML_FI_DEV_MEMORY_TEMP;
    }
    if (wanted(rd, BIT(GPU_METRIC_PCIE_REPLAY))) {
        replay = n;
        f[n++].fieldId = NVML_FI_DEV_PCIE_REPLAY_COUNTER;
    }
    links_at = n;
    if (wanted(rd, nvlink)) {
        /* Link numbers need not be contiguous (a link may be down), so ask for every possible one
         * of a GPU with NVLink; for one without, link 0 lets NVML say it has none. */
        links = gpu->nvlinks_active > 0 ? NVML_NVLINK_MAX_LINKS : 1;
        for (unsigned l = 0; l < links; l++) {
            f[n++] =
                (nvmlFieldValue_t){.fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, .scopeId = l};
            f[n++] =
                (nvmlFieldValue_t){.fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, .scopeId = l};
        }
    }
    r = NVML_CALL(rd->nvml, nvmlDeviceGetFieldValues, rd->h, (int)n, f);
    if (!outcome(rd, r, bits))
        return;
    if (temp != SIZE_MAX && field_entry(rd, &f[temp], BIT(GPU_METRIC_MEMORY_TEMP), &v))
        set(rd, GPU_METRIC_MEMORY_TEMP, v);
    if (replay != SIZE_MAX && field_entry(rd, &f[replay], BIT(GPU_METRIC_PCIE_REPLAY), &v))
        set(rd, GPU_METRIC_PCIE_REPLAY, v);
    if (wanted(rd, nvlink))
        sum_nvlink(rd, &f[links_at], n - links_at);
}

static void read_power(struct reading *rd)
{
    unsigned mw = 0;
    unsigned long long mj = 0;

    if (wanted(rd, BIT(GPU_METRIC_POWER_USAGE)) &&
        outcome(rd, NVML_CALL(rd->nvml, nvmlDeviceGetPowerUsage, rd->h, &mw),
                BIT(GPU_METRIC_POWER_USAGE)))
        set(rd, GPU_METRIC_POWER_USAGE, mw / 1000.0);
    if (wanted(rd, BIT(GPU_METRIC_TOTAL_ENERGY)) &&
        outcome(rd, NVML_CALL(rd->nvml, nvmlDeviceGetTotalEnergyConsumption, rd->h, &mj),
                BIT(GPU_METRIC_TOTAL_ENERGY)))
        set(rd, GPU_METRIC_TOTAL_ENERGY, (double)mj);
}

static void read_utilization(struct reading *rd)
{
    const uint64_t bits = BIT(GPU_METRIC_GPU_UTIL) | BIT(GPU_METRIC_MEM_COPY_UTIL);
    nvmlUtilization_t u = {0};
    unsigned pct = 0, period = 0;

    if (wanted(rd, bits) &&
        outcome(rd, NVML_CALL(rd->nvml, nvmlDeviceGetUtilizationRates, rd->h, &u), bits)) {
        set(rd, GPU_METRIC_GPU_UTIL, u.gpu);
        set(rd, GPU_METRIC_MEM_COPY_UTIL, u.memory);
    }
    if (wanted(rd, BIT(GPU_METRIC_ENC_UTIL)) &&
        outcome(rd, NVML_CALL(rd->nvml, nvmlDeviceGetEncoderUtilization, rd->h, &pct, &period),
                BIT(GPU_METRIC_ENC_UTIL)))
        set(rd, GPU_METRIC_ENC_UTIL, pct);
    if (wanted(rd, BIT(GPU_METRIC_DEC_UTIL)) &&
        outcome(rd, NVML_CALL(rd->nvml, nvmlDeviceGetDecoderUtilization, rd->h, &pct, &period),
                BIT(GPU_METRIC_DEC_UTIL)))
        set(rd, GPU_METRIC_DEC_UTIL, pct);
}

static void read_memory(struct reading *rd)
{
    const uint64_t bits =
        BIT(GPU_METRIC_FB_FREE) | BIT(GPU_METRIC_FB_USED) | BIT(GPU_METRIC_FB_RESERVED);
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    nvmlMemory_t m1 = {0};
    nvmlReturn_t r;

    if (!wanted(rd, bits))
        return;
    r = NVML_CALL(rd->nvml, nvmlDeviceGetMemoryInfo_v2, rd->h, &m2);
    if (r == NVML_SUCCESS) {
        set(rd, GPU_METRIC_FB_FREE, (double)m2.free / MIB_BYTES);
        set(rd, GPU_METRIC_FB_USED, (double)m2.used / MIB_BYTES);
        set(rd, GPU_METRIC_FB_RESERVED, (double)m2.reserved / MIB_BYTES);
        return;
    }
    if (r != NVML_ERROR_FUNCTION_NOT_FOUND && r != NVML_ERROR_ARGUMENT_VERSION_MISMATCH) {
        (void)outcome(rd, r, bits);
        return;
    }
    /* A driver without the v2 struct: its used includes what the driver reserves, which it cannot
     * tell apart. */
    r = NVML_CALL(rd->nvml, nvmlDeviceGetMemoryInfo, rd->h, &m1);
    if (!outcome(rd, r, bits))
        return;
    set(rd, GPU_METRIC_FB_FREE, (double)m1.free / MIB_BYTES);
    set(rd, GPU_METRIC_FB_USED, (double)m1.used / MIB_BYTES);
    rd->unsupported |= rd->want & BIT(GPU_METRIC_FB_RESERVED);
}

/* FB values are whole MiB in dcgm-exporter: bytes / 2^20, rounded down. */
static void whole_mib(struct reading *rd)
{
    for (enum gpu_metric m = GPU_METRIC_FB_FREE; m <= GPU_METRIC_FB_RESERVED; m++)
        if (rd->s.have & BIT(m))
            rd->s.v[m] = (double)(uint64_t)rd->s.v[m];
}

static void read_remapped_rows(struct reading *rd)
{
    const uint64_t bits = BIT(GPU_METRIC_UNCORRECTABLE_REMAPPED_ROWS) |
                          BIT(GPU_METRIC_CORRECTABLE_REMAPPED_ROWS) |
                          BIT(GPU_METRIC_ROW_REMAP_FAILURE);
    unsigned corr = 0, unc = 0, pending = 0, failure = 0;

    if (wanted(rd, bits) && outcome(rd,
                                    NVML_CALL(rd->nvml, nvmlDeviceGetRemappedRows, rd->h, &corr,
                                              &unc, &pending, &failure),
                                    bits)) {
        set(rd, GPU_METRIC_UNCORRECTABLE_REMAPPED_ROWS, unc);
        set(rd, GPU_METRIC_CORRECTABLE_REMAPPED_ROWS, corr);
        set(rd, GPU_METRIC_ROW_REMAP_FAILURE, failure ? 1 : 0);
    }
}

/*
 * The vGPU licence: 1 when the guest's vGPU (or compute) feature is licensed, 0 when not. A GPU
 * that is not a vGPU guest says it has no licensing (isGridLicenseSupported 0): unsupported.
 */
static void read_vgpu_license(struct reading *rd)
{
    const uint64_t bit = BIT(GPU_METRIC_VGPU_LICENSE_STATUS);
    nvmlGridLicensableFeatures_t f;
    double licensed = 0;

    if (!wanted(rd, bit))
        return;
    memset(&f, 0, sizeof(f));
    if (!outcome(rd, NVML_CALL(rd->nvml, nvmlDeviceGetGridLicensableFeatures_v4, rd->h, &f), bit))
        return;
    if (!f.isGridLicenseSupported) {
        rd->unsupported |= bit;
        return;
    }
    for (unsigned i = 0; i < f.licensableFeaturesCount && i < NVML_GRID_LICENSE_FEATURE_MAX_COUNT;
         i++) {
        const nvmlGridLicensableFeature_t *x = &f.gridLicensableFeatures[i];

        if ((x->featureCode == NVML_GRID_LICENSE_FEATURE_CODE_VGPU ||
             x->featureCode == NVML_GRID_LICENSE_FEATURE_CODE_COMPUTE) &&
            x->featureState)
            licensed = 1;
    }
    set(rd, GPU_METRIC_VGPU_LICENSE_STATUS, licensed);
}

/* Why the clocks are below their maximum now: the newer name first, then the one drivers before
 * 535 export (same bits). */
static void read_clock_events(struct reading *rd)
{
    const uint64_t bit = BIT(GPU_METRIC_CLOCK_EVENT_REASONS);
    unsigned long long reasons = 0;
    nvmlReturn_t r;

    if (!wanted(rd, bit))
        return;
    r = NVML_CALL(rd->nvml, nvmlDeviceGetCurrentClocksEventReasons, rd->h, &reasons);
    if (r == NVML_ERROR_FUNCTION_NOT_FOUND)
        r = NVML_CALL(rd->nvml, nvmlDeviceGetCurrentClocksThrottleReasons, rd->h, &reasons);
    if (outcome(rd, r, bit))
        set(rd, GPU_METRIC_CLOCK_EVENT_REASONS, (double)reasons);
}

static void read_pcie_throughput(struct reading *rd)
{
    unsigned kbps = 0;

    if (wanted(rd, BIT(GPU_METRIC_PCIE_TX_BYTES)) &&
        outcome(
            rd,
            NVML_CALL(rd->nvml, nvmlDeviceGetPcieThroughput, rd->h, NVML_PCIE_UTIL_TX_BYTES, &kbps),
            BIT(GPU_METRIC_PCIE_TX_BYTES)))
        set(rd, GPU_METRIC_PCIE_TX_BYTES, kbps * 1024.0);
    if (wanted(rd, BIT(GPU_METRIC_PCIE_RX_BYTES)) &&
        outcome(
            rd,
            NVML_CALL(rd->nvml, nvmlDeviceGetPcieThroughput, rd->h, NVML_PCIE_UTIL_RX_BYTES, &kbps),
            BIT(GPU_METRIC_PCIE_RX_BYTES)))
        set(rd, GPU_METRIC_PCIE_RX_BYTES, kbps * 1024.0);
}

/* ---- GPM ---- */

static const struct {
    enum gpu_metric metric;
    unsigned gpm_id;
} gpm_metrics[] = {
    {GPU_METRIC_GR_ENGINE_ACTIVE, NVML_GPM_METRIC_GRAPHICS_UTIL},
    {GPU_METRIC_TENSOR_ACTIVE, NVML_GPM_METRIC_ANY_TENSOR_UTIL},
    {GPU_METRIC_DRAM_ACTIVE, NVML_GPM_METRIC_DRAM_BW_UTIL},
};

#define GPM_BITS                                                                                   \
    (BIT(GPU_METRIC_GR_ENGINE_ACTIVE) | BIT(GPU_METRIC_TENSOR_ACTIVE) | BIT(GPU_METRIC_DRAM_ACTIVE))

static void gpm_free_samples(struct gpu_nvml *nvml, struct tel_device *dev)
{
    for (size_t i = 0; i < 2; i++)
        if (dev->gpm[i]) {
            (void)NVML_CALL(nvml, nvmlGpmSampleFree, dev->gpm[i]);
            dev->gpm[i] = NULL;
        }
    dev->gpm_have_prev = false;
}

/* Whether the device (h: the full GPU, also for a MIG device) does GPM; allocates its two samples
 * the first time. */
static bool gpm_setup(struct reading *rd, nvmlDevice_t h)
{
    struct tel_device *dev = rd->dev;
    nvmlGpmSupport_t support = {.version = NVML_GPM_SUPPORT_VERSION};
    nvmlReturn_t r;

    if (dev->gpm[0] && dev->gpm[1])
        return true;
    r = NVML_CALL(rd->nvml, nvmlGpmQueryDeviceSupport, h, &support);
    if (!outcome(rd, r, GPM_BITS))
        return false;
    if (!support.isSupportedDevice) {
        rd->unsupported |= rd->want & GPM_BITS;
        return false;
    }
    for (size_t i = 0; i < 2; i++) {
        r = NVML_CALL(rd->nvml, nvmlGpmSampleAlloc, &dev->gpm[i]);
        if (r != NVML_SUCCESS) {
            dev->gpm[i] = NULL;
            gpm_free_samples(rd->nvml, dev);
            (void)outcome(rd, r, GPM_BITS);
            return false;
        }
    }
    return true;
}

static void gpm_metrics_between(struct reading *rd, nvmlGpmSample_t prev, nvmlGpmSample_t cur)
{
    nvmlGpmMetricsGet_t *mg = rd->t->gpm_get;
    unsigned n = 0;

    if (!mg) {
        mg = rd->t->gpm_get = calloc(1, sizeof(*mg));
        if (!mg)
            return;
    }
    memset(mg, 0, offsetof(nvmlGpmMetricsGet_t, metrics));
    mg->version = NVML_GPM_METRICS_GET_VERSION;
    mg->sample1 = prev;
    mg->sample2 = cur;
    for (size_t i = 0; i < ARRAY_SIZE(gpm_metrics); i++)
        if (wanted(rd, BIT(gpm_metrics[i].metric))) {
            memset(&mg->metrics[n], 0, sizeof(mg->metrics[n]));
            mg->metrics[n++].metricId = gpm_metrics[i].gpm_id;
        }
    mg->numMetrics = n;
    if (!outcome(rd, NVML_CALL(rd->nvml, nvmlGpmMetricsGet, mg), GPM_BITS))
        return;
    for (unsigned k = 0; k < n; k++)
        for (size_t i = 0; i < ARRAY_SIZE(gpm_metrics); i++)
            if (gpm_metrics[i].gpm_id == mg->metrics[k].metricId &&
                outcome(rd, mg->metrics[k].nvmlReturn, BIT(gpm_metrics[i].metric)))
                /* GPM gives percent; DCGM's PROF fields are ratios. */
                set(rd, gpm_metrics[i].metric, mg->metrics[k].value / 100.0);
}

static int acquire(struct gpu_telemetry *t, const struct gpu_device *gpu, int mig,
                   struct tel_device *dev);

static void read_gpm(struct reading *rd)
{
    struct tel_device *dev = rd->dev;
    const struct gpu_device *gpu = &rd->t->inv->devices[rd->gpu_index];
    struct tel_device *full = &rd->t->gpus[rd->gpu_index].full;
    nvmlGpmSample_t cur;
    nvmlReturn_t r;

    if (!wanted(rd, GPM_BITS))
        return;
    if (rd->mig) {
        /* A GPU instance is sampled through its parent GPU. */
        int e = acquire(rd->t, gpu, -1, full);
        if (e == -ENODEV)
            rd->lost = true;
        if (e < 0)
            return;
    }
    if (!gpm_setup(rd, rd->mig ? full->handle : rd->h))
        return;
    cur = dev->gpm[dev->gpm_cur];
    if (rd->mig)
        r = NVML_CALL(rd->nvml, nvmlGpmMigSampleGet, full->handle, gpu->migs[rd->mig_index].gi_id,
                      cur);
    else
        r = NVML_CALL(rd->nvml, nvmlGpmSampleGet, rd->h, cur);
    if (!outcome(rd, r, GPM_BITS)) {
        dev->gpm_have_prev = false;
        return;
    }
    if (dev->gpm_have_prev)
        gpm_metrics_between(rd, dev->gpm[dev->gpm_cur ^ 1u], cur);
    dev->gpm_cur ^= 1u;
    dev->gpm_have_prev = true;
}

/* ---- the object ---- */

int gpu_telemetry_new(struct gpu_nvml *nvml, const struct gpu_inventory *inv,
                      struct gpu_telemetry **ret)
{
    _cleanup_(gpu_telemetry_freep) struct gpu_telemetry *t = NULL;

    if (!nvml || !inv || !ret)
        return -EINVAL;
    t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->nvml = nvml;
    t->inv = inv;
    t->gpus = calloc(inv->n_devices + 1, sizeof(*t->gpus));
    if (!t->gpus)
        return -ENOMEM;
    t->n_gpus = inv->n_devices;
    for (size_t i = 0; i < inv->n_devices; i++) {
        struct tel_gpu *g = &t->gpus[i];

        g->migs = calloc(inv->devices[i].n_migs + 1, sizeof(*g->migs));
        if (!g->migs)
            return -ENOMEM;
        g->n_migs = inv->devices[i].n_migs;
    }
    *ret = TAKE_PTR(t);
    return 0;
}

struct gpu_telemetry *gpu_telemetry_free(struct gpu_telemetry *t)
{
    if (!t)
        return NULL;
    for (size_t i = 0; t->gpus && i < t->n_gpus; i++) {
        gpm_free_samples(t->nvml, &t->gpus[i].full);
        for (size_t j = 0; j < t->gpus[i].n_migs; j++)
            gpm_free_samples(t->nvml, &t->gpus[i].migs[j]);
        free(t->gpus[i].migs);
    }
    free(t->gpus);
    free(t->gpm_get);
    free(t);
    return NULL;
}

static int handle_errno(nvmlReturn_t r)
{
    switch (r) {
    case NVML_ERROR_GPU_IS_LOST:
        return -ENODEV;
    case NVML_ERROR_NOT_FOUND:
    case NVML_ERROR_INVALID_ARGUMENT:
        return -ENOENT; /* e.g. a MIG device that was reconfigured away */
    default:
        return -EIO;
    }
}

/* The device's handle: the cached one, else by UUID (MIG UUIDs included), else by index (a GPU
 * read without a UUID; a MIG device through its parent). */
static int acquire(struct gpu_telemetry *t, const struct gpu_device *gpu, int mig,
                   struct tel_device *dev)
{
    nvmlDevice_t h = NULL, parent = NULL;
    const char *uuid = mig < 0 ? gpu->uuid : gpu->migs[mig].uuid;
    nvmlReturn_t r;

    if (dev->handle)
        return 0;
    if (uuid[0])
        r = NVML_CALL(t->nvml, nvmlDeviceGetHandleByUUID, uuid, &h);
    else {
        r = NVML_CALL(t->nvml, nvmlDeviceGetHandleByIndex_v2, gpu->index, &parent);
        if (r == NVML_SUCCESS && mig < 0)
            h = parent;
        else if (r == NVML_SUCCESS)
            r = NVML_CALL(t->nvml, nvmlDeviceGetMigDeviceHandleByIndex, parent,
                          gpu->migs[mig].index, &h);
    }
    if (r != NVML_SUCCESS)
        return handle_errno(r);
    dev->handle = h;
    return 0;
}

int gpu_telemetry_handle(struct gpu_telemetry *t, size_t gpu, int mig, nvmlDevice_t *ret,
                         struct gpu_nvml **ret_nvml)
{
    if (!t || gpu >= t->n_gpus || (mig >= 0 && (size_t)mig >= t->gpus[gpu].n_migs))
        return -EINVAL;
    struct tel_device *dev = mig < 0 ? &t->gpus[gpu].full : &t->gpus[gpu].migs[mig];
    int r = acquire(t, &t->inv->devices[gpu], mig, dev);
    if (r < 0)
        return r;
    *ret = dev->handle;
    *ret_nvml = t->nvml;
    return 0;
}

void gpu_telemetry_forget(struct gpu_telemetry *t, size_t gpu, int mig)
{
    if (!t || gpu >= t->n_gpus || (mig >= 0 && (size_t)mig >= t->gpus[gpu].n_migs))
        return;
    (mig < 0 ? &t->gpus[gpu].full : &t->gpus[gpu].migs[mig])->handle = NULL;
}

typedef void (*group_fn)(struct reading *rd);

int gpu_telemetry_read(struct gpu_telemetry *t, size_t gpu, int mig, uint64_t want,
                       struct gpu_sample *ret, uint64_t *ret_unsupported)
{
    static const group_fn groups[] = {
        read_temperature,     read_power,         read_utilization,
        read_memory,          read_remapped_rows, read_gpm,
        read_pcie_throughput, read_vgpu_license,  read_clock_events,
    };
    const struct gpu_device *d;
    struct tel_device *dev;
    struct reading rd;
    int r;

    if (!t || !ret || gpu >= t->n_gpus)
        return -EINVAL;
    d = &t->inv->devices[gpu];
    if (mig >= 0 && (size_t)mig >= t->gpus[gpu].n_migs)
        return -EINVAL;
    dev = mig < 0 ? &t->gpus[gpu].full : &t->gpus[gpu].migs[mig];
    r = acquire(t, d, mig, dev);
    if (r < 0)
        return r;

    rd = (struct reading){
        .nvml = t->nvml,
        .t = t,
        .dev = dev,
        .h = dev->handle,
        .gpu_index = gpu,
        .mig_index = mig,
        .mig = mig >= 0,
        .want = want & ALL_METRICS & ~dev->unsupported,
    };
    read_clock(&rd, GPU_METRIC_SM_CLOCK, NVML_CLOCK_SM);
    read_clock(&rd, GPU_METRIC_MEM_CLOCK, NVML_CLOCK_MEM);
    if (!rd.lost)
        read_fields(&rd, d);
    for (size_t i = 0; i < ARRAY_SIZE(groups) && !rd.lost; i++)
        groups[i](&rd);
    if (rd.lost) {
        /* Forget the handles: a GPU that comes back is looked up afresh. */
        dev->handle = NULL;
        t->gpus[gpu].full.handle = NULL;
        gpm_free_samples(t->nvml, dev);
        return -ENODEV;
    }
    whole_mib(&rd);
    rd.s.have &= ~rd.unsupported;
    dev->unsupported |= rd.unsupported;
    *ret = rd.s;
    if (ret_unsupported)
        *ret_unsupported = rd.unsupported;
    return 0;
}
