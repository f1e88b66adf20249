/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The exporter daemon's view of Kubernetes (exporter-kube.h): the kubelet's pod-resources List on a
 * timer, and one API client for the watches of pods (exporter-podmeta.c) and of NVIDIA's
 * ResourceSlices (exporter-slices.c). The API server's configuration is loaded as the other
 * gpuplane daemons load it without --kubeconfig ($KUBECONFIG, else in-cluster); without one the
 * exporter says what will be missing and runs on, as dcgm-exporter does.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporter-kube.h"

#define POD_RESOURCES_LIST "/v1.PodResourcesLister/List"
#define POD_RESOURCES_TIMEOUT_MS 10000u
#define POD_RESOURCES_MAX_RECV ((size_t)64 << 20) /* big nodes answer more than gRPC's 4 MiB */
/* When the API server has not listed what is watched by then, say so. */
#define LATE_MS 10000u

/* ---- the kubelet ---- */

static void kubelet_state(struct exporter_kube *k, bool up, const char *why)
{
    if (up && !k->kubelet_up)
        log_info("pod-resources API answers: pods are labelled", "socket",
                 k->o->pod_resources_socket);
    else if (!up && k->kubelet_up)
        log_warn("pod-resources API does not answer: series go on without pod labels", "error",
                 why);
    k->kubelet_up = up;
}

static void on_pod_list(const struct rpc_status *status, const ProtobufCMessage *response,
                        void *userdata)
{
    struct exporter_kube *k = userdata;
    struct exporter_pods fresh = {0};
    k->pods_pending = false;
    const struct exporter_pods_options po = {
        .extra_resources = (const char *const *)k->extra_resources, .dra = k->o->dra};
    if (status->code != RPC_OK ||
        exporter_pods_from_list((const V1__ListPodResourcesResponse *)response, &po, &fresh) < 0) {
        kubelet_state(k, false, status->message);
        exporter_pods_release(&k->pods);
        k->kubelet = rpc_client_free(k->kubelet); /* a client never reconnects */
        return;
    }
    kubelet_state(k, true, NULL);
    exporter_pods_release(&k->pods);
    k->pods = fresh;
}

static void on_pods_timer(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct exporter_kube *k = userdata;
    V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
    if (k->pods_pending)
        return;
    if (!k->kubelet) {
        const struct rpc_client_options co = {.max_recv_message = POD_RESOURCES_MAX_RECV};
        if (rpc_client_new(k->loop, k->o->pod_resources_socket, &co, &k->kubelet) < 0)
            return;
    }
    if (rpc_client_call(k->kubelet, POD_RESOURCES_LIST, &req.base,
                        &v1__list_pod_resources_response__descriptor, POD_RESOURCES_TIMEOUT_MS,
                        on_pod_list, k) >= 0)
        k->pods_pending = true;
}

/* --nvidia-resource-names as a NULL-terminated list. */
static int split_resources(struct exporter_kube *k)
{
    const char *s = k->o->resource_names;
    size_t n = 0;
    for (const char *p = s; p && *p; p++)
        n += *p == ',';
    k->extra_resources = calloc(n + 2, sizeof(char *));
    if (!k->extra_resources)
        return -ENOMEM;
    for (size_t i = 0; s && *s;) {
        size_t len = strcspn(s, ",");
        if (len && !(k->extra_resources[i++] = strndup(s, len)))
            return -ENOMEM;
        s += len + (s[len] == ',');
    }
    return 0;
}

/* ---- the watches of the caches ---- */

int exporter_watch_path(const char *collection, const char *selector, const char *node_name,
                        char *buf, size_t n)
{
    bool node = node_name && *node_name;
    struct strbuf sb = STRBUF_INIT;
    int r = strbuf_addstr(&sb, collection);

    if (r >= 0 && (selector || node))
        r = strbuf_addstr(&sb, "?fieldSelector=");
    if (r >= 0 && selector)
        r = exporter_add_query_value(&sb, selector);
    if (r >= 0 && node) {
        r = exporter_add_query_value(&sb, selector ? ",spec.nodeName=" : "spec.nodeName=");
        if (r >= 0)
            r = exporter_add_query_value(&sb, node_name);
    }
    if (r >= 0 && sb.len >= n)
        r = -ENAMETOOLONG;
    if (r >= 0)
        memcpy(buf, strbuf_str(&sb), sb.len + 1);
    strbuf_release(&sb);
    return r;
}

