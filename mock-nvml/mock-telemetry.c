/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Telemetry: clocks, temperatures, power and energy, utilisation, memory, field values (memory
 * temperature, PCIe replays, NVLink throughput), remapped rows, the vGPU licence, PCIe throughput,
 * clock event reasons and GPM, answered from the profile's `telemetry` mapping and moved by time
 * and by event lines.
 *
 * Values must move, or an exporter's tests prove nothing about rates and counters, and must be
 * predictable, or the tests cannot assert anything. So every gauge is its profile (or event) value
 * plus a small sinusoid of the time since the node was loaded, with a period of one minute and a
 * phase of the GPU's index: utilisation +-5 points, power +-5 %, temperatures +-2 degrees, PCIe
 * throughput +-10 %. Counters are integrals of rates over time: energy integrates that very power
 * curve (in closed form), NVLink data grows at the configured rate per link. When an event changes
 * a rate, the integrals are settled up to that moment first, so counters never step back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mock-internal.h"

#include "mock-profile-internal.h"

#define WANDER_PERIOD_S 60.0
#define UTIL_SWING 5.0   /* percentage points */
#define POWER_SWING 0.05 /* fraction */
#define TEMP_SWING 2.0   /* degrees */
#define PCIE_SWING 0.10  /* fraction */
#define MIB 1048576ULL
#define PI 3.14159265358979323846
#define CLOCK_EVENTS_ALL 0x1FFu /* every nvmlClocksEventReason bit */
#define CLOCK_EVENT_GPU_IDLE 0x1u

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void mock_telemetry_start(struct mock_node *node)
{
    node->loaded_ns = now_ns();
}

double mock_elapsed(void)
{
    uint64_t now = now_ns();

    if (!mock.node || now < mock.node->loaded_ns)
        return 0;
    return (double)(now - mock.node->loaded_ns) / 1e9;
}

/*
 * sin and cos without libm: the library then needs no more than the daemons that load it, so their
 * memory figures do not pay for the stand-in. Reduced to [-pi, pi], then Taylor to x^21: off by
 * less than 1e-8, far below what any answer shows.
 */
static double sine(double x)
{
    double k = x / (2.0 * PI);
    x -= 2.0 * PI * (double)(long long)(k + (k >= 0 ? 0.5 : -0.5));
    double term = x, sum = x;
    for (int n = 1; n <= 10; n++) {
        term *= -x * x / (double)((2 * n) * (2 * n + 1));
        sum += term;
    }
    return sum;
}

static double cosine(double x)
{
    return sine(x + PI / 2.0);
}

/* Half away from zero, as llround. */
static long long round_ll(double v)
{
    return (long long)(v + (v >= 0 ? 0.5 : -0.5));
}

static double omega(void)
{
    return 2.0 * PI / WANDER_PERIOD_S;
}

static double wave(const struct mock_gpu *g, double t)
{
    return g->tel.wander ? sine(omega() * t + (double)g->index) : 0.0;
}

