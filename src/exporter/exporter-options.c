/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The options of `gpuplane exporter`, named as dcgm-exporter names them (shared/reference/
 * nvidia-compat.md §3.1, dcgm-exporter's pkg/cmd): each flag with its variable, merged flag >
 * environment > default. The command line is scanned with the Go-style scanner the other daemons
 * use (dp_args_scan), so `-f FILE`, `--collectors=FILE` and `-collectors=FILE` all work, as in Go.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dp-config.h"
#include "exporter-options.h"

/* An interval in milliseconds: at most a day, at least 100 ms for collections. */
#define MS_MAX (24u * 3600u * 1000u)

enum kind {
    K_STRING,
    K_BOOL,
    K_MS,      /* milliseconds, a plain number as dcgm-exporter takes them */
    K_ID_TYPE, /* uid | device-name */
    K_LIST,    /* a Go string slice: char **, NULL-terminated */
};

struct opt {
    struct dp_arg arg;
    const char *env;
    enum kind kind;
    size_t offset;
    const char *value_name;
    const char *help;
    bool dcgm_only; /* accepted for compatibility; means nothing without DCGM's host engine */
};

#define OFF(field) offsetof(struct exporter_options, field)
#define FIELD(o, opt, type) ((type *)(void *)((char *)(o) + (opt)->offset))

static const struct opt OPTS[] = {
    {{"collectors", "f", 'f', DP_ARG_VALUE},
     "DCGM_EXPORTER_COLLECTORS",
     K_STRING,
     OFF(collectors),
     "FILE",
     "the counters file (default: dcgm-exporter's default counters, built in)",
     false},
    {{"address", "a", 'a', DP_ARG_VALUE},
     "DCGM_EXPORTER_LISTEN",
     K_STRING,
     OFF(address),
     "ADDR",
     "where /metrics and /health are served (default :9400)",
     false},
    {{"collect-interval", "c", 'c', DP_ARG_VALUE},
     "DCGM_EXPORTER_INTERVAL",
     K_MS,
     OFF(collect_interval_ms),
     "MS",
     "collection interval in milliseconds (default 30000)",
     false},
    {{"kubernetes", "k", 'k', DP_ARG_BOOL},
     "DCGM_EXPORTER_KUBERNETES",
     K_BOOL,
     OFF(kubernetes),
     NULL,
     "add the pod, namespace and container using each GPU (kubelet pod-resources API)",
     false},
    {{"use-old-namespace", "o", 'o', DP_ARG_BOOL},
     "DCGM_EXPORTER_USE_OLD_NAMESPACE",
     K_BOOL,
     OFF(use_old_namespace),
     NULL,
     "the old label names (uuid, pod_name, pod_namespace, ...)",
     false},
    {{"no-hostname", "n", 'n', DP_ARG_BOOL},
     "DCGM_EXPORTER_NO_HOSTNAME",
     K_BOOL,
     OFF(no_hostname),
     NULL,
     "leave out the hostname label",
     false},
    {{"kubernetes-gpu-id-type", NULL, 0, DP_ARG_VALUE},
     "DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE",
     K_ID_TYPE,
     OFF(gpu_id_type),
     "TYPE",
     "how the kubelet names GPUs: uid or device-name (default uid)",
     false},
    {{"kubernetes-enable-pod-labels", NULL, 0, DP_ARG_BOOL},
     "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS",
     K_BOOL,
     OFF(pod_labels),
     NULL,
     "add the labels of the pod using the GPU (with -k; the pods are watched\n"
     "                          on the API server)",
     false},
    {{"kubernetes-enable-pod-uid", NULL, 0, DP_ARG_BOOL},
     "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID",
     K_BOOL,
     OFF(pod_uid),
     NULL,
     "add the pod_uid label (with -k; the pods are watched on the API server)",
     false},
    {{"kubernetes-pod-label-allowlist-regex", NULL, 0, DP_ARG_LIST},
     "DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX",
     K_LIST,
     OFF(pod_label_allowlist),
     "REGEX",
     "only the pod labels whose names match one of these RE2 patterns\n"
     "                          (unanchored; repeat the flag or separate with commas)",
     false},
    {{"kubernetes-enable-dra", NULL, 0, DP_ARG_BOOL},
     "KUBERNETES_ENABLE_DRA",
     K_BOOL,
     OFF(dra),
     NULL,
     "map DRA claims through NVIDIA's ResourceSlices (dra_* labels)",
     false},
    {{"kubernetes-virtual-gpus", NULL, 0, DP_ARG_BOOL},
     "KUBERNETES_VIRTUAL_GPUS",
     K_BOOL,
     OFF(virtual_gpus),
     NULL,
     "one series per pod sharing a GPU (vgpu label); GPU_UTIL and FB_USED\n"
     "                          also per pod, from its processes (needs the API server)",
     false},
    {{"nvidia-resource-names", NULL, 0, DP_ARG_LIST},
     "NVIDIA_RESOURCE_NAMES",
     K_STRING,
     OFF(resource_names),
     "NAMES",
     "more resource names to map to GPUs (comma list)",
     false},
    {{"pod-resources-kubelet-socket", NULL, 0, DP_ARG_VALUE},
     "DCGM_POD_RESOURCES_KUBELET_SOCKET",
     K_STRING,
     OFF(pod_resources_socket),
     "PATH",
     "the kubelet's pod-resources socket (default " EXPORTER_DEFAULT_POD_RESOURCES ")",
     false},
    {{"xid-count-window-size", "x", 'x', DP_ARG_VALUE},
     "DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE",
     K_MS,
     OFF(xid_window_ms),
     "MS",
     "window of XID counting in milliseconds (default 300000)",
     false},
    {{"clock-events-count-window-size", NULL, 0, DP_ARG_VALUE},
     "DCGM_EXPORTER_CLOCK_EVENTS_COUNT_WINDOW_SIZE",
     K_MS,
     OFF(clock_events_window_ms),
     "MS",
     "window of clock event counting in milliseconds (default 300000)",
     false},
    {{"replace-blanks-in-model-name", NULL, 0, DP_ARG_BOOL},
     "DCGM_EXPORTER_REPLACE_BLANKS_IN_MODEL_NAME",
     K_BOOL,
     OFF(replace_blanks),
     NULL,
     "modelName with '-' for blanks",
     false},
    {{"web-config-file", NULL, 0, DP_ARG_VALUE},
     "DCGM_EXPORTER_WEB_CONFIG_FILE",
     K_STRING,
     OFF(web_config_file),
     "FILE",
     "TLS and basic auth (Prometheus' web config format)",
     false},
    {{"devices", "d", 'd', DP_ARG_VALUE},
     "DCGM_EXPORTER_DEVICES_STR",
     K_STRING,
     OFF(devices),
     "SPEC",
     "which devices: f (GPUs; one in MIG mode as its GPU instances), g (GPUs), i (GPU\n"
     "                          instances); :ids picks GPU indexes (instance ids for i), e.g. "
     "g:0,2-3",
     false},
    {{"remote-hostengine-info", "r", 'r', DP_ARG_VALUE},
     "DCGM_REMOTE_HOSTENGINE_INFO",
     K_STRING,
     OFF(remote_hostengine),
     "HOST:PORT",
     "DCGM's host engine: not used (NVML is read directly)",
     true},
    {{"switch-devices", "s", 's', DP_ARG_VALUE},
     "DCGM_EXPORTER_OTHER_DEVICES_STR",
     K_STRING,
     OFF(switch_devices),
     "SPEC",
     "NVSwitches: not exported",
     true},
    {{"cpu-devices", "p", 'p', DP_ARG_VALUE},
     "DCGM_EXPORTER_CPU_DEVICES_STR",
     K_STRING,
     OFF(cpu_devices),
     "SPEC",
     "CPUs: not exported",
     true},
    {{"hpc-job-mapping-dir", NULL, 0, DP_ARG_VALUE},
     "DCGM_HPC_JOB_MAPPING_DIR",
     K_STRING,
     OFF(hpc_job_mapping_dir),
     "DIR",
     "HPC job mapping: not supported",
     true},
    {{"web-systemd-socket", NULL, 0, DP_ARG_BOOL},
     "DCGM_EXPORTER_SYSTEMD_SOCKET",
     K_BOOL,
     OFF(systemd_socket),
     NULL,
     "systemd socket activation: not supported",
     true},
};

/* ---- values ---- */

static int set_string(char **field, const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return -ENOMEM;
    free(*field);
    *field = copy;
    return 0;
}

static void free_list(char **list)
{
    for (size_t i = 0; list && list[i]; i++)
        free(list[i]);
    free(list);
}

/* A string slice as urfave/cli reads one: value split at every comma, each part trimmed of
 * blanks; empty parts are kept (an empty pattern matches every name, as in Go). Replaces *field. */
static int set_list(char ***field, const char *value)
{
    size_t n = 1, i = 0;
    for (const char *p = value; *p; p++)
        n += *p == ',';
    char **list = calloc(n + 1, sizeof(*list));
    if (!list)
        return -ENOMEM;
    for (const char *p = value;; i++) {
        size_t len = strcspn(p, ",");
        const char *b = p, *e = p + len;
        while (b < e && strchr(" \t\n\v\f\r", *b))
            b++;
        while (e > b && strchr(" \t\n\v\f\r", e[-1]))
            e--;
        if (!(list[i] = strndup(b, (size_t)(e - b)))) {
            free_list(list);
            return -ENOMEM;
        }
        if (!p[len])
            break;
        p += len + 1;
    }
    free_list(*field);
    *field = list;
    return 0;
}

static int parse_ms(const char *s, uint64_t *ret)
{
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || s[0] == '-' || v < 1 || v > MS_MAX)
        return -EINVAL;
    *ret = v;
    return 0;
}

