/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CDI specs for NVIDIA GPUs, as NVIDIA's `nvidia-ctk cdi generate` writes them (cdi.md §7): from
 * the GPU inventory (NVML) and the driver's files on disk under a driver root (the host's "/", or
 * /run/nvidia/driver for a containerised driver). A spec has one device per GPU and per MIG device
 * under each naming strategy ("0", "GPU-<uuid>", "0:1", "MIG-<uuid>", "gpu0", "mig0:1"), a device
 * "all", and spec-level edits shared by every device: control device nodes, the driver's
 * libraries and tools mounted read-only, and the nvidia-cdi-hook hooks.
 *
 * With --mock, nvcdi_mock_root_new makes the driver root of the simulated node (nvcdi-mock.c).
 *
 * Used by `gpuplane cdi generate`, by the device plugin (kind k8s.device-plugin.nvidia.com/gpu,
 * names following its device-id strategy) and by the DRA driver (per-claim specs built from
 * nvcdi_add_common_edits and nvcdi_add_device_edits).
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "base.h"
#include "cdi.h"
#include "gpu.h"

#define NVCDI_KIND "nvidia.com/gpu"
#define NVCDI_KIND_DEVICE_PLUGIN "k8s.device-plugin.nvidia.com/gpu"
#define NVCDI_KIND_MANAGEMENT "management.nvidia.com/gpu"
#define NVCDI_KIND_CLAIM "k8s.gpu.nvidia.com/claim"
#define NVCDI_HOOK_PATH "/usr/bin/nvidia-cdi-hook"
/* Longest device name a strategy makes ("MIG-" + UUID is 40). */
#define NVCDI_NAME_MAX 128

/* How devices are named; the generator takes a set of them (one device per name). */
enum nvcdi_name_strategy {
    NVCDI_NAME_INDEX = 1 << 0,      /* "0", MIG "0:1" (GPU index : MIG index) */
    NVCDI_NAME_UUID = 1 << 1,       /* "GPU-<uuid>", "MIG-<uuid>" */
    NVCDI_NAME_TYPE_INDEX = 1 << 2, /* "gpu0", "mig0:1" */
};
#define NVCDI_NAME_DEFAULT (NVCDI_NAME_INDEX | NVCDI_NAME_UUID)

struct nvcdi_options {
    const char *kind;        /* NULL: NVCDI_KIND */
    const char *driver_root; /* NULL or "": "/"; absolute; the driver's files are under it */
    const char *dev_root;    /* NULL or "": the driver root; where dev/nvidia* are */
    const char *hook_path;   /* NULL: NVCDI_HOOK_PATH (the path in the container) */
    unsigned strategies;     /* NVCDI_NAME_* bits; 0: NVCDI_NAME_DEFAULT */
    bool no_all_device;      /* leave out the device "all" */
    bool no_hooks;           /* no OCI hooks at all (the device plugin's CDI_DISABLE_HOOKS=all) */
};

/* "index", "uuid" or "type-index" -> one NVCDI_NAME_* bit. */
_wur_ int nvcdi_name_strategy_parse(const char *s, enum nvcdi_name_strategy *ret);

/*
 * The CDI device name of a full GPU (mig NULL) or of a MIG device of gpu under one strategy.
 * -EINVAL when the device lacks what the strategy needs (no UUID) or the result is not a valid
 * CDI device name.
 */
_wur_ int nvcdi_device_name(const struct gpu_device *gpu, const struct gpu_mig_device *mig,
                            enum nvcdi_name_strategy strategy, char buf[static NVCDI_NAME_MAX]);
/* "<kind>=<device name>", e.g. "nvidia.com/gpu=GPU-6b4c...". The caller frees *ret. */
_wur_ int nvcdi_qualified_name(const char *kind, const struct gpu_device *gpu,
                               const struct gpu_mig_device *mig, enum nvcdi_name_strategy strategy,
                               char **ret);
/*
 * For the device plugin's Allocate: the qualified CDI name of a device id as advertised to the
 * kubelet ("GPU-...", "MIG-...", "0", "1:0", or a replica "GPU-...::3", whose "::<r>" suffix is
 * dropped because replicas share the physical device). -EINVAL for an id that cannot be a CDI
 * name. The caller frees *ret.
 */
_wur_ int nvcdi_qualified_name_for_id(const char *kind, const char *device_id, char **ret);

/* What was found under the driver root, ready to build edits from; read once, used many times. */
struct nvcdi;

