/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A Kubernetes API client on its own HTTP/1.1 transport (OpenSSL loaded for https servers) and
 * jansson, driven from the event loop:
 * configuration from a kubeconfig or from inside a pod, the verbs gpuplane needs (get, list with
 * pagination, create, update with resourceVersion, read-modify-write retried on 409 Conflict, JSON
 * merge patch, delete) and watches (list then watch from the list's resourceVersion, bookmarks,
 * re-list on 410 Gone, reconnect with back-off). Requests are paced by a client-side token bucket.
 * Failures carry the API's Status (reason and message). Bearer tokens never reach a log line or a
 * message. See docs/kube.md.
 *
 * One loop thread: every function and callback runs on the loop that made the client.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "ev.h"

/* Where the service account's files are inside a pod. */
#define KUBE_SERVICEACCOUNT_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* How to reach the API server and who we are. Strings are owned (freed by kube_config_free). */
struct kube_config {
    char *server;     /* "https://host:port" (no trailing slash) */
    char *ca_file;    /* PEM bundle file, or NULL */
    char *ca_pem;     /* PEM bundle (kubeconfig certificate-authority-data, decoded), or NULL */
    char *token;      /* bearer token, or NULL */
    char *token_file; /* read for every request when it changed (rotation), or NULL */
    char *cert_file;  /* client certificate / key files, or NULL */
    char *key_file;
    char *cert_pem; /* client certificate / key data (kubeconfig *-data, decoded), or NULL */
    char *key_pem;
    bool insecure;    /* insecure-skip-tls-verify: only when the loader was allowed to */
    char *namespace_; /* the context's namespace, or the pod's (in-cluster), or "default" */
    char *source;     /* "in-cluster" or the kubeconfig's path: for messages */
};

struct kube_config_options {
    /* The kubeconfig to read (--kubeconfig), or NULL: the first file of $KUBECONFIG, else the
     * in-cluster configuration. */
    const char *kubeconfig;
    /* The in-cluster files' directory; NULL: $GPUPLANE_SERVICEACCOUNT_DIR, else
     * KUBE_SERVICEACCOUNT_DIR. */
    const char *serviceaccount_dir;
    /* Whether insecure-skip-tls-verify: true may be honoured; when false such a kubeconfig is
     * refused with a message saying how to allow it. */
    bool allow_insecure;
};

/*
 * Loads the configuration. A kubeconfig: its current context (cluster, user, namespace); user
 * token, tokenFile, client-certificate(-data), client-key(-data); cluster server,
 * certificate-authority(-data), insecure-skip-tls-verify; relative file paths are relative to the
 * kubeconfig's directory. In-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (an IPv6
 * host in brackets), token, ca.crt and namespace from the service account directory (the token is
 * re-read when it rotates). -EINVAL / -ENOENT with d ("kubeconfig /x: line 3 col 5: ...",
 * "in-cluster: KUBERNETES_SERVICE_HOST is not set") for what is missing or malformed.
 */
_wur_ int kube_config_load(const struct kube_config_options *opts, struct diag *d,
                           struct kube_config **ret);
struct kube_config *kube_config_free(struct kube_config *cfg);
DEFINE_POINTER_CLEANUP(struct kube_config, kube_config_free)

struct kube_client_options {
    double qps;             /* sustained requests per second; 0: 5 (client-go's default) */
    unsigned burst;         /* bucket size; 0: 10 */
    uint32_t timeout_ms;    /* per request (not watches); 0: 30000 */
    const char *user_agent; /* NULL: "gpuplane/<version>" */
};

struct kube_client;

/* A client for cfg (copied). */
_wur_ int kube_client_new(struct ev_loop *loop, const struct kube_config *cfg,
                          const struct kube_client_options *opts, struct kube_client **ret);
/* Cancels every request and watch; their callbacks are not called. Watches stop but stay allocated
 * until kube_watch_free() (before or after this). May be called from inside a callback. */
struct kube_client *kube_client_free(struct kube_client *c);
DEFINE_POINTER_CLEANUP(struct kube_client, kube_client_free)

/* The outcome of a request, valid during the callback only. */
struct kube_response {
    int status;          /* HTTP status; 0 when no response came (transport error, timeout) */
    json_t *body;        /* the decoded JSON body (the object, a List, or a Status), or NULL */
    const char *reason;  /* on failure: the Status' reason ("NotFound", "Conflict",
                            "AlreadyExists", "Expired", ...) or "" */
    const char *message; /* on failure: the Status' message, else the transport error; "" on
                            success */
};

typedef void (*kube_done_fn)(const struct kube_response *res, void *userdata);

