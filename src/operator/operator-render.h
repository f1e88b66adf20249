/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The renderer: a policy in, the Kubernetes objects of every state out, in apply order. Pure: no
 * API calls, no clock, no randomness, so the same policy and environment give byte-identical
 * objects (the operator compares hashes of them; `gpuplane operator render` prints them).
 *
 * States, in order: pre-requisites, state-operator-metrics, state-driver, state-container-toolkit,
 * state-operator-validation, state-device-plugin, state-dra-driver, state-dcgm-exporter,
 * gpu-feature-discovery. Every object carries the annotation nvidia.com/last-applied-hash
 * (op_object_hash of the object without it) and, when an owner is given, a controller owner
 * reference to the ClusterPolicy.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base-diag.h"
#include "base-macro.h"
#include "operator-policy.h"

#define OP_HASH_ANNOTATION "nvidia.com/last-applied-hash"

struct op_render_env {
    const char *namespace_; /* where the operands go */
    /* The operator pod's env, for image fallbacks (tests pass their own); NULL: nothing is set. */
    const char *(*getenv)(const char *name);
    /* false: the DaemonSets are left out (NVIDIA creates none while no node has
     * nvidia.com/gpu.present=true); the other objects of the states are still rendered. */
    bool gpu_nodes;
    const char *os_tag; /* driver image suffix ("ubuntu22.04") or NULL */
};

/*
 * One state. objects: a JSON array in apply order. For a disabled state, every object the state
 * can own under any policy (so the operator can delete them by apiVersion/kind/namespace/name);
 * their content is complete only as far as identity goes.
 *
 * absent: for an enabled state, the objects the state owns under other settings but not under this
 * policy (identity only), e.g. the exporter's read-pods ClusterRole once pod labels are turned off:
 * the operator deletes them (NotFound ignored) to keep RBAC least-privileged. Never the namespace,
 * and no DaemonSet while there is no GPU node. Empty for a disabled state.
 */
struct op_state {
    const char *name; /* static */
    bool enabled;
    json_t *objects; /* owned */
    json_t *absent;  /* owned, never NULL */
};

struct op_rendered {
    struct op_state *states; /* owned, n entries, in apply order */
    size_t n;
};

/*
 * Renders every state. owner: the ClusterPolicy object (metadata.name and metadata.uid are used)
 * or NULL for no owner reference (also when it has no uid). On success *ret is filled and must be
 * released with op_rendered_release(); on failure (-EINVAL: an image that cannot be composed, a
 * name that is not valid; -ENOMEM) d says why and *ret is untouched.
 */
_wur_ int op_render(const struct op_policy *p, const struct op_render_env *env, const json_t *owner,
                    struct op_rendered *ret, struct diag *d);

void op_rendered_release(struct op_rendered *r);

/* The state called name, or NULL. */
const struct op_state *op_rendered_state(const struct op_rendered *r, const char *name);

/*
 * The value of nvidia.com/last-applied-hash for obj: a hash of obj's canonical JSON (sorted keys,
 * compact) without metadata.annotations["nvidia.com/last-applied-hash"] and without status. Written
 * into buf (a decimal or hex string, NUL-terminated); returns buf. Stable across runs and builds.
 */
const char *op_object_hash(const json_t *obj, char buf[static 24]);