static double clamp(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static unsigned round_u(double v)
{
    return v <= 0 ? 0u : (unsigned)round_ll(v);
}

static double percent(const struct mock_gpu *g, double base, double t)
{
    return clamp(base + UTIL_SWING * wave(g, t), 0.0, 100.0);
}

static double power_w(const struct mock_gpu *g, double t)
{
    return g->tel.power_w * (1.0 + POWER_SWING * wave(g, t));
}

static double temperature(const struct mock_gpu *g, double base, double t)
{
    return base + TEMP_SWING * wave(g, t);
}

/* Joules drawn between a and b: the integral of power_w in closed form. */
static double joules(const struct mock_gpu *g, double a, double b)
{
    double p = g->tel.power_w, phi = (double)g->index, w = omega();
    double e = p * (b - a);

    if (g->tel.wander)
        e += POWER_SWING * p / w * (cosine(w * a + phi) - cosine(w * b + phi));
    return e;
}

static double energy_mj(const struct mock_gpu *g, double t)
{
    return g->tel.energy_mj + 1000.0 * joules(g, g->tel.settled, t);
}

static double nvlink_kib(const struct mock_gpu *g, double t)
{
    return g->tel.nvlink_kib + g->tel.nvlink_kibps * (t - g->tel.settled);
}

/* Brings the integrals up to now, before a rate changes. */
static void settle(struct mock_gpu *g)
{
    double t = mock_elapsed();

    g->tel.energy_mj = energy_mj(g, t);
    g->tel.nvlink_kib = nvlink_kib(g, t);
    g->tel.settled = t;
}

/* ---- the values a profile and an event may set ---- */

struct gauge {
    const char *key;
    size_t offset; /* of a double in struct mock_telemetry */
    double max;
};

static const struct gauge gauges[] = {
    {"gpuUtil", offsetof(struct mock_telemetry, gpu_util), 100},
    {"memUtil", offsetof(struct mock_telemetry, mem_util), 100},
    {"encUtil", offsetof(struct mock_telemetry, enc_util), 100},
    {"decUtil", offsetof(struct mock_telemetry, dec_util), 100},
    {"tensorUtil", offsetof(struct mock_telemetry, tensor_util), 100},
    {"powerWatts", offsetof(struct mock_telemetry, power_w), 4000},
    {"temperature", offsetof(struct mock_telemetry, temp), 150},
    {"memoryTemperature", offsetof(struct mock_telemetry, mem_temp), 150},
    {"smClock", offsetof(struct mock_telemetry, sm_clock), 10000},
    {"memClock", offsetof(struct mock_telemetry, mem_clock), 20000},
    {"pcieTxKBps", offsetof(struct mock_telemetry, pcie_tx_kbps), 1e8},
    {"pcieRxKBps", offsetof(struct mock_telemetry, pcie_rx_kbps), 1e8},
    {"nvlinkKiBPerSecond", offsetof(struct mock_telemetry, nvlink_kibps), 1e9},
};

/* The keys a telemetry mapping (profile) or event line may hold: every gauge's, then extra
 * (NULL-ended), into keys (n slots), NULL-ended. */
static void telemetry_keys(const char *const *extra, const char **keys, size_t n)
{
    size_t k = 0;

    for (size_t i = 0; i < ARRAY_SIZE(gauges) && k + 1 < n; i++)
        keys[k++] = gauges[i].key;
    for (size_t i = 0; extra[i] && k + 1 < n; i++)
        keys[k++] = extra[i];
    keys[k] = NULL;
}

static double *gauge_of(struct mock_telemetry *tel, const struct gauge *gg)
{
    return (double *)(void *)((char *)tel + gg->offset);
}

static void telemetry_defaults(struct mock_telemetry *tel)
{
    *tel = (struct mock_telemetry){
        .wander = true,
        .power_w = 50,
        .temp = 35,
        .sm_clock = 1000,
        .mem_clock = 1000,
        .vgpu_license = -1,
        .clock_events = -1,
    };
}

/* ---- profile ---- */

static const struct name_value licences[] = {{"unlicensed", 0}, {"licensed", 1}};

static int read_gauge(struct loader *L, const json_t *o, const struct gauge *gg,
                      struct mock_telemetry *tel)
{
    const json_t *v = json_object_get(o, gg->key);
    double x;

    if (!v)
        return 0;
    if (!json_is_number(v) || (x = json_number_value(v)) < 0 || x > gg->max)
        return doc_fail(L->doc, v, L->d, -EINVAL, "\"%s\": expected a number from 0 to %g", gg->key,
                        gg->max);
    *gauge_of(tel, gg) = x;
    if (strcmp(gg->key, "memoryTemperature") == 0)
        tel->has_mem_temp = true;
    return 0;
}

static int read_remapped(struct loader *L, const json_t *o, struct mock_telemetry *tel)
{
    static const char *const keys[] = {"correctable", "uncorrectable", "pending", "failure", NULL};
    json_t *rr = NULL;
    int r;

    r = doc_get_object(L->doc, o, "remappedRows", false, L->d, &rr);
    if (r < 0 || !rr)
        return r;
    r = doc_check_keys(L->doc, rr, keys, L->d);
    if (r >= 0)
        r = mock_read_uint(L, rr, "correctable", false, 0, 1000000, &tel->remap_corr);
    if (r >= 0)
        r = mock_read_uint(L, rr, "uncorrectable", false, 0, 1000000, &tel->remap_unc);
    if (r >= 0)
        r = doc_get_bool(L->doc, rr, "pending", false, false, L->d, &tel->remap_pending);
    if (r >= 0)
        r = doc_get_bool(L->doc, rr, "failure", false, false, L->d, &tel->remap_failure);
    return r;
}

int mock_read_telemetry(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    static const char *const extra[] = {"pcieReplays",        "remappedRows", "vgpuLicense",
                                        "clocksEventReasons", "wander",       NULL};
    const char *keys[ARRAY_SIZE(gauges) + ARRAY_SIZE(extra)];
    struct mock_telemetry *tel = &gpu->tel;
    json_t *o = NULL;
    unsigned replays = 0, licence = 0;
    int r;

    telemetry_defaults(tel);
    telemetry_keys(extra, keys, ARRAY_SIZE(keys));
    r = doc_get_object(L->doc, mock_pick(L, g, "telemetry"), "telemetry", false, L->d, &o);
    if (r < 0 || !o)
        return r;
    r = doc_check_keys(L->doc, o, keys, L->d);
    for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(gauges); i++)
        r = read_gauge(L, o, &gauges[i], tel);
    if (r >= 0)
        r = mock_read_uint(L, o, "pcieReplays", false, 0, 1000000000, &replays);
    if (r >= 0)
        r = read_remapped(L, o, tel);
    if (r >= 0 && json_object_get(o, "vgpuLicense")) {
        r = mock_read_name(L, o, "vgpuLicense", NULL, licences, ARRAY_SIZE(licences), &licence);
        tel->vgpu_license = (int)licence;
    }
    if (r >= 0 && json_object_get(o, "clocksEventReasons")) {
        unsigned reasons = 0;
        r = mock_read_uint(L, o, "clocksEventReasons", false, 0, CLOCK_EVENTS_ALL, &reasons);
        tel->clock_events = (int)reasons;
    }
    if (r >= 0)
        r = doc_get_bool(L->doc, o, "wander", false, true, L->d, &tel->wander);
    tel->pcie_replays = replays;
    return r;
}

