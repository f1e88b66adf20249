/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Node labelling: the labels that steer the operands onto GPU nodes, by NVIDIA's rules
 * (gpu-operator.md §2), computed as a JSON merge patch of the node's metadata from its labels
 * alone, so the daemon writes a node only when something changes and never touches labels of
 * other controllers.
 *
 *  - A node has an NVIDIA GPU when one of NFD's PCI labels (feature.node.kubernetes.io/
 *    pci-10de.present, pci-0302_10de.present, pci-0300_10de.present) is "true"; it then gets
 *    nvidia.com/gpu.present=true. A node that had it and lost the PCI label gets
 *    nvidia.com/gpu.present=false and loses its deploy labels.
 *  - A GPU node (container workload) gets nvidia.com/gpu.deploy.<x>=true for every component
 *    gpuplane deploys (driver, container-toolkit, operator-validator, device-plugin,
 *    dcgm-exporter, gpu-feature-discovery, and dra-driver while the DRA driver is enabled), only
 *    where the label is absent or empty: any other value (false, pre-installed, a paused state)
 *    is the admin's or another controller's and stays.
 *  - nvidia.com/gpu.deploy.operands=false removes every deploy label; so does a node without GPU.
 *  - With sandbox workloads on, a node whose nvidia.com/gpu.workload.config (or the default
 *    workload) is a VM one gets none of the container labels: gpuplane deploys no VM operands.
 *
 * Unlike NVIDIA's operator, the labels the operator added are listed in the node's annotation
 * gpuplane.dev/operator-labels, and without a ClusterPolicy (it was deleted) exactly those are
 * removed again (NVIDIA leaves them, gpu-operator#1391); a label whose value someone changed
 * after the operator wrote it is no longer listed and stays.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base-macro.h"
#include "operator-policy.h"

#define OP_LABEL_GPU_PRESENT "nvidia.com/gpu.present"
#define OP_LABEL_DEPLOY_PREFIX "nvidia.com/gpu.deploy."
#define OP_LABEL_OPERANDS "nvidia.com/gpu.deploy.operands"
#define OP_LABEL_WORKLOAD "nvidia.com/gpu.workload.config"
#define OP_ANNOTATION_LABELS "gpuplane.dev/operator-labels"
#define OP_NFD_PREFIX "feature.node.kubernetes.io/"

struct op_label_config {
    bool policy;     /* an active ClusterPolicy exists; false: remove what the operator added */
    bool dra_driver; /* spec.draDriver.enabled */
    bool sandbox;    /* spec.sandboxWorkloads.enabled */
    enum op_workload default_workload; /* spec.sandboxWorkloads.defaultWorkload */
};

/* Whether labels (a node's metadata.labels, may be NULL) carry an NFD NVIDIA PCI label. */
bool op_node_has_gpu(const json_t *labels);

/* Whether labels say nvidia.com/gpu.present=true. */
bool op_node_gpu_present(const json_t *labels);

/* Whether labels hold any feature.node.kubernetes.io/ label (NFD runs on the node). */
bool op_node_has_nfd(const json_t *labels);

/*
 * The driver image's OS suffix of a node, as NVIDIA forms it from NFD's
 * feature.node.kubernetes.io/system-os_release.ID and .VERSION_ID ("ubuntu22.04"; the major
 * version only for rhel, rocky and ol). false when either label is missing or the result would
 * not be a valid image tag.
 */
bool op_node_os_tag(const json_t *labels, char *buf, size_t n);

/*
 * The merge patch that brings node (a Node object, or one trimmed to metadata.name, .labels and
 * .annotations) to the rules above: {"metadata": {"labels": {...}, "annotations": {...}}} with
 * only the keys that change (null removes), or NULL in *ret when nothing changes. -ENOMEM.
 */
_wur_ int op_node_label_patch(const json_t *node, const struct op_label_config *cfg, json_t **ret);

/* The deploy labels gpuplane writes on a GPU node, NULL-terminated ("nvidia.com/gpu.deploy.driver",
 * ...); dra-driver last. */
extern const char *const op_deploy_labels[];
