/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemon of `gpuplane exporter`. Every collect interval a worker thread reads the GPUs'
 * telemetry (NVML calls may be slow; a scrape never waits for one); back on the loop the snapshot
 * is rendered once into an immutable body that every scrape of /metrics serves until the next one
 * (with its gzip form made once, when a client first asks). XIDs arrive as NVML events on their own
 * thread (gpu_health) and set each GPU's last XID; with DCGM_EXP_XID_ERRORS_COUNT and
 * DCGM_EXP_CLOCK_EVENTS_COUNT each GPU's XIDs and sampled clock event reasons are also kept over
 * their windows (-x, --clock-events-count-window-size). With --kubernetes the kubelet's
 * pod-resources API is asked on its own timer, never inside a scrape; a kubelet that is down only
 * takes the pod labels away, never the series.
 *
 * With --kubernetes-enable-pod-labels or --kubernetes-enable-pod-uid the node's pods are also
 * watched on the API server (exporter-podmeta.c), and each series is joined with its pod's
 * metadata when the snapshot is rendered; an API server that is missing or down takes only those
 * labels away.
 *
 * Series: one per GPU; a GPU in MIG mode is exported as its GPU instances (dcgm-exporter's default
 * `-d f`), each with GPU_I_PROFILE and GPU_I_ID.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ev.h"
#include "exporter-internal.h"
#include "exporter-options.h"
#include "exporter-podmeta.h"
#include "exporter-pods.h"
#include "exporter.h"
#include "gpu-nvml-abi.h"
#include "http.h"
#include "rpc.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define POD_RESOURCES_LIST "/v1.PodResourcesLister/List"
#define POD_RESOURCES_TIMEOUT_MS 10000u
#define POD_RESOURCES_MAX_RECV ((size_t)64 << 20) /* big nodes answer more than gRPC's 4 MiB */
#define WINDOW_MAX_XIDS 1024u                     /* per GPU: an XID storm overwrites the oldest */
#define NO_REASONS UINT64_MAX
/* When the pods are not listed by then, say so. */
#define PODMETA_LATE_MS 10000u

/* One series' source: a full GPU (mig -1) or the first MIG device of a GPU instance. */
struct dev {
    size_t gpu;
    int mig;
    bool ok; /* the last read answered */
    uint64_t unsupported;
    struct gpu_sample sample;
};

struct daemon {
    struct exporter_options *o;
    struct ev_loop *loop;
    struct ev_work_pool *pool;
    struct ev_timer *collect_timer, *pods_timer;
    struct gpu_nvml *nvml;
    struct gpu_inventory *inv;
    struct gpu_telemetry *tel;
    struct gpu_health *health;
    struct exporter_counters counters;
    uint64_t want;
    struct http_web_config *web;
    struct http_server *http;
    struct http_body *metrics; /* the last snapshot, rendered */
    struct dev *devs;          /* the loop's copy */
    struct dev *work;          /* the worker's copy while collecting */
    size_t n_devs;
    bool collecting;
    uint64_t *last_xid;                    /* per GPU */
    struct exporter_window *xid_windows;   /* per GPU, with DCGM_EXP_XID_ERRORS_COUNT, or NULL */
    struct exporter_window *clock_windows; /* per GPU, with DCGM_EXP_CLOCK_EVENTS_COUNT, or NULL */
    uint64_t *reasons; /* per GPU: the clock event reasons the worker read, or NO_REASONS */
    struct rpc_client *kubelet;
    bool pods_pending, kubelet_up;
    struct exporter_pods pods;
    char **extra_resources;
    struct exporter_allowlist allowlist; /* --kubernetes-pod-label-allowlist-regex, compiled */
    struct exporter_podmeta *podmeta;    /* pod labels or UIDs wanted and configured, else NULL */
    struct ev_timer *podmeta_timer;
    bool podmeta_late; /* the pods were not listed in time (warned) */
    bool podmeta_listed;
};

/* ---- devices ---- */

/* The GPU instances of GPU i wanted by sel (the first MIG device of each: compute instances of one
 * GPU instance share a series), appended to dm->devs. */
