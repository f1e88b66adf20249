/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPUs of this node, as NVML reports them: loading the driver's library, the inventory
 * (identity, memory, PCI, NUMA, compute capability, MIG devices), the GPU-to-GPU topology, and a
 * source of health events (XID errors, ECC) that runs on a worker thread and delivers on an event
 * loop, and the telemetry a metrics exporter reads (clocks, power, utilisation, counters, and the
 * processes running on each device with their memory and utilisation).
 *
 * Everything NVML says is copied into plain structs owned by the inventory, so daemons never hold
 * NVML handles across calls. A GPU that fails with NVML_ERROR_GPU_IS_LOST (or another per-device
 * error) is listed with its error and as much identity as could be read; it never fails the whole
 * inventory.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "ev.h"

#define GPU_UUID_MAX 96
#define GPU_NAME_MAX 96
#define GPU_BUS_ID_MAX 32
#define GPU_PROFILE_MAX 32
#define GPU_VERSION_MAX 80
#define GPU_FABRIC_UUID_MAX 40
#define GPU_VGPU_VERSION_MAX 16

/* A loaded and initialised NVML library. */
struct gpu_nvml;

/*
 * Loads NVML and calls nvmlInit_v2. lib_path NULL means: $GPUPLANE_NVML_LIB, else
 * "libnvidia-ml.so.1" from the loader's search path. A missing library fails with "NVML library not
 * found: is the NVIDIA driver installed? Use --nvml-lib to point at it"; a missing required symbol
 * or a failed init says which. Optional symbols that are absent make their calls answer
 * NVML_ERROR_FUNCTION_NOT_FOUND.
 */
_wur_ int gpu_nvml_open(const char *lib_path, struct diag *d, struct gpu_nvml **ret);
/* nvmlShutdown and dlclose. NULL-safe; returns NULL. */
struct gpu_nvml *gpu_nvml_close(struct gpu_nvml *nvml);
DEFINE_POINTER_CLEANUP(struct gpu_nvml, gpu_nvml_close)
/* NVML's text for a return code ("GPU is lost"), or a generic one if the library has none. */
const char *gpu_nvml_strerror(const struct gpu_nvml *nvml, int nvml_return);

/* How two GPUs are connected, in the terms of `nvidia-smi topo -m`. */
enum gpu_link_level {
    GPU_LINK_SELF,    /* X: the same GPU */
    GPU_LINK_NVLINK,  /* NV#: NVLink (direct or through NVSwitch); nvlinks says how many */
    GPU_LINK_PIX,     /* at most one PCIe bridge (or the same board) */
    GPU_LINK_PXB,     /* several PCIe bridges, no host bridge */
    GPU_LINK_PHB,     /* through a PCIe host bridge */
    GPU_LINK_NODE,    /* between host bridges within one NUMA node */
    GPU_LINK_SYS,     /* across NUMA nodes (SMP interconnect) */
    GPU_LINK_UNKNOWN, /* NVML could not tell (e.g. a lost GPU) */
};

struct gpu_link {
    enum gpu_link_level level; /* NVLINK when nvlinks > 0, else the PCIe level */
    enum gpu_link_level pcie;  /* the PCIe path level even when NVLink is present */
    unsigned nvlinks;          /* NVLink links between the pair (0 = none) */
};

struct gpu_mig_device {
    char uuid[GPU_UUID_MAX];
    unsigned index;         /* index among its parent's MIG devices */
    unsigned gi_id;         /* GPU instance id */
    unsigned ci_id;         /* compute instance id */
    unsigned gi_profile_id; /* NVML profile ids */
    unsigned ci_profile_id;
    unsigned gi_slices;       /* G of "<G>g" */
    unsigned ci_slices;       /* C of "<C>c" */
    unsigned placement_start; /* GPU instance placement (memory slices) */
    unsigned placement_size;
    unsigned multiprocessors;
    uint64_t memory_bytes;
    char profile[GPU_PROFILE_MAX]; /* NVIDIA's name: "1g.5gb", "1c.2g.10gb", "1g.10gb+me" */
    /*
     * The engines of the GPU instance, from the nvmlGpuInstanceProfileInfo_t of its profile; its
     * compute instances share them, so every MIG device of one GPU instance has the same counts.
     * Meaningful only when engines_known: 0 is a real count (a 1g.5gb has no decoder), so a
     * profile NVML did not describe must not read as "no engines".
     */
    bool engines_known;
    unsigned copy_engines;
    unsigned decoders;
    unsigned encoders;
    unsigned jpeg_engines;
    unsigned ofa_engines;
};

