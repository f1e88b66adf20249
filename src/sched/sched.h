/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A DRA scheduling simulator over the allocator (src/dalloc): Pods (spec.resourceClaims naming
 * ResourceClaims or ResourceClaimTemplates), Nodes, ResourceSlices, DeviceClasses, Namespaces and
 * ResourceClaims in; for each pending pod (no spec.nodeName) in input order: claims generated from
 * templates (named <pod>-<claim>), every Node (by name) tried with the allocator of that node,
 * the feasible nodes scored (earlier firstAvailable sub-requests score higher), the best taken
 * (ties: the first node by name) and its allocation committed as cluster state for the pods after
 * it. An outcome on a node is reused for the next pods with the same claims until the node's
 * devices change. See docs/schedule.md.
 */
#pragma once

#include <jansson.h>

#include "base-diag.h"
#include "base-macro.h"
#include "dalloc.h"

struct sched;

_wur_ int sched_new(const struct dalloc_gates *gates, struct sched **ret);
struct sched *sched_free(struct sched *s);
DEFINE_POINTER_CLEANUP(struct sched, sched_free)

/* The allocator's step budget per pod and node (0: DALLOC_DEFAULT_BUDGET). */
void sched_set_budget(struct sched *s, uint64_t steps);

/* Adds one object (or a List of them); obj is borrowed and must not be modified afterwards. Of
 * Pods and Nodes only the fields the scheduler reads are kept, and what is kept is shared with
 * equal values added before (sched-load.c), so a cluster of thousands of nodes takes a fraction of
 * its size as JSON values. -EINVAL with d for a malformed Pod. */
_wur_ int sched_add(struct sched *s, json_t *obj, struct diag *d);
/*
 * sched_add in two steps, for a loader that prepares objects on two threads
 * (doc_load_string_each_prep): sched_prepare makes what sched_add keeps of obj (borrowed; a new
 * reference, NULL on ENOMEM) with worker 0 or 1's own table of shared values, so calls for the two
 * workers may run at once; sched_add_prepared then adds it (a List's items are prepared there).
 */
json_t *sched_prepare(struct sched *s, unsigned worker, json_t *obj);
_wur_ int sched_add_prepared(struct sched *s, json_t *obj, struct diag *d);
/* The loader's step for sched_prepare, with a JSON List's items read straight into the workers'
 * tables, of Pods and Nodes only the members sched_prepare keeps (doc_prep.table, .keep). */
struct doc_prep sched_doc_prep(struct sched *s);

/* Per-phase times of the last sched_run, in seconds. */
struct sched_stats {
    size_t pods, scheduled;
    size_t evaluations; /* (pod, node) pairs considered */
    size_t attempts;    /* of those, the ones the allocator ran for (no outcome to reuse) */
    double filter_s, score_s, commit_s;
    double total_s; /* scheduling: building the nodes, filter, score, commit (not emit_s) */
    double emit_s;  /* in sched_run_each's emit (printing) */
};

/*
 * Schedules the pending pods. 0 and *ret a JSON array (new reference), one object per pending
 * pod: {"pod": "ns/name", "node": NAME or null, "score": N, "devices": ["claim/request=driver/pool/
 * device", ...], "reasons": {MESSAGE: NODE_COUNT, ...}}; negative errno with d for an error
 * (invalid object, unknown class or template, CEL error). stats may be NULL. progress, when not
 * NULL, is called after each pod with (done, total, arg).
 */
_wur_ int sched_run(struct sched *s, struct diag *d, struct sched_stats *stats,
                    void (*progress)(size_t done, size_t total, void *arg), void *arg,
                    json_t **ret);

/* The same, handing each pod's result to emit (borrowed) as soon as the pod is scheduled, so that
 * no result outlives its pod: a negative return from emit ends the run with that error. */
typedef int (*sched_emit_fn)(void *arg, json_t *result);
_wur_ int sched_run_each(struct sched *s, struct diag *d, struct sched_stats *stats,
                         void (*progress)(size_t done, size_t total, void *arg), void *arg,
                         sched_emit_fn emit, void *emit_arg);

/* The firstAvailable score of allocated claims: for each result whose request is "req/sub", the
 * number of sub-requests of req after sub (the first of n scores n-1). */
long sched_score(json_t *claims);
