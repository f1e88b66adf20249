/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane info [--json]`: reads the inventory once through NVML and prints it. The human form is
 * a GPU table, a MIG table and a topology matrix in the style of `nvidia-smi topo -m`; the JSON
 * form is gpu_inventory_to_json's document. A lost GPU is shown as lost and is not an error: the
 * command exists to tell an operator what the node looks like, broken parts included.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli-table.h"
#include "cli.h"
#include "gpu.h"
#include "info.h"

static const char HELP[] =
    "Usage: gpuplane info [OPTIONS]\n"
    "\n"
    "Show this node's GPUs as NVML reports them: identity, memory, PCI and NUMA placement, MIG\n"
    "devices and the GPU-to-GPU topology matrix.\n"
    "\n"
    "Options:\n"
    "      --json              print one JSON document instead of tables\n" CLI_COMMON_HELP "\n"
    "Examples:\n"
    "  gpuplane info                      the GPUs of this node\n"
    "  gpuplane info --mock dgx-h100      a simulated DGX H100\n"
    "  gpuplane info --mock a100-mig --json | jq '.gpus[].migDevices'\n";

enum {
    OPT_JSON = 0x2000
};

static const char *mig_state(const struct gpu_device *dev)
{
    if (!dev->mig_capable)
        return "n/a";
    return dev->mig_enabled ? "on" : "off";
}

static void format_status(const struct gpu_nvml *nvml, const struct gpu_device *dev, char *buf,
                          size_t size)
{
    if (dev->lost)
        snprintf(buf, size, "lost");
    else if (dev->error)
        snprintf(buf, size, "error: %s", gpu_nvml_strerror(nvml, dev->error));
    else
        snprintf(buf, size, "ok");
}

static int print_gpus(const struct gpu_nvml *nvml, const struct gpu_inventory *inv)
{
    static const char *const header[] = {"GPU", "NAME", "UUID",   "BUS ID", "NUMA", "MEMORY",
                                         "CC",  "MIG",  "NVLINK", "STATUS", NULL};
    struct cli_table t;
    int r = cli_table_init(&t, header);
    if (r < 0)
        return r;
    for (size_t i = 0; i < inv->n_devices && r >= 0; i++) {
        const struct gpu_device *dev = &inv->devices[i];
        char idx[16], numa[16], mem[32], cc[16], links[16], status[128];
        snprintf(idx, sizeof(idx), "%u", dev->index);
        snprintf(numa, sizeof(numa), "%d", dev->numa_node);
        snprintf(mem, sizeof(mem), "%lluMiB", (unsigned long long)(dev->memory_bytes >> 20));
        snprintf(cc, sizeof(cc), "%d.%d", dev->cc_major, dev->cc_minor);
        snprintf(links, sizeof(links), "%u", dev->nvlinks_active);
        format_status(nvml, dev, status, sizeof(status));
        bool known = !dev->error;
        const char *row[] = {idx,
                             dev->name[0] ? dev->name : NULL,
                             dev->uuid[0] ? dev->uuid : NULL,
                             dev->pci_bus_id[0] ? dev->pci_bus_id : NULL,
                             dev->numa_node >= 0 ? numa : NULL,
                             known ? mem : NULL,
                             known && dev->cc_major >= 0 ? cc : NULL,
                             known ? mig_state(dev) : NULL,
                             known ? links : NULL,
                             status};
        r = cli_table_add(&t, row);
    }
    if (r >= 0)
        cli_table_print(&t, stdout, "");
    cli_table_release(&t);
    return r;
}

static int add_mig_rows(struct cli_table *t, const struct gpu_device *dev)
{
    for (size_t m = 0; m < dev->n_migs; m++) {
        const struct gpu_mig_device *mig = &dev->migs[m];
        char gpu[16], idx[16], gi[16], ci[16], mem[32], sms[16];
        snprintf(gpu, sizeof(gpu), "%u", dev->index);
        snprintf(idx, sizeof(idx), "%u", mig->index);
        snprintf(gi, sizeof(gi), "%u", mig->gi_id);
        snprintf(ci, sizeof(ci), "%u", mig->ci_id);
        snprintf(mem, sizeof(mem), "%lluMiB", (unsigned long long)(mig->memory_bytes >> 20));
        snprintf(sms, sizeof(sms), "%u", mig->multiprocessors);
        const char *row[] = {gpu, idx, mig->profile, gi, ci, mem, sms, mig->uuid};
        int r = cli_table_add(t, row);
        if (r < 0)
            return r;
    }
    return 0;
}

static int print_migs(const struct gpu_inventory *inv)
{
    static const char *const header[] = {"GPU",    "MIG", "PROFILE", "GI", "CI",
                                         "MEMORY", "SMS", "UUID",    NULL};
    size_t total = 0;
    for (size_t i = 0; i < inv->n_devices; i++)
        total += inv->devices[i].n_migs;
    if (total == 0)
        return 0;
    struct cli_table t;
    int r = cli_table_init(&t, header);
    if (r < 0)
        return r;
    for (size_t i = 0; i < inv->n_devices && r >= 0; i++)
        r = add_mig_rows(&t, &inv->devices[i]);
    if (r >= 0) {
        printf("\nMIG devices\n");
        cli_table_print(&t, stdout, "");
    }
    cli_table_release(&t);
    return r;
}

static int add_topology_row(struct cli_table *t, const struct gpu_inventory *inv, size_t i,
                            char (*names)[16])
{
    const char *row[CLI_TABLE_MAX_COLUMNS + 1];
    char label[16], numa[16];
    snprintf(label, sizeof(label), "GPU%u", inv->devices[i].index);
    row[0] = label;
    for (size_t j = 0; j < inv->n_devices; j++)
        row[j + 1] = gpu_link_name(gpu_inventory_link(inv, i, j), names[j]);
    snprintf(numa, sizeof(numa), "%d", inv->devices[i].numa_node);
    row[inv->n_devices + 1] = inv->devices[i].numa_node >= 0 ? numa : "N/A";
    return cli_table_add(t, row);
}

static const char LEGEND[] = "\nLegend:\n"
                             "  X    = the GPU itself\n"
                             "  NV#  = # NVLink links (direct, or through NVSwitch)\n"
                             "  PIX  = PCIe, through at most one PCIe switch\n"
                             "  PXB  = PCIe, through several PCIe switches but no host bridge\n"
                             "  PHB  = PCIe, through a PCIe host bridge\n"
                             "  NODE = PCIe, across host bridges within one NUMA node\n"
                             "  SYS  = PCIe, across NUMA nodes (the SMP interconnect)\n";

static int print_topology(const struct gpu_inventory *inv)
{
    /* One column per GPU plus the row label and the NUMA column. */
    if (inv->n_devices == 0 || inv->n_devices + 2 > CLI_TABLE_MAX_COLUMNS)
        return 0;
    const char *header[CLI_TABLE_MAX_COLUMNS + 1];
    char labels[CLI_TABLE_MAX_COLUMNS][16];
    char names[CLI_TABLE_MAX_COLUMNS][16];
    header[0] = "";
    for (size_t j = 0; j < inv->n_devices; j++) {
        snprintf(labels[j], sizeof(labels[j]), "GPU%u", inv->devices[j].index);
        header[j + 1] = labels[j];
    }
    header[inv->n_devices + 1] = "NUMA";
    header[inv->n_devices + 2] = NULL;
    struct cli_table t;
    int r = cli_table_init(&t, header);
    if (r < 0)
        return r;
    for (size_t i = 0; i < inv->n_devices && r >= 0; i++)
        r = add_topology_row(&t, inv, i, names);
    if (r >= 0) {
        printf("\nTopology\n");
        cli_table_print(&t, stdout, "");
        fputs(LEGEND, stdout);
    }
    cli_table_release(&t);
    return r;
}

static void print_summary(const struct gpu_inventory *inv)
{
    printf("Driver %s, CUDA %d.%d, NVML %s: %zu GPU%s\n\n", inv->driver_version,
           inv->cuda_driver_version / 1000, (inv->cuda_driver_version % 1000) / 10,
           inv->nvml_version, inv->n_devices, inv->n_devices == 1 ? "" : "s");
}

static int print_tables(const struct gpu_nvml *nvml, const struct gpu_inventory *inv)
{
    print_summary(inv);
    int r = print_gpus(nvml, inv);
    if (r >= 0)
        r = print_migs(inv);
    if (r >= 0)
        r = print_topology(inv);
    return r;
}

static int print_json(const struct gpu_inventory *inv)
{
    _cleanup_json_ json_t *doc = NULL;
    int r = gpu_inventory_to_json(inv, &doc);
    if (r < 0)
        return r;
    if (json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
        return -EIO;
    fputc('\n', stdout);
    return 0;
}

static int parse_args(int argc, char **argv, struct cli_common *common, bool *json)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, OPT_JSON},
        CLI_COMMON_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, CLI_COMMON_SHORT, options, NULL)) != -1) {
        if (opt == OPT_JSON) {
            *json = true;
            continue;
        }
        int r = cli_common_option(common, "info", opt, optarg);
        if (r < 0)
            return r;
        if (r == 0)
            return cli_usage_error("info", "unknown option");
    }
    if (optind < argc)
        return cli_usage_error("info", "unexpected argument \"%s\"", argv[optind]);
    return 0;
}

static int run(const struct cli_common *common, bool json)
{
    struct diag d;
    diag_init(&d);
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = NULL;
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    int r = gpu_nvml_open(cli_common_nvml_lib(common), &d, &nvml);
    if (r >= 0)
        r = gpu_inventory_read(nvml, &(struct gpu_read_options){0}, &d, &inv);
    if (r < 0) {
        cli_error("%s", d.msg[0] ? d.msg : strerror(-r));
        return CLI_EXIT_FAILURE;
    }
    r = json ? print_json(inv) : print_tables(nvml, inv);
    if (r < 0 || fflush(stdout) != 0) {
        cli_error("info: cannot write the output: %s", strerror(r < 0 ? -r : errno));
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}

int info_main(int argc, char **argv)
{
    struct cli_common common;
    bool json = false;
    cli_common_init(&common);
    int r = parse_args(argc, argv, &common, &json);
    if (r < 0) {
        cli_common_release(&common);
        return CLI_EXIT_USAGE;
    }
    if (common.help) {
        fputs(HELP, stdout);
        cli_common_release(&common);
        return CLI_EXIT_OK;
    }
    int code = CLI_EXIT_FAILURE;
    if (cli_common_finish(&common, "info") >= 0)
        code = run(&common, json);
    cli_common_release(&common);
    return code;
}
