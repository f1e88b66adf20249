/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Parsing of the options every subcommand shares, and the plain error reporting of the command
 * line. Errors on the command line go to stderr as one human sentence; logs are for daemons at
 * work.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>

#include "cli.h"
#include "gpu.h"

void cli_common_init(struct cli_common *c)
{
    *c = (struct cli_common){.verbosity = 0, .log_format = LOG_FORMAT_TEXT};
}

void cli_common_release(struct cli_common *c)
{
    free(c->mock_lib);
    c->mock_lib = NULL;
}

static int parse_verbosity(const char *arg, int *ret)
{
    /* klog accepts -v=4; getopt leaves the '=' in the argument of a short option. */
    if (arg[0] == '=')
        arg++;
    char *end = NULL;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v < 0 || v > 100)
        return -EINVAL;
    *ret = (int)v;
    return 0;
}

int cli_common_option(struct cli_common *c, const char *command, int opt, const char *arg)
{
    switch (opt) {
    case 'v':
    case CLI_OPT_VERBOSITY:
        if (parse_verbosity(arg, &c->verbosity) < 0)
            return cli_usage_error(command, "invalid verbosity \"%s\": want a number 0-100", arg);
        return 1;
    case CLI_OPT_LOG_FORMAT:
        if (log_format_parse(arg, &c->log_format) < 0)
            return cli_usage_error(command, "invalid log format \"%s\": want text or json", arg);
        return 1;
    case CLI_OPT_MOCK:
        c->mock = arg;
        return 1;
    case CLI_OPT_NVML_LIB:
        c->nvml_lib = arg;
        return 1;
    case 'h':
    case CLI_OPT_HELP:
        c->help = true;
        return 1;
    default:
        return 0;
    }
}

int cli_common_finish(struct cli_common *c, const char *command)
{
    log_setup(c->verbosity, c->log_format);
    if (!c->mock)
        return 0;
    if (c->nvml_lib) {
        cli_error("%s: --mock and --nvml-lib exclude each other", command);
        return -EINVAL;
    }
    struct diag d;
    diag_init(&d);
    int r = gpu_mock_select(c->mock, &d, &c->mock_lib);
    if (r < 0) {
        cli_error("%s", d.msg);
        return r;
    }
    log_debug(2, "using the mock NVML library", "lib", c->mock_lib, "profile", c->mock);
    return 0;
}

const char *cli_common_nvml_lib(const struct cli_common *c)
{
    return c->mock_lib ? c->mock_lib : c->nvml_lib;
}

int cli_usage_error(const char *command, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "gpuplane %s: ", command);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see 'gpuplane %s --help')\n", command);
    va_end(ap);
    return -EINVAL;
}

void cli_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("gpuplane: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}
