/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The command line and environment of `gpuplane device-plugin`, under NVIDIA's flag and variable
 * names (the dp_settings table), merged as NVIDIA's plugin merges them: flag > environment > config
 * file > default. The flags are read first but applied last, because the config file they may
 * name has to be loaded underneath them. Go's flag library accepts `-flag` as well as `--flag`,
 * so getopt_long_only is used: NVIDIA manifests written either way keep working.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "dp.h"

/* Two names per setting, the common options, --print-config and the terminator. */
#define MAX_OPTIONS 72
#define OPT_SETTING 0x3000
#define OPT_PRINT_CONFIG 0x2fff

/* What the command line said, per setting, before it is applied. */
struct flag_values {
    struct strbuf value[MAX_OPTIONS];
    const char *used[MAX_OPTIONS]; /* the option name given (an alias is reported as written) */
};

static void flag_values_release(struct flag_values *fv)
{
    for (size_t i = 0; i < MAX_OPTIONS; i++)
        strbuf_release(&fv->value[i]);
}

static size_t build_options(struct option *opts)
{
    static const struct option common[] = {CLI_COMMON_OPTIONS};
    size_t n = 0;
    for (size_t i = 0; i < dp_n_settings; i++) {
        const struct dp_setting *s = &dp_settings[i];
        int has_arg = s->kind == DP_KIND_BOOL ? optional_argument : required_argument;
        if (s->flag)
            opts[n++] = (struct option){s->flag, has_arg, NULL, OPT_SETTING + (int)i};
        if (s->flag_alias)
            opts[n++] = (struct option){s->flag_alias, has_arg, NULL, OPT_SETTING + (int)i};
    }
    for (size_t i = 0; i < ARRAY_SIZE(common); i++)
        opts[n++] = common[i];
    opts[n++] = (struct option){"print-config", no_argument, NULL, OPT_PRINT_CONFIG};
    opts[n] = (struct option){NULL, 0, NULL, 0};
    return n;
}

/* Records one occurrence of a setting's flag: list flags accumulate (`--device-list-strategy a
 * --device-list-strategy b`, as Go's string slices do), the others keep the last value. */
static int record_flag(struct flag_values *fv, size_t i, const char *name, const char *arg)
{
    const struct dp_setting *s = &dp_settings[i];
    bool list = s->kind == DP_KIND_STRINGS || s->kind == DP_KIND_LIST_STRATEGY ||
                s->kind == DP_KIND_CHANNELS;
    struct strbuf *sb = &fv->value[i];
    int r = 0;
    if (!list || !fv->used[i])
        strbuf_reset(sb);
    else
        r = strbuf_addch(sb, ',');
    fv->used[i] = name;
    if (r >= 0)
        r = strbuf_addstr(sb, arg ? arg : "true");
    return r;
}

static int usage(struct diag *d, const char *what, const char *arg)
{
    return diag_fail(d, -EINVAL, "%s \"%s\" (see 'gpuplane device-plugin --help')", what, arg);
}

static int unknown_option(char **argv, int opt, struct diag *d)
{
    const char *arg = optind > 0 ? argv[optind - 1] : "?";
    if (opt == ':')
        return usage(d, "missing value for option", arg);
    return usage(d, "unknown option", arg);
}

static int parse_argv(int argc, char **argv, struct dp_config *cfg, struct flag_values *fv,
                      struct diag *d)
{
    struct option opts[MAX_OPTIONS + 1];
    size_t n = build_options(opts);
    int opt, index = -1;
    (void)n;
    optind = 0; /* a full reset, so the parser can run more than once in a process */
    opterr = 0;
    while ((opt = getopt_long_only(argc, argv, ":" CLI_COMMON_SHORT, opts, &index)) != -1) {
        int r;
        if (opt >= OPT_SETTING && opt < OPT_SETTING + (int)dp_n_settings) {
            r = record_flag(fv, (size_t)(opt - OPT_SETTING), opts[index].name, optarg);
        } else if (opt == OPT_PRINT_CONFIG) {
            cfg->print_config = true;
            r = 0;
        } else if (opt == '?' || opt == ':') {
            return unknown_option(argv, opt, d);
        } else {
            r = cli_common_option(&cfg->common, "device-plugin", opt, optarg);
            if (r == 0)
                return usage(d, "unknown option", argv[optind - 1]);
            if (r < 0)
                return diag_fail(d, -EINVAL, "invalid value \"%s\" for a common option", optarg);
        }
        if (r < 0)
            return r;
        index = -1;
    }
    if (optind < argc)
        return usage(d, "unexpected argument", argv[optind]);
    return 0;
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
static int load_config_file(struct dp_config *cfg, const struct flag_values *fv, struct diag *d)
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

static int apply_flags(struct dp_config *cfg, const struct flag_values *fv, struct diag *d)
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
    _cleanup_(flag_values_release) struct flag_values fv = {0};
    for (size_t i = 0; i < MAX_OPTIONS; i++)
        strbuf_init(&fv.value[i], 0);
    int r = parse_argv(argc, argv, cfg, &fv, d);
    if (r < 0 || cfg->common.help)
        return r;
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
