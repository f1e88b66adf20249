/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Aligned text tables for humans: a header row and data rows of strings, each column as wide as its
 * widest cell, two spaces between columns. Cells are copied, so callers may pass stack buffers.
 */
#pragma once

#include <stddef.h>
#include <stdio.h>

#include "base.h"

#define CLI_TABLE_MAX_COLUMNS 32

struct cli_table {
    size_t n_columns;
    struct vec cells; /* char *, row-major, header first */
};

/* Starts a table with the given NULL-terminated header cells. */
_wur_ int cli_table_init(struct cli_table *t, const char *const *header);
void cli_table_release(struct cli_table *t);
/* Appends a row of exactly n_columns cells (NULL prints as "-"). */
_wur_ int cli_table_add(struct cli_table *t, const char *const *cells);
/* Writes the table, each line prefixed by indent. */
void cli_table_print(const struct cli_table *t, FILE *out, const char *indent);