static void add_instances(struct daemon *dm, size_t i, const struct exporter_devices *sel)
{
    const struct gpu_device *g = &dm->inv->devices[i];
    for (size_t m = 0; m < g->n_migs; m++) {
        bool seen = false;
        for (size_t k = 0; k < m; k++)
            seen |= g->migs[k].gi_id == g->migs[m].gi_id;
        if (!seen && (sel->kind != 'i' || exporter_devices_has(sel, g->migs[m].gi_id)))
            dm->devs[dm->n_devs++] = (struct dev){.gpu = i, .mig = (int)m};
    }
}

/* The series --devices asks for, as dcgm-exporter's -d: f (the default) GPUs, a GPU in MIG mode as
 * its GPU instances; g GPUs only; i GPU instances only. */
static int list_devices(struct daemon *dm)
{
    const struct gpu_inventory *inv = dm->inv;
    struct exporter_devices sel;
    size_t n = 0;
    if (exporter_devices_parse(dm->o->devices, &sel) < 0) /* checked with the options */
        return -EINVAL;
    for (size_t i = 0; i < inv->n_devices; i++)
        n += inv->devices[i].n_migs + 1;
    dm->devs = calloc(n ? n : 1, sizeof(*dm->devs));
    dm->work = calloc(n ? n : 1, sizeof(*dm->work));
    if (!dm->devs || !dm->work)
        return -ENOMEM;
    for (size_t i = 0; i < inv->n_devices; i++) {
        const struct gpu_device *g = &inv->devices[i];
        bool mig = g->mig_enabled && g->n_migs > 0;
        if (sel.kind != 'i' && !exporter_devices_has(&sel, (unsigned)i))
            continue;
        if (sel.kind == 'g' || (sel.kind == 'f' && !mig))
            dm->devs[dm->n_devs++] = (struct dev){.gpu = i, .mig = -1};
        else if (mig)
            add_instances(dm, i, &sel);
    }
    return 0;
}

/* ---- collection ---- */

/* On the worker: the clock event reasons of every GPU into dm->reasons: from the full GPU's sample
 * when it is a series, else read from the GPU (a MIG GPU's instances cannot answer them; their
 * series count their GPU's, as dcgm-exporter's do). */
static void collect_reasons(struct daemon *dm)
{
    const uint64_t bit = UINT64_C(1) << GPU_METRIC_CLOCK_EVENT_REASONS;
    for (size_t g = 0; g < dm->inv->n_devices; g++)
        dm->reasons[g] = NO_REASONS;
    for (size_t i = 0; i < dm->n_devs; i++) {
        const struct dev *dv = &dm->work[i];
        if (dv->ok && dv->mig < 0 && (dv->sample.have & bit))
            dm->reasons[dv->gpu] = (uint64_t)dv->sample.v[GPU_METRIC_CLOCK_EVENT_REASONS];
    }
    for (size_t i = 0; i < dm->n_devs; i++) {
        const struct dev *dv = &dm->work[i];
        struct gpu_sample sample;
        if (dv->mig < 0 || dm->reasons[dv->gpu] != NO_REASONS || dm->inv->devices[dv->gpu].error)
            continue;
        if (gpu_telemetry_read(dm->tel, dv->gpu, -1, bit, &sample, NULL) >= 0 &&
            (sample.have & bit))
            dm->reasons[dv->gpu] = (uint64_t)sample.v[GPU_METRIC_CLOCK_EVENT_REASONS];
    }
}

/* On the worker: reads every device into dm->work (the loop does not touch it meanwhile). */
static int collect_work(void *userdata)
{
    struct daemon *dm = userdata;
    for (size_t i = 0; i < dm->n_devs; i++) {
        struct dev *dv = &dm->work[i];
        uint64_t unsupported = 0;
        if (dm->inv->devices[dv->gpu].error) { /* unusable since start: no series */
            dv->ok = false;
            continue;
        }
        dv->ok =
            gpu_telemetry_read(dm->tel, dv->gpu, dv->mig, dm->want, &dv->sample, &unsupported) >= 0;
        dv->unsupported = unsupported;
    }
    if (dm->clock_windows)
        collect_reasons(dm);
    return 0;
}

static void log_unsupported(const struct daemon *dm, const struct dev *dv)
{
    for (size_t i = 0; i < dm->counters.n; i++) {
        const struct exporter_field *f = dm->counters.v[i].field;
        if (f->source == EXPORTER_SOURCE_METRIC && (dv->unsupported & (1ull << f->metric)))
            log_info("field not supported by the device: left out", "field", f->name, "gpu",
                     LOG_INT(dv->gpu), "mig", LOG_INT(dv->mig));
    }
}

