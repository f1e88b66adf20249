/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the reconciler's files share (operator-daemon.c drives them): applying and deleting the
 * rendered objects (operator-apply.c), DaemonSet readiness, the ClusterPolicy's status and
 * conditions, Events (operator-status.c), and the operator's Prometheus metrics
 * (operator-metrics.c). The pure pieces (readiness, status building, exposition) are unit tested
 * directly.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "kube.h"

/* ---- the objects' API paths (operator-apply.c) ---- */

/*
 * The API path of obj (apiVersion, kind, metadata.namespace, metadata.name) or, with collection,
 * of its collection. The kinds the renderer makes: Namespace, ServiceAccount, ConfigMap, Service,
 * Secret, Role, RoleBinding, ClusterRole, ClusterRoleBinding, DaemonSet, RuntimeClass,
 * ServiceMonitor. -EINVAL with d for another kind or a bad name.
 */
_wur_ int op_object_path(const json_t *obj, bool collection, char *buf, size_t n, struct diag *d);

/* Whether obj has a controller owner reference to a ClusterPolicy (nvidia.com). */
bool op_owned_by_policy(const json_t *obj);

/* ---- requests in flight ---- */

/*
 * The context of a request in flight is linked into a list its owner keeps: freeing the kube
 * client drops the callbacks that would free them, so the owner frees what is left with
 * op_inflight_free_all() after freeing the client. Embed the link as a member; fn frees the whole.
 */
struct op_inflight {
    struct op_inflight *prev, *next;
    void (*free_fn)(struct op_inflight *link);
};

/* An empty list: a head linked to itself. */
void op_inflight_init(struct op_inflight *head);
void op_inflight_add(struct op_inflight *head, struct op_inflight *link,
                     void (*free_fn)(struct op_inflight *link));
void op_inflight_remove(struct op_inflight *link);
/* Frees every context still listed (their requests will never answer). */
void op_inflight_free_all(struct op_inflight *head);

/* ---- applying (operator-apply.c) ---- */

enum op_apply_result {
    OP_APPLY_UNCHANGED, /* the live object carries the rendered hash (or is create-only) */
    OP_APPLY_CREATED,
    OP_APPLY_UPDATED,
    OP_APPLY_DELETED,
    OP_APPLY_ABSENT,    /* a delete found nothing */
    OP_APPLY_NOT_OWNED, /* a delete found an object the ClusterPolicy does not control: kept */
};

const char *op_apply_result_name(enum op_apply_result r);

/* API writes by verb, for the metrics and the idle check. */
struct op_write_counts {
    uint64_t create, update, patch, delete_;
};

/*
 * The outcome of one apply or delete: result >= 0 (enum op_apply_result) with live the object as
 * it now is (NULL after a delete), or a negative errno with error saying why. live is borrowed
 * (valid during the call).
 */
typedef void (*op_apply_done_fn)(int result, const json_t *live, const char *error, void *userdata);

/*
 * Brings the object to what obj (a rendered object, borrowed; copied) says: GET; create when
 * NotFound; when the live nvidia.com/last-applied-hash differs from obj's, update it with the
 * live resourceVersion (a 409 starts over, at most 3 times). ServiceAccounts are created only.
 * A Namespace is never created or owned: its labels are merge-patched when they differ.
 * writes (may be NULL) counts the writes made. fn is called exactly once, never from inside this
 * call; 0 or a negative errno (then no call). The request's context is listed in inflight.
 */
_wur_ int op_apply(struct kube_client *kube, struct op_inflight *inflight, const json_t *obj,
                   struct op_write_counts *writes, op_apply_done_fn fn, void *userdata);

/* Deletes the object obj names when it exists and a ClusterPolicy controls it (NotFound is
 * OP_APPLY_ABSENT). A Namespace is never deleted (OP_APPLY_NOT_OWNED). */
_wur_ int op_delete(struct kube_client *kube, struct op_inflight *inflight, const json_t *obj,
                    struct op_write_counts *writes, op_apply_done_fn fn, void *userdata);

