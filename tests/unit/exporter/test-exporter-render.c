/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Prometheus exposition of `gpuplane exporter` on synthetic snapshots, compared byte for byte
 * with what dcgm-exporter prints for the same values: label order, escaping, integer and float
 * formatting, MIG series, metrics a device lacks, hostname on and off, the old namespace, blanks in
 * model names, label-type fields and the XID labels.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "exporter-internal.h"

#define UUID0 "GPU-11111111-2222-3333-4444-555555555555"
#define UUID1 "GPU-66666666-7777-8888-9999-000000000000"
#define H100 "NVIDIA H100 80GB HBM3"

static void counters(const char *text, struct exporter_counters *c)
{
    struct diag d;
    exporter_counters_init(c);
    diag_init(&d);
    if (exporter_counters_parse(text, strlen(text), "t.csv", c, &d) < 0)
        fail_msg("%s", d.msg);
}

static void set(struct exporter_series *s, enum gpu_metric m, double v)
{
    s->sample.have |= UINT64_C(1) << m;
    s->sample.v[m] = v;
}

static struct exporter_series gpu(unsigned index, const char *uuid, const char *bus)
{
    return (struct exporter_series){
        .gpu = index,
        .uuid = uuid,
        .pci_bus_id = bus,
        .model_name = H100,
    };
}

/* Renders and compares with want. */
static void check(const struct exporter_counters *c, const struct exporter_snapshot *s,
                  const struct exporter_render_options *o, const char *want)
{
    struct strbuf out = STRBUF_INIT;
    assert_int_equal(exporter_render(c, s, o, &out), 0);
    if (strcmp(strbuf_str(&out), want) != 0)
        print_error("got:\n%s\nwant:\n%s\n", strbuf_str(&out), want);
    assert_string_equal(strbuf_str(&out), want);
    strbuf_release(&out);
}

static void test_basic(void **state)
{
    (void)state;
    struct exporter_counters c;
    /* File order differs from field id order: the output follows the ids, as dcgm-exporter's. */
    counters("DCGM_FI_DEV_POWER_USAGE, gauge, Power draw (in W).\n"
             "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"
             "DCGM_FI_DRIVER_VERSION, label, Driver Version\n"
             "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, Total energy (in mJ).\n",
             &c);
    struct exporter_series series[2] = {gpu(0, UUID0, "00000000:1B:00.0"),
                                        gpu(1, UUID1, "00000000:43:00.0")};
    set(&series[0], GPU_METRIC_GPU_TEMP, 34);
    set(&series[0], GPU_METRIC_POWER_USAGE, 70.123);
    set(&series[0], GPU_METRIC_TOTAL_ENERGY, 123456789012345.0);
    set(&series[1], GPU_METRIC_GPU_TEMP, 41);
    set(&series[1], GPU_METRIC_POWER_USAGE, 0.5);
    set(&series[1], GPU_METRIC_TOTAL_ENERGY, 0);
    struct exporter_snapshot s = {.series = series, .n = 2, .driver_version = "550.54.15"};
    struct exporter_render_options o = {.hostname = "node-1"};

    check(&c, &s, &o,
          "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"
          "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
          "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"00000000:1B:00.0\","
          "device=\"nvidia0\",modelName=\"" H100 "\",hostname=\"node-1\","
          "DCGM_FI_DRIVER_VERSION=\"550.54.15\"} 34\n"
          "DCGM_FI_DEV_GPU_TEMP{gpu=\"1\",UUID=\"" UUID1 "\",pci_bus_id=\"00000000:43:00.0\","
          "device=\"nvidia1\",modelName=\"" H100 "\",hostname=\"node-1\","
          "DCGM_FI_DRIVER_VERSION=\"550.54.15\"} 41\n"
          "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n"
          "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
          "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"00000000:1B:00.0\","
          "device=\"nvidia0\",modelName=\"" H100 "\",hostname=\"node-1\","
          "DCGM_FI_DRIVER_VERSION=\"550.54.15\"} 70.123000\n"
          "DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"" UUID1 "\",pci_bus_id=\"00000000:43:00.0\","
          "device=\"nvidia1\",modelName=\"" H100 "\",hostname=\"node-1\","
          "DCGM_FI_DRIVER_VERSION=\"550.54.15\"} 0.500000\n"
          "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy (in mJ).\n"
          "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
          "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=\"" UUID0
          "\",pci_bus_id=\"00000000:1B:00.0\",device=\"nvidia0\",modelName=\"" H100
          "\",hostname=\"node-1\",DCGM_FI_DRIVER_VERSION=\"550.54.15\"} 123456789012345\n"
          "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"1\",UUID=\"" UUID1
          "\",pci_bus_id=\"00000000:43:00.0\",device=\"nvidia1\",modelName=\"" H100
          "\",hostname=\"node-1\",DCGM_FI_DRIVER_VERSION=\"550.54.15\"} 0\n");

    /* No hostname (--no-hostname), no driver version known: both labels go. */
    exporter_counters_release(&c);
    counters("DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"
             "DCGM_FI_DRIVER_VERSION, label, Driver Version\n",
             &c);
    o.hostname = NULL;
    s.driver_version = NULL;
    s.n = 1;
    check(&c, &s, &o,
          "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"
          "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
          "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"00000000:1B:00.0\","
          "device=\"nvidia0\",modelName=\"" H100 "\"} 34\n");
    /* An empty hostname counts as none, as in the Go template. */
    o.hostname = "";
    check(&c, &s, &o,
          "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n"
          "# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
          "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"00000000:1B:00.0\","
          "device=\"nvidia0\",modelName=\"" H100 "\"} 34\n");
    exporter_counters_release(&c);
}

