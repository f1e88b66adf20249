/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The options of `gpuplane validate` under the names of NVIDIA's validator (urfave/cli flags with
 * their short aliases and the variables its manifests set: COMPONENT, WITH_WAIT, OUTPUT_DIR, ...),
 * plus the few gpuplane adds to say where things are (HOST_ROOT_CTR_PATH, CDI_SPEC_DIRS, ...).
 * Variables are read first and flags win over them, as urfave/cli merges them. The check is named
 * by the first argument (`gpuplane validate driver`), else by --component / COMPONENT, so both
 * NVIDIA's way of running the validator (variables only) and a plain command line work.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kube.h"
#include "validate-internal.h"

enum kind {
    K_BOOL,      /* Go's ParseBool; `--flag` alone is true */
    K_STRING,    /* any text */
    K_PATH,      /* an absolute path */
    K_SECONDS,   /* seconds, > 0, fractions allowed */
    K_DURATION,  /* seconds or a number with a unit; 0 = none */
    K_UINT,      /* a count */
    K_PORT,      /* 0-65535 */
    K_COMPONENT, /* a check name (checked once the command is known) */
    K_MIG,       /* none, single, mixed */
};

/* Which pages of --help list an option. */
#define FOR(c) (1u << (c))
#define CHECKS                                                                                     \
    (FOR(VALIDATE_DRIVER) | FOR(VALIDATE_TOOLKIT) | FOR(VALIDATE_PLUGIN) | FOR(VALIDATE_CUDA))
#define NVML_USERS (FOR(VALIDATE_DRIVER) | FOR(VALIDATE_CUDA))

struct opt {
    const char *name;
    const char *alias; /* NVIDIA's short alias (used with one dash), or NULL */
    const char *env;
    enum kind kind;
    size_t offset;
    unsigned pages;
    const char *value_name;
    const char *help;
};

#define OFF(field) offsetof(struct validate_options, field)
#define FIELD(o, opt, type) ((type *)(void *)((char *)(o) + (opt)->offset))

