/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The options of `gpuplane discover` under the flag and variable names of NVIDIA's GPU Feature
 * Discovery, merged as GFD merges them: flag > environment > config file > default. The config file
 * is the device plugin's (`version: v1`, loaded by src/dpconfig): discover takes flags.migStrategy,
 * flags.failOnInitError, flags.deviceDiscoveryStrategy, flags.useNodeFeatureAPI, flags.gfd.* and
 * the sharing section from it. The command line is scanned with the device plugin's Go-style
 * scanner (dp_args_scan), so both commands spell flags alike.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "discover-internal.h"
#include "dp-config.h"

/* A Go duration cannot exceed 2^63-1 ns (about 292 years). */
#define DURATION_MAX_NS ((uint64_t)INT64_MAX)
#define NS_PER_MS 1000000u

enum kind {
    K_MIG,       /* none, single, mixed */
    K_BOOL,      /* Go's ParseBool */
    K_DURATION,  /* a Go duration, or "infinite" */
    K_STRING,    /* any text */
    K_DISCOVERY, /* auto, nvml, tegra */
    K_SWITCH,    /* command line only, no value */
};

/* One option: its flag (a dp_arg row), variables, field and --help line. */
struct opt {
    struct dp_arg arg;
    const char *env;
    const char *env_alias; /* read when env is unset */
    enum kind kind;
    size_t offset; /* the struct discover_options field */
    const char *value_name;
    const char *help;
};

#define OFF(field) offsetof(struct discover_options, field)
#define FIELD(o, opt, type) ((type *)(void *)((char *)(o) + (opt)->offset))

/* In --help order. */
static const struct opt OPTS[] = {
    {{"mig-strategy", NULL, 0, DP_ARG_VALUE},
     "GFD_MIG_STRATEGY",
     "MIG_STRATEGY",
     K_MIG,
     OFF(mig),
     "STRATEGY",
     "how MIG devices are labelled: none, single or mixed (default none)"},
    {{"fail-on-init-error", NULL, 0, DP_ARG_BOOL},
     "GFD_FAIL_ON_INIT_ERROR",
     NULL,
     K_BOOL,
     OFF(fail_on_init_error),
     NULL,
     "fail when NVML cannot be initialised; false: no GPU labels (default true)"},
    {{"oneshot", NULL, 0, DP_ARG_BOOL},
     "GFD_ONESHOT",
     NULL,
     K_BOOL,
     OFF(oneshot),
     NULL,
     "label once and exit"},
    {{"no-timestamp", NULL, 0, DP_ARG_BOOL},
     "GFD_NO_TIMESTAMP",
     NULL,
     K_BOOL,
     OFF(no_timestamp),
     NULL,
     "leave out the nvidia.com/gfd.timestamp label"},
    {{"sleep-interval", NULL, 0, DP_ARG_VALUE},
     "GFD_SLEEP_INTERVAL",
     NULL,
     K_DURATION,
     OFF(sleep_interval_ms),
     "DURATION",
     "time between two labellings, a Go duration (60s, 1m30s, 500ms) or infinite:\n"
     "label once, then keep running (default 60s)"},
    /* "o" is also a long name, so that -o=PATH works as in Go (a bare prefix would be
     * ambiguous with --oneshot). */
    {{"output-file", "o", 'o', DP_ARG_VALUE},
     "GFD_OUTPUT_FILE",
     NULL,
     K_STRING,
     OFF(output_file),
     "PATH",
     "the NFD local features file, when the NodeFeature API is not used\n"
     "(default " DISCOVER_DEFAULT_OUTPUT ")"},
    {{"machine-type-file", NULL, 0, DP_ARG_VALUE},
     "GFD_MACHINE_TYPE_FILE",
     NULL,
     K_STRING,
     OFF(machine_type_file),
     "PATH",
     "where the machine type is read (default " DISCOVER_DEFAULT_MACHINE_FILE ")"},
    {{"use-node-feature-api", NULL, 0, DP_ARG_BOOL},
     "GFD_USE_NODE_FEATURE_API",
     NULL,
     K_BOOL,
     OFF(use_node_feature_api),
     NULL,
     "publish a NodeFeature object instead of writing the file (default true)"},
    {{"config-file", NULL, 0, DP_ARG_VALUE},
     "GFD_CONFIG_FILE",
     "CONFIG_FILE",
     K_STRING,
     OFF(config_file),
     "PATH",
     "the device plugin's config file (version: v1): flags, flags.gfd and sharing"},
    {{"device-discovery-strategy", NULL, 0, DP_ARG_VALUE},
     "DEVICE_DISCOVERY_STRATEGY",
     NULL,
     K_DISCOVERY,
     OFF(discovery_strategy),
     "STRATEGY",
     "auto, nvml or tegra (default auto)"},
    {{"node-name", NULL, 0, DP_ARG_VALUE},
     "NODE_NAME",
     NULL,
     K_STRING,
     OFF(node_name),
     "NAME",
     "this node (required for the NodeFeature API)"},
    {{"namespace", NULL, 0, DP_ARG_VALUE},
     "NAMESPACE",
     NULL,
     K_STRING,
     OFF(namespace_),
     "NAMESPACE",
     "where the NodeFeature lives (default: the pod's, else the kubeconfig's)"},
    {{"pod-name", NULL, 0, DP_ARG_VALUE},
     "POD_NAME",
     NULL,
     K_STRING,
     OFF(pod_name),
     "NAME",
     "this pod: it and its DaemonSet own the NodeFeature"},
    {{"kubeconfig", NULL, 0, DP_ARG_VALUE},
     "KUBECONFIG",
     NULL,
     K_STRING,
     OFF(kubeconfig),
     "PATH",
     "the API server's kubeconfig (default: in-cluster)"},
    {{"print-labels", NULL, 0, DP_ARG_SWITCH},
     NULL,
     NULL,
     K_SWITCH,
     OFF(print_labels),
     NULL,
     "print the node's labels, sorted, and exit"},
};