static void test_missing_metrics(void **state)
{
    (void)state;
    struct exporter_counters c;
    counters("DCGM_FI_DEV_MEMORY_TEMP, gauge, Memory temperature (in C).\n"
             "DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).\n"
             "DCGM_FI_PROF_DRAM_ACTIVE, gauge, Ratio of cycles.\n",
             &c);
    struct exporter_series series[2] = {gpu(0, UUID0, "00000000:1B:00.0"),
                                        gpu(1, UUID1, "00000000:43:00.0")};
    /* GPU 0 has no memory temperature; nobody has DRAM activity: its HELP and TYPE go too. */
    set(&series[0], GPU_METRIC_FB_USED, 1024);
    set(&series[1], GPU_METRIC_MEMORY_TEMP, 45);
    set(&series[1], GPU_METRIC_FB_USED, 0);
    struct exporter_snapshot s = {.series = series, .n = 2};
    struct exporter_render_options o = {0};

    check(&c, &s, &o,
          "# HELP DCGM_FI_DEV_MEMORY_TEMP Memory temperature (in C).\n"
          "# TYPE DCGM_FI_DEV_MEMORY_TEMP gauge\n"
          "DCGM_FI_DEV_MEMORY_TEMP{gpu=\"1\",UUID=\"" UUID1 "\",pci_bus_id=\"00000000:43:00.0\","
          "device=\"nvidia1\",modelName=\"" H100 "\"} 45\n"
          "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n"
          "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
          "DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"00000000:1B:00.0\","
          "device=\"nvidia0\",modelName=\"" H100 "\"} 1024\n"
          "DCGM_FI_DEV_FB_USED{gpu=\"1\",UUID=\"" UUID1 "\",pci_bus_id=\"00000000:43:00.0\","
          "device=\"nvidia1\",modelName=\"" H100 "\"} 0\n");

    /* No series at all: nothing. */
    s.n = 0;
    check(&c, &s, &o, "");
    exporter_counters_release(&c);
}

