/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane schedule [-o table|yaml|json] [--stats] -f FILE...`: reads Pods, Nodes,
 * ResourceSlices, DeviceClasses, ResourceClaims and ResourceClaimTemplates and schedules the
 * pending pods one by one (sched.h), printing each pod's node and devices or why it is
 * unschedulable, then a summary.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base-doc.h"
#include "cli.h"
#include "dalloccmd.h"
#include "sched-print.h"
#include "sched.h"
#include "schedcmd.h"

static const char USAGE[] =
    "Usage: gpuplane schedule [-o table|yaml|json] [--stats] [--feature-gates K=V,...]\n"
    "                         -f FILE [-f FILE ...]\n"
    "\n"
    "Simulate Kubernetes' scheduler with DRA: the files hold Pods (spec.resourceClaims naming\n"
    "ResourceClaims or ResourceClaimTemplates), Nodes, ResourceSlices, DeviceClasses and\n"
    "ResourceClaims. Each pending pod, in input order, gets claims from its templates (named\n"
    "<pod>-<claim>), is tried on every node, goes to the node scoring best (earlier\n"
    "firstAvailable sub-requests score higher; ties: the first node by name) and its allocation\n"
    "becomes cluster state for the pods after it. The scheduler's node filters (unschedulable\n"
    "nodes, taints and tolerations, node selector and required node affinity) apply first.\n"
    "\n"
    "Options:\n"
    "  -o, --output FORMAT         table (default), yaml or json\n"
    "      --stats                 print pods/s and the time per phase on "
    "stderr\n" DALLOCCMD_OPTIONS_HELP CLI_COMMON_HELP "\n"
    "Exit status: 0 every pod scheduled, 1 some pod unschedulable, 2 error.\n"
    "\n"
    "Examples:\n"
    "  gpuplane schedule -f cluster.yaml -f pods.yaml\n"
    "  gpuplane schedule -o json --stats -f all.yaml\n";

enum {
    OPT_STATS = 0x2000,
};

struct opts {
    enum sched_fmt fmt;
    bool stats;
    struct dalloccmd_input in;
};

static int parse_format(const char *arg, enum sched_fmt *ret)
{
    static const struct {
        const char *name;
        enum sched_fmt fmt;
    } NAMES[] = {{"table", SCHED_FMT_TABLE}, {"yaml", SCHED_FMT_YAML}, {"json", SCHED_FMT_JSON}};

    for (size_t i = 0; i < ARRAY_SIZE(NAMES); i++)
        if (strcmp(arg, NAMES[i].name) == 0) {
            *ret = NAMES[i].fmt;
            return 0;
        }
    return cli_usage_error("schedule", "-o: expected table, yaml or json, not %s", arg);
}

static int parse(int argc, char **argv, struct cli_common *cc, struct opts *o)
{
    static const struct option LONG[] = {
        {"stats", no_argument, NULL, OPT_STATS},
        {"output", required_argument, NULL, 'o'},
        DALLOCCMD_OPTIONS,
        CLI_COMMON_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    int c, r;

    while ((c = getopt_long(argc, argv, "o:f:" CLI_COMMON_SHORT, LONG, NULL)) != -1) {
        if ((r = dalloccmd_input_option(&o->in, "schedule", c, optarg)) != 0) {
            if (r < 0)
                return r;
            continue;
        }
        switch (c) {
        case OPT_STATS:
            o->stats = true;
            break;
        case 'o':
            if ((r = parse_format(optarg, &o->fmt)) < 0)
                return r;
            break;
        case 'h':
            cc->help = true;
            break;
        case '?':
            return cli_usage_error("schedule", "unknown option");
        default:
            r = cli_common_option(cc, "schedule", c, optarg);
            if (r < 0)
                return CLI_EXIT_USAGE;
            if (r == 0)
                return cli_usage_error("schedule", "unknown option");
        }
    }
    if (cc->help)
        return 0;
    if (optind < argc)
        return cli_usage_error("schedule", "unexpected argument: %s", argv[optind]);
    if (o->in.nfiles == 0)
        return cli_usage_error("schedule", "at least one -f FILE is required");
    return 0;
}

/* Objects are prepared (what the scheduler keeps of them, shared) as they are parsed, on two
 * threads for large JSON Lists, then added in input order. */
static int add(void *target, json_t *obj, struct diag *d)
{
    return sched_add_prepared(target, obj, d);
}

static void progress(size_t done, size_t total, void *arg)
{
    (void)arg;
    if (total < 20)
        return;
    fprintf(stderr, "\r[%-40.*s] %zu/%zu", (int)(done * 40 / total),
            "########################################", done, total);
    if (done == total)
        fputc('\n', stderr);
}

static void print_stats(const struct sched_stats *st)
{
    fprintf(stderr,
            "stats: %zu pods in %.6f s (%.1f pods/s); %zu node evaluations, %zu allocator "
            "runs (%.2f us each); filter %.6f s, score %.6f s, commit %.6f s\n",
            st->pods, st->total_s, st->total_s > 0 ? (double)st->pods / st->total_s : 0.0,
            st->evaluations, st->attempts,
            st->attempts ? st->filter_s * 1e6 / (double)st->attempts : 0.0, st->filter_s,
            st->score_s, st->commit_s);
}

static double clock_s(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_s(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

/* The process's peak resident set so far (VmHWM), in KiB; 0 when unknown. */
static unsigned long long peak_rss_kib(void)
{
    _cleanup_fclose_ FILE *f = fopen("/proc/self/status", "re");
    unsigned long long kib = 0;
    char line[256];

    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmHWM: %llu kB", &kib) == 1)
            break;
    return kib;
}

/* The whole command's phases, after the run's own line: what it read, how long reading
 * (parsing, adding), scheduling and printing took, and the peak memory. */
static void print_phases(const struct dalloccmd_input *in, const struct sched_stats *st,
                         double print_s, double wall_s)
{
    double mb = (double)in->bytes / 1e6, rss = (double)peak_rss_kib() / 1024.0;

    fprintf(stderr,
            "stats: load %.6f s (%.1f MB, %.1f MB/s; CPU %.6f s), schedule %.6f s, print %.6f s; "
            "whole command %.6f s (%.1f pods/s; CPU %.6f s), peak RSS %.1f MiB "
            "(%.1f bytes per input byte)\n",
            in->load_s, mb, in->load_s > 0 ? mb / in->load_s : 0.0, in->load_cpu_s, st->total_s,
            print_s, wall_s, wall_s > 0 ? (double)st->pods / wall_s : 0.0,
            clock_s(CLOCK_PROCESS_CPUTIME_ID), rss,
            in->bytes ? rss * 1024.0 * 1024.0 / (double)in->bytes : 0.0);
}

static int emit(void *arg, json_t *result)
{
    return sched_printer_pod(arg, result);
}

/* The cluster, left for the process's exit to take back, as compilers leave their trees: the
 * kernel drops its pages at once, where freeing its millions of values one by one took a sixth of
 * the whole command at 40,000 pods. Held here, it stays reachable for leak checkers. */
static struct sched *left_to_exit;

static int run(struct opts *o, double t_start)
{
    _cleanup_(sched_freep) struct sched *s = NULL;
    struct sched_printer pr;
    struct sched_stats st = {0};
    struct doc_prep prep;
    double t, print_s;
    struct diag d;
    int r;

    if (sched_new(&o->in.gates, &s) < 0)
        return CLI_EXIT_USAGE;
    sched_set_budget(s, o->in.budget);
    prep = sched_doc_prep(s);
    if (dalloccmd_input_load_prep(&o->in, "schedule", &prep, add, s) < 0)
        return CLI_EXIT_USAGE;
    diag_init(&d);
    sched_printer_init(&pr, o->fmt);
    r = sched_run_each(s, &d, &st, isatty(STDERR_FILENO) ? progress : NULL, NULL, emit, &pr);
    if (r < 0) {
        sched_printer_release(&pr);
        if (d.msg[0])
            dalloccmd_input_locate(&o->in, &d);
        fprintf(stderr, "gpuplane schedule: %s\n", d.msg[0] ? d.msg : strerror(-r));
        return CLI_EXIT_USAGE;
    }
    t = now_s();
    r = sched_printer_end(&pr, st.pods, st.scheduled);
    if (r >= 0 && fwrite(strbuf_str(&pr.out), 1, pr.out.len, stdout) != pr.out.len)
        r = -EIO;
    if (r >= 0 && fflush(stdout) != 0)
        r = -EIO;
    sched_printer_release(&pr);
    print_s = st.emit_s + now_s() - t;
    if (r < 0) {
        fprintf(stderr, "gpuplane schedule: writing the result: %s\n", strerror(-r));
        return CLI_EXIT_USAGE;
    }
    left_to_exit = TAKE_PTR(s);
    if (o->stats) {
        print_stats(&st);
        print_phases(&o->in, &st, print_s, now_s() - t_start);
    }
    return st.scheduled == st.pods ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

int schedcmd_main(int argc, char **argv)
{
    double t_start = now_s();
    struct cli_common cc;
    struct opts o = {0};
    int r;

    dalloccmd_input_init(&o.in);
    cli_common_init(&cc);
    r = parse(argc, argv, &cc, &o);
    if (r != 0)
        r = CLI_EXIT_USAGE;
    if (r == 0 && cc.help) {
        fputs(USAGE, stdout);
    } else if (r == 0) {
        r = cli_common_finish(&cc, "schedule") < 0 ? CLI_EXIT_USAGE : run(&o, t_start);
    }
    cli_common_release(&cc);
    dalloccmd_input_release(&o.in);
    return r;
}
