/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What `gpuplane allocate` and `gpuplane schedule` read the same way: the -f files (manifest
 * limits, '-' for stdin), --feature-gates and --budget, and how they print a document.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "dalloccmd.h"

void dalloccmd_input_init(struct dalloccmd_input *in)
{
    *in = (struct dalloccmd_input){0};
    dalloc_gates_default(&in->gates);
}

void dalloccmd_input_release(struct dalloccmd_input *in)
{
    for (size_t i = 0; i < in->nfiles; i++)
        in->docs[i] = doc_free(in->docs[i]);
}

int dalloccmd_input_option(struct dalloccmd_input *in, const char *cmd, int c, const char *arg)
{
    struct diag d;
    char *end;

    switch (c) {
    case DALLOCCMD_OPT_GATES:
        diag_init(&d);
        if (dalloc_gates_parse(&in->gates, arg, &d) < 0)
            return cli_usage_error(cmd, "--feature-gates: %s", d.msg);
        return 1;
    case DALLOCCMD_OPT_BUDGET:
        errno = 0;
        in->budget = strtoull(arg, &end, 10);
        if (errno || *end || end == arg || in->budget == 0)
            return cli_usage_error(cmd, "--budget: not a positive number: %s", arg);
        return 1;
    case 'f':
        if (in->nfiles >= DALLOCCMD_MAX_FILES)
            return cli_usage_error(cmd, "more than %d files", DALLOCCMD_MAX_FILES);
        in->files[in->nfiles++] = arg;
        return 1;
    default:
        return 0;
    }
}

static int load_one(struct dalloccmd_input *in, const char *cmd, size_t i, dalloccmd_add_fn add,
                    void *target)
{
    const char *path = in->files[i];
    struct diag d;
    int r;

    diag_init(&d);
    r = doc_load_file_limits(strcmp(path, "-") == 0 ? "/dev/stdin" : path, &doc_limits_manifest, &d,
                             &in->docs[i]);
    if (r < 0) {
        fprintf(stderr, "gpuplane %s: %s\n", cmd, d.msg[0] ? d.msg : strerror(-r));
        return r;
    }
    for (size_t k = 0; k < doc_count(in->docs[i]); k++) {
        json_t *root = doc_root(in->docs[i], k);
        if (json_is_null(root))
            continue;
        if ((r = add(target, root, &d)) < 0) {
            fprintf(stderr, "gpuplane %s: %s: %s\n", cmd, path, d.msg);
            return r;
        }
    }
    return 0;
}

int dalloccmd_input_load(struct dalloccmd_input *in, const char *cmd, dalloccmd_add_fn add,
                         void *target)
{
    int r;

    for (size_t i = 0; i < in->nfiles; i++)
        if ((r = load_one(in, cmd, i, add, target)) < 0)
            return r;
    return 0;
}

int dalloccmd_print(json_t *doc, bool as_json)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    char *s;

    if (as_json) {
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