/* Whether the pod-resources entry r names the device of series dv. */
static bool ref_matches(const struct daemon *dm, const struct dev *dv,
                        const struct exporter_pod_ref *r)
{
    const struct gpu_device *g = &dm->inv->devices[dv->gpu];
    char name[32], dra_name[32];
    snprintf(name, sizeof(name), "nvidia%zu", dv->gpu);
    snprintf(dra_name, sizeof(dra_name), "gpu-%u", g->minor);
    if (r->device && dv->mig >= 0)
        return strcmp(r->device, g->migs[dv->mig].uuid) == 0 ||
               (strcmp(r->device, name) == 0 && r->gi == (int)g->migs[dv->mig].gi_id);
    if (r->device)
        return r->gi < 0 &&
               (strcmp(r->device, g->uuid) == 0 ||
                (dm->o->gpu_id_type == EXPORTER_ID_DEVICE_NAME && strcmp(r->device, name) == 0));
    return dv->mig < 0 && strcmp(r->driver, "gpu.nvidia.com") == 0 &&
           strcmp(r->dra_device, dra_name) == 0;
}

#define MAX_LABELS 10

/* A series' Kubernetes labels from entry r; uid the pod's UID (--kubernetes-enable-pod-uid, when
 * the pod is known) or NULL; vgpu (a buffer for the number) with virtual GPUs. */
static size_t ref_labels(const struct exporter_pod_ref *r, const char *uid, char *vgpu,
                         size_t vgpu_size, struct exporter_label *out)
{
    size_t n = 0;
    out[n++] = (struct exporter_label){"pod", r->pod};
    out[n++] = (struct exporter_label){"namespace", r->namespace_};
    out[n++] = (struct exporter_label){"container", r->container};
    if (uid && *uid)
        out[n++] = (struct exporter_label){"pod_uid", uid};
    if (vgpu && r->vgpu >= 0) {
        snprintf(vgpu, vgpu_size, "%d", r->vgpu);
        out[n++] = (struct exporter_label){"vgpu", vgpu};
    }
    if (!r->device) {
        out[n++] = (struct exporter_label){"dra_claim_name", r->claim_name};
        out[n++] = (struct exporter_label){"dra_claim_namespace", r->claim_namespace};
        out[n++] = (struct exporter_label){"dra_driver_name", r->driver};
        out[n++] = (struct exporter_label){"dra_pool_name", r->pool};
        out[n++] = (struct exporter_label){"dra_device_name", r->dra_device};
    }
    return n;
}

/* The series being built for one snapshot, with room for their labels. */
struct series_buf {
    struct exporter_series *v;
    struct exporter_label *labels; /* MAX_LABELS per series */
    char (*vgpu)[12];
    size_t n, cap;
    const struct window_counts *counts; /* per GPU */
};

/* Each GPU's counts over the windows, for one snapshot. */
struct window_counts {
    struct exporter_window_count *xid, *clock;
    size_t n_xid, n_clock;
};

static struct exporter_series *series_add(struct series_buf *b, const struct daemon *dm,
                                          const struct dev *dv)
{
    const struct window_counts *wc = &b->counts[dv->gpu];
    const struct gpu_device *g = &dm->inv->devices[dv->gpu];
    struct exporter_series *s = &b->v[b->n];
    *s = (struct exporter_series){
        .gpu = (unsigned)dv->gpu,
        .uuid = g->uuid,
        .pci_bus_id = g->pci_bus_id,
        .model_name = g->name,
        .mig_profile = dv->mig >= 0 ? g->migs[dv->mig].profile : NULL,
        .gpu_instance_id = dv->mig >= 0 ? g->migs[dv->mig].gi_id : 0,
        .sample = dv->sample,
        .have_xid = true,
        .last_xid = dm->last_xid[dv->gpu],
        .labels = &b->labels[b->n * MAX_LABELS],
        .xid_counts = wc->xid,
        .n_xid_counts = wc->n_xid,
        .clock_event_counts = wc->clock,
        .n_clock_event_counts = wc->n_clock,
    };
    b->n++;
    return s;
}

