/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Prometheus text exposition (format 0.0.4) of one collection, byte for byte as dcgm-exporter
 * writes its GPU metrics: the template gpuMetricsFormat of internal/pkg/rendermetrics/
 * render_metrics.go, fed by toMetric and toString of internal/pkg/collector/gpu_collector.go and by
 * the Kubernetes transformation (internal/pkg/transformation/kubernetes.go). Per metric family:
 *
 *   # HELP <field> <help>
 *   # TYPE <field> <type>
 *   <field>{gpu="0",UUID="GPU-…",pci_bus_id="…",device="nvidia0",modelName="…"[,GPU_I_PROFILE="…",
 *   GPU_I_ID="…"][,hostname="…"][,<label fields>…][,<attributes>…]} <value>
 *
 * Families come in DCGM field id order (Go's template sorts the map of counters by key, whose first
 * member is the field id), and a family without any series is left out, HELP and TYPE included
 * (the map only has counters that got a value). Label-type fields follow the fixed labels in sorted
 * key order, then the attributes (Kubernetes, DRA, err_code/err_msg) in sorted key order. Unlike
 * the Go template, label values and help texts are escaped as the format requires.
 *
 * A pod's own labels (--kubernetes-enable-pod-labels) are sorted in with the label-type fields, as
 * in upstream's Labels map; one whose name the sample already has is left out, so that no name is
 * ever printed twice.
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "exporter-internal.h"

int exporter_add_label_value(struct strbuf *out, const char *s)
{
    int r = 0;
    for (const char *p = s; *p && r >= 0; p++) {
        switch (*p) {
        case '\\':
            r = strbuf_add(out, "\\\\", 2);
            break;
        case '"':
            r = strbuf_add(out, "\\\"", 2);
            break;
        case '\n':
            r = strbuf_add(out, "\\n", 2);
            break;
        default:
            r = strbuf_addch(out, *p);
        }
    }
    return r;
}

int exporter_add_query_value(struct strbuf *out, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    int r = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && r >= 0; p++) {
        unsigned char c = *p;
        bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                     c == '_' || c == '-' || c == '.' || c == '~';
        if (plain)
            r = strbuf_addch(out, (char)c);
        else if ((r = strbuf_addch(out, '%')) >= 0 && (r = strbuf_addch(out, hex[c >> 4])) >= 0)
            r = strbuf_addch(out, hex[c & 15]);
    }
    return r;
}

/* HELP text escapes: backslash and newline only. */
static int add_help(struct strbuf *out, const char *s)
{
    int r = 0;
    for (const char *p = s; *p && r >= 0; p++) {
        if (*p == '\\')
            r = strbuf_add(out, "\\\\", 2);
        else if (*p == '\n')
            r = strbuf_add(out, "\\n", 2);
        else
            r = strbuf_addch(out, *p);
    }
    return r;
}

/* A value as dcgm-exporter's toString prints it: fmt's %d for INT64 fields, %f for DOUBLE ones
 * (Go spells the non-finite values NaN, +Inf, -Inf, as the exposition format does). */
static int add_value(struct strbuf *out, double v, enum exporter_value_kind kind)
{
    if (isnan(v))
        return strbuf_addstr(out, "NaN");
    if (isinf(v))
        return strbuf_addstr(out, v > 0 ? "+Inf" : "-Inf");
    if (kind == EXPORTER_VALUE_INT) {
        /* Whole by the gpu module's contract; round what is not (half away from zero, without
         * libm: every daemon would map it for this one call), and clamp to int64 as DCGM's INT64
         * would be. */
        int64_t i;
        if (v >= 9223372036854775807.0)
            i = INT64_MAX;
        else if (v <= -9223372036854775808.0)
            i = INT64_MIN;
        else {
            i = (int64_t)v; /* exact for whole values of any size */
            double frac = v - (double)i;
            i += frac >= 0.5 ? 1 : frac <= -0.5 ? -1 : 0;
        }
        return strbuf_addf(out, "%" PRId64, i);
    }
    return strbuf_addf(out, "%f", v);
}

static int add_label(struct strbuf *out, const char *key, const char *value)
{
    int r = strbuf_addch(out, ',');
    if (r >= 0)
        r = strbuf_addstr(out, key);
    if (r >= 0)
        r = strbuf_add(out, "=\"", 2);
    if (r >= 0)
        r = exporter_add_label_value(out, value);
    if (r >= 0)
        r = strbuf_addch(out, '"');
    return r;
}

/* modelName with --replace-blanks-in-model-name: Go's strings.Fields joined by "-" (runs of
 * whitespace become one dash, leading and trailing whitespace goes). */
