/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane validate`: parses the options, then runs one check the way NVIDIA's validator runs a
 * component: the output directory is made (0755), the check's status file removed, the check made
 * (again every sleep interval while it fails, with WITH_WAIT=true), and the file written
 * atomically once it passes. `wait` and `cleanup` are the two ends other pods use: their init
 * containers wait for the files, the validator's preStop removes them.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "validate-internal.h"
#include "validate.h"

void validate_sleep_ms(uint64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static const char *status_file(enum validate_command c)
{
    switch (c) {
    case VALIDATE_DRIVER:
        return VALIDATE_FILE_DRIVER;
    case VALIDATE_TOOLKIT:
        return VALIDATE_FILE_TOOLKIT;
    case VALIDATE_PLUGIN:
        return VALIDATE_FILE_PLUGIN;
    case VALIDATE_CUDA:
        return VALIDATE_FILE_CUDA;
    default:
        return NULL;
    }
}

/* One try of the check; driver-ready's body goes to body (the other files are empty, as NVIDIA's
 * are). */
static int check_once(const struct validate_options *o, struct strbuf *body, struct diag *d)
{
    switch (o->command) {
    case VALIDATE_DRIVER:
        return validate_driver(o, body, d);
    case VALIDATE_TOOLKIT:
        return validate_toolkit(o, d);
    case VALIDATE_PLUGIN:
        return validate_plugin(o, d);
    case VALIDATE_CUDA:
        return validate_cuda(o, d);
    default:
        return -EINVAL;
    }
}

static int fail(const struct validate_options *o, const char *what, const char *why)
{
    fprintf(stderr, "gpuplane " VALIDATE_COMMAND " %s: %s%s%s\n", validate_command_name(o->command),
            what, why && *why ? ": " : "", why ? why : "");
    return CLI_EXIT_FAILURE;
}

static int run_check(const struct validate_options *o)
{
    const char *name = validate_command_name(o->command), *file = status_file(o->command);
    struct diag d;
    diag_init(&d);
    int r = validate_dir_prepare(o->output_dir, &d);
    if (r >= 0 && o->cleanup_all)
        r = validate_cleanup(o->output_dir, true, &d, NULL);
    if (r >= 0)
        r = validate_file_remove(o->output_dir, file, &d);
    if (r < 0)
        return fail(o, "cannot prepare the status file", d.msg);
    for (unsigned attempt = 1;; attempt++) {
        _cleanup_(strbuf_releasep) struct strbuf body;
        strbuf_init(&body, 4096);
        diag_init(&d);
        r = check_once(o, &body, &d);
        if (r < 0)
            return fail(o, "the check failed", d.msg[0] ? d.msg : strerror(-r));
        if (r == VALIDATE_READY) {
            r = validate_file_write(o->output_dir, file, strbuf_str(&body), &d);
            if (r < 0)
                return fail(o, "passed, but the status file cannot be written", d.msg);
            log_info("the check passed; status file written", "check", name, "file", file, "dir",
                     o->output_dir);
            return CLI_EXIT_OK;
        }
        if (!o->with_wait)
            return fail(o, "not ready", d.msg);
        log_warn("not ready; trying again after the sleep interval", "check", name, "attempt",
                 LOG_INT(attempt), "reason", d.msg, "sleep_ms", LOG_INT(o->sleep_ms));
        validate_sleep_ms(o->sleep_ms);
    }
}

static int run_wait(const struct validate_options *o)
{
    int r = validate_wait_files(o->output_dir, o->files, o->n_files, o->timeout_ms, o->sleep_ms);
    if (r == -ETIMEDOUT)
        return fail(o, "timed out", "the status files are still missing");
    if (r < 0)
        return fail(o, "cannot wait", strerror(-r));
    return CLI_EXIT_OK;
}

static int run_cleanup(const struct validate_options *o)
{
    struct diag d;
    unsigned removed = 0;
    diag_init(&d);
    int r = validate_cleanup(o->output_dir, false, &d, &removed);
    if (r < 0)
        return fail(o, "cannot remove the status files", d.msg);
    log_info("status files removed", "dir", o->output_dir, "count", LOG_INT(removed));
    return CLI_EXIT_OK;
}

int validate_main(int argc, char **argv)
{
    struct validate_options o;
    struct diag d;
    int r;
    diag_init(&d);
    validate_options_init(&o);
    r = validate_options_parse(argc, argv, &o, &d);
    if (r < 0) {
        if (d.msg[0])
            fprintf(stderr, "%s\n", d.msg);
        r = r == -ENOMEM ? CLI_EXIT_FAILURE : CLI_EXIT_USAGE;
    } else if (o.common.help) {
        validate_usage(stdout, o.command);
        r = CLI_EXIT_OK;
    } else if (cli_common_finish(&o.common, VALIDATE_COMMAND) < 0) {
        r = CLI_EXIT_USAGE;
    } else if (o.command == VALIDATE_WAIT) {
        r = run_wait(&o);
    } else if (o.command == VALIDATE_CLEANUP) {
        r = run_cleanup(&o);
    } else {
        r = run_check(&o);
    }
    validate_options_release(&o);
    return r;
}