/* In --help order. */
static const struct opt OPTS[] = {
    {"component", "c", "COMPONENT", K_COMPONENT, OFF(component), CHECKS, "NAME",
     "the check, when no argument names it: driver, toolkit, plugin or cuda"},
    {"with-wait", "w", "WITH_WAIT", K_BOOL, OFF(with_wait),
     FOR(VALIDATE_DRIVER) | FOR(VALIDATE_TOOLKIT) | FOR(VALIDATE_CUDA), NULL,
     "retry a failed check every sleep interval until it passes (default false:\n"
     "fail with exit code 1)"},
    {"output-dir", "o", "OUTPUT_DIR", K_PATH, OFF(output_dir),
     CHECKS | FOR(VALIDATE_WAIT) | FOR(VALIDATE_CLEANUP), "DIR",
     "the status files' directory (default " VALIDATE_DEFAULT_OUTPUT_DIR ")"},
    {"sleep-interval-seconds", "s", "SLEEP_INTERVAL_SECONDS", K_SECONDS, OFF(sleep_ms),
     CHECKS | FOR(VALIDATE_WAIT), "SECONDS",
     "time between two tries, and between two progress lines of wait (default 5)"},
    {"cleanup-all", "r", "CLEANUP_ALL", K_BOOL, OFF(cleanup_all), CHECKS, NULL,
     "empty the output directory before the check"},
    {"node-name", "n", "NODE_NAME", K_STRING, OFF(node_name), FOR(VALIDATE_PLUGIN), "NAME",
     "this node (required by plugin)"},
    {"namespace", "ns", "OPERATOR_NAMESPACE", K_STRING, OFF(namespace_),
     FOR(VALIDATE_DRIVER) | FOR(VALIDATE_PLUGIN), "NAMESPACE",
     "the operator's namespace, where the driver DaemonSet is looked for"},
    {"kubeconfig", NULL, NULL, K_STRING, OFF(kubeconfig),
     FOR(VALIDATE_DRIVER) | FOR(VALIDATE_PLUGIN), "PATH",
     "the API server's kubeconfig (default: $KUBECONFIG, else in-cluster)"},
    {"plugin-retries", NULL, "PLUGIN_RETRIES", K_UINT, OFF(plugin_retries), FOR(VALIDATE_PLUGIN),
     "N",
     "how many times plugin looks for GPU resources, a sleep interval apart\n"
     "(default 30; 0: until they appear)"},
    {"host-root", NULL, "HOST_ROOT", K_PATH, OFF(host_root), FOR(VALIDATE_DRIVER), "PATH",
     "the host's root file system, as the host names it (default /)"},
    {"host-root-ctr-path", NULL, "HOST_ROOT_CTR_PATH", K_PATH, OFF(host_ctr),
     NVML_USERS | FOR(VALIDATE_TOOLKIT), "PATH",
     "where this container sees the host's root (default " VALIDATE_DEFAULT_HOST_ROOT_CTR_PATH ")"},
    {"driver-install-dir", NULL, "DRIVER_INSTALL_DIR", K_PATH, OFF(driver_dir),
     FOR(VALIDATE_DRIVER), "PATH",
     "the driver container's root on the host (default " VALIDATE_DEFAULT_DRIVER_INSTALL_DIR ")"},
    {"driver-install-dir-ctr-path", NULL, "DRIVER_INSTALL_DIR_CTR_PATH", K_PATH, OFF(driver_ctr),
     NVML_USERS, "PATH",
     "where this container sees the driver container's root\n"
     "(default " VALIDATE_DEFAULT_DRIVER_INSTALL_DIR ")"},
    {"driver-validation-skip-gpu-init", NULL, "DRIVER_VALIDATION_SKIP_GPU_INIT", K_BOOL,
     OFF(skip_gpu_init), FOR(VALIDATE_DRIVER), NULL,
     "only load NVML and read the driver version; no GPU needs to answer\n"
     "(GPUs bound to vfio-pci)"},
    {"disable-dev-char-symlink-creation", NULL, "DISABLE_DEV_CHAR_SYMLINK_CREATION", K_BOOL,
     OFF(no_dev_char), FOR(VALIDATE_DRIVER), NULL,
     "accepted for compatibility; gpuplane creates no /dev/char links"},
    {"cdi-spec-dirs", NULL, "CDI_SPEC_DIRS", K_STRING, OFF(cdi_dirs), FOR(VALIDATE_TOOLKIT), "DIRS",
     "where CDI specs are looked for, host paths separated by commas\n"
     "(default " VALIDATE_DEFAULT_CDI_DIRS ")"},
    {"containerd-config", NULL, "CONTAINERD_CONFIG", K_PATH, OFF(containerd_config),
     FOR(VALIDATE_TOOLKIT), "PATH",
     "containerd's configuration on the host; its conf.d/*.toml are read too\n"
     "(default " VALIDATE_DEFAULT_CONTAINERD_CONFIG ")"},
    {"crio-config", NULL, "CRIO_CONFIG", K_PATH, OFF(crio_config), FOR(VALIDATE_TOOLKIT), "PATH",
     "CRI-O's configuration on the host; its crio.conf.d/* are read too\n"
     "(default " VALIDATE_DEFAULT_CRIO_CONFIG ")"},
    {"runtime-class", NULL, "VALIDATOR_RUNTIME_CLASS", K_STRING, OFF(runtime_class),
     FOR(VALIDATE_TOOLKIT), "NAME",
     "the runtime handler the toolkit configures (default " VALIDATE_DEFAULT_RUNTIME_CLASS ")"},
    {"timeout", NULL, NULL, K_DURATION, OFF(timeout_ms), FOR(VALIDATE_WAIT), "DURATION",
     "give up after this long (exit code 1): 90, 30s, 5m, 1h (default: never)"},
    {"with-workload", "l", "WITH_WORKLOAD", K_BOOL, OFF(with_workload), 0, NULL,
     "accepted for compatibility; gpuplane runs no validation pods"},
    {"mig-strategy", "m", "MIG_STRATEGY", K_MIG, OFF(mig_strategy), 0, "STRATEGY",
     "accepted for compatibility: none, single or mixed"},
    {"metrics-port", "p", "METRICS_PORT", K_PORT, OFF(metrics_port), 0, "PORT",
     "accepted for compatibility"},
    {"default-gpu-workload-config", "g", "DEFAULT_GPU_WORKLOAD_CONFIG", K_STRING, OFF(workload), 0,
     "CONFIG", "accepted for compatibility"},
};

