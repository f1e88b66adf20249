/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane schedule`'s output written a pod at a time (sched_run_each hands each pod's result
 * as it is scheduled): the table, or the document {"pods": [...], "summary": {...}} as indented
 * JSON or YAML, byte for byte what printing the whole document at once gives, without ever
 * building it. The text gathers in a buffer that the command writes out at the end, so that an
 * error part way leaves stdout empty, as before.
 */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "base-macro.h"
#include "base-strbuf.h"

enum sched_fmt {
    SCHED_FMT_TABLE,
    SCHED_FMT_YAML,
    SCHED_FMT_JSON,
};

/* The most output text a run may produce (about 2 KiB per pod at the most). */
#define SCHED_PRINT_MAX ((size_t)1 << 30)

struct sched_printer {
    enum sched_fmt fmt;
    struct strbuf out; /* the text so far */
    size_t pods;
};

void sched_printer_init(struct sched_printer *p, enum sched_fmt fmt);
void sched_printer_release(struct sched_printer *p);
/* Adds one pod's result (borrowed), as sched_run_each hands it. */
_wur_ int sched_printer_pod(struct sched_printer *p, json_t *result);
/* Ends the output with the summary. */
_wur_ int sched_printer_end(struct sched_printer *p, size_t pods, size_t scheduled);
