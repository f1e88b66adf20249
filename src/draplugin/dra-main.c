/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane dra-driver`: the command line and environment under the names of NVIDIA's
 * gpu-kubelet-plugin (a flag wins over its variable, which wins over the default), --help, and
 * the hand-over to the daemon. Go's flag library takes `-flag` as well as `--flag`, so
 * getopt_long_only is used: manifests written either way keep working.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "dra-internal.h"

enum kind {
    KIND_STRING,
    KIND_INT,
    KIND_DOUBLE,
    KIND_BOOL,
};

/* One setting: its flag, its variable (or NULL), where it goes, and its --help line. */
struct setting {
    const char *flag;
    const char *alias;
    const char *env;
    enum kind kind;
    size_t offset;
    const char *help;
};

#define OFF(field) offsetof(struct dra_options, field)

static const struct setting SETTINGS[] = {
    {"node-name", NULL, "NODE_NAME", KIND_STRING, OFF(node_name),
     "the node's name: pool name and slice owner (required)"},
    {"driver-name", NULL, "DRIVER_NAME", KIND_STRING, OFF(driver_name),
     "the DRA driver name (default " DRA_DEFAULT_DRIVER ")"},
    {"kubelet-registrar-directory-path", NULL, "KUBELET_REGISTRAR_DIRECTORY_PATH", KIND_STRING,
     OFF(registrar_dir),
     "the kubelet's plugin watcher directory\n(default " DRA_DEFAULT_REGISTRAR_DIR ")"},
    {"kubelet-plugins-directory-path", NULL, "KUBELET_PLUGINS_DIRECTORY_PATH", KIND_STRING,
     OFF(plugins_dir),
     "where <driver>/dra.sock and the checkpoint live\n(default " DRA_DEFAULT_PLUGINS_DIR ")"},
    {"cdi-root", NULL, "CDI_ROOT", KIND_STRING, OFF(cdi_root),
     "where per-claim CDI specs are written (default " DRA_DEFAULT_CDI_ROOT ")"},
    {"kubeconfig", NULL, "KUBECONFIG", KIND_STRING, OFF(kubeconfig),
     "the kubeconfig to use (default: in-cluster configuration)"},
    {"kube-api-qps", NULL, "KUBE_API_QPS", KIND_DOUBLE, OFF(kube_qps),
     "API requests per second (default 5)"},
    {"kube-api-burst", NULL, "KUBE_API_BURST", KIND_INT, OFF(kube_burst),
     "API request burst (default 10)"},
    {"kube-allow-insecure", NULL, NULL, KIND_BOOL, OFF(allow_insecure),
     "honour insecure-skip-tls-verify in the kubeconfig"},
    {"nvidia-driver-root", "driver-root", "NVIDIA_DRIVER_ROOT", KIND_STRING, OFF(driver_root),
     "root of the driver installation (default /; with --mock,\nthe simulated node's own, removed "
     "on exit)"},
    {"nvidia-dev-root", "dev-root", "NVIDIA_DEV_ROOT", KIND_STRING, OFF(dev_root),
     "root of the /dev tree (default: the driver root)"},
    {"nvidia-cdi-hook-path", NULL, "NVIDIA_CDI_HOOK_PATH", KIND_STRING, OFF(hook_path),
     "the CDI hook in generated specs (default " NVCDI_HOOK_PATH ")"},
    {"sysfs-root", NULL, "GPUPLANE_SYSFS_ROOT", KIND_STRING, OFF(sysfs_root),
     "where /sys is, for pcieRoot attributes (default /)"},
    {"healthcheck-port", NULL, "HEALTHCHECK_PORT", KIND_INT, OFF(healthcheck_port),
     "serve grpc.health.v1 on 127.0.0.1:PORT; 0 picks a port,\nnegative disables (default -1)"},
    {"health-recovery-window", NULL, "GPUPLANE_HEALTH_RECOVERY_WINDOW", KIND_INT,
     OFF(recovery_window_s),
     "seconds without a fatal event before an unhealthy GPU\nthat answers again is untainted; 0 "
     "never (default 60)"},
};

#define OPT_SETTING 0x3000
#define OPT_LIST_FAULTS 0x2fff

void dra_options_init(struct dra_options *o)
{
    *o = (struct dra_options){
        .healthcheck_port = -1, .kube_qps = 5, .kube_burst = 10, .recovery_window_s = 60};
    cli_common_init(&o->common);
}

void dra_options_release(struct dra_options *o)
{
    cli_common_release(&o->common);
    for (size_t i = 0; i < ARRAY_SIZE(SETTINGS); i++)
        if (SETTINGS[i].kind == KIND_STRING)
            free(*(char **)((char *)o + SETTINGS[i].offset));
}

static int usage(struct diag *d, const char *what, const char *arg)
{
    return diag_fail(d, -EINVAL, "%s \"%s\" (see 'gpuplane " DRA_COMMAND " --help')", what, arg);
}

static int parse_bool(const char *v, bool *ret)
{
    static const char *const yes[] = {"1", "t", "T", "true", "TRUE", "True"};
    static const char *const no[] = {"0", "f", "F", "false", "FALSE", "False"};
    for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
        if (strcmp(v, yes[i]) == 0)
            return *ret = true, 0;
        if (strcmp(v, no[i]) == 0)
            return *ret = false, 0;
    }
    return -EINVAL;
}

/* Sets one setting from text (a flag's or a variable's value); source names it in messages. */
static int apply(struct dra_options *o, const struct setting *s, const char *v, const char *source,
                 struct diag *d)
{
    void *field = (char *)o + s->offset;
    char *end = NULL;
    errno = 0;
    switch (s->kind) {
    case KIND_STRING: {
        char *copy = strdup(v);
        if (!copy)
            return diag_fail(d, -ENOMEM, "out of memory");
        free(*(char **)field);
        *(char **)field = copy;
        return 0;
    }
    case KIND_INT: {
        long n = strtol(v, &end, 10);
        if (errno || end == v || *end || n < -1000000000L || n > 1000000000L)
            return usage(d, "invalid integer for", source);
        *(long *)field = n;
        return 0;
    }
    case KIND_DOUBLE: {
        double x = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(x) || x <= 0)
            return usage(d, "invalid positive number for", source);
        *(double *)field = x;
        return 0;
    }
    case KIND_BOOL:
        if (parse_bool(v, (bool *)field) < 0)
            return usage(d, "invalid boolean for", source);
        return 0;
    }
    return -EINVAL;
}

static int apply_env(struct dra_options *o, struct diag *d)
{
    for (size_t i = 0; i < ARRAY_SIZE(SETTINGS); i++) {
        const char *v = SETTINGS[i].env ? getenv(SETTINGS[i].env) : NULL;
        if (!v || !v[0])
            continue;
        /* KUBECONFIG may be a list: the kube client takes its first file itself. */
        if (strcmp(SETTINGS[i].env, "KUBECONFIG") == 0)
            continue;
        int r = apply(o, &SETTINGS[i], v, SETTINGS[i].env, d);
        if (r < 0)
            return r;
    }
    return 0;
}

static size_t build_options(struct option *opts)
{
    static const struct option common[] = {CLI_COMMON_OPTIONS};
    size_t n = 0;
    for (size_t i = 0; i < ARRAY_SIZE(SETTINGS); i++) {
        int has_arg = SETTINGS[i].kind == KIND_BOOL ? optional_argument : required_argument;
        opts[n++] = (struct option){SETTINGS[i].flag, has_arg, NULL, OPT_SETTING + (int)i};
        if (SETTINGS[i].alias)
            opts[n++] = (struct option){SETTINGS[i].alias, has_arg, NULL, OPT_SETTING + (int)i};
    }
    for (size_t i = 0; i < ARRAY_SIZE(common); i++)
        opts[n++] = common[i];
    opts[n++] = (struct option){"list-fault-points", no_argument, NULL, OPT_LIST_FAULTS};
    opts[n] = (struct option){NULL, 0, NULL, 0};
    return n;
}

static int parse_flags(int argc, char **argv, struct dra_options *o, struct diag *d)
{
    struct option opts[2 * ARRAY_SIZE(SETTINGS) + 16];
    build_options(opts);
    optind = 0;
    opterr = 0;
    for (;;) {
        int opt = getopt_long_only(argc, argv, ":" CLI_COMMON_SHORT, opts, NULL);
        if (opt == -1)
            break;
        const char *given = optind > 0 ? argv[optind - 1] : "?";
        if (opt == '?')
            return usage(d, "unknown option", given);
        if (opt == ':')
            return usage(d, "missing value for option", given);
        if (opt == OPT_LIST_FAULTS) {
            o->list_fault_points = true;
            continue;
        }
        if (opt >= OPT_SETTING && opt < OPT_SETTING + (int)ARRAY_SIZE(SETTINGS)) {
            const struct setting *s = &SETTINGS[opt - OPT_SETTING];
            int r = apply(o, s, optarg ? optarg : "true", s->flag, d);
            if (r < 0)
                return r;
            continue;
        }
        int r = cli_common_option(&o->common, DRA_COMMAND, opt, optarg);
        if (r < 0)
            return diag_fail(d, -EINVAL, "%s", ""); /* cli_common_option printed why */
        if (r == 0)
            return usage(d, "unknown option", given);
    }
    if (optind < argc)
        return usage(d, "unexpected argument", argv[optind]);
    return 0;
}

static int set_default(char **field, const char *value)
{
    if (*field && (*field)[0])
        return 0;
    free(*field);
    *field = value ? strdup(value) : NULL;
    return value && !*field ? -ENOMEM : 0;
}

static int finish(struct dra_options *o, struct diag *d)
{
    if (set_default(&o->driver_name, DRA_DEFAULT_DRIVER) < 0 ||
        set_default(&o->registrar_dir, DRA_DEFAULT_REGISTRAR_DIR) < 0 ||
        set_default(&o->plugins_dir, DRA_DEFAULT_PLUGINS_DIR) < 0 ||
        set_default(&o->cdi_root, DRA_DEFAULT_CDI_ROOT) < 0 ||
        set_default(&o->driver_root, o->common.mock ? NULL : "/") < 0 ||
        set_default(&o->sysfs_root, "/") < 0)
        return diag_fail(d, -ENOMEM, "out of memory");
    if (o->common.help || o->list_fault_points)
        return 0;
    if (!o->node_name || !o->node_name[0])
        return diag_fail(d, -EINVAL,
                         "--node-name (or NODE_NAME) is required (see 'gpuplane " DRA_COMMAND
                         " --help')");
    if (o->healthcheck_port > 65535)
        return usage(d, "invalid port for", "--healthcheck-port");
    if (o->kube_burst < 1)
        return usage(d, "invalid burst for", "--kube-api-burst");
    if (o->recovery_window_s < 0)
        return usage(d, "invalid window for", "--health-recovery-window");
    const char *dirs[] = {o->registrar_dir, o->plugins_dir, o->cdi_root};
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
        if (dirs[i][0] != '/')
            return usage(d, "not an absolute path", dirs[i]);
    return 0;
}

int dra_options_parse(int argc, char **argv, struct dra_options *o, struct diag *d)
{
    int r = apply_env(o, d);
    if (r >= 0)
        r = parse_flags(argc, argv, o, d);
    if (r >= 0)
        r = finish(o, d);
    return r;
}

void dra_options_print_help(FILE *out)
{
    fputs(
        "Usage: gpuplane " DRA_COMMAND " [OPTIONS]\n"
        "\n"
        "The DRA kubelet driver for NVIDIA GPUs (driver gpu.nvidia.com), a drop-in for NVIDIA's\n"
        "gpu-kubelet-plugin: registers with the kubelet, publishes the node's ResourceSlices and\n"
        "prepares ResourceClaims (per-claim CDI specs, a crash-safe checkpoint).\n"
        "\n"
        "Options (a flag wins over its environment variable):\n",
        out);
    for (size_t i = 0; i < ARRAY_SIZE(SETTINGS); i++) {
        const struct setting *s = &SETTINGS[i];
        char name[96];
        snprintf(name, sizeof(name), "--%s%s", s->flag, s->kind == KIND_BOOL ? "" : "=VALUE");
        fprintf(out, "      %s\n", name);
        if (s->alias)
            fprintf(out, "      (also --%s)\n", s->alias);
        fputs("                          ", out);
        for (const char *p = s->help; *p; p++) {
            fputc(*p, out);
            if (*p == '\n')
                fputs("                          ", out);
        }
        if (s->env)
            fprintf(out, "; env %s", s->env);
        fputc('\n', out);
    }
    fputs("      --list-fault-points print the crash-test fault points (env " DRA_FAULT_ENV ")\n",
          out);
    fputs(CLI_COMMON_HELP, out);
    fputs(
        "\n"
        "Examples:\n"
        "  # on a node, inside the DaemonSet's pod (in-cluster API access)\n"
        "  gpuplane dra-driver --node-name=$NODE_NAME\n"
        "\n"
        "  # a simulated node (it brings its own driver root) against a test API server,\n"
        "  # private kubelet directories\n"
        "  gpuplane dra-driver --mock=dgx-h100 --node-name=node-1 --kubeconfig=kubeconfig.yaml \\\n"
        "    --kubelet-registrar-directory-path=/tmp/k/plugins_registry \\\n"
        "    --kubelet-plugins-directory-path=/tmp/k/plugins --cdi-root=/tmp/k/cdi\n"
        "\n"
        "See docs/dra-driver.md.\n",
        out);
}

static int list_fault_points(void)
{
    for (size_t i = 0; dra_fault_points[i]; i++)
        printf("%s\n", dra_fault_points[i]);
    return CLI_EXIT_OK;
}

int dra_main(int argc, char **argv)
{
    struct dra_options o;
    struct diag d;
    diag_init(&d);
    dra_options_init(&o);
    int r = dra_options_parse(argc, argv, &o, &d);
    if (r == -EINVAL) {
        if (d.msg[0])
            fprintf(stderr, "gpuplane " DRA_COMMAND ": %s\n", d.msg);
        r = CLI_EXIT_USAGE;
    } else if (r < 0) {
        cli_error("%s", d.msg[0] ? d.msg : "invalid configuration");
        r = CLI_EXIT_FAILURE;
    } else if (o.common.help) {
        dra_options_print_help(stdout);
        r = CLI_EXIT_OK;
    } else if (o.list_fault_points) {
        r = list_fault_points();
    } else if (cli_common_finish(&o.common, DRA_COMMAND) < 0) {
        r = CLI_EXIT_USAGE;
    } else if (dra_fault_init(&d) < 0) {
        cli_error("%s", d.msg);
        r = CLI_EXIT_USAGE;
    } else {
        r = dra_daemon_run(&o);
    }
    dra_options_release(&o);
    return r;
}
