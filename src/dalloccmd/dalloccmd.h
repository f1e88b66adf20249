/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane allocate`: the DRA structured allocator (src/dalloc) from the command line — the entry
 * point for src/main.c's command table — and what `gpuplane schedule` reads the same way: the -f
 * files, --feature-gates, --budget, and printing a document as JSON or YAML.
 */
#pragma once

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>

#include "base-doc.h"
#include "base-strbuf.h"
#include "dalloc.h"

/* argv[0] is "allocate". Returns the exit code: 0 allocated (claims printed), 1 no solution, 2 an
 * error (bad usage, invalid input, unknown class, CEL compile or runtime error). */
int dalloccmd_main(int argc, char **argv);

#define DALLOCCMD_MAX_FILES 64

enum {
    DALLOCCMD_OPT_GATES = 0x3000,
    DALLOCCMD_OPT_BUDGET,
};

/* The long options both commands take, for their getopt tables (with "f:" in the short ones). */
#define DALLOCCMD_OPTIONS                                                                          \
    {"feature-gates", required_argument, NULL, DALLOCCMD_OPT_GATES},                               \
        {"budget", required_argument, NULL, DALLOCCMD_OPT_BUDGET},                                 \
    {                                                                                              \
        "filename", required_argument, NULL, 'f'                                                   \
    }

#define DALLOCCMD_OPTIONS_HELP                                                                     \
    "      --feature-gates LIST    Kubernetes feature gates, e.g. DRAAdminAccess=false\n"          \
    "                              (defaults as in 1.35: DRAAdminAccess, DRAPrioritizedList on)\n" \
    "  -f, --filename FILE         an input file (repeatable; '-' reads stdin)\n"                  \
    "      --budget N              give up after N search steps per allocation (schedule: per\n"   \
    "                              pod and node; default 1000000)\n"

struct dalloccmd_input {
    const char *files[DALLOCCMD_MAX_FILES];
    struct doc *docs[DALLOCCMD_MAX_FILES]; /* loaded; the objects borrow from them */
    size_t nfiles;
    unsigned long long budget; /* 0: the allocator's default */
    struct dalloc_gates gates;
};

void dalloccmd_input_init(struct dalloccmd_input *in);
void dalloccmd_input_release(struct dalloccmd_input *in);
/* Takes option c if it is one of DALLOCCMD_OPTIONS: 1 taken, 0 not one of them, -EINVAL after
 * printing a usage error for command cmd. */
int dalloccmd_input_option(struct dalloccmd_input *in, const char *cmd, int c, const char *arg);

typedef int (*dalloccmd_add_fn)(void *target, json_t *obj, struct diag *d);
/* Loads every file (manifest limits) and hands each object to add; errors are printed as
 * "gpuplane <cmd>: FILE: message". */
_wur_ int dalloccmd_input_load(struct dalloccmd_input *in, const char *cmd, dalloccmd_add_fn add,
                               void *target);

/* Prints doc on stdout as indented JSON or as YAML. */
_wur_ int dalloccmd_print(json_t *doc, bool as_json);
