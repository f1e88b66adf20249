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

#define SCHEDCMD_MAX_FILES 64

static const char USAGE[] =
    "Usage: gpuplane schedule [-o table|yaml|json] [--stats] [--feature-gates K=V,...]\n"
    "                         -f FILE [-f FILE ...]\n"
    "\n"
    "Simulate Kubernetes' scheduler with DRA: the files hold Pods (spec.resourceClaims naming\n"
    "ResourceClaims or ResourceClaimTemplates), Nodes, ResourceSlices, DeviceClasses and\n"
    "ResourceClaims. Each pending pod, in input order, gets claims from its templates (named\n"
    "<pod>-<claim>), is tried on every node, goes to the node scoring best (earlier\n"
    "firstAvailable sub-requests score higher; ties: the first node by name) and its allocation\n"
    "becomes cluster state for the pods after it.\n"
    "\n"
    "Options:\n"
    "  -o, --output FORMAT         table (default), yaml or json\n"
    "  -f, --filename FILE         an input file (repeatable; '-' reads stdin)\n"
    "      --stats                 print pods/s and the time per phase on stderr\n"
    "      --feature-gates LIST    Kubernetes feature gates, e.g. DRAPrioritizedList=false\n"
    "      --budget N              search steps per pod and node (default "
    "1000000)\n" CLI_COMMON_HELP "\n"
    "Exit status: 0 every pod scheduled, 1 some pod unschedulable, 2 error.\n"
    "\n"
    "Examples:\n"
    "  gpuplane schedule -f cluster.yaml -f pods.yaml\n"
    "  gpuplane schedule -o json --stats -f all.yaml\n";

enum {
    OPT_GATES = 0x2000,
    OPT_BUDGET,
    OPT_STATS
};

enum fmt {
    FMT_TABLE,
    FMT_YAML,
    FMT_JSON
};

struct opts {
    const char *files[SCHEDCMD_MAX_FILES];
    size_t nfiles;
    enum fmt fmt;
    bool stats;
    unsigned long long budget;
    struct dalloc_gates gates;
};

static int parse(int argc, char **argv, struct cli_common *cc, struct opts *o)
{
    static const struct option LONG[] = {
        {"feature-gates", required_argument, NULL, OPT_GATES},
        {"budget", required_argument, NULL, OPT_BUDGET},
        {"stats", no_argument, NULL, OPT_STATS},
        {"output", required_argument, NULL, 'o'},
        {"filename", required_argument, NULL, 'f'},
        CLI_COMMON_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    struct diag d;
    char *end;
    int c, r;

    while ((c = getopt_long(argc, argv, "o:f:" CLI_COMMON_SHORT, LONG, NULL)) != -1) {
        switch (c) {
        case OPT_GATES:
            diag_init(&d);
            if (dalloc_gates_parse(&o->gates, optarg, &d) < 0)
                return cli_usage_error("schedule", "--feature-gates: %s", d.msg);
            break;
        case OPT_BUDGET:
            errno = 0;
            o->budget = strtoull(optarg, &end, 10);
            if (errno || *end || end == optarg || o->budget == 0)
                return cli_usage_error("schedule", "--budget: not a positive number: %s", optarg);
            break;
        case OPT_STATS:
            o->stats = true;
            break;
        case 'o':
            if (strcmp(optarg, "table") == 0)
                o->fmt = FMT_TABLE;
            else if (strcmp(optarg, "yaml") == 0)
                o->fmt = FMT_YAML;
            else if (strcmp(optarg, "json") == 0)
                o->fmt = FMT_JSON;
            else
                return cli_usage_error("schedule", "-o: expected table, yaml or json, not %s",
                                       optarg);
            break;
        case 'f':
            if (o->nfiles >= SCHEDCMD_MAX_FILES)
                return cli_usage_error("schedule", "more than %d files", SCHEDCMD_MAX_FILES);
            o->files[o->nfiles++] = optarg;
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
    if (o->nfiles == 0)
        return cli_usage_error("schedule", "at least one -f FILE is required");
    return 0;
}

static int load_file(struct sched *s, const char *path, struct doc **docs, size_t i)
{
    struct diag d;
    int r;

    diag_init(&d);
    r = doc_load_file_limits(strcmp(path, "-") == 0 ? "/dev/stdin" : path, &doc_limits_manifest, &d,
                             &docs[i]);
    if (r < 0) {
        fprintf(stderr, "gpuplane schedule: %s\n", d.msg[0] ? d.msg : strerror(-r));
        return r;
    }
    for (size_t k = 0; k < doc_count(docs[i]); k++) {
        json_t *root = doc_root(docs[i], k);
        if (json_is_null(root))
            continue;
        if ((r = sched_add(s, root, &d)) < 0) {
            fprintf(stderr, "gpuplane schedule: %s: %s\n", path, d.msg);
            return r;
        }
    }
    return 0;
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
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    _cleanup_json_ json_t *doc = NULL;
    char *s;

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
    if (fmt == FMT_JSON) {
        s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (!s)
            return -ENOMEM;
        puts(s);
        free(s);
        return 0;
    }
    if (yaml_emit(&sb, doc) < 0)
        return -ENOMEM;
    fputs(strbuf_str(&sb), stdout);
    return 0;
}

static int run(const struct opts *o)
{
    _cleanup_(sched_freep) struct sched *s = NULL;
    struct doc *docs[SCHEDCMD_MAX_FILES] = {0};
    struct sched_stats st = {0};
    json_t *out = NULL;
    struct diag d;
    int r, ret = CLI_EXIT_USAGE;

    if (sched_new(&o->gates, &s) < 0)
        return CLI_EXIT_USAGE;
    sched_set_budget(s, o->budget);
    for (size_t i = 0; i < o->nfiles; i++)
        if (load_file(s, o->files[i], docs, i) < 0)
            goto out;
    diag_init(&d);
    r = sched_run(s, &d, &st, isatty(STDERR_FILENO) ? progress : NULL, NULL, &out);
    if (r < 0) {
        fprintf(stderr, "gpuplane schedule: %s\n", d.msg[0] ? d.msg : strerror(-r));
        goto out;
    }
    if (print_result(out, &st, o->fmt) < 0) {
        json_decref(out);
        goto out;
    }
    json_decref(out);
    if (o->stats)
        fprintf(stderr,
                "stats: %zu pods in %.6f s (%.1f pods/s); %zu node evaluations, %zu allocator "
                "runs (%.2f us each); filter %.6f s, score %.6f s, commit %.6f s\n",
                st.pods, st.total_s, st.total_s > 0 ? (double)st.pods / st.total_s : 0.0,
                st.evaluations, st.attempts,
                st.attempts ? st.filter_s * 1e6 / (double)st.attempts : 0.0, st.filter_s,
                st.score_s, st.commit_s);
    ret = st.scheduled == st.pods ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
out:
    s = sched_free(s);
    for (size_t i = 0; i < o->nfiles; i++)
        doc_free(docs[i]);
    return ret;
}

int schedcmd_main(int argc, char **argv)
{
    struct cli_common cc;
    struct opts o = {0};
    int r;

    dalloc_gates_default(&o.gates);
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
    return r;
}
