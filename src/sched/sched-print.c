/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane schedule`'s output a pod at a time (sched-print.h). JSON: each pod's result is dumped
 * by jansson with the indentation it has inside the whole document (its lines shifted by the four
 * columns of its depth), between the brackets and commas jansson would put around it. YAML: each
 * result is one element of the `pods` sequence (yaml_emit_item). Table: the rows as they come.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base-doc.h"
#include "base-yaml.h"
#include "sched-print.h"

void sched_printer_init(struct sched_printer *p, enum sched_fmt fmt)
{
    *p = (struct sched_printer){.fmt = fmt};
    strbuf_init(&p->out, SCHED_PRINT_MAX);
}

void sched_printer_release(struct sched_printer *p)
{
    strbuf_release(&p->out);
}

/* v dumped as indented JSON, every line after the first indented `shift` columns more. */
static int add_json(struct strbuf *sb, const json_t *v, size_t shift)
{
    _cleanup_free_ char *text = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    const char *p, *nl;
    int r = 0;

    if (!text)
        return -ENOMEM;
    /* Strings are escaped, so every newline of the dump is one jansson put between tokens. */
    for (p = text; r >= 0 && (nl = strchr(p, '\n')); p = nl + 1) {
        r = strbuf_add(sb, p, (size_t)(nl - p) + 1);
        if (r >= 0)
            r = strbuf_addf(sb, "%*s", (int)shift, "");
    }
    return r < 0 ? r : strbuf_addstr(sb, p);
}

static int table_row(struct strbuf *sb, json_t *res)
{
    const char *node = json_string_value(json_object_get(res, "node"));
    const char *pod = json_string_value(json_object_get(res, "pod"));
    const char *k;
    json_t *v;
    size_t j;
    int r;

    r = strbuf_addf(sb, "%-32s %-20s ", pod ? pod : "(null)", node ? node : "<none>");
    if (r >= 0 && node) {
        r = strbuf_addf(sb, "%-6lld", (long long)json_integer_value(json_object_get(res, "score")));
        json_array_foreach(json_object_get(res, "devices"), j, v)
        {
            if (r >= 0)
                r = strbuf_addf(sb, "%s%s", j ? ", " : " ", json_string_value(v));
        }
    } else if (r >= 0) {
        r = strbuf_addf(sb, "%-6s", "-");
        j = 0;
        json_object_foreach(json_object_get(res, "reasons"), k, v)
        {
            if (r >= 0)
                r = strbuf_addf(sb, "%s%lld node(s): %s", j++ ? "; " : " ",
                                (long long)json_integer_value(v), k);
        }
    }
    return r < 0 ? r : strbuf_addch(sb, '\n');
}

static const char TABLE_HEAD_FMT[] = "%-32s %-20s %-6s %s\n";

int sched_printer_pod(struct sched_printer *p, json_t *result)
{
    int r = 0;

    switch (p->fmt) {
    case SCHED_FMT_TABLE:
        if (p->pods == 0)
            r = strbuf_addf(&p->out, TABLE_HEAD_FMT, "POD", "NODE", "SCORE", "DEVICES / REASONS");
        if (r >= 0)
            r = table_row(&p->out, result);
        break;
    case SCHED_FMT_JSON:
        r = strbuf_addstr(&p->out, p->pods == 0 ? "{\n  \"pods\": [\n    " : ",\n    ");
        if (r >= 0)
            r = add_json(&p->out, result, 4);
        break;
    case SCHED_FMT_YAML:
        if (p->pods == 0)
            r = strbuf_addstr(&p->out, "pods:\n");
        if (r >= 0)
            r = yaml_emit_item(&p->out, result, 2, 1);
        break;
    }
    if (r >= 0)
        p->pods++;
    return r;
}

int sched_printer_end(struct sched_printer *p, size_t pods, size_t scheduled)
{
    _cleanup_json_ json_t *summary =
        json_pack("{s:{s:I, s:I, s:I}}", "summary", "pods", (json_int_t)pods, "scheduled",
                  (json_int_t)scheduled, "unschedulable", (json_int_t)(pods - scheduled));
    int r;

    if (!summary)
        return -ENOMEM;
    switch (p->fmt) {
    case SCHED_FMT_TABLE:
        r = 0;
        if (p->pods == 0)
            r = strbuf_addf(&p->out, TABLE_HEAD_FMT, "POD", "NODE", "SCORE", "DEVICES / REASONS");
        if (r >= 0)
            r = strbuf_addf(&p->out, "\nscheduled %zu of %zu pods, %zu unschedulable\n", scheduled,
                            pods, pods - scheduled);
        return r;
    case SCHED_FMT_JSON:
        r = strbuf_addstr(&p->out, p->pods == 0 ? "{\n  \"pods\": [],\n  \"summary\": "
                                                : "\n  ],\n  \"summary\": ");
        if (r >= 0)
            r = add_json(&p->out, json_object_get(summary, "summary"), 2);
        return r < 0 ? r : strbuf_addstr(&p->out, "\n}\n");
    case SCHED_FMT_YAML:
        if (p->pods == 0) {
            _cleanup_json_ json_t *none = json_pack("{s:[]}", "pods");

            if (!none)
                return -ENOMEM;
            if ((r = yaml_emit(&p->out, none)) < 0)
                return r;
        }
        return yaml_emit(&p->out, summary);
    }
    return -EINVAL;
}
