/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the exporter's pod metadata: the input's first line is an allowlist (comma
 * separated, as the variable), the rest a JSON array of [event, pod] pairs (event 0 added,
 * 1 modified, 2 deleted, 3 synced) applied to the cache. Bad patterns and bad pods are refused,
 * never a crash or a leak. Every pod the cache keeps must have distinct, valid, sorted label names,
 * and a series carrying those labels must render with no label name twice in any sample, whatever
 * names the pod chose (gpu, hostname, pod, DCGM_FI_DRIVER_VERSION, err_code...).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exporter-podmeta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_PATTERNS 8

static struct exporter_counters counters;
static bool have_counters;

static void load_counters(void)
{
    static const char csv[] = "DCGM_FI_DEV_GPU_TEMP, gauge, t\n"
                              "DCGM_FI_DEV_XID_ERRORS, gauge, x\n"
                              "DCGM_FI_DRIVER_VERSION, label, v\n";
    struct diag d;
    if (have_counters)
        return;
    exporter_counters_init(&counters);
    diag_init(&d);
    if (exporter_counters_parse(csv, strlen(csv), "t.csv", &counters, &d) < 0)
        __builtin_trap();
    have_counters = true;
}

/* No sample line of text has a label name twice. */
static void check_distinct(const char *text)
{
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        const char *open = strchr(line, '{');
        if (!end)
            __builtin_trap();
        if (line[0] != '#' && open && open < end) {
            /* names start after '{' or after '",', and end at '="' */
            const char *names[512];
            size_t n = 0;
            for (const char *p = open + 1; p < end && n < ARRAY_SIZE(names);) {
                const char *eq = strstr(p, "=\"");
                if (!eq || eq > end)
                    break;
                names[n++] = p;
                const char *q = eq + 2;
                while (q < end && *q != '"')
                    q += *q == '\\' ? 2 : 1;
                p = q + 2; /* past '",' */
            }
            for (size_t i = 0; i < n; i++)
                for (size_t j = i + 1; j < n; j++) {
                    size_t li = (size_t)(strstr(names[i], "=\"") - names[i]);
                    size_t lj = (size_t)(strstr(names[j], "=\"") - names[j]);
                    if (li == lj && memcmp(names[i], names[j], li) == 0)
                        __builtin_trap();
                }
        }
        line = end + 1;
    }
}

static void check_pod(const struct exporter_podmeta_pod *m)
{
    static const struct exporter_label attrs[] = {
        {"pod", "p"}, {"namespace", "n"}, {"container", "c"}, {"pod_uid", "u"}, {"vgpu", "1"}};
    for (size_t i = 0; i < m->n_labels; i++) {
        if (!exporter_podmeta_name_ok(m->labels[i].key) || !m->labels[i].value)
            __builtin_trap();
        if (i > 0 && strcmp(m->labels[i - 1].key, m->labels[i].key) >= 0)
            __builtin_trap();
    }
    if (m->n_labels > EXPORTER_POD_LABELS_MAX)
        __builtin_trap();
    struct exporter_series se = {
        .gpu = 0,
        .uuid = "GPU-0",
        .pci_bus_id = "0",
        .model_name = "m",
        .mig_profile = m->n_labels % 2 ? "1g.10gb" : NULL,
        .have_xid = true,
        .labels = attrs,
        .n_labels = ARRAY_SIZE(attrs),
        .pod_labels = m->labels,
        .n_pod_labels = m->n_labels,
    };
    se.sample.have = UINT64_C(1) << GPU_METRIC_GPU_TEMP;
    const struct exporter_snapshot s = {.series = &se, .n = 1, .driver_version = "1"};
    const struct exporter_render_options o = {.hostname = "h",
                                              .use_old_namespace = m->n_labels % 3 == 0};
    struct strbuf out = STRBUF_INIT;
    if (exporter_render(&counters, &s, &o, &out) < 0)
        __builtin_trap();
    check_distinct(strbuf_str(&out));
    strbuf_release(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    const char *nl = memchr(text, '\n', size);
    struct exporter_allowlist al;
    struct exporter_podmeta *pm = NULL;
    json_error_t err;

    load_counters();
    if (!nl)
        return 0;
    exporter_allowlist_init(&al);
    char *patterns = strndup(text, (size_t)(nl - text));
    size_t n_patterns = 0;
    for (char *p = patterns, *next; p && n_patterns < MAX_PATTERNS; p = next, n_patterns++) {
        struct diag d;
        next = strchr(p, ',');
        if (next)
            *next++ = '\0';
        diag_init(&d);
        if (exporter_allowlist_add(&al, p, &d) < 0 && !d.msg[0])
            __builtin_trap();
    }
    free(patterns);

    json_t *events = json_loadb(nl + 1, size - (size_t)(nl + 1 - text), 0, &err);
    const struct exporter_podmeta_options po = {.labels = true, .allowlist = &al, .max_pods = 16};
    if (exporter_podmeta_new(&po, &pm) < 0)
        __builtin_trap();
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev)
    {
        json_int_t kind = json_integer_value(json_array_get(ev, 0));
        json_t *pod = json_array_get(ev, 1);
        if (kind < 0 || kind > 3)
            continue;
        (void)!exporter_podmeta_apply(pm, (enum kube_event)kind, pod);
        json_t *meta = json_object_get(pod, "metadata");
        struct exporter_podmeta_pod m;
        if (exporter_podmeta_find(pm, json_string_value(json_object_get(meta, "namespace")),
                                  json_string_value(json_object_get(meta, "name")), &m))
            check_pod(&m);
    }
    if (exporter_podmeta_count(pm) > 16)
        __builtin_trap();
    exporter_podmeta_free(pm);
    json_decref(events);
    exporter_allowlist_release(&al);
    return 0;
}