/* ---- events ---- */

bool mock_telemetry_type(const char *type)
{
    return strcmp(type, "telemetry") == 0 || strcmp(type, "pcie-replay") == 0 ||
           strcmp(type, "remap") == 0;
}

static bool keys_in(const json_t *obj, const char *const *allowed, void (*err)(const char *msg))
{
    const char *key;
    json_t *v;
    char msg[128];

    json_object_foreach((json_t *)obj, key, v)
    {
        size_t i;

        for (i = 0; allowed[i]; i++)
            if (strcmp(key, allowed[i]) == 0)
                break;
        if (!allowed[i]) {
            snprintf(msg, sizeof(msg), "unknown key \"%s\"", key);
            err(msg);
            return false;
        }
    }
    return true;
}

static bool event_count(const json_t *obj, const char *key, json_int_t def, json_int_t *ret)
{
    const json_t *v = json_object_get(obj, key);

    if (!v) {
        *ret = def;
        return true;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000000)
        return false;
    *ret = json_integer_value(v);
    return true;
}

static bool event_bool(const json_t *obj, const char *key, bool *ret)
{
    const json_t *v = json_object_get(obj, key);

    if (!v)
        return true;
    if (!json_is_boolean(v))
        return false;
    *ret = json_is_true(v);
    return true;
}

