/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A diagnostic: the reason a call failed, formatted once where the failure is understood and
 * carried back across an edge (a config load, a CEL compile, an NVML call) to where it is reported.
 * Passing NULL where a struct diag is expected is allowed and drops the text.
 */
#pragma once

#include "base-macro.h"

#define DIAG_MSG_MAX 1024

struct diag {
    int line; /* 1-based source position when the failure has one, else 0 */
    int col;
    char msg[DIAG_MSG_MAX]; /* the full message; "file:line:col: text" when positioned */
};

/* Clears a diagnostic. */
void diag_init(struct diag *d);

/* Formats the message into d (if not NULL) and returns err, which must be a negative errno. */
int diag_fail(struct diag *d, int err, const char *fmt, ...) _printf_(3, 4);

/* Like diag_fail, with the message prefixed "file:line:col: ". */
int diag_fail_at(struct diag *d, int err, const char *file, int line, int col, const char *fmt, ...)
    _printf_(6, 7);
