/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every subcommand shares on its command line: verbosity (-v=N, klog style), the log format,
 * where NVML comes from (--nvml-lib PATH, or --mock PROFILE for the mock library with a node
 * profile) and --help. A subcommand lists CLI_COMMON_OPTIONS in its getopt_long table, passes
 * unknown options to cli_common_option(), and calls cli_common_finish() once parsing is done.
 */
#pragma once

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include "base.h"

/* Exit codes of every subcommand. */
enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_FAILURE = 1, /* the work failed (no NVML, a bad config file, ...) */
    CLI_EXIT_USAGE = 2,   /* the command line was wrong */
};

/* getopt_long values of the common options (above any single character). */
enum {
    CLI_OPT_VERBOSITY = 0x1000,
    CLI_OPT_LOG_FORMAT,
    CLI_OPT_MOCK,
    CLI_OPT_NVML_LIB,
    CLI_OPT_HELP,
};

#define CLI_COMMON_OPTIONS                                                                         \
    {"v", required_argument, NULL, CLI_OPT_VERBOSITY},                                             \
        {"verbosity", required_argument, NULL, CLI_OPT_VERBOSITY},                                 \
        {"log-format", required_argument, NULL, CLI_OPT_LOG_FORMAT},                               \
        {"mock", required_argument, NULL, CLI_OPT_MOCK},                                           \
        {"nvml-lib", required_argument, NULL, CLI_OPT_NVML_LIB},                                   \
    {                                                                                              \
        "help", no_argument, NULL, CLI_OPT_HELP                                                    \
    }

/* The short options every subcommand accepts, for its getopt_long optstring. */
#define CLI_COMMON_SHORT "v:h"

/* The --help lines for the common options. */
#define CLI_COMMON_HELP                                                                            \
    "  -v, --v=N               log verbosity (klog levels; default 0)\n"                           \
    "      --log-format=FMT    text (klog) or json\n"                                              \
    "      --nvml-lib=PATH     the NVML library to load (default libnvidia-ml.so.1;\n"             \
    "                          env GPUPLANE_NVML_LIB)\n"                                           \
    "      --mock=PROFILE      use the built mock NVML library with a node profile: a path or\n"   \
    "                          a bundled name (dgx-h100, a100-mig, pcie-t4, lost-gpu)\n"           \
    "  -h, --help              show this help\n"

struct cli_common {
    int verbosity;
    enum log_format log_format;
    const char *mock;     /* --mock PROFILE, or NULL */
    const char *nvml_lib; /* --nvml-lib PATH, or NULL */
    bool help;
    char *mock_lib; /* owned: the mock library chosen by --mock */
};

void cli_common_init(struct cli_common *c);
void cli_common_release(struct cli_common *c);

/* Handles one getopt_long result. Returns 1 if it was a common option, 0 if not, and
 * -EINVAL (with a message on stderr naming the command) for a bad value. */
_wur_ int cli_common_option(struct cli_common *c, const char *command, int opt, const char *arg);

/* Sets up logging and, with --mock, selects the mock library. On failure prints the reason on
 * stderr and returns a negative errno. */
_wur_ int cli_common_finish(struct cli_common *c, const char *command);

/* The NVML library path to load: --mock's library, --nvml-lib, or NULL for the default. */
const char *cli_common_nvml_lib(const struct cli_common *c);

/* "gpuplane CMD: unknown option ... (see gpuplane CMD --help)" for a getopt '?' result. */
int cli_usage_error(const char *command, const char *fmt, ...) _printf_(2, 3);

/* Prints "gpuplane: <message>" on stderr, as every subcommand reports a fatal error. */
void cli_error(const char *fmt, ...) _printf_(1, 2);