static void test_mig_series(void **state)
{
    (void)state;
    struct exporter_counters c;
    counters("DCGM_FI_DEV_FB_FREE, gauge, Framebuffer memory free (in MiB).\n", &c);
    struct exporter_series series[3] = {gpu(0, UUID0, "00000000:1B:00.0"),
                                        gpu(1, UUID1, "00000000:43:00.0"),
                                        gpu(1, UUID1, "00000000:43:00.0")};
    series[1].mig_profile = "1g.10gb";
    series[1].gpu_instance_id = 7;
    series[2].mig_profile = "3g.40gb";
    series[2].gpu_instance_id = 2;
    set(&series[0], GPU_METRIC_FB_FREE, 81000);
    set(&series[1], GPU_METRIC_FB_FREE, 9800);
    set(&series[2], GPU_METRIC_FB_FREE, 40000);
    struct exporter_snapshot s = {.series = series, .n = 3};
    struct exporter_render_options o = {.hostname = "n"};

    check(&c, &s, &o,
          "# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).\n"
          "# TYPE DCGM_FI_DEV_FB_FREE gauge\n"
          "DCGM_FI_DEV_FB_FREE{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"00000000:1B:00.0\","
          "device=\"nvidia0\",modelName=\"" H100 "\",hostname=\"n\"} 81000\n"
          "DCGM_FI_DEV_FB_FREE{gpu=\"1\",UUID=\"" UUID1 "\",pci_bus_id=\"00000000:43:00.0\","
          "device=\"nvidia1\",modelName=\"" H100 "\",GPU_I_PROFILE=\"1g.10gb\",GPU_I_ID=\"7\","
          "hostname=\"n\"} 9800\n"
          "DCGM_FI_DEV_FB_FREE{gpu=\"1\",UUID=\"" UUID1 "\",pci_bus_id=\"00000000:43:00.0\","
          "device=\"nvidia1\",modelName=\"" H100 "\",GPU_I_PROFILE=\"3g.40gb\",GPU_I_ID=\"2\","
          "hostname=\"n\"} 40000\n");
    exporter_counters_release(&c);
}

static void test_pods_and_old_namespace(void **state)
{
    (void)state;
    struct exporter_counters c;
    counters("DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %).\n"
             "DCGM_FI_DRIVER_VERSION, label, Driver Version\n",
             &c);
    const struct exporter_label labels[] = {
        {"pod", "train-0"},         {"namespace", "ml"}, {"container", "main"},
        {"pod_uid", "0a1b-2c3d"},   {"vgpu", "1"},       {"dra_claim_name", "gpus"},
        {"hpc_job", "job\"42\"\\"},
    };
    struct exporter_series series[1] = {gpu(0, UUID0, "00000000:1B:00.0")};
    series[0].labels = labels;
    series[0].n_labels = ARRAY_SIZE(labels);
    set(&series[0], GPU_METRIC_GPU_UTIL, 87);
    struct exporter_snapshot s = {.series = series, .n = 1, .driver_version = "570.86.15"};
    struct exporter_render_options o = {.hostname = "node-1"};

    /* Label fields, then the attributes sorted by key. */
    check(&c, &s, &o,
          "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
          "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
          "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"00000000:1B:00.0\","
          "device=\"nvidia0\",modelName=\"" H100 "\",hostname=\"node-1\","
          "DCGM_FI_DRIVER_VERSION=\"570.86.15\",container=\"main\",dra_claim_name=\"gpus\","
          "hpc_job=\"job\\\"42\\\"\\\\\",namespace=\"ml\",pod=\"train-0\",pod_uid=\"0a1b-2c3d\","
          "vgpu=\"1\"} 87\n");

    /* --use-old-namespace: uuid, and the old pod label names, sorted under those names. */
    o.use_old_namespace = true;
    check(&c, &s, &o,
          "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
          "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
          "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",uuid=\"" UUID0 "\",pci_bus_id=\"00000000:1B:00.0\","
          "device=\"nvidia0\",modelName=\"" H100 "\",hostname=\"node-1\","
          "DCGM_FI_DRIVER_VERSION=\"570.86.15\",container_name=\"main\","
          "dra_claim_name=\"gpus\",hpc_job=\"job\\\"42\\\"\\\\\",pod_name=\"train-0\","
          "pod_namespace=\"ml\",pod_uid=\"0a1b-2c3d\",vgpu=\"1\"} 87\n");
    exporter_counters_release(&c);
}

