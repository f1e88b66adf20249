/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The counters file of `gpuplane exporter` (dcgm-exporter's CSV format), the DCGM field catalog
 * behind it and the XID messages: the built-in default file, comments and quoting, every error
 * with its line, the fields that are skipped with a warning, and the catalog checked against
 * shared/reference/dcgm-to-nvml-map.csv.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "exporter-internal.h"
#include "test-tmpdir.h"

#ifndef REFERENCE_DIR
#define REFERENCE_DIR "../shared/reference"
#endif

static int parse(const char *text, struct exporter_counters *c, struct diag *d)
{
    exporter_counters_init(c);
    diag_init(d);
    return exporter_counters_parse(text, strlen(text), "t.csv", c, d);
}

/* The fields dcgm-exporter's default file enables, in DCGM field id order. */
static const char *const default_enabled[] = {
    "DCGM_FI_DRIVER_VERSION",
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_ENC_UTIL",
    "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
};

static void test_default_file(void **state)
{
    (void)state;
    struct exporter_counters c;
    struct diag d;

    exporter_counters_init(&c);
    diag_init(&d);
    assert_int_equal(exporter_counters_load(NULL, &c, &d), 0);
    assert_int_equal(c.n, ARRAY_SIZE(default_enabled));
    assert_int_equal(c.n_warnings, 0);
    for (size_t i = 0; i < c.n; i++)
        assert_string_equal(c.v[i].field->name, default_enabled[i]);

    /* Types, help texts verbatim, lines of the file. */
    assert_int_equal(c.v[0].type, EXPORTER_LABEL);
    assert_string_equal(c.v[0].help, "Driver Version");
    assert_int_equal(c.v[1].type, EXPORTER_GAUGE);
    assert_string_equal(c.v[1].help, "SM clock frequency (in MHz).");
    assert_int_equal(c.v[1].line, 6);
    assert_int_equal(c.v[6].type, EXPORTER_COUNTER);
    assert_string_equal(c.v[6].help, "Total energy consumption since boot (in mJ).");
    /* "DCGM_FI_DEV_DEC_UTIL ,     gauge, ...": the blank before the comma is trimmed. */
    assert_string_equal(c.v[11].help, "Decoder utilization (in %).");
    assert_string_equal(c.v[12].help, "Value of the last XID error encountered.");
    assert_int_equal(c.v[25].type, EXPORTER_GAUGE);
    assert_string_equal(c.v[25].help,
                        "The rate of data received over the PCIe bus - including both "
                        "protocol headers and data payloads - in bytes per second.");

    /* Every telemetry metric is wanted but the clock event reasons (only the commented-out
     * DCGM_EXP_CLOCK_EVENTS_COUNT counts them), and the XID events and the driver version are
     * used. */
    assert_true(exporter_counters_metrics(&c) ==
                (((UINT64_C(1) << GPU_METRIC_COUNT) - 1) &
                 ~(UINT64_C(1) << GPU_METRIC_CLOCK_EVENT_REASONS)));
    assert_true(exporter_counters_use(&c, EXPORTER_SOURCE_XID));
    assert_true(exporter_counters_use(&c, EXPORTER_SOURCE_DRIVER_VERSION));
    assert_false(exporter_counters_use(&c, EXPORTER_SOURCE_NONE));
    exporter_counters_release(&c);
    assert_int_equal(c.n, 0);
    assert_null(c.v);

    /* The embedded bytes are the file, NUL-terminated. */
    assert_int_equal(exporter_default_counters_csv[exporter_default_counters_csv_len], 0);
    assert_int_equal(strlen((const char *)exporter_default_counters_csv),
                     exporter_default_counters_csv_len);
}

static void test_comments_blanks_quotes(void **state)
{
    (void)state;
    struct exporter_counters c;
    struct diag d;
    const char *text = "# a comment, with commas\n"
                       "\n"
                       "   \t\n"
                       "  # an indented comment\n"
                       "\tDCGM_FI_DEV_GPU_TEMP ,\tgauge\t, GPU temperature (in C).  \r\n"
                       "DCGM_FI_DEV_POWER_USAGE, gauge, \"Power, in W (\"\"board\"\")\"\n"
                       "DCGM_FI_DEV_FB_USED,counter,\n"
                       "DCGM_FI_DEV_SM_CLOCK, gauge, a \"quoted\" word";

    assert_int_equal(parse(text, &c, &d), 0);
    assert_int_equal(c.n, 4);
    assert_string_equal(c.v[0].field->name, "DCGM_FI_DEV_SM_CLOCK");
    assert_string_equal(c.v[0].help, "a \"quoted\" word");
    assert_int_equal(c.v[0].line, 8);
    assert_string_equal(c.v[1].field->name, "DCGM_FI_DEV_GPU_TEMP");
    assert_string_equal(c.v[1].help, "GPU temperature (in C).");
    assert_int_equal(c.v[1].line, 5);
    assert_string_equal(c.v[2].field->name, "DCGM_FI_DEV_POWER_USAGE");
    assert_string_equal(c.v[2].help, "Power, in W (\"board\")");
    assert_string_equal(c.v[3].field->name, "DCGM_FI_DEV_FB_USED");
    assert_int_equal(c.v[3].type, EXPORTER_COUNTER);
    assert_string_equal(c.v[3].help, "");
    exporter_counters_release(&c);

    /* Nothing but comments: an empty set, as dcgm-exporter reads it. */
    assert_int_equal(parse("# nothing\n\n", &c, &d), 0);
    assert_int_equal(c.n, 0);
    assert_int_equal(exporter_counters_metrics(&c), 0);
    exporter_counters_release(&c);
    assert_int_equal(parse("", &c, &d), 0);
    exporter_counters_release(&c);

    /* Every type dcgm-exporter accepts. */
    assert_int_equal(parse("DCGM_FI_DEV_GPU_TEMP, histogram, h\n"
                           "DCGM_FI_DEV_SM_CLOCK, summary, s\n"
                           "DCGM_FI_DEV_MEM_CLOCK, label, l\n",
                           &c, &d),
                     0);
    assert_int_equal(c.n, 3);
    assert_int_equal(c.v[0].type, EXPORTER_SUMMARY);
    assert_int_equal(c.v[1].type, EXPORTER_LABEL);
    assert_int_equal(c.v[2].type, EXPORTER_HISTOGRAM);
    assert_string_equal(exporter_prom_type_name(c.v[2].type), "histogram");
    exporter_counters_release(&c);
}

static void test_skipped_fields(void **state)
{
    (void)state;
    struct exporter_counters c;
    struct diag d;
    const char *text = "DCGM_FI_DEV_GPU_TEMP, gauge, t\n"
                       "DCGM_FI_PROF_SM_ACTIVE, gauge, The ratio of cycles an SM has...\n"
                       "DCGM_EXP_GPU_HEALTH_STATUS, counter, DCGM reported health status\n"
                       "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, not-a-type, skipped before its type\n";

    assert_int_equal(parse(text, &c, &d), 0);
    assert_int_equal(c.n, 1);
    assert_int_equal(c.n_warnings, 3);
    assert_string_equal(c.warnings[0],
                        "t.csv:2: DCGM_FI_PROF_SM_ACTIVE cannot be read through NVML: skipped");
    assert_string_equal(c.warnings[1], "t.csv:3: DCGM_EXP_GPU_HEALTH_STATUS comes from DCGM's "
                                       "health checks, not NVML: skipped");
    assert_string_equal(c.warnings[2],
                        "t.csv:4: DCGM_FI_DEV_ECC_DBE_VOL_TOTAL cannot be read through NVML: "
                        "skipped");
    exporter_counters_release(&c);
    assert_int_equal(c.n_warnings, 0);
}

/* The windowed counts are accepted as any metric type but a label, and the clock events count
 * makes the reasons wanted. */
static void test_window_counts(void **state)
{
    (void)state;
    struct exporter_counters c;
    struct diag d;

    assert_int_equal(parse("DCGM_EXP_CLOCK_EVENTS_COUNT, counter, reported clock events\n"
                           "DCGM_EXP_XID_ERRORS_COUNT, gauge, reported XIDs\n",
                           &c, &d),
                     0);
    assert_int_equal(c.n, 2);
    assert_int_equal(c.n_warnings, 0);
    assert_string_equal(c.v[0].field->name, "DCGM_EXP_XID_ERRORS_COUNT");
    assert_int_equal(c.v[0].field->source, EXPORTER_SOURCE_XID_COUNT);
    assert_true(exporter_counters_metrics(&c) == (UINT64_C(1) << GPU_METRIC_CLOCK_EVENT_REASONS));
    assert_true(exporter_counters_use(&c, EXPORTER_SOURCE_CLOCK_EVENTS_COUNT));
    exporter_counters_release(&c);

    assert_int_equal(parse("DCGM_EXP_XID_ERRORS_COUNT, label, no\n", &c, &d), -EINVAL);
    assert_string_equal(d.msg, "t.csv:1: DCGM_EXP_XID_ERRORS_COUNT: a count over a window cannot "
                               "be a label");
}

static void test_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int err;
        int line;
        const char *msg;
    } cases[] = {
        {"DCGM_FI_DEV_GPU_TEMP, gauge\n", -EINVAL, 1,
         "t.csv:1: expected 3 comma-separated fields (DCGM field, Prometheus type, help), found 2"},
        {"# c\nDCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature, in C\n", -EINVAL, 2,
         "t.csv:2: expected 3 comma-separated fields (DCGM field, Prometheus type, help), found 4"},
        {"DCGM_FI_DEV_GPU_TEMP\n", -EINVAL, 1,
         "t.csv:1: expected 3 comma-separated fields (DCGM field, Prometheus type, help), found 1"},
        {"\n\nDCGM_FI_DEV_GPU_TEMPERATURE, gauge, t\n", -EINVAL, 3,
         "t.csv:3: unknown DCGM field 'DCGM_FI_DEV_GPU_TEMPERATURE'"},
        {"dcgm_fi_dev_gpu_temp, gauge, t\n", -EINVAL, 1,
         "t.csv:1: unknown DCGM field 'dcgm_fi_dev_gpu_temp'"},
        {", gauge, t\n", -EINVAL, 1, "t.csv:1: unknown DCGM field ''"},
        {"DCGM_FI_DEV_GPU_TEMP, Gauge, t\n", -EINVAL, 1,
         "t.csv:1: DCGM_FI_DEV_GPU_TEMP: unknown Prometheus type 'Gauge' (gauge, counter, "
         "histogram, summary or label)"},
        {"DCGM_FI_DEV_GPU_TEMP, , t\n", -EINVAL, 1,
         "t.csv:1: DCGM_FI_DEV_GPU_TEMP: unknown Prometheus type '' (gauge, counter, histogram, "
         "summary or label)"},
        {"DCGM_FI_DEV_GPU_TEMP, gauge, a\nDCGM_FI_DEV_SM_CLOCK, gauge, b\n"
         "DCGM_FI_DEV_GPU_TEMP, counter, c\n",
         -EINVAL, 3, "t.csv:3: DCGM_FI_DEV_GPU_TEMP: declared twice (first on line 1)"},
        {"DCGM_FI_DRIVER_VERSION, gauge, Driver Version\n", -EINVAL, 1,
         "t.csv:1: DCGM_FI_DRIVER_VERSION: a string field can only be a label, not a gauge"},
        {"DCGM_FI_DEV_GPU_TEMP, gauge, \"unterminated\n", -EINVAL, 1,
         "t.csv:1: a quoted field is not closed on its line"},
        {"DCGM_FI_DEV_GPU_TEMP, gauge, \"quoted\" tail\n", -EINVAL, 1,
         "t.csv:1: text after the closing quote of a field"},
    };

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct exporter_counters c;
        struct diag d;
        exporter_counters_init(&c);
        c.n = 12345; /* never written on failure */
        diag_init(&d);
        int r = exporter_counters_parse(cases[i].text, strlen(cases[i].text), "t.csv", &c, &d);
        if (r != cases[i].err || strcmp(d.msg, cases[i].msg) != 0)
            print_error("case %zu: %d '%s'\n", i, r, d.msg);
        assert_int_equal(r, cases[i].err);
        assert_string_equal(d.msg, cases[i].msg);
        assert_int_equal(d.line, cases[i].line);
        assert_int_equal(c.n, 12345);
    }

    /* A NUL byte inside a line. */
    static const char nul[] = "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_SM_CLOCK\0, gauge, s\n";
    struct exporter_counters c;
    struct diag d;
    exporter_counters_init(&c);
    diag_init(&d);
    assert_int_equal(exporter_counters_parse(nul, sizeof(nul) - 1, "t.csv", &c, &d), -EINVAL);
    assert_string_equal(d.msg, "t.csv:2: a NUL byte");

    /* Larger than the cap. */
    size_t big = EXPORTER_COUNTERS_MAX_BYTES + 1;
    char *text = malloc(big);
    assert_non_null(text);
    memset(text, '#', big);
    assert_int_equal(exporter_counters_parse(text, big, "t.csv", &c, &d), -EFBIG);
    assert_string_equal(d.msg, "t.csv: larger than 1048576 bytes");
    free(text);

    /* A NULL diagnostic is allowed. */
    assert_int_equal(exporter_counters_parse("x,y,z", 5, "t.csv", &c, NULL), -EINVAL);
}