/* One series per device, labelled with the first pod using it; with --kubernetes-virtual-gpus one
 * per pod sharing it (vgpu = the replica), as dcgm-exporter does. */
static void add_device_series(struct series_buf *b, const struct daemon *dm, const struct dev *dv)
{
    bool any = false;
    for (size_t i = 0; i < dm->pods.n && b->n < b->cap; i++) {
        const struct exporter_pod_ref *r = &dm->pods.v[i];
        if (!ref_matches(dm, dv, r))
            continue;
        size_t k = b->n;
        struct exporter_series *s = series_add(b, dm, dv);
        struct exporter_podmeta_pod meta = {0};
        bool known = exporter_podmeta_find(dm->podmeta, r->namespace_, r->pod, &meta);
        s->n_labels = ref_labels(r, known && dm->o->pod_uid ? meta.uid : NULL,
                                 dm->o->virtual_gpus ? b->vgpu[k] : NULL, sizeof(b->vgpu[k]),
                                 &b->labels[k * MAX_LABELS]);
        if (known && dm->o->pod_labels) {
            s->pod_labels = meta.labels;
            s->n_pod_labels = meta.n_labels;
        }
        any = true;
        if (!dm->o->virtual_gpus)
            return;
    }
    if (!any && b->n < b->cap)
        series_add(b, dm, dv);
}

static void release_counts(struct window_counts *wc, size_t n)
{
    for (size_t i = 0; wc && i < n; i++) {
        free(wc[i].xid);
        free(wc[i].clock);
    }
    free(wc);
}

/* Every GPU's counts over the windows now. */
static int count_windows(struct daemon *dm, struct window_counts **ret)
{
    size_t n = dm->inv->n_devices;
    uint64_t now = ev_loop_now_ms(dm->loop);
    struct window_counts *wc = calloc(n + 1, sizeof(*wc));
    int r = wc ? 0 : -ENOMEM;
    for (size_t g = 0; g < n && r >= 0; g++) {
        if (dm->xid_windows)
            r = exporter_window_counts(&dm->xid_windows[g], now, 0, &wc[g].xid, &wc[g].n_xid);
        if (r >= 0 && dm->clock_windows)
            r = exporter_window_counts(&dm->clock_windows[g], now, EXPORTER_CLOCK_EVENT_BITS,
                                       &wc[g].clock, &wc[g].n_clock);
    }
    if (r < 0) {
        release_counts(wc, n);
        return r;
    }
    *ret = wc;
    return 0;
}

static int render(struct daemon *dm)
{
    struct series_buf b = {.cap = dm->n_devs + dm->pods.n + 1};
    _cleanup_free_ struct exporter_series *series = b.v = calloc(b.cap, sizeof(*b.v));
    _cleanup_free_ struct exporter_label *labels = b.labels =
        calloc(b.cap * MAX_LABELS, sizeof(*b.labels));
    _cleanup_free_ char(*vgpu)[12] = b.vgpu = calloc(b.cap, sizeof(*b.vgpu));
    struct window_counts *counts = NULL;
    struct strbuf out = STRBUF_INIT;
    if (!series || !labels || !vgpu || count_windows(dm, &counts) < 0)
        return -ENOMEM;
    b.counts = counts;
    for (size_t i = 0; i < dm->n_devs; i++)
        if (dm->devs[i].ok)
            add_device_series(&b, dm, &dm->devs[i]);
    const struct exporter_snapshot snap = {
        .series = b.v,
        .n = b.n,
        .driver_version = dm->inv->driver_version,
        .xid_window_ms = dm->o->xid_window_ms,
        .clock_events_window_ms = dm->o->clock_events_window_ms,
    };
    const struct exporter_render_options ro = {
        .hostname = dm->o->no_hostname ? NULL : dm->o->hostname,
        .use_old_namespace = dm->o->use_old_namespace,
        .replace_blanks_in_model_name = dm->o->replace_blanks,
    };
    int r = exporter_render(&dm->counters, &snap, &ro, &out);
    release_counts(counts, dm->inv->n_devices);
    struct http_body *body = NULL;
    size_t len = 0;
    char *text = r >= 0 ? strbuf_detach(&out, &len) : NULL;
    strbuf_release(&out);
    if (r >= 0 && !text)
        r = -ENOMEM;
    if (r >= 0)
        r = http_body_new_take(text, len, &body);
    if (r < 0)
        return r;
    http_body_unref(dm->metrics);
    dm->metrics = body;
    return 0;
}

