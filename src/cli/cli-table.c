/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Column alignment for the tables the subcommands print. The widths are computed at print time, so
 * rows can be added in one pass over the data.
 */
#include <errno.h>
#include <string.h>

#include "cli-table.h"

static void free_cells(struct cli_table *t)
{
    for (size_t i = 0; i < t->cells.len; i++)
        free(*VEC_AT(&t->cells, char *, i));
}

static int add_cells(struct cli_table *t, const char *const *cells)
{
    for (size_t i = 0; i < t->n_columns; i++) {
        char *copy = strdup(cells[i] ? cells[i] : "-");
        if (!copy)
            return -ENOMEM;
        int r = vec_push(&t->cells, &copy);
        if (r < 0) {
            free(copy);
            return r;
        }
    }
    return 0;
}

int cli_table_init(struct cli_table *t, const char *const *header)
{
    size_t n = 0;
    while (header[n])
        n++;
    if (n == 0 || n > CLI_TABLE_MAX_COLUMNS)
        return -EINVAL;
    t->n_columns = n;
    vec_init(&t->cells, sizeof(char *), 0);
    int r = add_cells(t, header);
    if (r < 0)
        cli_table_release(t);
    return r;
}

void cli_table_release(struct cli_table *t)
{
    free_cells(t);
    vec_release(&t->cells);
}

int cli_table_add(struct cli_table *t, const char *const *cells)
{
    return add_cells(t, cells);
}

void cli_table_print(const struct cli_table *t, FILE *out, const char *indent)
{
    size_t width[CLI_TABLE_MAX_COLUMNS] = {0};
    for (size_t i = 0; i < t->cells.len; i++) {
        size_t len = strlen(*VEC_AT(&t->cells, char *, i));
        size_t col = i % t->n_columns;
        if (len > width[col])
            width[col] = len;
    }
    for (size_t i = 0; i < t->cells.len; i++) {
        size_t col = i % t->n_columns;
        const char *cell = *VEC_AT(&t->cells, char *, i);
        if (col == 0)
            fputs(indent, out);
        if (col + 1 == t->n_columns)
            fprintf(out, "%s\n", cell); /* no trailing blanks */
        else
            fprintf(out, "%-*s  ", (int)width[col], cell);
    }
}
