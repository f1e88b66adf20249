/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node filters of Kubernetes' scheduler that come before its DynamicResources plugin and that a
 * DRA what-if needs: NodeUnschedulable (spec.unschedulable), TaintToleration (NoSchedule and
 * NoExecute taints against the pod's tolerations) and NodeAffinity (spec.nodeSelector and the
 * required node affinity). They run in the scheduler's order and the first that rejects names the
 * reason, in the scheduler's own words, so that reasons can be counted across nodes the way
 * `kubectl describe pod` shows them. See docs/schedule.md, "Node filters".
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define SCHED_REASON_UNSCHEDULABLE "node(s) were unschedulable"
#define SCHED_REASON_AFFINITY "node(s) didn't match Pod's node affinity/selector"
/* The taint reason is "node(s) had untolerated taint {KEY: VALUE}"; this one stands in for it
 * when there is no buffer to write it into. */
#define SCHED_REASON_TAINT "node(s) had untolerated taint"

/* A buffer of this size holds every reason in full for keys and values of valid length. */
#define SCHED_NODE_REASON_MAX 512

/*
 * Whether pod (a v1 Pod) may run on node (a v1 Node) by the scheduler's NodeUnschedulable,
 * TaintToleration and NodeAffinity filters, in that order. true (and *reason NULL), or false with
 * *reason naming why: a static string or buf (n bytes, truncated to fit; buf may be NULL when n is
 * 0, then the reason is a static text without the details). Both objects are borrowed and only
 * read; nothing is allocated. A pod or node field of the wrong type or invalid for the API (an
 * unknown operator, a missing value) makes the node not fit, with a reason "invalid pod: PATH:
 * PROBLEM" or "invalid node: PATH: PROBLEM"; the pod's fields are checked whatever the node, so an
 * invalid pod fits no node.
 */
bool sched_node_fits(const json_t *pod, const json_t *node, char *buf, size_t n,
                     const char **reason);

/* Whether node matches a core v1 NodeSelector (any of its nodeSelectorTerms), such as an allocated
 * claim's status.allocation.nodeSelector. */
bool sched_node_selector_matches(const json_t *selector, const json_t *node);

/* The scheduler's reason for a node outside an allocated claim's node selector. */
#define SCHED_REASON_CLAIM_NODE "resourceclaim not available on the node"
