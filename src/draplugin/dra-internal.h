/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of `gpuplane dra-driver` share inside the module: the options (dra-main.c), the
 * fault points (dra-fault.c), the registration socket (dra-register.c), the DRA services
 * (dra-service.c), the per-claim work behind them (dra-prepare.c), the gRPC health service
 * (dra-healthcheck.c) and the daemon that wires them on one event loop (dra-daemon.c). Everything
 * here runs on the loop thread unless it says otherwise.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>

#include "base.h"
#include "cli.h"
#include "dra-checkpoint.h"
#include "dra.h"
#include "ev.h"
#include "gpu.h"
#include "kube.h"
#include "nvcdi.h"
#include "rpc.h"

#define DRA_COMMAND "dra-driver"
#define DRA_DEFAULT_DRIVER "gpu.nvidia.com"
#define DRA_DEFAULT_REGISTRAR_DIR "/var/lib/kubelet/plugins_registry"
#define DRA_DEFAULT_PLUGINS_DIR "/var/lib/kubelet/plugins"
#define DRA_DEFAULT_CDI_ROOT "/var/run/cdi"
#define DRA_SOCKET_NAME "dra.sock"
#define DRA_CHECKPOINT_NAME "checkpoint.json"
/* The environment variable that names a fault point (dra-fault.c). */
#define DRA_FAULT_ENV "GPUPLANE_DRA_FAULT"

/* ---- options (dra-main.c) ---- */

struct dra_options {
    struct cli_common common;
    char *node_name;        /* --node-name, NODE_NAME; required */
    char *driver_name;      /* --driver-name, DRIVER_NAME; gpu.nvidia.com */
    char *registrar_dir;    /* --kubelet-registrar-directory-path */
    char *plugins_dir;      /* --kubelet-plugins-directory-path */
    char *cdi_root;         /* --cdi-root, CDI_ROOT */
    char *kubeconfig;       /* --kubeconfig, KUBECONFIG (NULL: in-cluster) */
    char *driver_root;      /* --nvidia-driver-root, NVIDIA_DRIVER_ROOT; "/" (NULL with --mock) */
    char *dev_root;         /* --nvidia-dev-root, NVIDIA_DEV_ROOT; "" = the driver root */
    char *hook_path;        /* --nvidia-cdi-hook-path, NVIDIA_CDI_HOOK_PATH; NULL = nvcdi's */
    char *sysfs_root;       /* --sysfs-root, GPUPLANE_SYSFS_ROOT; "/" (pcieRoot attributes) */
    long healthcheck_port;  /* --healthcheck-port, HEALTHCHECK_PORT; < 0 disabled */
    double kube_qps;        /* --kube-api-qps, KUBE_API_QPS; 5 */
    long kube_burst;        /* --kube-api-burst, KUBE_API_BURST; 10 */
    long recovery_window_s; /* --health-recovery-window, seconds; 60; 0 = never (NVIDIA's) */
    bool allow_insecure;    /* --kube-allow-insecure: honour insecure-skip-tls-verify */
    bool list_fault_points; /* --list-fault-points */
};

void dra_options_init(struct dra_options *o);
void dra_options_release(struct dra_options *o);
/* Environment first, then the flags over it. -EINVAL with the reason in d (ending with the
 * pointer to --help) for a usage error. */
_wur_ int dra_options_parse(int argc, char **argv, struct dra_options *o, struct diag *d);
void dra_options_print_help(FILE *out);

/* ---- fault points (dra-fault.c) ---- */

/* Reads DRA_FAULT_ENV once; -EINVAL with d for a name that is not a fault point. */
_wur_ int dra_fault_init(struct diag *d);
/* Kills the process with SIGKILL when point is the armed fault point (a crash with no clean-up:
 * what a power cut or the OOM killer would leave). */
void dra_fault(const char *point);
/* The known points, NULL-terminated. */
extern const char *const dra_fault_points[];

/* ---- the registration socket (dra-register.c) ---- */

struct dra_registrar;