struct gpu_device {
    unsigned index; /* NVML index */
    int error;      /* 0, or the NVML return that made the GPU unusable */
    bool lost;      /* error == NVML_ERROR_GPU_IS_LOST */
    char uuid[GPU_UUID_MAX];
    char name[GPU_NAME_MAX];           /* "NVIDIA H100 80GB HBM3" */
    char pci_bus_id[GPU_BUS_ID_MAX];   /* NVML form "00000000:3B:00.0" */
    char sysfs_bus_id[GPU_BUS_ID_MAX]; /* sysfs form "0000:3b:00.0" */
    uint32_t pci_device_id;            /* device << 16 | vendor */
    uint64_t memory_bytes;
    unsigned minor; /* /dev/nvidia<minor> */
    int numa_node;  /* -1 when unknown or not NUMA */
    int cc_major;   /* CUDA compute capability; -1 when unknown */
    int cc_minor;
    unsigned architecture; /* NVML_DEVICE_ARCH_* */
    unsigned brand;        /* nvmlBrandType_t */
    bool mig_capable;
    bool mig_enabled;        /* current MIG mode */
    unsigned nvlinks_active; /* active NVLink links */
    bool nvswitch;           /* at least one link ends at an NVSwitch */
    /* PCI class code 0xCCSSPP (0x030200 3D controller, 0x030000 VGA), from
     * nvmlDeviceGetPciInfoExt, else <sysfs_root>/sys/bus/pci/devices/<bus id>/class; 0 unknown. */
    uint32_t pci_class;
    /* NVLink fabric membership (nvmlDeviceGetGpuFabricInfoV): set when the GPU's registration
     * completed with a non-zero cluster UUID. */
    bool fabric_attached;
    char fabric_cluster_uuid[GPU_FABRIC_UUID_MAX]; /* canonical lower-case UUID, "" if unattached */
    unsigned fabric_clique_id;
    /* A vGPU guest: the GPU's PCI config space (sysfs) holds NVIDIA's vGPU vendor capability,
     * which also names the host's driver. false when the config space cannot be read. */
    bool vgpu_guest;
    char vgpu_host_driver_version[GPU_VGPU_VERSION_MAX]; /* "460.16" */
    char vgpu_host_driver_branch[GPU_VGPU_VERSION_MAX];  /* "r460_00" */
    size_t n_migs;
    struct gpu_mig_device *migs;
};

struct gpu_inventory {
    char driver_version[GPU_VERSION_MAX]; /* "550.54.15" */
    char nvml_version[GPU_VERSION_MAX];
    int cuda_driver_version; /* 12040 = CUDA 12.4; 0 when unknown */
    size_t n_devices;
    struct gpu_device *devices; /* by NVML index */
    struct gpu_link *links;     /* n_devices x n_devices, row-major */
};

struct gpu_read_options {
    const char *sysfs_root; /* where /sys is ("" or NULL: "/"); for the numa_node fallback */
    bool skip_topology;     /* only identity, memory and MIG */
};

/* Reads the inventory (opts NULL: defaults). Per-device failures are recorded in the device, not
 * returned; only a failed device count or an allocation failure fails the call. */
_wur_ int gpu_inventory_read(struct gpu_nvml *nvml, const struct gpu_read_options *opts,
                             struct diag *d, struct gpu_inventory **ret);
struct gpu_inventory *gpu_inventory_free(struct gpu_inventory *inv);
DEFINE_POINTER_CLEANUP(struct gpu_inventory, gpu_inventory_free)

/* The link between GPUs i and j (both < n_devices; NULL otherwise). */
const struct gpu_link *gpu_inventory_link(const struct gpu_inventory *inv, size_t i, size_t j);
/* "X", "NV18", "PIX", "PXB", "PHB", "NODE", "SYS", "N/A". */
const char *gpu_link_name(const struct gpu_link *link, char buf[static 16]);
/* "Hopper", "Ampere", ... as NVIDIA's tools spell them. */
const char *gpu_architecture_name(unsigned architecture);
/* A device by UUID (full GPUs only), or NULL. */
const struct gpu_device *gpu_inventory_find(const struct gpu_inventory *inv, const char *uuid);

/* The inventory as JSON (the `gpuplane info --json` document; its shape is documented in
 * docs/gpu-inventory.md). The caller owns the result. */
_wur_ int gpu_inventory_to_json(const struct gpu_inventory *inv, json_t **ret);

/*
 * MIG profile naming (NVIDIA's rule): from the GI/CI profile indices, the instance memory and the
 * parent's total memory. Exposed for tests.
 */
_wur_ int gpu_mig_profile_name(unsigned gi_profile_index, unsigned ci_profile_index,
                               uint64_t mig_memory_mib, uint64_t parent_total_bytes,
                               char buf[static GPU_PROFILE_MAX]);

