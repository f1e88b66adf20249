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
#include <unistd.h>

#include "base-doc.h"
#include "cli.h"
#include "dalloccmd.h"
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

enum fmt {
    FMT_TABLE,
    FMT_YAML,
    FMT_JSON
};

struct opts {
    enum fmt fmt;
    bool stats;
    struct dalloccmd_input in;
};

static int parse_format(const char *arg, enum fmt *ret)
{
    static const char *const NAMES[] = {"table", "yaml", "json"};

    for (size_t i = 0; i < ARRAY_SIZE(NAMES); i++)
        if (strcmp(arg, NAMES[i]) == 0) {
            *ret = (enum fmt)i;
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

static int add(void *target, json_t *obj, struct diag *d)
{
    return sched_add(target, obj, d);
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

static void print_table(json_t *res)
{
    json_t *p, *v;
    const char *k;
    size_t i, j;

    printf("%-32s %-20s %-6s %s\n", "POD", "NODE", "SCORE", "DEVICES / REASONS");
    json_array_foreach(res, i, p)
    {
        const char *node = json_string_value(json_object_get(p, "node"));

        printf("%-32s %-20s ", json_string_value(json_object_get(p, "pod")),
               node ? node : "<none>");
        if (node) {
            printf("%-6lld", (long long)json_integer_value(json_object_get(p, "score")));
            json_array_foreach(json_object_get(p, "devices"), j, v)
                printf("%s%s", j ? ", " : " ", json_string_value(v));
        } else {
            printf("%-6s", "-");
            j = 0;
            json_object_foreach(json_object_get(p, "reasons"), k, v)
                printf("%s%lld node(s): %s", j++ ? "; " : " ", (long long)json_integer_value(v), k);
        }
        putchar('\n');
    }
}

static int print_result(json_t *res, const struct sched_stats *st, enum fmt fmt)
{
    _cleanup_json_ json_t *doc = NULL;

    if (fmt == FMT_TABLE) {
        print_table(res);
        printf("\nscheduled %zu of %zu pods, %zu unschedulable\n", st->scheduled, st->pods,
               st->pods - st->scheduled);
        return 0;
    }
    doc = json_pack("{s:O, s:{s:I, s:I, s:I}}", "pods", res, "summary", "pods",
                    (json_int_t)st->pods, "scheduled", (json_int_t)st->scheduled, "unschedulable",
                    (json_int_t)(st->pods - st->scheduled));
    if (!doc)
        return -ENOMEM;
    return dalloccmd_print(doc, fmt == FMT_JSON);
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

static int run(struct opts *o)
{
    _cleanup_(sched_freep) struct sched *s = NULL;
    _cleanup_json_ json_t *out = NULL;
    struct sched_stats st = {0};
    struct diag d;
    int r;

    if (sched_new(&o->in.gates, &s) < 0)
        return CLI_EXIT_USAGE;
    sched_set_budget(s, o->in.budget);
    if (dalloccmd_input_load(&o->in, "schedule", add, s) < 0)
        return CLI_EXIT_USAGE;
    diag_init(&d);
    r = sched_run(s, &d, &st, isatty(STDERR_FILENO) ? progress : NULL, NULL, &out);
    if (r < 0) {
        fprintf(stderr, "gpuplane schedule: %s\n", d.msg[0] ? d.msg : strerror(-r));
        return CLI_EXIT_USAGE;
    }
    if (print_result(out, &st, o->fmt) < 0)
        return CLI_EXIT_USAGE;
    if (o->stats)
        print_stats(&st);
    return st.scheduled == st.pods ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

int schedcmd_main(int argc, char **argv)
{
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
        r = cli_common_finish(&cc, "schedule") < 0 ? CLI_EXIT_USAGE : run(&o);
    }
    cli_common_release(&cc);
    dalloccmd_input_release(&o.in);
    return r;
}