/*
 * Serves pluginregistration.Registration on socket (<registrar dir>/<driver>-reg.sock): GetInfo
 * says DRAPlugin, driver, endpoint, ["v1.DRAPlugin", "v1beta1.DRAPlugin"]. The socket is checked
 * every second and served again when it (or its directory) vanished, as a restarting kubelet
 * leaves things; a NotifyRegistrationStatus with plugin_registered=false makes the socket be
 * re-created after a back-off, so that the plugin watcher sees a new file and tries again.
 */
_wur_ int dra_registrar_new(struct ev_loop *loop, const char *socket, const char *driver,
                            const char *endpoint, struct diag *d, struct dra_registrar **ret);
struct dra_registrar *dra_registrar_free(struct dra_registrar *r);
DEFINE_POINTER_CLEANUP(struct dra_registrar, dra_registrar_free)

/* Identity of a file: tmpfs reuses inode numbers, so the change time goes with them. */
struct dra_file_id {
    bool exists;
    dev_t dev;
    ino_t ino;
    struct timespec ctime;
};
void dra_file_id_get(const char *path, struct dra_file_id *ret);
bool dra_file_id_equal(const struct dra_file_id *a, const struct dra_file_id *b);

/* ---- claims (dra-prepare.c) ---- */

struct dra_preparer;

/* What prepare works with; all of it outlives the preparer. */
struct dra_prepare_ctx {
    struct ev_loop *loop;
    struct ev_work_pool *pool; /* file writes that fsync (one thread keeps them in order) */
    struct kube_client *kube;
    const struct nvcdi *nv;
    const struct gpu_inventory *inv;
    const char *node;
    const char *driver;
    const char *cdi_root;
    const char *mps_root; /* MPS sharing's per-claim directories: <plugins dir>/<driver>/mps */
    const char *checkpoint_path;
};

/* The outcome of one claim: error NULL on success, then devices is the claim's device list in
 * the checkpoint's shape (borrowed, valid during the callback). */
struct dra_claim_result {
    const char *error;
    json_t *devices;
};

typedef void (*dra_claim_done_fn)(const struct dra_claim_result *res, void *userdata);

/* Takes over cp (the checkpoint as loaded). */
_wur_ int dra_preparer_new(const struct dra_prepare_ctx *ctx, struct dra_checkpoint *cp,
                           struct dra_preparer **ret);
/* Frees every claim operation; their callbacks are not called. After ev_loop_free of the loop
 * (the completions of work still queued then refer to the preparer). */
struct dra_preparer *dra_preparer_free(struct dra_preparer *p);
DEFINE_POINTER_CLEANUP(struct dra_preparer, dra_preparer_free)
/* From now on operations finish without starting further steps (shutdown). */
void dra_preparer_stop(struct dra_preparer *p);

/* Prepares / unprepares one claim. fn runs exactly once (perhaps before this returns), unless the
 * preparer is freed first. Operations on the same UID run one after the other, in call order. */
void dra_prepare_claim(struct dra_preparer *p, const char *ns, const char *name, const char *uid,
                       dra_claim_done_fn fn, void *userdata);
void dra_unprepare_claim(struct dra_preparer *p, const char *ns, const char *name, const char *uid,
                         dra_claim_done_fn fn, void *userdata);

/* ---- the DRA services (dra-service.c) ---- */

/* Adds NodePrepareResources and NodeUnprepareResources of v1 and v1beta1 to srv. */
_wur_ int dra_service_add(struct rpc_server *srv, struct dra_preparer *p);

/* ---- the gRPC health service (dra-healthcheck.c) ---- */

struct dra_healthcheck;

/* Serves grpc.health.v1.Health/Check on 127.0.0.1:port (0: a free port, logged). serving() tells
 * whether the driver is healthy. */
_wur_ int dra_healthcheck_new(struct ev_loop *loop, long port, bool (*serving)(void *userdata),
                              void *userdata, struct diag *d, struct dra_healthcheck **ret);
struct dra_healthcheck *dra_healthcheck_free(struct dra_healthcheck *h);
DEFINE_POINTER_CLEANUP(struct dra_healthcheck, dra_healthcheck_free)

/* ---- the daemon (dra-daemon.c) ---- */

/* Runs until SIGTERM/SIGINT. The options stay the caller's. Returns an exit code. */
int dra_daemon_run(const struct dra_options *o);