static int add_model_name(struct strbuf *out, const char *name, bool replace_blanks)
{
    if (!replace_blanks)
        return exporter_add_label_value(out, name);

    struct strbuf sb = STRBUF_INIT;
    bool pending_dash = false;
    int r = 0;
    for (const char *p = name; *p && r >= 0; p++) {
        bool space =
            *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\v' || *p == '\f';
        if (space) {
            pending_dash = sb.len > 0;
            continue;
        }
        if (pending_dash) {
            r = strbuf_addch(&sb, '-');
            pending_dash = false;
        }
        if (r >= 0)
            r = strbuf_addch(&sb, *p);
    }
    if (r >= 0)
        r = exporter_add_label_value(out, strbuf_str(&sb));
    strbuf_release(&sb);
    return r;
}

/* A label of a series with its name for the options in force. */
struct attr {
    const char *key;
    const char *value;
};

static int compare_attrs(const void *a, const void *b)
{
    const struct attr *x = a, *y = b;
    return strcmp(x->key, y->key);
}

static const char *attr_key(const char *key, bool old_namespace)
{
    if (!old_namespace)
        return key;
    if (strcmp(key, "pod") == 0)
        return "pod_name";
    if (strcmp(key, "namespace") == 0)
        return "pod_namespace";
    if (strcmp(key, "container") == 0)
        return "container_name";
    return key;
}

/* The label-type fields of a series, sorted by name (the counters are in id order). */
struct label_field {
    const char *key;
    const char *str; /* the value, or NULL: it is in value */
    char value[330]; /* room for any "%f" of a double */
};

static int compare_label_fields(const void *a, const void *b)
{
    const struct label_field *const *x = a, *const *y = b;
    return strcmp((*x)->key, (*y)->key);
}

/* Whether a sample of se already has a label named key: a fixed one, one of labels[0..n) or an
 * attribute. A pod label by that name is left out (upstream drops only those equal to an
 * attribute, and prints the others twice, which makes the whole page invalid). */
static bool pod_label_taken(const char *key, const struct exporter_series *se,
                            const struct exporter_render_options *o,
                            const struct label_field *labels, size_t n, const struct attr *attrs,
                            size_t n_attrs)
{
    static const char *const fixed[] = {"gpu", "pci_bus_id", "device", "modelName"};
    bool mig = se->mig_profile && se->mig_profile[0];
    for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
        if (strcmp(key, fixed[i]) == 0)
            return true;
    if (strcmp(key, o->use_old_namespace ? "uuid" : "UUID") == 0 ||
        (mig && (strcmp(key, "GPU_I_PROFILE") == 0 || strcmp(key, "GPU_I_ID") == 0)) ||
        (o->hostname && o->hostname[0] && strcmp(key, "hostname") == 0))
        return true;
    for (size_t i = 0; i < n; i++)
        if (strcmp(key, labels[i].key) == 0)
            return true;
    for (size_t i = 0; i < n_attrs; i++)
        if (strcmp(key, attrs[i].key) == 0)
            return true;
    return false;
}

/* The label-type fields of se, the extra labels of one sample (a window's) and the pod's labels,
 * sorted together as dcgm-exporter's Labels map. */
static int add_label_fields(struct strbuf *out, const struct exporter_counters *c,
                            const struct exporter_snapshot *s, const struct exporter_series *se,
                            const struct exporter_label *extra, size_t n_extra,
                            const struct exporter_render_options *o, const struct attr *attrs,
                            size_t n_attrs)
{
    _cleanup_free_ struct label_field *labels = NULL;
    _cleanup_free_ struct label_field **order = NULL;
    const size_t max = c->n + n_extra + se->n_pod_labels;
    size_t n = 0;
    int r = 0;

    if (max == 0)
        return 0;
    labels = calloc(max, sizeof(*labels));
    order = calloc(max, sizeof(*order));
    if (!labels || !order)
        return -ENOMEM;
    for (size_t i = 0; i < n_extra; i++) {
        labels[n] = (struct label_field){.key = extra[i].key, .str = extra[i].value};
        order[n] = &labels[n];
        n++;
    }
    for (size_t i = 0; i < c->n; i++) {
        const struct exporter_field *f = c->v[i].field;
        struct label_field *l = &labels[n];
        if (c->v[i].type != EXPORTER_LABEL)
            continue;
        l->key = f->name;
        switch (f->source) {
        case EXPORTER_SOURCE_DRIVER_VERSION:
            if (!s->driver_version)
                continue;
            l->str = s->driver_version;
            break;
        case EXPORTER_SOURCE_XID:
            if (!se->have_xid)
                continue;
            snprintf(l->value, sizeof(l->value), "%" PRIu64, se->last_xid);
            break;
        case EXPORTER_SOURCE_METRIC: {
            if (!(se->sample.have & (UINT64_C(1) << f->metric)))
                continue;
            struct strbuf v = STRBUF_INIT;
            r = add_value(&v, se->sample.v[f->metric], f->kind);
            if (r >= 0)
                snprintf(l->value, sizeof(l->value), "%s", strbuf_str(&v));
            strbuf_release(&v);
            if (r < 0)
                return r;
            break;
        }
        case EXPORTER_SOURCE_XID_COUNT:
        case EXPORTER_SOURCE_CLOCK_EVENTS_COUNT:
        case EXPORTER_SOURCE_NONE:
            continue;
        }
        order[n] = l;
        n++;
    }
    for (size_t i = 0; i < se->n_pod_labels; i++) {
        const struct exporter_label *p = &se->pod_labels[i];
        if (!p->key || !p->value || pod_label_taken(p->key, se, o, labels, n, attrs, n_attrs))
            continue;
        labels[n] = (struct label_field){.key = p->key, .str = p->value};
        order[n] = &labels[n];
        n++;
    }
    if (n > 1)
        qsort(order, n, sizeof(*order), compare_label_fields);
    for (size_t i = 0; i < n && r >= 0; i++)
        r = add_label(out, order[i]->key, order[i]->str ? order[i]->str : order[i]->value);
    return r;
}