static void collect_done(int result, void *userdata)
{
    struct daemon *dm = userdata;
    dm->collecting = false;
    if (result == -ECANCELED)
        return;
    for (size_t i = 0; i < dm->n_devs; i++) {
        if (dm->work[i].unsupported)
            log_unsupported(dm, &dm->work[i]);
        dm->devs[i] = dm->work[i];
    }
    for (size_t g = 0; dm->clock_windows && g < dm->inv->n_devices; g++)
        if (dm->reasons[g] != NO_REASONS)
            exporter_window_add(&dm->clock_windows[g], ev_loop_now_ms(dm->loop), dm->reasons[g]);
    int r = render(dm);
    if (r < 0)
        log_error("cannot render the metrics", "error", strerror(-r));
}

static void on_collect(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct daemon *dm = userdata;
    if (dm->collecting) /* a slow NVML: the next collection waits for this one */
        return;
    memcpy(dm->work, dm->devs, dm->n_devs * sizeof(*dm->work));
    dm->collecting = true;
    if (ev_work_submit(dm->pool, collect_work, collect_done, dm) < 0) {
        dm->collecting = false;
        log_error("cannot start a collection");
    }
}

/* ---- XIDs ---- */

static void on_health(const struct gpu_health_event *e, void *userdata)
{
    struct daemon *dm = userdata;
    if (e->wait_error || e->type != nvmlEventTypeXidCriticalError || e->gpu_index < 0 ||
        (size_t)e->gpu_index >= dm->inv->n_devices)
        return;
    dm->last_xid[e->gpu_index] = e->xid;
    if (dm->xid_windows)
        exporter_window_add(&dm->xid_windows[e->gpu_index], ev_loop_now_ms(dm->loop), e->xid);
    log_warn("XID error", "gpu", LOG_INT(e->gpu_index), "xid", LOG_INT(e->xid), "message",
             exporter_xid_message(e->xid));
}

/* ---- pods ---- */

static void kubelet_state(struct daemon *dm, bool up, const char *why)
{
    if (up && !dm->kubelet_up)
        log_info("pod-resources API answers: pods are labelled", "socket",
                 dm->o->pod_resources_socket);
    else if (!up && dm->kubelet_up)
        log_warn("pod-resources API does not answer: series go on without pod labels", "error",
                 why);
    dm->kubelet_up = up;
}

static void on_pod_list(const struct rpc_status *status, const ProtobufCMessage *response,
                        void *userdata)
{
    struct daemon *dm = userdata;
    struct exporter_pods fresh = {0};
    dm->pods_pending = false;
    const struct exporter_pods_options po = {
        .extra_resources = (const char *const *)dm->extra_resources, .dra = dm->o->dra};
    if (status->code != RPC_OK ||
        exporter_pods_from_list((const V1__ListPodResourcesResponse *)response, &po, &fresh) < 0) {
        kubelet_state(dm, false, status->message);
        exporter_pods_release(&dm->pods);
        dm->kubelet = rpc_client_free(dm->kubelet); /* a client never reconnects */
        return;
    }
    kubelet_state(dm, true, NULL);
    exporter_pods_release(&dm->pods);
    dm->pods = fresh;
}

static void on_pods_timer(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct daemon *dm = userdata;
    V1__ListPodResourcesRequest req = V1__LIST_POD_RESOURCES_REQUEST__INIT;
    if (dm->pods_pending)
        return;
    if (!dm->kubelet) {
        const struct rpc_client_options co = {.max_recv_message = POD_RESOURCES_MAX_RECV};
        if (rpc_client_new(dm->loop, dm->o->pod_resources_socket, &co, &dm->kubelet) < 0)
            return;
    }
    if (rpc_client_call(dm->kubelet, POD_RESOURCES_LIST, &req.base,
                        &v1__list_pod_resources_response__descriptor, POD_RESOURCES_TIMEOUT_MS,
                        on_pod_list, dm) >= 0)
        dm->pods_pending = true;
}

/* ---- pod metadata ---- */

/* Compiles the allowlist as dcgm-exporter does: a bad pattern is skipped with a warning, and when
 * none is left every label passes. */