static void test_model_name(void **state)
{
    (void)state;
    struct exporter_counters c;
    counters("DCGM_FI_DEV_SM_CLOCK, gauge, SM clock frequency (in MHz).\n", &c);
    struct exporter_series series[1] = {gpu(0, UUID0, "00000000:1B:00.0")};
    series[0].model_name = "  NVIDIA  H100\t80GB HBM3 ";
    set(&series[0], GPU_METRIC_SM_CLOCK, 1980);
    struct exporter_snapshot s = {.series = series, .n = 1};
    struct exporter_render_options o = {0};

    check(&c, &s, &o,
          "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).\n"
          "# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n"
          "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"00000000:1B:00.0\","
          "device=\"nvidia0\",modelName=\"  NVIDIA  H100\t80GB HBM3 \"} 1980\n");
    o.replace_blanks_in_model_name = true;
    check(&c, &s, &o,
          "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).\n"
          "# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n"
          "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"00000000:1B:00.0\","
          "device=\"nvidia0\",modelName=\"NVIDIA-H100-80GB-HBM3\"} 1980\n");

    /* Escapes: backslash, quote, newline in a label value; backslash and newline in help. */
    series[0].model_name = "a\\b\"c\nd";
    o.replace_blanks_in_model_name = false;
    free(c.v[0].help);
    c.v[0].help = strdup("back\\slash\nnewline \"quotes\" stay");
    assert_non_null(c.v[0].help);
    check(&c, &s, &o,
          "# HELP DCGM_FI_DEV_SM_CLOCK back\\\\slash\\nnewline \"quotes\" stay\n"
          "# TYPE DCGM_FI_DEV_SM_CLOCK gauge\n"
          "DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"00000000:1B:00.0\","
          "device=\"nvidia0\",modelName=\"a\\\\b\\\"c\\nd\"} 1980\n");
    exporter_counters_release(&c);
}

static void test_xid(void **state)
{
    (void)state;
    struct exporter_counters c;
    counters("DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error encountered.\n", &c);
    const struct exporter_label labels[] = {
        {"pod", "p"},
        {"namespace", "n"},
        {"container", "c"},
    };
    struct exporter_series series[3] = {gpu(0, UUID0, "00000000:1B:00.0"),
                                        gpu(1, UUID1, "00000000:43:00.0"),
                                        gpu(2, UUID1, "00000000:44:00.0")};
    series[0].have_xid = true;
    series[0].last_xid = 0;
    series[1].have_xid = true;
    series[1].last_xid = 79;
    series[1].labels = labels;
    series[1].n_labels = ARRAY_SIZE(labels);
    series[2].have_xid = false; /* no XID watch on this one: no series */
    struct exporter_snapshot s = {.series = series, .n = 3};
    struct exporter_render_options o = {0};

    check(&c, &s, &o,
          "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n"
          "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
          "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"00000000:1B:00.0\","
          "device=\"nvidia0\",modelName=\"" H100 "\",err_code=\"0\",err_msg=\"No Error\"} 0\n"
          "DCGM_FI_DEV_XID_ERRORS{gpu=\"1\",UUID=\"" UUID1 "\",pci_bus_id=\"00000000:43:00.0\","
          "device=\"nvidia1\",modelName=\"" H100 "\",container=\"c\",err_code=\"79\","
          "err_msg=\"GPU has fallen off the bus\",namespace=\"n\",pod=\"p\"} 79\n");

    series[0].last_xid = 999;
    s.n = 1;
    check(&c, &s, &o,
          "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n"
          "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
          "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"00000000:1B:00.0\","
          "device=\"nvidia0\",modelName=\"" H100 "\",err_code=\"999\",err_msg=\"Unknown Error\"} "
          "999\n");
    exporter_counters_release(&c);
}