/* Whether series se is printed for field f (exporter_series.fields). */
static bool series_has_field(const struct exporter_series *se, const struct exporter_field *f)
{
    bool listed =
        f->source == EXPORTER_SOURCE_METRIC && (se->field_metrics & (UINT64_C(1) << f->metric));
    switch (se->fields) {
    case EXPORTER_FIELDS_ONLY:
        return listed;
    case EXPORTER_FIELDS_EXCEPT:
        return !listed;
    case EXPORTER_FIELDS_ALL:
        break;
    }
    return true;
}

/* The value of counter k for series se: 1 with the value in *ret, 0 when the series has none. */
static int series_value(const struct exporter_counter *k, const struct exporter_series *se,
                        double *ret)
{
    const struct exporter_field *f = k->field;
    if (!series_has_field(se, f))
        return 0;
    switch (f->source) {
    case EXPORTER_SOURCE_METRIC:
        if (!(se->sample.have & (UINT64_C(1) << f->metric)))
            return 0;
        *ret = se->sample.v[f->metric];
        return 1;
    case EXPORTER_SOURCE_XID:
        if (!se->have_xid)
            return 0;
        *ret = (double)se->last_xid;
        return 1;
    case EXPORTER_SOURCE_DRIVER_VERSION:
    case EXPORTER_SOURCE_XID_COUNT:
    case EXPORTER_SOURCE_CLOCK_EVENTS_COUNT:
    case EXPORTER_SOURCE_NONE:
        return 0;
    }
    return 0;
}

/* One sample line: the counter k of series se with value, and the extra labels of this sample. */
struct sample {
    const struct exporter_counter *k;
    const struct exporter_series *se;
    double value;
    const struct exporter_label *extra;
    size_t n_extra;
};

static int render_sample(struct strbuf *out, const struct sample *sm,
                         const struct exporter_counters *c, const struct exporter_snapshot *s,
                         const struct exporter_render_options *o)
{
    const struct exporter_counter *k = sm->k;
    const struct exporter_series *se = sm->se;
    _cleanup_free_ struct attr *attrs = NULL;
    char gpu[24], gi[24], err_code[24];
    size_t n_attrs = 0;
    int r;

    snprintf(gpu, sizeof(gpu), "%u", se->gpu);
    r = strbuf_addstr(out, k->field->name);
    if (r >= 0)
        r = strbuf_addf(out, "{gpu=\"%s\",%s=\"", gpu, o->use_old_namespace ? "uuid" : "UUID");
    if (r >= 0)
        r = exporter_add_label_value(out, se->uuid ? se->uuid : "");
    if (r >= 0)
        r = strbuf_addstr(out, "\",pci_bus_id=\"");
    if (r >= 0)
        r = exporter_add_label_value(out, se->pci_bus_id ? se->pci_bus_id : "");
    if (r >= 0)
        r = strbuf_addf(out, "\",device=\"nvidia%s\",modelName=\"", gpu);
    if (r >= 0)
        r = add_model_name(out, se->model_name ? se->model_name : "",
                           o->replace_blanks_in_model_name);
    if (r >= 0)
        r = strbuf_addch(out, '"');
    /* The template tests the profile name: an empty one counts as none. */
    if (r >= 0 && se->mig_profile && se->mig_profile[0]) {
        snprintf(gi, sizeof(gi), "%u", se->gpu_instance_id);
        r = add_label(out, "GPU_I_PROFILE", se->mig_profile);
        if (r >= 0)
            r = add_label(out, "GPU_I_ID", gi);
    }
    if (r >= 0 && o->hostname && o->hostname[0])
        r = add_label(out, "hostname", o->hostname);
    if (r < 0)
        return r;

    attrs = calloc(se->n_labels + 2, sizeof(*attrs));
    if (!attrs)
        return -ENOMEM;
    for (size_t i = 0; i < se->n_labels; i++) {
        if (!se->labels[i].key || !se->labels[i].value)
            continue;
        attrs[n_attrs++] =
            (struct attr){attr_key(se->labels[i].key, o->use_old_namespace), se->labels[i].value};
    }
    if (k->field->source == EXPORTER_SOURCE_XID) {
        snprintf(err_code, sizeof(err_code), "%" PRIu64, se->last_xid);
        attrs[n_attrs++] = (struct attr){"err_code", err_code};
        attrs[n_attrs++] = (struct attr){"err_msg", exporter_xid_message(se->last_xid)};
    }
    if (n_attrs > 1)
        qsort(attrs, n_attrs, sizeof(*attrs), compare_attrs);
    /* The Labels come first but are made last: a pod label must not repeat an attribute. */
    r = add_label_fields(out, c, s, se, sm->extra, sm->n_extra, o, attrs, n_attrs);
    for (size_t i = 0; i < n_attrs && r >= 0; i++)
        r = add_label(out, attrs[i].key, attrs[i].value);

    if (r >= 0)
        r = strbuf_add(out, "} ", 2);
    if (r >= 0)
        r = add_value(out, sm->value, k->field->kind);
    if (r >= 0)
        r = strbuf_addch(out, '\n');
    return r;
}

