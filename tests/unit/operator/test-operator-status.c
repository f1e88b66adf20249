/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a reconcile pass reports: DaemonSet readiness by NVIDIA's rules (a table), the status and
 * its conditions (merged: lastTransitionTime kept while a condition's status stays, foreign
 * conditions kept, an unchanged verdict rebuilds an equal status so nothing is written), Events,
 * the metrics exposition, and the API paths of the kinds the renderer makes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "operator-ctl.h"

static json_t *ds(int64_t gen, const char *status)
{
    char text[512];
    snprintf(text, sizeof(text), "{\"metadata\": {\"name\": \"d\", \"generation\": %lld}%s%s%s}",
             (long long)gen, status ? ", \"status\": {" : "", status ? status : "",
             status ? "}" : "");
    json_t *o = json_loads(text, 0, NULL);
    assert_non_null(o);
    return o;
}

static void test_readiness(void **state)
{
    (void)state;
    static const struct {
        int64_t gen;
        const char *status;
        bool updated_now;
        bool ready;
        const char *why;
    } cases[] = {
        {1, "\"observedGeneration\": 1, \"desiredNumberScheduled\": 0", false, true, ""},
        {1, NULL, false, false, "not yet seen by the DaemonSet controller"},
        {1,
         "\"observedGeneration\": 1, \"desiredNumberScheduled\": 3, \"numberUnavailable\": 1, "
         "\"numberAvailable\": 2, \"updatedNumberScheduled\": 3",
         false, false, "2 of 3 pods available"},
        {2,
         "\"observedGeneration\": 1, \"desiredNumberScheduled\": 3, \"numberAvailable\": 3, "
         "\"updatedNumberScheduled\": 3",
         false, false, "rollout of generation 2 not yet observed (at 1)"},
        {2,
         "\"observedGeneration\": 2, \"desiredNumberScheduled\": 3, \"numberAvailable\": 3, "
         "\"updatedNumberScheduled\": 2",
         false, false, "2 of 3 pods updated, 3 available"},
        {2,
         "\"observedGeneration\": 2, \"desiredNumberScheduled\": 3, \"numberAvailable\": 2, "
         "\"updatedNumberScheduled\": 3",
         false, false, "3 of 3 pods updated, 2 available"},
        {2,
         "\"observedGeneration\": 3, \"desiredNumberScheduled\": 3, \"numberAvailable\": 3, "
         "\"updatedNumberScheduled\": 3",
         false, true, ""},
        {2,
         "\"observedGeneration\": 2, \"desiredNumberScheduled\": 3, \"numberAvailable\": 3, "
         "\"updatedNumberScheduled\": 3",
         true, false, "rolled out in this pass"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *d = ds(cases[i].gen, cases[i].status);
        char why[160];
        bool ready = op_daemonset_ready(d, cases[i].updated_now, why, sizeof(why));
        if (ready != cases[i].ready || strcmp(why, cases[i].why) != 0)
            fail_msg("case %zu: ready %d \"%s\"", i, ready, why);
        assert_int_equal(op_daemonset_ready(d, cases[i].updated_now, NULL, 0), cases[i].ready);
        json_decref(d);
    }
}

static const json_t *condition(const json_t *st, const char *type)
{
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "type")), type) == 0)
            return c;
    }
    fail_msg("no condition %s", type);
    return NULL;
}

static const char *cond_str(const json_t *st, const char *type, const char *key)
{
    return json_string_value(json_object_get(condition(st, type), key));
}