static const char *const mig_names[] = {"none", "single", "mixed", NULL};
static const char *const discovery_names[] = {"auto", "nvml", "tegra", NULL};

/* ---- durations ---- */

/* Go's units, longest first where one is a prefix of another. */
static const struct {
    const char *name;
    uint64_t ns;
} units[] = {
    {"ns", 1},           {"us", 1000},      {"\xc2\xb5s", 1000}, /* U+00B5 micro sign */
    {"\xce\xbcs", 1000},                                         /* U+03BC Greek mu */
    {"ms", 1000000},     {"s", 1000000000}, {"m", 60000000000},  {"h", 3600000000000},
};

static int unit_at(const char *s, size_t *ret_len, uint64_t *ret_ns)
{
    size_t best = 0;
    for (size_t u = 0; u < ARRAY_SIZE(units); u++) {
        size_t n = strlen(units[u].name);
        if (n > best && strncmp(s, units[u].name, n) == 0) {
            best = n;
            *ret_ns = units[u].ns;
        }
    }
    if (!best)
        return -EINVAL;
    *ret_len = best;
    return 0;
}

/* a * b + c without wrapping past DURATION_MAX_NS. */
static int mul_add(uint64_t a, uint64_t b, uint64_t c, uint64_t *ret)
{
    if (b && a > (DURATION_MAX_NS - c) / b)
        return -ERANGE;
    *ret = a * b + c;
    return 0;
}

/*
 * duration = "0" | { number unit }+ ;  number = digits [ "." [ digits ] ] | "." digits
 * As Go's time.ParseDuration, without a sign (a negative interval makes no sense here). The
 * result is rounded up to whole milliseconds. -EINVAL for bad text, -ERANGE past Go's maximum.
 */
