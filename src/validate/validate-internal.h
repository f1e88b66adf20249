/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the validate module share: the options (validate-options.c), the status files
 * (validate-files.c), the checks (validate-driver.c, validate-toolkit.c, validate-plugin.c,
 * validate-cuda.c), waiting for files (validate-wait.c) and the blocking API calls the checks make
 * (validate-kube.c).
 *
 * A check answers VALIDATE_READY, VALIDATE_NOT_READY (the reason in the diag; worth asking again
 * with WITH_WAIT) or a negative errno (a failure asking again cannot mend, reason in the diag).
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base.h"
#include "cli.h"

#define VALIDATE_COMMAND "validate"

/* NVIDIA's defaults. */
#define VALIDATE_DEFAULT_OUTPUT_DIR "/run/nvidia/validations"
#define VALIDATE_DEFAULT_SLEEP_MS 5000u
#define VALIDATE_DEFAULT_PLUGIN_RETRIES 30u
#define VALIDATE_DEFAULT_DRIVER_INSTALL_DIR "/run/nvidia/driver"
/* Where the validator's pod mounts the host's root file system (NVIDIA's fixed path). */
#define VALIDATE_DEFAULT_HOST_ROOT_CTR_PATH "/host"
/* The path other components mount a containerised driver's root at (driver-ready's
 * DRIVER_ROOT_CTR_PATH), fixed by NVIDIA's manifests. */
#define VALIDATE_DRIVER_ROOT_CTR_PATH "/driver-root"
#define VALIDATE_DEFAULT_CDI_DIRS "/etc/cdi,/var/run/cdi"
#define VALIDATE_DEFAULT_CONTAINERD_CONFIG "/etc/containerd/config.toml"
#define VALIDATE_DEFAULT_CRIO_CONFIG "/etc/crio/crio.conf"
#define VALIDATE_DEFAULT_RUNTIME_CLASS "nvidia"
#define VALIDATE_CDI_KIND "nvidia.com/gpu"
#define VALIDATE_DRA_DRIVER "gpu.nvidia.com"

/* The status files, as NVIDIA names them. */
#define VALIDATE_FILE_DRIVER "driver-ready"
#define VALIDATE_FILE_TOOLKIT "toolkit-ready"
#define VALIDATE_FILE_PLUGIN "plugin-ready"
#define VALIDATE_FILE_CUDA "cuda-ready"
/* Written by NVIDIA's driver container (its startup probe) when the driver is up. */
#define VALIDATE_FILE_DRIVER_CTR ".driver-ctr-ready"

/* A file name `validate wait` accepts: at most this long. */
#define VALIDATE_NAME_MAX 128

enum validate_command {
    VALIDATE_NONE,
    VALIDATE_DRIVER,
    VALIDATE_TOOLKIT,
    VALIDATE_PLUGIN,
    VALIDATE_CUDA,
    VALIDATE_WAIT,
    VALIDATE_CLEANUP,
};

enum validate_result {
    VALIDATE_READY = 0,
    VALIDATE_NOT_READY = 1,
};

struct validate_options {
    struct cli_common common;
    enum validate_command command;
    /* NVIDIA's flags and variables */
    bool with_wait;     /* WITH_WAIT: retry a failed check every sleep interval */
    bool with_workload; /* WITH_WORKLOAD: accepted; gpuplane runs no workload pods */
    bool cleanup_all;   /* CLEANUP_ALL: empty the output directory first */
    bool skip_gpu_init; /* DRIVER_VALIDATION_SKIP_GPU_INIT */
    bool no_dev_char;   /* DISABLE_DEV_CHAR_SYMLINK_CREATION: accepted (nothing to disable) */
    char *component;    /* COMPONENT, as given */
    char *output_dir;   /* OUTPUT_DIR */
    uint64_t sleep_ms;  /* SLEEP_INTERVAL_SECONDS, in milliseconds */
    char *node_name;    /* NODE_NAME */
    char *namespace_;   /* OPERATOR_NAMESPACE */
    char *kubeconfig;   /* KUBECONFIG */
    char *mig_strategy; /* MIG_STRATEGY: accepted */
    long metrics_port;  /* METRICS_PORT: accepted */
    char *workload;     /* DEFAULT_GPU_WORKLOAD_CONFIG: accepted */
    char *host_root;    /* HOST_ROOT: the host's root, as the host sees it */
    char *driver_dir;   /* DRIVER_INSTALL_DIR: the driver container's root on the host */
    char *driver_ctr;   /* DRIVER_INSTALL_DIR_CTR_PATH: the same, as this container sees it */
    /* gpuplane's own */
    char *host_ctr;          /* HOST_ROOT_CTR_PATH: the host's root as this container sees it */
    unsigned plugin_retries; /* PLUGIN_RETRIES: 0 = no limit */
    char *cdi_dirs;          /* CDI_SPEC_DIRS: comma-separated host paths */
    char *containerd_config; /* CONTAINERD_CONFIG: a host path */
    char *crio_config;       /* CRIO_CONFIG: a host path */
    char *runtime_class;     /* VALIDATOR_RUNTIME_CLASS: the runtime handler's name */
    uint64_t timeout_ms;     /* wait --timeout; 0 = none */
    char **files;            /* wait: the names (borrowed from argv) */
    size_t n_files;
};