int exporter_watch_start(struct kube_client *kube, const char *collection, const char *selector,
                         const char *node_name, const char *what, kube_event_fn fn, void *userdata,
                         struct kube_watch **ret, struct diag *d)
{
    char path[1024];
    int r = exporter_watch_path(collection, selector, node_name, path, sizeof(path));
    if (r < 0)
        return diag_fail(d, -EINVAL, "NODE_NAME too long");
    r = kube_watch_new(kube, path, fn, userdata, ret);
    if (r < 0)
        return diag_fail(d, r, "cannot watch the %s: %s", what, strerror(-r));
    return 0;
}

/* ---- the pods' objects ---- */

/* Compiles the allowlist as dcgm-exporter does: a bad pattern is skipped with a warning, and when
 * none is left every label passes. */
static void load_allowlist(struct exporter_kube *k)
{
    size_t given = 0;
    for (char **p = k->o->pod_label_allowlist; p && *p; p++, given++) {
        struct diag d;
        diag_init(&d);
        if (exporter_allowlist_add(&k->allowlist, *p, &d) < 0)
            log_warn("pod label allowlist pattern skipped", "pattern", *p, "error", d.msg);
    }
    if (given && k->allowlist.n == 0)
        log_warn("no valid pod label allowlist pattern: every pod label is exported");
    else if (given)
        log_info("pod labels filtered by the allowlist", "patterns", LOG_INT(k->allowlist.n));
}

static void on_podmeta_synced(const struct exporter_podmeta_status *st, void *userdata)
{
    struct exporter_kube *k = userdata;
    if (!k->podmeta_listed || k->podmeta_late)
        log_info("pods listed on the API server: pod metadata available", "pods",
                 LOG_INT(st->pods));
    if (st->left_out)
        log_warn("too many pods: some go without pod labels and pod_uid", "kept", LOG_INT(st->pods),
                 "left_out", LOG_INT(st->left_out));
    k->podmeta_listed = true;
    k->podmeta_late = false;
}

static int open_podmeta(struct exporter_kube *k)
{
    struct diag d;
    diag_init(&d);
    if (k->o->pod_labels)
        load_allowlist(k);
    const struct exporter_podmeta_options po = {
        .labels = k->o->pod_labels,
        .allowlist = &k->allowlist,
        .synced = on_podmeta_synced,
        .userdata = k,
    };
    int r = exporter_podmeta_new(&po, &k->podmeta);
    if (r >= 0)
        r = exporter_podmeta_watch(k->podmeta, k->client, k->o->node_name, &d);
    if (r == -ENOMEM)
        return r;
    if (r < 0) {
        log_warn("cannot watch the pods: pod labels and pod_uid will not be available", "error",
                 d.msg);
        k->podmeta = exporter_podmeta_free(k->podmeta);
        return 0;
    }
    if (!k->o->node_name)
        log_warn("NODE_NAME is not set: watching every pod of the cluster for their metadata");
    log_info("watching pods for their metadata", "server", k->kcfg->server, "config",
             k->kcfg->source, "node", k->o->node_name ? k->o->node_name : "");
    return 0;
}

/* ---- NVIDIA's ResourceSlices ---- */

static void on_slices_synced(const struct exporter_slices_status *st, void *userdata)
{
    struct exporter_kube *k = userdata;
    if (!k->slices_listed || k->slices_late)
        log_info("ResourceSlices listed on the API server: DRA devices available", "slices",
                 LOG_INT(st->slices), "devices", LOG_INT(st->devices));
    if (st->left_out)
        log_warn("too many DRA devices: some claims go without DRA labels", "kept",
                 LOG_INT(st->devices), "left_out", LOG_INT(st->left_out));
    k->slices_listed = true;
    k->slices_late = false;
}

static int open_slices(struct exporter_kube *k)
{
    struct diag d;
    diag_init(&d);
    const struct exporter_slices_options so = {.synced = on_slices_synced, .userdata = k};
    int r = exporter_slices_new(&so, &k->slices);
    if (r >= 0)
        r = exporter_slices_watch(k->slices, k->client, k->o->node_name, &d);
    if (r == -ENOMEM)
        return r;
    if (r < 0) {
        log_warn("cannot watch the ResourceSlices: DRA labels will not be available", "error",
                 d.msg);
        k->slices = exporter_slices_free(k->slices);
        return 0;
    }
    if (!k->o->node_name)
        log_warn("NODE_NAME is not set: watching the ResourceSlices of every node");
    log_info("watching ResourceSlices for DRA devices", "server", k->kcfg->server, "driver",
             EXPORTER_DRA_DRIVER, "node", k->o->node_name ? k->o->node_name : "");
    return 0;
}