static const char *const COMMAND_NAMES[] = {
    [VALIDATE_DRIVER] = "driver", [VALIDATE_TOOLKIT] = "toolkit", [VALIDATE_PLUGIN] = "plugin",
    [VALIDATE_CUDA] = "cuda",     [VALIDATE_WAIT] = "wait",       [VALIDATE_CLEANUP] = "cleanup",
};

/* NVIDIA's components gpuplane does not check. */
static const char *const NVIDIA_ONLY[] = {
    "metrics",    "mofed",     "vfio-pci", "vgpu-manager",   "vgpu-devices",
    "cc-manager", "nvidia-fs", "gdrcopy",  "nvidia-peermem", NULL,
};

static const char *const MIG_NAMES[] = {"none", "single", "mixed", NULL};

const char *validate_command_name(enum validate_command command)
{
    if (command <= VALIDATE_NONE || (size_t)command >= ARRAY_SIZE(COMMAND_NAMES))
        return NULL;
    return COMMAND_NAMES[command];
}

enum validate_command validate_command_parse(const char *s)
{
    for (size_t i = 1; i < ARRAY_SIZE(COMMAND_NAMES); i++)
        if (COMMAND_NAMES[i] && strcmp(COMMAND_NAMES[i], s) == 0)
            return (enum validate_command)i;
    return VALIDATE_NONE;
}

/* ---- values ---- */

int validate_parse_bool(const char *s, bool *ret)
{
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True", NULL};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False", NULL};
    for (size_t i = 0; yes[i]; i++)
        if (strcmp(s, yes[i]) == 0)
            return *ret = true, 0;
    for (size_t i = 0; no[i]; i++)
        if (strcmp(s, no[i]) == 0)
            return *ret = false, 0;
    return -EINVAL;
}

/* A decimal number "12", "1.5", ".5" in thousandths (digits past the third decimal round up);
 * -EINVAL for other text, -ERANGE when the whole part passes max_whole. */
static int parse_milli(const char **sp, uint64_t max_whole, uint64_t *ret)
{
    static const unsigned place[] = {100, 10, 1};
    const char *s = *sp;
    uint64_t whole = 0, frac = 0;
    bool beyond = false;
    size_t nwhole = strspn(s, "0123456789"), nfrac = 0;
    for (size_t i = 0; i < nwhole; i++) {
        whole = whole * 10 + (uint64_t)(s[i] - '0');
        if (whole > max_whole)
            return -ERANGE;
    }
    s += nwhole;
    if (*s == '.') {
        s++;
        nfrac = strspn(s, "0123456789");
        for (size_t i = 0; i < nfrac; i++) {
            unsigned digit = (unsigned)(s[i] - '0');
            if (i < ARRAY_SIZE(place))
                frac += digit * place[i];
            else if (digit)
                beyond = true;
        }
        s += nfrac;
    }
    if (nwhole == 0 && nfrac == 0)
        return -EINVAL;
    *ret = whole * 1000 + frac + (beyond ? 1 : 0);
    *sp = s;
    return 0;
}

/* A day: longer intervals are a mistake, and the sums below cannot wrap. */
#define SECONDS_MAX_MS (86400u * 1000u)
/* Durations up to a year. */
#define DURATION_MAX_MS ((uint64_t)366 * 86400 * 1000)

int validate_parse_seconds(const char *s, uint64_t *ret_ms)
{
    uint64_t ms = 0;
    int r = parse_milli(&s, SECONDS_MAX_MS / 1000, &ms);
    if (r < 0)
        return r;
    if (*s)
        return -EINVAL;
    if (ms == 0 || ms > SECONDS_MAX_MS)
        return -ERANGE;
    *ret_ms = ms;
    return 0;
}