static int apply_text(const struct opt *opt, struct exporter_options *o, const char *value,
                      char *why, size_t why_size)
{
    switch (opt->kind) {
    case K_STRING:
        return set_string(FIELD(o, opt, char *), value);
    case K_LIST:
        return set_list(FIELD(o, opt, char **), value);
    case K_BOOL:
        if (dp_parse_bool(value, FIELD(o, opt, bool)) == 0)
            return 0;
        snprintf(why, why_size, "invalid value \"%s\": want true or false", value);
        return -EINVAL;
    case K_MS:
        if (parse_ms(value, FIELD(o, opt, uint64_t)) == 0)
            return 0;
        snprintf(why, why_size, "invalid value \"%s\": want milliseconds, 1 to %u", value, MS_MAX);
        return -EINVAL;
    case K_ID_TYPE:
        if (strcmp(value, "uid") == 0 || strcmp(value, "device-name") == 0) {
            o->gpu_id_type = value[0] == 'u' ? EXPORTER_ID_UID : EXPORTER_ID_DEVICE_NAME;
            return 0;
        }
        snprintf(why, why_size, "invalid value \"%s\": want uid or device-name", value);
        return -EINVAL;
    }
    return -EINVAL;
}

static int apply(const struct opt *opt, struct exporter_options *o, const char *source,
                 const char *value, struct diag *d)
{
    char why[256] = "";
    int r = apply_text(opt, o, value, why, sizeof(why));
    if (r == -EINVAL)
        return diag_fail(d, r, "%s: %s (see 'gpuplane " EXPORTER_COMMAND " --help')", source, why);
    return r;
}

