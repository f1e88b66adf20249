/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The configuration of `gpuplane device-plugin` and the config file it shares with `gpuplane
 * discover` (src/dpconfig, a library both daemons use): every setting of NVIDIA's
 * k8s-device-plugin under NVIDIA's names (flags, environment variables and the `version: v1`
 * config file), merged with NVIDIA's precedence (flag > environment > file > default), and the
 * file's `flags.gfd` section that only GPU Feature Discovery reads; plus gpuplane's extensions: a
 * `health:` section (ignored and fatal XIDs, probe interval, recovery window), per-resource
 * `rename` and `resources` patterns that are honoured instead of ignored, and per-GPU replica
 * counts in `sharing.*.resources[].devices`. docs/device-plugin-config.md is the user's reference.
 *
 * Every string of a struct dp_config is owned by it (copied from argv, the environment or the
 * file), so the config outlives all three. Errors come back as -EINVAL with a diagnostic naming
 * where the bad value came from: "file:line:col: message" for the config file, "--flag: ..." for a
 * flag, "ENV_VAR: ..." for an environment variable.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base.h"
#include "cli.h"

#define DP_RESOURCE_PREFIX "nvidia.com/"
/* Kubernetes caps a resource name (prefix, '/', name) at 63 characters, as NVIDIA checks it. */
#define DP_RESOURCE_NAME_MAX 63
/* Replicas per device: enough for any MPS or time-slicing setup, small enough that a typo cannot
 * make the plugin advertise millions of devices. */
#define DP_MAX_REPLICAS 1024
/* XIDs are small numbers (NVIDIA documents fewer than 200; the gpu module uses 999 for "unknown").
 */
#define DP_XID_MAX 1023
#define DP_XID_WORDS ((DP_XID_MAX + 64) / 64)

enum dp_mig_strategy {
    DP_MIG_NONE,
    DP_MIG_SINGLE,
    DP_MIG_MIXED,
};

/* Device-list strategies, as a bit set: several may be active at once. */
enum {
    DP_LIST_ENVVAR = 1u << 0,
    DP_LIST_VOLUME_MOUNTS = 1u << 1,
    DP_LIST_CDI_ANNOTATIONS = 1u << 2,
    DP_LIST_CDI_CRI = 1u << 3,
};

enum dp_id_strategy {
    DP_ID_UUID,
    DP_ID_INDEX,
};

enum dp_alloc_policy {
    DP_ALLOC_DISTRIBUTED,
    DP_ALLOC_PACKED,
};

enum dp_discovery {
    DP_DISCOVERY_AUTO,
    DP_DISCOVERY_NVML,
    DP_DISCOVERY_TEGRA,
};

/* resources.gpus[] / resources.mig[]: GPU model (or MIG profile) wildcard -> resource name. */
struct dp_resource_pattern {
    char *pattern; /* '*' wildcards, matched against the whole model name */
    char *name;    /* full resource name ("nvidia.com/..." added when no prefix was given) */
};

/* One selected device of a shared resource. */
struct dp_shared_device {
    char *id;     /* "0" (GPU index), "1:0" (GPU:MIG index), "GPU-..." or "MIG-..." UUID */
    int replicas; /* replicas of this device: the entry's own count (gpuplane) or the resource's */
};

enum dp_devices_kind {
    DP_DEVICES_ALL,   /* every device of the resource */
    DP_DEVICES_COUNT, /* the first `count` devices */
    DP_DEVICES_LIST,  /* the listed devices only */
};

/* sharing.timeSlicing.resources[] / sharing.mps.resources[]. */
struct dp_shared_resource {
    char *name;       /* the resource being shared, full name */
    char *advertised; /* the name it is advertised under: rename, else name(+".shared") */
    bool renamed;     /* advertised comes from an explicit rename */
    int replicas;     /* replicas per device (0 only when every listed device has its own) */
    enum dp_devices_kind devices_kind;
    int devices_count;                /* DP_DEVICES_COUNT */
    struct dp_shared_device *devices; /* DP_DEVICES_LIST */
    size_t n_devices;
};