static int parse_go_duration(const char *s, uint64_t *ret_ns)
{
    uint64_t total = 0;
    if (strcmp(s, "0") == 0) {
        *ret_ns = 0;
        return 0;
    }
    if (!*s)
        return -EINVAL;
    while (*s) {
        uint64_t whole = 0, frac = 0, scale = 1, unit = 0, part;
        size_t nwhole = strspn(s, "0123456789"), nfrac = 0, ulen = 0;
        for (size_t i = 0; i < nwhole; i++)
            if (mul_add(whole, 10, (uint64_t)(s[i] - '0'), &whole) < 0)
                return -ERANGE;
        s += nwhole;
        if (*s == '.') {
            s++;
            nfrac = strspn(s, "0123456789");
            for (size_t i = 0; i < nfrac; i++)
                if (scale <= UINT64_MAX / 100) { /* digits past 18 cannot matter */
                    frac = frac * 10 + (uint64_t)(s[i] - '0');
                    scale *= 10;
                }
            s += nfrac;
        }
        if (nwhole == 0 && nfrac == 0)
            return -EINVAL;
        if (unit_at(s, &ulen, &unit) < 0)
            return -EINVAL;
        s += ulen;
        /* frac < scale <= 1e18 and unit <= 3.6e12: the product needs 128 bits. */
        uint64_t frac_ns = (uint64_t)((unsigned __int128)frac * unit / scale);
        if (mul_add(whole, unit, frac_ns, &part) < 0 || part > DURATION_MAX_NS - total)
            return -ERANGE;
        total += part;
    }
    *ret_ns = total;
    return 0;
}

/* A sleep interval: "infinite" or a positive Go duration, in milliseconds (rounded up). */
static int parse_interval(const char *s, uint64_t *ret_ms, char *why, size_t why_size)
{
    uint64_t ns = 0;
    if (strcmp(s, "infinite") == 0) {
        *ret_ms = DISCOVER_SLEEP_INFINITE;
        return 0;
    }
    int r = parse_go_duration(s, &ns);
    if (r == -ERANGE) {
        snprintf(why, why_size, "invalid duration \"%s\": out of range", s);
        return -EINVAL;
    }
    if (r < 0) {
        snprintf(why, why_size,
                 "invalid duration \"%s\": want a number with a unit (ms, s, m, h; e.g. 60s, "
                 "1m30s) or infinite",
                 s);
        return -EINVAL;
    }
    if (ns == 0) {
        snprintf(why, why_size,
                 "invalid duration \"%s\": must be more than 0 (--oneshot labels once)", s);
        return -EINVAL;
    }
    *ret_ms = (ns + NS_PER_MS - 1) / NS_PER_MS;
    return 0;
}

/* ---- one value ---- */

/* `invalid value "x": want a, b or c` */
static int fail_enum(const char *const *names, const char *value, char *why, size_t why_size)
{
    snprintf(why, why_size, "invalid value \"%s\": want %s, %s or %s", value, names[0], names[1],
             names[2]);
    return -EINVAL;
}

static int name_index(const char *const *names, const char *s)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -1;
}

static int set_string(char **field, const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return -ENOMEM;
    free(*field);
    *field = copy;
    return 0;
}

/* Sets one option from its text form. -EINVAL with the reason in why. */
static int apply_text(const struct opt *opt, struct discover_options *o, const char *value,
                      char *why, size_t why_size)
{
    int i;
    why[0] = '\0';
    switch (opt->kind) {
    case K_MIG:
        if ((i = name_index(mig_names, value)) < 0)
            return fail_enum(mig_names, value, why, why_size);
        o->mig = (enum discover_mig)i;
        return 0;
    case K_DISCOVERY:
        if (name_index(discovery_names, value) < 0)
            return fail_enum(discovery_names, value, why, why_size);
        return set_string(&o->discovery_strategy, value);
    case K_BOOL:
    case K_SWITCH:
        if (dp_parse_bool(value, FIELD(o, opt, bool)) == 0)
            return 0;
        snprintf(why, why_size, "invalid value \"%s\": want true or false", value);
        return -EINVAL;
    case K_DURATION:
        return parse_interval(value, &o->sleep_interval_ms, why, why_size);
    case K_STRING:
        return set_string(FIELD(o, opt, char *), value);
    }
    return -EINVAL;
}

