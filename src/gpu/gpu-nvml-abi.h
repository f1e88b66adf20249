/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The part of the NVML C ABI that gpuplane uses, declared by the project itself (NVIDIA ships no
 * Debian package for its header): types, constants, struct layouts and prototypes, with the names
 * the driver's libnvidia-ml.so.1 exports. gpuplane never links against these symbols; src/gpu
 * resolves each one with dlsym at run time. mock-nvml/ defines them, so the mock and the loader
 * share one declaration and a layout mistake shows up as a compile error rather than as garbage at
 * run time.
 *
 * Layouts are for LP64 (x86-64, aarch64); the static asserts at the end pin the sizes.
 */
#pragma once

#include <stddef.h>

typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_GPU_NOT_FOUND = 28,
    NVML_ERROR_INVALID_STATE = 29,
    NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
    NVML_ERROR_UNKNOWN = 999,
} nvmlReturn_t;

/* Opaque handles: pointers to driver-private structs. */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

/* Buffer sizes (bytes, NUL included). */
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_DEVICE_SERIAL_BUFFER_SIZE 30
#define NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE 32
#define NVML_NVLINK_MAX_LINKS 36

#define NVML_INIT_FLAG_NO_GPUS 1u
#define NVML_INIT_FLAG_NO_ATTACH 2u

#define NVML_DEVICE_MIG_DISABLE 0u
#define NVML_DEVICE_MIG_ENABLE 1u

/* GPU instance profiles (index order, as NVML enumerates them). */
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE 0x0u
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE 0x1u
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE 0x2u
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE 0x3u
#define NVML_GPU_INSTANCE_PROFILE_7_SLICE 0x4u
#define NVML_GPU_INSTANCE_PROFILE_8_SLICE 0x5u
#define NVML_GPU_INSTANCE_PROFILE_6_SLICE 0x6u
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1 0x7u
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1 0x8u
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2 0x9u
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX 0xAu
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX 0xBu
#define NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX 0xCu
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME 0xDu
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME 0xEu
#define NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME 0xFu
#define NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME 0x10u
#define NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX 0x11u
#define NVML_GPU_INSTANCE_PROFILE_COUNT 0x12u

#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE 0x0u
#define NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE 0x1u
#define NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE 0x2u
#define NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE 0x3u
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE 0x4u
#define NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE 0x5u
#define NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE 0x6u
#define NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE_REV1 0x7u
#define NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE_NVL 0x8u
#define NVML_COMPUTE_INSTANCE_PROFILE_COUNT 0x9u
#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0x0u

/* Event type bits. */
#define nvmlEventTypeSingleBitEccError 0x1ULL
#define nvmlEventTypeDoubleBitEccError 0x2ULL
#define nvmlEventTypePState 0x4ULL
#define nvmlEventTypeXidCriticalError 0x8ULL
#define nvmlEventMigConfigChange 0x100ULL
#define nvmlEventTypeAll 0xFF9FULL

/* "Not attributable to a MIG instance" in nvmlEventData_t. */
#define NVML_EVENT_NO_INSTANCE 0xFFFFFFFFu

typedef enum nvmlEnableState_enum {
    NVML_FEATURE_DISABLED = 0,
    NVML_FEATURE_ENABLED = 1,
} nvmlEnableState_t;

typedef enum nvmlGpuLevel_enum {
    NVML_TOPOLOGY_INTERNAL = 0,
    NVML_TOPOLOGY_SINGLE = 10,
    NVML_TOPOLOGY_MULTIPLE = 20,
    NVML_TOPOLOGY_HOSTBRIDGE = 30,
    NVML_TOPOLOGY_NODE = 40,
    NVML_TOPOLOGY_SYSTEM = 50,
} nvmlGpuTopologyLevel_t;

typedef enum nvmlIntNvLinkDeviceType_enum {
    NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
    NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
    NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF,
} nvmlIntNvLinkDeviceType_t;

typedef enum nvmlBrandType_enum {
    NVML_BRAND_UNKNOWN = 0,
    NVML_BRAND_TESLA = 2,
    NVML_BRAND_NVIDIA = 14,
} nvmlBrandType_t;