struct dp_sharing {
    bool configured; /* the section is present in the file */
    bool rename_by_default;
    bool fail_requests_greater_than_one;
    struct dp_shared_resource *resources;
    size_t n_resources;
};

struct dp_health {
    bool enabled;                   /* false: DP_DISABLE_HEALTHCHECKS=all|xids, health.enabled */
    uint64_t ignored[DP_XID_WORDS]; /* XIDs that never make a device unhealthy; others are fatal */
    unsigned probe_interval_ms;     /* one NVML event wait; NVIDIA's 5000 */
    unsigned long recovery_window_ms; /* healthy again after this long without a fatal XID;
                                         default 60 s; 0 = never (NVIDIA's behaviour) */
};

/*
 * flags.gfd and flags.useNodeFeatureAPI: GPU feature discovery's settings in the shared file. The
 * loader checks their types; the device plugin ignores them (as NVIDIA's does) and `gpuplane
 * discover` applies those the file sets. Unset strings are NULL.
 */
struct dp_gfd {
    bool has_oneshot;
    bool oneshot;
    bool has_no_timestamp;
    bool no_timestamp;
    char *sleep_interval;    /* as written ("60s", "infinite"): discover parses it */
    int sleep_interval_line; /* where it is, for discover's "file:line:col" errors */
    int sleep_interval_col;
    char *output_file;
    char *machine_type_file;
    bool has_use_node_feature_api; /* the value is cfg->use_node_feature_api */
};

struct dp_config {
    /* flags (and flags.plugin) of the config file */
    enum dp_mig_strategy mig_strategy;      /* none */
    bool fail_on_init_error;                /* true */
    char *driver_root;                      /* "/" */
    char *dev_root;                         /* "" = the driver root */
    bool pass_device_specs;                 /* false */
    unsigned device_list_strategy;          /* DP_LIST_* bits, never 0; envvar */
    enum dp_id_strategy device_id_strategy; /* uuid */
    bool gdrcopy_enabled;
    bool gds_enabled;
    bool mofed_enabled;
    char *cdi_annotation_prefix;              /* "cdi.k8s.io/" */
    char *nvidia_cdi_hook_path;               /* "/usr/bin/nvidia-ctk" */
    char *container_driver_root;              /* "/driver-root" */
    char *mps_root;                           /* "" */
    enum dp_alloc_policy shared_alloc_policy; /* distributed */
    enum dp_discovery discovery_strategy;     /* auto */
    bool use_node_feature_api;                /* file only; GFD's, kept for print-config */
    struct dp_gfd gfd;                        /* file only; GFD's (flags.gfd) */
    char *kubelet_socket; /* "/var/lib/kubelet/device-plugins/kubelet.sock"; "" = never register */
    char *cdi_spec_dir; /* gpuplane: where cdi-* strategies write specs; "/var/run/cdi" ("" too) */
    char **cdi_feature_flags; /* NULL-terminated, never NULL */
    char **cdi_disable_hooks; /* NULL-terminated, never NULL */
    char *config_file;        /* the file loaded, or NULL */

    /* imex */
    unsigned *imex_channel_ids; /* [] or [0] */
    size_t n_imex_channel_ids;
    bool imex_required;

    /* resources (honoured by gpuplane; NVIDIA parses and ignores them) */
    struct dp_resource_pattern *gpu_patterns;
    size_t n_gpu_patterns;
    struct dp_resource_pattern *mig_patterns;
    size_t n_mig_patterns;

    /* sharing */
    struct dp_sharing time_slicing;
    struct dp_sharing mps;

    /* gpuplane: health (defaults: NVIDIA's ignored XIDs 13, 31, 43, 45, 68, 109) */
    struct dp_health health;