/* Applies value, naming its source ("--oneshot", "GFD_ONESHOT") in the message of a bad one. */
static int apply(const struct opt *opt, struct discover_options *o, const char *source,
                 const char *value, struct diag *d)
{
    char why[256];
    int r = apply_text(opt, o, value, why, sizeof(why));
    if (r == -EINVAL)
        return diag_fail(d, -EINVAL, "%s: %s (see 'gpuplane " DISCOVER_COMMAND " --help')", source,
                         why);
    return r;
}

static bool is_config_file(const struct opt *opt)
{
    return opt->offset == OFF(config_file);
}

/* ---- the config file ---- */

/* The sharing section in effect (MPS wins over time-slicing, as in the device plugin), as one
 * allocation: the shares, then their resource names. */
static int take_shares(struct discover_options *o, const struct dp_config *cfg)
{
    const struct dp_sharing *sh = dp_config_sharing(cfg);
    size_t n, size, names = 0;
    if (!sh || sh->n_resources == 0)
        return 0;
    n = sh->n_resources;
    for (size_t i = 0; i < n; i++)
        names += strlen(sh->resources[i].name) + 1;
    size = n * sizeof(struct discover_share) + names;
    struct discover_share *shares = malloc(size);
    if (!shares)
        return -ENOMEM;
    char *text = (char *)(shares + n);
    for (size_t i = 0; i < n; i++) {
        const struct dp_shared_resource *res = &sh->resources[i];
        size_t len = strlen(res->name) + 1;
        int replicas = res->replicas;
        /* gpuplane's per-device counts: the resource may leave its own out; label the largest. */
        for (size_t j = 0; j < res->n_devices; j++)
            if (res->devices[j].replicas > replicas)
                replicas = res->devices[j].replicas;
        memcpy(text, res->name, len);
        shares[i] = (struct discover_share){
            .resource = text,
            .replicas = (unsigned)replicas,
            .renamed = res->renamed || sh->rename_by_default,
            .strategy = sh == &cfg->mps ? "mps" : "time-slicing",
        };
        text += len;
    }
    o->shares = shares;
    o->n_shares = n;
    return 0;
}

/* What discover takes from a loaded file: its settings, flags.gfd and the sharing section. */
static int take_config(struct discover_options *o, const struct dp_config *cfg, const char *path,
                       struct diag *d)
{
    const struct dp_gfd *g = &cfg->gfd;
    int r = 0;
    o->mig = cfg->mig_strategy == DP_MIG_SINGLE  ? DISCOVER_MIG_SINGLE
             : cfg->mig_strategy == DP_MIG_MIXED ? DISCOVER_MIG_MIXED
                                                 : DISCOVER_MIG_NONE;
    o->fail_on_init_error = cfg->fail_on_init_error;
    if (g->has_oneshot)
        o->oneshot = g->oneshot;
    if (g->has_no_timestamp)
        o->no_timestamp = g->no_timestamp;
    if (g->has_use_node_feature_api)
        o->use_node_feature_api = cfg->use_node_feature_api;
    if (g->sleep_interval) {
        char why[256];
        if (parse_interval(g->sleep_interval, &o->sleep_interval_ms, why, sizeof(why)) < 0)
            return diag_fail_at(d, -EINVAL, path, g->sleep_interval_line, g->sleep_interval_col,
                                "\"sleepInterval\": %s", why);
    }
    r = set_string(&o->discovery_strategy, dp_discovery_to_string(cfg->discovery_strategy));
    if (r >= 0 && g->output_file)
        r = set_string(&o->output_file, g->output_file);
    if (r >= 0 && g->machine_type_file)
        r = set_string(&o->machine_type_file, g->machine_type_file);
    if (r >= 0)
        r = take_shares(o, cfg);
    return r;
}

