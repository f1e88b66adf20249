/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemon of `gpuplane exporter`. Every collect interval a worker thread reads the GPUs'
 * telemetry (NVML calls may be slow; a scrape never waits for one); back on the loop the snapshot
 * is rendered once into an immutable body that every scrape of /metrics serves until the next one
 * (with its gzip form made once, when a client first asks). XIDs arrive as NVML events on their own
 * thread (gpu_health) and set each GPU's last XID; with DCGM_EXP_XID_ERRORS_COUNT and
 * DCGM_EXP_CLOCK_EVENTS_COUNT each GPU's XIDs and sampled clock event reasons are also kept over
 * their windows (-x, --clock-events-count-window-size).
 *
 * With --kubernetes, which pod uses which device comes from the kubelet and the API server on
 * their own timers and watches (exporter-kube.c); each snapshot joins the devices read with what
 * they last said (exporter-series.c). A kubelet or API server that is missing or down takes only
 * labels away, never series.
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
#include "exporter-kube.h"
#include "exporter-options.h"
#include "exporter-series.h"
#include "exporter.h"
#include "gpu-nvml-abi.h"
#include "http.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define WINDOW_MAX_XIDS 1024u /* per GPU: an XID storm overwrites the oldest */
#define NO_REASONS UINT64_MAX
/* One nvmlEventSetWait: XIDs arrive at once either way; shorter only makes stopping quicker (the
 * thread is joined after its current wait). */
#define HEALTH_WAIT_MS 500

struct daemon {
    struct exporter_options *o;
    struct ev_loop *loop;
    struct ev_work_pool *pool;
    struct ev_timer *collect_timer;
    struct gpu_nvml *nvml;
    struct gpu_inventory *inv;
    struct gpu_telemetry *tel;
    struct gpu_health *health;
    struct exporter_counters counters;
    uint64_t want;
    struct http_web_config *web;
    struct http_server *http;
    struct http_body *metrics; /* the last snapshot, rendered */
    struct exporter_dev *devs; /* the loop's copy */
    struct exporter_dev *work; /* the worker's copy while collecting */
    size_t n_devs;
    bool collecting;
    uint64_t *last_xid;                    /* per GPU */
    struct exporter_window *xid_windows;   /* per GPU, with DCGM_EXP_XID_ERRORS_COUNT, or NULL */
    struct exporter_window *clock_windows; /* per GPU, with DCGM_EXP_CLOCK_EVENTS_COUNT, or NULL */
    uint64_t *reasons; /* per GPU: the clock event reasons the worker read, or NO_REASONS */
    /* --kubernetes-virtual-gpus, per device: whether the worker reads its processes (decided on
     * the loop before a collection), what it read, and the loop's copy of the last read. */
    bool *procs_wanted;
    struct exporter_procs *procs_work, *procs;
    const char *proc_root; /* GPUPLANE_PROC_ROOT: where /proc is, for the processes' cgroups */
    struct exporter_kube kube;
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
            dm->devs[dm->n_devs++] = (struct exporter_dev){.gpu = i, .mig = (int)m};
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
    dm->devs = calloc(n + 1, sizeof(*dm->devs));
    dm->work = calloc(n + 1, sizeof(*dm->work));
    dm->procs_wanted = calloc(n + 1, sizeof(*dm->procs_wanted));
    dm->procs_work = calloc(n + 1, sizeof(*dm->procs_work));
    dm->procs = calloc(n + 1, sizeof(*dm->procs));
    if (!dm->devs || !dm->work || !dm->procs_wanted || !dm->procs_work || !dm->procs)
        return -ENOMEM;
    for (size_t i = 0; i < inv->n_devices; i++) {
        const struct gpu_device *g = &inv->devices[i];
        bool mig = g->mig_enabled && g->n_migs > 0;
        if (sel.kind != 'i' && !exporter_devices_has(&sel, (unsigned)i))
            continue;
        if (sel.kind == 'g' || (sel.kind == 'f' && !mig))
            dm->devs[dm->n_devs++] = (struct exporter_dev){.gpu = i, .mig = -1};
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
        const struct exporter_dev *dv = &dm->work[i];
        if (dv->ok && dv->mig < 0 && (dv->sample.have & bit))
            dm->reasons[dv->gpu] = (uint64_t)dv->sample.v[GPU_METRIC_CLOCK_EVENT_REASONS];
    }
    for (size_t i = 0; i < dm->n_devs; i++) {
        const struct exporter_dev *dv = &dm->work[i];
        struct gpu_sample sample;
        if (dv->mig < 0 || dm->reasons[dv->gpu] != NO_REASONS || dm->inv->devices[dv->gpu].error)
            continue;
        if (gpu_telemetry_read(dm->tel, dv->gpu, -1, bit, &sample, NULL) >= 0 &&
            (sample.have & bit))
            dm->reasons[dv->gpu] = (uint64_t)sample.v[GPU_METRIC_CLOCK_EVENT_REASONS];
    }
}