int validate_parse_duration(const char *s, uint64_t *ret_ms)
{
    /* Longest first where one unit is a prefix of another. */
    static const struct {
        const char *name;
        uint64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    uint64_t total = 0;
    bool any = false;
    if (!*s)
        return -EINVAL;
    while (*s) {
        uint64_t milli = 0, per = 0, add;
        int r = parse_milli(&s, DURATION_MAX_MS / 1000, &milli);
        if (r < 0)
            return r;
        size_t best = 0;
        for (size_t u = 0; u < ARRAY_SIZE(units); u++) {
            size_t n = strlen(units[u].name);
            if (n > best && strncmp(s, units[u].name, n) == 0)
                best = n, per = units[u].ms;
        }
        if (!best) {
            /* A bare number is seconds, and only alone ("90", not "1m30"). */
            if (*s || any)
                return -EINVAL;
            per = 1000;
        }
        s += best;
        any = true;
        /* milli is the number times 1000, so the part is milli * per / 1000 ms, rounded up. */
        if (per > 1000 && milli > DURATION_MAX_MS / per * 1000)
            return -ERANGE;
        add = (milli * per + 999) / 1000;
        if (add > DURATION_MAX_MS - total)
            return -ERANGE;
        total += add;
    }
    *ret_ms = total;
    return 0;
}

static bool in_list(const char *const *list, const char *s)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(list[i], s) == 0)
            return true;
    return false;
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

static int parse_uint(const char *s, unsigned long max, unsigned long *ret)
{
    char *end = NULL;
    if (!*s || strspn(s, "0123456789") != strlen(s))
        return -EINVAL;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || v > max)
        return -ERANGE;
    *ret = v;
    return 0;
}

/* Sets one option from text; why gets the reason of a bad value. */
static int apply_text(const struct opt *opt, struct validate_options *o, const char *value,
                      char *why, size_t why_size)
{
    unsigned long n = 0;
    int r;
    switch (opt->kind) {
    case K_BOOL:
        if (validate_parse_bool(value, FIELD(o, opt, bool)) < 0)
            return snprintf(why, why_size, "want true or false"), -EINVAL;
        return 0;
    case K_STRING:
    case K_COMPONENT:
        return set_string(FIELD(o, opt, char *), value);
    case K_PATH:
        if (value[0] != '/')
            return snprintf(why, why_size, "want an absolute path"), -EINVAL;
        return set_string(FIELD(o, opt, char *), value);
    case K_MIG:
        if (!in_list(MIG_NAMES, value))
            return snprintf(why, why_size, "want none, single or mixed"), -EINVAL;
        return set_string(FIELD(o, opt, char *), value);
    case K_SECONDS:
        r = validate_parse_seconds(value, FIELD(o, opt, uint64_t));
        if (r < 0)
            snprintf(why, why_size, "want a number of seconds, more than 0 and at most 86400");
        return r < 0 ? -EINVAL : 0;
    case K_DURATION:
        r = validate_parse_duration(value, FIELD(o, opt, uint64_t));
        if (r < 0)
            snprintf(why, why_size, "want seconds or a duration such as 30s, 5m, 1h30m");
        return r < 0 ? -EINVAL : 0;
    case K_UINT:
        if (parse_uint(value, 1000000, &n) < 0)
            return snprintf(why, why_size, "want a whole number up to 1000000"), -EINVAL;
        *FIELD(o, opt, unsigned) = (unsigned)n;
        return 0;
    case K_PORT:
        if (parse_uint(value, 65535, &n) < 0)
            return snprintf(why, why_size, "want a port number (0-65535)"), -EINVAL;
        *FIELD(o, opt, long) = (long)n;
        return 0;
    }
    return -EINVAL;
}

static int apply(const struct opt *opt, struct validate_options *o, const char *source,
                 const char *value, struct diag *d)
{
    char why[160] = "";
    int r = apply_text(opt, o, value, why, sizeof(why));
    if (r == -EINVAL)
        return diag_fail(d, r,
                         "gpuplane " VALIDATE_COMMAND ": %s: invalid value \"%s\": %s (see "
                         "'gpuplane " VALIDATE_COMMAND " --help')",
                         source, value, why);
    return r;
}

