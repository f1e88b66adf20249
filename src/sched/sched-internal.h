/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of src/sched share: the simulator's state, the per-node records and small JSON
 * accessors. sched.c drives the run, sched-cluster.c keeps the nodes, their allocators and the
 * committed allocations, sched-reasons.c words and counts why nodes did not fit.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base-jdedup.h"
#include "base-strbuf.h"
#include "sched.h"

/* One Node and what the scheduler knows about it. */
struct snode {
    const char *name;
    json_t *obj;    /* the Node */
    json_t *slices; /* ResourceSlices with spec.nodeName == name */
    json_t *claims; /* allocated claims on pools of this node alone, until `a` is built */
    struct dalloc *a;
    json_t *alloc; /* its last evaluation found the pod fits: the allocated claims */
};

/*
 * A node's last evaluation, apart from the rest of the node in a dense array (sched.states, in
 * the order of sched.nodes): the pod loop reads it for every node of every pod, and 5,000 of these
 * stay in a core's cache where 5,000 whole nodes do not. It holds for pods of `shape` while the
 * node's version and the global version are unchanged: both only grow, so their sum is the same
 * exactly when neither changed.
 */
#define SSTATE_FITS UINT32_MAX
struct sstate {
    uint64_t version; /* bumped on every commit that changes this node's devices */
    uint64_t seen;    /* version + global version when evaluated */
    uint32_t shape;   /* shape id + 1; 0: none kept */
    uint32_t reason;  /* the reason id, or SSTATE_FITS */
    long score;       /* when it fits */
};

struct sched {
    struct dalloc_gates gates;
    uint64_t budget;
    json_t *common;    /* classes, namespaces, slices not bound to one node: every node sees them */
    json_t *slices;    /* ResourceSlices with spec.nodeName */
    json_t *claims;    /* "ns/name" -> ResourceClaim (pending or allocated) */
    json_t *templates; /* "ns/name" -> ResourceClaimTemplate */
    json_t *pods;      /* pending Pods in input order */
    json_t *node_objs; /* Nodes in input order */
    json_t *bound;     /* "ns/name" -> the node a claim was allocated for in this run */
    /* built by sched_run */
    struct snode *nodes; /* sorted by name */
    struct sstate *states;
    size_t n_nodes;
    json_t *node_index;    /* name -> index into nodes */
    json_t *pool_owner;    /* "driver\npool" -> the one node whose slices hold it, or "" */
    json_t *spread_slices; /* node-bound slices of pools several nodes see: every node gets them */
    json_t *shared_claims; /* allocated claims on pools several nodes see */
    uint64_t global_version;
    struct dalloc_cel *cel; /* shared by the nodes' allocators */
    json_t *shapes;         /* shape key -> id */
    json_t *last_shape;     /* the key of the last pod's shape */
    size_t last_shape_id;
    json_t *reasons; /* reason texts by id */
    json_t *reason_ids;
    /* what sched_add keeps, shared (sched-load.c): one table per worker of sched_prepare; the
     * run's own for the claims it commits is the first */
    struct jdedup dedup[2];
};

static inline const char *str_at(json_t *o, const char *a, const char *b)
{
    json_t *v = json_object_get(o, a);

    if (b)
        v = json_object_get(v, b);
    return json_string_value(v);
}

static inline int key_of(json_t *obj, char *buf, size_t n)
{
    const char *ns = str_at(obj, "metadata", "namespace");
    const char *name = str_at(obj, "metadata", "name");

    if (!name)
        return -EINVAL;
    if ((size_t)snprintf(buf, n, "%s/%s", ns ? ns : "default", name) >= n)
        return -ENAMETOOLONG;
    return 0;
}

static inline bool allocated(json_t *claim)
{
    return json_object_get(json_object_get(claim, "status"), "allocation") != NULL;
}

/* sched-load.c (and sched_prepare) */
/* Drops the tables of kept values (after the last sched_add; sched_run starts a table of its own
 * for the claims it commits). */
void sched_keep_done(struct sched *s);
/* Of claims allocated by dalloc_try (taken), only each one's status.allocation, in an object
 * {"status": {"allocation": ...}} per claim: what a node keeps to reuse for the next pods of the
 * same shape, without a copy of each claim. NULL on ENOMEM. */
json_t *sched_keep_allocations(json_t *claims);
/* Claims about to be committed, made by allocated_copies (taken: an array, NULL passes through):
 * each one's status.allocation shared with the equal values committed before (the run's own
 * table: the node selector of a node, the strings of the results). NULL on ENOMEM. */
json_t *sched_keep_claims(struct sched *s, json_t *claims);

/* sched-cluster.c */
/* Builds s->nodes (sorted by name) and hands them their slices and allocated claims. */
_wur_ int sched_nodes_build(struct sched *s);
void sched_nodes_free(struct sched *s);
/* The node's allocator, made on first use. */
_wur_ int sched_node_allocator(struct sched *s, struct snode *sn, struct diag *d);
/* Makes the claims allocated on sn the cluster's state: sn's allocator (or every node's, for
 * devices several nodes see) holds them, and named claims are bound to sn. */
_wur_ int sched_commit(struct sched *s, struct snode *sn, json_t *claims, struct diag *d);

/* sched-reasons.c */
/* The id of the no-fit message msg (written for node `node` about the claims `mine`), with the
 * node and the claims' names abstracted so that pods of one shape on any node share it. */
_wur_ int sched_reason_id(struct sched *s, char *msg, const char *node, json_t *mine, size_t *ret);
/* The id of a fixed reason text. */
_wur_ int sched_reason_fixed(struct sched *s, const char *text, size_t *ret);

/* A node where a claim of the pod was allocated earlier in the run is the only one it may use. */
#define SCHED_REASON_PINNED "a claim of the pod is allocated for another node"

/* One (reason id, node count) pair per distinct reason of a pod. */
struct tally {
    size_t id, n;
};
_wur_ int sched_tally_add(struct tally **t, size_t *n, size_t id);
/* {reason: node count}, with the names of the pod's claims (new reference, NULL on ENOMEM). */
json_t *sched_tally_json(struct sched *s, const struct tally *t, size_t n, json_t *mine);
/* kube-scheduler's message for a pod no node of n_nodes fits, from the reasons in t: "0/8 nodes
 * are available: 1 invalid resource pools were encountered, 7 cannot allocate all claims." —
 * each reason in the scheduler's words (the allocator's detail dropped), counted, sorted as
 * strings. A new reference, NULL on ENOMEM. */
json_t *sched_tally_message(struct sched *s, const struct tally *t, size_t n, json_t *mine,
                            size_t n_nodes);