/* ---- validate-options.c ---- */

void validate_options_init(struct validate_options *o);
void validate_options_release(struct validate_options *o);
/*
 * Reads the variables, then the command line (argv[0] is "validate"; flags win), as NVIDIA's
 * validator: `--flag value`, `--flag=value`, one dash or two, its short aliases (-c, -w, -n, -ns,
 * -o, -s, ...), booleans as `--flag` or `--flag=false`. The first argument that is not an option
 * names the check (else --component / COMPONENT); `wait` takes file names after it. -EINVAL with
 * the message in d (naming the flag or variable) for a usage error; -ENOMEM.
 */
_wur_ int validate_options_parse(int argc, char **argv, struct validate_options *o, struct diag *d);
/* --help: the check's own page, or the command's overview for VALIDATE_NONE. */
void validate_usage(FILE *out, enum validate_command command);
/* "driver", "wait", ...; NULL for VALIDATE_NONE. */
const char *validate_command_name(enum validate_command command);
/* Parses "driver", "toolkit", ...; VALIDATE_NONE for anything else. */
enum validate_command validate_command_parse(const char *s);
/* Go's strconv.ParseBool, as urfave/cli reads booleans. */
_wur_ int validate_parse_bool(const char *s, bool *ret);
/* Seconds as NVIDIA's integer SLEEP_INTERVAL_SECONDS, with fractions allowed ("0.2"): > 0, at
 * most a day; in milliseconds, rounded up. */
_wur_ int validate_parse_seconds(const char *s, uint64_t *ret_ms);
/* A duration for --timeout: seconds ("90", "1.5") or a number with a unit (ms, s, m, h; "2m30s");
 * 0 = no limit. In milliseconds. */
_wur_ int validate_parse_duration(const char *s, uint64_t *ret_ms);

/* ---- validate.c ---- */

/* Sleeps ms milliseconds (through signals that do not end the process). */
void validate_sleep_ms(uint64_t ms);

/* ---- validate-files.c ---- */

/* Whether name may be a status file name: 1 to VALIDATE_NAME_MAX characters of letters, digits,
 * '.', '_', '-', neither "." nor ".." (so no '/' and no way out of the directory). */
bool validate_name_ok(const char *name);
/* Creates the output directory (and its parents) with mode 0755 when absent. */
_wur_ int validate_dir_prepare(const char *dir, struct diag *d);
/* Removes dir/name; already absent is fine. */
_wur_ int validate_file_remove(const char *dir, const char *name, struct diag *d);
/* Writes dir/name with body (mode 0644) atomically: a temporary file in dir, fsync, rename. */
_wur_ int validate_file_write(const char *dir, const char *name, const char *body, struct diag *d);
/* Whether dir/name exists as a regular file. */
bool validate_file_exists(const char *dir, const char *name);
/*
 * Removes the status files from dir: every regular file or link whose name ends in "-ready" and
 * does not start with '.' (all = false: the validator's preStop, `rm -f dir/ *-ready`), or every
 * entry that is not a directory (all = true: CLEANUP_ALL). *ret_removed (may be NULL) counts them.
 * A missing dir is not an error.
 */
_wur_ int validate_cleanup(const char *dir, bool all, struct diag *d, unsigned *ret_removed);

/* ---- validate-wait.c ---- */

/*
 * Waits until every one of the n names exists as a regular file in dir: inotify on dir (woken by
 * the rename that creates each file), polling once a second while dir is missing or inotify is not
 * available, and a look at every log interval anyway (a file system whose events do not reach
 * this process). Logs which files it still waits for every log_ms. 0 when all are there,
 * -ETIMEDOUT after timeout_ms (0: never).
 */
_wur_ int validate_wait_files(const char *dir, char *const *names, size_t n, uint64_t timeout_ms,
                              uint64_t log_ms);

/* ---- validate-driver.c ---- */

/* Where the NVML library the checks use was found. */
struct validate_driver_info {
    bool is_host_driver;
    char lib[4096]; /* the library loaded */
    char driver_version[80];
    unsigned n_gpus;
};

/* A lib directory under a root (NVIDIA's search list), exposed for tests. */
extern const char *const validate_lib_dirs[];

/*
 * Finds libnvidia-ml.so.1 in root's library directories, following links inside root (an absolute
 * link target is taken relative to root, as the file system it belongs to sees it): *ret (size n)
 * gets the resolved path (under root) of the first regular, non-empty file found. -ENOENT when
 * there is none.
 */
_wur_ int validate_find_nvml(const char *root, char *ret, size_t n);

