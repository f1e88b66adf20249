/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DCGM fields the exporter knows, and where each value comes from. The names and ids are DCGM's
 * (dcgm_fields.h, as go-dcgm's GetFieldID resolves them, legacy names included); the set is every
 * field named in dcgm-exporter's shipped counters files (etc/default-counters.csv,
 * etc/dcp-metrics-included.csv, etc/1.x-compatibility-metrics.csv) plus its own DCGM_EXP_* fields
 * and the clock event reasons they count.
 * Those NVML answers map to a gpu_metric (shared/reference/dcgm-to-nvml-map.csv names the NVML call
 * behind each); the others are known, so a file naming them still loads, and are skipped.
 */
#include <string.h>

#include "exporter-internal.h"

#define METRIC(n, i, m, k)                                                                         \
    {                                                                                              \
        .name = (n), .id = (i), .source = EXPORTER_SOURCE_METRIC, .metric = (m),                   \
        .kind = EXPORTER_VALUE_##k                                                                 \
    }
#define NONE(n, i, k)                                                                              \
    {                                                                                              \
        .name = (n), .id = (i), .source = EXPORTER_SOURCE_NONE, .metric = GPU_METRIC_COUNT,        \
        .kind = EXPORTER_VALUE_##k                                                                 \
    }

/* dcgm-exporter gives its own fields ids past DCGM's (counters.IdentifyMetricType); they are only
 * used here to keep the table's ids distinct. */
#define EXP_ID_BASE 9000