/* One id or range "a-b" of a --devices list into sel. */
static int devices_range(const char *s, size_t n, struct exporter_devices *sel)
{
    char buf[16];
    char *dash, *end;
    if (n == 0 || n >= sizeof(buf))
        return -EINVAL;
    memcpy(buf, s, n);
    buf[n] = '\0';
    dash = strchr(buf, '-');
    unsigned long lo = strtoul(buf, &end, 10), hi = lo;
    if (end == buf || (dash ? end != dash : *end))
        return -EINVAL;
    if (dash) {
        hi = strtoul(dash + 1, &end, 10);
        if (end == dash + 1 || *end || hi < lo)
            return -EINVAL;
    }
    if (hi >= EXPORTER_DEVICE_IDS_MAX)
        return -EINVAL;
    for (unsigned long i = lo; i <= hi; i++)
        sel->ids[i] = true;
    return 0;
}

int exporter_devices_parse(const char *spec, struct exporter_devices *ret)
{
    struct exporter_devices sel = {.kind = spec[0], .all = spec[1] == '\0'};
    if ((sel.kind != 'f' && sel.kind != 'g' && sel.kind != 'i') || (!sel.all && spec[1] != ':'))
        return -EINVAL;
    for (const char *p = spec + 2; !sel.all;) {
        size_t n = strcspn(p, ",");
        if (devices_range(p, n, &sel) < 0)
            return -EINVAL;
        if (!p[n])
            break;
        p += n + 1;
    }
    *ret = sel;
    return 0;
}

bool exporter_devices_has(const struct exporter_devices *sel, unsigned id)
{
    return sel->all || (id < EXPORTER_DEVICE_IDS_MAX && sel->ids[id]);
}

static int check_devices(const char *s, struct diag *d)
{
    struct exporter_devices sel;
    return exporter_devices_parse(s, &sel) == 0
               ? 0
               : diag_fail(d, -EINVAL,
                           "--devices: invalid value \"%s\": want f, g or i, optionally with "
                           ":id[,id-id...] (see 'gpuplane " EXPORTER_COMMAND " --help')",
                           s);
}

/* ---- sources ---- */

static int apply_env(struct exporter_options *o, struct diag *d)
{
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++) {
        const char *v = getenv(OPTS[i].env);
        if (!v || (!*v && OPTS[i].kind != K_STRING && OPTS[i].kind != K_LIST))
            continue;
        int r = apply(&OPTS[i], o, OPTS[i].env, v, d);
        if (r < 0)
            return r;
    }
    return 0;
}