/*
 * The NVML library the checks load and whether it is the host's driver: --mock / --nvml-lib /
 * GPUPLANE_NVML_LIB when given; else the host's (under host_ctr), else the driver container's
 * (under driver_ctr). VALIDATE_NOT_READY when neither root has one.
 */
_wur_ int validate_locate_driver(const struct validate_options *o, bool *ret_host, char *ret_lib,
                                 size_t n, struct diag *d);

struct gpu_nvml;
struct gpu_inventory;

/*
 * Loads NVML from lib and reads its GPUs (no topology), for the driver and CUDA checks: READY
 * with both (the caller closes and frees them, the inventory first), NOT_READY with the reason in
 * d, -ENOMEM.
 */
_wur_ int validate_open_nvml(const char *lib, struct gpu_nvml **ret_nvml,
                             struct gpu_inventory **ret_inv, struct diag *d);

/* driver-ready's body (NVIDIA's keys), for the host driver or the driver container. */
_wur_ int validate_driver_body(const struct validate_options *o, bool is_host, struct strbuf *out);

/* The driver check: VALIDATE_READY with driver-ready's body in body. */
_wur_ int validate_driver(const struct validate_options *o, struct strbuf *body, struct diag *d);

/* ---- validate-cuda.c ---- */

_wur_ int validate_cuda(const struct validate_options *o, struct diag *d);

/* ---- validate-toolkit.c ---- */

/* What a scan of one runtime configuration found about the handler. */
struct validate_runtime_hit {
    bool found;        /* a table (or key) of the handler exists */
    char binary[1024]; /* BinaryName (containerd) / runtime_path (CRI-O), "" when not set */
};

/*
 * Scans TOML text for the runtime handler's configuration: a table or key under
 * plugins."io.containerd.grpc.v1.cri".containerd.runtimes.<handler> (containerd config v2),
 * plugins."io.containerd.cri.v1.runtime".containerd.runtimes.<handler> (v3),
 * plugins.cri.containerd.runtimes.<handler> (v1) or crio.runtime.runtimes.<handler> (CRI-O).
 * A line-oriented reader of the TOML these files use (tables, dotted and quoted keys, basic and
 * literal strings, comments), not a full TOML parser.
 */
void validate_scan_runtime_config(const char *text, const char *handler,
                                  struct validate_runtime_hit *ret);

/* The CDI part of the toolkit check: the path of the first spec of kind in one of dirs (a comma
 * list, each under root) that loads, validates and has at least one device. VALIDATE_NOT_READY
 * (the reasons in d, which this initialises) when there is none. */
_wur_ int validate_find_cdi_spec(const char *root, const char *dirs, const char *kind,
                                 char *ret_path, size_t n, size_t *ret_devices, struct diag *d);

_wur_ int validate_toolkit(const struct validate_options *o, struct diag *d);

/* ---- validate-kube.c ---- */

struct validate_kube;

/* The answer to one request. body is owned (json_decref). */
struct validate_reply {
    int status; /* HTTP status; 0 when no answer came */
    json_t *body;
    char reason[64];
    char message[512];
};

void validate_reply_release(struct validate_reply *r);

/* Whether an API server is configured at all: --kubeconfig, $KUBECONFIG or the in-cluster
 * variables. */
bool validate_kube_configured(const char *kubeconfig);
_wur_ int validate_kube_open(const char *kubeconfig, struct diag *d, struct validate_kube **ret);
struct validate_kube *validate_kube_close(struct validate_kube *k);
DEFINE_POINTER_CLEANUP(struct validate_kube, validate_kube_close)
/* A GET (list: every page of a collection) run to its end. Fails only when the request cannot
 * be started; an HTTP error comes back in ret. */
_wur_ int validate_kube_get(struct validate_kube *k, const char *path, bool list,
                            struct validate_reply *ret);

/* Whether a driver DaemonSet of the operator (label app.kubernetes.io/component=nvidia-driver,
 * controlled by a nvidia.com ClusterPolicy or NVIDIADriver) exists in namespace (NULL: any). */
_wur_ int validate_driver_managed(struct validate_kube *k, const char *namespace_, bool *ret,
                                  struct diag *d);

/* ---- validate-plugin.c ---- */

/* Whether a Kubernetes quantity ("8", "1k", "500m", "2Gi") is at least 1. -EINVAL when it is not a
 * quantity. */
_wur_ int validate_quantity_at_least_one(const char *q, bool *ret);
/* The first GPU resource of a Node's status.allocatable (nvidia.com/gpu*, nvidia.com/mig-*) with
 * at least 1, or NULL. */
const char *validate_node_gpu_resource(const json_t *node, const char **ret_quantity);
/* The devices in a ResourceSlice list's items (the driver's slices for the node). */
size_t validate_slice_devices(const json_t *list);

_wur_ int validate_plugin(const struct validate_options *o, struct diag *d);