/* An empty variable counts as unset, except for plain strings. */
static int apply_env(struct validate_options *o, struct diag *d)
{
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++) {
        const struct opt *opt = &OPTS[i];
        const char *v = opt->env ? getenv(opt->env) : NULL;
        if (!v || (!*v && opt->kind != K_STRING))
            continue;
        int r = apply(opt, o, opt->env, v, d);
        if (r < 0)
            return r;
    }
    return 0;
}

/* ---- the command line ---- */

enum {
    OPT_BASE = 0x3000, /* OPT_BASE + i: row i of OPTS */
};

/* Every row under its name and alias, then the common options. */
#define N_LONG (2 * ARRAY_SIZE(OPTS) + 8)

static void build_longopts(struct option *lo)
{
    static const struct option common[] = {CLI_COMMON_OPTIONS};
    size_t n = 0;
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++) {
        int has = OPTS[i].kind == K_BOOL ? optional_argument : required_argument;
        lo[n++] = (struct option){OPTS[i].name, has, NULL, OPT_BASE + (int)i};
        if (OPTS[i].alias)
            lo[n++] = (struct option){OPTS[i].alias, has, NULL, OPT_BASE + (int)i};
    }
    /* -h exactly, before getopt_long_only tries it as a prefix of --help or --host-root. */
    lo[n++] = (struct option){"h", no_argument, NULL, CLI_OPT_HELP};
    for (size_t i = 0; i < ARRAY_SIZE(common); i++)
        lo[n++] = common[i];
    lo[n] = (struct option){0};
}

static int usage_fail(struct diag *d, const char *fmt, ...) _printf_(2, 3);

static int usage_fail(struct diag *d, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return diag_fail(
        d, -EINVAL,
        "gpuplane " VALIDATE_COMMAND ": %s (see 'gpuplane " VALIDATE_COMMAND " --help')", msg);
}

/* What the command line says, recorded per row (the last value of a flag wins). */
struct given {
    const char *value[ARRAY_SIZE(OPTS)];
    const char *as[ARRAY_SIZE(OPTS)];
};

static int scan(int argc, char **argv, struct validate_options *o, struct given *g, struct diag *d)
{
    struct option lo[N_LONG];
    build_longopts(lo);
    optind = 0; /* glibc: start over (tests parse many command lines in one process) */
    opterr = 0;
    for (;;) {
        int idx = -1;
        int c = getopt_long_only(argc, argv, ":" CLI_COMMON_SHORT, lo, &idx);
        if (c == -1)
            return 0;
        const char *given = optind > 0 && optind <= argc ? argv[optind - 1] : "?";
        if (c == '?')
            return usage_fail(d, "unknown option \"%s\"", given);
        if (c == ':')
            return usage_fail(d, "option \"%s\" needs a value", given);
        if (c >= OPT_BASE && c < OPT_BASE + (int)ARRAY_SIZE(OPTS)) {
            size_t i = (size_t)(c - OPT_BASE);
            g->value[i] = optarg ? optarg : "true";
            g->as[i] = idx >= 0 ? lo[idx].name : OPTS[i].name;
            continue;
        }
        int r = cli_common_option(&o->common, VALIDATE_COMMAND, c, optarg);
        if (r < 0) /* src/cli has said why on stderr */
            return diag_fail(d, r, "%s", "");
        if (r == 0)
            return usage_fail(d, "unknown option \"%s\"", given);
    }
}

static int apply_flags(struct validate_options *o, const struct given *g, struct diag *d)
{
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++) {
        char source[80];
        if (!g->value[i])
            continue;
        snprintf(source, sizeof(source), "%s%s", strlen(g->as[i]) <= 2 ? "-" : "--", g->as[i]);
        int r = apply(&OPTS[i], o, source, g->value[i], d);
        if (r < 0)
            return r;
    }
    return 0;
}