    /* Things the daemon should log as warnings (a library does not log above debug): malformed
     * DP_*_HEALTHCHECKS entries that NVIDIA skips, a time-slicing section overridden by MPS.
     * NULL-terminated, never NULL. */
    char **warnings;

    /* the command line only */
    struct cli_common common; /* -v, --log-format, --mock, --nvml-lib, --help */
    bool print_config;        /* --print-config */
};

/* Fills cfg with the defaults. -ENOMEM. Release with dp_config_release() even on failure. */
_wur_ int dp_config_init(struct dp_config *cfg);
/* Frees what cfg owns and leaves it zeroed. Safe on a zeroed or partly initialised config. */
void dp_config_release(struct dp_config *cfg);

/*
 * Applies a config file on top of cfg (normally the defaults): strict, so unknown keys, wrong
 * types, bad enum values, bad replicas, duplicate resources, invalid resource names and XIDs are
 * errors reported as "file:line:col: message". `version` must be v1 (or absent). On failure cfg
 * may be partly changed; release it.
 */
_wur_ int dp_config_load_file(struct dp_config *cfg, const char *path, struct diag *d);
/* The same from text (tests, fuzzing); name is what messages call the source. */
_wur_ int dp_config_load_string(struct dp_config *cfg, const char *name, const char *text,
                                size_t len, struct diag *d);

/*
 * Cross-setting checks NVIDIA does at start-up (MPS with mig-strategy mixed, MPS without an MPS
 * root, IMEX channel ids) once every source has been applied.
 */
_wur_ int dp_config_validate(const struct dp_config *cfg, struct diag *d);

/* The effective configuration as a config-file-shaped JSON document (version v1, flags, resources,
 * sharing, imex, health): loading it back gives the same configuration. The caller owns *ret. */
_wur_ int dp_config_to_json(const struct dp_config *cfg, json_t **ret);

/* The sharing section in effect: MPS when configured (it wins, as in NVIDIA's plugin), else
 * time-slicing when configured, else NULL. */
const struct dp_sharing *dp_config_sharing(const struct dp_config *cfg);

/* Whether an XID leaves a device healthy under cfg's policy (false for unknown XIDs past the cap,
 * which are fatal). */
bool dp_health_xid_ignored(const struct dp_health *h, unsigned long long xid);

/*
 * The table that ties each setting's flag, environment variable and config-file key together; the
 * flag parser, the environment, the file loader and dp_config_to_json all go through it, so a
 * setting cannot be known to one source and missing from another.
 */
enum dp_kind {
    DP_KIND_BOOL,    /* --flag, --flag=true|false; Go's ParseBool forms; a YAML boolean */
    DP_KIND_STRING,  /* any string; a YAML string */
    DP_KIND_ENUM,    /* one of names; a YAML string */
    DP_KIND_STRINGS, /* comma-separated (repeatable flag); a YAML string or sequence of strings */
    DP_KIND_LIST_STRATEGY, /* like STRINGS, each one of the device-list strategies */
    DP_KIND_CHANNELS,      /* comma-separated integers; a YAML sequence of integers */
    DP_KIND_XIDS,          /* environment only: DP_DISABLE_HEALTHCHECKS, DP_ENABLE_HEALTHCHECKS */
};

struct dp_setting {
    const char *flag;       /* long option without "--", or NULL (environment only) */
    const char *flag_alias; /* NVIDIA's other name, or NULL */
    const char *env;        /* environment variable, or NULL */
    const char *env_alias;  /* second variable (read when env is unset), or NULL */
    const char *key;        /* config-file key path ("flags.plugin.deviceIDStrategy"), or NULL */
    enum dp_kind kind;
    size_t offset;            /* the struct dp_config field */
    const char *const *names; /* DP_KIND_ENUM: value names in enum order, NULL-terminated */
    const char *help;         /* one line for --help */
};

extern const struct dp_setting dp_settings[];
extern const size_t dp_n_settings;