/* On the worker: the processes of the devices the loop asked for, with their pods. */
static void collect_procs(struct daemon *dm)
{
    bool memory = dm->want & (UINT64_C(1) << GPU_METRIC_FB_USED);
    bool util = dm->want & (UINT64_C(1) << GPU_METRIC_GPU_UTIL);
    for (size_t i = 0; i < dm->n_devs; i++) {
        const struct exporter_dev *dv = &dm->work[i];
        exporter_procs_release(&dm->procs_work[i]);
        if (dm->procs_wanted[i] && dv->ok &&
            exporter_procs_read(dm->tel, dm->inv, dv->gpu, dv->mig, dm->proc_root, memory, util,
                                &dm->procs_work[i]) < 0)
            log_debug(2, "cannot read the processes of a device", "gpu", LOG_INT(dv->gpu));
    }
}

/* On the loop, before a collection: with virtual GPUs and the pods' UIDs, which devices' processes
 * the worker reads (those used by pods). */
static void plan_procs(struct daemon *dm)
{
    const uint64_t split =
        (UINT64_C(1) << GPU_METRIC_FB_USED) | (UINT64_C(1) << GPU_METRIC_GPU_UTIL);
    const struct exporter_join j = {
        .inv = dm->inv,
        .pods = &dm->kube.pods,
        .slices = dm->kube.slices,
        .id_type = dm->o->gpu_id_type,
        .virtual_gpus = dm->o->virtual_gpus,
    };
    bool any = dm->o->virtual_gpus && dm->kube.podmeta && (dm->want & split);
    for (size_t i = 0; i < dm->n_devs; i++)
        dm->procs_wanted[i] = any && exporter_series_has_pods(&j, &dm->devs[i]);
}

