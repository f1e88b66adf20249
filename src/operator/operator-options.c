/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The options of `gpuplane operator` (operator-options.h). Flags are scanned with the Go-style
 * scanner the other daemons use (dp_args_scan), then applied over the defaults; the only variable
 * is NVIDIA's OPERATOR_NAMESPACE. The zap flags of NVIDIA's Deployment are accepted so its
 * manifests start the operator unchanged: --zap-log-level sets the verbosity, the others only
 * change how zap formats lines and are ignored (logs are klog lines).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dp-config.h"
#include "operator-options.h"

#define DAY_MS (24ull * 3600ull * 1000ull)

enum kind {
    K_STRING,
    K_BOOL,
    K_DURATION,
    K_QPS,
    K_BURST,
    K_ZAP_LEVEL,
    K_IGNORED,
};

struct opt {
    struct dp_arg arg;
    enum kind kind;
    size_t offset;
    const char *value_name;
    const char *help;
};

#define OFF(field) offsetof(struct op_options, field)
#define FIELD(o, opt, type) ((type *)(void *)((char *)(o) + (opt)->offset))

static const struct opt OPTS[] = {
    {{"kubeconfig", NULL, 0, DP_ARG_VALUE},
     K_STRING,
     OFF(kubeconfig),
     "FILE",
     "the kubeconfig (default $KUBECONFIG, else the pod's service account)"},
    {{"leader-elect", NULL, 0, DP_ARG_BOOL},
     K_BOOL,
     OFF(leader_elect),
     NULL,
     "elect a leader (Lease 53822513.nvidia.com); only the leader reconciles"},
    {{"leader-elect-namespace", NULL, 0, DP_ARG_VALUE},
     K_STRING,
     OFF(leader_elect_namespace),
     "NS",
     "the Lease's namespace (default the operator namespace)"},
    {{"leader-lease-renew-deadline", NULL, 0, DP_ARG_VALUE},
     K_DURATION,
     OFF(renew_deadline_ms),
     "DURATION",
     "a leader that cannot renew for this long stops (default 10s)"},
    {{"leader-lease-duration", NULL, 0, DP_ARG_VALUE},
     K_DURATION,
     OFF(lease_duration_ms),
     "DURATION",
     "how long a lease lasts without renewal (default renew deadline + 5s)"},
    {{"leader-lease-retry-period", NULL, 0, DP_ARG_VALUE},
     K_DURATION,
     OFF(retry_period_ms),
     "DURATION",
     "between two tries to acquire or renew the lease (default 2s)"},
    {{"metrics-bind-address", NULL, 0, DP_ARG_VALUE},
     K_STRING,
     OFF(metrics_address),
     "ADDR",
     "where /metrics is served (default :8080; 0 turns it off)"},
    {{"health-probe-bind-address", NULL, 0, DP_ARG_VALUE},
     K_STRING,
     OFF(health_address),
     "ADDR",
     "where /healthz and /readyz are served (default :8081; 0 turns it off)"},
    {{"requeue-after", NULL, 0, DP_ARG_VALUE},
     K_DURATION,
     OFF(requeue_after_ms),
     "DURATION",
     "the next pass after one that left a state not ready (default 5s)"},
    {{"backoff-base", NULL, 0, DP_ARG_VALUE},
     K_DURATION,
     OFF(backoff_base_ms),
     "DURATION",
     "the first delay after a failed pass, doubling per failure (default 100ms)"},
    {{"backoff-max", NULL, 0, DP_ARG_VALUE},
     K_DURATION,
     OFF(backoff_max_ms),
     "DURATION",
     "the longest delay after failed passes (default 3s)"},
    {{"kube-api-qps", NULL, 0, DP_ARG_VALUE},
     K_QPS,
     OFF(qps),
     "N",
     "sustained API requests per second (default 20)"},
    {{"kube-api-burst", NULL, 0, DP_ARG_VALUE},
     K_BURST,
     OFF(burst),
     "N",
     "API requests allowed in a burst (default 30)"},
    {{"zap-log-level", NULL, 0, DP_ARG_VALUE},
     K_ZAP_LEVEL,
     0,
     "LEVEL",
     "NVIDIA's logging flag: debug (-v=1), info, error, or a number (-v=N)"},
    {{"zap-devel", NULL, 0, DP_ARG_BOOL}, K_IGNORED, 0, NULL, "accepted, ignored (zap's format)"},
    {{"zap-encoder", NULL, 0, DP_ARG_VALUE}, K_IGNORED, 0, "ENC", "accepted, ignored"},
    {{"zap-stacktrace-level", NULL, 0, DP_ARG_VALUE}, K_IGNORED, 0, "LEVEL", "accepted, ignored"},
    {{"zap-time-encoding", NULL, 0, DP_ARG_VALUE}, K_IGNORED, 0, "ENC", "accepted, ignored"},
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

/* One unit of a Go duration, in nanoseconds. */
static double unit_ns(const char *s, size_t n)
{
    static const struct {
        const char *name;
        double ns;
    } units[] = {
        {"ns", 1},   {"us", 1e3}, {"\xc2\xb5s", 1e3}, {"\xce\xbcs", 1e3},
        {"ms", 1e6}, {"s", 1e9},  {"m", 60e9},        {"h", 3600e9},
    };
    for (size_t i = 0; i < ARRAY_SIZE(units); i++)
        if (strlen(units[i].name) == n && memcmp(units[i].name, s, n) == 0)
            return units[i].ns;
    return 0;
}

int op_duration_parse(const char *s, uint64_t *ret_ms)
{
    double total_ns = 0;
    const char *p = s;
    if (strcmp(s, "0") == 0) {
        *ret_ms = 0;
        return 0;
    }
    if (*p == '+')
        p++;
    if (!*p)
        return -EINVAL;
    while (*p) {
        const char *num = p;
        bool digit = false;
        while ((*p >= '0' && *p <= '9') || *p == '.') {
            digit |= *p != '.';
            p++;
        }
        if (!digit || p - num > 30)
            return -EINVAL;
        char buf[32];
        memcpy(buf, num, (size_t)(p - num));
        buf[p - num] = '\0';
        if (strchr(buf, '.') != strrchr(buf, '.'))
            return -EINVAL;
        const char *unit = p;
        while (*p && !(*p >= '0' && *p <= '9') && *p != '.')
            p++;
        double ns = unit_ns(unit, (size_t)(p - unit));
        if (ns == 0)
            return -EINVAL;
        total_ns += strtod(buf, NULL) * ns;
        if (total_ns > (double)DAY_MS * 1e6)
            return -EINVAL;
    }
    *ret_ms = (uint64_t)(total_ns / 1e6 + 0.5);
    return 0;
}

static int zap_level(const char *v, int *ret)
{
    if (strcmp(v, "debug") == 0)
        *ret = 1;
    else if (strcmp(v, "info") == 0 || strcmp(v, "warn") == 0 || strcmp(v, "error") == 0 ||
             strcmp(v, "dpanic") == 0 || strcmp(v, "panic") == 0 || strcmp(v, "fatal") == 0)
        *ret = 0;
    else {
        char *end = NULL;
        long n = strtol(v, &end, 10);
        if (!*v || *end || n < 0 || n > 10)
            return -EINVAL;
        *ret = (int)n;
    }
    return 0;
}

static int apply_text(const struct opt *opt, struct op_options *o, const char *value, char *why,
                      size_t why_size)
{
    char *end = NULL;
    switch (opt->kind) {
    case K_STRING:
        return set_string(FIELD(o, opt, char *), value);
    case K_BOOL:
        if (dp_parse_bool(value, FIELD(o, opt, bool)) == 0)
            return 0;
        snprintf(why, why_size, "invalid value \"%s\": want true or false", value);
        return -EINVAL;
    case K_DURATION:
        if (op_duration_parse(value, FIELD(o, opt, uint64_t)) == 0)
            return 0;
        snprintf(why, why_size, "invalid value \"%s\": want a duration such as 10s or 500ms",
                 value);
        return -EINVAL;
    case K_QPS: {
        double v = strtod(value, &end);
        if (*value && !*end && v > 0 && v <= 10000) {
            o->qps = v;
            return 0;
        }
        snprintf(why, why_size, "invalid value \"%s\": want a number above 0", value);
        return -EINVAL;
    }
    case K_BURST: {
        long v = strtol(value, &end, 10);
        if (*value && !*end && v >= 1 && v <= 10000) {
            o->burst = (unsigned)v;
            return 0;
        }
        snprintf(why, why_size, "invalid value \"%s\": want 1 to 10000", value);
        return -EINVAL;
    }
    case K_ZAP_LEVEL:
        if (zap_level(value, &o->common.verbosity) == 0)
            return 0;
        snprintf(why, why_size, "invalid value \"%s\": want debug, info, error or 0 to 10", value);
        return -EINVAL;
    case K_IGNORED:
        return 0;
    }
    return -EINVAL;
}

/* ---- checks ---- */

static int check(struct op_options *o, struct diag *d)
{
    if (o->lease_duration_ms == 0)
        o->lease_duration_ms = o->renew_deadline_ms + 5000;
    if (o->retry_period_ms == 0 || o->renew_deadline_ms == 0)
        return diag_fail(d, -EINVAL,
                         "the lease's renew deadline and retry period must be above 0 (see "
                         "'gpuplane " OP_COMMAND " --help')");
    if (o->lease_duration_ms <= o->renew_deadline_ms)
        return diag_fail(d, -EINVAL,
                         "--leader-lease-duration (%llu ms) must be longer than "
                         "--leader-lease-renew-deadline (%llu ms)",
                         (unsigned long long)o->lease_duration_ms,
                         (unsigned long long)o->renew_deadline_ms);
    if (o->renew_deadline_ms <= o->retry_period_ms)
        return diag_fail(d, -EINVAL,
                         "--leader-lease-renew-deadline (%llu ms) must be longer than "
                         "--leader-lease-retry-period (%llu ms)",
                         (unsigned long long)o->renew_deadline_ms,
                         (unsigned long long)o->retry_period_ms);
    if (o->backoff_base_ms == 0 || o->backoff_max_ms < o->backoff_base_ms)
        return diag_fail(d, -EINVAL, "--backoff-max must be at least --backoff-base, above 0");
    if (o->requeue_after_ms == 0)
        return diag_fail(d, -EINVAL, "--requeue-after must be above 0");
    return 0;
}

/* ---- lifecycle ---- */

void op_options_init(struct op_options *o)
{
    *o = (struct op_options){
        .renew_deadline_ms = 10000,
        .retry_period_ms = 2000,
        .requeue_after_ms = 5000,
        .backoff_base_ms = 100,
        .backoff_max_ms = 3000,
        .qps = 20,
        .burst = 30,
    };
    cli_common_init(&o->common);
}

void op_options_release(struct op_options *o)
{
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++)
        if (OPTS[i].kind == K_STRING) {
            char **f = FIELD(o, &OPTS[i], char *);
            free(*f);
            *f = NULL;
        }
    free(o->namespace_);
    o->namespace_ = NULL;
    cli_common_release(&o->common);
}

