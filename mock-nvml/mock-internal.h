/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the mock NVML library share: the node model loaded from a profile (GPUs, GPU
 * instances, compute instances, the handles NVML hands out), the process-wide state behind the one
 * mutex that makes the library thread-safe, and the helpers every entry point uses to check that
 * the library is initialised and that a handle is one of ours.
 *
 * Handles are pointers into arrays owned by struct mock_node; they stay valid for one init (from
 * the first nvmlInit_v2 to the last nvmlShutdown). A handle is validated by address range, so a
 * stale or made-up pointer is answered with NVML_ERROR_INVALID_ARGUMENT and never dereferenced.
 */
#pragma once

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base-diag.h"
#include "base-macro.h"

/* The NVML entry points are the library's interface: declared visible, everything else is hidden.
 */
#pragma GCC visibility push(default)
#include "gpu-nvml-abi.h"
#include "mock-nvml.h"
#pragma GCC visibility pop

#define MOCK_MAX_GPUS 64
#define MOCK_MAX_MIG_DEVICES 7 /* nvmlDeviceGetMaxMigDeviceCount on A100/H100 */
#define MOCK_MEM_SLICES 8      /* memory slices of a MIG-capable GPU (placement units) */
#define MOCK_UUID_MAX 48       /* "GPU-" / "MIG-" + 36 characters + NUL */
#define MOCK_STR_MAX 96
#define MOCK_MAX_PROCESSES 128 /* per GPU */

/* One GPU instance profile of a MIG table (one line of `nvidia-smi mig -lgip`). */
struct mock_gi_profile {
    unsigned index; /* NVML_GPU_INSTANCE_PROFILE_* */
    unsigned id;
    const char *name; /* "1g.5gb" */
    unsigned slices;  /* compute slices: G of "<G>g" */
    unsigned mem_slices;
    unsigned instances;
    unsigned sms;
    unsigned ce, dec, enc, jpg, ofa;
    bool p2p;
    unsigned long long mem_mib;
    unsigned starts[MOCK_MEM_SLICES]; /* valid placement starts */
    unsigned n_starts;
};

struct mock_mig_table {
    const char *name; /* "a100-40gb" */
    const char *match[2];
    size_t n;
    struct mock_gi_profile p[7];
};

struct mock_pci {
    unsigned domain, bus, device, function;
};

struct mock_gpu;
struct mock_node;

struct nvmlGpuInstance_st {
    struct mock_gpu *gpu;
    const struct mock_gi_profile *prof;
    unsigned id;
    unsigned start; /* placement, in memory slices */
    struct nvmlComputeInstance_st *cis;
    size_t n_cis;
};

struct nvmlComputeInstance_st {
    struct nvmlGpuInstance_st *gi;
    struct nvmlDevice_st *dev; /* the MIG device this compute instance is */
    unsigned id;
    unsigned slices;        /* C of "<C>c" */
    unsigned profile_index; /* NVML_COMPUTE_INSTANCE_PROFILE_*, also its id */
    unsigned start;
    char uuid[MOCK_UUID_MAX];
    char profile_name[32]; /* "1c.3g.20gb" or "3g.20gb" */
};

/* A device handle: a full GPU (ci NULL) or a MIG device (one compute instance). */
struct nvmlDevice_st {
    struct mock_gpu *gpu;
    struct nvmlComputeInstance_st *ci;
};

struct mock_nvlink {
    unsigned n_links;                /* 0: no NVLink */
    bool to_switch;                  /* all links end at NVSwitches */
    int peer[NVML_NVLINK_MAX_LINKS]; /* GPU index at the far end of each link (direct links) */
    uint64_t down;                   /* bit l: link l inactive */
};

/*
 * A GPU's telemetry (mock-telemetry.c): the profile's values, which events may change at run time,
 * and the counters that grow with time. Gauges wander around their value with the elapsed time.
 */
struct mock_telemetry {
    bool wander;
    double gpu_util, mem_util, enc_util, dec_util, tensor_util; /* % */
    double power_w;
    double temp;
    bool has_mem_temp; /* HBM: NVML_FI_DEV_MEMORY_TEMP answers */
    double mem_temp;
    double sm_clock, mem_clock; /* MHz */
    double pcie_tx_kbps, pcie_rx_kbps;
    double nvlink_kibps; /* per active link and direction */
    unsigned long long pcie_replays;
    unsigned remap_corr, remap_unc;
    bool remap_pending, remap_failure;
    int vgpu_license; /* -1: not a vGPU guest; 0 unlicensed; 1 licensed */
    int clock_events; /* clock event reason bits; -1: GpuIdle while gpu_util is 0, else none */
    /* Time integrals, settled whenever a rate changes: energy (mJ) and NVLink data per link and
     * direction (KiB) up to `settled` seconds after the node was loaded. */
    double settled;
    double energy_mj;
    double nvlink_kib;
};

