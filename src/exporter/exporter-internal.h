/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure core of `gpuplane exporter`, shared inside the module: the catalog of DCGM fields and
 * where each value comes from (exporter-fields.c), dcgm-exporter's counters file
 * (exporter-counters.c), its XID messages (exporter-xid.c) and the Prometheus text exposition of a
 * snapshot of telemetry (exporter-render.c). Nothing here calls NVML, logs or touches the network;
 * docs/exporter.md describes the formats and the dcgm-exporter sources they follow.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "gpu.h"

/* ---- the field catalog (exporter-fields.c) ---- */

/* Where the value of a DCGM field comes from. */
enum exporter_source {
    EXPORTER_SOURCE_METRIC,             /* a gpu_metric of the device's gpu_sample */
    EXPORTER_SOURCE_XID,                /* the last XID of the GPU, from NVML's events */
    EXPORTER_SOURCE_DRIVER_VERSION,     /* the driver version string (nvmlSystemGetDriverVersion) */
    EXPORTER_SOURCE_XID_COUNT,          /* XIDs of the GPU within the -x window, by number */
    EXPORTER_SOURCE_CLOCK_EVENTS_COUNT, /* clock event reasons sampled within the window */
    EXPORTER_SOURCE_NONE,               /* known to dcgm-exporter, not answerable through NVML */
};

/* How a value is printed: DCGM's field type (INT64, DOUBLE, STRING), formatted as dcgm-exporter
 * does. */
enum exporter_value_kind {
    EXPORTER_VALUE_INT,    /* a decimal integer */
    EXPORTER_VALUE_FLOAT,  /* "%f": six decimals */
    EXPORTER_VALUE_STRING, /* only usable as a label */
};

struct exporter_field {
    const char *name; /* "DCGM_FI_DEV_GPU_TEMP" */
    /* DCGM's field id. dcgm-exporter prints metric families in field id order (its template
     * ranges over a map keyed by the counter, which Go sorts by FieldID first), and so do we. */
    uint16_t id;
    enum exporter_source source;
    enum gpu_metric metric; /* EXPORTER_SOURCE_METRIC only */
    enum exporter_value_kind kind;
};

/* The field named name (exact, case-sensitive, len bytes), or NULL when dcgm-exporter would not
 * know it either. */
const struct exporter_field *exporter_field_lookup(const char *name, size_t len);
/* The catalog, for iterating: entry i < exporter_field_count(). */
size_t exporter_field_count(void);
const struct exporter_field *exporter_field_at(size_t i);

/* ---- the counters file (exporter-counters.c) ---- */

enum exporter_prom_type {
    EXPORTER_GAUGE,
    EXPORTER_COUNTER,
    EXPORTER_HISTOGRAM, /* accepted as dcgm-exporter does; printed as a plain sample */
    EXPORTER_SUMMARY,   /* idem */
    EXPORTER_LABEL,     /* not a metric: the value becomes a label on every series of the device */
};

/* "gauge", "counter", ... */
const char *exporter_prom_type_name(enum exporter_prom_type t);

struct exporter_counter {
    const struct exporter_field *field; /* borrowed from the catalog */
    enum exporter_prom_type type;
    char *help; /* owned; the help text, trimmed, unquoted */
    unsigned line;
};

struct exporter_counters {
    /* The counters that will be exported, in DCGM field id order (the order of the output). */
    struct exporter_counter *v;
    size_t n;
    /* One "file:line: message" per line that was accepted and skipped (a field NVML cannot answer,
     * an exporter-computed DCGM_EXP_* field): for the daemon to log at start. */
    char **warnings;
    size_t n_warnings;
};

/* The most bytes a counters file may have. */
#define EXPORTER_COUNTERS_MAX_BYTES ((size_t)1 << 20)
/* The name used in the messages about the built-in default file. */
#define EXPORTER_DEFAULT_COUNTERS_NAME "default-counters.csv (built in)"

void exporter_counters_init(struct exporter_counters *c);
void exporter_counters_release(struct exporter_counters *c);

/*
 * Parses a counters file (text, len bytes; need not be NUL-terminated): lines `<DCGM field>,
 * <Prometheus type>, <help>`, blank lines and `#` comments. On failure returns -EINVAL with
 * "filename:line: message" in d; ret is written only on success (the caller releases it).
 */
_wur_ int exporter_counters_parse(const char *text, size_t len, const char *filename,
                                  struct exporter_counters *ret, struct diag *d);

/* Reads and parses the counters file at path, or the built-in default when path is NULL. Errors as
 * for exporter_counters_parse, plus the errno of reading the file. */
_wur_ int exporter_counters_load(const char *path, struct exporter_counters *ret, struct diag *d);

/* The gpu_metric bits (1 << m) the counters need, for gpu_telemetry_read's want. */
uint64_t exporter_counters_metrics(const struct exporter_counters *c);
/* Whether some counter takes its value from source (e.g. the XID events need watching). */
bool exporter_counters_use(const struct exporter_counters *c, enum exporter_source source);

/* The default counters file, dcgm-exporter's etc/default-counters.csv, embedded at build time
 * (generated from src/exporter/default-counters.csv by embed.cmake). NUL-terminated. */
extern const unsigned char exporter_default_counters_csv[];
extern const size_t exporter_default_counters_csv_len;

/* ---- XID messages (exporter-xid.c) ---- */

/* dcgm-exporter's text for an XID: "No Error" for 0, "Unknown Error" past its table. Static. */
const char *exporter_xid_message(uint64_t xid);

/* Generated from src/exporter/xid-messages.csv by xid-table.cmake: the message of XID i, NULL for
 * a hole. */