/* DCGM_EXP_* counts: a sample per key seen in the window, else one 0; the window and key labels
 * sort with the label-type fields, before the attributes. */
static void test_window_counts(void **state)
{
    (void)state;
    struct exporter_counters c;
    counters("DCGM_FI_DRIVER_VERSION, label, Driver version\n"
             "DCGM_EXP_CLOCK_EVENTS_COUNT, counter, reported clock events\n"
             "DCGM_EXP_XID_ERRORS_COUNT, counter, reported XIDs during last window\n",
             &c);
    const struct exporter_label labels[] = {{"pod", "p"}};
    const struct exporter_window_count xids[] = {{13, 2}, {79, 1}};
    const struct exporter_window_count clocks[] = {{0x4, 3}};
    struct exporter_series series[2] = {gpu(0, UUID0, "00000000:1B:00.0"),
                                        gpu(1, UUID1, "00000000:43:00.0")};
    series[1].xid_counts = xids;
    series[1].n_xid_counts = ARRAY_SIZE(xids);
    series[1].clock_event_counts = clocks;
    series[1].n_clock_event_counts = ARRAY_SIZE(clocks);
    series[1].labels = labels;
    series[1].n_labels = ARRAY_SIZE(labels);
    struct exporter_snapshot s = {.series = series,
                                  .n = 2,
                                  .driver_version = "550.54.15",
                                  .xid_window_ms = 300000,
                                  .clock_events_window_ms = 60000};
    struct exporter_render_options o = {0};

#define FIXED(i, uuid, bus)                                                                        \
    "{gpu=\"" #i "\",UUID=\"" uuid "\",pci_bus_id=\"" bus "\",device=\"nvidia" #i                  \
    "\",modelName=\"" H100 "\",DCGM_FI_DRIVER_VERSION=\"550.54.15\","
    check(
        &c, &s, &o,
        "# HELP DCGM_EXP_XID_ERRORS_COUNT reported XIDs during last window\n"
        "# TYPE DCGM_EXP_XID_ERRORS_COUNT counter\n"
        "DCGM_EXP_XID_ERRORS_COUNT" FIXED(
            0, UUID0,
            "00000000:1B:00.0") "window_size_in_ms="
                                "\"300000\"} 0\n"
                                "DCGM_EXP_XID_ERRORS_COUNT" FIXED(
                                    1, UUID1,
                                    "00000000:43:00.0") "window_size_in_ms="
                                                        "\"300000\",xid=\"13\",pod=\"p\"} 2\n"
                                                        "DCGM_EXP_XID_ERRORS_COUNT" FIXED(
                                                            1, UUID1,
                                                            "00000000:43:00.0") "window_size_in_ms="
                                                                                "\"300000\",xid="
                                                                                "\"79\",pod=\"p\"} "
                                                                                "1\n"
                                                                                "# HELP "
                                                                                "DCGM_EXP_CLOCK_"
                                                                                "EVENTS_COUNT "
                                                                                "reported clock "
                                                                                "events\n"
                                                                                "# TYPE "
                                                                                "DCGM_EXP_CLOCK_"
                                                                                "EVENTS_COUNT "
                                                                                "counter\n"
                                                                                "DCGM_EXP_CLOCK_"
                                                                                "EVENTS_"
                                                                                "COUNT" FIXED(
                                                                                    0, UUID0,
                                                                                    "00000000:1B:"
                                                                                    "00.0") "window"
                                                                                            "_size_"
                                                                                            "in_ms="
                                                                                            "\"6000"
                                                                                            "0\"} "
                                                                                            "0\n"
                                                                                            "DCGM_"
                                                                                            "EXP_"
                                                                                            "CLOCK_"
                                                                                            "EVENTS"
                                                                                            "_COUN"
                                                                                            "T" FIXED(
                                                                                                1,
                                                                                                UUID1,
                                                                                                "00"
                                                                                                "00"
                                                                                                "00"
                                                                                                "00"
                                                                                                ":4"
                                                                                                "3:"
                                                                                                "00"
                                                                                                "."
                                                                                                "0") "clock_event="
                                                                                                     "\"power_cap\",window_size_in_ms=\"60000\",pod=\"p\"} 3\n");
#undef FIXED
    exporter_counters_release(&c);
}