/* ---- readiness (operator-status.c) ---- */

/*
 * NVIDIA's rule for a DaemonSet (gpu-operator.md §5): desiredNumberScheduled 0 is ready;
 * numberUnavailable other than 0 is not; else ready when status.observedGeneration >=
 * metadata.generation and updatedNumberScheduled == desiredNumberScheduled == numberAvailable.
 * updated_now: it was created or updated in this pass, so not ready for the pass. For OnDelete
 * DaemonSets the same fields are read (the controller counts pods of the current revision in
 * updatedNumberScheduled), so no Pods are listed. why (may be NULL) says what is missing:
 * "2 of 3 pods available".
 */
bool op_daemonset_ready(const json_t *ds, bool updated_now, char *why, size_t n);

/* ---- status (operator-status.c) ---- */

enum op_cp_state {
    OP_CP_READY,
    OP_CP_NOT_READY,
    OP_CP_IGNORED,
};

const char *op_cp_state_name(enum op_cp_state s); /* "ready", "notReady", "ignored" */

/* A pass's verdict on one ClusterPolicy. */
struct op_verdict {
    enum op_cp_state state;
    const char *ready_reason; /* Ready condition: Reconciled, NoGPUNodes, NFDLabelsMissing,
                                 Error, Ignored */
    const char *error_reason; /* Error condition: Ready, ReconcileFailed, OperandNotReady,
                                 Ignored */
    char message[1024];
};

/*
 * The status a ClusterPolicy should have after a pass: state, namespace and the Ready and Error
 * conditions merged into live_status (may be NULL) as Kubernetes merges conditions (a condition
 * keeps lastTransitionTime while its status stays; other condition types are kept).
 * generation: metadata.generation (observedGeneration); now: RFC 3339. A new reference, or NULL.
 */
json_t *op_status_build(const json_t *live_status, const struct op_verdict *v,
                        const char *namespace_, int64_t generation, const char *now);

/* The current time as RFC 3339 seconds (metav1.Time). */
void op_time_now(char buf[static 32]);

/*
 * A core/v1 Event about the ClusterPolicy cp (involvedObject: apiVersion, kind, name, uid,
 * resourceVersion) in namespace "default" (where client-go records events of cluster-scoped
 * objects): type "Normal" or "Warning", reason, message, source.component "gpu-operator",
 * reportingComponent, reportingInstance = instance. A new reference, or NULL.
 */
json_t *op_event_build(const json_t *cp, const char *type, const char *reason, const char *message,
                       const char *instance);

/* ---- metrics (operator-metrics.c) ---- */

#define OP_METRICS_STATES_MAX 16

struct op_metrics {
    int reconciliation_status;     /* 1 ready, 0 notReady, -1 no ClusterPolicy */
    uint64_t reconciliation_total; /* passes of the active ClusterPolicy */
    uint64_t reconciliation_failed_total;
    int64_t last_success_s; /* wall clock of the last ready pass, 0: none */
    bool has_nfd_labels;
    uint64_t gpu_nodes;
    bool leader;
    bool synced;
    /* gpuplane's own */
    uint64_t passes_ok, passes_not_ready, passes_error;
    double duration_sum_s; /* reconcile pass durations */
    uint64_t duration_count;
    uint64_t duration_buckets[8]; /* cumulative, le = op_metrics_buckets[] */
    size_t n_states;
    struct {
        char name[48];
        int ready; /* 1 ready, 0 notReady, -1 disabled */
    } states[OP_METRICS_STATES_MAX];
    uint64_t label_patches;
    struct op_write_counts writes;
};

extern const double op_metrics_buckets[8];

/* Records a pass of duration_s. */
void op_metrics_observe(struct op_metrics *m, double duration_s);

/* The exposition (Prometheus text format 0.0.4) into out. */
_wur_ int op_metrics_render(const struct op_metrics *m, struct strbuf *out);
