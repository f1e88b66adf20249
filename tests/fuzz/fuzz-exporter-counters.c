/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the exporter's counters file (dcgm-exporter's CSV format): any bytes give a
 * set of counters or a "t.csv:line: message", never a crash or a leak. An accepted set must hold
 * what the renderer relies on (known fields in id order, each once, strings only as labels), and
 * is rendered for two GPUs that answer everything: each metric family must come out as exactly its
 * HELP, TYPE and one line per GPU, whatever the help text holds.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "exporter-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_render(const struct exporter_counters *c)
{
    struct exporter_series series[2] = {
        {.gpu = 0, .uuid = "GPU-0", .pci_bus_id = "00000000:1B:00.0", .model_name = "A \"B\""},
        {.gpu = 1,
         .uuid = "GPU-1",
         .pci_bus_id = "00000000:43:00.0",
         .model_name = "C\\D",
         .mig_profile = "1g.10gb",
         .gpu_instance_id = 3},
    };
    for (size_t i = 0; i < 2; i++) {
        series[i].sample.have = (UINT64_C(1) << GPU_METRIC_COUNT) - 1;
        for (size_t m = 0; m < GPU_METRIC_COUNT; m++)
            series[i].sample.v[m] = (double)m / 3.0;
        series[i].have_xid = true;
        series[i].last_xid = 79 * i;
    }
    struct exporter_snapshot s = {.series = series, .n = 2, .driver_version = "550.54.15"};
    struct exporter_render_options o = {.hostname = "node", .use_old_namespace = c->n % 2 == 1};
    struct strbuf out = STRBUF_INIT;
    size_t families = 0, lines = 0;

    for (size_t i = 0; i < c->n; i++)
        families += c->v[i].type != EXPORTER_LABEL;
    if (exporter_render(c, &s, &o, &out) < 0)
        __builtin_trap();
    for (size_t i = 0; i < out.len; i++)
        lines += out.buf[i] == '\n';
    if (lines != families * 4 || strlen(strbuf_str(&out)) != out.len)
        __builtin_trap();
    strbuf_release(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct exporter_counters c;
    struct diag d;

    exporter_counters_init(&c);
    diag_init(&d);
    if (exporter_counters_parse((const char *)data, size, "t.csv", &c, &d) < 0) {
        if (c.n || c.v || strncmp(d.msg, "t.csv", 5) != 0)
            __builtin_trap();
        return 0;
    }
    for (size_t i = 0; i < c.n; i++) {
        const struct exporter_counter *k = &c.v[i];
        if (!k->field || !k->help || k->field->source == EXPORTER_SOURCE_NONE)
            __builtin_trap();
        if (k->field->kind == EXPORTER_VALUE_STRING && k->type != EXPORTER_LABEL)
            __builtin_trap();
        if (i > 0 && c.v[i - 1].field->id >= k->field->id)
            __builtin_trap();
        if (strchr(k->help, '\n'))
            __builtin_trap();
    }
    for (size_t i = 0; i < c.n_warnings; i++) {
        if (strncmp(c.warnings[i], "t.csv:", 6) != 0)
            __builtin_trap();
    }
    check_render(&c);
    exporter_counters_release(&c);
    return 0;
}