/* One health event, delivered on the loop thread. */
struct gpu_health_event {
    int gpu_index;           /* NVML index of the full GPU; -1 when the event names no GPU */
    char uuid[GPU_UUID_MAX]; /* the full GPU's UUID ("" when unknown) */
    unsigned long long type; /* nvmlEventType* bit */
    unsigned long long xid;  /* XID number for XID events (999 = unknown XID) */
    unsigned gi_id;          /* MIG instance, or NVML_EVENT_NO_INSTANCE */
    unsigned ci_id;
    int wait_error; /* non-zero NVML return: the wait itself failed (treat all GPUs as
                       unhealthy, as NVIDIA's plugin does); other fields are unset */
};

typedef void (*gpu_health_fn)(const struct gpu_health_event *event, void *userdata);

struct gpu_health;

struct gpu_health_options {
    unsigned wait_timeout_ms;  /* one nvmlEventSetWait_v2; 0 = 5000, NVIDIA's value */
    unsigned error_backoff_ms; /* pause after a failed wait; 0 = 1000 */
};

/*
 * Registers XID and ECC events (masked by what each GPU supports) on every full GPU of the
 * inventory and waits for them on a worker thread; each event is posted to loop and passed to fn
 * there. GPUs whose registration fails with something other than NOT_SUPPORTED are reported once
 * through fn as events with wait_error set and gpu_index filled. Lost GPUs of the inventory are
 * skipped (the inventory already says they are lost). The inventory is copied and may be freed
 * afterwards; nvml and loop must outlive the returned object. A failed wait is reported as an event
 * with wait_error set and gpu_index -1, after which the thread pauses (error_backoff_ms) before
 * waiting again. -EOPNOTSUPP when the library has no event sets at all. opts sets the timings
 * (the daemon and tests use shorter waits); NULL = defaults.
 */
_wur_ int gpu_health_start_with(struct gpu_nvml *nvml, const struct gpu_inventory *inv,
                                struct ev_loop *loop, const struct gpu_health_options *opts,
                                gpu_health_fn fn, void *userdata, struct gpu_health **ret);
/* Stops the thread (within one wait timeout) and frees. Call it on the loop thread, before
 * ev_loop_free(); events still queued on the loop are dropped. NULL-safe; returns NULL. */
struct gpu_health *gpu_health_stop(struct gpu_health *health);
DEFINE_POINTER_CLEANUP(struct gpu_health, gpu_health_stop)

/*
 * `--mock PROFILE`: resolves PROFILE (a path, or a bundled name such as "dgx-h100" looked up in
 * $GPUPLANE_NODES_DIR, <exe dir>/../examples/nodes, <exe dir>/../share/gpuplane/nodes and the
 * source tree's examples/nodes), checks that it parses, exports MOCK_NVML_PROFILE for the mock
 * library and returns the path of the mock libnvidia-ml.so.1 built beside the binary (or
 * $GPUPLANE_MOCK_LIB). The caller frees *ret_lib_path.
 */
_wur_ int gpu_mock_select(const char *profile, struct diag *d, char **ret_lib_path);

/* ---- telemetry (gpu-telemetry.c) ---- */

/*
 * The values a metrics exporter reads from each device, one per DCGM field dcgm-exporter exports by
 * default that NVML can answer (shared/reference/dcgm-to-nvml-map.csv names the call behind each).
 * Units are dcgm-exporter's.
 */
enum gpu_metric {
    GPU_METRIC_SM_CLOCK,                    /* MHz */
    GPU_METRIC_MEM_CLOCK,                   /* MHz */
    GPU_METRIC_MEMORY_TEMP,                 /* °C (HBM GPUs) */
    GPU_METRIC_GPU_TEMP,                    /* °C */
    GPU_METRIC_POWER_USAGE,                 /* W, fractional (NVML's mW / 1000) */
    GPU_METRIC_TOTAL_ENERGY,                /* mJ since the driver loaded; monotonic */
    GPU_METRIC_PCIE_REPLAY,                 /* count; monotonic */
    GPU_METRIC_GPU_UTIL,                    /* % */
    GPU_METRIC_MEM_COPY_UTIL,               /* % */
    GPU_METRIC_ENC_UTIL,                    /* % */
    GPU_METRIC_DEC_UTIL,                    /* % */
    GPU_METRIC_FB_FREE,                     /* MiB */
    GPU_METRIC_FB_USED,                     /* MiB */
    GPU_METRIC_FB_RESERVED,                 /* MiB */
    GPU_METRIC_NVLINK_BANDWIDTH_TOTAL,      /* KiB sent and received over every link; monotonic */
    GPU_METRIC_VGPU_LICENSE_STATUS,         /* enum (vGPU guests) */
    GPU_METRIC_UNCORRECTABLE_REMAPPED_ROWS, /* count; monotonic */
    GPU_METRIC_CORRECTABLE_REMAPPED_ROWS,   /* count; monotonic */
    GPU_METRIC_ROW_REMAP_FAILURE,           /* 0 or 1 */
    GPU_METRIC_GR_ENGINE_ACTIVE,            /* ratio 0..1 (GPU performance monitoring, Hopper+) */
    GPU_METRIC_TENSOR_ACTIVE,               /* ratio 0..1 (idem) */
    GPU_METRIC_DRAM_ACTIVE,                 /* ratio 0..1 (idem) */
    GPU_METRIC_PCIE_TX_BYTES,               /* B/s */
    GPU_METRIC_PCIE_RX_BYTES,               /* B/s */
    GPU_METRIC_CLOCK_EVENT_REASONS,         /* bitmask of nvmlClocksEventReason* now in force */
    GPU_METRIC_COUNT,
};