static bool telemetry_line(struct mock_gpu *g, const json_t *obj, void (*err)(const char *msg))
{
    struct mock_telemetry next = g->tel;
    unsigned long long used = g->used_mib;
    const json_t *v;
    char msg[160];

    for (size_t i = 0; i < ARRAY_SIZE(gauges); i++) {
        double x;

        v = json_object_get(obj, gauges[i].key);
        if (!v)
            continue;
        if (!json_is_number(v) || (x = json_number_value(v)) < 0 || x > gauges[i].max) {
            snprintf(msg, sizeof(msg), "\"%s\": expected a number from 0 to %g", gauges[i].key,
                     gauges[i].max);
            err(msg);
            return false;
        }
        *gauge_of(&next, &gauges[i]) = x;
        if (strcmp(gauges[i].key, "memoryTemperature") == 0)
            next.has_mem_temp = true;
    }
    if (!event_bool(obj, "wander", &next.wander)) {
        err("\"wander\": expected a boolean");
        return false;
    }
    v = json_object_get(obj, "memoryUsed");
    if (v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            (unsigned long long)json_integer_value(v) > g->mem_mib - g->reserved_mib) {
            err("\"memoryUsed\": expected MiB from 0 to memory - memoryReserved");
            return false;
        }
        used = (unsigned long long)json_integer_value(v);
    }
    v = json_object_get(obj, "clocksEventReasons");
    if (v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > CLOCK_EVENTS_ALL) {
            err("\"clocksEventReasons\": expected an integer from 0 to 511 (0x1FF)");
            return false;
        }
        next.clock_events = (int)json_integer_value(v);
    }
    settle(g);
    next.settled = g->tel.settled;
    next.energy_mj = g->tel.energy_mj;
    next.nvlink_kib = g->tel.nvlink_kib;
    g->tel = next;
    g->used_mib = used;
    return true;
}

bool mock_telemetry_event(unsigned gpu, const char *type, const json_t *obj,
                          void (*err)(const char *msg))
{
    static const char *const line_extra[] = {
        "gpu", "type", "memoryUsed", "wander", "clocksEventReasons", NULL};
    const char *line_keys[ARRAY_SIZE(gauges) + ARRAY_SIZE(line_extra)];
    static const char *const replay_keys[] = {"gpu", "type", "count", NULL};
    static const char *const remap_keys[] = {"gpu",     "type",    "correctable", "uncorrectable",
                                             "pending", "failure", NULL};
    struct mock_gpu *g = &mock.node->gpus[gpu];
    json_int_t n, corr, unc;
    bool pending = g->tel.remap_pending, failure = g->tel.remap_failure;

    if (strcmp(type, "telemetry") == 0) {
        telemetry_keys(line_extra, line_keys, ARRAY_SIZE(line_keys));
        return keys_in(obj, line_keys, err) && telemetry_line(g, obj, err);
    }
    if (strcmp(type, "pcie-replay") == 0) {
        if (!keys_in(obj, replay_keys, err))
            return false;
        if (!event_count(obj, "count", 1, &n)) {
            err("\"count\": expected an integer from 0 to 1000000");
            return false;
        }
        g->tel.pcie_replays += (unsigned long long)n;
        return true;
    }
    if (!keys_in(obj, remap_keys, err))
        return false;
    if (!event_count(obj, "correctable", 0, &corr) || !event_count(obj, "uncorrectable", 0, &unc) ||
        !event_bool(obj, "pending", &pending) || !event_bool(obj, "failure", &failure)) {
        err("\"correctable\", \"uncorrectable\": integers from 0 to 1000000; \"pending\", "
            "\"failure\": booleans");
        return false;
    }
    g->tel.remap_corr += (unsigned)corr;
    g->tel.remap_unc += (unsigned)unc;
    g->tel.remap_pending = pending;
    g->tel.remap_failure = failure;
    return true;
}

