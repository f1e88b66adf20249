/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane operator`: the reconciler. It keeps three collections in view with watches (the
 * ClusterPolicies, the Nodes, the DaemonSets of the operator namespace), turns their events into
 * two keys of a work queue ("policy": one reconcile pass; "labels": one node labelling pass) and
 * runs one pass at a time on the event loop:
 *
 *  - policy: the active ClusterPolicy (the oldest; the others get status "ignored") is read into
 *    a policy, rendered, and its states applied in order (objects of disabled states deleted);
 *    DaemonSet readiness decides each state, the states decide the ClusterPolicy's status, which
 *    is written only when it changed, with an Event for every state and policy transition. A pass
 *    that left something not ready comes back after --requeue-after; a failed one after its
 *    back-off; a ready one only when something changes.
 *  - labels: every cached node's labels are brought to the rules of operator-nodes.h with one
 *    merge patch per node that needs one; without a ClusterPolicy the labels the operator added
 *    are taken back.
 *
 * With --leader-elect only the holder of the Lease reconciles and labels; every replica keeps its
 * caches warm and serves /healthz, /readyz (ready once every collection was listed) and /metrics.
 * A leader that cannot renew in time exits with "leader election lost", as controller-runtime
 * does, so the kubelet restarts it as a candidate. SIGTERM releases a held lease first, so a
 * successor need not wait for it to expire.
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "ev.h"
#include "http.h"
#include "kube.h"
#include "operator-ctl.h"
#include "operator-lease.h"
#include "operator-nodes.h"
#include "operator-options.h"
#include "operator-policy.h"
#include "operator-queue.h"
#include "operator-render.h"
#include "operator.h"

#define KEY_POLICY "policy"
#define KEY_LABELS "labels"
#define STATES_MAX OP_METRICS_STATES_MAX
#define LABEL_WINDOW 8       /* node patches in flight at once */
#define RELEASE_WAIT_MS 3000 /* how long SIGTERM waits for the lease release */
#define SYNC_LATE_MS 15000   /* not synced after this long (and every this long): say why */

enum state_result {
    ST_UNKNOWN = -2,
    ST_DISABLED = -1,
    ST_NOT_READY = 0,
    ST_READY = 1,
};

struct daemon;

/* One reconcile pass of the active ClusterPolicy. */
struct pass {
    struct daemon *dm;
    json_t *cp; /* the active ClusterPolicy as cached when the pass began */
    struct op_policy *policy;
    struct op_rendered rendered;
    bool have_rendered;
    size_t si, oi; /* the state and object being applied */
    enum state_result result[STATES_MAX];
    char detail[STATES_MAX][200];
    bool error;
    bool backoff; /* an API error: the pass comes back after its back-off */
    char message[1024];
    json_t *ignored; /* names of the other ClusterPolicies, to mark ignored */
    size_t ii;
    struct op_verdict verdict;
    bool requeue;
    bool gpu_nodes, has_nfd; /* as rendered */
};

/* One labelling pass. */
struct label_pass {
    struct daemon *dm;
    json_t *patches; /* node name -> merge patch */
    void *iter;      /* the next patch to send */
    unsigned in_flight;
    unsigned failed;
};

struct daemon {
    struct op_options *o;
    struct ev_loop *loop;
    struct kube_config *kcfg;
    struct kube_client *kube;       /* the reconciler's requests */
    struct kube_client *lease_kube; /* the elector's: never behind the reconciler's rate limit */
    struct op_elector *elector;
    char identity[OP_LEASE_HOLDER_MAX];
    const char *ns;
    char ds_path[512];

    struct kube_watch *w_cp, *w_nodes, *w_ds;
    bool synced_cp, synced_nodes, synced_ds, synced;
    json_t *cps;   /* name -> ClusterPolicy */
    json_t *nodes; /* name -> {metadata: {name, labels, annotations (ours)}} */

    /* what the policy pass reads of the nodes, to tell when a node event matters to it */
    bool gpu_nodes, has_nfd;
    char os_tag[128];

    struct op_queue *queue;
    struct ev_timer *queue_timer;
    bool leader;
    bool busy;
    char busy_key[OP_QUEUE_KEY_MAX];
    uint64_t pass_started_ms;
    struct pass *pass;
    struct label_pass *lpass;

    /* transitions, for Events */
    char active_uid[128];
    enum state_result last[STATES_MAX];
    bool have_verdict;
    enum op_cp_state last_state;
    char last_reason[64];

    struct http_server *metrics_srv, *health_srv;
    struct op_metrics metrics;
    struct op_inflight inflight; /* contexts of requests in flight, freed at the end */

    struct ev_signal *sig_term, *sig_int, *sig_hup;
    struct ev_timer *trim_timer;
    struct ev_timer *sync_timer;
    struct ev_timer *release_timer;
    bool stopping;
};

static void kick(struct daemon *dm);
static void policy_next(struct pass *p);
static bool scan_nodes(struct daemon *dm);
static void trim_soon(struct daemon *dm);

static const char *env_get(const char *name)
{
    return getenv(name);
}

static const char *meta_str(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), key));
}

static void enqueue(struct daemon *dm, const char *key)
{
    if (op_queue_add(dm->queue, key, ev_loop_now_ms(dm->loop)) < 0)
        log_error("cannot queue a pass", "key", key);
    kick(dm);
}

/* ---- the active ClusterPolicy ---- */

/* The oldest ClusterPolicy (creationTimestamp, then name), as NVIDIA picks it; NULL if none. RFC
 * 3339 times in UTC compare as strings. */
static json_t *active_policy(const struct daemon *dm)
{
    json_t *best = NULL;
    const char *name;
    json_t *cp;
    json_object_foreach(dm->cps, name, cp)
    {
        if (meta_str(cp, "deletionTimestamp"))
            continue;
        if (!best) {
            best = cp;
            continue;
        }
        const char *a = meta_str(cp, "creationTimestamp") ?: "";
        const char *b = meta_str(best, "creationTimestamp") ?: "";
        int c = strcmp(a, b);
        if (c < 0 || (c == 0 && strcmp(name, meta_str(best, "name")) < 0))
            best = cp;
    }
    return best;
}

/* ---- status and events ---- */

struct event_call {
    struct op_inflight link;
};

static void free_link(struct op_inflight *link)
{
    free(link);
}

static void on_event_written(const struct kube_response *res, void *userdata)
{
    struct event_call *call = userdata;
    if (res->status != 201 && res->status != 200)
        log_debug(1, "event not recorded", "status", LOG_INT(res->status), "message", res->message);
    op_inflight_remove(&call->link);
    free(call);
}

/* Records an Event about cp; best effort, nothing waits for it. */
static void record_event(struct daemon *dm, const json_t *cp, bool warning, const char *reason,
                         const char *message)
{
    char path[256], instance[129];
    snprintf(instance, sizeof(instance), "%.128s", dm->identity);
    _cleanup_json_ json_t *ev =
        op_event_build(cp, warning ? "Warning" : "Normal", reason, message, instance);
    struct event_call *call = calloc(1, sizeof(*call));
    if (!ev || !call || kube_path(path, sizeof(path), "v1", "events", "default", NULL, NULL) < 0 ||
        kube_create(dm->kube, path, ev, on_event_written, call) < 0) {
        free(call);
        return;
    }
    op_inflight_add(&dm->inflight, &call->link, free_link);
    dm->metrics.writes.create++;
    log_info("event", "clusterpolicy", meta_str(cp, "name"), "type", warning ? "Warning" : "Normal",
             "reason", reason, "message", message);
}

struct status_call {
    struct op_inflight link;
    struct daemon *dm;
    struct op_verdict verdict;
    int64_t generation;
    bool wrote;
    void (*done)(struct daemon *dm, bool ok, bool wrote, void *userdata);
    void *userdata;
};

static int on_status_mutate(json_t *obj, void *userdata)
{
    struct status_call *sc = userdata;
    char now[32];
    op_time_now(now);
    int64_t generation =
        json_integer_value(json_object_get(json_object_get(obj, "metadata"), "generation"));
    const json_t *live = json_object_get(obj, "status");
    _cleanup_json_ json_t *st = op_status_build(live, &sc->verdict, sc->dm->ns, generation, now);
    if (!st)
        return -ENOMEM;
    if (json_equal(st, live))
        return 1;
    if (json_object_set(obj, "status", st) < 0)
        return -ENOMEM;
    sc->wrote = true;
    sc->dm->metrics.writes.update++;
    return 0;
}

static void on_status_written(const struct kube_response *res, void *userdata)
{
    struct status_call *sc = userdata;
    bool ok = res->status == 200;
    if (!ok && res->status != 404)
        log_error("cannot write the ClusterPolicy status", "status", LOG_INT(res->status), "reason",
                  res->reason, "message", res->message);
    op_inflight_remove(&sc->link);
    sc->done(sc->dm, ok || res->status == 404, sc->wrote && ok, sc->userdata);
    free(sc);
}

/* Brings cp's status to verdict when the cached one differs (read-modify-write of the status
 * subresource, retried on conflict); done is called in any case, never from inside. Returns false
 * when nothing needs writing (done is not called). */
static bool write_status(struct daemon *dm, const json_t *cp, const struct op_verdict *v,
                         void (*done)(struct daemon *, bool, bool, void *), void *userdata)
{
    char now[32], path[512];
    op_time_now(now);
    int64_t generation =
        json_integer_value(json_object_get(json_object_get(cp, "metadata"), "generation"));
    const json_t *live = json_object_get(cp, "status");
    _cleanup_json_ json_t *st = op_status_build(live, v, dm->ns, generation, now);
    if (st && json_equal(st, live))
        return false;
    struct status_call *sc = calloc(1, sizeof(*sc));
    if (!sc)
        return false;
    *sc = (struct status_call){.dm = dm, .verdict = *v, .done = done, .userdata = userdata};
    int r = kube_path(path, sizeof(path), "nvidia.com/v1", "clusterpolicies", NULL,
                      meta_str(cp, "name"), NULL);
    size_t len = strlen(path);
    if (r >= 0 && len + 8 < sizeof(path))
        snprintf(path + len, sizeof(path) - len, "/status");
    if (r >= 0)
        r = kube_modify(dm->kube, path, on_status_mutate, on_status_written, sc);
    if (r < 0) {
        log_error("cannot write the ClusterPolicy status", "error", strerror(-r));
        free(sc);
        return false;
    }
    op_inflight_add(&dm->inflight, &sc->link, free_link);
    return true;
}

/* ---- the end of a pass ---- */

static void pass_end(struct daemon *dm, bool failed, bool requeue)
{
    uint64_t now = ev_loop_now_ms(dm->loop);
    char key[OP_QUEUE_KEY_MAX];
    memcpy(key, dm->busy_key, sizeof(key));
    if (failed) {
        uint64_t delay = 0;
        (void)!op_queue_add_rate_limited(dm->queue, key, now, &delay);
        log_info("pass failed; retrying", "pass", key, "after_ms", LOG_INT(delay), "failures",
                 LOG_INT(op_queue_failures(dm->queue, key)));
    } else {
        op_queue_forget(dm->queue, key);
        if (requeue)
            (void)!op_queue_add_after(dm->queue, key, now, dm->o->requeue_after_ms);
        else
            op_queue_clear_delay(dm->queue, key);
    }
    op_queue_done(dm->queue, key, now);
    dm->busy = false;
    kick(dm);
}

/* ---- the policy pass ---- */

static void pass_free(struct pass *p)
{
    if (!p)
        return;
    json_decref(p->cp);
    json_decref(p->ignored);
    op_policy_free(p->policy);
    if (p->have_rendered)
        op_rendered_release(&p->rendered);
    free(p);
}

static void policy_finish(struct pass *p)
{
    struct daemon *dm = p->dm;
    bool failed = p->backoff;
    bool requeue = p->requeue;
    double secs = (double)(ev_loop_now_ms(dm->loop) - dm->pass_started_ms) / 1000.0;
    op_metrics_observe(&dm->metrics, secs);
    log_info("reconcile pass", "clusterpolicy", p->cp ? meta_str(p->cp, "name") : "<none>", "state",
             p->cp ? op_cp_state_name(p->verdict.state) : "-", "reason",
             p->cp ? p->verdict.ready_reason : "-", "duration_ms",
             LOG_INT(ev_loop_now_ms(dm->loop) - dm->pass_started_ms));
    dm->pass = NULL;
    pass_free(p);
    if (json_object_size(dm->nodes) > 100)
        trim_soon(dm);
    pass_end(dm, failed, requeue);
}

static void on_active_status(struct daemon *dm, bool ok, bool wrote, void *userdata)
{
    struct pass *p = userdata;
    if (!ok) {
        p->backoff = true; /* the status could not be written: try again with back-off */
        p->requeue = false;
    }
    policy_finish(p);
}

/* Events for the transitions of this pass, then the status. */
static void policy_report(struct pass *p)
{
    struct daemon *dm = p->dm;
    const char *uid = meta_str(p->cp, "uid") ?: "";
    if (strcmp(uid, dm->active_uid) != 0) {
        /* another ClusterPolicy (or the first pass): what was known is about another object */
        snprintf(dm->active_uid, sizeof(dm->active_uid), "%s", uid);
        for (size_t i = 0; i < STATES_MAX; i++)
            dm->last[i] = ST_UNKNOWN;
        const json_t *conds = json_object_get(json_object_get(p->cp, "status"), "conditions");
        const char *state =
            json_string_value(json_object_get(json_object_get(p->cp, "status"), "state"));
        dm->have_verdict = state != NULL;
        if (state)
            dm->last_state = strcmp(state, "ready") == 0     ? OP_CP_READY
                             : strcmp(state, "ignored") == 0 ? OP_CP_IGNORED
                                                             : OP_CP_NOT_READY;
        const char *want = dm->last_state == OP_CP_READY ? "Ready" : "Error";
        dm->last_reason[0] = '\0';
        size_t i;
        const json_t *c;
        json_array_foreach(conds, i, c)
        {
            const char *type = json_string_value(json_object_get(c, "type"));
            const char *reason = json_string_value(json_object_get(c, "reason"));
            if (type && reason && strcmp(type, want) == 0)
                snprintf(dm->last_reason, sizeof(dm->last_reason), "%s", reason);
        }
    }
    /* The reason that tells the transition: Ready's when ready, Error's otherwise. */
    const struct op_verdict *v = &p->verdict;
    const char *reason = v->state == OP_CP_READY ? v->ready_reason : v->error_reason;
    if (!dm->have_verdict || dm->last_state != v->state || strcmp(dm->last_reason, reason) != 0) {
        record_event(dm, p->cp, v->state != OP_CP_READY, reason, v->message);
    }
    dm->have_verdict = true;
    dm->last_state = v->state;
    snprintf(dm->last_reason, sizeof(dm->last_reason), "%s", reason);

    for (size_t i = 0; p->have_rendered && i < p->rendered.n && i < STATES_MAX; i++) {
        enum state_result now = p->result[i], before = dm->last[i];
        if (now == ST_UNKNOWN)
            continue; /* not reached (an error stopped the pass) */
        dm->last[i] = now;
        if (before == ST_UNKNOWN || before == now)
            continue;
        static const char *const names[] = {"disabled", "notReady", "ready"};
        char msg[400];
        snprintf(msg, sizeof(msg), "%s: %s (was %s)%s%s", p->rendered.states[i].name,
                 names[now + 1], names[before + 1], p->detail[i][0] ? ": " : "", p->detail[i]);
        record_event(dm, p->cp, now == ST_NOT_READY,
                     now == ST_READY      ? "StateReady"
                     : now == ST_DISABLED ? "StateDisabled"
                                          : "StateNotReady",
                     msg);
    }
    if (!write_status(dm, p->cp, v, on_active_status, p))
        policy_finish(p);
}

/* A pass that cannot go on: an API error (backoff) is retried after its back-off, a policy that
 * cannot be read or rendered waits for a change of the ClusterPolicy. */
static void policy_fail(struct pass *p, bool backoff, const char *fmt, ...) _printf_(3, 4);
static void policy_fail(struct pass *p, bool backoff, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->message, sizeof(p->message), fmt, ap);
    va_end(ap);
    p->error = true;
    p->backoff = backoff;
    p->verdict = (struct op_verdict){
        .state = OP_CP_NOT_READY, .ready_reason = "Error", .error_reason = "ReconcileFailed"};
    snprintf(p->verdict.message, sizeof(p->verdict.message), "%s", p->message);
    log_error("reconcile failed", "clusterpolicy", meta_str(p->cp, "name"), "error", p->message);
    p->dm->metrics.reconciliation_status = 0;
    p->dm->metrics.reconciliation_failed_total++;
    p->dm->metrics.passes_error++;
    policy_report(p);
}

static void update_state_metrics(struct daemon *dm, const struct pass *p)
{
    dm->metrics.n_states = 0;
    for (size_t i = 0; i < p->rendered.n && i < STATES_MAX; i++) {
        if (p->result[i] == ST_UNKNOWN)
            continue;
        size_t k = dm->metrics.n_states++;
        snprintf(dm->metrics.states[k].name, sizeof(dm->metrics.states[k].name), "%s",
                 p->rendered.states[i].name);
        dm->metrics.states[k].ready = p->result[i];
    }
}

/* Every state was walked: the verdict. */
static void policy_conclude(struct pass *p)
{
    struct daemon *dm = p->dm;
    _cleanup_strbuf_ struct strbuf names = STRBUF_INIT;
    _cleanup_strbuf_ struct strbuf details = STRBUF_INIT;
    size_t not_ready = 0;
    for (size_t i = 0; i < p->rendered.n && i < STATES_MAX; i++) {
        if (p->result[i] != ST_NOT_READY)
            continue;
        (void)!strbuf_addf(&names, "%s%s", not_ready ? " " : "", p->rendered.states[i].name);
        (void)!strbuf_addf(&details, "; %s: %s", p->rendered.states[i].name, p->detail[i]);
        not_ready++;
    }
    update_state_metrics(dm, p);
    struct op_verdict *v = &p->verdict;
    dm->metrics.reconciliation_total++;
    if (not_ready) {
        *v = (struct op_verdict){
            .state = OP_CP_NOT_READY, .ready_reason = "Error", .error_reason = "OperandNotReady"};
        snprintf(v->message, sizeof(v->message),
                 "ClusterPolicy is not ready; states not ready: [%s]%s", strbuf_str(&names),
                 strbuf_str(&details));
        p->requeue = true;
        dm->metrics.reconciliation_status = 0;
        dm->metrics.reconciliation_failed_total++;
        dm->metrics.passes_not_ready++;
    } else {
        *v = (struct op_verdict){.state = OP_CP_READY, .error_reason = "Ready"};
        if (!p->has_nfd) {
            v->ready_reason = "NFDLabelsMissing";
            snprintf(v->message, sizeof(v->message),
                     "ClusterPolicy is ready, but no node has Node Feature Discovery labels "
                     "(feature.node.kubernetes.io/*): GPU nodes cannot be detected");
        } else if (!p->gpu_nodes) {
            v->ready_reason = "NoGPUNodes";
            snprintf(v->message, sizeof(v->message),
                     "ClusterPolicy is ready; no node has nvidia.com/gpu.present=true, so no "
                     "operand is deployed");
        } else {
            v->ready_reason = "Reconciled";
            snprintf(v->message, sizeof(v->message),
                     "ClusterPolicy is ready as all resources have been successfully reconciled");
        }
        dm->metrics.reconciliation_status = 1;
        dm->metrics.last_success_s = (int64_t)time(NULL);
        dm->metrics.passes_ok++;
    }
    policy_report(p);
}

/* The object at position i of a state's walk: its objects (applied when the state is enabled,
 * deleted when not), then the objects it owns only under other settings (deleted); NULL past the
 * end. */
static const json_t *state_object(const struct op_state *st, size_t i, bool *ret_deleting)
{
    size_t n = json_array_size(st->objects);
    *ret_deleting = !st->enabled || i >= n;
    return i < n ? json_array_get(st->objects, i) : json_array_get(st->absent, i - n);
}

static void on_object_done(int result, const json_t *live, const char *error, void *userdata)
{
    struct pass *p = userdata;
    const struct op_state *st = &p->rendered.states[p->si];
    bool deleting;
    const json_t *obj = state_object(st, p->oi, &deleting);
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    if (result < 0) {
        policy_fail(p, true, "Failed to reconcile %s: %s", st->name,
                    error ? error : strerror(-result));
        return;
    }
    log_debug(2, "object", "state", st->name, "kind", kind, "name", meta_str(obj, "name"), "result",
              op_apply_result_name((enum op_apply_result)result));
    if (result == OP_APPLY_CREATED || result == OP_APPLY_UPDATED)
        log_info(result == OP_APPLY_CREATED ? "created" : "updated", "state", st->name, "kind",
                 kind, "name", meta_str(obj, "name"));
    if (!deleting && kind && strcmp(kind, "DaemonSet") == 0 && live && p->si < STATES_MAX) {
        char why[160];
        bool rolled = result == OP_APPLY_CREATED || result == OP_APPLY_UPDATED;
        if (!op_daemonset_ready(live, rolled, why, sizeof(why)) &&
            p->result[p->si] != ST_NOT_READY) {
            p->result[p->si] = ST_NOT_READY;
            snprintf(p->detail[p->si], sizeof(p->detail[p->si]), "%s", why);
        }
    }
    p->oi++;
    policy_next(p);
}

/* Whether the pass's ClusterPolicy is still the one to reconcile: one deleted (or replaced)
 * meanwhile must not get objects made for it, which the garbage collector would only remove. */
static bool still_active(const struct pass *p)
{
    const json_t *now = active_policy(p->dm);
    const char *uid = meta_str(now, "uid");
    return uid && strcmp(uid, meta_str(p->cp, "uid") ?: "") == 0;
}

/* The ClusterPolicy went away during the pass: stop without writing anything more. */
static void policy_abandon(struct pass *p)
{
    struct daemon *dm = p->dm;
    log_info("the ClusterPolicy was deleted or replaced; starting over", "clusterpolicy",
             meta_str(p->cp, "name"));
    dm->pass = NULL;
    pass_free(p);
    (void)!op_queue_add(dm->queue, KEY_POLICY, ev_loop_now_ms(dm->loop));
    pass_end(dm, false, false);
}

/* Applies (or deletes) the next object; at the end of the states, concludes. */
static void policy_next(struct pass *p)
{
    struct daemon *dm = p->dm;
    if (!still_active(p)) {
        policy_abandon(p);
        return;
    }
    while (p->si < p->rendered.n) {
        const struct op_state *st = &p->rendered.states[p->si];
        if (p->oi == 0 && p->si < STATES_MAX)
            p->result[p->si] = st->enabled ? ST_READY : ST_DISABLED;
        bool deleting;
        const json_t *obj = state_object(st, p->oi, &deleting);
        if (!obj) {
            p->si++;
            p->oi = 0;
            continue;
        }
        int r =
            deleting
                ? op_delete(dm->kube, &dm->inflight, obj, &dm->metrics.writes, on_object_done, p)
                : op_apply(dm->kube, &dm->inflight, obj, &dm->metrics.writes, on_object_done, p);
        if (r < 0)
            policy_fail(p, true, "Failed to reconcile %s: %s %s: %s", st->name,
                        json_string_value(json_object_get(obj, "kind")), meta_str(obj, "name"),
                        strerror(-r));
        return;
    }
    policy_conclude(p);
}

static void policy_render(struct pass *p)
{
    struct daemon *dm = p->dm;
    struct diag d;
    diag_init(&d);
    int r = op_policy_from_json(p->cp, &p->policy, &d);
    if (r < 0) {
        policy_fail(p, false, "invalid ClusterPolicy: %s", d.msg[0] ? d.msg : strerror(-r));
        return;
    }
    p->gpu_nodes = dm->gpu_nodes;
    p->has_nfd = dm->has_nfd;
    const struct op_render_env env = {
        .namespace_ = dm->ns,
        .getenv = env_get,
        .gpu_nodes = p->gpu_nodes,
        .os_tag = dm->os_tag[0] ? dm->os_tag : NULL,
    };
    r = op_render(p->policy, &env, p->cp, &p->rendered, &d);
    if (r < 0) {
        policy_fail(p, false, "cannot render the ClusterPolicy: %s",
                    d.msg[0] ? d.msg : strerror(-r));
        return;
    }
    p->have_rendered = true;
    policy_next(p);
}

static void ignored_next(struct pass *p);

static void on_ignored_status(struct daemon *dm, bool ok, bool wrote, void *userdata)
{
    struct pass *p = userdata;
    const char *name = json_string_value(json_array_get(p->ignored, p->ii));
    const json_t *cp = json_object_get(dm->cps, name ? name : "");
    if (wrote && cp) {
        char msg[600];
        snprintf(msg, sizeof(msg), "ClusterPolicy %s is active; only the oldest is reconciled",
                 meta_str(p->cp, "name"));
        record_event(dm, cp, true, "Ignored", msg);
    }
    p->ii++;
    ignored_next(p);
}

/* Marks the other ClusterPolicies ignored (status written when it is not already). */
static void ignored_next(struct pass *p)
{
    struct daemon *dm = p->dm;
    while (p->ii < json_array_size(p->ignored)) {
        const char *name = json_string_value(json_array_get(p->ignored, p->ii));
        const json_t *cp = json_object_get(dm->cps, name);
        if (cp) {
            struct op_verdict v = {
                .state = OP_CP_IGNORED, .ready_reason = "Ignored", .error_reason = "Ignored"};
            snprintf(v.message, sizeof(v.message),
                     "ClusterPolicy %s is active (the oldest); this one is ignored",
                     meta_str(p->cp, "name"));
            if (write_status(dm, cp, &v, on_ignored_status, p))
                return;
        }
        p->ii++;
    }
    policy_render(p);
}

/* The pass starts from a fresh read of its ClusterPolicy: the watch may not have told yet that it
 * was deleted (the garbage collector can be quicker), and objects made for a deleted owner would
 * only be collected again. */
static void on_fresh_policy(const struct kube_response *res, void *userdata)
{
    struct pass *p = userdata;
    struct daemon *dm = p->dm;
    const char *uid = meta_str(p->cp, "uid");
    if (res->status == 404 ||
        (res->status == 200 && (!uid || strcmp(meta_str(res->body, "uid") ?: "", uid) != 0))) {
        if (res->status == 404)
            json_object_del(dm->cps, meta_str(p->cp, "name"));
        policy_abandon(p);
        return;
    }
    if (res->status != 200) {
        policy_fail(p, true, "cannot read the ClusterPolicy: %s%s%s", res->reason,
                    res->reason[0] ? ": " : "", res->message);
        return;
    }
    if (meta_str(res->body, "deletionTimestamp")) {
        policy_abandon(p);
        return;
    }
    json_decref(p->cp);
    p->cp = json_deep_copy(res->body);
    if (!p->cp) {
        policy_fail(p, true, "out of memory");
        return;
    }
    ignored_next(p);
}

static void policy_pass(struct daemon *dm)
{
    json_t *active = active_policy(dm);
    if (!active) {
        dm->metrics.reconciliation_status = -1;
        dm->metrics.n_states = 0;
        dm->active_uid[0] = '\0';
        log_debug(1, "no ClusterPolicy: nothing to reconcile");
        pass_end(dm, false, false);
        return;
    }
    struct pass *p = calloc(1, sizeof(*p));
    if (!p) {
        pass_end(dm, true, false);
        return;
    }
    p->dm = dm;
    p->cp = json_deep_copy(active);
    p->ignored = json_array();
    for (size_t i = 0; i < STATES_MAX; i++)
        p->result[i] = ST_UNKNOWN;
    const char *name;
    json_t *cp;
    json_object_foreach(dm->cps, name, cp)
    {
        if (cp != active && !meta_str(cp, "deletionTimestamp"))
            (void)!json_array_append_new(p->ignored, json_string(name));
    }
    if (!p->cp || !p->ignored) {
        pass_free(p);
        pass_end(dm, true, false);
        return;
    }
    dm->pass = p;
    char path[512];
    int r = kube_path(path, sizeof(path), "nvidia.com/v1", "clusterpolicies", NULL,
                      meta_str(p->cp, "name"), NULL);
    if (r >= 0)
        r = kube_get(dm->kube, path, on_fresh_policy, p);
    if (r < 0)
        policy_fail(p, true, "cannot read the ClusterPolicy: %s", strerror(-r));
}

/* ---- what is kept of the nodes ---- */

/* Whether the operator reads a label: nvidia.com/gpu.present, .workload.config and the deploy
 * labels, NFD's NVIDIA PCI labels and the OS release. */
static bool label_read(const char *key)
{
    static const char *const prefixes[] = {
        OP_LABEL_DEPLOY_PREFIX,
        OP_NFD_PREFIX "system-os_release.",
    };
    static const char *const exact[] = {
        OP_LABEL_GPU_PRESENT,
        OP_LABEL_WORKLOAD,
        OP_NFD_PREFIX "pci-10de.present",
        OP_NFD_PREFIX "pci-0302_10de.present",
        OP_NFD_PREFIX "pci-0300_10de.present",
    };
    for (size_t i = 0; i < ARRAY_SIZE(prefixes); i++)
        if (strncmp(key, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    for (size_t i = 0; i < ARRAY_SIZE(exact); i++)
        if (strcmp(key, exact[i]) == 0)
            return true;
    return false;
}

/*
 * The part of a node the operator keeps, compact so that 1,000 nodes take about a MiB: its name and
 * resourceVersion (the watch needs them), what the policy pass reads ("gpu": gpu.present is true,
 * "nfd": NFD labelled the node, "os": its driver OS tag), and as one JSON string ("node") the
 * labels the labeller reads and the operator's annotation, parsed again for a labelling pass.
 */
static json_t *trim_node(const json_t *node)
{
    const json_t *meta = json_object_get(node, "metadata");
    const json_t *labels = json_object_get(meta, "labels");
    const json_t *mine =
        json_object_get(json_object_get(meta, "annotations"), OP_ANNOTATION_LABELS);
    _cleanup_json_ json_t *kept = json_object();
    const char *key;
    json_t *v;
    char tag[128];
    json_object_foreach((json_t *)labels, key, v)
    {
        if (kept && label_read(key))
            (void)!json_object_set(kept, key, v);
    }
    _cleanup_json_ json_t *slim = json_pack("{s:{s:O}}", "metadata", "labels", kept);
    if (slim && mine)
        (void)!json_object_set_new(json_object_get(slim, "metadata"), "annotations",
                                   json_pack("{s:O}", OP_ANNOTATION_LABELS, mine));
    _cleanup_free_ char *text = slim ? json_dumps(slim, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (!text)
        return NULL;
    json_t *out =
        json_pack("{s:{s:O,s:O*},s:b,s:b,s:s}", "metadata", "name", json_object_get(meta, "name"),
                  "resourceVersion", json_object_get(meta, "resourceVersion"), "gpu",
                  op_node_gpu_present(labels), "nfd", op_node_has_nfd(labels), "node", text);
    if (out && op_node_os_tag(labels, tag, sizeof(tag)))
        (void)!json_object_set_new(out, "os", json_string(tag));
    return out;
}

/* A trimmed node's labels and annotation as a node object (for the labelling rules). */
static json_t *untrim_node(const json_t *trimmed)
{
    const char *text = json_string_value(json_object_get(trimmed, "node"));
    return text ? json_loads(text, 0, NULL) : NULL;
}

/* Whether what the operator reads of a node changed (not its resourceVersion: a kubelet's
 * status update changes nothing here). */
static bool node_differs(const json_t *a, const json_t *b)
{
    return !b || !json_equal(json_object_get(a, "node"), json_object_get(b, "node")) ||
           !json_equal(json_object_get(a, "nfd"), json_object_get(b, "nfd")) ||
           !json_equal(json_object_get(a, "os"), json_object_get(b, "os"));
}

static json_t *filter_node(const json_t *node, void *userdata)
{
    return trim_node(node);
}

/* ---- the labelling pass ---- */

static void label_pump(struct label_pass *lp);

static void label_finish(struct label_pass *lp)
{
    struct daemon *dm = lp->dm;
    bool failed = lp->failed > 0;
    if (json_object_size(lp->patches))
        log_info("node labels written", "nodes",
                 LOG_INT(json_object_size(lp->patches) - lp->failed), "failed",
                 LOG_INT(lp->failed));
    json_decref(lp->patches);
    free(lp);
    dm->lpass = NULL;
    if (json_object_size(dm->nodes) > 100)
        trim_soon(dm); /* one node answer per patch, freed: give the memory back */
    if (scan_nodes(dm))
        (void)!op_queue_add(dm->queue, KEY_POLICY, ev_loop_now_ms(dm->loop));
    pass_end(dm, failed, false);
}

struct label_call {
    struct op_inflight link;
    struct label_pass *lp;
    char node[254];
};

static void on_label_patched(const struct kube_response *res, void *userdata)
{
    struct label_call *call = userdata;
    struct label_pass *lp = call->lp;
    struct daemon *dm = lp->dm;
    op_inflight_remove(&call->link);
    lp->in_flight--;
    if (res->status == 200) {
        dm->metrics.label_patches++;
        log_debug(1, "node labelled", "node", call->node);
        /* The node as patched, so the policy pass that follows sees its labels before the watch
         * brings them (the watch's copy then compares equal and triggers nothing). */
        json_t *trimmed = trim_node(res->body);
        if (trimmed && node_differs(trimmed, json_object_get(dm->nodes, call->node)))
            (void)!json_object_set_new(dm->nodes, call->node, trimmed);
        else
            json_decref(trimmed);    /* the watch told already: keep the copy shared with it */
    } else if (res->status != 404) { /* a node deleted meanwhile needs nothing */
        lp->failed++;
        log_error("cannot label node", "node", call->node, "status", LOG_INT(res->status), "reason",
                  res->reason, "message", res->message);
    }
    free(call);
    label_pump(lp);
}

static void label_pump(struct label_pass *lp)
{
    struct daemon *dm = lp->dm;
    while (lp->iter && lp->in_flight < LABEL_WINDOW) {
        const char *node = json_object_iter_key(lp->iter);
        json_t *patch = json_object_iter_value(lp->iter);
        lp->iter = json_object_iter_next(lp->patches, lp->iter);
        char path[512];
        struct label_call *call = calloc(1, sizeof(*call));
        int r = call ? kube_path(path, sizeof(path), "v1", "nodes", NULL, node, NULL) : -ENOMEM;
        if (r >= 0) {
            call->lp = lp;
            snprintf(call->node, sizeof(call->node), "%s", node);
            r = kube_merge_patch(dm->kube, path, patch, on_label_patched, call);
        }
        if (r < 0) {
            free(call);
            lp->failed++;
            continue;
        }
        op_inflight_add(&dm->inflight, &call->link, free_link);
        dm->metrics.writes.patch++;
        lp->in_flight++;
    }
    if (!lp->iter && lp->in_flight == 0)
        label_finish(lp);
}

static void labels_pass(struct daemon *dm)
{
    struct op_label_config cfg = {0};
    json_t *active = active_policy(dm);
    if (active) {
        _cleanup_(op_policy_freep) struct op_policy *policy = NULL;
        struct diag d;
        diag_init(&d);
        if (op_policy_from_json(active, &policy, &d) < 0) {
            /* the policy pass reports it; the labels stay as they are */
            pass_end(dm, false, false);
            return;
        }
        cfg = (struct op_label_config){
            .policy = true,
            .dra_driver = op_policy_enabled(policy, OP_DRA_DRIVER),
            .sandbox = policy->sandbox_enabled,
            .default_workload = policy->sandbox_default_workload,
        };
    }
    struct label_pass *lp = calloc(1, sizeof(*lp));
    json_t *patches = json_object();
    if (!lp || !patches) {
        free(lp);
        json_decref(patches);
        pass_end(dm, true, false);
        return;
    }
    *lp = (struct label_pass){.dm = dm, .patches = patches};
    const char *name;
    json_t *node;
    json_object_foreach(dm->nodes, name, node)
    {
        json_t *patch = NULL;
        _cleanup_json_ json_t *full = untrim_node(node);
        if (!full || op_node_label_patch(full, &cfg, &patch) < 0)
            lp->failed++;
        else if (patch)
            (void)!json_object_set_new(patches, name, patch);
    }
    dm->lpass = lp;
    lp->iter = json_object_iter(patches);
    label_pump(lp);
}

/* ---- the worker ---- */

static void on_queue_timer(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    kick(userdata);
}

/* Starts the next pass when one is due and none runs; otherwise arms the timer for the next. */
static void kick(struct daemon *dm)
{
    if (dm->busy || dm->stopping || !dm->synced || !dm->leader)
        return;
    uint64_t now = ev_loop_now_ms(dm->loop);
    char key[OP_QUEUE_KEY_MAX];
    if (!op_queue_get(dm->queue, now, key)) {
        uint64_t next = op_queue_next_ms(dm->queue, now);
        if (next == OP_QUEUE_NEVER)
            (void)!ev_timer_disarm(dm->queue_timer);
        else
            (void)!ev_timer_set(dm->queue_timer, next ? next : 1, 0);
        return;
    }
    dm->busy = true;
    memcpy(dm->busy_key, key, sizeof(key));
    dm->pass_started_ms = now;
    if (strcmp(key, KEY_POLICY) == 0)
        policy_pass(dm);
    else
        labels_pass(dm);
}

/* ---- the caches ---- */

static void on_trim(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    malloc_trim(0);
}

/* Returns free heap memory to the system once the current callbacks (which may still hold a large
 * List or response) are done. */
static void trim_soon(struct daemon *dm)
{
    (void)!ev_timer_set(dm->trim_timer, 200, 0);
}

/* Still not synced a while after start: say which list is missing (a watch that cannot list
 * retries quietly, with back-off). */
static void on_sync_late(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct daemon *dm = userdata;
    if (dm->synced)
        return;
    log_warn("still listing; not ready", "clusterpolicies", dm->synced_cp ? "listed" : "not yet",
             "nodes", dm->synced_nodes ? "listed" : "not yet", "daemonsets",
             dm->synced_ds ? "listed" : "not yet", "hint",
             !dm->synced_cp ? "is the ClusterPolicy CRD (clusterpolicies.nvidia.com) installed, "
                              "and may the operator list it?"
                            : "may the operator list nodes and the namespace's daemonsets?");
}

static void check_synced(struct daemon *dm)
{
    if (dm->synced || !dm->synced_cp || !dm->synced_nodes || !dm->synced_ds)
        return;
    dm->synced = true;
    dm->metrics.synced = true;
    (void)!ev_timer_disarm(dm->sync_timer);
    trim_soon(dm); /* the lists of a large cluster were read: give their memory back */
    log_info("caches synced", "clusterpolicies", LOG_INT(json_object_size(dm->cps)), "nodes",
             LOG_INT(json_object_size(dm->nodes)));
    enqueue(dm, KEY_LABELS);
    enqueue(dm, KEY_POLICY);
}

static void on_cp_event(enum kube_event ev, json_t *obj, void *userdata)
{
    struct daemon *dm = userdata;
    if (ev == KUBE_SYNCED) {
        dm->synced_cp = true;
        check_synced(dm);
        return;
    }
    const char *name = meta_str(obj, "name");
    if (!name)
        return;
    const json_t *old = json_object_get(dm->cps, name);
    bool matters = true;
    if (ev == KUBE_DELETED) {
        json_object_del(dm->cps, name);
    } else {
        /* Status writes (ours) change no generation: they need no pass. */
        matters = !old ||
                  !json_equal(json_object_get(json_object_get(old, "metadata"), "generation"),
                              json_object_get(json_object_get(obj, "metadata"), "generation")) ||
                  !json_equal(json_object_get(json_object_get(old, "metadata"), "uid"),
                              json_object_get(json_object_get(obj, "metadata"), "uid")) ||
                  (meta_str(obj, "deletionTimestamp") != NULL) !=
                      (meta_str(old, "deletionTimestamp") != NULL);
        (void)!json_object_set_new(dm->cps, name, json_deep_copy(obj));
    }
    if (matters && dm->synced) {
        log_debug(1, "clusterpolicy changed", "name", name);
        enqueue(dm, KEY_LABELS);
        enqueue(dm, KEY_POLICY);
    }
}

/* What the policy pass reads of the nodes. Returns true when it changed. */
static bool scan_nodes(struct daemon *dm)
{
    bool gpu = false, nfd = false;
    const char *first = NULL;
    char tag[128] = "";
    const char *name;
    json_t *node;
    uint64_t count = 0;
    json_object_foreach(dm->nodes, name, node)
    {
        nfd = nfd || json_is_true(json_object_get(node, "nfd"));
        if (!json_is_true(json_object_get(node, "gpu")))
            continue;
        gpu = true;
        count++;
        if (!first || strcmp(name, first) < 0) {
            first = name;
            snprintf(tag, sizeof(tag), "%s", json_string_value(json_object_get(node, "os")) ?: "");
        }
    }
    dm->metrics.gpu_nodes = count;
    dm->metrics.has_nfd_labels = nfd;
    bool changed = gpu != dm->gpu_nodes || nfd != dm->has_nfd || strcmp(tag, dm->os_tag) != 0;
    dm->gpu_nodes = gpu;
    dm->has_nfd = nfd;
    snprintf(dm->os_tag, sizeof(dm->os_tag), "%s", tag);
    return changed;
}

static void on_node_event(enum kube_event ev, json_t *obj, void *userdata)
{
    struct daemon *dm = userdata;
    if (ev == KUBE_SYNCED) {
        dm->synced_nodes = true;
        scan_nodes(dm);
        check_synced(dm);
        return;
    }
    const char *name = meta_str(obj, "name");
    if (!name)
        return;
    bool changed = true;
    if (ev == KUBE_DELETED) {
        json_object_del(dm->nodes, name);
    } else {
        /* obj is trimmed already (filter_node); the cache shares it with the watch */
        changed = node_differs(obj, json_object_get(dm->nodes, name));
        (void)!json_object_set(dm->nodes, name, obj);
    }
    if (!changed || !dm->synced)
        return;
    enqueue(dm, KEY_LABELS);
    if (scan_nodes(dm))
        enqueue(dm, KEY_POLICY);
}

static void on_ds_event(enum kube_event ev, json_t *obj, void *userdata)
{
    struct daemon *dm = userdata;
    if (ev == KUBE_SYNCED) {
        dm->synced_ds = true;
        check_synced(dm);
        return;
    }
    if (dm->synced && op_owned_by_policy(obj))
        enqueue(dm, KEY_POLICY);
}

/* ---- HTTP ---- */

static void on_metrics(struct http_request *req, void *userdata)
{
    struct daemon *dm = userdata;
    _cleanup_strbuf_ struct strbuf out = STRBUF_INIT;
    dm->metrics.leader = dm->leader;
    if (op_metrics_render(&dm->metrics, &out) < 0) {
        (void)!http_respond(req, 500, "text/plain; charset=utf-8", "error\n", 6);
        return;
    }
    (void)!http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", strbuf_str(&out),
                        out.len);
}

static void on_healthz(struct http_request *req, void *userdata)
{
    (void)!http_respond(req, 200, "text/plain; charset=utf-8", "ok", 2);
}

static void on_readyz(struct http_request *req, void *userdata)
{
    struct daemon *dm = userdata;
    if (dm->synced)
        (void)!http_respond(req, 200, "text/plain; charset=utf-8", "ok", 2);
    else
        (void)!http_respond(req, 503, "text/plain; charset=utf-8", "caches not synced", 17);
}

static int open_http(struct daemon *dm, struct diag *d)
{
    int r = 0;
    if (strcmp(dm->o->metrics_address, "0") != 0) {
        r = http_server_new(dm->loop, dm->o->metrics_address, NULL, NULL, d, &dm->metrics_srv);
        if (r >= 0)
            r = http_server_route(dm->metrics_srv, "/metrics", on_metrics, dm);
        if (r < 0)
            return d->msg[0] ? r : diag_fail(d, r, "cannot serve /metrics: %s", strerror(-r));
        log_info("serving /metrics", "address", dm->o->metrics_address, "port",
                 LOG_INT(http_server_port(dm->metrics_srv)));
    }
    if (strcmp(dm->o->health_address, "0") != 0) {
        r = http_server_new(dm->loop, dm->o->health_address, NULL, NULL, d, &dm->health_srv);
        if (r >= 0)
            r = http_server_route(dm->health_srv, "/healthz", on_healthz, dm);
        if (r >= 0)
            r = http_server_route(dm->health_srv, "/readyz", on_readyz, dm);
        if (r < 0)
            return d->msg[0] ? r : diag_fail(d, r, "cannot serve probes: %s", strerror(-r));
        log_info("serving /healthz and /readyz", "address", dm->o->health_address, "port",
                 LOG_INT(http_server_port(dm->health_srv)));
    }
    return 0;
}

/* ---- leadership and signals ---- */

static void on_leading(void *userdata)
{
    struct daemon *dm = userdata;
    dm->leader = true;
    dm->metrics.leader = true;
    enqueue(dm, KEY_LABELS);
    enqueue(dm, KEY_POLICY);
}

static void on_lost(void *userdata)
{
    struct daemon *dm = userdata;
    log_error("leader election lost", "lease", OP_LEASE_NAME, "identity", dm->identity);
    dm->leader = false;
    dm->stopping = true;
    ev_loop_stop(dm->loop, CLI_EXIT_FAILURE);
}

static void on_released(void *userdata)
{
    struct daemon *dm = userdata;
    ev_loop_stop(dm->loop, CLI_EXIT_OK);
}

static void on_release_timeout(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct daemon *dm = userdata;
    log_warn("the lease release did not finish in time; stopping anyway");
    ev_loop_stop(dm->loop, CLI_EXIT_OK);
}

static void on_hup(struct ev_signal *sig, const struct signalfd_siginfo *si, void *userdata)
{
    log_info("SIGHUP: nothing to reload (the ClusterPolicy is watched)");
}

static void on_stop_signal(struct ev_signal *sig, const struct signalfd_siginfo *si, void *userdata)
{
    struct daemon *dm = userdata;
    if (dm->stopping) {
        ev_loop_stop(dm->loop, CLI_EXIT_OK);
        return;
    }
    dm->stopping = true;
    log_info("stopping", "signal", si->ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
    if (dm->elector && op_elector_is_leader(dm->elector)) {
        if (ev_timer_add(dm->loop, RELEASE_WAIT_MS, 0, on_release_timeout, dm, &dm->release_timer) <
            0) {
            ev_loop_stop(dm->loop, CLI_EXIT_OK);
            return;
        }
        op_elector_release(dm->elector, on_released, dm);
        return;
    }
    ev_loop_stop(dm->loop, CLI_EXIT_OK);
}

/* ---- start and stop ---- */

static int open_kube(struct daemon *dm, struct diag *d)
{
    const struct kube_config_options copts = {.kubeconfig = dm->o->kubeconfig};
    int r = kube_config_load(&copts, d, &dm->kcfg);
    if (r < 0)
        return r;
    dm->ns = dm->o->namespace_ ? dm->o->namespace_ : dm->kcfg->namespace_;
    if (!dm->ns || !*dm->ns)
        return diag_fail(d, -EINVAL, "no operator namespace: set OPERATOR_NAMESPACE");
    const struct kube_client_options kopts = {.qps = dm->o->qps, .burst = dm->o->burst};
    r = kube_client_new(dm->loop, dm->kcfg, &kopts, &dm->kube);
    if (r < 0)
        return diag_fail(d, r, "cannot make the API client: %s", strerror(-r));
    r = kube_path(dm->ds_path, sizeof(dm->ds_path), "apps/v1", "daemonsets", dm->ns, NULL, d);
    if (r < 0)
        return r;
    r = kube_watch_new(dm->kube, "/apis/nvidia.com/v1/clusterpolicies", on_cp_event, dm, &dm->w_cp);
    /* Of the nodes only what the daemon reads (trim_node), page by page: 1,000 nodes fit a few
     * MiB instead of tens. */
    if (r >= 0)
        r = kube_watch_new_filtered(dm->kube, "/api/v1/nodes", filter_node, on_node_event, dm,
                                    &dm->w_nodes);
    if (r >= 0)
        r = kube_watch_new(dm->kube, dm->ds_path, on_ds_event, dm, &dm->w_ds);
    if (r < 0)
        return diag_fail(d, r, "cannot start the watches: %s", strerror(-r));
    return 0;
}

static int open_elector(struct daemon *dm, struct diag *d)
{
    if (!dm->o->leader_elect) {
        dm->leader = true;
        dm->metrics.leader = true;
        return 0;
    }
    uint64_t timeout = dm->o->renew_deadline_ms / 2;
    const struct kube_client_options kopts = {
        .qps = 5, .burst = 10, .timeout_ms = (uint32_t)(timeout < 1000 ? 1000 : timeout)};
    int r = kube_client_new(dm->loop, dm->kcfg, &kopts, &dm->lease_kube);
    if (r < 0)
        return diag_fail(d, r, "cannot make the API client: %s", strerror(-r));
    const struct op_elector_options eo = {
        .namespace_ = dm->o->leader_elect_namespace ? dm->o->leader_elect_namespace : dm->ns,
        .identity = dm->identity,
        .lease_ms = dm->o->lease_duration_ms,
        .renew_deadline_ms = dm->o->renew_deadline_ms,
        .retry_ms = dm->o->retry_period_ms,
        .on_leading = on_leading,
        .on_lost = on_lost,
        .userdata = dm,
    };
    log_info("attempting to acquire leader lease", "lease", OP_LEASE_NAME, "namespace",
             eo.namespace_, "identity", dm->identity);
    return op_elector_new(dm->loop, dm->lease_kube, &eo, d, &dm->elector);
}

static int start(struct daemon *dm, struct diag *d)
{
    const struct op_queue_options qo = {.backoff_base_ms = dm->o->backoff_base_ms,
                                        .backoff_max_ms = dm->o->backoff_max_ms};
    dm->metrics.reconciliation_status = -1;
    dm->cps = json_object();
    dm->nodes = json_object();
    if (!dm->cps || !dm->nodes)
        return -ENOMEM;
    /* Large answers (a cluster's Nodes) in mmap()ed memory that goes back when freed: glibc's
     * moving threshold would otherwise keep them in the heap after the first. */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    int r = op_lease_identity(dm->identity);
    if (r >= 0)
        r = op_queue_new(&qo, &dm->queue);
    if (r >= 0)
        r = ev_loop_new(&dm->loop);
    if (r >= 0)
        r = ev_signal_add(dm->loop, SIGTERM, on_stop_signal, dm, &dm->sig_term);
    if (r >= 0)
        r = ev_signal_add(dm->loop, SIGINT, on_stop_signal, dm, &dm->sig_int);
    if (r >= 0) /* nothing to reload (no config file), but no death by SIGHUP either */
        r = ev_signal_add(dm->loop, SIGHUP, on_hup, dm, &dm->sig_hup);
    if (r >= 0)
        r = ev_timer_add(dm->loop, 0, 0, on_queue_timer, dm, &dm->queue_timer);
    if (r >= 0)
        r = ev_timer_disarm(dm->queue_timer);
    if (r >= 0)
        r = ev_timer_add(dm->loop, 0, 0, on_trim, dm, &dm->trim_timer);
    if (r >= 0)
        r = ev_timer_add(dm->loop, SYNC_LATE_MS, SYNC_LATE_MS, on_sync_late, dm, &dm->sync_timer);
    if (r >= 0)
        r = ev_timer_disarm(dm->trim_timer);
    if (r < 0)
        return diag_fail(d, r, "cannot start: %s", strerror(-r));
    r = open_kube(dm, d);
    if (r >= 0)
        r = open_http(dm, d);
    if (r >= 0)
        r = open_elector(dm, d);
    return r;
}

static void stop(struct daemon *dm)
{
    /* The clients first: their callbacks then never come, so the passes can go. */
    dm->lease_kube = kube_client_free(dm->lease_kube);
    dm->elector = op_elector_free(dm->elector);
    dm->w_cp = kube_watch_free(dm->w_cp);
    dm->w_nodes = kube_watch_free(dm->w_nodes);
    dm->w_ds = kube_watch_free(dm->w_ds);
    dm->kube = kube_client_free(dm->kube);
    op_inflight_free_all(&dm->inflight);
    pass_free(dm->pass);
    dm->pass = NULL;
    if (dm->lpass) {
        json_decref(dm->lpass->patches);
        free(dm->lpass);
        dm->lpass = NULL;
    }
    dm->metrics_srv = http_server_free(dm->metrics_srv);
    dm->health_srv = http_server_free(dm->health_srv);
    dm->loop = ev_loop_free(dm->loop);
    dm->kcfg = kube_config_free(dm->kcfg);
    dm->queue = op_queue_free(dm->queue);
    json_decref(dm->cps);
    json_decref(dm->nodes);
}

static int run(struct op_options *o)
{
    struct daemon dm = {.o = o};
    struct diag d;
    diag_init(&d);
    op_inflight_init(&dm.inflight);
    for (size_t i = 0; i < STATES_MAX; i++)
        dm.last[i] = ST_UNKNOWN;
    int r = start(&dm, &d);
    if (r < 0) {
        cli_error("%s", d.msg[0] ? d.msg : strerror(-r));
        stop(&dm);
        return CLI_EXIT_FAILURE;
    }
    log_info("operator running", "namespace", dm.ns, "server", dm.kcfg->server, "leader-elect",
             o->leader_elect ? "true" : "false");
    r = ev_loop_run(dm.loop);
    if (r < 0)
        log_error("event loop failed", "error", strerror(-r));
    stop(&dm);
    return r == CLI_EXIT_OK ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

int op_daemon_main(int argc, char **argv)
{
    struct op_options o;
    struct diag d;
    diag_init(&d);
    op_options_init(&o);
    int r = op_options_parse(argc, argv, &o, &d);
    if (r < 0) {
        cli_error("%s", d.msg[0] ? d.msg : "invalid options");
        r = CLI_EXIT_USAGE;
    } else if (o.common.help) {
        op_options_usage(stdout);
        r = CLI_EXIT_OK;
    } else if (cli_common_finish(&o.common, OP_COMMAND) < 0) {
        r = CLI_EXIT_USAGE;
    } else {
        r = run(&o);
    }
    op_options_release(&o);
    return r;
}
