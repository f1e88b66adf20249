/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane device-plugin`: parse NVIDIA's flags, variables and config file (dp-config.h), answer
 * --help and --print-config, set up logging and the NVML source, then hand over to the daemon.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "dp-internal.h"

#define COMMAND "device-plugin"

static int print_config(const struct dp_config *cfg)
{
    json_t *j = NULL;
    if (dp_config_to_json(cfg, &j) < 0) {
        cli_error("cannot format the configuration");
        return CLI_EXIT_FAILURE;
    }
    int r = json_dumpf(j, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(j);
    fputc('\n', stdout);
    return r < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

static void log_warnings(const struct dp_config *cfg)
{
    for (char **w = cfg->warnings; w && *w; w++)
        log_warn(*w);
}

static int parse(int argc, char **argv, struct dp_config *cfg)
{
    struct diag d;
    diag_init(&d);
    int r = dp_config_init(cfg);
    if (r < 0) {
        cli_error("out of memory");
        return CLI_EXIT_FAILURE;
    }
    r = dp_config_parse_args(argc, argv, cfg, &d);
    if (r == -EINVAL) {
        if (d.msg[0]) /* already ends with the pointer to --help */
            fprintf(stderr, "gpuplane " COMMAND ": %s\n", d.msg);
        return CLI_EXIT_USAGE;
    }
    if (r < 0) {
        cli_error("%s", d.msg[0] ? d.msg : "invalid configuration");
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}

int dp_main(int argc, char **argv)
{
    struct dp_config cfg;
    int r = parse(argc, argv, &cfg);
    if (r == CLI_EXIT_OK && cfg.common.help) {
        dp_config_print_help(stdout);
    } else if (r == CLI_EXIT_OK && cfg.print_config) {
        r = print_config(&cfg);
    } else if (r == CLI_EXIT_OK) {
        if (cli_common_finish(&cfg.common, COMMAND) < 0) {
            r = CLI_EXIT_USAGE;
        } else {
            log_warnings(&cfg);
            r = dp_daemon_run(&cfg, argc, argv);
        }
    }
    dp_config_release(&cfg);
    return r;
}