static const struct exporter_field fields[] = {
    {.name = "DCGM_FI_DRIVER_VERSION",
     .id = 1,
     .source = EXPORTER_SOURCE_DRIVER_VERSION,
     .metric = GPU_METRIC_COUNT,
     .kind = EXPORTER_VALUE_STRING},
    NONE("DCGM_FI_NVML_VERSION", 2, STRING),
    NONE("DCGM_FI_DEV_BRAND", 51, STRING),
    NONE("DCGM_FI_DEV_SERIAL", 53, STRING),
    NONE("DCGM_FI_DEV_OEM_INFOROM_VER", 56, STRING),
    NONE("DCGM_FI_DEV_ECC_INFOROM_VER", 80, STRING),
    NONE("DCGM_FI_DEV_POWER_INFOROM_VER", 81, STRING),
    NONE("DCGM_FI_DEV_INFOROM_IMAGE_VER", 82, STRING),
    NONE("DCGM_FI_DEV_VBIOS_VERSION", 85, STRING),
    METRIC("DCGM_FI_DEV_SM_CLOCK", 100, GPU_METRIC_SM_CLOCK, INT),
    METRIC("DCGM_FI_DEV_MEM_CLOCK", 101, GPU_METRIC_MEM_CLOCK, INT),
    /* Not in a shipped counters file, but what DCGM_EXP_CLOCK_EVENTS_COUNT counts. */
    METRIC("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 112, GPU_METRIC_CLOCK_EVENT_REASONS, INT),
    METRIC("DCGM_FI_DEV_MEMORY_TEMP", 140, GPU_METRIC_MEMORY_TEMP, INT),
    METRIC("DCGM_FI_DEV_GPU_TEMP", 150, GPU_METRIC_GPU_TEMP, INT),
    METRIC("DCGM_FI_DEV_POWER_USAGE", 155, GPU_METRIC_POWER_USAGE, FLOAT),
    METRIC("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 156, GPU_METRIC_TOTAL_ENERGY, INT),
    METRIC("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 202, GPU_METRIC_PCIE_REPLAY, INT),
    METRIC("DCGM_FI_DEV_GPU_UTIL", 203, GPU_METRIC_GPU_UTIL, INT),
    METRIC("DCGM_FI_DEV_MEM_COPY_UTIL", 204, GPU_METRIC_MEM_COPY_UTIL, INT),
    METRIC("DCGM_FI_DEV_ENC_UTIL", 206, GPU_METRIC_ENC_UTIL, INT),
    METRIC("DCGM_FI_DEV_DEC_UTIL", 207, GPU_METRIC_DEC_UTIL, INT),
    {.name = "DCGM_FI_DEV_XID_ERRORS",
     .id = 230,
     .source = EXPORTER_SOURCE_XID,
     .metric = GPU_METRIC_COUNT,
     .kind = EXPORTER_VALUE_INT},
    NONE("DCGM_FI_DEV_POWER_VIOLATION", 240, INT),
    NONE("DCGM_FI_DEV_THERMAL_VIOLATION", 241, INT),
    NONE("DCGM_FI_DEV_SYNC_BOOST_VIOLATION", 242, INT),
    NONE("DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", 243, INT),
    NONE("DCGM_FI_DEV_LOW_UTIL_VIOLATION", 244, INT),
    NONE("DCGM_FI_DEV_RELIABILITY_VIOLATION", 245, INT),
    METRIC("DCGM_FI_DEV_FB_FREE", 251, GPU_METRIC_FB_FREE, INT),
    METRIC("DCGM_FI_DEV_FB_USED", 252, GPU_METRIC_FB_USED, INT),
    METRIC("DCGM_FI_DEV_FB_RESERVED", 253, GPU_METRIC_FB_RESERVED, INT),
    NONE("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", 310, INT),
    NONE("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 311, INT),
    NONE("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", 312, INT),
    NONE("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", 313, INT),
    NONE("DCGM_FI_DEV_RETIRED_SBE", 390, INT),
    NONE("DCGM_FI_DEV_RETIRED_DBE", 391, INT),
    NONE("DCGM_FI_DEV_RETIRED_PENDING", 392, INT),
    METRIC("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 393, GPU_METRIC_UNCORRECTABLE_REMAPPED_ROWS,
           INT),
    METRIC("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", 394, GPU_METRIC_CORRECTABLE_REMAPPED_ROWS, INT),
    METRIC("DCGM_FI_DEV_ROW_REMAP_FAILURE", 395, GPU_METRIC_ROW_REMAP_FAILURE, INT),
    NONE("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", 409, INT),
    NONE("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", 419, INT),
    NONE("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", 429, INT),
    NONE("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", 439, INT),
    NONE("DCGM_FI_DEV_NVLINK_BANDWIDTH_L0", 440, INT),
    METRIC("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", 449, GPU_METRIC_NVLINK_BANDWIDTH_TOTAL, INT),
    METRIC("DCGM_FI_DEV_VGPU_LICENSE_STATUS", 526, GPU_METRIC_VGPU_LICENSE_STATUS, INT),
    METRIC("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1001, GPU_METRIC_GR_ENGINE_ACTIVE, FLOAT),
    NONE("DCGM_FI_PROF_SM_ACTIVE", 1002, FLOAT),
    NONE("DCGM_FI_PROF_SM_OCCUPANCY", 1003, FLOAT),
    METRIC("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 1004, GPU_METRIC_TENSOR_ACTIVE, FLOAT),
    METRIC("DCGM_FI_PROF_DRAM_ACTIVE", 1005, GPU_METRIC_DRAM_ACTIVE, FLOAT),
    NONE("DCGM_FI_PROF_PIPE_FP64_ACTIVE", 1006, FLOAT),
    NONE("DCGM_FI_PROF_PIPE_FP32_ACTIVE", 1007, FLOAT),
    NONE("DCGM_FI_PROF_PIPE_FP16_ACTIVE", 1008, FLOAT),
    METRIC("DCGM_FI_PROF_PCIE_TX_BYTES", 1009, GPU_METRIC_PCIE_TX_BYTES, INT),
    METRIC("DCGM_FI_PROF_PCIE_RX_BYTES", 1010, GPU_METRIC_PCIE_RX_BYTES, INT),
    /* Counted by dcgm-exporter itself over a window (and by the daemon here). */
    {.name = "DCGM_EXP_XID_ERRORS_COUNT",
     .id = EXP_ID_BASE + 1,
     .source = EXPORTER_SOURCE_XID_COUNT,
     .metric = GPU_METRIC_COUNT,
     .kind = EXPORTER_VALUE_INT},
    {.name = "DCGM_EXP_CLOCK_EVENTS_COUNT",
     .id = EXP_ID_BASE + 2,
     .source = EXPORTER_SOURCE_CLOCK_EVENTS_COUNT,
     .metric = GPU_METRIC_CLOCK_EVENT_REASONS,
     .kind = EXPORTER_VALUE_INT},
    /* DCGM's health checks and NVLink P2P status: DCGM's own, not NVML's. */
    NONE("DCGM_EXP_GPU_HEALTH_STATUS", EXP_ID_BASE + 3, INT),
    NONE("DCGM_EXP_P2P_STATUS", EXP_ID_BASE + 4, INT),
};

const struct exporter_field *exporter_field_lookup(const char *name, size_t len)
{
    for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
        if (strlen(fields[i].name) == len && memcmp(fields[i].name, name, len) == 0)
            return &fields[i];
    }
    return NULL;
}

size_t exporter_field_count(void)
{
    return ARRAY_SIZE(fields);
}

const struct exporter_field *exporter_field_at(size_t i)
{
    return i < ARRAY_SIZE(fields) ? &fields[i] : NULL;
}