static void load_allowlist(struct daemon *dm)
{
    size_t given = 0;
    for (char **p = dm->o->pod_label_allowlist; p && *p; p++, given++) {
        struct diag d;
        diag_init(&d);
        if (exporter_allowlist_add(&dm->allowlist, *p, &d) < 0)
            log_warn("pod label allowlist pattern skipped", "pattern", *p, "error", d.msg);
    }
    if (given && dm->allowlist.n == 0)
        log_warn("no valid pod label allowlist pattern: every pod label is exported");
    else if (given)
        log_info("pod labels filtered by the allowlist", "patterns", LOG_INT(dm->allowlist.n));
}

static void on_podmeta_synced(const struct exporter_podmeta_status *st, void *userdata)
{
    struct daemon *dm = userdata;
    if (!dm->podmeta_listed || dm->podmeta_late)
        log_info("pods listed on the API server: pod metadata available", "pods",
                 LOG_INT(st->pods));
    if (st->left_out)
        log_warn("too many pods: some go without pod labels and pod_uid", "kept", LOG_INT(st->pods),
                 "left_out", LOG_INT(st->left_out));
    dm->podmeta_listed = true;
    dm->podmeta_late = false;
}

static void on_podmeta_late(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct daemon *dm = userdata;
    if (exporter_podmeta_synced(dm->podmeta))
        return;
    dm->podmeta_late = true;
    log_warn("the API server has not listed the pods yet: series go on without pod labels and "
             "pod_uid until it does",
             "server", exporter_podmeta_config(dm->podmeta)->server);
}

/* With --kubernetes-enable-pod-labels or --kubernetes-enable-pod-uid: the pods watched. Without an
 * API server configuration the exporter runs on without them, as dcgm-exporter. */
static int open_podmeta(struct daemon *dm)
{
    struct diag d;
    diag_init(&d);
    if (dm->o->pod_labels)
        load_allowlist(dm);
    const struct exporter_podmeta_options po = {
        .labels = dm->o->pod_labels,
        .allowlist = &dm->allowlist,
        .synced = on_podmeta_synced,
        .userdata = dm,
    };
    int r = exporter_podmeta_new(&po, &dm->podmeta);
    if (r >= 0)
        r = exporter_podmeta_watch(dm->podmeta, dm->loop, dm->o->node_name, &d);
    if (r < 0 && r != -ENOMEM) {
        log_warn("no API server to read the pods from: pod labels and pod_uid will not be "
                 "available",
                 "error", d.msg[0] ? d.msg : strerror(-r));
        dm->podmeta = exporter_podmeta_free(dm->podmeta);
        return 0;
    }
    if (r < 0)
        return r;
    const struct kube_config *kc = exporter_podmeta_config(dm->podmeta);
    if (!dm->o->node_name)
        log_warn("NODE_NAME is not set: watching every pod of the cluster for their metadata");
    log_info("watching pods for their metadata", "server", kc->server, "config", kc->source, "node",
             dm->o->node_name ? dm->o->node_name : "");
    return ev_timer_add(dm->loop, PODMETA_LATE_MS, 0, on_podmeta_late, dm, &dm->podmeta_timer);
}

/* --nvidia-resource-names as a NULL-terminated list. */
static int split_resources(struct daemon *dm)
{
    const char *s = dm->o->resource_names;
    size_t n = 0;
    for (const char *p = s; p && *p; p++)
        n += *p == ',';
    dm->extra_resources = calloc(n + 2, sizeof(char *));
    if (!dm->extra_resources)
        return -ENOMEM;
    for (size_t i = 0; s && *s;) {
        size_t len = strcspn(s, ",");
        if (len && !(dm->extra_resources[i++] = strndup(s, len)))
            return -ENOMEM;
        s += len + (s[len] == ',');
    }
    return 0;
}

/* ---- HTTP ---- */

static void on_metrics(struct http_request *req, void *userdata)
{
    struct daemon *dm = userdata;
    (void)!http_respond_body(req, 200, CONTENT_TYPE, dm->metrics);
}

static void on_health_check(struct http_request *req, void *userdata)
{
    (void)!http_respond(req, 200, "text/plain; charset=utf-8", "OK\n", 3);
}

/* ---- start and stop ---- */

/* A window per GPU for each windowed count the counters file asks for. The clock event reasons are
 * sampled once per collection, so their window holds at most window / interval samples. */
