/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane allocate --node NODE [--feature-gates K=V,...] [-o yaml|json] -f FILE [-f FILE ...]`:
 * reads ResourceSlices, DeviceClasses, ResourceClaims and Nodes (multi-document YAML or JSON,
 * `kind: List` too), treats claims that carry status.allocation as the cluster's allocated state
 * and allocates the others together, in input order, for the node, as Kubernetes' scheduler would
 * for one pod. Exit 0 prints those claims with status.allocation as a `kind: List`; 1 no solution
 * on the node (stderr says which claim and request, or that invalid resource pools were
 * encountered: a failure of this node alone, as kube-scheduler treats it); 2 an error.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base-doc.h"
#include "cli.h"
#include "dalloc.h"
#include "dalloccmd.h"

static const char USAGE[] =
    "Usage: gpuplane allocate --node NODE [--feature-gates K=V,...] [-o yaml|json] [--stats]\n"
    "                         -f FILE [-f FILE ...]\n"
    "\n"
    "Allocate devices to DRA ResourceClaims (resource.k8s.io/v1) as Kubernetes' scheduler\n"
    "does for one pod on NODE. The files hold ResourceSlices, DeviceClasses, ResourceClaims and\n"
    "optionally the Node (its labels feed slice node selectors): multi-document YAML or JSON,\n"
    "`kind: List` too. Claims with status.allocation are the cluster's allocated state; the\n"
    "others are allocated together, in input order, and printed with status.allocation.\n"
    "\n"
    "Options:\n"
    "      --node NODE             the node to allocate for (required)\n"
    "  -o, --output FORMAT         yaml (default) or json\n"
    "      --stats                 print the search steps taken on stderr\n" DALLOCCMD_OPTIONS_HELP
        CLI_COMMON_HELP "\n"
    "Exit status: 0 allocated, 1 no solution on NODE (stderr says which claim and request, or\n"
    "that invalid resource pools were encountered), 2 error (invalid input, unknown class, CEL\n"
    "compile or runtime error, bad usage).\n"
    "\n"
    "Examples:\n"
    "  gpuplane allocate --node node-1 -f slices.yaml -f classes.yaml -f claim.yaml\n"
    "  gpuplane allocate --node node-1 -o json -f cluster.yaml\n"
    "  gpuplane allocate --node node-1 --feature-gates DRAPrioritizedList=false -f all.yaml\n";

enum {
    OPT_NODE = 0x2000,
    OPT_STATS,
};

struct opts {
    const char *node;
    bool json;
    bool stats;
    struct dalloccmd_input in;
};

static int parse(int argc, char **argv, struct cli_common *cc, struct opts *o)
{
    static const struct option LONG[] = {
        {"node", required_argument, NULL, OPT_NODE},
        {"output", required_argument, NULL, 'o'},
        {"stats", no_argument, NULL, OPT_STATS},
        DALLOCCMD_OPTIONS,
        CLI_COMMON_OPTIONS,
        {NULL, 0, NULL, 0},
    };
    int c, r;

    while ((c = getopt_long(argc, argv, "o:f:" CLI_COMMON_SHORT, LONG, NULL)) != -1) {
        if ((r = dalloccmd_input_option(&o->in, "allocate", c, optarg)) != 0) {
            if (r < 0)
                return r;
            continue;
        }
        switch (c) {
        case OPT_NODE:
            o->node = optarg;
            break;
        case OPT_STATS:
            o->stats = true;
            break;
        case 'o':
            if (strcmp(optarg, "json") != 0 && strcmp(optarg, "yaml") != 0)
                return cli_usage_error("allocate", "-o: expected yaml or json, not %s", optarg);
            o->json = strcmp(optarg, "json") == 0;
            break;
        case 'h':
            cc->help = true;
            break;
        case '?':
            return cli_usage_error("allocate", "unknown option");
        default:
            r = cli_common_option(cc, "allocate", c, optarg);
            if (r < 0)
                return CLI_EXIT_USAGE;
            if (r == 0)
                return cli_usage_error("allocate", "unknown option");
        }
    }
    if (cc->help)
        return 0;
    if (optind < argc)
        return cli_usage_error("allocate", "unexpected argument: %s", argv[optind]);
    if (!o->node || !*o->node)
        return cli_usage_error("allocate", "--node is required");
    if (o->in.nfiles == 0)
        return cli_usage_error("allocate", "at least one -f FILE is required");
    return 0;
}

static int add(void *target, json_t *obj, struct diag *d)
{
    return dalloc_add(target, obj, d);
}

static int run(struct opts *o)
{
    _cleanup_(dalloc_freep) struct dalloc *a = NULL;
    _cleanup_json_ json_t *out = NULL;
    _cleanup_json_ json_t *list = NULL;
    struct diag d;
    int r;

    if (dalloc_new(o->node, &o->in.gates, &a) < 0)
        return CLI_EXIT_USAGE;
    dalloc_set_budget(a, o->in.budget);
    if (dalloccmd_input_load(&o->in, "allocate", add, a) < 0)
        return CLI_EXIT_USAGE;
    diag_init(&d);
    r = dalloc_run(a, &d, &out);
    if (o->stats)
        fprintf(stderr, "stats: %llu search steps\n", (unsigned long long)dalloc_steps(a));
    if (r < 0) {
        fprintf(stderr, "gpuplane allocate: %s\n", d.msg[0] ? d.msg : strerror(-r));
        return CLI_EXIT_USAGE;
    }
    if (r == 1) {
        fprintf(stderr, "gpuplane allocate: no solution: %s\n", d.msg);
        return CLI_EXIT_FAILURE;
    }
    list = json_pack("{s:s, s:s, s:O}", "apiVersion", "v1", "kind", "List", "items", out);
    return list && dalloccmd_print(list, o->json) == 0 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
}

int dalloccmd_main(int argc, char **argv)
{
    struct cli_common cc;
    struct opts o = {0};
    int r;

    dalloccmd_input_init(&o.in);
    cli_common_init(&cc);
    r = parse(argc, argv, &cc, &o);
    if (r != 0)
        r = CLI_EXIT_USAGE; /* cli_usage_error() returns -EINVAL */
    if (r == 0 && cc.help) {
        fputs(USAGE, stdout);
    } else if (r == 0) {
        r = cli_common_finish(&cc, "allocate") < 0 ? CLI_EXIT_USAGE : run(&o);
    }
    cli_common_release(&cc);
    dalloccmd_input_release(&o.in);
    return r;
}
