/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The operator's own metrics on --metrics-bind-address: NVIDIA's gpu_operator_* names that its
 * alerts key on (gpu_operator_reconciliation_status and friends), then gpuplane's
 * gpuplane_operator_* (pass outcomes and durations, per-state readiness, leadership, API writes).
 * Rendered at every scrape from a small struct the daemon updates; the text is the Prometheus
 * exposition format 0.0.4 (checked with promtool in the integration tests).
 */
#include <inttypes.h>
#include <stdio.h>

#include "operator-ctl.h"

const double op_metrics_buckets[8] = {0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};

void op_metrics_observe(struct op_metrics *m, double duration_s)
{
    m->duration_sum_s += duration_s;
    m->duration_count++;
    for (size_t i = 0; i < ARRAY_SIZE(op_metrics_buckets); i++)
        if (duration_s <= op_metrics_buckets[i])
            m->duration_buckets[i]++;
}

static int head(struct strbuf *out, const char *name, const char *type, const char *help)
{
    return strbuf_addf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static int gauge(struct strbuf *out, const char *name, const char *help, double v)
{
    int r = head(out, name, "gauge", help);
    return r < 0 ? r : strbuf_addf(out, "%s %.17g\n", name, v);
}

static int counter(struct strbuf *out, const char *name, const char *help, uint64_t v)
{
    int r = head(out, name, "counter", help);
    return r < 0 ? r : strbuf_addf(out, "%s %" PRIu64 "\n", name, v);
}

static int nvidia_metrics(const struct op_metrics *m, struct strbuf *out)
{
    int r = gauge(out, "gpu_operator_reconciliation_status",
                  "1 if the ClusterPolicy is ready, 0 if not, -1 if there is none",
                  m->reconciliation_status);
    if (r >= 0)
        r = counter(out, "gpu_operator_reconciliation_total",
                    "Reconciliation passes of the ClusterPolicy", m->reconciliation_total);
    if (r >= 0)
        r = counter(out, "gpu_operator_reconciliation_failed_total",
                    "Reconciliation passes that did not end ready", m->reconciliation_failed_total);
    if (r >= 0)
        r = gauge(out, "gpu_operator_reconciliation_last_success_ts_seconds",
                  "When the ClusterPolicy was last reconciled ready (Unix seconds)",
                  (double)m->last_success_s);
    if (r >= 0)
        r = gauge(out, "gpu_operator_reconciliation_has_nfd_labels",
                  "1 if some node carries Node Feature Discovery labels", m->has_nfd_labels);
    if (r >= 0)
        r = gauge(out, "gpu_operator_gpu_nodes_total", "Nodes labelled nvidia.com/gpu.present=true",
                  (double)m->gpu_nodes);
    return r;
}

static int passes(const struct op_metrics *m, struct strbuf *out)
{
    const char *name = "gpuplane_operator_reconcile_passes_total";
    int r = head(out, name, "counter", "Reconcile passes by result");
    if (r >= 0)
        r = strbuf_addf(out,
                        "%s{result=\"ready\"} %" PRIu64 "\n%s{result=\"notReady\"} %" PRIu64
                        "\n%s{result=\"error\"} %" PRIu64 "\n",
                        name, m->passes_ok, name, m->passes_not_ready, name, m->passes_error);
    name = "gpuplane_operator_reconcile_duration_seconds";
    if (r >= 0)
        r = head(out, name, "histogram", "Duration of reconcile passes");
    for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(op_metrics_buckets); i++)
        r = strbuf_addf(out, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name, op_metrics_buckets[i],
                        m->duration_buckets[i]);
    if (r >= 0)
        r = strbuf_addf(out,
                        "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n%s_sum %.9g\n%s_count %" PRIu64 "\n",
                        name, m->duration_count, name, m->duration_sum_s, name, m->duration_count);
    return r;
}

static int states(const struct op_metrics *m, struct strbuf *out)
{
    const char *name = "gpuplane_operator_state_ready";
    int r =
        head(out, name, "gauge", "Per state of the last pass: 1 ready, 0 not ready, -1 disabled");
    for (size_t i = 0; r >= 0 && i < m->n_states; i++)
        r = strbuf_addf(out, "%s{state=\"%s\"} %d\n", name, m->states[i].name, m->states[i].ready);
    return r;
}

static int writes(const struct op_metrics *m, struct strbuf *out)
{
    const char *name = "gpuplane_operator_api_writes_total";
    int r = head(out, name, "counter", "Writes the operator sent to the API server, by verb");
    if (r >= 0)
        r = strbuf_addf(out,
                        "%s{verb=\"create\"} %" PRIu64 "\n%s{verb=\"update\"} %" PRIu64
                        "\n%s{verb=\"patch\"} %" PRIu64 "\n%s{verb=\"delete\"} %" PRIu64 "\n",
                        name, m->writes.create, name, m->writes.update, name, m->writes.patch, name,
                        m->writes.delete_);
    return r;
}

int op_metrics_render(const struct op_metrics *m, struct strbuf *out)
{
    int r = nvidia_metrics(m, out);
    if (r >= 0)
        r = passes(m, out);
    if (r >= 0)
        r = states(m, out);
    if (r >= 0)
        r = counter(out, "gpuplane_operator_node_label_patches_total", "Node label patches written",
                    m->label_patches);
    if (r >= 0)
        r = writes(m, out);
    if (r >= 0)
        r = gauge(out, "gpuplane_operator_leader", "1 while this process holds the leader lease",
                  m->leader);
    if (r >= 0)
        r = gauge(out, "gpuplane_operator_caches_synced",
                  "1 once ClusterPolicies, Nodes and DaemonSets were listed", m->synced);
    return r;
}