static void test_load_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/test-exporter-counters-XXXXXX";
    char path[256];
    struct exporter_counters c;
    struct diag d;

    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/counters.csv", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_BOGUS, gauge, b\n", f);
    assert_int_equal(fclose(f), 0);

    exporter_counters_init(&c);
    diag_init(&d);
    assert_int_equal(exporter_counters_load(path, &c, &d), -EINVAL);
    char want[512];
    snprintf(want, sizeof(want), "%s:2: unknown DCGM field 'DCGM_FI_DEV_BOGUS'", path);
    assert_string_equal(d.msg, want);

    f = fopen(path, "w");
    assert_non_null(f);
    fputs("DCGM_FI_DEV_GPU_TEMP, gauge, t\n", f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(exporter_counters_load(path, &c, &d), 0);
    assert_int_equal(c.n, 1);
    exporter_counters_release(&c);

    snprintf(path, sizeof(path), "%s/missing.csv", dir);
    assert_int_equal(exporter_counters_load(path, &c, &d), -ENOENT);
    snprintf(want, sizeof(want), "%s: No such file or directory", path);
    assert_string_equal(d.msg, want);
    assert_int_equal(test_tmpdir_remove(dir), 0);
}

/* ---- the catalog ---- */

static void test_catalog_reference_map(void **state)
{
    (void)state;
    char path[512];
    char line[1024];
    size_t rows = 0;

    snprintf(path, sizeof(path), "%s/dcgm-to-nvml-map.csv", REFERENCE_DIR);
    FILE *f = fopen(path, "r");
    if (!f) {
        print_message("%s: not found, skipped\n", path);
        skip();
    }
    assert_non_null(fgets(line, sizeof(line), f)); /* the header */
    while (fgets(line, sizeof(line), f)) {
        char *comma = strchr(line, ',');
        assert_non_null(comma);
        const struct exporter_field *fd = exporter_field_lookup(line, (size_t)(comma - line));
        if (!fd)
            print_error("not in the catalog: %.*s\n", (int)(comma - line), line);
        assert_non_null(fd);
        /* Each field of the map is answered: by a metric, the XID events or the driver. */
        assert_int_not_equal(fd->source, EXPORTER_SOURCE_NONE);
        /* The type column: label for the string field only. */
        char *type = comma + 1;
        bool label = strncmp(type, "label,", 6) == 0;
        assert_int_equal(label, fd->kind == EXPORTER_VALUE_STRING);
        rows++;
    }
    fclose(f);
    assert_int_equal(rows, ARRAY_SIZE(default_enabled));
}