static void test_label_fields(void **state)
{
    (void)state;
    struct exporter_counters c;
    /* A numeric field declared as a label: its value labels the other series, and it is no
     * metric of its own. Label fields sort by name. */
    counters("DCGM_FI_DEV_ENC_UTIL, gauge, Encoder utilization (in %).\n"
             "DCGM_FI_DRIVER_VERSION, label, Driver Version\n"
             "DCGM_FI_PROF_DRAM_ACTIVE, label, Ratio\n"
             "DCGM_FI_DEV_GPU_TEMP, label, GPU temperature (in C).\n"
             "DCGM_FI_DEV_XID_ERRORS, label, last XID\n",
             &c);
    struct exporter_series series[1] = {gpu(0, UUID0, "00000000:1B:00.0")};
    set(&series[0], GPU_METRIC_ENC_UTIL, 3);
    set(&series[0], GPU_METRIC_GPU_TEMP, 65);
    set(&series[0], GPU_METRIC_DRAM_ACTIVE, 0.25);
    series[0].have_xid = true;
    series[0].last_xid = 13;
    struct exporter_snapshot s = {.series = series, .n = 1, .driver_version = "550.54.15"};
    struct exporter_render_options o = {0};

    check(&c, &s, &o,
          "# HELP DCGM_FI_DEV_ENC_UTIL Encoder utilization (in %).\n"
          "# TYPE DCGM_FI_DEV_ENC_UTIL gauge\n"
          "DCGM_FI_DEV_ENC_UTIL{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"00000000:1B:00.0\","
          "device=\"nvidia0\",modelName=\"" H100 "\",DCGM_FI_DEV_GPU_TEMP=\"65\","
          "DCGM_FI_DEV_XID_ERRORS=\"13\",DCGM_FI_DRIVER_VERSION=\"550.54.15\","
          "DCGM_FI_PROF_DRAM_ACTIVE=\"0.250000\"} 3\n");

    /* A label field the device lacks is left out. */
    series[0].sample.have &= ~(UINT64_C(1) << GPU_METRIC_GPU_TEMP);
    series[0].have_xid = false;
    check(&c, &s, &o,
          "# HELP DCGM_FI_DEV_ENC_UTIL Encoder utilization (in %).\n"
          "# TYPE DCGM_FI_DEV_ENC_UTIL gauge\n"
          "DCGM_FI_DEV_ENC_UTIL{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"00000000:1B:00.0\","
          "device=\"nvidia0\",modelName=\"" H100 "\",DCGM_FI_DRIVER_VERSION=\"550.54.15\","
          "DCGM_FI_PROF_DRAM_ACTIVE=\"0.250000\"} 3\n");
    exporter_counters_release(&c);
}