/* The check from the first argument, else from --component / COMPONENT. */
static int pick_command(int argc, char **argv, struct validate_options *o, struct diag *d)
{
    int first = optind;
    if (first < argc) {
        o->command = validate_command_parse(argv[first]);
        if (o->command == VALIDATE_NONE)
            return usage_fail(d,
                              "unknown check \"%s\": want driver, toolkit, plugin, cuda, wait or "
                              "cleanup",
                              argv[first]);
        first++;
    } else if (o->component && o->component[0]) {
        o->command = validate_command_parse(o->component);
        if (in_list(NVIDIA_ONLY, o->component))
            return usage_fail(d,
                              "component \"%s\" is one of NVIDIA's checks gpuplane does not make "
                              "(it makes driver, toolkit, plugin and cuda)",
                              o->component);
        if (o->command == VALIDATE_NONE || o->command == VALIDATE_WAIT ||
            o->command == VALIDATE_CLEANUP)
            return usage_fail(d, "unknown component \"%s\": want driver, toolkit, plugin or cuda",
                              o->component);
    }
    if (o->command == VALIDATE_WAIT) {
        o->files = argv + first;
        o->n_files = (size_t)(argc - first);
        return 0;
    }
    if (first < argc)
        return usage_fail(d, "unexpected argument \"%s\"", argv[first]);
    return 0;
}

/* The node and namespace names become parts of API paths: checked here, so that a wrong one is a
 * usage error rather than a check that fails (or, with WITH_WAIT, retries) forever. */
static int check_names(const struct validate_options *o, struct diag *d)
{
    char path[512];
    struct diag why;
    diag_init(&why);
    if (o->node_name && o->node_name[0] &&
        kube_path(path, sizeof(path), "v1", "nodes", NULL, o->node_name, &why) < 0)
        return usage_fail(d, "invalid node name \"%s\" (--node-name, NODE_NAME): %s", o->node_name,
                          why.msg);
    if (o->namespace_ && o->namespace_[0] &&
        kube_path(path, sizeof(path), "v1", "pods", o->namespace_, NULL, &why) < 0)
        return usage_fail(d, "invalid namespace \"%s\" (--namespace, OPERATOR_NAMESPACE): %s",
                          o->namespace_, why.msg);
    return 0;
}

/* What the chosen command needs, once everything is read. */
static int check_command(const struct validate_options *o, struct diag *d)
{
    switch (o->command) {
    case VALIDATE_NONE:
        return usage_fail(d, "%s",
                          "say which check to make: driver, toolkit, plugin, cuda, wait or cleanup "
                          "(or set COMPONENT)");
    case VALIDATE_PLUGIN:
        if (!o->node_name || !o->node_name[0])
            return usage_fail(d, "%s", "plugin needs this node's name: --node-name or NODE_NAME");
        return check_names(o, d);
    case VALIDATE_DRIVER:
        return check_names(o, d);
    case VALIDATE_WAIT:
        if (o->n_files == 0)
            return usage_fail(d, "%s", "wait needs the names of the files to wait for");
        for (size_t i = 0; i < o->n_files; i++)
            if (!validate_name_ok(o->files[i]))
                return usage_fail(d,
                                  "invalid file name \"%s\": a plain name in the output directory "
                                  "(letters, digits, '.', '_', '-'; not . or ..)",
                                  o->files[i]);
        return 0;
    default:
        return 0;
    }
}

/* ---- lifecycle ---- */

static void release_owned(struct validate_options *o)
{
    free(o->component);
    free(o->output_dir);
    free(o->node_name);
    free(o->namespace_);
    free(o->kubeconfig);
    free(o->mig_strategy);
    free(o->workload);
    free(o->host_root);
    free(o->driver_dir);
    free(o->driver_ctr);
    free(o->host_ctr);
    free(o->cdi_dirs);
    free(o->containerd_config);
    free(o->crio_config);
    free(o->runtime_class);
}

void validate_options_init(struct validate_options *o)
{
    *o = (struct validate_options){
        .with_workload = true,
        .sleep_ms = VALIDATE_DEFAULT_SLEEP_MS,
        .plugin_retries = VALIDATE_DEFAULT_PLUGIN_RETRIES,
    };
    cli_common_init(&o->common);
}

void validate_options_release(struct validate_options *o)
{
    release_owned(o);
    cli_common_release(&o->common);
    *o = (struct validate_options){0};
}

