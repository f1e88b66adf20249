/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pod metadata from the API server, for `gpuplane exporter --kubernetes` with
 * --kubernetes-enable-pod-labels and --kubernetes-enable-pod-uid: the pod-resources API names the
 * pods using each GPU but has neither their UIDs nor their labels, so the node's pods are watched
 * (fieldSelector spec.nodeName, as dcgm-exporter's pod informer) and kept by namespace/name: the
 * UID and the labels as they will be exported, already passed through the allowlist and renamed.
 *
 * The pure parts, label names, the allowlist and one pod's labels, need no network; the cache is
 * fed by exporter_podmeta_apply(), which the watch calls for every event and tests call directly.
 * Nothing here logs above debug: what is worth a warning is handed back to the daemon.
 * exporter-podmeta.c; docs/exporter.md, "Pod labels and UIDs".
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base.h"
#include "exporter-internal.h"
#include "kube.h"

/* ---- label names ---- */

/*
 * dcgm-exporter's SanitizeLabelName: every character outside [a-zA-Z0-9_] becomes '_', a UTF-8
 * sequence counting as one character and each byte of a malformed one as one (Go's regexp
 * ReplaceAllString). *ret is a new string the caller frees. -ENOMEM.
 */
_wur_ int exporter_podmeta_sanitize(const char *key, char **ret);

/* Whether a sanitized name can be a Prometheus label name of ours: [a-zA-Z_][a-zA-Z0-9_]*, not
 * starting with "__" (reserved). */
bool exporter_podmeta_name_ok(const char *name);

/* ---- the allowlist (--kubernetes-pod-label-allowlist-regex) ---- */

/* The most patterns kept; later ones are refused. */
#define EXPORTER_ALLOWLIST_MAX 256

struct cel_regex;

struct exporter_allowlist {
    struct cel_regex **v; /* owned */
    size_t n;
};

void exporter_allowlist_init(struct exporter_allowlist *al);
void exporter_allowlist_release(struct exporter_allowlist *al);

/*
 * Compiles pattern (RE2 syntax, as Go's regexp.Compile takes it; PCRE2 is loaded on the first
 * pattern) and keeps it. -EINVAL with the reason in d for a pattern Go would refuse (bad syntax,
 * malformed UTF-8) or one past EXPORTER_ALLOWLIST_MAX: the list is unchanged, and the caller goes
 * on without it as dcgm-exporter does. -ENOMEM.
 */
_wur_ int exporter_allowlist_add(struct exporter_allowlist *al, const char *pattern,
                                 struct diag *d);

/* Whether the label key passes: every key when the list is empty (or al is NULL), else a key that
 * some pattern matches anywhere in it (Go's MatchString: unanchored). A match that hits PCRE2's
 * limits counts as no match. */
bool exporter_allowlist_pass(const struct exporter_allowlist *al, const char *key);

/* ---- one pod's labels ---- */

/* The most labels kept per pod, in name order; the rest are left out. */
#define EXPORTER_POD_LABELS_MAX 100

/* A pod's labels as exported. key and value point into strings; all owned. */
struct exporter_pod_labels {
    struct exporter_label *v; /* sorted by key, keys distinct */
    size_t n;
    char *strings;
};

/*
 * Builds the exported labels from a pod's metadata.labels (an object of strings; NULL or anything
 * else counts as none): the keys the allowlist passes, sanitized; dropped are names that are not
 * valid (exporter_podmeta_name_ok) and, all of them, names that two or more keys sanitize to
 * ("app.kubernetes.io/name" and "app_kubernetes_io/name"), so that which one wins never depends on
 * order. Values that are not strings are skipped. -ENOMEM; *ret is written only on success.
 */
_wur_ int exporter_pod_labels_build(const struct exporter_allowlist *al, json_t *labels,
                                    struct exporter_pod_labels *ret);
void exporter_pod_labels_release(struct exporter_pod_labels *l);

/* ---- the cache ---- */

/* The most pods kept (a watch of a whole cluster when NODE_NAME is not set); more are counted in
 * exporter_podmeta_status.left_out. */
#define EXPORTER_PODMETA_MAX_PODS ((size_t)1 << 20)

/* What the cache holds after a (re)list: for the daemon's log. */
struct exporter_podmeta_status {
    size_t pods;
    size_t left_out; /* pods not kept because the cache was full, since the watch started */
};

struct exporter_podmeta_options {
    bool labels; /* keep labels (--kubernetes-enable-pod-labels); else only UIDs */
    const struct exporter_allowlist *allowlist; /* borrowed, must outlive the cache; NULL: all */
    size_t max_pods;                            /* 0: EXPORTER_PODMETA_MAX_PODS */
    /* Called at every SYNCED of the watch (the first list and each re-list); may be NULL. */
    void (*synced)(const struct exporter_podmeta_status *st, void *userdata);
    void *userdata;
};

/* One pod as the cache knows it; borrowed until the next change of the cache. */
struct exporter_podmeta_pod {
    const char *uid; /* "" when the object has none */
    const struct exporter_label *labels;
    size_t n_labels; /* 0 unless labels are kept */
};

struct exporter_podmeta;

/* A cache with options o (copied; the allowlist stays borrowed). -ENOMEM. */
_wur_ int exporter_podmeta_new(const struct exporter_podmeta_options *o,
                               struct exporter_podmeta **ret);
/* Stops the watch, frees everything; NULL allowed. Returns NULL. */
struct exporter_podmeta *exporter_podmeta_free(struct exporter_podmeta *pm);
DEFINE_POINTER_CLEANUP(struct exporter_podmeta, exporter_podmeta_free)

/*
 * One event of the pods' watch (pod is borrowed): ADDED and MODIFIED put the pod, DELETED removes
 * it, SYNCED marks the cache synced and calls o.synced. -EINVAL for a pod without a namespace or a
 * name (nothing changes), -ENOSPC when the cache is full (counted), -ENOMEM.
 */
_wur_ int exporter_podmeta_apply(struct exporter_podmeta *pm, enum kube_event ev, json_t *pod);

/* The pod namespace/name: true and *ret filled, or false when the cache does not have it. */
bool exporter_podmeta_find(const struct exporter_podmeta *pm, const char *namespace_,
                           const char *name, struct exporter_podmeta_pod *ret);

/* Whether the watch has delivered a whole list at least once. */
bool exporter_podmeta_synced(const struct exporter_podmeta *pm);
size_t exporter_podmeta_count(const struct exporter_podmeta *pm);

/*
 * The API path of the pods watched: /api/v1/pods?fieldSelector=spec.nodeName%3D<node> (the node
 * name percent-encoded), or every pod of the cluster when node_name is NULL or "".
 * -ENAMETOOLONG when buf is too small.
 */
_wur_ int exporter_podmeta_path(const char *node_name, char *buf, size_t n);

/*
 * Starts feeding the cache from the API server through kube (borrowed: the exporter's one client,
 * which must outlive the cache's watch): a watch of exporter_podmeta_path(node_name). -EINVAL with
 * d for a node name too long, -ENOMEM. The watch retries on its own once started.
 */
_wur_ int exporter_podmeta_watch(struct exporter_podmeta *pm, struct kube_client *kube,
                                 const char *node_name, struct diag *d);
