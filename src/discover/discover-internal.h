/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of `gpuplane discover` share inside the module: the options with their flag >
 * environment > config file precedence (discover-options.c), the labels computed from the inventory
 * (discover-labels.c, pure: no I/O, no logging), the two outputs (discover-output.c: the NFD local
 * features file; discover-nodefeature.c: the NodeFeature custom resource) and the daemon's loop
 * (discover-daemon.c). Everything runs on the loop thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base.h"
#include "cli.h"
#include "discover.h"
#include "gpu.h"

#define DISCOVER_COMMAND "discover"
#define DISCOVER_DEFAULT_OUTPUT "/etc/kubernetes/node-feature-discovery/features.d/gfd"
#define DISCOVER_DEFAULT_MACHINE_FILE "/sys/class/dmi/id/product_name"
#define DISCOVER_DEFAULT_SLEEP_MS 60000u

/* ---- labels (discover-labels.c) ---- */

enum discover_mig {
    DISCOVER_MIG_NONE,
    DISCOVER_MIG_SINGLE,
    DISCOVER_MIG_MIXED,
};

/* How one resource is shared, from the config file's sharing section (time-slicing or MPS). */
struct discover_share {
    const char
        *resource; /* full name as the config says it: "nvidia.com/gpu", "nvidia.com/mig-1g.5gb" */
    unsigned replicas;    /* replicas per device (> 1 means shared) */
    bool renamed;         /* advertised under another name: no "-SHARED" product suffix */
    const char *strategy; /* "time-slicing" or "mps" */
};

struct discover_input {
    const struct gpu_inventory *inv;
    enum discover_mig mig;
    const struct discover_share *shares;
    size_t n_shares;
    const char *machine; /* the DMI product name as read (unsanitised), NULL when unreadable */
    int64_t timestamp;   /* Unix seconds for nvidia.com/gfd.timestamp; < 0: no timestamp label */
};

struct discover_label {
    char *key; /* "nvidia.com/gpu.product" */
    char *value;
};

/* A label set, sorted by key, keys unique. Warnings are for the caller to log (several GPU models
 * on one node: the last one wins, as NVIDIA's GFD; both models are named). */
struct discover_labels {
    struct discover_label *v;
    size_t n;
    char **warnings; /* NULL-terminated, may be NULL */
};

/* Computes every label of the node from in. -ENOMEM, or -EINVAL with d when the input cannot be
 * labelled at all. A node without GPUs gets no labels (n == 0). */
_wur_ int discover_labels_compute(const struct discover_input *in, struct diag *d,
                                  struct discover_labels *ret);
void discover_labels_release(struct discover_labels *l);
/* The value of key, or NULL. */
const char *discover_labels_get(const struct discover_labels *l, const char *key);
/* Whether two sets hold the same keys and values. */
bool discover_labels_equal(const struct discover_labels *a, const struct discover_labels *b);
/* NVIDIA's sanitising of product and machine names: drop characters outside [A-Za-z0-9-_. ],
 * then every run of whitespace becomes one '-'. Writes a NUL-terminated result of at most n-1. */
void discover_sanitise(const char *in, char *out, size_t n);

/* ---- options (discover-options.c) ---- */

#define DISCOVER_SLEEP_INFINITE UINT64_MAX

struct discover_options {
    struct cli_common common;
    enum discover_mig mig;   /* --mig-strategy; GFD_MIG_STRATEGY, MIG_STRATEGY; flags.migStrategy */
    bool fail_on_init_error; /* --fail-on-init-error; true */
    bool oneshot;            /* --oneshot; false */
    bool no_timestamp;       /* --no-timestamp; false */
    uint64_t sleep_interval_ms; /* --sleep-interval; 60 s; DISCOVER_SLEEP_INFINITE for "infinite" */
    char *output_file;          /* --output-file, -o; DISCOVER_DEFAULT_OUTPUT */
    char *machine_type_file;    /* --machine-type-file; DISCOVER_DEFAULT_MACHINE_FILE */
    bool use_node_feature_api;  /* --use-node-feature-api; true (GFD's default since 2025-12) */
    char *config_file;          /* --config-file; GFD_CONFIG_FILE, CONFIG_FILE; NULL: none */
    char *discovery_strategy;   /* --device-discovery-strategy; "auto" */
    char *node_name;            /* --node-name, NODE_NAME: required for the NodeFeature output */
    char *namespace_;           /* --namespace, NAMESPACE (else the kubeconfig's / pod's) */
    char *pod_name;    /* --pod-name, POD_NAME: owner of the NodeFeature (with its DaemonSet) */
    char *kubeconfig;  /* --kubeconfig, KUBECONFIG (NULL: in-cluster) */
    bool print_labels; /* --print-labels: print the labels sorted and exit */
    /* The config file's sharing section (time-slicing or MPS resources), for the labels. */
    struct discover_share *shares;
    size_t n_shares;
};

void discover_options_init(struct discover_options *o);
void discover_options_release(struct discover_options *o);
/* Defaults, then the config file, then the environment, then the flags (flag > env > file). Safe to
 * call again on a released-and-initialised struct with the same argv (SIGHUP reload). -EINVAL with
 * the reason in d; a config file error reads "file:line:col: message". Exit 0 after --help is the
 * caller's: o->common.help is set. */
_wur_ int discover_options_parse(int argc, char **argv, struct discover_options *o, struct diag *d);
/* The --help text. */
void discover_usage(FILE *out);

/* ---- outputs (discover-output.c, discover-nodefeature.c) ---- */

/* "key=value\n" per label, in the set's (sorted) order. */
_wur_ int discover_labels_format(const struct discover_labels *l, struct strbuf *out);
/* Writes the NFD local features file atomically (temporary file, fsync, rename), mode 0644,
 * creating its directory when missing: 1 when written, 0 when it already held these labels. */
_wur_ int discover_output_file(const char *path, const struct discover_labels *l, struct diag *d);

struct kube_client;
struct discover_nf;

struct discover_nf_options {
    const char *node;       /* the node the labels are for */
    const char *namespace_; /* where the NodeFeature lives */
    const char *pod;        /* this pod (owner, with its DaemonSet), or NULL: no owner references */
};

/* What a publication did: unchanged, created or updated; negative with a message on failure. */
enum {
    DISCOVER_NF_UNCHANGED = 0,
    DISCOVER_NF_CREATED = 1,
    DISCOVER_NF_UPDATED = 2,
};
typedef void (*discover_nf_done_fn)(int result, const char *error, void *userdata);

_wur_ int discover_nf_new(struct kube_client *c, const struct discover_nf_options *o,
                          struct discover_nf **ret);
/* Cancels a publication in flight (its function is not called). NULL-safe. */
struct discover_nf *discover_nf_free(struct discover_nf *nf);
DEFINE_POINTER_CLEANUP(struct discover_nf, discover_nf_free)
/* Makes the NodeFeature hold exactly l: created when absent, updated only when its labels, its
 * node-name label or its owners differ. One publication at a time (-EBUSY otherwise); fn runs
 * later, never inside this call. */
_wur_ int discover_nf_publish(struct discover_nf *nf, const struct discover_labels *l,
                              discover_nf_done_fn fn, void *userdata);
/* The name of the node's NodeFeature: "nvidia-features-for-<node>". */
_wur_ int discover_nf_name(const char *node, char *buf, size_t n);
