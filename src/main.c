/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gpuplane binary: one program, one subcommand per part of the GPU plane. This file only finds
 * the subcommand and hands it the rest of the command line; each subcommand lives in its own
 * module.
 */
#include <stdio.h>
#include <string.h>

#include "celcmd.h"
#include "cli.h"
#include "dalloccmd.h"
#include "discover.h"
#include "dp.h"
#include "dra.h"
#include "exporter.h"
#include "info.h"
#include "nvcdi-cmd.h"
#include "operator.h"
#include "schedcmd.h"
#include "validate.h"

#ifndef GP_VERSION
#define GP_VERSION "unknown"
#endif
#ifndef GP_COMMIT
#define GP_COMMIT "unknown"
#endif

struct command {
    const char *name;
    const char *summary;
    int (*main)(int argc, char **argv);
};

static int version_main(int argc, char **argv);
static int help_main(int argc, char **argv);

static const struct command COMMANDS[] = {
    {"info", "show the node's GPUs, MIG devices and topology", info_main},
    {"cdi", "generate CDI specs for the node's GPUs (cdi generate)", nvcdi_cmd_main},
    {"device-plugin", "the kubelet device plugin for NVIDIA GPUs", dp_main},
    {"dra-driver", "the DRA kubelet driver for NVIDIA GPUs (gpu.nvidia.com)", dra_main},
    {"discover", "GPU feature discovery: NVIDIA GFD's node labels", discover_main},
    {"exporter", "Prometheus metrics of the GPUs under dcgm-exporter's names", exporter_main},
    {"operator", "the GPU operator: ClusterPolicy to DaemonSets (also operator render)", op_main},
    {"validate", "the GPU operator's node checks and their status files", validate_main},
    {"cel", "evaluate CEL expressions as DRA device selectors (cel eval)", celcmd_main},
    {"allocate", "allocate DRA ResourceClaims to devices on a node", dalloccmd_main},
    {"schedule", "simulate the scheduler placing pods with DRA claims on nodes", schedcmd_main},
    {"version", "print the version", version_main},
    {"help", "show this help", help_main},
};

static void print_usage(FILE *out)
{
    fputs("Usage: gpuplane COMMAND [OPTIONS]\n"
          "\n"
          "gpuplane hands NVIDIA GPUs to Kubernetes pods: the GPU plane of a node in one binary.\n"
          "\n"
          "Commands:\n",
          out);
    for (size_t i = 0; i < ARRAY_SIZE(COMMANDS); i++)
        fprintf(out, "  %-14s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fputs("\n"
          "Run 'gpuplane COMMAND --help' for a command's options. Every command accepts\n"
          "--mock PROFILE to run against a simulated node (e.g. --mock dgx-h100).\n",
          out);
}

static int version_main(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs("Usage: gpuplane version\n\nPrint gpuplane's version and source commit.\n", stdout);
        return CLI_EXIT_OK;
    }
    if (argc > 1)
        return cli_usage_error("version", "unexpected argument \"%s\"", argv[1]), CLI_EXIT_USAGE;
    printf("gpuplane %s (commit %s)\n", GP_VERSION, GP_COMMIT);
    return CLI_EXIT_OK;
}

static int help_main(int argc, char **argv)
{
    print_usage(stdout);
    return CLI_EXIT_OK;
}

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(COMMANDS); i++)
        if (strcmp(COMMANDS[i].name, name) == 0)
            return &COMMANDS[i];
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        print_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0)
        return help_main(argc - 1, argv + 1);
    if (strcmp(name, "--version") == 0)
        return version_main(1, argv + 1);
    const struct command *cmd = find_command(name);
    if (!cmd) {
        fprintf(stderr, "gpuplane: unknown command \"%s\" (see 'gpuplane --help')\n", name);
        return CLI_EXIT_USAGE;
    }
    return cmd->main(argc - 1, argv + 1);
}