/* A process running on a GPU or on one compute instance of it (mock-process.c). */
struct mock_process {
    unsigned pid;
    unsigned long long mem_bytes; /* NVML_VALUE_NOT_AVAILABLE when the profile gives none */
    unsigned sm_util, mem_util;   /* % */
    unsigned gi, ci;              /* its compute instance; NVML_EVENT_NO_INSTANCE on a full GPU */
};

struct mock_gpu {
    unsigned index;
    struct nvmlDevice_st *handle;
    char uuid[MOCK_UUID_MAX];
    char name[MOCK_STR_MAX];
    char serial[MOCK_STR_MAX];
    char vbios[MOCK_STR_MAX];
    char pci_switch[64]; /* "" when none */
    struct mock_pci pci;
    unsigned minor;
    unsigned long long mem_mib, reserved_mib, used_mib;
    unsigned sms;
    int cc_major, cc_minor;
    unsigned arch;
    nvmlBrandType_t brand;
    unsigned pci_device_id, pci_subsystem_id;
    unsigned pci_class; /* 0xCCSSPP, nvmlDeviceGetPciInfoExt */
    bool fabric;        /* nvmlDeviceGetGpuFabricInfoV answers (else NOT_SUPPORTED) */
    unsigned char fabric_cluster[NVML_GPU_FABRIC_UUID_LEN];
    unsigned fabric_clique, fabric_state;
    int numa;
    bool persistence, ecc, lost_at_start;
    struct mock_nvlink nvlink;
    bool mig_capable, mig_enabled, mig_pending;
    const struct mock_mig_table *mig_table;
    struct nvmlGpuInstance_st *gis;
    size_t n_gis;
    struct nvmlDevice_st *migs; /* MIG devices, in MIG index order */
    size_t n_migs;
    struct mock_telemetry tel;
    struct mock_process procs[MOCK_MAX_PROCESSES];
    size_t n_procs;
};

struct mock_topology_override {
    unsigned a, b;
    nvmlGpuTopologyLevel_t level;
};

struct mock_node {
    char driver_version[MOCK_STR_MAX];
    char nvml_version[MOCK_STR_MAX];
    int cuda_version;
    char *events_path; /* resolved against the profile's directory; NULL: none */
    char *driver_root;
    struct mock_gpu *gpus;
    size_t n_gpus;
    struct nvmlDevice_st *handles; /* n_gpus full GPUs, then every MIG device */
    size_t n_handles;
    struct nvmlGpuInstance_st *gis;
    size_t n_gis;
    struct nvmlComputeInstance_st *cis;
    size_t n_cis;
    struct mock_pci *switches;
    size_t n_switches;
    unsigned switch_device_id;
    struct mock_topology_override *overrides;
    size_t n_overrides;
    uint64_t loaded_ns; /* CLOCK_MONOTONIC at load: time 0 of telemetry */
};

/* Why a GPU is lost, as fault lines left it (survives re-init; see mock-events.c). */
enum mock_lost {
    MOCK_LOST_PROFILE = 0, /* as the profile says */
    MOCK_LOST_RUNTIME,     /* a "lost" line: handles can be acquired, calls fail */
    MOCK_LOST_RECOVERED,   /* a "recover" line: not lost, whatever the profile says */
};

struct mock_event {
    unsigned gpu;
    unsigned long long type, data;
    unsigned gi, ci;
    bool lost; /* deliver NVML_ERROR_GPU_IS_LOST instead of an event */
};

#define MOCK_QUEUE_MAX 1024

struct nvmlEventSet_st {
    struct nvmlEventSet_st *next;
    unsigned long long mask[MOCK_MAX_GPUS];
    struct mock_event queue[MOCK_QUEUE_MAX];
    size_t head, len;
};

/* The fault file reader's position; process-wide, kept across init cycles. */
struct mock_tail {
    char *path;
    bool known; /* dev/ino below are valid */
    uint64_t dev, ino;
    uint64_t offset;
    unsigned line;
    bool skipping; /* inside an over-long line */
};

struct mock_state {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC; broadcast when events are queued */
    bool cond_ready;
    unsigned refcount;
    struct mock_node *node;
    struct nvmlEventSet_st *sets;
    struct mock_tail tail;
    enum mock_lost lost[MOCK_MAX_GPUS];
    struct nvmlGpmSample_st *gpm_samples; /* allocated GPM samples */
    bool has_error;
    char error[DIAG_MSG_MAX];
};

extern struct mock_state mock;