static int set_defaults(struct validate_options *o)
{
    struct {
        char **field;
        const char *value;
    } strings[] = {
        {&o->output_dir, VALIDATE_DEFAULT_OUTPUT_DIR},
        {&o->mig_strategy, "single"},
        {&o->host_root, "/"},
        {&o->driver_dir, VALIDATE_DEFAULT_DRIVER_INSTALL_DIR},
        {&o->driver_ctr, VALIDATE_DEFAULT_DRIVER_INSTALL_DIR},
        {&o->host_ctr, VALIDATE_DEFAULT_HOST_ROOT_CTR_PATH},
        {&o->cdi_dirs, VALIDATE_DEFAULT_CDI_DIRS},
        {&o->containerd_config, VALIDATE_DEFAULT_CONTAINERD_CONFIG},
        {&o->crio_config, VALIDATE_DEFAULT_CRIO_CONFIG},
        {&o->runtime_class, VALIDATE_DEFAULT_RUNTIME_CLASS},
    };
    for (size_t i = 0; i < ARRAY_SIZE(strings); i++)
        if (set_string(strings[i].field, strings[i].value) < 0)
            return -ENOMEM;
    return 0;
}

int validate_options_parse(int argc, char **argv, struct validate_options *o, struct diag *d)
{
    struct given g = {0};
    int r = set_defaults(o);
    if (r >= 0)
        r = scan(argc, argv, o, &g, d);
    if (r >= 0)
        r = apply_env(o, d);
    if (r >= 0)
        r = apply_flags(o, &g, d);
    if (r >= 0)
        r = pick_command(argc, argv, o, d);
    if (r >= 0 && !o->common.help)
        r = check_command(o, d);
    return r;
}

/* ---- --help ---- */

static void print_option(FILE *out, const struct opt *opt)
{
    if (opt->alias)
        fprintf(out, "  -%s, ", opt->alias);
    else
        fputs("      ", out);
    fprintf(out, "--%s%s%s\n", opt->name, opt->value_name ? "=" : "",
            opt->value_name ? opt->value_name : "");
    fputs("                          ", out);
    for (const char *p = opt->help; *p; p++) {
        fputc(*p, out);
        if (*p == '\n')
            fputs("                          ", out);
    }
    fputc('\n', out);
    if (opt->env)
        fprintf(out, "                          [$%s]\n", opt->env);
}

static const char OVERVIEW[] =
    "Usage: gpuplane validate CHECK [OPTIONS]\n"
    "       gpuplane validate wait [OPTIONS] FILE...\n"
    "       gpuplane validate cleanup [OPTIONS]\n"
    "\n"
    "The node checks of NVIDIA's GPU operator validator, under its file names, variables and\n"
    "flags. A check removes its status file from the output directory, makes its check, and\n"
    "writes the file again (atomically) once it passes; other components' init containers wait\n"
    "for those files. Exit codes: 0 passed, 1 failed, 2 usage error.\n"
    "\n"
    "Checks:\n"
    "  driver    NVML loads from the host's driver or the driver container and every GPU\n"
    "            answers; writes driver-ready\n"
    "  toolkit   the NVIDIA Container Toolkit is in place: a CDI spec for nvidia.com/gpu, or the\n"
    "            container runtime's nvidia handler; writes toolkit-ready\n"
    "  plugin    the node advertises GPUs: allocatable nvidia.com/gpu or nvidia.com/mig-*, or\n"
    "            ResourceSlices of gpu.nvidia.com for the node; writes plugin-ready\n"
    "  cuda      every GPU is usable for CUDA work as NVML sees it; writes cuda-ready\n"
    "  wait      wait until the named status files exist\n"
    "  cleanup   remove the status files (*-ready)\n"
    "\n"
    "The check may also come from --component or COMPONENT, as NVIDIA's validator takes it.\n"
    "Flags take --flag=VALUE, --flag VALUE or one dash; booleans --flag or --flag=false; a flag\n"
    "wins over its variable.\n"
    "\n"
    "Options:\n";