extern const char *const exporter_xid_table[];
extern const size_t exporter_xid_table_len;

/* ---- events over a sliding window (exporter-window.c) ---- */

struct exporter_window_entry {
    uint64_t t_ms; /* when it happened (CLOCK_MONOTONIC) */
    uint64_t value;
};

/* The last cap values of one GPU, of which those at most span_ms old count. */
struct exporter_window {
    uint64_t span_ms;
    struct exporter_window_entry *ring;
    size_t cap, first, n;
};

/* How often key was seen in the window. */
struct exporter_window_count {
    uint64_t key; /* an XID, or one clock event reason bit */
    uint64_t count;
};

_wur_ int exporter_window_init(struct exporter_window *w, uint64_t span_ms, size_t cap);
void exporter_window_release(struct exporter_window *w);
/* Records value at now_ms (not before the last one added); when full the oldest goes. */
void exporter_window_add(struct exporter_window *w, uint64_t now_ms, uint64_t value);
/*
 * Forgets what is older than span_ms at now_ms and counts the rest, sorted by key: with bits 0 each
 * value once under itself (XIDs); otherwise each value once under every bit of bits it has set (the
 * clock event reasons). *ret (free()) is NULL when nothing is in the window. -ENOMEM.
 */
_wur_ int exporter_window_counts(struct exporter_window *w, uint64_t now_ms, uint64_t bits,
                                 struct exporter_window_count **ret, size_t *ret_n);
/* The clock event reason bits dcgm-exporter counts, and its label value for each ("power_cap"). */
#define EXPORTER_CLOCK_EVENT_BITS UINT64_C(0x1FF)
const char *exporter_clock_event_name(uint64_t bit);

/* ---- the exposition (exporter-render.c) ---- */

/* One extra label of a series: Kubernetes (pod, namespace, container, pod_uid, vgpu), DRA
 * (dra_claim_name, ...), HPC job. Keys are dcgm-exporter's current names; the renderer turns pod,
 * namespace and container into pod_name, pod_namespace and container_name for the old namespace. */
struct exporter_label {
    const char *key;
    const char *value;
};

/* Which fields a series is printed for. */
enum exporter_fields {
    EXPORTER_FIELDS_ALL,    /* every field (the default) */
    EXPORTER_FIELDS_ONLY,   /* only the fields whose value is a metric of field_metrics */
    EXPORTER_FIELDS_EXCEPT, /* every field but those */
};

/* One series: a GPU, or a GPU instance of a MIG GPU. All strings are borrowed. */
struct exporter_series {
    unsigned gpu;            /* GPU index (NVML order) */
    const char *uuid;        /* the GPU's UUID; for a MIG series still the parent GPU's */
    const char *pci_bus_id;  /* "00000000:3B:00.0" */
    const char *model_name;  /* nvmlDeviceGetName */
    const char *mig_profile; /* NULL for a full GPU; "1g.10gb" for a GPU instance */
    unsigned gpu_instance_id;
    struct gpu_sample sample; /* the values the device answered */
    bool have_xid;            /* last_xid is known (0 when no XID happened yet) */
    uint64_t last_xid;
    const struct exporter_label *labels; /* Kubernetes, DRA, HPC: any order */
    size_t n_labels;
    /* The pod's own labels (--kubernetes-enable-pod-labels): printed sorted together with the
     * label-type fields (upstream's Labels), each left out of a sample that already has a label of
     * its name. Any order. */
    const struct exporter_label *pod_labels;
    size_t n_pod_labels;
    /* The GPU's XIDs and clock event reasons over their windows (for a MIG series its GPU's). */
    const struct exporter_window_count *xid_counts;
    size_t n_xid_counts;
    const struct exporter_window_count *clock_event_counts;
    size_t n_clock_event_counts;
    /* A GPU shared by pods (--kubernetes-virtual-gpus) has, for DCGM_FI_DEV_GPU_UTIL and
     * DCGM_FI_DEV_FB_USED, a series of the device and one per pod with its processes' values,
     * and for every other field one per pod: each series says which fields it is for. */
    enum exporter_fields fields;
    uint64_t field_metrics; /* bits 1 << gpu_metric */
};

struct exporter_snapshot {
    const struct exporter_series *series; /* in output order */
    size_t n;
    const char *driver_version; /* NULL: unknown (the label is left out) */
    uint64_t xid_window_ms;     /* -x, for the window_size_in_ms label */
    uint64_t clock_events_window_ms;
};

struct exporter_render_options {
    const char *hostname;              /* the hostname label; NULL: none (--no-hostname) */
    bool use_old_namespace;            /* --use-old-namespace */
    bool replace_blanks_in_model_name; /* --replace-blanks-in-model-name */
};

/*
 * Appends the Prometheus text exposition (0.0.4) of snapshot s for the counters c to out: for each
 * metric counter with at least one series, `# HELP`, `# TYPE`, then one sample line per series that
 * has a value. -ENOBUFS when out's cap is reached, -ENOMEM.
 */
_wur_ int exporter_render(const struct exporter_counters *c, const struct exporter_snapshot *s,
                          const struct exporter_render_options *o, struct strbuf *out);

/* Appends s with the label-value escapes of the exposition format: backslash, double quote and
 * newline become \\, \" and \n. */
_wur_ int exporter_add_label_value(struct strbuf *out, const char *s);
/* Appends s percent-encoded for a URL query value: every byte but [A-Za-z0-9_.~-] as %XX. */
_wur_ int exporter_add_query_value(struct strbuf *out, const char *s);
