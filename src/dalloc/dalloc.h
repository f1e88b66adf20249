/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuplane's DRA structured allocator: given ResourceSlices, DeviceClasses and ResourceClaims
 * (resource.k8s.io/v1, as jansson values) and a node, finds devices for the claims that have no
 * status.allocation yet, all together (as for one pod), the way Kubernetes 1.36's scheduler does:
 * pools visible to the node in (driver, pool) order, first-fit depth-first search over
 * combinations, class and request CEL selectors, matchAttribute/distinctAttribute constraints,
 * firstAvailable sub-requests, allocationMode All, adminAccess, device taints and tolerations
 * (DRADeviceTaints), shared counters and per-device node selection of partitionable devices
 * (DRAPartitionableDevices), binding conditions (DRADeviceBindingConditions; with
 * DRAResourceClaimDeviceStatus on too, every new allocation gets an allocationTimestamp, from
 * SOURCE_DATE_EPOCH when set) and consumable capacity (DRAConsumableCapacity:
 * multi-allocatable devices shared by claims, capacity requests rounded by request policies, with
 * exact arithmetic on any quantity up to 10^28 units). Fields of a gate that is off are
 * ignored or refused as Kubernetes does. Claims that already carry an allocation are the
 * cluster's state: their devices are in use. See docs/dalloc.md.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base-diag.h"
#include "base-macro.h"

/* Feature gates (Kubernetes' names) with their 1.35 defaults. */
struct dalloc_gates {
    bool admin_access;        /* DRAAdminAccess, on */
    bool prioritized_list;    /* DRAPrioritizedList, on */
    bool device_taints;       /* DRADeviceTaints, off */
    bool partitionable;       /* DRAPartitionableDevices, off */
    bool consumable_capacity; /* DRAConsumableCapacity, off */
    bool binding_conditions;  /* DRADeviceBindingConditions, off */
    bool device_status;       /* DRAResourceClaimDeviceStatus, on (allocationTimestamp only) */
    bool extended_resource;   /* DRAExtendedResource, off (no effect here) */
};

void dalloc_gates_default(struct dalloc_gates *g);
/* Applies "Name=true|false,..." on top of *g. -EINVAL with d naming an unknown gate or value. */
_wur_ int dalloc_gates_parse(struct dalloc_gates *g, const char *spec, struct diag *d);

/* Default number of search steps (candidate devices tried) before giving up. */
#define DALLOC_DEFAULT_BUDGET ((uint64_t)1000000)
/* Most claims one allocation handles; most devices one claim gets (Kubernetes' limit). */
#define DALLOC_MAX_CLAIMS 256
#define DALLOC_MAX_DEVICES_PER_CLAIM 32

struct dalloc;

/* A new, empty allocator for node `node` (copied). */
_wur_ int dalloc_new(const char *node, const struct dalloc_gates *gates, struct dalloc **ret);
struct dalloc *dalloc_free(struct dalloc *a);
DEFINE_POINTER_CLEANUP(struct dalloc, dalloc_free)

/*
 * The CEL machinery (environment, compiled-selector cache, evaluator), which allocators of one
 * thread may share so that each selector is compiled once for all of them: dalloc_set_cel takes a
 * reference, the allocator drops it when freed. Without one an allocator makes its own.
 */
struct dalloc_cel;
_wur_ int dalloc_cel_new(struct dalloc_cel **ret);
struct dalloc_cel *dalloc_cel_unref(struct dalloc_cel *c);
DEFINE_POINTER_CLEANUP(struct dalloc_cel, dalloc_cel_unref)
void dalloc_set_cel(struct dalloc *a, struct dalloc_cel *c);

/* The step budget (0: DALLOC_DEFAULT_BUDGET). */
void dalloc_set_budget(struct dalloc *a, uint64_t steps);
/* The steps (candidate devices tried) of the last dalloc_run or dalloc_try. */
uint64_t dalloc_steps(const struct dalloc *a);

/*
 * Adds one object: a ResourceSlice, DeviceClass, ResourceClaim, Node (its labels feed node
 * selectors), Namespace (without the label resource.kubernetes.io/admin-access: "true" its claims
 * may not ask for admin access; namespaces not given are not checked), ResourceClaimTemplate (a
 * pending claim named after it, as a pod referencing it would get) or a List of them. obj is
 * borrowed (json_incref'd) and must not be modified; `where` names the source for messages (a file
 * name, may be NULL). Validates the object: -EINVAL with d naming the object and field
 * ("ResourceClaim default/c1: spec.devices.requests[0].exactly.count: must be >= 1"); -ENOTSUP for
 * a field gpuplane cannot allocate yet while its gate is on.
 */
_wur_ int dalloc_add(struct dalloc *a, json_t *obj, struct diag *d);

/*
 * Why there is no solution on the node, as kube-scheduler words it: the message of a run that
 * returns 1 starts with one of these. DALLOC_REASON_NO_FIT is followed by ": " and which
 * claim/request the search got furthest with; DALLOC_REASON_INVALID_POOLS stands alone (upstream's
 * ErrFailedAllocationOnNode: no solution without the pools the node sees that are invalid).
 */
#define DALLOC_REASON_NO_FIT "cannot allocate all claims"
#define DALLOC_REASON_INVALID_POOLS "invalid resource pools were encountered"

/*
 * Allocates the pending claims (those without status.allocation) in input order; call it once,
 * after every object was added. Returns 0 and *ret a JSON array of those claims with
 * status.allocation filled (new reference); 1 when there is no solution on this node (d says why,
 * starting with a DALLOC_REASON_*; ret untouched); -EINVAL, -EPERM (admin access outside an admin
 * namespace), -ENOENT (unknown class), -EDOM (CEL compile or runtime error), -E2BIG (step budget),
 * -ENOTSUP (a consumable capacity beyond 10^28 units), -ENOMEM, with d, for errors.
 */
_wur_ int dalloc_run(struct dalloc *a, struct diag *d, json_t **ret);

/*
 * Incremental use, for a scheduler trying pod after pod on one node: add the node's state (slices,
 * classes, the Node, Namespaces, allocated claims) once, then dalloc_try and dalloc_commit any
 * number of times. Pools, compiled selectors and device values are built on the first call and
 * kept; dalloc_add is refused after that (-EBUSY).
 *
 * dalloc_try allocates the pending ResourceClaims of the array `claims` (borrowed) together, as
 * dalloc_run would, without changing the allocator's state: same returns as dalloc_run. Pending
 * claims added with dalloc_add are not allowed alongside (-EINVAL).
 *
 * dalloc_commit makes the devices of allocated claims (an array of ResourceClaims with
 * status.allocation, such as dalloc_try returned, possibly from another node's allocator) in use;
 * results naming devices this node does not see are skipped. -EINVAL for a claim without
 * status.allocation.
 */
_wur_ int dalloc_try(struct dalloc *a, json_t *claims, struct diag *d, json_t **ret);
_wur_ int dalloc_commit(struct dalloc *a, json_t *claims, struct diag *d);