int op_options_parse(int argc, char **argv, struct op_options *o, struct diag *d)
{
    _cleanup_(dp_args_release) struct dp_args a;
    struct dp_arg table[ARRAY_SIZE(OPTS)];
    dp_args_init(&a);
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++)
        table[i] = OPTS[i].arg;
    int r = set_string(&o->metrics_address, ":8080");
    if (r >= 0)
        r = set_string(&o->health_address, ":8081");
    if (r >= 0)
        r = dp_args_scan(argc, argv, OP_COMMAND, table, ARRAY_SIZE(table), &o->common, &a, d);
    if (r < 0 || o->common.help)
        return r;
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++) {
        char why[256] = "";
        if (!a.used[i])
            continue;
        r = apply_text(&OPTS[i], o, strbuf_str(&a.value[i]), why, sizeof(why));
        if (r == -EINVAL)
            return diag_fail(d, r, "--%s: %s (see 'gpuplane " OP_COMMAND " --help')", a.used[i],
                             why);
        if (r < 0)
            return r;
    }
    const char *ns = getenv("OPERATOR_NAMESPACE");
    if (ns && *ns && set_string(&o->namespace_, ns) < 0)
        return -ENOMEM;
    return check(o, d);
}

/* ---- help ---- */

void op_options_usage(FILE *out)
{
    fputs("Usage: gpuplane " OP_COMMAND " [OPTIONS]\n"
          "       gpuplane " OP_COMMAND " render -f CLUSTERPOLICY [-n NAMESPACE] [-o yaml|json]\n"
          "\n"
          "The GPU operator: reconciles NVIDIA's ClusterPolicy (nvidia.com/v1) into ordered\n"
          "states of DaemonSets in the operator namespace, labels GPU nodes, and reports the\n"
          "ClusterPolicy's status. Flags take --flag=VALUE or -flag VALUE; booleans --flag\n"
          "or --flag=false; durations as Go writes them (10s, 500ms).\n"
          "\n"
          "Environment:\n"
          "  OPERATOR_NAMESPACE      where the operands go (default the service account's\n"
          "                          namespace)\n"
          "  DRIVER_IMAGE, ..., GPUPLANE_IMAGE\n"
          "                          images of components the ClusterPolicy names none for\n"
          "\n"
          "Options:\n",
          out);
    for (size_t i = 0; i < ARRAY_SIZE(OPTS); i++) {
        const struct opt *opt = &OPTS[i];
        fprintf(out, "      --%s%s%s\n", opt->arg.name, opt->value_name ? "=" : "",
                opt->value_name ? opt->value_name : "");
        fprintf(out, "                          %s\n", opt->help);
    }
    fputs("  -v, --v=N               log verbosity (klog levels; default 0)\n"
          "      --log-format=FMT    text (klog) or json\n"
          "  -h, --help              show this help\n"
          "\n"
          "See docs/operator.md.\n",
          out);
}
