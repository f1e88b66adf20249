/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The exporter daemon's view of Kubernetes, for --kubernetes: which pod uses which device, from the
 * kubelet's pod-resources API on its own timer (never inside a scrape), and, through one API
 * client, the pods' objects (UIDs and labels: --kubernetes-enable-pod-labels,
 * --kubernetes-enable-pod-uid, --kubernetes-virtual-gpus) and NVIDIA's ResourceSlices
 * (--kubernetes-enable-dra). A kubelet or API server that is missing or down only takes labels
 * away, never series; each change is logged once. Part of the daemon (it logs); exporter-kube.c.
 */
#pragma once

#include <stdbool.h>

#include "ev.h"
#include "exporter-options.h"
#include "exporter-podmeta.h"
#include "exporter-pods.h"
#include "exporter-slices.h"
#include "kube.h"
#include "rpc.h"

/*
 * What the pod and ResourceSlice caches share (exporter-podmeta.c, exporter-slices.c): the API path
 * of collection (a path without query) on one node: a fieldSelector of selector (NULL: none) and
 * spec.nodeName=<node_name> (when node_name is neither NULL nor ""), comma-joined and
 * percent-encoded; no query when both are missing. -ENAMETOOLONG when buf is too small.
 */
_wur_ int exporter_watch_path(const char *collection, const char *selector, const char *node_name,
                              char *buf, size_t n);
/*
 * Starts a watch of exporter_watch_path(collection, selector, node_name) through kube (borrowed),
 * reporting to fn with userdata, into *ret. -EINVAL with d for a node name too long, else
 * kube_watch_new()'s error with d ("cannot watch the <what>").
 */
_wur_ int exporter_watch_start(struct kube_client *kube, const char *collection,
                               const char *selector, const char *node_name, const char *what,
                               kube_event_fn fn, void *userdata, struct kube_watch **ret,
                               struct diag *d);

struct exporter_kube {
    const struct exporter_options *o;
    struct ev_loop *loop;
    /* The kubelet. */
    struct ev_timer *pods_timer;
    struct rpc_client *kubelet;
    bool pods_pending, kubelet_up;
    struct exporter_pods pods; /* its last answer; empty while it does not answer */
    char **extra_resources;    /* --nvidia-resource-names, NULL-terminated */
    /* The API server: one configuration and one client for every watch. */
    struct kube_config *kcfg;
    struct kube_client *client;
    struct exporter_allowlist allowlist; /* --kubernetes-pod-label-allowlist-regex, compiled */
    struct exporter_podmeta *podmeta;    /* the pods' UIDs and labels, or NULL */
    struct exporter_slices *slices;      /* NVIDIA's DRA devices, or NULL */
    struct ev_timer *late_timer;
    bool podmeta_listed, podmeta_late, slices_listed, slices_late;
};

/* Starts what the options ask for on loop (o is borrowed and must outlive k). Only -ENOMEM fails:
 * an API server that cannot be configured is a warning, and the exporter runs on without it. */
_wur_ int exporter_kube_start(struct exporter_kube *k, struct ev_loop *loop,
                              const struct exporter_options *o);
/* Stops and frees everything, before the loop is freed; the pods and caches read empty after. */
void exporter_kube_stop(struct exporter_kube *k);