static int apply_flags(struct exporter_options *o, const struct dp_args *a, struct diag *d)
{
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++) {
        char source[96];
        if (!a->used[i])
            continue;
        snprintf(source, sizeof(source), "%s%s", strlen(a->used[i]) == 1 ? "-" : "--", a->used[i]);
        int r = apply(&OPTS[i], o, source, strbuf_str(&a->value[i]), d);
        if (r < 0)
            return r;
    }
    return 0;
}

/* NODE_NAME names the node (dcgm-exporter's hostname label; the pods watched for their metadata),
 * else the OS host name. */
static int set_hostname(struct exporter_options *o)
{
    const char *node = getenv("NODE_NAME");
    char buf[256];
    if (node && *node && set_string(&o->node_name, node) < 0)
        return -ENOMEM;
    if (!node || !*node) {
        if (gethostname(buf, sizeof(buf)) < 0)
            snprintf(buf, sizeof(buf), "localhost");
        buf[sizeof(buf) - 1] = '\0';
        node = buf;
    }
    return set_string(&o->hostname, node);
}

/* ---- lifecycle ---- */

static void release_owned(struct exporter_options *o)
{
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++)
        if (OPTS[i].kind == K_STRING) {
            char **f = FIELD(o, &OPTS[i], char *);
            free(*f);
            *f = NULL;
        } else if (OPTS[i].kind == K_LIST) {
            char ***f = FIELD(o, &OPTS[i], char **);
            free_list(*f);
            *f = NULL;
        }
    free(o->hostname);
    o->hostname = NULL;
    free(o->node_name);
    o->node_name = NULL;
}

void exporter_options_init(struct exporter_options *o)
{
    *o = (struct exporter_options){
        .collect_interval_ms = 30000,
        .xid_window_ms = 300000,
        .clock_events_window_ms = 300000,
    };
    cli_common_init(&o->common);
}

void exporter_options_release(struct exporter_options *o)
{
    release_owned(o);
    cli_common_release(&o->common);
}

int exporter_options_parse(int argc, char **argv, struct exporter_options *o, struct diag *d)
{
    _cleanup_(dp_args_release) struct dp_args a;
    struct dp_arg table[ARRAY_SIZE(OPTS)];
    dp_args_init(&a);
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++)
        table[i] = OPTS[i].arg;
    int r = set_string(&o->address, EXPORTER_DEFAULT_ADDRESS);
    if (r >= 0)
        r = set_string(&o->pod_resources_socket, EXPORTER_DEFAULT_POD_RESOURCES);
    if (r >= 0)
        r = set_string(&o->devices, "f");
    if (r >= 0)
        r = dp_args_scan(argc, argv, EXPORTER_COMMAND, table, ARRAY_SIZE(table), &o->common, &a, d);
    if (r < 0 || o->common.help)
        return r;
    r = apply_env(o, d);
    if (r >= 0)
        r = apply_flags(o, &a, d);
    if (r >= 0)
        r = check_devices(o->devices, d);
    if (r >= 0)
        r = set_hostname(o);
    return r;
}

void exporter_options_ignored(const struct exporter_options *o, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++) {
        const struct opt *opt = &OPTS[i];
        if (!opt->dcgm_only || len >= n)
            continue;
        /* DCGM-only options are strings or booleans */
        bool set = opt->kind == K_BOOL ? *FIELD(o, opt, bool) : *FIELD(o, opt, char *) != NULL;
        if (!set)
            continue;
        int k = snprintf(buf + len, n - len, "%s--%s", len ? ", " : "", opt->arg.name);
        len += k > 0 ? (size_t)k : 0;
    }
}

/* ---- help ---- */

void exporter_usage(FILE *out)
{
    fputs("Usage: gpuplane " EXPORTER_COMMAND " [OPTIONS]\n"
          "\n"
          "Prometheus metrics of the node's GPUs under dcgm-exporter's names (DCGM_FI_DEV_*),\n"
          "read from NVML directly: /metrics and /health. Precedence: flag > environment >\n"
          "default. Flags take -f FILE, --flag=VALUE or -flag=VALUE; booleans --flag or\n"
          "--flag=false.\n"
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
        /* the variable on a line of its own, so that lines stay within 100 columns */
        fprintf(out, "                          %s\n                          [$%s]\n", opt->help,
                opt->env);
    }
    fputs(CLI_COMMON_HELP, out);
    fputs("\n"
          "Examples:\n"
          "  # a simulated DGX H100 on :9400, collected every 5 s\n"
          "  gpuplane exporter --mock=dgx-h100 -c 5000\n"
          "\n"
          "  # in the DaemonSet: pods on every series, the node's name as hostname\n"
          "  NODE_NAME=$NODE_NAME gpuplane exporter -k\n"
          "\n"
          "See docs/exporter.md.\n",
          out);
}