/* Sets one setting from its text form (as a flag or variable gives it). -EINVAL with the reason
 * (`invalid value "foo": want none, single or mixed`) in why. */
_wur_ int dp_setting_apply(const struct dp_setting *s, struct dp_config *cfg, const char *value,
                           char *why, size_t why_size);

/* Names of the enum values, and parsers of them (-EINVAL for anything else; exact, lower case). */
const char *dp_mig_strategy_to_string(enum dp_mig_strategy s);
const char *dp_id_strategy_to_string(enum dp_id_strategy s);
const char *dp_alloc_policy_to_string(enum dp_alloc_policy p);
const char *dp_discovery_to_string(enum dp_discovery s);
_wur_ int dp_mig_strategy_from_string(const char *s, enum dp_mig_strategy *ret);
_wur_ int dp_id_strategy_from_string(const char *s, enum dp_id_strategy *ret);
_wur_ int dp_alloc_policy_from_string(const char *s, enum dp_alloc_policy *ret);
_wur_ int dp_discovery_from_string(const char *s, enum dp_discovery *ret);
/* One device-list strategy name ("envvar", ...) to its DP_LIST_* bit. */
_wur_ int dp_list_strategy_from_string(const char *s, unsigned *ret);

/*
 * Turns a resource name as written in a config (with or without the "nvidia.com/" prefix) into
 * the full name, checking Kubernetes' rules as NVIDIA does: at most 63 characters in all, one '/',
 * a DNS-1123 subdomain on each side. The caller frees *ret. -EINVAL with the reason in why.
 */
_wur_ int dp_resource_name_normalize(const char *s, char **ret, const char **ret_why);

/* Go's strconv.ParseBool ("1", "t", "true", "TRUE", "True", "0", "f", ...). -EINVAL otherwise. */
_wur_ int dp_parse_bool(const char *s, bool *ret);

/*
 * Go-style command lines (dp-config-args.c), shared by the device plugin and discover: each option
 * as `--flag value`, `--flag=value` or with one dash (`-flag=value`, as Go's flag library allows;
 * getopt_long_only), booleans as `--flag` or `--flag=true|false`, the common options of src/cli.
 * The values are recorded, not applied, because a config file named on the command line has to be
 * loaded underneath them.
 */
enum dp_arg_kind {
    DP_ARG_VALUE,  /* takes a value; the last one given wins */
    DP_ARG_LIST,   /* takes a value; repeats accumulate, joined with ',' (Go's string slices) */
    DP_ARG_BOOL,   /* --flag (= "true") or --flag=VALUE */
    DP_ARG_SWITCH, /* --flag alone (recorded as "true") */
};

struct dp_arg {
    const char *name;  /* long name without dashes; NULL: an unused row (keeps indices aligned) */
    const char *alias; /* another long name, or NULL */
    char short_name;   /* a one-letter form taking the same value ("-o FILE"), or 0 */
    enum dp_arg_kind kind;
};

#define DP_ARGS_MAX 64

/* What a command line said, per row of the caller's dp_arg table. */
struct dp_args {
    struct strbuf value[DP_ARGS_MAX];
    const char *used[DP_ARGS_MAX]; /* the name given (an alias as written), NULL: not given */
};

void dp_args_init(struct dp_args *a);
void dp_args_release(struct dp_args *a);

/*
 * Scans argv (argv[0] is the command) against the n rows of table (n <= DP_ARGS_MAX) and the
 * common options (into common). Can run any number of times in a process. -EINVAL with a message
 * ending in "(see 'gpuplane <command> --help')" for an unknown option, a missing value or a stray
 * argument, and for a bad common option (src/cli has then printed it); -ENOMEM.
 */
_wur_ int dp_args_scan(int argc, char **argv, const char *command, const struct dp_arg *table,
                       size_t n, struct cli_common *common, struct dp_args *a, struct diag *d);