/* ---- the API server ---- */

static void on_late(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct exporter_kube *k = userdata;
    if (k->podmeta && !exporter_podmeta_synced(k->podmeta)) {
        k->podmeta_late = true;
        log_warn("the API server has not listed the pods yet: series go on without pod labels and "
                 "pod_uid until it does",
                 "server", k->kcfg->server);
    }
    if (k->slices && !exporter_slices_synced(k->slices)) {
        k->slices_late = true;
        log_warn("the API server has not listed the ResourceSlices yet: series go on without DRA "
                 "labels until it does",
                 "server", k->kcfg->server);
    }
}

/* "a, b and c" of the n words, into buf. */
static void words(const char *const *w, size_t n, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s",
                                i == 0 ? "" : (i + 1 == n ? " and " : ", "), w[i]);
}

/* Without an API server configuration: what will be missing, in one warning. */
static void warn_no_api(const struct exporter_kube *k, const char *why)
{
    const char *missing[4];
    char what[160], msg[256];
    size_t n = 0;
    bool pods = k->o->pod_labels || k->o->pod_uid || k->o->virtual_gpus;
    if (k->o->pod_labels)
        missing[n++] = "pod labels";
    if (k->o->pod_uid)
        missing[n++] = "pod_uid";
    if (k->o->virtual_gpus)
        missing[n++] = "the per-pod process values of virtual GPUs";
    if (k->o->dra)
        missing[n++] = "DRA labels";
    words(missing, n, what, sizeof(what));
    snprintf(msg, sizeof(msg), "no API server to read %s from: %s will not be available",
             pods && k->o->dra ? "the pods and ResourceSlices"
             : pods            ? "the pods"
                               : "the ResourceSlices",
             what);
    log_warn(msg, "error", why);
}

/* The API server's configuration and the client every watch shares; *ret_ok false, after a
 * warning, when there is none. */
static int open_api(struct exporter_kube *k, bool *ret_ok)
{
    const struct kube_config_options copts = {0};
    struct diag d;
    diag_init(&d);
    int r = kube_config_load(&copts, &d, &k->kcfg);
    if (r >= 0)
        r = kube_client_new(k->loop, k->kcfg, NULL, &k->client);
    if (r == -ENOMEM)
        return r;
    *ret_ok = r >= 0;
    if (r < 0) {
        warn_no_api(k, d.msg[0] ? d.msg : strerror(-r));
        k->kcfg = kube_config_free(k->kcfg);
    }
    return 0;
}

int exporter_kube_start(struct exporter_kube *k, struct ev_loop *loop,
                        const struct exporter_options *o)
{
    bool api = false;
    *k = (struct exporter_kube){.o = o, .loop = loop};
    exporter_allowlist_init(&k->allowlist);
    if (!o->kubernetes)
        return 0;
    int r = split_resources(k);
    if (r >= 0)
        r = ev_timer_add(loop, 1, o->collect_interval_ms, on_pods_timer, k, &k->pods_timer);
    k->kubelet_up = true; /* so that a kubelet down at start is reported */
    if (r < 0 || !(o->pod_labels || o->pod_uid || o->virtual_gpus || o->dra))
        return r;
    r = open_api(k, &api);
    if (r < 0 || !api)
        return r;
    if (o->pod_labels || o->pod_uid || o->virtual_gpus)
        r = open_podmeta(k);
    if (r >= 0 && o->dra)
        r = open_slices(k);
    if (r >= 0 && (k->podmeta || k->slices))
        r = ev_timer_add(loop, LATE_MS, 0, on_late, k, &k->late_timer);
    return r;
}

void exporter_kube_stop(struct exporter_kube *k)
{
    k->kubelet = rpc_client_free(k->kubelet);
    k->podmeta = exporter_podmeta_free(k->podmeta); /* the watches before their client */
    k->slices = exporter_slices_free(k->slices);
    k->client = kube_client_free(k->client);
    k->kcfg = kube_config_free(k->kcfg);
    exporter_pods_release(&k->pods);
    for (size_t i = 0; k->extra_resources && k->extra_resources[i]; i++)
        free(k->extra_resources[i]);
    free(k->extra_resources);
    k->extra_resources = NULL;
    exporter_allowlist_release(&k->allowlist);
}
