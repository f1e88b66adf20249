/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The processes on a GPU shared by pods, for `gpuplane exporter --kubernetes-virtual-gpus`: what
 * each one uses of the GPU (its memory, its share of the SMs) and the pod it belongs to, found from
 * the pod UID in its cgroup path (/proc/<pid>/cgroup), so that DCGM_FI_DEV_FB_USED and
 * DCGM_FI_DEV_GPU_UTIL can be split per pod as dcgm-exporter does
 * (internal/pkg/transformation/process_metrics.go and pidmapper.go).
 *
 * The cgroup parsing and the per-pod sums are pure; exporter_procs_read() calls NVML and reads
 * /proc, so it runs on the collection worker, never in a scrape. exporter-procs.c;
 * docs/exporter.md, "Virtual GPUs".
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "gpu.h"

/* Room for a pod UID with its NUL; a longer run of UID characters is not a UID. */
#define EXPORTER_POD_UID_MAX 128
/* The most bytes of /proc/<pid>/cgroup read. */
#define EXPORTER_CGROUP_FILE_MAX ((size_t)64 << 10)

/*
 * The pod UID in one cgroup path, as dcgm-exporter's extractPodUID finds it: the first "pod"
 * followed by characters of [a-f0-9_-], those characters with '_' as '-' (systemd's slice names
 * spell the UID's dashes as underscores), if there are at least 32 of them. Covers the cgroupfs
 * driver ("/kubepods/burstable/pod<uid>/<container>") and the systemd one
 * (".../kubepods-burstable-pod<uid_with_underscores>.slice/cri-containerd-<id>.scope"), cgroup v1
 * and v2. true with the UID in ret, else false.
 */
bool exporter_cgroup_path_pod_uid(const char *path, size_t len, char ret[EXPORTER_POD_UID_MAX]);

/*
 * The pod UID of a process from the text of its /proc/<pid>/cgroup (len bytes), lines
 * "hierarchy-id:controllers:path": the v1 hierarchies' paths first, in file order, then the
 * unified (v2) one "0::path", as dcgm-exporter looks (containerd's ParseCgroupFileUnified).
 * 1 with the UID in ret, 0 when no path names a pod, -EINVAL for a line without two colons (the
 * parser refuses the whole file then).
 */
_wur_ int exporter_cgroup_pod_uid(const char *text, size_t len, char ret[EXPORTER_POD_UID_MAX]);

/*
 * The pod UID of process pid from <proc_root>/proc/<pid>/cgroup (proc_root NULL, "" or "/" for
 * the root file system; GPUPLANE_PROC_ROOT lets tests and containers point elsewhere). As
 * exporter_cgroup_pod_uid, and -ENOENT (the process is gone), other read errors, -EFBIG past
 * EXPORTER_CGROUP_FILE_MAX.
 */
_wur_ int exporter_proc_pod_uid(const char *proc_root, uint32_t pid,
                                char ret[EXPORTER_POD_UID_MAX]);

/* One process on a device. */
struct exporter_proc {
    uint32_t pid;
    char uid[EXPORTER_POD_UID_MAX]; /* its pod's UID; "" when it is not a pod's */
    bool have_memory;
    uint64_t memory_mib; /* whole MiB (bytes / 2^20, rounded down, as dcgm-exporter) */
    bool have_util;
    unsigned sm_util; /* % of the SMs, from its newest sample */
};

/* The processes of one device read in a collection. */
struct exporter_procs {
    struct exporter_proc *v; /* owned */
    size_t n;
    bool memory_ok; /* the memory of its processes was read */
    bool util_ok;   /* their utilisation was read (no sample at all counts: none ran) */
};

void exporter_procs_release(struct exporter_procs *p);

/*
 * Reads the processes of GPU gpu, or of the GPU instance of its MIG device mig (every compute
 * instance of it), each with its pod from proc_root: memory when memory, utilisation when util
 * (full GPUs only: the driver keeps no samples per MIG device). A list that cannot be read leaves
 * its _ok false; a process whose cgroup file cannot be read counts as no pod's. Blocks in NVML and
 * on /proc: the worker's. -ENOMEM; *ret is written only on success.
 */
_wur_ int exporter_procs_read(struct gpu_telemetry *t, const struct gpu_inventory *inv, size_t gpu,
                              int mig, const char *proc_root, bool memory, bool util,
                              struct exporter_procs *ret);

/*
 * The value of metric m (GPU_METRIC_FB_USED: MiB; GPU_METRIC_GPU_UTIL: %) for the pod uid: the sum
 * over its processes that have one, 0 when none has. false when the list of m was not read, m is
 * neither metric, or uid is NULL or "" (a pod whose UID is not known cannot be told apart).
 */
bool exporter_procs_pod_value(const struct exporter_procs *p, enum gpu_metric m, const char *uid,
                              double *ret);