static int add_header(struct strbuf *out, const struct exporter_counter *k)
{
    int r = strbuf_addf(out, "# HELP %s ", k->field->name);
    if (r >= 0)
        r = add_help(out, k->help);
    if (r >= 0)
        r = strbuf_addf(out, "\n# TYPE %s %s\n", k->field->name, exporter_prom_type_name(k->type));
    return r;
}

/*
 * A count over a window, as dcgm-exporter's expCollector prints it: per series one sample per key
 * seen in the window (labels window_size_in_ms and xid or clock_event), or one sample of 0 with
 * window_size_in_ms only when nothing was seen. Every series has samples, so the family always
 * shows.
 */
static int render_window(struct strbuf *out, const struct exporter_counter *k,
                         const struct exporter_counters *c, const struct exporter_snapshot *s,
                         const struct exporter_render_options *o)
{
    bool xid = k->field->source == EXPORTER_SOURCE_XID_COUNT, header = false;
    char window[24], key[24];
    int r = 0;

    snprintf(window, sizeof(window), "%" PRIu64,
             xid ? s->xid_window_ms : s->clock_events_window_ms);
    for (size_t j = 0; j < s->n && r >= 0; j++) {
        const struct exporter_series *se = &s->series[j];
        const struct exporter_window_count *v = xid ? se->xid_counts : se->clock_event_counts;
        size_t n = xid ? se->n_xid_counts : se->n_clock_event_counts;
        struct exporter_label labels[2] = {{"window_size_in_ms", window}, {NULL, key}};
        struct sample sm = {.k = k, .se = se, .extra = labels, .n_extra = 1};

        if (!series_has_field(se, k->field))
            continue;
        if (!header) {
            r = add_header(out, k);
            header = true;
        }
        if (r >= 0 && n == 0)
            r = render_sample(out, &sm, c, s, o);
        for (size_t i = 0; i < n && r >= 0; i++) {
            labels[1].key = xid ? "xid" : "clock_event";
            if (xid)
                snprintf(key, sizeof(key), "%" PRIu64, v[i].key);
            else
                snprintf(key, sizeof(key), "%s", exporter_clock_event_name(v[i].key));
            sm.value = (double)v[i].count;
            sm.n_extra = 2;
            r = render_sample(out, &sm, c, s, o);
        }
    }
    return r;
}

int exporter_render(const struct exporter_counters *c, const struct exporter_snapshot *s,
                    const struct exporter_render_options *o, struct strbuf *out)
{
    int r = 0;

    for (size_t i = 0; i < c->n && r >= 0; i++) {
        const struct exporter_counter *k = &c->v[i];
        bool header = false;
        double value;

        if (k->type == EXPORTER_LABEL)
            continue;
        if (k->field->source == EXPORTER_SOURCE_XID_COUNT ||
            k->field->source == EXPORTER_SOURCE_CLOCK_EVENTS_COUNT) {
            r = render_window(out, k, c, s, o);
            continue;
        }
        for (size_t j = 0; j < s->n && r >= 0; j++) {
            const struct exporter_series *se = &s->series[j];
            if (!series_value(k, se, &value))
                continue;
            if (!header) {
                r = add_header(out, k);
                header = true;
            }
            struct sample sm = {.k = k, .se = se, .value = value};
            if (r >= 0)
                r = render_sample(out, &sm, c, s, o);
        }
    }
    return r;
}
