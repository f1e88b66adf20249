/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane cdi generate`: the node's CDI spec for NVIDIA GPUs, as `nvidia-ctk cdi generate`
 * writes it, from NVML and the driver's files under the driver root. The spec is written
 * atomically into a spec directory (runtimes rescan it at any moment) or printed. With --mock and
 * no --nvidia-driver-root the driver root is the simulated node's (the profile's driverRoot key, or
 * a lasting root per user and profile that later runs reuse), so the command can be tried and
 * tested without a GPU. The root lasts because the spec outlives the command: a container engine
 * given the spec stats its host paths long after this process is gone.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "nvcdi-cmd.h"
#include "nvcdi.h"

static const char CDI_HELP[] = "Usage: gpuplane cdi COMMAND [OPTIONS]\n"
                               "\n"
                               "Container Device Interface (CDI) specs for the node's GPUs.\n"
                               "\n"
                               "Commands:\n"
                               "  generate   write the CDI spec of this node's NVIDIA GPUs\n"
                               "\n"
                               "Run 'gpuplane cdi generate --help' for its options.\n";

static const char HELP[] =
    "Usage: gpuplane cdi generate [OPTIONS]\n"
    "\n"
    "Write a CDI spec for this node's NVIDIA GPUs, as 'nvidia-ctk cdi generate' does: one device\n"
    "per GPU and MIG device under each name strategy, a device \"all\", and the control device\n"
    "nodes, driver libraries, tools and nvidia-cdi-hook hooks every device needs. The file is\n"
    "<vendor>-<class>.json (or .yaml) in the output directory, replaced atomically, mode 0644.\n"
    "\n"
    "Options:\n"
    "  -o, --output=DIR          spec directory (default /var/run/cdi; created when missing);\n"
    "                            \"-\" prints the spec on stdout instead\n"
    "      --format=FMT          json (default) or yaml\n"
    "      --vendor=VENDOR       the kind's vendor (default nvidia.com)\n"
    "      --class=CLASS         the kind's class (default gpu)\n"
    "      --device-name-strategy=S\n"
    "                            index (\"0\", \"0:1\"), uuid (\"GPU-...\", \"MIG-...\") or\n"
    "                            type-index (\"gpu0\", \"mig0:1\"); repeat for several\n"
    "                            (default: index and uuid)\n"
    "      --no-all-device       leave out the device \"all\"\n"
    "      --nvidia-driver-root=PATH\n"
    "                            where the driver's files are (default /; /run/nvidia/driver for\n"
    "                            a containerised driver; with --mock, the profile's driverRoot\n"
    "                            or else the simulated node's lasting root, see below)\n"
    "      --dev-root=PATH       where dev/nvidia* are (default: the driver root)\n"
    "      --nvidia-cdi-hook-path=PATH\n"
    "                            the hook program as containers see it\n"
    "                            (default /usr/bin/nvidia-cdi-hook; in a root made for --mock,\n"
    "                            its stub)\n"
    "      --json                print what was written as JSON\n" CLI_COMMON_HELP "\n"
    "With --mock and no driver root, the spec names a simulated node's driver root made in\n"
    "${TMPDIR:-/tmp}/gpuplane-mock-<uid>-<profile>/ (a bundled profile's name, or a path's file\n"
    "name and a hash of the path), mode 0700, reused by later runs and never removed by this\n"
    "command, so that the spec stays usable. Remove it with\n"
    "  rm -rf \"${TMPDIR:-/tmp}\"/gpuplane-mock-$(id -u)-*\n"
    "\n"
    "Examples:\n"
    "  gpuplane cdi generate                          write /var/run/cdi/nvidia.com-gpu.json\n"
    "  gpuplane cdi generate --output - --format yaml print the spec as YAML\n"
    "  gpuplane cdi generate --nvidia-driver-root /run/nvidia/driver --dev-root /\n"
    "  gpuplane cdi generate --mock a100-mig --output -  a simulated node's spec\n";

enum {
    OPT_OUTPUT = 0x2000,
    OPT_FORMAT,
    OPT_VENDOR,
    OPT_CLASS,
    OPT_STRATEGY,
    OPT_NO_ALL,
    OPT_DRIVER_ROOT,
    OPT_DEV_ROOT,
    OPT_HOOK_PATH,
    OPT_JSON,
};

struct args {
    struct cli_common common;
    const char *output;
    enum cdi_format format;
    const char *vendor;
    const char *class;
    unsigned strategies;
    bool no_all_device;
    const char *driver_root;
    const char *dev_root;
    const char *hook_path;
    bool json;
};

static int parse_value(struct args *a, int opt, const char *arg)
{
    enum nvcdi_name_strategy s;
    switch (opt) {
    case OPT_FORMAT:
        if (cdi_format_parse(arg, &a->format) < 0)
            return cli_usage_error("cdi generate", "invalid format \"%s\": want json or yaml", arg);
        return 1;
    case OPT_STRATEGY:
        if (nvcdi_name_strategy_parse(arg, &s) < 0)
            return cli_usage_error("cdi generate",
                                   "invalid device name strategy \"%s\": want index, uuid or "
                                   "type-index",
                                   arg);
        a->strategies |= (unsigned)s;
        return 1;
    default:
        return 0;
    }
}

static int parse_option(struct args *a, int opt, const char *arg)
{
    switch (opt) {
    case 'o':
    case OPT_OUTPUT:
        a->output = arg;
        return 1;
    case OPT_VENDOR:
        a->vendor = arg;
        return 1;
    case OPT_CLASS:
        a->class = arg;
        return 1;
    case OPT_NO_ALL:
        a->no_all_device = true;
        return 1;
    case OPT_DRIVER_ROOT:
        a->driver_root = arg;
        return 1;
    case OPT_DEV_ROOT:
        a->dev_root = arg;
        return 1;
    case OPT_HOOK_PATH:
        a->hook_path = arg;
        return 1;
    case OPT_JSON:
        a->json = true;
        return 1;
    default:
        return parse_value(a, opt, arg);
    }
}

static int parse_args(int argc, char **argv, struct args *a)
{
    static const struct option options[] = {
        {"output", required_argument, NULL, OPT_OUTPUT},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"vendor", required_argument, NULL, OPT_VENDOR},
        {"class", required_argument, NULL, OPT_CLASS},
        {"device-name-strategy", required_argument, NULL, OPT_STRATEGY},
        {"no-all-device", no_argument, NULL, OPT_NO_ALL},
        {"nvidia-driver-root", required_argument, NULL, OPT_DRIVER_ROOT},
        {"driver-root", required_argument, NULL, OPT_DRIVER_ROOT},
        {"dev-root", required_argument, NULL, OPT_DEV_ROOT},
        {"nvidia-cdi-hook-path", required_argument, NULL, OPT_HOOK_PATH},
        {"json", no_argument, NULL, OPT_JSON},
        CLI_COMMON_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    int opt;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "o:" CLI_COMMON_SHORT, options, NULL)) != -1) {
        int r = parse_option(a, opt, optarg);
        if (r == 0)
            r = cli_common_option(&a->common, "cdi generate", opt, optarg);
        if (r < 0)
            return r;
        if (r == 0)
            return cli_usage_error("cdi generate", "unknown option");
    }
    if (optind < argc)
        return cli_usage_error("cdi generate", "unexpected argument \"%s\"", argv[optind]);
    if (a->json && strcmp(a->output, "-") == 0)
        return cli_usage_error("cdi generate", "--json and --output - exclude each other");
    return 0;
}

static bool has_spec_extension(const char *path)
{
    size_t n = strlen(path);
    return (n > 5 && strcmp(path + n - 5, ".json") == 0) ||
           (n > 5 && strcmp(path + n - 5, ".yaml") == 0);
}

/* --output must be a directory (or one we may create), not a file. */
static int check_output(const char *out)
{
    struct stat st;
    if (strcmp(out, "-") == 0)
        return 0;
    if (stat(out, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return 0;
        cli_error("cdi generate: --output %s is not a directory (it names the spec directory; "
                  "the file name is <vendor>-<class>.<format>)",
                  out);
        return -ENOTDIR;
    }
    if (errno == ENOENT && has_spec_extension(out)) {
        cli_error("cdi generate: --output %s looks like a file name; give the spec directory "
                  "(e.g. %s) and the file is named after the kind",
                  out, CDI_SPEC_DIR_DYNAMIC);
        return -EINVAL;
    }
    return 0;
}

static int read_inventory(const struct args *a, struct gpu_inventory **ret)
{
    struct diag d;
    diag_init(&d);
    _cleanup_(gpu_nvml_closep) struct gpu_nvml *nvml = NULL;
    int r = gpu_nvml_open(cli_common_nvml_lib(&a->common), &d, &nvml);
    if (r >= 0)
        r = gpu_inventory_read(nvml, &(struct gpu_read_options){.skip_topology = true}, &d, ret);
    if (r < 0)
        cli_error("%s", d.msg[0] ? d.msg : strerror(-r));
    return r;
}

static void warn_skipped(const struct gpu_inventory *inv)
{
    for (size_t i = 0; i < inv->n_devices; i++)
        if (inv->devices[i].error)
            fprintf(stderr, "gpuplane: cdi generate: GPU %u (%s) left out: %s\n",
                    inv->devices[i].index, inv->devices[i].uuid[0] ? inv->devices[i].uuid : "?",
                    inv->devices[i].lost ? "GPU is lost" : "NVML error");
}

/* Where the driver's files are: the flags, or with --mock the simulated node's root. */
struct roots {
    const char *driver;
    const char *hook;
    struct nvcdi_mock_root *mock; /* owned; NULL without --mock or with --nvidia-driver-root */
};

static int pick_roots(const struct args *a, const struct gpu_inventory *inv, struct roots *ret)
{
    struct diag d;
    diag_init(&d);
    *ret = (struct roots){.driver = a->driver_root ? a->driver_root : "/", .hook = a->hook_path};
    /* An explicit --nvidia-driver-root wins over the simulated node's. */
    if (a->driver_root || !a->common.mock)
        return 0;
    int r = nvcdi_mock_root_open_lasting(inv, cli_common_nvml_lib(&a->common), a->common.mock, &d,
                                         &ret->mock);
    if (r < 0) {
        cli_error("cdi generate: %s", d.msg[0] ? d.msg : strerror(-r));
        return r;
    }
    ret->driver = ret->mock->path;
    if (!ret->hook && ret->mock->cdi_hook)
        ret->hook = ret->mock->cdi_hook;
    if (ret->mock->lasting && strcmp(a->output, "-") != 0)
        fprintf(stderr,
                "gpuplane: cdi generate: the spec names the simulated node's driver root %s, "
                "which stays for later runs; remove it with rm -rf %s\n",
                ret->driver, ret->driver);
    return 0;
}

static int build_spec(const struct args *a, const struct gpu_inventory *inv,
                      const struct roots *roots, struct cdi_spec **ret)
{
    _cleanup_(nvcdi_freep) struct nvcdi *nv = NULL;
    _cleanup_free_ char *kind = NULL;
    struct diag d;
    diag_init(&d);
    if (asprintf(&kind, "%s/%s", a->vendor, a->class) < 0) {
        kind = NULL;
        return -ENOMEM;
    }
    struct nvcdi_options opts = {
        .kind = kind,
        .driver_root = roots->driver,
        .dev_root = a->dev_root,
        .hook_path = roots->hook,
        .strategies = a->strategies,
        .no_all_device = a->no_all_device,
    };
    int r = nvcdi_new(inv, &opts, &d, &nv);
    if (r >= 0)
        r = nvcdi_spec_new(nv, inv, &d, ret, NULL);
    if (r < 0)
        cli_error("cdi generate: %s", d.msg[0] ? d.msg : strerror(-r));
    return r;
}

static int print_summary(const struct args *a, const struct cdi_spec *spec, const char *path)
{
    if (!a->json) {
        printf("wrote %s: %s, cdiVersion %s, %zu devices\n", path, spec->kind,
               cdi_spec_version(spec), spec->devices.len);
        return 0;
    }
    _cleanup_json_ json_t *doc =
        json_pack("{s:s, s:s, s:s, s:[]}", "path", path, "kind", spec->kind, "cdiVersion",
                  cdi_spec_version(spec), "devices");
    json_t *names = doc ? json_object_get(doc, "devices") : NULL;
    for (size_t i = 0; names && i < spec->devices.len; i++)
        if (json_array_append_new(
                names, json_string((*VEC_AT(&spec->devices, struct cdi_device *, i))->name)) < 0)
            return -ENOMEM;
    if (!names || json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
        return -ENOMEM;
    fputc('\n', stdout);
    return 0;
}

static int emit(const struct args *a, const struct cdi_spec *spec)
{
    _cleanup_free_ char *text = NULL;
    _cleanup_free_ char *path = NULL;
    struct diag d;
    diag_init(&d);
    size_t len = 0;
    int r;
    if (strcmp(a->output, "-") == 0) {
        r = cdi_spec_format(spec, a->format, &d, &text, &len);
        if (r >= 0 && fwrite(text, 1, len, stdout) != len)
            r = -EIO;
    } else {
        r = cdi_spec_write(spec, a->output, NULL, a->format, &d, &path);
        if (r >= 0)
            r = print_summary(a, spec, path);
    }
    if (r < 0)
        cli_error("cdi generate: %s", d.msg[0] ? d.msg : strerror(-r));
    return r;
}

static int run(const struct args *a)
{
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    _cleanup_(cdi_spec_freep) struct cdi_spec *spec = NULL;
    _cleanup_(nvcdi_mock_root_freep) struct nvcdi_mock_root *mock = NULL;
    struct roots roots;
    if (check_output(a->output) < 0 || read_inventory(a, &inv) < 0)
        return CLI_EXIT_FAILURE;
    warn_skipped(inv);
    if (pick_roots(a, inv, &roots) < 0)
        return CLI_EXIT_FAILURE;
    mock = roots.mock;
    if (build_spec(a, inv, &roots, &spec) < 0 || emit(a, spec) < 0)
        return CLI_EXIT_FAILURE;
    if (fflush(stdout) != 0) {
        cli_error("cdi generate: cannot write the output: %s", strerror(errno));
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}

static int generate_main(int argc, char **argv)
{
    struct args a = {
        .output = CDI_SPEC_DIR_DYNAMIC,
        .format = CDI_FORMAT_JSON,
        .vendor = "nvidia.com",
        .class = "gpu",
    };
    cli_common_init(&a.common);
    int code = CLI_EXIT_USAGE;
    if (parse_args(argc, argv, &a) < 0)
        goto out;
    code = CLI_EXIT_OK;
    if (a.common.help) {
        fputs(HELP, stdout);
        goto out;
    }
    code = CLI_EXIT_FAILURE;
    if (cli_common_finish(&a.common, "cdi generate") >= 0)
        code = run(&a);
out:
    cli_common_release(&a.common);
    return code;
}

int nvcdi_cmd_main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(CDI_HELP, stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(CDI_HELP, stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "generate") == 0)
        return generate_main(argc - 1, argv + 1);
    cli_usage_error("cdi", "unknown command \"%s\"", argv[1]);
    return CLI_EXIT_USAGE;
}
