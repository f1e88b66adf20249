/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The command line and environment of `gpuplane device-plugin`, under NVIDIA's flag and variable
 * names (the dp_settings table), merged as NVIDIA's plugin merges them: flag > environment > config
 * file > default. The flags are read first (dp_args_scan of src/dpconfig, Go's flag syntax) but
 * applied last, because the config file they may name has to be loaded underneath them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dp.h"

/* The row of --print-config in the argument table, after one row per setting. */
#define ROW_PRINT_CONFIG dp_n_settings

/* One row per setting (env-only ones unnamed, so rows and settings share indices), then
 * --print-config. */
static void build_table(struct dp_arg *table)
{
    for (size_t i = 0; i < dp_n_settings; i++) {
        const struct dp_setting *s = &dp_settings[i];
        enum dp_arg_kind kind = DP_ARG_VALUE;
        if (s->kind == DP_KIND_BOOL)
            kind = DP_ARG_BOOL;
        else if (s->kind == DP_KIND_STRINGS || s->kind == DP_KIND_LIST_STRATEGY ||
                 s->kind == DP_KIND_CHANNELS)
            kind = DP_ARG_LIST;
        table[i] = (struct dp_arg){s->flag, s->flag_alias, 0, kind};
    }
    table[ROW_PRINT_CONFIG] = (struct dp_arg){"print-config", NULL, 0, DP_ARG_SWITCH};
}

static int apply(const struct dp_setting *s, struct dp_config *cfg, const char *source,
                 const char *value, struct diag *d)
{
    char why[256];
    int r = dp_setting_apply(s, cfg, value, why, sizeof(why));
    if (r == -EINVAL)
        return diag_fail(d, -EBADMSG, "%s: %s", source, why);
    return r;
}

static bool is_config_file(const struct dp_setting *s)
{
    return s->flag && strcmp(s->flag, "config-file") == 0;
}

/* The config file named by --config-file, else CONFIG_FILE; none when both are empty. */
static int load_config_file(struct dp_config *cfg, const struct dp_args *fv, struct diag *d)
{
    const char *path = NULL;
    for (size_t i = 0; i < dp_n_settings; i++)
        if (is_config_file(&dp_settings[i]))
            path = fv->used[i] ? strbuf_str(&fv->value[i]) : getenv(dp_settings[i].env);
    if (!path || !*path)
        return 0;
    int r = dp_config_load_file(cfg, path, d);
    return r == -EINVAL ? -EBADMSG : r;
}

/* An empty variable counts as unset except for plain strings, where it means "" (urfave/cli). */
static int apply_env(struct dp_config *cfg, struct diag *d)
{
    for (size_t i = 0; i < dp_n_settings; i++) {
        const struct dp_setting *s = &dp_settings[i];
        const char *name = s->env;
        const char *v = name ? getenv(name) : NULL;
        if (!v && s->env_alias)
            v = getenv(name = s->env_alias);
        if (!v || is_config_file(s) || (!*v && s->kind != DP_KIND_STRING))
            continue;
        int r = apply(s, cfg, name, v, d);
        if (r < 0)
            return r;
    }
    return 0;
}

static int apply_flags(struct dp_config *cfg, const struct dp_args *fv, struct diag *d)
{
    for (size_t i = 0; i < dp_n_settings; i++) {
        char source[128];
        if (!fv->used[i] || is_config_file(&dp_settings[i]))
            continue;
        snprintf(source, sizeof(source), "--%s", fv->used[i]);
        int r = apply(&dp_settings[i], cfg, source, strbuf_str(&fv->value[i]), d);
        if (r < 0)
            return r;
    }
    return 0;
}

int dp_config_parse_args(int argc, char **argv, struct dp_config *cfg, struct diag *d)
{
    _cleanup_(dp_args_release) struct dp_args fv;
    struct dp_arg table[DP_ARGS_MAX];
    dp_args_init(&fv);
    if (dp_n_settings + 1 > DP_ARGS_MAX)
        return -E2BIG;
    build_table(table);
    int r =
        dp_args_scan(argc, argv, "device-plugin", table, dp_n_settings + 1, &cfg->common, &fv, d);
    if (r < 0 || cfg->common.help)
        return r;
    cfg->print_config = fv.used[ROW_PRINT_CONFIG] != NULL;
    r = load_config_file(cfg, &fv, d);
    if (r >= 0)
        r = apply_env(cfg, d);
    if (r >= 0)
        r = apply_flags(cfg, &fv, d);
    if (r >= 0)
        r = dp_config_validate(cfg, d);
    return r == -EINVAL ? -EBADMSG : r;
}

void dp_config_print_help(FILE *f)
{
    fputs(
        "Usage: gpuplane device-plugin [OPTIONS]\n"
        "\n"
        "The Kubernetes device plugin for NVIDIA GPUs, with the flags, variables and config file\n"
        "of NVIDIA's k8s-device-plugin. Precedence: flag > environment > config file > default.\n"
        "Flags take --flag=VALUE, --flag VALUE or -flag=VALUE; booleans --flag or --flag=false.\n"
        "\n"
        "Options:\n",
        f);
    for (size_t i = 0; i < dp_n_settings; i++) {
        const struct dp_setting *s = &dp_settings[i];
        if (!s->flag)
            continue;
        fprintf(f, "      --%s%s%s\n          %s [$%s%s%s]\n", s->flag, s->flag_alias ? ", --" : "",
                s->flag_alias ? s->flag_alias : "", s->help, s->env, s->env_alias ? ", $" : "",
                s->env_alias ? s->env_alias : "");
    }
    fputs("      --print-config      print the effective configuration as JSON and "
          "exit\n" CLI_COMMON_HELP "\n"
          "Also read: DP_DISABLE_HEALTHCHECKS, DP_ENABLE_HEALTHCHECKS (XID policy).\n"
          "See docs/device-plugin-config.md for the config file.\n",
          f);
}