/* ---- NVML: a full GPU's telemetry (MIG handles answer NOT_SUPPORTED) ---- */

static nvmlReturn_t tel_gpu(nvmlDevice_t device, bool ptr_ok, struct mock_gpu **ret)
{
    return mock_full_gpu(device, ptr_ok, NVML_ERROR_NOT_SUPPORTED, ret);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock)
{
    MOCK_LOCKED;
    struct mock_gpu *g;
    nvmlReturn_t r;

    r = tel_gpu(device, clock != NULL, &g);
    if (r != NVML_SUCCESS)
        return r;
    switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM:
    case NVML_CLOCK_VIDEO:
        *clock = round_u(g->tel.sm_clock);
        return NVML_SUCCESS;
    case NVML_CLOCK_MEM:
        *clock = round_u(g->tel.mem_clock);
        return NVML_SUCCESS;
    default:
        return NVML_ERROR_INVALID_ARGUMENT;
    }
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long *clocksEventReasons)
{
    MOCK_LOCKED;
    struct mock_gpu *g;
    nvmlReturn_t r;

    r = tel_gpu(device, clocksEventReasons != NULL, &g);
    if (r != NVML_SUCCESS)
        return r;
    if (g->tel.clock_events >= 0)
        *clocksEventReasons = (unsigned long long)g->tel.clock_events;
    else
        *clocksEventReasons = g->tel.gpu_util == 0 ? CLOCK_EVENT_GPU_IDLE : 0;
    return NVML_SUCCESS;
}

