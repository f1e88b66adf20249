/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the renderer's files share: the render context, small builders for Kubernetes objects
 * (metadata, RBAC, containers, volumes) and the DaemonSet/pod-template builder every operand state
 * uses. Builders return new references (NULL on ENOMEM); functions that add to an object return 0
 * or -ENOMEM. "Steals" in a comment means the callee takes the reference, also on failure.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "operator-policy-internal.h"
#include "operator-render.h"

/* Where the validation status files are, on the host and in every container that reads them. */
#define OP_VALIDATIONS_DIR "/run/nvidia/validations"
/* The gpuplane binary in the gpuplane image. */
#define OP_GPUPLANE "gpuplane"
/* The user the gpuplane image runs as when a component needs no root (deploy/Dockerfile). */
#define OP_NONROOT_UID 65532

struct rctx {
    const struct op_policy *p;
    const struct op_render_env *env;
    const char *ns;
    json_t *owner_refs; /* [ownerReference] or NULL: no owner */
    /* A disabled state is rendered only for the identity of its objects: images that cannot be
     * composed are left empty instead of failing, and the DaemonSet is always there. */
    bool identity_only;
    char *validator_image; /* the image of every init container that waits or validates */
    struct diag *d;
};

/* Every state: fills objects (an empty array) in apply order. */
typedef int (*op_state_fn)(struct rctx *c, json_t *objects);

int op_state_prerequisites(struct rctx *c, json_t *objects);
int op_state_operator_metrics(struct rctx *c, json_t *objects);
int op_state_driver(struct rctx *c, json_t *objects);
int op_state_toolkit(struct rctx *c, json_t *objects);
int op_state_validation(struct rctx *c, json_t *objects);
int op_state_device_plugin(struct rctx *c, json_t *objects);
int op_state_dra_driver(struct rctx *c, json_t *objects);
int op_state_dcgm_exporter(struct rctx *c, json_t *objects);
int op_state_gfd(struct rctx *c, json_t *objects);

/* Appends obj to objects (steals; NULL obj is -ENOMEM). */
int r_push(json_t *objects, json_t *obj);
/* Sets key in obj (steals; NULL value is -ENOMEM). */
int r_set(json_t *obj, const char *key, json_t *value);

/* {apiVersion, kind, metadata: {name, namespace (when namespaced), labels (steals, may be
 * NULL)}}. */
json_t *r_object(const struct rctx *c, const char *api_version, const char *kind, const char *name,
                 bool namespaced, json_t *labels);

/* RBAC and accounts, named after the operand. rules: an array (steals). */
json_t *r_service_account(const struct rctx *c, const char *name, json_t *labels);
json_t *r_role(const struct rctx *c, const char *kind, const char *name, json_t *rules);
/* A RoleBinding or ClusterRoleBinding of ServiceAccount sa in the operator namespace to role. */
json_t *r_binding(const struct rctx *c, const char *kind, const char *name, const char *role,
                  const char *sa);
/* A Role (role_kind "Role") or ClusterRole named name with rules (steals), then its RoleBinding or
 * ClusterRoleBinding of the same name to ServiceAccount sa, both appended to objects; labels
 * (steals, may be NULL) on both. */
int r_rbac(const struct rctx *c, const char *role_kind, const char *name, const char *sa,
           json_t *labels, json_t *rules, json_t *objects);
/* One policy rule: group ("" for core), resources and verbs as NULL-terminated lists. */
json_t *r_rule(const char *group, const char *const *resources, const char *const *verbs);

/* The image of a component (see op_component_image()), or "" for a disabled state's identity. */
int r_image(struct rctx *c, enum op_component comp, char **ret);

/* Containers. */
json_t *r_container(const char *name, const char *image, enum op_pull_policy pull);
/* Sets an env var by name (replacing one of that name where it is, else appending). */
int r_env(json_t *ctr, const char *name, const char *value);
/* An env var from the downward API (fieldRef fieldPath). */
int r_env_field(json_t *ctr, const char *name, const char *field_path);
/* A policy's env list applied with r_env (NULL: nothing). */
int r_env_list(json_t *ctr, const json_t *env);
/* The value of env var name as set in ctr, or NULL. */
const char *r_env_get(const json_t *ctr, const char *name);
/* A volume mount; propagation NULL for none, sub_path NULL for the whole volume. */
int r_mount(json_t *ctr, const char *volume, const char *path, bool read_only,
            const char *propagation, const char *sub_path);
/* securityContext presets. */
json_t *r_sc_privileged(void);
/* Root (the component writes sockets or files of the kubelet's), no privilege, no capability. */
json_t *r_sc_root(void);
/* The image's unprivileged user. */
json_t *r_sc_nonroot(void);

/* Pod spec parts. */
int r_hostpath_volume(json_t *pod, const char *name, const char *path, const char *type);
int r_configmap_volume(json_t *pod, const char *name, const char *configmap, int mode,
                       const char *key);
int r_add_container(json_t *pod, json_t *ctr);
int r_add_init_container(json_t *pod, json_t *ctr);
/* Appends pull secrets (names) not yet in pod.imagePullSecrets. */
int r_pull_secrets(json_t *pod, const json_t *secrets);
/* A component's resources, args and env applied to its main container. */
int r_apply_component(json_t *ctr, const struct op_component_spec *s);

/* A DaemonSet of the contract: name, selector labels (steals), node selector
 * nvidia.com/gpu.deploy.<deploy>=true, service account, toleration, priority class. pod and
 * tmpl_meta point into the result (borrowed). */
struct r_ds {
    json_t *ds;
    json_t *pod;       /* spec.template.spec */
    json_t *tmpl_meta; /* spec.template.metadata */
};
int r_ds_new(struct rctx *c, const char *name, json_t *selector, const char *deploy, const char *sa,
             struct r_ds *ret);
/* r is the state's result so far: when < 0, releases ds and returns r. Else spec.daemonsets
 * applied (strategy, priority class, tolerations, pod security context, labels, annotations) and
 * the runtime class when runtime_class; then appends the DaemonSet to objects unless there are no
 * GPU nodes. Consumes ds->ds either way. */
int r_ds_finish(struct rctx *c, struct r_ds *ds, int r, bool runtime_class, json_t *objects);
void r_ds_release(struct r_ds *ds);

/* An init container (the validator image) that waits for the named status files, NULL-ended. */
json_t *r_wait_container(struct rctx *c, const char *name, const char *const *files);
/* The validations hostPath volume ("run-nvidia-validations"). */
int r_validations_volume(json_t *pod);
/* HOST_ROOT on every container of a pod that mounts the host's root, when rootFS is not "/". */
int r_host_root_env(struct rctx *c, json_t *pod);