static void test_values(void **state)
{
    (void)state;
    struct exporter_counters c;
    counters("DCGM_FI_DEV_POWER_USAGE, gauge, W\n"
             "DCGM_FI_DEV_PCIE_REPLAY_COUNTER, counter, retries\n"
             "DCGM_FI_PROF_GR_ENGINE_ACTIVE, gauge, ratio\n",
             &c);
    struct exporter_series series[1] = {gpu(0, UUID0, "b")};
    series[0].model_name = "m";
    struct exporter_snapshot s = {.series = series, .n = 1};
    struct exporter_render_options o = {0};
    static const struct {
        double power, replay, gr;
        const char *want_power, *want_replay, *want_gr;
    } cases[] = {
        {70.123, 0, 0, "70.123000", "0", "0.000000"},
        {-1.5, 4294967296.0, 1, "-1.500000", "4294967296", "1.000000"},
        {1e-7, 2.6, 0.9999999, "0.000000", "3", "1.000000"},
        {NAN, 1e30, INFINITY, "NaN", "9223372036854775807", "+Inf"},
        {-INFINITY, -3, 123456.654321, "-Inf", "-3", "123456.654321"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char want[1024];
        series[0].sample.have = 0;
        set(&series[0], GPU_METRIC_POWER_USAGE, cases[i].power);
        set(&series[0], GPU_METRIC_PCIE_REPLAY, cases[i].replay);
        set(&series[0], GPU_METRIC_GR_ENGINE_ACTIVE, cases[i].gr);
        snprintf(want, sizeof(want),
                 "# HELP DCGM_FI_DEV_POWER_USAGE W\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
                 "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"b\","
                 "device=\"nvidia0\",modelName=\"m\"} %s\n"
                 "# HELP DCGM_FI_DEV_PCIE_REPLAY_COUNTER retries\n"
                 "# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER counter\n"
                 "DCGM_FI_DEV_PCIE_REPLAY_COUNTER{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"b\","
                 "device=\"nvidia0\",modelName=\"m\"} %s\n"
                 "# HELP DCGM_FI_PROF_GR_ENGINE_ACTIVE ratio\n"
                 "# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge\n"
                 "DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu=\"0\",UUID=\"" UUID0 "\",pci_bus_id=\"b\","
                 "device=\"nvidia0\",modelName=\"m\"} %s\n",
                 cases[i].want_power, cases[i].want_replay, cases[i].want_gr);
        check(&c, &s, &o, want);
    }
    exporter_counters_release(&c);
}

static void test_cap(void **state)
{
    (void)state;
    struct exporter_counters c;
    struct diag d;
    exporter_counters_init(&c);
    diag_init(&d);
    assert_int_equal(exporter_counters_load(NULL, &c, &d), 0);
    struct exporter_series series[8];
    for (unsigned i = 0; i < 8; i++) {
        series[i] = gpu(i, UUID0, "00000000:1B:00.0");
        for (unsigned m = 0; m < GPU_METRIC_COUNT; m++)
            set(&series[i], (enum gpu_metric)m, m);
        series[i].have_xid = true;
    }
    struct exporter_snapshot s = {.series = series, .n = 8, .driver_version = "550.54.15"};
    struct exporter_render_options o = {.hostname = "node"};

    /* The whole default set on 8 GPUs: 25 families of 8 lines each. */
    struct strbuf out = STRBUF_INIT;
    assert_int_equal(exporter_render(&c, &s, &o, &out), 0);
    size_t lines = 0;
    for (const char *p = strbuf_str(&out); *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 25 * (2 + 8));
    size_t full = out.len;
    strbuf_release(&out);

    /* A buffer too small for it fails rather than growing. */
    strbuf_init(&out, full - 1);
    assert_int_equal(exporter_render(&c, &s, &o, &out), -ENOBUFS);
    strbuf_release(&out);
    exporter_counters_release(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),        cmocka_unit_test(test_missing_metrics),
        cmocka_unit_test(test_mig_series),   cmocka_unit_test(test_pods_and_old_namespace),
        cmocka_unit_test(test_model_name),   cmocka_unit_test(test_xid),
        cmocka_unit_test(test_label_fields), cmocka_unit_test(test_values),
        cmocka_unit_test(test_cap),          cmocka_unit_test(test_window_counts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