/*
 * The verbs. path is an API path ("/apis/resource.k8s.io/v1/resourceslices/x",
 * "/api/v1/namespaces/ns/pods"), optionally with a query ("?fieldSelector=..."); build it with
 * kube_path. Bodies are borrowed. Each returns 0 (the callback will be called exactly once, unless
 * the client is freed first) or a negative errno (no callback).
 */
_wur_ int kube_get(struct kube_client *c, const char *path, kube_done_fn fn, void *userdata);
/* Every page of a collection (limit/continue), as one List in res->body ("items" of all pages,
 * metadata.resourceVersion of the last page). A continue token that expired (410) restarts the
 * list from the beginning once. */
_wur_ int kube_list(struct kube_client *c, const char *path, kube_done_fn fn, void *userdata);
_wur_ int kube_create(struct kube_client *c, const char *path, json_t *obj, kube_done_fn fn,
                      void *userdata);
/* PUT: obj must carry metadata.resourceVersion; 409 Conflict comes back as is. */
_wur_ int kube_update(struct kube_client *c, const char *path, json_t *obj, kube_done_fn fn,
                      void *userdata);
/* application/merge-patch+json */
_wur_ int kube_merge_patch(struct kube_client *c, const char *path, json_t *patch, kube_done_fn fn,
                           void *userdata);
_wur_ int kube_delete(struct kube_client *c, const char *path, kube_done_fn fn, void *userdata);

/*
 * Read-modify-write: GET path, mutate(obj) edits the object in place and returns 0 to write it, 1
 * when nothing needs writing (the callback then gets the object as read, status 200), or a
 * negative errno to give up (status 0, message "mutate: <strerror>"); PUT it; on 409 Conflict start
 * over with a fresh GET, at most 5 times.
 */
typedef int (*kube_mutate_fn)(json_t *obj, void *userdata);
_wur_ int kube_modify(struct kube_client *c, const char *path, kube_mutate_fn mutate,
                      kube_done_fn fn, void *userdata);

enum kube_event {
    KUBE_ADDED,
    KUBE_MODIFIED,
    KUBE_DELETED,
    KUBE_SYNCED, /* the objects reported since the last (re)list are the whole collection */
};

/* obj is borrowed (valid during the call); for KUBE_SYNCED it is the List just read (its
 * metadata.resourceVersion), for KUBE_DELETED the last state known. After a re-list the watch
 * reports what changed as ADDED/MODIFIED/DELETED against what it had reported, then SYNCED. The
 * function may free the watch or the client. */
typedef void (*kube_event_fn)(enum kube_event ev, json_t *obj, void *userdata);

struct kube_watch;

/*
 * Keeps a collection in view: lists path (which may carry fieldSelector/labelSelector in its
 * query), reports the items and SYNCED, then watches from the list's resourceVersion with
 * allowWatchBookmarks=true, following bookmarks; on 410 Gone or an ERROR event it lists again; a
 * broken connection is reopened after a back-off (1 s doubling to 30 s, reset after a healthy
 * minute).
 */
_wur_ int kube_watch_new(struct kube_client *c, const char *path, kube_event_fn fn, void *userdata,
                         struct kube_watch **ret);

/*
 * Reduces each object as it arrives: filter(obj, userdata) returns a new reference to what the
 * caller needs of it (it must keep metadata.name, .namespace and .resourceVersion), or NULL to
 * drop the object. The watch reports and remembers only that, and the pages of a (re)list (100
 * items each) are reduced one by one, so a large collection (a cluster's Nodes) is never held
 * whole in memory.
 * Otherwise as kube_watch_new().
 */
typedef json_t *(*kube_filter_fn)(const json_t *obj, void *userdata);
_wur_ int kube_watch_new_filtered(struct kube_client *c, const char *path, kube_filter_fn filter,
                                  kube_event_fn fn, void *userdata, struct kube_watch **ret);
struct kube_watch *kube_watch_free(struct kube_watch *w);
DEFINE_POINTER_CLEANUP(struct kube_watch, kube_watch_free)

/*
 * The path of a resource or collection: group_version "v1" gives /api/v1, anything else
 * /apis/<group_version>; ns NULL for cluster-scoped resources (or all namespaces); name NULL for
 * the collection. ns and name are checked (DNS label / DNS subdomain) before they become part of
 * a path: -EINVAL with d otherwise. -ENAMETOOLONG when buf is too small.
 */
_wur_ int kube_path(char *buf, size_t n, const char *group_version, const char *resource,
                    const char *ns, const char *name, struct diag *d);
