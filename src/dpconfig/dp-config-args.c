/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Command lines in Go's flag style, for the commands that stand in for NVIDIA's Go daemons (the
 * device plugin, feature discovery): `--flag value`, `--flag=value`, and one dash as well as two
 * (getopt_long_only), booleans with an optional `=VALUE`, list flags that accumulate. The values
 * are recorded per row of the caller's table and applied by the caller, after the config file and
 * the environment, so that flag > environment > file > default holds.
 */
#include <errno.h>
#include <getopt.h>
#include <string.h>

#include "dp-config-internal.h"

/* getopt_long values of the table's rows; below the common options' 0x1000 range. */
#define OPT_ROW 0x3000

/* Two names per row, the common options and the terminator. */
#define MAX_OPTIONS (2 * DP_ARGS_MAX + 8)

void dp_args_init(struct dp_args *a)
{
    for (size_t i = 0; i < DP_ARGS_MAX; i++) {
        strbuf_init(&a->value[i], 0);
        a->used[i] = NULL;
    }
}

void dp_args_release(struct dp_args *a)
{
    for (size_t i = 0; i < DP_ARGS_MAX; i++) {
        strbuf_release(&a->value[i]);
        a->used[i] = NULL;
    }
}

static int has_arg(const struct dp_arg *row)
{
    switch (row->kind) {
    case DP_ARG_BOOL:
        return optional_argument;
    case DP_ARG_SWITCH:
        return no_argument;
    default:
        return required_argument;
    }
}

/* The getopt tables: long options (each row's names, then the common ones) and the short string
 * (":" so a missing value is told apart, the common letters, the rows' letters). */
static void build_options(const struct dp_arg *table, size_t n, struct option *opts, char *shorts,
                          size_t shorts_size)
{
    static const struct option common[] = {CLI_COMMON_OPTIONS};
    size_t k = 0, len;
    for (size_t i = 0; i < n; i++) {
        const struct dp_arg *row = &table[i];
        if (!row->name)
            continue;
        opts[k++] = (struct option){row->name, has_arg(row), NULL, OPT_ROW + (int)i};
        if (row->alias)
            opts[k++] = (struct option){row->alias, has_arg(row), NULL, OPT_ROW + (int)i};
    }
    for (size_t i = 0; i < ARRAY_SIZE(common); i++)
        opts[k++] = common[i];
    opts[k] = (struct option){NULL, 0, NULL, 0};

    snprintf(shorts, shorts_size, ":%s", CLI_COMMON_SHORT);
    len = strlen(shorts);
    for (size_t i = 0; i < n && len + 3 < shorts_size; i++) {
        if (!table[i].name || !table[i].short_name)
            continue;
        shorts[len++] = table[i].short_name;
        if (has_arg(&table[i]) == required_argument)
            shorts[len++] = ':';
        shorts[len] = '\0';
    }
}

/* The row of a one-letter option, or -1. */
static int short_row(const struct dp_arg *table, size_t n, int opt)
{
    for (size_t i = 0; i < n; i++)
        if (table[i].name && table[i].short_name && table[i].short_name == opt)
            return (int)i;
    return -1;
}

/* Records one occurrence: list rows accumulate, the others keep the last value. */
static int record(struct dp_args *a, const struct dp_arg *row, size_t i, const char *name,
                  const char *arg)
{
    struct strbuf *sb = &a->value[i];
    int r = 0;
    if (row->kind != DP_ARG_LIST || !a->used[i])
        strbuf_reset(sb);
    else
        r = strbuf_addch(sb, ',');
    a->used[i] = name;
    if (r >= 0)
        r = strbuf_addstr(sb, arg ? arg : "true");
    return r;
}

static int usage(struct diag *d, const char *command, const char *what, const char *arg)
{
    return diag_fail(d, -EINVAL, "%s \"%s\" (see 'gpuplane %s --help')", what, arg, command);
}

int dp_args_scan(int argc, char **argv, const char *command, const struct dp_arg *table, size_t n,
                 struct cli_common *common, struct dp_args *a, struct diag *d)
{
    struct option opts[MAX_OPTIONS + 1];
    char shorts[2 * DP_ARGS_MAX + 8];
    int opt, index = -1;

    if (n > DP_ARGS_MAX)
        return diag_fail(d, -EINVAL, "too many options for one command line");
    build_options(table, n, opts, shorts, sizeof(shorts));
    optind = 0; /* a full reset, so the parser can run more than once in a process */
    opterr = 0;
    while ((opt = getopt_long_only(argc, argv, shorts, opts, &index)) != -1) {
        const char *given = optind > 0 ? argv[optind - 1] : "?";
        int r, row = -1;
        if (opt >= OPT_ROW && opt < OPT_ROW + (int)n)
            row = opt - OPT_ROW;
        else if (opt != '?' && opt != ':' && opt < 0x100)
            row = short_row(table, n, opt);
        if (row >= 0) {
            const char *name = index >= 0 ? opts[index].name : table[row].name;
            r = record(a, &table[row], (size_t)row, name, optarg);
            if (r < 0)
                return r;
        } else if (opt == ':') {
            return usage(d, command, "missing value for option", given);
        } else if (opt == '?') {
            return usage(d, command, "unknown option", given);
        } else {
            r = cli_common_option(common, command, opt, optarg);
            if (r == 0)
                return usage(d, command, "unknown option", given);
            if (r < 0)
                return diag_fail(d, -EINVAL, "invalid value \"%s\" for a common option", optarg);
        }
        index = -1;
    }
    if (optind < argc)
        return usage(d, command, "unexpected argument", argv[optind]);
    return 0;
}
