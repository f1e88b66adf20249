/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a pass reports: DaemonSet readiness by NVIDIA's rules, the ClusterPolicy status with its
 * Ready and Error conditions merged the way Kubernetes merges conditions, and Events about the
 * ClusterPolicy. Pure functions of their inputs (and of the clock, passed in or read in one place),
 * so a status that did not change compares equal to the live one and is not written.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "operator-ctl.h"

/* ---- DaemonSet readiness ---- */

static int64_t int_at(const json_t *obj, const char *a, const char *b)
{
    return json_integer_value(json_object_get(json_object_get(obj, a), b));
}

bool op_daemonset_ready(const json_t *ds, bool updated_now, char *why, size_t n)
{
    char scratch[8];
    if (!why) {
        why = scratch;
        n = sizeof(scratch);
    }
    why[0] = '\0';
    if (updated_now) {
        snprintf(why, n, "rolled out in this pass");
        return false;
    }
    int64_t generation = int_at(ds, "metadata", "generation");
    int64_t observed = int_at(ds, "status", "observedGeneration");
    int64_t desired = int_at(ds, "status", "desiredNumberScheduled");
    int64_t unavailable = int_at(ds, "status", "numberUnavailable");
    int64_t available = int_at(ds, "status", "numberAvailable");
    int64_t updated = int_at(ds, "status", "updatedNumberScheduled");
    /* Before NVIDIA's first rule: a status the DaemonSet controller has not written yet says
     * "0 desired" without meaning it. */
    if (!json_object_get(json_object_get(ds, "status"), "observedGeneration") && generation > 0) {
        snprintf(why, n, "not yet seen by the DaemonSet controller");
        return false;
    }
    if (desired == 0)
        return true;
    if (unavailable != 0) {
        snprintf(why, n, "%" PRId64 " of %" PRId64 " pods available", available, desired);
        return false;
    }
    if (observed < generation) {
        snprintf(why, n, "rollout of generation %" PRId64 " not yet observed (at %" PRId64 ")",
                 generation, observed);
        return false;
    }
    if (updated != desired || available != desired) {
        snprintf(why, n, "%" PRId64 " of %" PRId64 " pods updated, %" PRId64 " available", updated,
                 desired, available);
        return false;
    }
    return true;
}

/* ---- status ---- */

const char *op_cp_state_name(enum op_cp_state s)
{
    switch (s) {
    case OP_CP_READY:
        return "ready";
    case OP_CP_NOT_READY:
        return "notReady";
    case OP_CP_IGNORED:
        return "ignored";
    }
    return "notReady";
}

void op_time_now(char buf[static 32])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Sets condition type in conds (an array) as meta.SetStatusCondition does. */
static int set_condition(json_t *conds, const char *type, bool status, const char *reason,
                         const char *message, int64_t generation, const char *now)
{
    const char *st = status ? "True" : "False";
    size_t i;
    json_t *c;
    json_array_foreach(conds, i, c)
    {
        if (!json_is_object(c) ||
            strcmp(json_string_value(json_object_get(c, "type")) ?: "", type) != 0)
            continue;
        const char *old = json_string_value(json_object_get(c, "status"));
        int r = 0;
        if (!old || strcmp(old, st) != 0 || !json_object_get(c, "lastTransitionTime"))
            r |= json_object_set_new(c, "lastTransitionTime", json_string(now));
        r |= json_object_set_new(c, "status", json_string(st));
        r |= json_object_set_new(c, "reason", json_string(reason));
        r |= json_object_set_new(c, "message", json_string(message));
        r |= json_object_set_new(c, "observedGeneration", json_integer(generation));
        return r < 0 ? -ENOMEM : 0;
    }
    json_t *fresh = json_pack("{s:s,s:s,s:I,s:s,s:s,s:s}", "type", type, "status", st,
                              "observedGeneration", (json_int_t)generation, "lastTransitionTime",
                              now, "reason", reason, "message", message);
    return json_array_append_new(conds, fresh) < 0 ? -ENOMEM : 0;
}

json_t *op_status_build(const json_t *live_status, const struct op_verdict *v,
                        const char *namespace_, int64_t generation, const char *now)
{
    _cleanup_json_ json_t *st =
        json_is_object(live_status) ? json_deep_copy(live_status) : json_object();
    if (!st)
        return NULL;
    json_t *conds = json_object_get(st, "conditions");
    if (!json_is_array(conds)) {
        conds = json_array();
        if (json_object_set_new(st, "conditions", conds) < 0)
            return NULL;
    }
    bool ready = v->state == OP_CP_READY;
    bool error = v->state == OP_CP_NOT_READY;
    int r = json_object_set_new(st, "state", json_string(op_cp_state_name(v->state)));
    r |= json_object_set_new(st, "namespace", json_string(namespace_));
    if (r < 0)
        return NULL;
    r = set_condition(conds, "Ready", ready, v->ready_reason, v->message, generation, now);
    if (r >= 0)
        r = set_condition(conds, "Error", error, v->error_reason, ready ? "" : v->message,
                          generation, now);
    return r < 0 ? NULL : TAKE_PTR(st);
}

/* ---- events ---- */

json_t *op_event_build(const json_t *cp, const char *type, const char *reason, const char *message,
                       const char *instance)
{
    static uint64_t seq;
    const json_t *meta = json_object_get(cp, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    const char *uid = json_string_value(json_object_get(meta, "uid"));
    const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
    char now[32], event_name[254];
    struct timespec ts;
    if (!name)
        return NULL;
    clock_gettime(CLOCK_REALTIME, &ts);
    /* client-go's "<object>.<nanoseconds in hex>", unique within the process by a sequence */
    uint64_t stamp = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + seq++;
    snprintf(event_name, sizeof(event_name), "%.200s.%" PRIx64, name, stamp);
    op_time_now(now);
    json_t *involved = json_pack("{s:s,s:s,s:s}", "apiVersion", "nvidia.com/v1", "kind",
                                 "ClusterPolicy", "name", name);
    if (involved && uid)
        (void)!json_object_set_new(involved, "uid", json_string(uid));
    if (involved && rv)
        (void)!json_object_set_new(involved, "resourceVersion", json_string(rv));
    return json_pack("{s:s,s:s,s:{s:s,s:s},s:o,s:s,s:s,s:s,s:{s:s},s:s,s:s,s:i,s:s,s:s}",
                     "apiVersion", "v1", "kind", "Event", "metadata", "name", event_name,
                     "namespace", "default", "involvedObject", involved, "reason", reason,
                     "message", message, "type", type, "source", "component", "gpu-operator",
                     "firstTimestamp", now, "lastTimestamp", now, "count", 1, "reportingComponent",
                     "gpu-operator", "reportingInstance", instance);
}