/* The name drivers before 535 export; the same answer. */
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *clocksThrottleReasons)
{
    return nvmlDeviceGetCurrentClocksEventReasons(device, clocksThrottleReasons);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int *temp)
{
    MOCK_LOCKED;
    struct mock_gpu *g;
    nvmlReturn_t r;

    r = tel_gpu(device, temp != NULL, &g);
    if (r != NVML_SUCCESS)
        return r;
    if (sensorType != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    *temp = round_u(temperature(g, g->tel.temp, mock_elapsed()));
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t *t)
{
    MOCK_LOCKED;
    struct mock_gpu *g;
    nvmlReturn_t r;

    r = tel_gpu(device, t != NULL, &g);
    if (r != NVML_SUCCESS)
        return r;
    if (t->version != nvmlTemperature_v1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (t->sensorType != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    t->temperature = (int)round_ll(temperature(g, g->tel.temp, mock_elapsed()));
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    MOCK_LOCKED;
    struct mock_gpu *g;
    nvmlReturn_t r;

    r = tel_gpu(device, power != NULL, &g);
    if (r != NVML_SUCCESS)
        return r;
    *power = round_u(power_w(g, mock_elapsed()) * 1000.0);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy)
{
    MOCK_LOCKED;
    struct mock_gpu *g;
    nvmlReturn_t r;

    r = tel_gpu(device, energy != NULL, &g);
    if (r != NVML_SUCCESS)
        return r;
    if (g->arch < NVML_DEVICE_ARCH_VOLTA)
        return NVML_ERROR_NOT_SUPPORTED;
    *energy = (unsigned long long)energy_mj(g, mock_elapsed()); /* >= 0: truncation is floor */
    return NVML_SUCCESS;
}

/* Utilisation is not reported for a GPU in MIG mode (only per instance, through GPM). */
static nvmlReturn_t util_gpu(nvmlDevice_t device, bool ptr_ok, struct mock_gpu **ret)
{
    nvmlReturn_t r = tel_gpu(device, ptr_ok, ret);

    if (r == NVML_SUCCESS && (*ret)->mig_enabled)
        return NVML_ERROR_NOT_SUPPORTED;
    return r;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
    MOCK_LOCKED;
    struct mock_gpu *g;
    double t = mock_elapsed();
    nvmlReturn_t r;

    r = util_gpu(device, utilization != NULL, &g);
    if (r != NVML_SUCCESS)
        return r;
    utilization->gpu = round_u(percent(g, g->tel.gpu_util, t));
    utilization->memory = round_u(percent(g, g->tel.mem_util, t));
    return NVML_SUCCESS;
}

static nvmlReturn_t codec_util(nvmlDevice_t device, bool encoder, unsigned int *utilization,
                               unsigned int *period)
{
    struct mock_gpu *g;
    nvmlReturn_t r;

    r = util_gpu(device, utilization && period, &g);
    if (r != NVML_SUCCESS)
        return r;
    *utilization = round_u(percent(g, encoder ? g->tel.enc_util : g->tel.dec_util, mock_elapsed()));
    *period = 167000u; /* 1/6 s, the shortest sample period NVML documents */
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs)
{
    MOCK_LOCKED;

    return codec_util(device, true, utilization, samplingPeriodUs);
}

nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs)
{
    MOCK_LOCKED;

    return codec_util(device, false, utilization, samplingPeriodUs);
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
                                       unsigned int *uncRows, unsigned int *isPending,
                                       unsigned int *failureOccurred)
{
    MOCK_LOCKED;
    struct mock_gpu *g;
    nvmlReturn_t r;

    r = tel_gpu(device, corrRows && uncRows && isPending && failureOccurred, &g);
    if (r != NVML_SUCCESS)
        return r;
    if (g->arch < NVML_DEVICE_ARCH_AMPERE)
        return NVML_ERROR_NOT_SUPPORTED;
    *corrRows = g->tel.remap_corr;
    *uncRows = g->tel.remap_unc;
    *isPending = g->tel.remap_pending;
    *failureOccurred = g->tel.remap_failure;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGridLicensableFeatures_v4(nvmlDevice_t device,
                                                    nvmlGridLicensableFeatures_t *f)
{
    MOCK_LOCKED;
    struct mock_gpu *g;
    nvmlReturn_t r;

    r = tel_gpu(device, f != NULL, &g);
    if (r != NVML_SUCCESS)
        return r;
    memset(f, 0, sizeof(*f));
    if (g->tel.vgpu_license < 0)
        return NVML_SUCCESS; /* not a vGPU guest: no licensing */
    f->isGridLicenseSupported = 1;
    f->licensableFeaturesCount = 1;
    f->gridLicensableFeatures[0].featureCode = NVML_GRID_LICENSE_FEATURE_CODE_COMPUTE;
    f->gridLicensableFeatures[0].featureState = (unsigned)g->tel.vgpu_license;
    f->gridLicensableFeatures[0].featureEnabled = 1;
    snprintf(f->gridLicensableFeatures[0].productName,
             sizeof(f->gridLicensableFeatures[0].productName), "%s",
             "NVIDIA Virtual Compute Server");
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter,
                                         unsigned int *value)
{
    MOCK_LOCKED;
    struct mock_gpu *g;
    double base;
    nvmlReturn_t r;

    r = tel_gpu(device, value != NULL, &g);
    if (r != NVML_SUCCESS)
        return r;
    if (counter == NVML_PCIE_UTIL_TX_BYTES)
        base = g->tel.pcie_tx_kbps;
    else if (counter == NVML_PCIE_UTIL_RX_BYTES)
        base = g->tel.pcie_rx_kbps;
    else
        return NVML_ERROR_INVALID_ARGUMENT;
    *value = round_u(base * (1.0 + PCIE_SWING * wave(g, mock_elapsed())));
    return NVML_SUCCESS;
}

/* ---- field values ---- */

static void field_uint(nvmlFieldValue_t *f, unsigned long long v)
{
    f->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
    f->value.ullVal = v;
    f->nvmlReturn = NVML_SUCCESS;
}

static void nvlink_field(const struct mock_gpu *g, double t, nvmlFieldValue_t *f)
{
    unsigned link = f->scopeId;

    if (link >= NVML_NVLINK_MAX_LINKS)
        f->nvmlReturn = NVML_ERROR_INVALID_ARGUMENT;
    else if (link >= g->nvlink.n_links)
        f->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    else if (g->nvlink.down & (UINT64_C(1) << link))
        field_uint(f, 0);
    else
        field_uint(f, (unsigned long long)nvlink_kib(g, t));
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                      nvmlFieldValue_t *values)
{
    MOCK_LOCKED;
    struct mock_gpu *g;
    struct timespec now;
    double t;
    nvmlReturn_t r;

    r = tel_gpu(device, values != NULL && valuesCount > 0, &g);
    if (r != NVML_SUCCESS)
        return r;
    t = mock_elapsed();
    clock_gettime(CLOCK_REALTIME, &now);
    for (int i = 0; i < valuesCount; i++) {
        nvmlFieldValue_t *f = &values[i];

        f->timestamp = (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000;
        f->latencyUsec = 0;
        f->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        switch (f->fieldId) {
        case NVML_FI_DEV_MEMORY_TEMP:
            if (g->tel.has_mem_temp)
                field_uint(f, round_u(temperature(g, g->tel.mem_temp, t)));
            break;
        case NVML_FI_DEV_PCIE_REPLAY_COUNTER:
            field_uint(f, g->tel.pcie_replays);
            break;
        case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
        case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
            nvlink_field(g, t, f);
            break;
        default:
            break;
        }
    }
    return NVML_SUCCESS;
}

/* ---- GPM ---- */

struct nvmlGpmSample_st {
    struct nvmlGpmSample_st *next;
    bool taken;
    unsigned gpu;
    unsigned gi; /* GPU instance id, NVML_EVENT_NO_INSTANCE for the whole GPU */
    double t;
};

static bool gpm_known(nvmlGpmSample_t s)
{
    for (struct nvmlGpmSample_st *p = mock.gpm_samples; p; p = p->next)
        if (p == s)
            return true;
    return false;
}

void mock_telemetry_release(void)
{
    while (mock.gpm_samples) {
        struct nvmlGpmSample_st *next = mock.gpm_samples->next;

        free(mock.gpm_samples);
        mock.gpm_samples = next;
    }
}

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *gpmSupport)
{
    MOCK_LOCKED;
    struct mock_gpu *g;
    nvmlReturn_t r;

    r = tel_gpu(device, gpmSupport != NULL, &g);
    if (r != NVML_SUCCESS)
        return r;
    if (gpmSupport->version != NVML_GPM_SUPPORT_VERSION)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    gpmSupport->isSupportedDevice = g->arch >= NVML_DEVICE_ARCH_HOPPER;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *gpmSample)
{
    MOCK_LOCKED;
    struct nvmlGpmSample_st *s;
    nvmlReturn_t r = mock_ready();

    if (r != NVML_SUCCESS)
        return r;
    if (!gpmSample)
        return NVML_ERROR_INVALID_ARGUMENT;
    s = calloc(1, sizeof(*s));
    if (!s)
        return NVML_ERROR_MEMORY;
    s->next = mock.gpm_samples;
    mock.gpm_samples = s;
    *gpmSample = s;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample)
{
    MOCK_LOCKED;
    nvmlReturn_t r = mock_ready();

    if (r != NVML_SUCCESS)
        return r;
    for (struct nvmlGpmSample_st **p = &mock.gpm_samples; *p; p = &(*p)->next)
        if (*p == gpmSample) {
            *p = gpmSample->next;
            free(gpmSample);
            return NVML_SUCCESS;
        }
    return NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample)
{
    MOCK_LOCKED;
    struct mock_gpu *g;
    nvmlReturn_t r;

    r = tel_gpu(device, gpm_known(gpmSample), &g);
    if (r != NVML_SUCCESS)
        return r;
    if (g->arch < NVML_DEVICE_ARCH_HOPPER)
        return NVML_ERROR_NOT_SUPPORTED;
    gpmSample->taken = true;
    gpmSample->gpu = g->index;
    gpmSample->gi = NVML_EVENT_NO_INSTANCE;
    gpmSample->t = mock_elapsed();
    return NVML_SUCCESS;
}

/* A GPU instance's sample; the mock has no per-instance load, so it has its GPU's values. */
nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId,
                                 nvmlGpmSample_t gpmSample)
{
    MOCK_LOCKED;
    struct mock_gpu *g;
    nvmlReturn_t r;
    size_t i;

    r = mock_full_gpu(device, gpm_known(gpmSample), NVML_ERROR_INVALID_ARGUMENT, &g);
    if (r != NVML_SUCCESS)
        return r;
    if (g->arch < NVML_DEVICE_ARCH_HOPPER || !g->mig_enabled)
        return NVML_ERROR_NOT_SUPPORTED;
    for (i = 0; i < g->n_gis && g->gis[i].id != gpuInstanceId; i++)
        ;
    if (i == g->n_gis)
        return NVML_ERROR_NOT_FOUND;
    gpmSample->taken = true;
    gpmSample->gpu = g->index;
    gpmSample->gi = gpuInstanceId;
    gpmSample->t = mock_elapsed();
    return NVML_SUCCESS;
}

/* A metric over the interval, taken at its end (the values wander slowly). */
static nvmlReturn_t gpm_value(const struct mock_gpu *g, unsigned id, double t, double *ret)
{
    switch (id) {
    case NVML_GPM_METRIC_GRAPHICS_UTIL:
    case NVML_GPM_METRIC_SM_UTIL:
        *ret = percent(g, g->tel.gpu_util, t);
        return NVML_SUCCESS;
    case NVML_GPM_METRIC_ANY_TENSOR_UTIL:
        *ret = percent(g, g->tel.tensor_util, t);
        return NVML_SUCCESS;
    case NVML_GPM_METRIC_DRAM_BW_UTIL:
        *ret = percent(g, g->tel.mem_util, t);
        return NVML_SUCCESS;
    case NVML_GPM_METRIC_PCIE_TX_PER_SEC:
        *ret = g->tel.pcie_tx_kbps * (1.0 + PCIE_SWING * wave(g, t)) / 1024.0;
        return NVML_SUCCESS;
    case NVML_GPM_METRIC_PCIE_RX_PER_SEC:
        *ret = g->tel.pcie_rx_kbps * (1.0 + PCIE_SWING * wave(g, t)) / 1024.0;
        return NVML_SUCCESS;
    default:
        return NVML_ERROR_NOT_SUPPORTED;
    }
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *mg)
{
    MOCK_LOCKED;
    const struct mock_gpu *g;
    nvmlReturn_t r = mock_enter();

    if (r != NVML_SUCCESS)
        return r;
    if (!mg)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (mg->version != NVML_GPM_METRICS_GET_VERSION)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (mg->numMetrics > NVML_GPM_METRIC_MAX || !gpm_known(mg->sample1) ||
        !gpm_known(mg->sample2) || !mg->sample1->taken || !mg->sample2->taken ||
        mg->sample1->gpu != mg->sample2->gpu || mg->sample1->gi != mg->sample2->gi ||
        mg->sample1->gpu >= mock.node->n_gpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    g = &mock.node->gpus[mg->sample1->gpu];
    if (mock_gpu_lost(g))
        return NVML_ERROR_GPU_IS_LOST;
    for (unsigned i = 0; i < mg->numMetrics; i++) {
        nvmlGpmMetric_t *m = &mg->metrics[i];

        m->value = 0;
        m->nvmlReturn = gpm_value(g, m->metricId, mg->sample2->t, &m->value);
    }
    return NVML_SUCCESS;
}