static int load_config(struct discover_options *o, const char *path, struct diag *d)
{
    _cleanup_(dp_config_release) struct dp_config cfg = {0};
    int r = dp_config_init(&cfg);
    if (r >= 0)
        r = dp_config_load_file(&cfg, path, d);
    if (r >= 0)
        r = take_config(o, &cfg, path, d);
    if (r >= 0)
        r = set_string(&o->config_file, path);
    return r;
}

/* ---- sources ---- */

/* The first of an option's variables that is set, with its name; NULL when neither is. */
static const char *env_value(const struct opt *opt, const char **ret_name)
{
    const char *v = opt->env ? getenv(opt->env) : NULL;
    *ret_name = opt->env;
    if (!v && opt->env_alias)
        v = getenv(*ret_name = opt->env_alias);
    return v;
}

/* --config-file, else GFD_CONFIG_FILE, else CONFIG_FILE; an empty name is no file. */
static int apply_config_file(struct discover_options *o, const struct dp_args *a, struct diag *d)
{
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++) {
        const char *name, *path;
        if (!is_config_file(&OPTS[i]))
            continue;
        path = a->used[i] ? strbuf_str(&a->value[i]) : env_value(&OPTS[i], &name);
        if (!path || !*path)
            return 0;
        return load_config(o, path, d);
    }
    return 0;
}

/* An empty variable counts as unset except for plain strings, where it means "". */
static int apply_env(struct discover_options *o, struct diag *d)
{
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++) {
        const struct opt *opt = &OPTS[i];
        const char *name = NULL, *v;
        if (!opt->env || is_config_file(opt))
            continue;
        v = env_value(opt, &name);
        if (!v || (!*v && opt->kind != K_STRING))
            continue;
        int r = apply(opt, o, name, v, d);
        if (r < 0)
            return r;
    }
    return 0;
}

static int apply_flags(struct discover_options *o, const struct dp_args *a, struct diag *d)
{
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++) {
        char source[96];
        if (!a->used[i] || is_config_file(&OPTS[i]))
            continue;
        snprintf(source, sizeof(source), "%s%s", strlen(a->used[i]) == 1 ? "-" : "--", a->used[i]);
        int r = apply(&OPTS[i], o, source, strbuf_str(&a->value[i]), d);
        if (r < 0)
            return r;
    }
    return 0;
}

/* ---- lifecycle ---- */

/* Frees what o owns besides the common options. */
static void release_owned(struct discover_options *o)
{
    free(o->output_file);
    free(o->machine_type_file);
    free(o->config_file);
    free(o->discovery_strategy);
    free(o->node_name);
    free(o->namespace_);
    free(o->pod_name);
    free(o->kubeconfig);
    free(o->shares);
}

/* The defaults of everything but the common options. */
static int set_defaults(struct discover_options *o)
{
    release_owned(o);
    o->mig = DISCOVER_MIG_NONE;
    o->fail_on_init_error = true;
    o->oneshot = false;
    o->no_timestamp = false;
    o->sleep_interval_ms = DISCOVER_DEFAULT_SLEEP_MS;
    o->use_node_feature_api = true;
    o->print_labels = false;
    o->config_file = o->node_name = o->namespace_ = o->pod_name = o->kubeconfig = NULL;
    o->shares = NULL;
    o->n_shares = 0;
    o->output_file = strdup(DISCOVER_DEFAULT_OUTPUT);
    o->machine_type_file = strdup(DISCOVER_DEFAULT_MACHINE_FILE);
    o->discovery_strategy = strdup("auto");
    if (!o->output_file || !o->machine_type_file || !o->discovery_strategy)
        return -ENOMEM;
    return 0;
}

