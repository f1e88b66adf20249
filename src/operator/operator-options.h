/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The options of `gpuplane operator` (the reconciler): NVIDIA's gpu-operator flags under their
 * names (--leader-elect, --leader-elect-namespace, --leader-lease-renew-deadline,
 * --metrics-bind-address, --health-probe-bind-address, and the zap logging flags its Deployment
 * passes), OPERATOR_NAMESPACE, and gpuplane's own additions (--kubeconfig, the lease timings, the
 * requeue delay and the client's request rate), so a test or a small cluster can run with shorter
 * intervals. Go's flag syntax: `--flag value`, `--flag=value`, one dash or two; durations as Go
 * writes them ("10s", "1m30s", "500ms").
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base.h"
#include "cli.h"

#define OP_COMMAND "operator"

struct op_options {
    struct cli_common common;
    char *kubeconfig;             /* --kubeconfig; NULL: $KUBECONFIG, else in-cluster */
    bool leader_elect;            /* --leader-elect */
    char *leader_elect_namespace; /* --leader-elect-namespace; NULL: the operator namespace */
    uint64_t renew_deadline_ms;   /* --leader-lease-renew-deadline; 10 s */
    uint64_t lease_duration_ms;   /* --leader-lease-duration; renew deadline + 5 s, as NVIDIA's */
    uint64_t retry_period_ms;     /* --leader-lease-retry-period; 2 s */
    char *metrics_address;        /* --metrics-bind-address; ":8080"; "0" turns it off */
    char *health_address;         /* --health-probe-bind-address; ":8081"; "0" turns it off */
    char *namespace_;             /* OPERATOR_NAMESPACE, NULL: the service account's */
    uint64_t requeue_after_ms;    /* --requeue-after; 5 s after a notReady pass */
    uint64_t backoff_base_ms;     /* --backoff-base; 100 ms */
    uint64_t backoff_max_ms;      /* --backoff-max; 3 s */
    double qps;                   /* --kube-api-qps; 20 (controller-runtime's) */
    unsigned burst;               /* --kube-api-burst; 30 */
};

void op_options_init(struct op_options *o);
void op_options_release(struct op_options *o);

/*
 * Parses argv (argv[0] is "operator"). -EINVAL with d for a bad flag or value (a usage error);
 * with --help only o->common.help is set.
 */
_wur_ int op_options_parse(int argc, char **argv, struct op_options *o, struct diag *d);

void op_options_usage(FILE *out);

/* A Go duration ("1h2m3.5s", "250ms", "0"): at least 0, at most a day. 0 or -EINVAL. */
_wur_ int op_duration_parse(const char *s, uint64_t *ret_ms);