/*
 * Checks the options and scans the driver root: control device nodes, the driver's libraries
 * (*.so.<driver version> in the library directories, vdpau/ included), GSP firmware, IPC sockets,
 * the driver's tools, and the MIG capability minors (proc/driver/nvidia-caps/mig-minors, needed
 * only when the inventory has MIG devices). The driver version comes from inv. Symlinked
 * directories inside the root are not followed: the root may be a container's file system, whose
 * absolute links point elsewhere on the host.
 */
_wur_ int nvcdi_new(const struct gpu_inventory *inv, const struct nvcdi_options *opts,
                    struct diag *d, struct nvcdi **ret);
struct nvcdi *nvcdi_free(struct nvcdi *nv);
DEFINE_POINTER_CLEANUP(struct nvcdi, nvcdi_free)

/* Normalises an absolute directory path from outside (a flag, a profile): printable ASCII, no
 * "." or ".." components, an existing directory; "/" becomes "". The caller frees *ret. */
_wur_ int nvcdi_check_root(const char *path, const char *what, struct diag *d, char **ret);

/* The spec-level edits: env, control nodes, mounts, hooks. */
_wur_ int nvcdi_add_common_edits(const struct nvcdi *nv, struct cdi_edits *e, struct diag *d);
/* The edits of one full GPU (mig NULL) or MIG device: /dev/nvidia<minor>, plus the GI and CI
 * capability nodes of a MIG device. -ENOENT when the GPU's device node or a MIG capability minor
 * is missing. */
_wur_ int nvcdi_add_device_edits(const struct nvcdi *nv, const struct gpu_device *gpu,
                                 const struct gpu_mig_device *mig, struct cdi_edits *e,
                                 struct diag *d);

/*
 * The whole spec for every usable GPU of inv (a GPU with an NVML error, e.g. lost, is left out;
 * *ret_skipped, may be NULL, counts them). The caller owns *ret.
 */
_wur_ int nvcdi_spec_new(const struct nvcdi *nv, const struct gpu_inventory *inv, struct diag *d,
                         struct cdi_spec **ret, size_t *ret_skipped);

/* The driver root of a simulated node (--mock): see nvcdi-mock.c. */
struct nvcdi_mock_root {
    char *path;        /* the driver root (and dev root) */
    char *cdi_hook;    /* <path>/usr/bin/nvidia-cdi-hook when gpuplane made the root, else NULL */
    char *ctk;         /* <path>/usr/bin/nvidia-ctk likewise */
    bool made;         /* made for this process: nvcdi_mock_root_free removes it */
    bool lasting;      /* a lasting root (nvcdi_mock_root_open_lasting): never removed here */
    bool char_devices; /* its device nodes are character devices (mknod was allowed) */
    pid_t owner;       /* the process that made it, the only one that removes it */
};

/*
 * The driver root of a --mock run that was given none: the profile's driverRoot key (the profile
 * named by MOCK_NVML_PROFILE, a path relative to it), else a root made for inv in a private
 * directory under $TMPDIR or /tmp (gpuplane-mock-XXXXXX, mode 0700), with mock_lib (the mock
 * library, an absolute path) as libnvidia-ml.so.<driver version>. The caller owns *ret and frees
 * it with nvcdi_mock_root_free before it exits, which removes a root made here.
 */
_wur_ int nvcdi_mock_root_new(const struct gpu_inventory *inv, const char *mock_lib, struct diag *d,
                              struct nvcdi_mock_root **ret);

/*
 * Like nvcdi_mock_root_new, but the root made (when the profile has no driverRoot) outlives the
 * process, so that a spec naming it stays usable: $TMPDIR/gpuplane-mock-<euid>-<name>, <name>
 * from profile (the --mock argument) and MOCK_NVML_PROFILE (nvcdi_mock_root_name). It is reused by
 * later calls when it is a directory of the effective uid with mode 0700 whose marker holds the
 * same recipe (driver version, GPUs and MIG devices, the mock library's path, size and mtime);
 * anything else at that path (a link, a file, another owner or mode) is refused. A missing or
 * stale root is built in a directory beside it and renamed into place, so no caller ever uses a
 * half-built one. nvcdi_mock_root_free never removes it (rm -rf does).
 */
_wur_ int nvcdi_mock_root_open_lasting(const struct gpu_inventory *inv, const char *mock_lib,
                                       const char *profile, struct diag *d,
                                       struct nvcdi_mock_root **ret);
struct nvcdi_mock_root *nvcdi_mock_root_free(struct nvcdi_mock_root *m);
DEFINE_POINTER_CLEANUP(struct nvcdi_mock_root, nvcdi_mock_root_free)