void discover_options_init(struct discover_options *o)
{
    *o = (struct discover_options){
        .mig = DISCOVER_MIG_NONE,
        .fail_on_init_error = true,
        .sleep_interval_ms = DISCOVER_DEFAULT_SLEEP_MS,
        .use_node_feature_api = true,
    };
    cli_common_init(&o->common);
}

void discover_options_release(struct discover_options *o)
{
    release_owned(o);
    cli_common_release(&o->common);
    *o = (struct discover_options){0};
}

int discover_options_parse(int argc, char **argv, struct discover_options *o, struct diag *d)
{
    _cleanup_(dp_args_release) struct dp_args a;
    struct dp_arg table[ARRAY_SIZE(OPTS)];
    dp_args_init(&a);
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++)
        table[i] = OPTS[i].arg;
    /* Every call starts from the defaults, so a reload cannot keep what a file no longer says. */
    int r = set_defaults(o);
    if (r >= 0)
        r = dp_args_scan(argc, argv, DISCOVER_COMMAND, table, ARRAY_SIZE(table), &o->common, &a, d);
    if (r < 0 || o->common.help)
        return r;
    r = apply_config_file(o, &a, d);
    if (r >= 0)
        r = apply_env(o, d);
    if (r >= 0)
        r = apply_flags(o, &a, d);
    return r;
}

/* ---- --help ---- */

/* Prints text, continuing each of its lines under the help column. */
static void print_indented(FILE *out, const char *text)
{
    fputs("                          ", out);
    for (const char *p = text; *p; p++) {
        fputc(*p, out);
        if (*p == '\n')
            fputs("                          ", out);
    }
}

void discover_usage(FILE *out)
{
    fputs("Usage: gpuplane " DISCOVER_COMMAND " [OPTIONS]\n"
          "\n"
          "GPU feature discovery, a drop-in for NVIDIA's GFD: labels the node with its GPUs\n"
          "(nvidia.com/gpu.product, .count, .memory, MIG and sharing labels, ...) through a\n"
          "NodeFeature object or the NFD local features file, again every sleep interval.\n"
          "Precedence: flag > environment > config file > default. Flags take --flag=VALUE,\n"
          "--flag VALUE or -flag=VALUE; booleans --flag or --flag=false.\n"
          "\n"
          "Options:\n",
          out);
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++) {
        const struct opt *opt = &OPTS[i];
        if (opt->arg.short_name)
            fprintf(out, "  -%c, ", opt->arg.short_name);
        else
            fputs("      ", out);
        fprintf(out, "--%s%s%s\n", opt->arg.name, opt->value_name ? "=" : "",
                opt->value_name ? opt->value_name : "");
        print_indented(out, opt->help);
        fputc('\n', out);
        if (opt->env) /* on a line of its own, so that lines stay within 100 columns */
            fprintf(out, "                          [$%s%s%s]\n", opt->env,
                    opt->env_alias ? ", $" : "", opt->env_alias ? opt->env_alias : "");
    }
    fputs(CLI_COMMON_HELP, out);
    fputs("\n"
          "Examples:\n"
          "  # in the DaemonSet's pod: a NodeFeature for this node, owned by the pod\n"
          "  gpuplane discover --node-name=$NODE_NAME --pod-name=$POD_NAME "
          "--namespace=$NAMESPACE\n"
          "\n"
          "  # the labels of a simulated node, once, on stdout\n"
          "  gpuplane discover --mock=a100-mig --mig-strategy=mixed --print-labels\n"
          "\n"
          "  # the NFD features file every 5 minutes, sharing labels from the plugin's config\n"
          "  gpuplane discover --use-node-feature-api=false -o /tmp/gfd --sleep-interval=5m \\\n"
          "    --config-file=examples/device-plugin/time-slicing.yaml\n"
          "\n"
          "See docs/discover.md and docs/discover-options.md.\n",
          out);
}