/* On the worker: reads every device into dm->work (the loop does not touch it meanwhile). */
static int collect_work(void *userdata)
{
    struct daemon *dm = userdata;
    for (size_t i = 0; i < dm->n_devs; i++) {
        struct exporter_dev *dv = &dm->work[i];
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
    collect_procs(dm);
    return 0;
}

static void log_unsupported(const struct daemon *dm, const struct exporter_dev *dv)
{
    for (size_t i = 0; i < dm->counters.n; i++) {
        const struct exporter_field *f = dm->counters.v[i].field;
        if (f->source == EXPORTER_SOURCE_METRIC && (dv->unsupported & (1ull << f->metric)))
            log_info("field not supported by the device: left out", "field", f->name, "gpu",
                     LOG_INT(dv->gpu), "mig", LOG_INT(dv->mig));
    }
}

static void release_counts(struct exporter_counts *wc, size_t n)
{
    for (size_t i = 0; wc && i < n; i++) {
        free(wc[i].xid);
        free(wc[i].clock);
    }
    free(wc);
}

/* Every GPU's counts over the windows now. */
static int count_windows(struct daemon *dm, struct exporter_counts **ret)
{
    size_t n = dm->inv->n_devices;
    uint64_t now = ev_loop_now_ms(dm->loop);
    struct exporter_counts *wc = calloc(n + 1, sizeof(*wc));
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

/* The devices joined with the pods, rendered into out. */
static int render_into(struct daemon *dm, const struct exporter_counts *counts, struct strbuf *out)
{
    const struct exporter_join j = {
        .inv = dm->inv,
        .last_xid = dm->last_xid,
        .counts = counts,
        .pods = &dm->kube.pods,
        .podmeta = dm->kube.podmeta,
        .slices = dm->kube.slices,
        .procs = dm->procs,
        .id_type = dm->o->gpu_id_type,
        .virtual_gpus = dm->o->virtual_gpus,
        .pod_uid = dm->o->pod_uid,
        .pod_labels = dm->o->pod_labels,
    };
    struct exporter_series_set set;
    int r = exporter_series_join(&j, dm->devs, dm->n_devs, &set);
    if (r < 0)
        return r;
    const struct exporter_snapshot snap = {
        .series = set.v,
        .n = set.n,
        .driver_version = dm->inv->driver_version,
        .xid_window_ms = dm->o->xid_window_ms,
        .clock_events_window_ms = dm->o->clock_events_window_ms,
    };
    const struct exporter_render_options ro = {
        .hostname = dm->o->no_hostname ? NULL : dm->o->hostname,
        .use_old_namespace = dm->o->use_old_namespace,
        .replace_blanks_in_model_name = dm->o->replace_blanks,
    };
    r = exporter_render(&dm->counters, &snap, &ro, out);
    exporter_series_set_release(&set);
    return r;
}

static int render(struct daemon *dm)
{
    struct exporter_counts *counts = NULL;
    struct strbuf out = STRBUF_INIT;
    struct http_body *body = NULL;
    size_t len = 0;
    if (count_windows(dm, &counts) < 0)
        return -ENOMEM;
    int r = render_into(dm, counts, &out);
    release_counts(counts, dm->inv->n_devices);
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
        exporter_procs_release(&dm->procs[i]);
        dm->procs[i] = dm->procs_work[i];
        dm->procs_work[i] = (struct exporter_procs){0};
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
    plan_procs(dm);
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
    const struct gpu_health_options hopts = {.wait_timeout_ms = HEALTH_WAIT_MS};
    if (gpu_health_start_with(dm->nvml, dm->inv, dm->loop, &hopts, on_health, dm, &dm->health) < 0)
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
    dm->proc_root = getenv("GPUPLANE_PROC_ROOT");
    r = ev_loop_new(&dm->loop);
    if (r >= 0)
        r = ev_loop_handle_stop_signals(dm->loop);
    if (r >= 0)
        r = ev_work_pool_new(dm->loop, 1, &dm->pool);
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
    if (r >= 0)
        r = exporter_kube_start(&dm->kube, dm->loop, dm->o);
    return r;
}

static void stop(struct daemon *dm)
{
    dm->health = gpu_health_stop(dm->health);
    dm->pool = ev_work_pool_free(dm->pool);
    dm->http = http_server_free(dm->http);
    exporter_kube_stop(&dm->kube);     /* its clients live on the loop */
    dm->loop = ev_loop_free(dm->loop); /* runs the completion of a collection still queued */
    dm->web = http_web_config_free(dm->web);
    dm->metrics = http_body_unref(dm->metrics);
    exporter_counters_release(&dm->counters);
    dm->tel = gpu_telemetry_free(dm->tel);
    close_windows(dm);
    dm->inv = gpu_inventory_free(dm->inv);
    dm->nvml = gpu_nvml_close(dm->nvml);
    for (size_t i = 0; dm->procs && dm->procs_work && i < dm->n_devs; i++) {
        exporter_procs_release(&dm->procs[i]);
        exporter_procs_release(&dm->procs_work[i]);
    }
    free(dm->procs);
    free(dm->procs_work);
    free(dm->procs_wanted);
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