/* Takes the library mutex; use through MOCK_LOCKED, which releases it at the end of the scope. */
struct mock_state *mock_lock(void);
void mock_unlockp(struct mock_state **s);
#define MOCK_LOCKED _cleanup_(mock_unlockp) _unused_ struct mock_state *mock_locked_ = mock_lock()

/* NVML_SUCCESS when initialised, else NVML_ERROR_UNINITIALIZED. */
nvmlReturn_t mock_ready(void);
/* mock_ready, then new lines of the fault file applied: where every query of the node starts. */
nvmlReturn_t mock_enter(void);
/* Whether h is the address of one of the n elements of size bytes at base. Handles are checked
 * this way, so a stale or made-up pointer is never dereferenced. */
bool mock_handle_in(const void *h, const void *base, size_t n, size_t size);
/* Initialised, fault file read, h one of our device handles and ptr_ok (the caller's out-pointers
 * are not NULL), the GPU not lost: the handle, else the error in that order. */
nvmlReturn_t mock_device(nvmlDevice_t h, bool ptr_ok, struct nvmlDevice_st **ret);
/* mock_device for calls on full GPUs only: a MIG handle answers on_mig. */
nvmlReturn_t mock_full_gpu(nvmlDevice_t h, bool ptr_ok, nvmlReturn_t on_mig, struct mock_gpu **ret);
/* Copies s into buf; NVML_ERROR_INSUFFICIENT_SIZE when it does not fit with its NUL. */
nvmlReturn_t mock_copy_string(char *buf, unsigned length, const char *s);
bool mock_gpu_lost(const struct mock_gpu *gpu);
bool mock_gpu_lost_at_start(const struct mock_gpu *gpu);

/* Profile (mock-profile*.c). */
_wur_ int mock_profile_load(const char *path, struct diag *d, struct mock_node **ret);
struct mock_node *mock_node_free(struct mock_node *node);
DEFINE_POINTER_CLEANUP(struct mock_node, mock_node_free)
/* Finds a full GPU or MIG device by UUID. */
struct nvmlDevice_st *mock_find_uuid(const struct mock_node *node, const char *uuid);

/* PCI addresses (mock-device.c). */
/* Parses "0000:18:00.0" / "00000000:18:00.0" (any case). */
bool mock_parse_bus_id(const char *s, struct mock_pci *ret);
void mock_format_pci(const struct mock_pci *pci, unsigned device_id, unsigned subsystem_id,
                     nvmlPciInfo_t *ret);

/* MIG (mock-mig.c). */
const struct mock_mig_table *mock_mig_table_by_name(const char *name);
const struct mock_mig_table *mock_mig_table_for_gpu(const char *gpu_name);
const struct mock_gi_profile *mock_mig_profile_by_name(const struct mock_mig_table *t,
                                                       const char *name);
/* The driver's default GPU instance id for a placement. */
unsigned mock_mig_default_gi_id(const struct mock_gi_profile *p, unsigned start);
/* Whether a GPU instance of G slices can hold a compute instance of C slices; its profile index. */
bool mock_mig_ci_profile(unsigned gi_slices, unsigned ci_slices, unsigned *ret_index);

/* Events (mock-events.c). */
/* Reads new lines of the fault file, if any, and applies them. Lock held. */
void mock_events_poll(void);
/* At the first init: forgets the reader's position and run-time losses if the path changed. */
void mock_events_attach(const char *path);
/* At the last shutdown: frees the event sets still open. */
void mock_events_release(void);

/* Telemetry (mock-telemetry.c). */
/* Marks the node's time 0. */
void mock_telemetry_start(struct mock_node *node);
/* Seconds since the node was loaded. */
double mock_elapsed(void);
/* Applies a telemetry, pcie-replay or remap line to GPU gpu; false (after a message through err)
 * when the line is bad. Lock held. */
bool mock_telemetry_event(unsigned gpu, const char *type, const json_t *obj,
                          void (*err)(const char *msg));
/* Whether type is one of the telemetry line types. */
bool mock_telemetry_type(const char *type);
/* At the last shutdown: frees the GPM samples still allocated. */
void mock_telemetry_release(void);

/* Processes (mock-process.c). */
/* Whether type is one of the process line types (process, process-exit). */
bool mock_process_type(const char *type);
/* Applies a process line to GPU gpu, on the compute instance gi/ci when a MIG UUID named it
 * (NVML_EVENT_NO_INSTANCE otherwise); false (after a message through err) when the line is bad.
 * Lock held. */
bool mock_process_event(unsigned gpu, unsigned gi, unsigned ci, const char *type, const json_t *obj,
                        void (*err)(const char *msg));
/* The bytes the processes on dev hold (a MIG device: its GPU instance's), known values only. */
unsigned long long mock_process_memory(const struct nvmlDevice_st *dev);