/* One device's values: bit m of have set when v[m] holds what the device answered. */
struct gpu_sample {
    uint64_t have;
    double v[GPU_METRIC_COUNT];
};

struct gpu_telemetry;

/* State for reading telemetry from the devices of inv (borrowed; it must outlive the object): what
 * each device turned out not to support, rate and GPM baselines. nvml must outlive it too: freeing
 * it hands NVML back its GPM samples. */
_wur_ int gpu_telemetry_new(struct gpu_nvml *nvml, const struct gpu_inventory *inv,
                            struct gpu_telemetry **ret);
struct gpu_telemetry *gpu_telemetry_free(struct gpu_telemetry *t);
DEFINE_POINTER_CLEANUP(struct gpu_telemetry, gpu_telemetry_free)

/*
 * Reads the metrics of want (a bit mask of 1 << gpu_metric) from GPU gpu (inventory index), or from
 * its MIG device mig (index into its migs; -1: the full GPU; a MIG device answers only what NVML
 * answers for MIG handles, e.g. memory, and GPM of its GPU instance). A metric a device answers
 * NOT_SUPPORTED (or N/A) for is remembered and never asked again; *ret_unsupported gets the bits
 * that became unsupported in this call, so the caller can log each once. A device that is lost
 * fails the call (-ENODEV). May block in NVML: call it from a worker thread, never two calls on one
 * object at once.
 */
_wur_ int gpu_telemetry_read(struct gpu_telemetry *t, size_t gpu, int mig, uint64_t want,
                             struct gpu_sample *ret, uint64_t *ret_unsupported);

/* Whether the metric's values are whole numbers (printed as integers) rather than fractions. */
bool gpu_metric_is_integer(enum gpu_metric m);

/* ---- running processes (gpu-process.c) ---- */

/* The most processes (and ten times as many utilisation samples) read from one device. */
#define GPU_PROCESSES_MAX 4096u
#define GPU_PROCESS_MEMORY_UNKNOWN UINT64_MAX

/* A compute process on a GPU or MIG device, as NVML lists it. */
struct gpu_process {
    uint32_t pid;          /* in the host's PID namespace */
    uint64_t memory_bytes; /* GPU memory it holds; GPU_PROCESS_MEMORY_UNKNOWN when the driver
                              cannot tell (no permission, WDDM) */
};

/* A process' newest utilisation sample. */
struct gpu_process_util {
    uint32_t pid;
    uint64_t timestamp_us; /* CPU time of the sample */
    unsigned sm_util;      /* % of the SMs */
    unsigned mem_util;     /* % of the memory interface */
};

/*
 * The compute processes of GPU gpu (inventory index) or of its MIG device mig (-1: the GPU itself;
 * on a GPU in MIG mode that is every MIG device's), from nvmlDeviceGetComputeRunningProcesses (_v3,
 * else _v2, else the unversioned symbol of older drivers). *ret (free()) is NULL when none runs.
 * -EOPNOTSUPP when the device cannot list them, -EACCES, -ENODEV lost, -EIO, -ENOMEM. Blocks in
 * NVML: call it on the thread that calls gpu_telemetry_read, never at the same time.
 */
_wur_ int gpu_processes_read(struct gpu_telemetry *t, size_t gpu, int mig, struct gpu_process **ret,
                             size_t *ret_n);

/*
 * Each process' newest utilisation sample on GPU gpu or MIG device mig among those the driver
 * keeps newer than since_us (nvmlDeviceGetProcessUtilization; 0: all it keeps), by pid. No sample
 * at all (NOT_FOUND) is an empty answer. Errors and threads as gpu_processes_read.
 */
_wur_ int gpu_process_utilization_read(struct gpu_telemetry *t, size_t gpu, int mig,
                                       uint64_t since_us, struct gpu_process_util **ret,
                                       size_t *ret_n);