static const char *const PAGES[] = {
    [VALIDATE_DRIVER] =
        "Usage: gpuplane validate driver [OPTIONS]\n"
        "\n"
        "Checks that the NVIDIA driver works: NVML loads and answers (driver version, device\n"
        "count) and every GPU answers it. The library is the host's (libnvidia-ml.so.1 under the\n"
        "host's root), else the driver container's (under its install directory), unless\n"
        "--nvml-lib or --mock names one. When the driver container is the operator's, its\n"
        ".driver-ctr-ready must exist first. Writes driver-ready with NVIDIA's keys\n"
        "(IS_HOST_DRIVER, NVIDIA_DRIVER_ROOT, DRIVER_ROOT_CTR_PATH, NVIDIA_DEV_ROOT,\n"
        "DEV_ROOT_CTR_PATH).\n",
    [VALIDATE_TOOLKIT] =
        "Usage: gpuplane validate toolkit [OPTIONS]\n"
        "\n"
        "Checks that the NVIDIA Container Toolkit is in place, without running a container: a CDI\n"
        "spec of kind nvidia.com/gpu with at least one device in the CDI directories, or the\n"
        "container runtime's handler (containerd or CRI-O) configured, with its runtime binary\n"
        "present when the configuration names one. Paths are the host's, read under\n"
        "--host-root-ctr-path. Writes toolkit-ready.\n",
    [VALIDATE_PLUGIN] =
        "Usage: gpuplane validate plugin --node-name NAME [OPTIONS]\n"
        "\n"
        "Checks through the API server that the node advertises GPUs: status.allocatable has\n"
        "nvidia.com/gpu* or nvidia.com/mig-* of at least 1 (the device plugin), or ResourceSlices\n"
        "of driver gpu.nvidia.com are published for the node with at least one device (the DRA\n"
        "driver). Asks up to --plugin-retries times, a sleep interval apart (NVIDIA's 30 x 5 s).\n"
        "Writes plugin-ready.\n",
    [VALIDATE_CUDA] =
        "Usage: gpuplane validate cuda [OPTIONS]\n"
        "\n"
        "NVIDIA runs a CUDA vectorAdd pod here; gpuplane has no CUDA, so it checks instead what\n"
        "would make CUDA work fail, as NVML reports it: every GPU answers (not lost), no GPU has\n"
        "had a row remapping failure, and no GPU is in MIG mode without MIG devices. Loads NVML\n"
        "as the driver check does. Writes cuda-ready.\n",
    [VALIDATE_WAIT] =
        "Usage: gpuplane validate wait [OPTIONS] FILE...\n"
        "\n"
        "Waits until every FILE exists in the output directory (woken by inotify; polled while "
        "the\n"
        "directory is missing), saying every sleep interval which ones it still waits for.\n"
        "Exit code 0 once all are there, 1 after --timeout. FILE is a plain name (driver-ready,\n"
        "toolkit-ready, ...), never a path.\n",
    [VALIDATE_CLEANUP] =
        "Usage: gpuplane validate cleanup [OPTIONS]\n"
        "\n"
        "Removes the status files (every *-ready) from the output directory: the validator's\n"
        "preStop. Files starting with '.' (the driver container's .driver-ctr-ready) stay.\n",
};

void validate_usage(FILE *out, enum validate_command command)
{
    const char *page =
        command > VALIDATE_NONE && (size_t)command < ARRAY_SIZE(PAGES) ? PAGES[command] : NULL;
    fputs(page ? page : OVERVIEW, out);
    if (page)
        fputs("\nOptions:\n", out);
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++)
        if (!page || (OPTS[i].pages & FOR(command)))
            print_option(out, &OPTS[i]);
    fputs(CLI_COMMON_HELP, out);
    if (!page)
        fputs("\n"
              "Examples:\n"
              "  # as the validator DaemonSet's init containers run it\n"
              "  COMPONENT=driver WITH_WAIT=true gpuplane validate\n"
              "  gpuplane validate plugin --node-name=$NODE_NAME\n"
              "\n"
              "  # hold a component back until the node is ready for it\n"
              "  gpuplane validate wait --output-dir /run/nvidia/validations driver-ready "
              "toolkit-ready\n"
              "\n"
              "  # a simulated node, status files in /tmp/v\n"
              "  gpuplane validate driver --mock dgx-h100 -o /tmp/v && cat /tmp/v/driver-ready\n"
              "\n"
              "See docs/validate.md.\n",
              out);
}