/* The embedded default is dcgm-exporter's file, byte for byte. */
static void test_default_is_upstream(void **state)
{
    (void)state;
    char path[512];
    char *data = NULL;
    size_t len = 0;

    snprintf(path, sizeof(path), "%s/dcgm-exporter-default-counters.csv", REFERENCE_DIR);
    if (access(path, R_OK) != 0) {
        print_message("%s: not found, skipped\n", path);
        skip();
    }
    assert_int_equal(file_read_all(path, EXPORTER_COUNTERS_MAX_BYTES, &data, &len), 0);
    assert_int_equal(len, exporter_default_counters_csv_len);
    assert_memory_equal(data, exporter_default_counters_csv, len);
    free(data);
}

static void test_catalog(void **state)
{
    (void)state;
    unsigned seen[GPU_METRIC_COUNT] = {0};
    size_t n = exporter_field_count();

    assert_true(n >= ARRAY_SIZE(default_enabled));
    assert_null(exporter_field_at(n));
    for (size_t i = 0; i < n; i++) {
        const struct exporter_field *f = exporter_field_at(i);
        assert_ptr_equal(exporter_field_lookup(f->name, strlen(f->name)), f);
        for (size_t j = 0; j < i; j++) {
            assert_int_not_equal(exporter_field_at(j)->id, f->id);
            assert_string_not_equal(exporter_field_at(j)->name, f->name);
        }
        if (f->source == EXPORTER_SOURCE_METRIC) {
            assert_true(f->metric < GPU_METRIC_COUNT);
            seen[f->metric]++;
        }
    }
    /* Every telemetry metric has exactly one field. */
    for (size_t m = 0; m < GPU_METRIC_COUNT; m++)
        assert_int_equal(seen[m], 1);

    /* DCGM's ids and types, as dcgm-exporter sorts and prints them. */
    static const struct {
        const char *name;
        uint16_t id;
        enum exporter_value_kind kind;
    } known[] = {
        {"DCGM_FI_DRIVER_VERSION", 1, EXPORTER_VALUE_STRING},
        {"DCGM_FI_DEV_GPU_TEMP", 150, EXPORTER_VALUE_INT},
        {"DCGM_FI_DEV_POWER_USAGE", 155, EXPORTER_VALUE_FLOAT},
        {"DCGM_FI_DEV_XID_ERRORS", 230, EXPORTER_VALUE_INT},
        {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", 449, EXPORTER_VALUE_INT},
        {"DCGM_FI_DEV_VGPU_LICENSE_STATUS", 526, EXPORTER_VALUE_INT},
        {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", 1001, EXPORTER_VALUE_FLOAT},
        {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 1004, EXPORTER_VALUE_FLOAT},
        {"DCGM_FI_PROF_DRAM_ACTIVE", 1005, EXPORTER_VALUE_FLOAT},
        {"DCGM_FI_PROF_PCIE_TX_BYTES", 1009, EXPORTER_VALUE_INT},
        {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 112, EXPORTER_VALUE_INT},
        /* dcgm-exporter's own: 9000 + their place in its ExporterCounter enum. */
        {"DCGM_EXP_XID_ERRORS_COUNT", 9001, EXPORTER_VALUE_INT},
        {"DCGM_EXP_CLOCK_EVENTS_COUNT", 9002, EXPORTER_VALUE_INT},
    };
    for (size_t i = 0; i < ARRAY_SIZE(known); i++) {
        const struct exporter_field *f =
            exporter_field_lookup(known[i].name, strlen(known[i].name));
        assert_non_null(f);
        assert_int_equal(f->id, known[i].id);
        assert_int_equal(f->kind, known[i].kind);
    }
    /* Lookups are exact. */
    assert_null(exporter_field_lookup("DCGM_FI_DEV_GPU_TEM", 19));
    assert_null(exporter_field_lookup("DCGM_FI_DEV_GPU_TEMPX", 21));
    assert_non_null(exporter_field_lookup("DCGM_FI_DEV_GPU_TEMPX", 20));
}

/* ---- XID messages ---- */

static void test_xid_messages(void **state)
{
    (void)state;
    assert_string_equal(exporter_xid_message(0), "No Error");
    assert_string_equal(exporter_xid_message(79), "GPU has fallen off the bus");
    assert_string_equal(exporter_xid_message(48), "Double Bit ECC Error");
    /* Quoted in the CSV because of its comma. */
    assert_string_equal(exporter_xid_message(45), "Preemptive cleanup, due to previous errors -- "
                                                  "Most likely to see when running multiple cuda");
    assert_string_equal(exporter_xid_message(172), "Uncorrectable SRAM Error");
    assert_string_equal(exporter_xid_message(173), "Unknown Error");
    assert_string_equal(exporter_xid_message(999), "Unknown Error");
    assert_string_equal(exporter_xid_message(UINT64_MAX), "Unknown Error");
    assert_int_equal(exporter_xid_table_len, 173);
    for (size_t i = 0; i < exporter_xid_table_len; i++)
        assert_non_null(exporter_xid_table[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_file),
        cmocka_unit_test(test_comments_blanks_quotes),
        cmocka_unit_test(test_skipped_fields),
        cmocka_unit_test(test_window_counts),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_catalog_reference_map),
        cmocka_unit_test(test_default_is_upstream),
        cmocka_unit_test(test_catalog),
        cmocka_unit_test(test_xid_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