static int open_windows(struct daemon *dm)
{
    size_t n = dm->inv->n_devices;
    uint64_t samples = dm->o->clock_events_window_ms / dm->o->collect_interval_ms + 1;
    int r = 0;
    if (exporter_counters_use(&dm->counters, EXPORTER_SOURCE_XID_COUNT)) {
        dm->xid_windows = calloc(n + 1, sizeof(*dm->xid_windows));
        r = dm->xid_windows ? 0 : -ENOMEM;
        for (size_t g = 0; g < n && r >= 0; g++)
            r = exporter_window_init(&dm->xid_windows[g], dm->o->xid_window_ms, WINDOW_MAX_XIDS);
    }
    if (r >= 0 && exporter_counters_use(&dm->counters, EXPORTER_SOURCE_CLOCK_EVENTS_COUNT)) {
        dm->clock_windows = calloc(n + 1, sizeof(*dm->clock_windows));
        dm->reasons = calloc(n + 1, sizeof(*dm->reasons));
        r = dm->clock_windows && dm->reasons ? 0 : -ENOMEM;
        for (size_t g = 0; g < n && r >= 0; g++)
            r = exporter_window_init(&dm->clock_windows[g], dm->o->clock_events_window_ms,
                                     samples > 65536 ? 65536 : (size_t)samples);
    }
    return r;
}

static void close_windows(struct daemon *dm)
{
    size_t n = dm->inv ? dm->inv->n_devices : 0;
    for (size_t g = 0; g < n; g++) {
        if (dm->xid_windows)
            exporter_window_release(&dm->xid_windows[g]);
        if (dm->clock_windows)
            exporter_window_release(&dm->clock_windows[g]);
    }
    free(dm->xid_windows);
    free(dm->clock_windows);
    free(dm->reasons);
}

static int open_gpus(struct daemon *dm, struct diag *d)
{
    const struct gpu_read_options ropts = {.skip_topology = true};
    int r = gpu_nvml_open(cli_common_nvml_lib(&dm->o->common), d, &dm->nvml);
    if (r >= 0)
        r = gpu_inventory_read(dm->nvml, &ropts, d, &dm->inv);
    if (r >= 0)
        r = gpu_telemetry_new(dm->nvml, dm->inv, &dm->tel);
    if (r >= 0)
        r = list_devices(dm);
    if (r >= 0 && !(dm->last_xid = calloc(dm->inv->n_devices + 1, sizeof(*dm->last_xid))))
        r = -ENOMEM;
    if (r >= 0)
        r = open_windows(dm);
    if (r < 0)
        return d->msg[0] ? r : diag_fail(d, r, "cannot read the GPUs: %s", strerror(-r));
    log_info("GPUs found", "count", LOG_INT(dm->inv->n_devices), "series", LOG_INT(dm->n_devs),
             "driver", dm->inv->driver_version);
    if (gpu_health_start_with(dm->nvml, dm->inv, dm->loop, NULL, on_health, dm, &dm->health) < 0)
        log_warn("XID events unavailable: DCGM_FI_DEV_XID_ERRORS stays 0");
    return 0;
}

static int open_http(struct daemon *dm, struct diag *d)
{
    int r = 0;
    if (dm->o->web_config_file)
        r = http_web_config_load(dm->o->web_config_file, d, &dm->web);
    if (r >= 0)
        r = http_server_new(dm->loop, dm->o->address, dm->web, NULL, d, &dm->http);
    if (r >= 0)
        r = http_server_route(dm->http, "/metrics", on_metrics, dm);
    if (r >= 0)
        r = http_server_route(dm->http, "/health", on_health_check, dm);
    if (r < 0)
        return d->msg[0] ? r : diag_fail(d, r, "cannot serve HTTP: %s", strerror(-r));
    log_info("serving /metrics", "address", dm->o->address, "port",
             LOG_INT(http_server_port(dm->http)), "tls",
             dm->web && http_web_config_has_tls(dm->web) ? "true" : "false");
    return 0;
}

