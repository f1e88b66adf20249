/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane operator render`: what the operator would apply for a ClusterPolicy, printed as one
 * Kubernetes List (YAML or JSON) of every object of every enabled state, in apply order. The output
 * depends only on the file, the namespace and the image variables of the environment: two runs
 * print the same bytes, so it diffs well and can be applied with kubectl.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "cli.h"
#include "operator-render.h"
#include "operator.h"

static const char HELP[] =
    "Usage: gpuplane operator render -f FILE [-n NAMESPACE] [-o yaml|json] [--os-tag TAG]\n"
    "\n"
    "Print every object the operator applies for a ClusterPolicy (nvidia.com/v1): the objects of\n"
    "each enabled state, in apply order, as one List (apiVersion v1). With metadata.uid in the\n"
    "file, each object carries the controller owner reference to the ClusterPolicy.\n"
    "\n"
    "Options:\n"
    "  -f, --file=FILE         the ClusterPolicy, YAML or JSON (required)\n"
    "  -n, --namespace=NS      the operator namespace (default $OPERATOR_NAMESPACE, else\n"
    "                          gpu-operator)\n"
    "  -o, --output=FORMAT     yaml (default) or json\n"
    "      --os-tag=TAG        the GPU nodes' OS, appended to the driver image's tag\n"
    "                          (\"ubuntu22.04\"); by default the tag is left as the policy names "
    "it\n"
    "  -h, --help              show this help\n"
    "\n"
    "Images the policy leaves unset come from the environment, as the operator's: DRIVER_IMAGE,\n"
    "CONTAINER_TOOLKIT_IMAGE, VALIDATOR_IMAGE, DEVICE_PLUGIN_IMAGE, DCGM_EXPORTER_IMAGE, "
    "GFD_IMAGE,\n"
    "DRIVER_MANAGER_IMAGE, then GPUPLANE_IMAGE for the components gpuplane runs.\n"
    "\n"
    "Exit status: 0 printed, 1 a malformed policy (file:line:col: spec.field: message) or an "
    "image\n"
    "that cannot be named, 2 a usage error.\n"
    "\n"
    "Examples:\n"
    "  gpuplane operator render -f examples/operator/clusterpolicy.yaml\n"
    "  gpuplane operator render -f examples/operator/clusterpolicy-dra.yaml -o json | jq "
    "'.items[].kind'\n"
    "  gpuplane operator render -f cp.yaml -n gpuplane | kubectl diff -f -\n";

enum {
    OPT_OS_TAG = 0x2000,
};

struct render_args {
    const char *file;
    const char *namespace_;
    bool json;
    const char *os_tag;
    bool help;
};

static int parse_args(int argc, char **argv, struct render_args *a)
{
    static const struct option options[] = {
        {"file", required_argument, NULL, 'f'},   {"namespace", required_argument, NULL, 'n'},
        {"output", required_argument, NULL, 'o'}, {"os-tag", required_argument, NULL, OPT_OS_TAG},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    int opt;

    optind = 1;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":f:n:o:h", options, NULL)) != -1) {
        switch (opt) {
        case 'f':
            a->file = optarg;
            break;
        case 'n':
            a->namespace_ = optarg;
            break;
        case 'o':
            if (strcmp(optarg, "json") == 0)
                a->json = true;
            else if (strcmp(optarg, "yaml") == 0)
                a->json = false;
            else
                return cli_usage_error("operator render",
                                       "-o: unknown output format \"%s\" (yaml or json)", optarg);
            break;
        case OPT_OS_TAG:
            a->os_tag = optarg;
            break;
        case 'h':
            a->help = true;
            break;
        case ':':
            return cli_usage_error("operator render", "%s needs a value", argv[optind - 1]);
        default:
            return cli_usage_error("operator render", "unknown option \"%s\"", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("operator render", "unexpected argument \"%s\"", argv[optind]);
    if (!a->help && !a->file)
        return cli_usage_error("operator render", "-f FILE is required");
    return 0;
}

static const char *process_env(const char *name)
{
    return getenv(name);
}

/* {apiVersion: v1, kind: List, items: [every object of every enabled state]}. */
static json_t *as_list(const struct op_rendered *rendered)
{
    json_t *items = json_array();

    for (size_t i = 0; items && i < rendered->n; i++) {
        if (!rendered->states[i].enabled)
            continue;
        if (json_array_extend(items, rendered->states[i].objects) < 0)
            items = (json_decref(items), NULL);
    }
    if (!items)
        return NULL;
    return json_pack("{s:s,s:s,s:o}", "apiVersion", "v1", "kind", "List", "items", items);
}

static int print_list(const json_t *list, bool json)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    int r;

    if (json) {
        _cleanup_free_ char *s = json_dumps(list, JSON_INDENT(2));
        if (!s)
            return -ENOMEM;
        r = strbuf_addstr(&sb, s);
        if (r >= 0)
            r = strbuf_addch(&sb, '\n');
    } else {
        r = yaml_emit(&sb, list);
    }
    if (r < 0)
        return r;
    if (fwrite(strbuf_str(&sb), 1, sb.len, stdout) != sb.len || fflush(stdout) != 0)
        return -EIO;
    return 0;
}

int op_render_main(int argc, char **argv)
{
    struct render_args a = {0};
    _cleanup_(op_policy_freep) struct op_policy *policy = NULL;
    _cleanup_json_ json_t *object = NULL, *list = NULL;
    struct op_rendered rendered = {0};
    struct op_render_env env = {0};
    struct diag d;
    int r;

    if (parse_args(argc, argv, &a) < 0)
        return CLI_EXIT_USAGE;
    if (a.help) {
        fputs(HELP, stdout);
        return CLI_EXIT_OK;
    }
    diag_init(&d);
    r = op_policy_from_file(a.file, &policy, &object, &d);
    if (r < 0) {
        cli_error("%s", d.msg[0] ? d.msg : strerror(-r));
        return CLI_EXIT_FAILURE;
    }
    env.namespace_ = a.namespace_;
    if (!env.namespace_ || !*env.namespace_)
        env.namespace_ = getenv("OPERATOR_NAMESPACE");
    if (!env.namespace_ || !*env.namespace_)
        env.namespace_ = "gpu-operator";
    env.getenv = process_env;
    env.gpu_nodes = true;
    env.os_tag = a.os_tag;
    r = op_render(policy, &env, object, &rendered, &d);
    if (r < 0) {
        cli_error("%s: %s", a.file, d.msg[0] ? d.msg : strerror(-r));
        return CLI_EXIT_FAILURE;
    }
    list = as_list(&rendered);
    op_rendered_release(&rendered);
    if (!list) {
        cli_error("out of memory");
        return CLI_EXIT_FAILURE;
    }
    r = print_list(list, a.json);
    if (r < 0) {
        cli_error("writing the list: %s", strerror(-r));
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}
