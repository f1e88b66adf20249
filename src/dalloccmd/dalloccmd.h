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
    size_t nfiles;
    unsigned long long budget; /* 0: the allocator's default */
    struct dalloc_gates gates;
    /* what the last dalloccmd_input_load read, and how long it took (reading, parsing, adding):
     * wall time, and the process's CPU time */
    size_t bytes;
    double load_s, load_cpu_s;
};

void dalloccmd_input_init(struct dalloccmd_input *in);
void dalloccmd_input_release(struct dalloccmd_input *in);
/* Takes option c if it is one of DALLOCCMD_OPTIONS: 1 taken, 0 not one of them, -EINVAL after
 * printing a usage error for command cmd. */
int dalloccmd_input_option(struct dalloccmd_input *in, const char *cmd, int c, const char *arg);

/* Takes one object (borrowed: add takes a reference to keep it or a part of it). */
typedef int (*dalloccmd_add_fn)(void *target, json_t *obj, struct diag *d);
/*
 * Loads every file (manifest limits) and hands each object to add as it is read — a List item by
 * item (an item that is itself a List inside a List of its own, so that it nests as deep as it did
 * in the file) — keeping nothing itself: doc_load_file_each. Errors are printed as
 * "gpuplane <cmd>: FILE:LINE:COL: message"; for an object add refused, LINE:COL is where the field
 * the message names is (or the object, when it names none), found by reading that object again
 * with positions.
 */
_wur_ int dalloccmd_input_load(struct dalloccmd_input *in, const char *cmd, dalloccmd_add_fn add,
                               void *target);
/* The same, with a step before add that may run on a second thread for large JSON Lists
 * (doc_load_string_each_prep): add gets what prep made of each object. */
_wur_ int dalloccmd_input_load_prep(struct dalloccmd_input *in, const char *cmd,
                                    const struct doc_prep *prep, dalloccmd_add_fn add,
                                    void *target);
/* For an error found after loading ("ResourceSlice s1: spec.devices[0].name: ..."): prefixes
 * d->msg with the FILE:LINE:COL of the object and field it names, reading the regular files
 * among the inputs again to find it. d is left alone when the message names no object or the
 * object is not in the files (a claim made from a template). */
void dalloccmd_input_locate(const struct dalloccmd_input *in, struct diag *d);

/* Prints doc on stdout as indented JSON or as YAML. */
_wur_ int dalloccmd_print(json_t *doc, bool as_json);
