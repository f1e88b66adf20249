/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane allocate --node NODE [--feature-gates K=V,...] [-o yaml|json] -f FILE [-f FILE ...]`:
 * reads ResourceSlices, DeviceClasses, ResourceClaims and Nodes (multi-document YAML or JSON,
 * `kind: List` too), treats claims that carry status.allocation as the cluster's allocated state
 * and allocates the others together, in input order, for the node, as Kubernetes' scheduler would
 * for one pod. Exit 0 prints those claims with status.allocation as a `kind: List`; 1 no solution
 * (stderr says which claim and request); 2 an error.
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

#define DALLOCCMD_MAX_FILES 64

static const char USAGE[] =
    "Usage: gpuplane allocate --node NODE [--feature-gates K=V,...] [-o yaml|json]\n"
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
    "      --feature-gates LIST    Kubernetes feature gates, e.g. DRAAdminAccess=false\n"
    "                              (defaults as in 1.35: DRAAdminAccess, DRAPrioritizedList on)\n"
    "  -o, --output FORMAT         yaml (default) or json\n"
    "  -f, --filename FILE         an input file (repeatable; '-' reads stdin)\n"
    "      --budget N              give up after N search steps (default 1000000)\n" CLI_COMMON_HELP
    "\n"
    "Exit status: 0 allocated, 1 no solution (stderr says which claim and request),\n"
    "2 error (invalid input, unknown class, CEL compile or runtime error, bad usage).\n"
    "\n"
    "Examples:\n"
    "  gpuplane allocate --node node-1 -f slices.yaml -f classes.yaml -f claim.yaml\n"
    "  gpuplane allocate --node node-1 -o json -f cluster.yaml\n"
    "  gpuplane allocate --node node-1 --feature-gates DRAPrioritizedList=false -f all.yaml\n";

enum {
    OPT_NODE = 0x2000,
    OPT_GATES,
    OPT_BUDGET
};

struct opts {
    const char *node;
    const char *files[DALLOCCMD_MAX_FILES];
    size_t nfiles;
    bool json;
    unsigned long long budget;
    struct dalloc_gates gates;
};

static int parse(int argc, char **argv, struct cli_common *cc, struct opts *o)
{
    static const struct option LONG[] = {
        {"node", required_argument, NULL, OPT_NODE},
        {"feature-gates", required_argument, NULL, OPT_GATES},
        {"budget", required_argument, NULL, OPT_BUDGET},
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
        case OPT_NODE:
            o->node = optarg;
            break;
        case OPT_GATES:
            diag_init(&d);
            if (dalloc_gates_parse(&o->gates, optarg, &d) < 0)
                return cli_usage_error("allocate", "--feature-gates: %s", d.msg);
            break;
        case OPT_BUDGET:
            errno = 0;
            o->budget = strtoull(optarg, &end, 10);
            if (errno || *end || end == optarg || o->budget == 0)
                return cli_usage_error("allocate", "--budget: not a positive number: %s", optarg);
            break;
        case 'o':
            if (strcmp(optarg, "json") != 0 && strcmp(optarg, "yaml") != 0)
                return cli_usage_error("allocate", "-o: expected yaml or json, not %s", optarg);
            o->json = strcmp(optarg, "json") == 0;
            break;
        case 'f':
            if (o->nfiles >= DALLOCCMD_MAX_FILES)
                return cli_usage_error("allocate", "more than %d files", DALLOCCMD_MAX_FILES);
            o->files[o->nfiles++] = optarg;
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
    if (o->nfiles == 0)
        return cli_usage_error("allocate", "at least one -f FILE is required");
    return 0;
}

static int load_file(struct dalloc *a, const char *path, struct doc **docs, size_t i)
{
    struct diag d;
    int r;

    diag_init(&d);
    r = doc_load_file_limits(strcmp(path, "-") == 0 ? "/dev/stdin" : path, &doc_limits_manifest, &d,
                             &docs[i]);
    if (r < 0) {
        fprintf(stderr, "gpuplane allocate: %s\n", d.msg[0] ? d.msg : strerror(-r));
        return r;
    }
    for (size_t k = 0; k < doc_count(docs[i]); k++) {
        json_t *root = doc_root(docs[i], k);
        if (json_is_null(root))
            continue;
        if ((r = dalloc_add(a, root, &d)) < 0) {
            fprintf(stderr, "gpuplane allocate: %s: %s\n", path, d.msg);
            return r;
        }
    }
    return 0;
}

static int print_list(json_t *items, bool as_json)
{
    _cleanup_json_ json_t *list =
        json_pack("{s:s, s:s, s:O}", "apiVersion", "v1", "kind", "List", "items", items);
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    char *s;

    if (!list)
        return -ENOMEM;
    if (as_json) {
        s = json_dumps(list, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (!s)
            return -ENOMEM;
        puts(s);
        free(s);
        return 0;
    }
    if (yaml_emit(&sb, list) < 0)
        return -ENOMEM;
    fputs(strbuf_str(&sb), stdout);
    return 0;
}

static int run(const struct opts *o)
{
    _cleanup_(dalloc_freep) struct dalloc *a = NULL;
    struct doc *docs[DALLOCCMD_MAX_FILES] = {0};
    json_t *out = NULL;
    struct diag d;
    int r, ret = CLI_EXIT_USAGE;

    if (dalloc_new(o->node, &o->gates, &a) < 0)
        return CLI_EXIT_USAGE;
    dalloc_set_budget(a, o->budget);
    for (size_t i = 0; i < o->nfiles; i++)
        if (load_file(a, o->files[i], docs, i) < 0)
            goto out;
    diag_init(&d);
    r = dalloc_run(a, &d, &out);
    if (r < 0) {
        fprintf(stderr, "gpuplane allocate: %s\n", d.msg[0] ? d.msg : strerror(-r));
    } else if (r == 1) {
        fprintf(stderr, "gpuplane allocate: no solution: %s\n", d.msg);
        ret = CLI_EXIT_FAILURE;
    } else {
        ret = print_list(out, o->json) < 0 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
        json_decref(out);
    }
out:
    a = dalloc_free(a);
    for (size_t i = 0; i < o->nfiles; i++)
        doc_free(docs[i]);
    return ret;
}

int dalloccmd_main(int argc, char **argv)
{
    struct cli_common cc;
    struct opts o = {0};
    int r;

    dalloc_gates_default(&o.gates);
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
    return r;
}