static void test_status(void **state)
{
    (void)state;
    struct op_verdict nr = {.state = OP_CP_NOT_READY,
                            .ready_reason = "Error",
                            .error_reason = "OperandNotReady",
                            .message = "states not ready: [state-driver]"};
    json_t *live =
        json_pack("{s:[{s:s,s:s,s:s,s:s,s:s}]}", "conditions", "type", "Custom", "status", "True",
                  "reason", "Mine", "message", "", "lastTransitionTime", "2020-01-01T00:00:00Z");
    json_t *st = op_status_build(live, &nr, "gpu-operator", 4, "2026-01-01T00:00:00Z");
    assert_non_null(st);
    assert_string_equal(json_string_value(json_object_get(st, "state")), "notReady");
    assert_string_equal(json_string_value(json_object_get(st, "namespace")), "gpu-operator");
    assert_int_equal(json_array_size(json_object_get(st, "conditions")), 3);
    assert_string_equal(cond_str(st, "Custom", "reason"), "Mine");
    assert_string_equal(cond_str(st, "Ready", "status"), "False");
    assert_string_equal(cond_str(st, "Ready", "reason"), "Error");
    assert_string_equal(cond_str(st, "Error", "status"), "True");
    assert_string_equal(cond_str(st, "Error", "reason"), "OperandNotReady");
    assert_string_equal(cond_str(st, "Error", "message"), "states not ready: [state-driver]");
    assert_int_equal(
        json_integer_value(json_object_get(condition(st, "Ready"), "observedGeneration")), 4);
    /* the same verdict later: an equal status (nothing to write) */
    json_t *again = op_status_build(st, &nr, "gpu-operator", 4, "2026-01-01T00:05:00Z");
    assert_true(json_equal(again, st));
    json_decref(again);
    /* ready: transitions stamped now, Error false with reason Ready */
    struct op_verdict ok = {.state = OP_CP_READY,
                            .ready_reason = "Reconciled",
                            .error_reason = "Ready",
                            .message = "all good"};
    json_t *st2 = op_status_build(st, &ok, "gpu-operator", 5, "2026-01-01T00:10:00Z");
    assert_string_equal(json_string_value(json_object_get(st2, "state")), "ready");
    assert_string_equal(cond_str(st2, "Ready", "status"), "True");
    assert_string_equal(cond_str(st2, "Ready", "reason"), "Reconciled");
    assert_string_equal(cond_str(st2, "Ready", "lastTransitionTime"), "2026-01-01T00:10:00Z");
    assert_string_equal(cond_str(st2, "Error", "status"), "False");
    assert_string_equal(cond_str(st2, "Error", "reason"), "Ready");
    assert_string_equal(cond_str(st2, "Error", "message"), "");
    /* a new reason with the same status keeps the transition time */
    struct op_verdict nogpu = ok;
    nogpu.ready_reason = "NoGPUNodes";
    json_t *st3 = op_status_build(st2, &nogpu, "gpu-operator", 5, "2026-01-01T00:20:00Z");
    assert_string_equal(cond_str(st3, "Ready", "reason"), "NoGPUNodes");
    assert_string_equal(cond_str(st3, "Ready", "lastTransitionTime"), "2026-01-01T00:10:00Z");
    assert_false(json_equal(st3, st2));
    /* ignored */
    struct op_verdict ign = {.state = OP_CP_IGNORED,
                             .ready_reason = "Ignored",
                             .error_reason = "Ignored",
                             .message = "another is active"};
    json_t *st4 = op_status_build(NULL, &ign, "ns", 1, "2026-01-01T00:00:00Z");
    assert_string_equal(json_string_value(json_object_get(st4, "state")), "ignored");
    assert_string_equal(cond_str(st4, "Ready", "status"), "False");
    assert_string_equal(cond_str(st4, "Error", "status"), "False");
    json_decref(st4);
    json_decref(st3);
    json_decref(st2);
    json_decref(st);
    json_decref(live);
}

static void test_event(void **state)
{
    (void)state;
    json_t *cp = json_pack("{s:{s:s,s:s,s:s}}", "metadata", "name", "cluster-policy", "uid", "u-1",
                           "resourceVersion", "7");
    json_t *a = op_event_build(cp, "Warning", "OperandNotReady", "msg", "host_1");
    json_t *b = op_event_build(cp, "Normal", "Reconciled", "msg", "host_1");
    assert_non_null(a);
    assert_non_null(b);
    const char *name = json_string_value(json_object_get(json_object_get(a, "metadata"), "name"));
    assert_true(strncmp(name, "cluster-policy.", 15) == 0);
    assert_string_not_equal(
        name, json_string_value(json_object_get(json_object_get(b, "metadata"), "name")));
    json_t *inv = json_object_get(a, "involvedObject");
    assert_string_equal(json_string_value(json_object_get(inv, "kind")), "ClusterPolicy");
    assert_string_equal(json_string_value(json_object_get(inv, "uid")), "u-1");
    assert_string_equal(json_string_value(json_object_get(a, "type")), "Warning");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(a, "metadata"), "namespace")), "default");
    assert_int_equal(json_integer_value(json_object_get(a, "count")), 1);
    json_decref(a);
    json_decref(b);
    json_decref(cp);
}