static int start(struct daemon *dm, struct diag *d)
{
    int r = exporter_counters_load(dm->o->collectors, &dm->counters, d);
    if (r < 0)
        return r;
    for (size_t i = 0; dm->counters.warnings && i < dm->counters.n_warnings; i++)
        log_warn(dm->counters.warnings[i]);
    dm->want = exporter_counters_metrics(&dm->counters);
    r = ev_loop_new(&dm->loop);
    if (r >= 0)
        r = ev_loop_handle_stop_signals(dm->loop);
    if (r >= 0)
        r = ev_work_pool_new(dm->loop, 1, &dm->pool);
    if (r >= 0)
        r = split_resources(dm);
    if (r < 0)
        return diag_fail(d, r, "cannot start: %s", strerror(-r));
    r = open_gpus(dm, d);
    if (r >= 0) {
        /* The first snapshot before the first scrape can come. */
        memcpy(dm->work, dm->devs, dm->n_devs * sizeof(*dm->work));
        collect_work(dm);
        collect_done(0, dm);
        r = dm->metrics ? 0 : diag_fail(d, -EIO, "cannot render the first snapshot");
    }
    if (r >= 0)
        r = open_http(dm, d);
    if (r >= 0)
        r = ev_timer_add(dm->loop, dm->o->collect_interval_ms, dm->o->collect_interval_ms,
                         on_collect, dm, &dm->collect_timer);
    if (r >= 0 && dm->o->kubernetes) {
        r = ev_timer_add(dm->loop, 1, dm->o->collect_interval_ms, on_pods_timer, dm,
                         &dm->pods_timer);
        dm->kubelet_up = true; /* so that a kubelet down at start is reported */
    }
    if (r >= 0 && dm->o->kubernetes && (dm->o->pod_labels || dm->o->pod_uid))
        r = open_podmeta(dm);
    return r;
}

static void stop(struct daemon *dm)
{
    dm->health = gpu_health_stop(dm->health);
    dm->pool = ev_work_pool_free(dm->pool);
    dm->kubelet = rpc_client_free(dm->kubelet);
    dm->http = http_server_free(dm->http);
    dm->podmeta = exporter_podmeta_free(dm->podmeta); /* its client lives on the loop */
    dm->loop = ev_loop_free(dm->loop); /* runs the completion of a collection still queued */
    dm->web = http_web_config_free(dm->web);
    dm->metrics = http_body_unref(dm->metrics);
    exporter_pods_release(&dm->pods);
    exporter_counters_release(&dm->counters);
    dm->tel = gpu_telemetry_free(dm->tel);
    close_windows(dm);
    dm->inv = gpu_inventory_free(dm->inv);
    dm->nvml = gpu_nvml_close(dm->nvml);
    for (size_t i = 0; dm->extra_resources && dm->extra_resources[i]; i++)
        free(dm->extra_resources[i]);
    free(dm->extra_resources);
    exporter_allowlist_release(&dm->allowlist);
    free(dm->devs);
    free(dm->work);
    free(dm->last_xid);
}

static int run(struct exporter_options *o)
{
    struct daemon dm = {.o = o};
    struct diag d;
    char ignored[256];
    diag_init(&d);
    exporter_counters_init(&dm.counters);
    exporter_options_ignored(o, ignored, sizeof(ignored));
    if (ignored[0])
        log_warn("options of DCGM's host engine have no effect here (NVML is read directly)",
                 "options", ignored);
    int r = start(&dm, &d);
    if (r < 0) {
        cli_error("%s", d.msg[0] ? d.msg : strerror(-r));
        stop(&dm);
        return CLI_EXIT_FAILURE;
    }
    r = ev_loop_run(dm.loop);
    if (r < 0)
        log_error("event loop failed", "error", strerror(-r));
    else
        log_info("stopping");
    stop(&dm);
    return r == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

int exporter_main(int argc, char **argv)
{
    struct exporter_options o;
    struct diag d;
    diag_init(&d);
    exporter_options_init(&o);
    int r = exporter_options_parse(argc, argv, &o, &d);
    if (r < 0) {
        cli_error("%s", d.msg[0] ? d.msg : "invalid options");
        r = CLI_EXIT_USAGE;
    } else if (o.common.help) {
        exporter_usage(stdout);
        r = CLI_EXIT_OK;
    } else if (cli_common_finish(&o.common, EXPORTER_COMMAND) < 0) {
        r = CLI_EXIT_USAGE;
    } else {
        r = run(&o);
    }
    exporter_options_release(&o);
    return r;
}
