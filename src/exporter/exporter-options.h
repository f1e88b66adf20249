/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The options of `gpuplane exporter` under dcgm-exporter's flag and variable names (flag >
 * environment > default; dcgm-exporter has no config file). Flags that only make sense for DCGM's
 * host engine are accepted, so that a DaemonSet written for dcgm-exporter starts unchanged, and
 * reported when set (exporter-options.c). A string slice of dcgm-exporter's
 * (--kubernetes-pod-label-allowlist-regex) is a NULL-terminated list, split as urfave/cli splits
 * one: every value at its commas, each part trimmed; the flag repeats, and flags replace the
 * variable's list.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base.h"
#include "cli.h"

#define EXPORTER_COMMAND "exporter"
#define EXPORTER_DEFAULT_ADDRESS ":9400"
#define EXPORTER_DEFAULT_POD_RESOURCES "/var/lib/kubelet/pod-resources/kubelet.sock"

enum exporter_gpu_id_type {
    EXPORTER_ID_UID,         /* pod-resources device ids are GPU UUIDs */
    EXPORTER_ID_DEVICE_NAME, /* ... or nvidia<N> names */
};

struct exporter_options {
    struct cli_common common;
    char *collectors;                      /* -f; NULL: the built-in default counters */
    char *address;                         /* -a; ":9400" */
    uint64_t collect_interval_ms;          /* -c; 30000 */
    bool kubernetes;                       /* -k */
    bool use_old_namespace;                /* -o */
    bool no_hostname;                      /* -n */
    enum exporter_gpu_id_type gpu_id_type; /* --kubernetes-gpu-id-type; uid */
    bool pod_labels;                       /* --kubernetes-enable-pod-labels */
    bool pod_uid;                          /* --kubernetes-enable-pod-uid */
    char **pod_label_allowlist;            /* --kubernetes-pod-label-allowlist-regex; NULL */
    bool dra;                              /* --kubernetes-enable-dra */
    bool virtual_gpus;                     /* --kubernetes-virtual-gpus */
    char *resource_names;                  /* --nvidia-resource-names: extra names, comma list */
    char *pod_resources_socket;            /* --pod-resources-kubelet-socket */
    uint64_t xid_window_ms;                /* -x; 300000 */
    uint64_t clock_events_window_ms;       /* --clock-events-count-window-size; 300000 */
    bool replace_blanks;                   /* --replace-blanks-in-model-name */
    char *web_config_file;                 /* --web-config-file; NULL */
    char *devices;                         /* -d; "f": every GPU and GPU instance */
    char *hostname;                        /* NODE_NAME, else the OS host name */
    char *node_name;                       /* NODE_NAME, or NULL: for the pods' fieldSelector */
    /* DCGM's host engine only: accepted, set ones reported by exporter_options_ignored(). */
    char *remote_hostengine;   /* -r */
    char *switch_devices;      /* -s */
    char *cpu_devices;         /* -p */
    char *hpc_job_mapping_dir; /* --hpc-job-mapping-dir */
    bool systemd_socket;       /* --web-systemd-socket */
};

/* A parsed --devices spec: which entities are exported, and which ids when listed. */
#define EXPORTER_DEVICE_IDS_MAX 1024
struct exporter_devices {
    char
        kind; /* 'f': GPUs, and a GPU in MIG mode as its GPU instances; 'g': GPUs; 'i': instances */
    bool all; /* no id list */
    bool ids[EXPORTER_DEVICE_IDS_MAX]; /* GPU indexes ('f', 'g') or GPU instance ids ('i') */
};

/* Parses a --devices spec: f, g or i, optionally ":" and ids or ranges ("g:0,2-3"). -EINVAL on
 * anything else (ids past EXPORTER_DEVICE_IDS_MAX included). */
_wur_ int exporter_devices_parse(const char *spec, struct exporter_devices *ret);
bool exporter_devices_has(const struct exporter_devices *sel, unsigned id);

void exporter_options_init(struct exporter_options *o);
void exporter_options_release(struct exporter_options *o);
/* Defaults, then the environment, then the flags. -EINVAL with the reason in d (ending with the
 * pointer to --help); o->common.help is set after --help. */
_wur_ int exporter_options_parse(int argc, char **argv, struct exporter_options *o, struct diag *d);
/* The DCGM-only options that were set, as "--name" words joined by ", " in buf ("" for none). */
void exporter_options_ignored(const struct exporter_options *o, char *buf, size_t n);
void exporter_usage(FILE *out);