static void test_metrics(void **state)
{
    (void)state;
    struct op_metrics m = {.reconciliation_status = -1, .gpu_nodes = 2, .leader = true};
    op_metrics_observe(&m, 0.03);
    op_metrics_observe(&m, 4);
    m.n_states = 2;
    snprintf(m.states[0].name, sizeof(m.states[0].name), "state-driver");
    m.states[0].ready = 1;
    snprintf(m.states[1].name, sizeof(m.states[1].name), "state-dra-driver");
    m.states[1].ready = -1;
    m.writes.patch = 3;
    struct strbuf out = STRBUF_INIT;
    assert_int_equal(op_metrics_render(&m, &out), 0);
    const char *t = strbuf_str(&out);
    assert_non_null(strstr(t, "\ngpu_operator_reconciliation_status -1\n"));
    assert_non_null(strstr(t, "\ngpu_operator_gpu_nodes_total 2\n"));
    assert_non_null(strstr(t, "# TYPE gpu_operator_reconciliation_failed_total counter\n"));
    assert_non_null(
        strstr(t, "gpuplane_operator_reconcile_duration_seconds_bucket{le=\"0.01\"} 0\n"));
    assert_non_null(
        strstr(t, "gpuplane_operator_reconcile_duration_seconds_bucket{le=\"0.05\"} 1\n"));
    assert_non_null(
        strstr(t, "gpuplane_operator_reconcile_duration_seconds_bucket{le=\"+Inf\"} 2\n"));
    assert_non_null(strstr(t, "gpuplane_operator_reconcile_duration_seconds_count 2\n"));
    assert_non_null(strstr(t, "gpuplane_operator_state_ready{state=\"state-dra-driver\"} -1\n"));
    assert_non_null(strstr(t, "gpuplane_operator_api_writes_total{verb=\"patch\"} 3\n"));
    assert_non_null(strstr(t, "\ngpuplane_operator_leader 1\n"));
    strbuf_release(&out);
}

static void test_paths(void **state)
{
    (void)state;
    static const struct {
        const char *obj;
        const char *path;
        const char *collection;
    } cases[] = {
        {"{\"apiVersion\": \"apps/v1\", \"kind\": \"DaemonSet\", \"metadata\": {\"name\": \"a\", "
         "\"namespace\": \"gpu-operator\"}}",
         "/apis/apps/v1/namespaces/gpu-operator/daemonsets/a",
         "/apis/apps/v1/namespaces/gpu-operator/daemonsets"},
        {"{\"apiVersion\": \"v1\", \"kind\": \"ServiceAccount\", \"metadata\": {\"name\": \"a\", "
         "\"namespace\": \"x\"}}",
         "/api/v1/namespaces/x/serviceaccounts/a", "/api/v1/namespaces/x/serviceaccounts"},
        {"{\"apiVersion\": \"rbac.authorization.k8s.io/v1\", \"kind\": \"ClusterRole\", "
         "\"metadata\": {\"name\": \"r\"}}",
         "/apis/rbac.authorization.k8s.io/v1/clusterroles/r",
         "/apis/rbac.authorization.k8s.io/v1/clusterroles"},
        {"{\"apiVersion\": \"node.k8s.io/v1\", \"kind\": \"RuntimeClass\", \"metadata\": "
         "{\"name\": "
         "\"nvidia\", \"namespace\": \"ignored\"}}",
         "/apis/node.k8s.io/v1/runtimeclasses/nvidia", "/apis/node.k8s.io/v1/runtimeclasses"},
        {"{\"apiVersion\": \"v1\", \"kind\": \"Namespace\", \"metadata\": {\"name\": \"gpu\"}}",
         "/api/v1/namespaces/gpu", "/api/v1/namespaces"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *o = json_loads(cases[i].obj, 0, NULL);
        char buf[256];
        assert_int_equal(op_object_path(o, false, buf, sizeof(buf), NULL), 0);
        assert_string_equal(buf, cases[i].path);
        assert_int_equal(op_object_path(o, true, buf, sizeof(buf), NULL), 0);
        assert_string_equal(buf, cases[i].collection);
        json_decref(o);
    }
    static const char *const bad[] = {
        "{\"apiVersion\": \"v1\", \"kind\": \"Pod\", \"metadata\": {\"name\": \"a\", "
        "\"namespace\": \"x\"}}",
        "{\"apiVersion\": \"apps/v1\", \"kind\": \"DaemonSet\", \"metadata\": {\"name\": \"a\"}}",
        "{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"A/b\", "
        "\"namespace\": \"x\"}}",
        "{\"apiVersion\": \"extensions/v1beta1\", \"kind\": \"DaemonSet\", \"metadata\": "
        "{\"name\": \"a\", \"namespace\": \"x\"}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *o = json_loads(bad[i], 0, NULL);
        char buf[256];
        struct diag d;
        diag_init(&d);
        assert_int_equal(op_object_path(o, false, buf, sizeof(buf), &d), -EINVAL);
        assert_true(d.msg[0] != '\0');
        json_decref(o);
    }
    json_t *owned = json_loads("{\"metadata\": {\"ownerReferences\": [{\"apiVersion\": "
                               "\"nvidia.com/v1\", \"kind\": \"ClusterPolicy\", \"name\": \"c\", "
                               "\"uid\": \"u\", \"controller\": true}]}}",
                               0, NULL);
    assert_true(op_owned_by_policy(owned));
    json_object_set_new(
        json_array_get(json_object_get(json_object_get(owned, "metadata"), "ownerReferences"), 0),
        "controller", json_false());
    assert_false(op_owned_by_policy(owned));
    json_decref(owned);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_readiness), cmocka_unit_test(test_status),
        cmocka_unit_test(test_event),     cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