typedef unsigned int nvmlDeviceArchitecture_t;
#define NVML_DEVICE_ARCH_KEPLER 2u
#define NVML_DEVICE_ARCH_MAXWELL 3u
#define NVML_DEVICE_ARCH_PASCAL 4u
#define NVML_DEVICE_ARCH_VOLTA 5u
#define NVML_DEVICE_ARCH_TURING 6u
#define NVML_DEVICE_ARCH_AMPERE 7u
#define NVML_DEVICE_ARCH_ADA 8u
#define NVML_DEVICE_ARCH_HOPPER 9u
#define NVML_DEVICE_ARCH_BLACKWELL 10u
#define NVML_DEVICE_ARCH_UNKNOWN 0xFFFFFFFFu

typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE]; /* %04X:%02X:%02X.0 */
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId; /* device id << 16 | vendor id */
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* %08X:%02X:%02X.0 */
} nvmlPciInfo_t;

/* nvmlDeviceGetPciInfoExt: nvmlPciInfo_t with the PCI class (base 0x03: display controller;
 * sub 0x00 VGA, 0x02 3D controller). */
typedef struct nvmlPciInfoExt_v1_st {
    unsigned int version; /* nvmlPciInfoExt_v1 */
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    unsigned int baseClass;
    unsigned int subClass;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfoExt_v1_t;
typedef nvmlPciInfoExt_v1_t nvmlPciInfoExt_t;
#define nvmlPciInfoExt_v1 0x01000040u

/* nvmlDeviceGetGpuFabricInfoV: the GPU's registration with the NVLink fabric (Hopper and later on
 * NVSwitch systems). */
#define NVML_GPU_FABRIC_UUID_LEN 16
#define NVML_GPU_FABRIC_STATE_NOT_SUPPORTED 0u
#define NVML_GPU_FABRIC_STATE_NOT_STARTED 1u
#define NVML_GPU_FABRIC_STATE_IN_PROGRESS 2u
#define NVML_GPU_FABRIC_STATE_COMPLETED 3u
typedef struct nvmlGpuFabricInfo_v2_st {
    unsigned int version; /* nvmlGpuFabricInfo_v2 */
    unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
    nvmlReturn_t status; /* the registration's own result */
    unsigned int cliqueId;
    unsigned char state; /* NVML_GPU_FABRIC_STATE_* */
    unsigned int healthMask;
} nvmlGpuFabricInfo_v2_t;
typedef nvmlGpuFabricInfo_v2_t nvmlGpuFabricInfoV_t;
#define nvmlGpuFabricInfo_v2 0x02000024u

typedef struct nvmlMemory_st {
    unsigned long long total;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

typedef struct nvmlMemory_v2_st {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 0x02000028u

typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

typedef struct nvmlDeviceAttributes_st {
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
    unsigned int gpuInstanceSliceCount;
    unsigned int computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

typedef struct nvmlGpuInstancePlacement_st {
    unsigned int start;
    unsigned int size;
} nvmlGpuInstancePlacement_t;

typedef struct nvmlComputeInstancePlacement_st {
    unsigned int start;
    unsigned int size;
} nvmlComputeInstancePlacement_t;

typedef struct nvmlGpuInstanceProfileInfo_st {
    unsigned int id;
    unsigned int isP2pSupported;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int copyEngineCount;
    unsigned int decoderCount;
    unsigned int encoderCount;
    unsigned int jpegCount;
    unsigned int ofaCount;
    unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct nvmlGpuInstanceInfo_st {
    nvmlDevice_t device;
    unsigned int id;
    unsigned int profileId;
    nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct nvmlComputeInstanceProfileInfo_st {
    unsigned int id;
    unsigned int sliceCount;
    unsigned int instanceCount;
    unsigned int multiprocessorCount;
    unsigned int sharedCopyEngineCount;
    unsigned int sharedDecoderCount;
    unsigned int sharedEncoderCount;
    unsigned int sharedJpegCount;
    unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct nvmlComputeInstanceInfo_st {
    nvmlDevice_t device;
    nvmlGpuInstance_t gpuInstance;
    unsigned int id;
    unsigned int profileId;
    nvmlComputeInstancePlacement_t placement;
} nvmlComputeInstanceInfo_t;

/* ---- telemetry (what a metrics exporter reads) ---- */

typedef enum nvmlClockType_enum {
    NVML_CLOCK_GRAPHICS = 0,
    NVML_CLOCK_SM = 1,
    NVML_CLOCK_MEM = 2,
    NVML_CLOCK_VIDEO = 3,
} nvmlClockType_t;

typedef enum nvmlTemperatureSensors_enum {
    NVML_TEMPERATURE_GPU = 0,
} nvmlTemperatureSensors_t;

/* nvmlDeviceGetTemperatureV: set version and sensorType; the result is signed °C. */
typedef struct nvmlTemperature_v1_st {
    unsigned int version; /* nvmlTemperature_v1 */
    nvmlTemperatureSensors_t sensorType;
    int temperature;
} nvmlTemperature_v1_t;
typedef nvmlTemperature_v1_t nvmlTemperature_t;
#define nvmlTemperature_v1 0x0100000Cu

/* Percent over the last sample period (1/6 s to 1 s, product dependent). */
typedef struct nvmlUtilization_st {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef enum nvmlPcieUtilCounter_enum {
    NVML_PCIE_UTIL_TX_BYTES = 0,
    NVML_PCIE_UTIL_RX_BYTES = 1,
} nvmlPcieUtilCounter_t;

/* nvmlDeviceGetFieldValues: ids are stable ("each ID is only used once"). */
#define NVML_FI_DEV_MEMORY_TEMP 82u                /* HBM temperature, °C */
#define NVML_FI_DEV_PCIE_REPLAY_COUNTER 94u        /* cumulative */
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138u /* KiB, per link (scopeId) */
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX 139u /* KiB, per link (scopeId) */

typedef enum nvmlValueType_enum {
    NVML_VALUE_TYPE_DOUBLE = 0,
    NVML_VALUE_TYPE_UNSIGNED_INT = 1,
    NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
    NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
    NVML_VALUE_TYPE_SIGNED_INT = 5,
    NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
} nvmlValueType_t;

typedef union nvmlValue_st {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} nvmlValue_t;

/* One entry of nvmlDeviceGetFieldValues: the caller fills fieldId and scopeId; the call succeeds
 * when any entry was filled, so each entry's nvmlReturn must be checked. */
typedef struct nvmlFieldValue_st {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;   /* µs since the epoch */
    long long latencyUsec; /* how stale the value may be */
    nvmlValueType_t valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

/* nvmlDeviceGetGridLicensableFeatures_v4 (vGPU guests). */
#define NVML_GRID_LICENSE_BUFFER_SIZE 128
#define NVML_GRID_LICENSE_FEATURE_MAX_COUNT 3

typedef enum nvmlGridLicenseFeatureCode_enum {
    NVML_GRID_LICENSE_FEATURE_CODE_UNKNOWN = 0,
    NVML_GRID_LICENSE_FEATURE_CODE_VGPU = 1,
    NVML_GRID_LICENSE_FEATURE_CODE_NVIDIA_RTX = 2,
    NVML_GRID_LICENSE_FEATURE_CODE_GAMING = 3,
    NVML_GRID_LICENSE_FEATURE_CODE_COMPUTE = 4,
} nvmlGridLicenseFeatureCode_t;

typedef struct nvmlGridLicenseExpiry_st {
    unsigned int year;
    unsigned short month;
    unsigned short day;
    unsigned short hour;
    unsigned short min;
    unsigned short sec;
    unsigned char status;
} nvmlGridLicenseExpiry_t;

typedef struct nvmlGridLicensableFeature_st {
    nvmlGridLicenseFeatureCode_t featureCode;
    unsigned int featureState; /* non-zero: licensed */
    char licenseInfo[NVML_GRID_LICENSE_BUFFER_SIZE];
    char productName[NVML_GRID_LICENSE_BUFFER_SIZE];
    unsigned int featureEnabled;
    nvmlGridLicenseExpiry_t licenseExpiry;
} nvmlGridLicensableFeature_t;

typedef struct nvmlGridLicensableFeatures_st {
    int isGridLicenseSupported;
    unsigned int licensableFeaturesCount;
    nvmlGridLicensableFeature_t gridLicensableFeatures[NVML_GRID_LICENSE_FEATURE_MAX_COUNT];
} nvmlGridLicensableFeatures_t;

/* Running processes: the entry of nvmlDeviceGetComputeRunningProcesses_v3 and _v2 (24 bytes), and
 * the shorter one of the unversioned function that drivers before the v2 entry export. */
#define NVML_VALUE_NOT_AVAILABLE                                                                   \
    0xFFFFFFFFFFFFFFFFull /* the header's (-1): usedGpuMemory unknown */

typedef struct nvmlProcessInfo_st {
    unsigned int pid;
    unsigned long long usedGpuMemory; /* bytes, or NVML_VALUE_NOT_AVAILABLE */
    unsigned int gpuInstanceId;       /* 0xFFFFFFFF when not on a MIG device */
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

typedef struct nvmlProcessInfo_v1_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

/* One sample of nvmlDeviceGetProcessUtilization: a process' share of the GPU's engines. */
typedef struct nvmlProcessUtilizationSample_st {
    unsigned int pid;
    unsigned long long timeStamp; /* CPU time of the sample, microseconds */
    unsigned int smUtil;          /* % */
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

/* GPM (GPU performance monitoring, Hopper and later): metrics computed between two samples taken
 * more than 100 ms apart. The version fields are plain small integers, not size | N << 24. */
typedef struct nvmlGpmSample_st *nvmlGpmSample_t;

#define NVML_GPM_SUPPORT_VERSION 1u
#define NVML_GPM_METRICS_GET_VERSION 1u
#define NVML_GPM_METRIC_MAX 333u

#define NVML_GPM_METRIC_GRAPHICS_UTIL 1u    /* percent */
#define NVML_GPM_METRIC_SM_UTIL 2u          /* percent */
#define NVML_GPM_METRIC_ANY_TENSOR_UTIL 5u  /* percent */
#define NVML_GPM_METRIC_DRAM_BW_UTIL 10u    /* percent */
#define NVML_GPM_METRIC_PCIE_TX_PER_SEC 20u /* MiB/s */
#define NVML_GPM_METRIC_PCIE_RX_PER_SEC 21u /* MiB/s */

typedef struct nvmlGpmSupport_st {
    unsigned int version; /* NVML_GPM_SUPPORT_VERSION */
    unsigned int isSupportedDevice;
} nvmlGpmSupport_t;

typedef struct nvmlGpmMetric_st {
    unsigned int metricId; /* NVML_GPM_METRIC_* (input) */
    nvmlReturn_t nvmlReturn;
    double value;
    struct {
        char *shortName;
        char *longName;
        char *unit;
    } metricInfo;
} nvmlGpmMetric_t;

typedef struct nvmlGpmMetricsGet_st {
    unsigned int version; /* NVML_GPM_METRICS_GET_VERSION */
    unsigned int numMetrics;
    nvmlGpmSample_t sample1;
    nvmlGpmSample_t sample2;
    nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t layout");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t layout");
_Static_assert(sizeof(nvmlPciInfoExt_v1_t) == 64, "nvmlPciInfoExt_v1_t layout");
_Static_assert(offsetof(nvmlPciInfoExt_v1_t, baseClass) == 24, "nvmlPciInfoExt_v1_t offset");
_Static_assert(sizeof(nvmlGpuFabricInfo_v2_t) == 36, "nvmlGpuFabricInfo_v2_t layout");
_Static_assert(offsetof(nvmlGpuFabricInfo_v2_t, cliqueId) == 24, "nvmlGpuFabricInfo_v2_t offset");
_Static_assert(offsetof(nvmlGpuFabricInfo_v2_t, state) == 28, "nvmlGpuFabricInfo_v2_t state");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t layout");
_Static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t layout");
_Static_assert(sizeof(nvmlDeviceAttributes_t) == 40, "nvmlDeviceAttributes_t layout");
_Static_assert(sizeof(nvmlGpuInstanceProfileInfo_t) == 48, "nvmlGpuInstanceProfileInfo_t layout");
_Static_assert(sizeof(nvmlGpuInstanceInfo_t) == 24, "nvmlGpuInstanceInfo_t layout");
_Static_assert(sizeof(nvmlComputeInstanceProfileInfo_t) == 36, "nvmlComputeInstanceProfileInfo_t");
_Static_assert(sizeof(nvmlComputeInstanceInfo_t) == 32, "nvmlComputeInstanceInfo_t layout");
_Static_assert(offsetof(nvmlPciInfo_t, busId) == 36, "nvmlPciInfo_t.busId offset");
_Static_assert(offsetof(nvmlEventData_t, gpuInstanceId) == 24, "nvmlEventData_t offset");
_Static_assert(sizeof(nvmlTemperature_v1_t) == 12, "nvmlTemperature_v1_t layout");
_Static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t layout");
_Static_assert(sizeof(nvmlValue_t) == 8, "nvmlValue_t layout");
_Static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t layout");
_Static_assert(offsetof(nvmlFieldValue_t, nvmlReturn) == 28, "nvmlFieldValue_t offset");
_Static_assert(sizeof(nvmlGridLicenseExpiry_t) == 16, "nvmlGridLicenseExpiry_t layout");
_Static_assert(sizeof(nvmlGridLicensableFeature_t) == 284, "nvmlGridLicensableFeature_t layout");
_Static_assert(offsetof(nvmlGridLicensableFeature_t, licenseExpiry) == 268,
               "nvmlGridLicensableFeature_t offset");
_Static_assert(sizeof(nvmlGridLicensableFeatures_t) == 860, "nvmlGridLicensableFeatures_t");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t layout");
_Static_assert(offsetof(nvmlProcessInfo_t, gpuInstanceId) == 16, "nvmlProcessInfo_t offset");
_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t layout");
_Static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "nvmlProcessUtilizationSample_t");
_Static_assert(offsetof(nvmlProcessUtilizationSample_t, smUtil) == 16,
               "nvmlProcessUtilizationSample_t offset");
_Static_assert(sizeof(nvmlGpmSupport_t) == 8, "nvmlGpmSupport_t layout");
_Static_assert(sizeof(nvmlGpmMetric_t) == 40, "nvmlGpmMetric_t layout");
_Static_assert(sizeof(nvmlGpmMetricsGet_t) == 13344, "nvmlGpmMetricsGet_t layout");
_Static_assert(offsetof(nvmlGpmMetricsGet_t, metrics) == 24, "nvmlGpmMetricsGet_t offset");

/*
 * Prototypes, one X-macro line per symbol: NVML_FN(return type, name, parameter list). src/gpu
 * expands it into a table of dlsym'd pointers; mock-nvml defines each function. Required symbols
 * are marked in src/gpu, not here: this list is only the ABI.
 */
#define NVML_FUNCTIONS(NVML_FN)                                                                    \
    NVML_FN(nvmlReturn_t, nvmlInit_v2, (void))                                                     \
    NVML_FN(nvmlReturn_t, nvmlInitWithFlags, (unsigned int flags))                                 \
    NVML_FN(nvmlReturn_t, nvmlShutdown, (void))                                                    \
    NVML_FN(const char *, nvmlErrorString, (nvmlReturn_t result))                                  \
    NVML_FN(nvmlReturn_t, nvmlSystemGetDriverVersion, (char *version, unsigned int length))        \
    NVML_FN(nvmlReturn_t, nvmlSystemGetNVMLVersion, (char *version, unsigned int length))          \
    NVML_FN(nvmlReturn_t, nvmlSystemGetCudaDriverVersion_v2, (int *cudaDriverVersion))             \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetCount_v2, (unsigned int *deviceCount))                      \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetHandleByIndex_v2,                                           \
            (unsigned int index, nvmlDevice_t *device))                                            \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetHandleByUUID, (const char *uuid, nvmlDevice_t *device))     \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetHandleByPciBusId_v2,                                        \
            (const char *pciBusId, nvmlDevice_t *device))                                          \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetUUID,                                                       \
            (nvmlDevice_t device, char *uuid, unsigned int length))                                \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetName,                                                       \
            (nvmlDevice_t device, char *name, unsigned int length))                                \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetIndex, (nvmlDevice_t device, unsigned int *index))          \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetMinorNumber, (nvmlDevice_t device, unsigned int *minor))    \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetSerial,                                                     \
            (nvmlDevice_t device, char *serial, unsigned int length))                              \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetVbiosVersion,                                               \
            (nvmlDevice_t device, char *version, unsigned int length))                             \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetBrand, (nvmlDevice_t device, nvmlBrandType_t * type))       \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetArchitecture,                                               \
            (nvmlDevice_t device, nvmlDeviceArchitecture_t * arch))                                \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetCudaComputeCapability,                                      \
            (nvmlDevice_t device, int *major, int *minor))                                         \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetMemoryInfo, (nvmlDevice_t device, nvmlMemory_t * memory))   \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetMemoryInfo_v2,                                              \
            (nvmlDevice_t device, nvmlMemory_v2_t * memory))                                       \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetPciInfo_v3, (nvmlDevice_t device, nvmlPciInfo_t * pci))     \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetNumaNodeId, (nvmlDevice_t device, unsigned int *node))      \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetPciInfoExt, (nvmlDevice_t device, nvmlPciInfoExt_t * pci))  \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetGpuFabricInfoV,                                             \
            (nvmlDevice_t device, nvmlGpuFabricInfoV_t * info))                                    \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetPersistenceMode,                                            \
            (nvmlDevice_t device, nvmlEnableState_t * mode))                                       \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetTopologyCommonAncestor,                                     \
            (nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuTopologyLevel_t * pathInfo))       \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetNvLinkState,                                                \
            (nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive))                 \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetNvLinkRemotePciInfo_v2,                                     \
            (nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci))                          \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetNvLinkRemoteDeviceType,                                     \
            (nvmlDevice_t device, unsigned int link, nvmlIntNvLinkDeviceType_t *type))             \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetMigMode,                                                    \
            (nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode))           \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetMaxMigDeviceCount,                                          \
            (nvmlDevice_t device, unsigned int *count))                                            \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetMigDeviceHandleByIndex,                                     \
            (nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice))                    \
    NVML_FN(nvmlReturn_t, nvmlDeviceIsMigDeviceHandle, (nvmlDevice_t device, unsigned int *isMig)) \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetDeviceHandleFromMigDeviceHandle,                            \
            (nvmlDevice_t migDevice, nvmlDevice_t * device))                                       \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetGpuInstanceId, (nvmlDevice_t device, unsigned int *id))     \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetComputeInstanceId, (nvmlDevice_t device, unsigned int *id)) \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetAttributes_v2,                                              \
            (nvmlDevice_t device, nvmlDeviceAttributes_t * attributes))                            \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetGpuInstanceById,                                            \
            (nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gpuInstance))                \
    NVML_FN(nvmlReturn_t, nvmlGpuInstanceGetInfo,                                                  \
            (nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t * info))                         \
    NVML_FN(                                                                                       \
        nvmlReturn_t, nvmlGpuInstanceGetComputeInstanceById,                                       \
        (nvmlGpuInstance_t gpuInstance, unsigned int id, nvmlComputeInstance_t *computeInstance))  \
    NVML_FN(nvmlReturn_t, nvmlComputeInstanceGetInfo_v2,                                           \
            (nvmlComputeInstance_t computeInstance, nvmlComputeInstanceInfo_t * info))             \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetGpuInstanceProfileInfo,                                     \
            (nvmlDevice_t device, unsigned int profile, nvmlGpuInstanceProfileInfo_t *info))       \
    NVML_FN(nvmlReturn_t, nvmlGpuInstanceGetComputeInstanceProfileInfo,                            \
            (nvmlGpuInstance_t gpuInstance, unsigned int profile, unsigned int engProfile,         \
             nvmlComputeInstanceProfileInfo_t *info))                                              \
    NVML_FN(nvmlReturn_t, nvmlEventSetCreate, (nvmlEventSet_t * set))                              \
    NVML_FN(nvmlReturn_t, nvmlEventSetFree, (nvmlEventSet_t set))                                  \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetSupportedEventTypes,                                        \
            (nvmlDevice_t device, unsigned long long *eventTypes))                                 \
    NVML_FN(nvmlReturn_t, nvmlDeviceRegisterEvents,                                                \
            (nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set))              \
    NVML_FN(nvmlReturn_t, nvmlEventSetWait_v2,                                                     \
            (nvmlEventSet_t set, nvmlEventData_t * data, unsigned int timeoutms))                  \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetClockInfo,                                                  \
            (nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock))                      \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetTemperature,                                                \
            (nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int *temp))        \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetTemperatureV,                                               \
            (nvmlDevice_t device, nvmlTemperature_t * temperature))                                \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetFieldValues,                                                \
            (nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values))                      \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetPowerUsage, (nvmlDevice_t device, unsigned int *power))     \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetTotalEnergyConsumption,                                     \
            (nvmlDevice_t device, unsigned long long *energy))                                     \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetUtilizationRates,                                           \
            (nvmlDevice_t device, nvmlUtilization_t * utilization))                                \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetEncoderUtilization,                                         \
            (nvmlDevice_t device, unsigned int *utilization, unsigned int *samplingPeriodUs))      \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetDecoderUtilization,                                         \
            (nvmlDevice_t device, unsigned int *utilization, unsigned int *samplingPeriodUs))      \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetRemappedRows,                                               \
            (nvmlDevice_t device, unsigned int *corrRows, unsigned int *uncRows,                   \
             unsigned int *isPending, unsigned int *failureOccurred))                              \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetGridLicensableFeatures_v4,                                  \
            (nvmlDevice_t device, nvmlGridLicensableFeatures_t * pGridLicensableFeatures))         \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetCurrentClocksEventReasons,                                  \
            (nvmlDevice_t device, unsigned long long *clocksEventReasons))                         \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetCurrentClocksThrottleReasons,                               \
            (nvmlDevice_t device, unsigned long long *clocksThrottleReasons))                      \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetPcieThroughput,                                             \
            (nvmlDevice_t device, nvmlPcieUtilCounter_t counter, unsigned int *value))             \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses_v3,                                 \
            (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos))              \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses_v2,                                 \
            (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_t *infos))              \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetComputeRunningProcesses,                                    \
            (nvmlDevice_t device, unsigned int *infoCount, nvmlProcessInfo_v1_t *infos))           \
    NVML_FN(nvmlReturn_t, nvmlDeviceGetProcessUtilization,                                         \
            (nvmlDevice_t device, nvmlProcessUtilizationSample_t * utilization,                    \
             unsigned int *processSamplesCount, unsigned long long lastSeenTimeStamp))             \
    NVML_FN(nvmlReturn_t, nvmlGpmQueryDeviceSupport,                                               \
            (nvmlDevice_t device, nvmlGpmSupport_t * gpmSupport))                                  \
    NVML_FN(nvmlReturn_t, nvmlGpmSampleAlloc, (nvmlGpmSample_t * gpmSample))                       \
    NVML_FN(nvmlReturn_t, nvmlGpmSampleFree, (nvmlGpmSample_t gpmSample))                          \
    NVML_FN(nvmlReturn_t, nvmlGpmSampleGet, (nvmlDevice_t device, nvmlGpmSample_t gpmSample))      \
    NVML_FN(nvmlReturn_t, nvmlGpmMigSampleGet,                                                     \
            (nvmlDevice_t device, unsigned int gpuInstanceId, nvmlGpmSample_t gpmSample))          \
    NVML_FN(nvmlReturn_t, nvmlGpmMetricsGet, (nvmlGpmMetricsGet_t * metricsGet))

/* The prototypes themselves (what the driver exports). */
#define NVML_DECLARE_PROTOTYPE(ret, name, params) ret name params;
NVML_FUNCTIONS(NVML_DECLARE_PROTOTYPE)
#undef NVML_DECLARE_PROTOTYPE
