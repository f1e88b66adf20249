/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemon: one event loop that owns every piece of state (architecture.md, Threads). A build
 * has two halves. "prepare" does everything that can fail without touching what runs: resources
 * from an inventory and a config, a tracker that inherits the running one's health state, the CDI
 * specs (written before anything registers, so the names Allocate hands out resolve). "commit"
 * then swaps it in resource by resource: an endpoint whose resource stays keeps its gRPC server,
 * ListAndWatch streams and registration (a changed device list is sent as a new snapshot), one
 * whose resource went away stops, and a new resource gets an endpoint and a registration. Start,
 * SIGHUP and a GPU that comes back all go through it, so a reload with unchanged resources ends no
 * stream. The watch on the kubelet's directory re-serves and re-registers when the kubelet
 * restarts or our socket disappears. Health events and probe results arrive on the loop, go
 * through the tracker, and any change is sent to the ListAndWatch streams from the same callback.
 * Probes (an inventory read, which can block on a sick GPU) run on a worker; a probe that finds a
 * device the running inventory could not name triggers a full re-read there and a rebuild.
 * With --mock the simulated node's driver root (nvcdi_mock_root_new) stands in for the default
 * "/" in every configuration, the one at start and each reloaded one, and goes when we exit.
 */
#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cdi.h"
#include "dp-internal.h"
#include "gpu-nvml-abi.h"
#include "nvcdi.h"

#define DEFAULT_DIR "/var/lib/kubelet/device-plugins"
#define MIG_MINORS "/proc/driver/nvidia-caps/mig-minors"
/* How long a graceful stop may take before the remaining connections are cut. */
#define SHUTDOWN_GRACE_MS 2000
/* The longest single NVML event wait, so that SIGTERM and SIGHUP never wait long for the thread. */
#define MAX_WAIT_MS 500
/* dp_config_init's hook path, which a mock driver root replaces with its stub. */
#define DEFAULT_HOOK_PATH "/usr/bin/nvidia-ctk"

struct daemon {
    struct dp_config cfg;
    int argc;
    char **argv;
    struct ev_loop *loop;
    struct gpu_nvml *nvml;
    char *dir;
    bool do_register;
    struct dp_watch *watch;
    struct ev_work_pool *pool;
    struct ev_timer *probe_timer;
    struct ev_signal *sigquit;
    unsigned generation; /* bumped by every build: late probe results of an old one are dropped */
    bool probing;
    bool rescanning;
    bool stopping; /* graceful stop under way: no more rebuilds */
    size_t closing;
    char *cdi_dir;                /* where our CDI specs were written, NULL when none were */
    struct nvcdi_mock_root *mock; /* --mock: the simulated node's driver root */

    /* what a build makes */
    struct gpu_inventory *inv;
    struct dp_resources *res;
    struct dp_tracker *tracker;
    struct dp_topo *topo; /* allocated once: the plugins keep the pointer */
    struct dp_alloc_ctx alloc;
    struct dp_plugin **plugins;
    struct dp_registrar **regs;
    size_t n;
    struct gpu_health *health;
};

static uint64_t now_ms(const struct daemon *dm)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    (void)dm;
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- health ---- */

static const char *cause_name(enum dp_cause c)
{
    switch (c) {
    case DP_CAUSE_XID:
        return "xid";
    case DP_CAUSE_LOST:
        return "lost";
    case DP_CAUSE_REGISTER:
        return "event-registration";
    default:
        return "none";
    }
}

static void log_change(const struct dp_change *c, void *userdata)
{
    if (c->healthy)
        log_info("device healthy again", "uuid", c->uuid, "was", cause_name(c->cause));
    else if (c->cause == DP_CAUSE_XID)
        log_warn("device unhealthy", "uuid", c->uuid, "xid", LOG_INT(c->xid));
    else
        log_warn("device unhealthy", "uuid", c->uuid, "cause", cause_name(c->cause));
}

/* Logs the change of resource i and sends its devices to its ListAndWatch streams. */
static void announce(struct daemon *dm, size_t i)
{
    const struct dp_resource *r = &dm->res->items[i];
    size_t healthy = 0;
    for (size_t k = 0; k < r->n_devices; k++)
        healthy += r->devices[k].healthy;
    log_info("resource changed", "resource", r->name, "healthy", LOG_INT(healthy), "devices",
             LOG_INT(r->n_devices));
    if (dm->plugins[i])
        dp_plugin_broadcast(dm->plugins[i]);
}

/* Copies the tracker's state into the resources and tells the streams of those that changed. */
static void refresh(struct daemon *dm)
{
    for (size_t i = 0; i < dm->n; i++)
        if (dp_resource_apply_health(&dm->res->items[i], dm->tracker))
            announce(dm, i);
}

struct probe {
    struct daemon *dm;
    struct gpu_nvml *nvml;
    unsigned generation;
    struct gpu_inventory *inv;
};

static int probe_work(void *userdata)
{
    struct probe *p = userdata;
    const struct gpu_read_options opts = {.skip_topology = true};
    return gpu_inventory_read(p->nvml, &opts, NULL, &p->inv);
}

static void rescan_now(struct daemon *dm);

static void probe_done(int result, void *userdata)
{
    struct probe *p = userdata;
    struct daemon *dm = p->dm;
    dm->probing = false;
    if (result < 0 && result != -ECANCELED)
        log_warn("GPU probe failed", "error", strerror(-result));
    bool current = result >= 0 && p->generation == dm->generation && dm->tracker;
    if (current && dp_tracker_probe(dm->tracker, p->inv, now_ms(dm), log_change, dm))
        refresh(dm);
    /* A GPU that was lost before NVML could name it (or at the last build) answers again: only a
     * rebuild can advertise it. */
    if (current && dp_inventory_gained(dm->inv, p->inv))
        rescan_now(dm);
    gpu_inventory_free(p->inv);
    free(p);
}

static void probe_now(struct daemon *dm)
{
    struct probe *p;
    if (dm->probing || dm->rescanning || !dm->pool || !dm->nvml)
        return;
    p = calloc(1, sizeof(*p));
    if (!p)
        return;
    *p = (struct probe){.dm = dm, .nvml = dm->nvml, .generation = dm->generation};
    if (ev_work_submit(dm->pool, probe_work, probe_done, p) < 0) {
        free(p);
        return;
    }
    dm->probing = true;
}

static void on_probe_tick(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct daemon *dm = userdata;
    if (dm->tracker && dp_tracker_any_unhealthy(dm->tracker))
        probe_now(dm);
}

static void on_health(const struct gpu_health_event *e, void *userdata)
{
    struct daemon *dm = userdata;
    if (!dm->tracker)
        return;
    switch (dp_tracker_event(dm->tracker, e, now_ms(dm), log_change, dm)) {
    case DP_EVENT_CHANGED:
        refresh(dm);
        break;
    case DP_EVENT_PROBE:
        log_warn("NVML event wait failed; probing the GPUs", "nvml",
                 gpu_nvml_strerror(dm->nvml, e->wait_error));
        probe_now(dm);
        break;
    case DP_EVENT_IGNORED:
        if (e->type == nvmlEventTypeXidCriticalError)
            log_info("XID event leaves the device healthy", "uuid", e->uuid, "xid",
                     LOG_INT(e->xid));
        break;
    }
}

static void start_health(struct daemon *dm)
{
    /* Short waits: stopping the thread takes up to one wait, and a wait costs one call. */
    unsigned wait = dm->cfg.health.probe_interval_ms;
    const struct gpu_health_options opts = {.wait_timeout_ms =
                                                wait < MAX_WAIT_MS ? wait : MAX_WAIT_MS};
    if (!dm->cfg.health.enabled) {
        log_info("health checks disabled");
        return;
    }
    int r = gpu_health_start_with(dm->nvml, dm->inv, dm->loop, &opts, on_health, dm, &dm->health);
    if (r < 0)
        log_warn("GPU health events unavailable; devices stay healthy", "error", strerror(-r));
}

/* ---- build and teardown ---- */

static char *read_mig_minors(const struct dp_config *cfg)
{
    char *text = NULL;
    _cleanup_free_ char *path = NULL;
    const char *root =
        cfg->driver_root && strcmp(cfg->driver_root, "/") != 0 ? cfg->driver_root : "";
    if (asprintf(&path, "%s%s", root, MIG_MINORS) >= 0 &&
        file_read_all(path, 1 << 20, &text, NULL) >= 0)
        return text;
    if (file_read_all(MIG_MINORS, 1 << 20, &text, NULL) >= 0)
        return text;
    return NULL;
}

/* What prepare makes from one inventory and configuration before commit swaps it in. */
struct next {
    struct gpu_inventory *inv;
    struct dp_resources *res;
    struct dp_tracker *tracker;
};

static void next_release(struct next *nx)
{
    nx->res = dp_resources_free(nx->res);
    nx->tracker = dp_tracker_free(nx->tracker);
    nx->inv = gpu_inventory_free(nx->inv);
}

/* Writes the CDI specs of cfg (before anything registers: the names Allocate hands out must
 * resolve) and removes ours from a directory no longer used. Specs stay on SIGTERM, as NVIDIA's. */
static int write_cdi(struct daemon *dm, const struct dp_config *cfg, const struct dp_cdi *cdi,
                     struct diag *d)
{
    bool wanted = dp_cdi_wanted(cfg);
    const char *dir = cfg->cdi_spec_dir[0] ? cfg->cdi_spec_dir : CDI_SPEC_DIR_DYNAMIC;
    if (wanted) {
        int r = dp_cdi_write(cdi, dir, d);
        if (r < 0)
            return r;
        for (size_t c = 0; c < DP_CDI_N; c++)
            if (cdi->specs[c])
                log_info("CDI spec written", "dir", dir, "kind", cdi->specs[c]->kind, "devices",
                         LOG_INT(cdi->specs[c]->devices.len));
    }
    if (dm->cdi_dir && (!wanted || strcmp(dm->cdi_dir, dir) != 0)) {
        struct diag d2;
        diag_init(&d2);
        if (dp_cdi_remove(dm->cdi_dir, &d2) < 0)
            log_warn("cannot remove our old CDI specs", "error", d2.msg);
        else
            log_info("CDI specs removed", "dir", dm->cdi_dir);
    }
    free(dm->cdi_dir);
    dm->cdi_dir = wanted ? strdup(dir) : NULL;
    return 0;
}

/* Everything of a build that can fail, for cfg and inv (taken over), leaving the running state
 * alone (but for the CDI spec files, written last). */
static int prepare(struct daemon *dm, const struct dp_config *cfg, struct gpu_inventory *inv,
                   struct diag *d, struct next *nx)
{
    _cleanup_free_ char *minors = read_mig_minors(cfg);
    struct dp_cdi cdi = {0};
    *nx = (struct next){.inv = inv};
    int r = dp_resources_build(cfg, inv, minors, d, &nx->res);
    if (r >= 0)
        r = dp_tracker_new(inv, &cfg->health, now_ms(dm), &nx->tracker);
    if (r >= 0) {
        dp_tracker_inherit(nx->tracker, dm->tracker);
        for (size_t i = 0; i < nx->res->n; i++)
            dp_resource_apply_health(&nx->res->items[i], nx->tracker);
        r = dp_cdi_build(cfg, inv, nx->res, d, &cdi);
    }
    if (r >= 0)
        r = write_cdi(dm, cfg, &cdi, d);
    dp_cdi_release(&cdi);
    if (r < 0)
        next_release(nx);
    return r;
}

static int serve_one(struct daemon *dm, size_t i, struct diag *d)
{
    const struct dp_plugin_ctx ctx = {
        .loop = dm->loop, .cfg = &dm->cfg, .alloc = &dm->alloc, .topo = dm->topo};
    struct dp_resource *r = &dm->res->items[i];
    int ret = dp_plugin_new(&ctx, r, dm->dir, &dm->plugins[i]);
    if (ret >= 0)
        ret = dp_plugin_serve(dm->plugins[i], d);
    if (ret >= 0 && dm->do_register)
        ret =
            dp_registrar_new(dm->loop, dm->cfg.kubelet_socket, r->name, r->endpoint, &dm->regs[i]);
    if (ret < 0)
        return ret;
    log_info("serving resource", "resource", r->name, "devices", LOG_INT(r->n_devices), "endpoint",
             r->endpoint);
    return 0;
}

/* Takes over the endpoints of the running resources that nx keeps (same name), setting changed[i]
 * where the device list differs; stops the endpoints of the others. */
static void carry_endpoints(struct daemon *dm, const struct next *nx, struct dp_plugin **plugins,
                            struct dp_registrar **regs, bool *changed)
{
    for (size_t i = 0; i < nx->res->n; i++) {
        struct dp_resource *r = &nx->res->items[i];
        for (size_t j = 0; j < dm->n; j++) {
            if (!dm->plugins[j] || strcmp(dm->res->items[j].name, r->name) != 0)
                continue;
            plugins[i] = TAKE_PTR(dm->plugins[j]);
            regs[i] = TAKE_PTR(dm->regs[j]);
            dp_plugin_set_resource(plugins[i], r);
            changed[i] = !dp_resource_same_devices(&dm->res->items[j], r);
            break;
        }
    }
    for (size_t j = 0; j < dm->n; j++) {
        if (dm->plugins[j])
            log_info("resource no longer served", "resource", dm->res->items[j].name);
        dm->regs[j] = dp_registrar_free(dm->regs[j]);
        dm->plugins[j] = dp_plugin_free(dm->plugins[j]);
    }
}

/* Swaps nx in (taken over, even on failure). Endpoints of resources that stay keep their streams
 * and registration; a changed device list goes out as a new snapshot. Returns the first failure
 * to serve a new resource (the others are still served). */
static int commit(struct daemon *dm, struct next *nx, struct diag *d)
{
    size_t n = nx->res->n;
    _cleanup_free_ struct dp_plugin **plugins = calloc(n ? n : 1, sizeof(*plugins));
    _cleanup_free_ struct dp_registrar **regs = calloc(n ? n : 1, sizeof(*regs));
    _cleanup_free_ bool *changed = calloc(n ? n : 1, sizeof(*changed));
    _cleanup_free_ bool *fresh = calloc(n ? n : 1, sizeof(*fresh));
    if (!dm->topo)
        dm->topo = malloc(sizeof(*dm->topo));
    if (!plugins || !regs || !changed || !fresh || !dm->topo) {
        next_release(nx);
        return diag_fail(d, -ENOMEM, "out of memory");
    }
    dm->health = gpu_health_stop(dm->health);
    dm->generation++;
    carry_endpoints(dm, nx, plugins, regs, changed);
    free(dm->plugins);
    free(dm->regs);
    dp_resources_free(dm->res);
    dp_tracker_free(dm->tracker);
    gpu_inventory_free(dm->inv);
    dm->plugins = TAKE_PTR(plugins);
    dm->regs = TAKE_PTR(regs);
    dm->n = n;
    dm->res = TAKE_PTR(nx->res);
    dm->tracker = TAKE_PTR(nx->tracker);
    dm->inv = TAKE_PTR(nx->inv);
    dp_topo_build(dm->topo, dm->inv);
    dp_alloc_ctx_init(&dm->alloc, &dm->cfg);

    int ret = 0;
    for (size_t i = 0; i < n; i++) {
        if (dm->plugins[i]) {
            if (changed[i])
                announce(dm, i);
            continue;
        }
        fresh[i] = true;
        int r = serve_one(dm, i, d);
        if (r < 0 && ret >= 0)
            ret = r;
        if (r < 0)
            log_error("cannot serve", "resource", dm->res->items[i].name, "error",
                      d->msg[0] ? d->msg : strerror(-r));
    }
    if (n == 0)
        log_warn("No devices found. Waiting indefinitely.");
    /* Serve every new endpoint first, then register: the kubelet dials back inside Register. */
    for (size_t i = 0; i < n; i++)
        if (fresh[i] && dm->regs[i])
            dp_registrar_start(dm->regs[i]);
    start_health(dm);
    return ret;
}

/* A fresh inventory through prepare and commit. */
static int build(struct daemon *dm, struct diag *d)
{
    struct gpu_inventory *inv = NULL;
    struct next nx;
    int r = gpu_inventory_read(dm->nvml, NULL, d, &inv);
    if (r >= 0)
        r = prepare(dm, &dm->cfg, inv, d, &nx);
    return r < 0 ? r : commit(dm, &nx, d);
}

static void teardown(struct daemon *dm)
{
    dm->health = gpu_health_stop(dm->health);
    for (size_t i = 0; i < dm->n; i++) {
        dp_registrar_free(dm->regs[i]);
        dp_plugin_free(dm->plugins[i]);
    }
    free(dm->regs);
    free(dm->plugins);
    dm->regs = NULL;
    dm->plugins = NULL;
    dm->n = 0;
    dm->res = dp_resources_free(dm->res);
    dm->tracker = dp_tracker_free(dm->tracker);
    dm->inv = gpu_inventory_free(dm->inv);
}

/* ---- a GPU that comes back ---- */

struct rescan {
    struct daemon *dm;
    struct gpu_nvml *nvml;
    unsigned generation;
    struct gpu_inventory *inv;
    struct diag d;
};

static int rescan_work(void *userdata)
{
    struct rescan *p = userdata;
    return gpu_inventory_read(p->nvml, NULL, &p->d, &p->inv);
}

static void rescan_done(int result, void *userdata)
{
    struct rescan *p = userdata;
    struct daemon *dm = p->dm;
    struct next nx;
    struct diag d;
    diag_init(&d);
    dm->rescanning = false;
    if (result < 0 && result != -ECANCELED)
        log_warn("GPU rescan failed", "error", p->d.msg[0] ? p->d.msg : strerror(-result));
    if (result >= 0 && p->generation == dm->generation && !dm->stopping) {
        log_info("the GPUs changed; rebuilding the resources");
        int r = prepare(dm, &dm->cfg, TAKE_PTR(p->inv), &d, &nx);
        if (r >= 0)
            r = commit(dm, &nx, &d);
        if (r < 0)
            log_error("cannot rebuild the resources", "error", d.msg[0] ? d.msg : strerror(-r));
        else
            log_info("resources rebuilt", "resources", LOG_INT(dm->n));
    }
    gpu_inventory_free(p->inv);
    free(p);
}

/* A full inventory read (with topology) on the worker, then a rebuild on the loop. */
static void rescan_now(struct daemon *dm)
{
    struct rescan *p;
    if (dm->rescanning || !dm->pool || !dm->nvml)
        return;
    p = calloc(1, sizeof(*p));
    if (!p)
        return;
    *p = (struct rescan){.dm = dm, .nvml = dm->nvml, .generation = dm->generation};
    diag_init(&p->d);
    if (ev_work_submit(dm->pool, rescan_work, rescan_done, p) < 0) {
        free(p);
        return;
    }
    dm->rescanning = true;
}

/* ---- the kubelet's directory ---- */

static void reserve(struct daemon *dm, size_t i)
{
    struct diag d;
    diag_init(&d);
    if (dp_plugin_socket_ok(dm->plugins[i]))
        return;
    log_info("our socket is gone; serving again", "resource", dm->res->items[i].name);
    if (dp_plugin_serve(dm->plugins[i], &d) < 0) {
        log_error("cannot serve", "resource", dm->res->items[i].name, "error", d.msg);
        return;
    }
    if (dm->regs[i])
        dp_registrar_served_again(dm->regs[i]);
}

static void on_watch(enum dp_watch_what what, const char *name, void *userdata)
{
    struct daemon *dm = userdata;
    if (what == DP_WATCH_KUBELET)
        log_info("kubelet.sock created: the kubelet restarted; registering again");
    for (size_t i = 0; i < dm->n; i++) {
        if (what == DP_WATCH_REMOVED && strcmp(name, dm->res->items[i].endpoint) != 0)
            continue;
        if (!dm->plugins[i])
            continue;
        bool was_ok = dp_plugin_socket_ok(dm->plugins[i]);
        reserve(dm, i);
        if (what == DP_WATCH_KUBELET && was_ok && dm->regs[i])
            dp_registrar_kubelet_created(dm->regs[i]);
    }
}

/* ---- the simulated node ---- */

static int replace_str(char **field, const char *value)
{
    char *copy = strdup(value);
    if (!copy)
        return -ENOMEM;
    free(*field);
    *field = copy;
    return 0;
}

/* cfg's default driver root and hook path become the mock root's (--mock only). */
static int use_mock_root(const struct daemon *dm, struct dp_config *cfg, struct diag *d)
{
    int r = 0;
    if (!dm->mock)
        return 0;
    if (strcmp(cfg->driver_root, "/") == 0)
        r = replace_str(&cfg->driver_root, dm->mock->path);
    if (r >= 0 && dm->mock->ctk && strcmp(cfg->nvidia_cdi_hook_path, DEFAULT_HOOK_PATH) == 0)
        r = replace_str(&cfg->nvidia_cdi_hook_path, dm->mock->ctk);
    return r < 0 ? diag_fail(d, r, "out of memory") : 0;
}

/* ---- signals ---- */

static int setup_dir(struct daemon *dm);

/* Makes next the running configuration (taken over), keeping the NVML library chosen at start
 * (--mock, --nvml-lib). */
static void swap_config(struct daemon *dm, struct dp_config *next)
{
    struct cli_common common = next->common;
    unsigned interval = next->health.probe_interval_ms;
    next->common = dm->cfg.common;
    dm->cfg.common = common;
    dp_config_release(&dm->cfg);
    dm->cfg = *next;
    *next = (struct dp_config){0};
    if (dm->probe_timer && ev_timer_set(dm->probe_timer, interval, interval) < 0)
        log_warn("cannot change the probe interval");
}

/* A new kubelet socket: everything stops, the new directory is watched, and all is built anew. */
static void reload_elsewhere(struct daemon *dm, struct dp_config *next, struct diag *d)
{
    log_info("SIGHUP: the kubelet socket changed; serving and registering anew");
    teardown(dm);
    swap_config(dm, next);
    dm->watch = dp_watch_free(dm->watch);
    free(dm->dir);
    dm->dir = NULL;
    int r = setup_dir(dm);
    if (r >= 0)
        r = build(dm, d);
    if (r < 0)
        log_error("cannot serve the new configuration; waiting for the next SIGHUP", "error",
                  d->msg[0] ? d->msg : strerror(-r));
}

static void on_reload(void *userdata)
{
    struct daemon *dm = userdata;
    struct gpu_inventory *inv = NULL;
    struct dp_config next;
    struct next nx;
    struct diag d;
    diag_init(&d);
    if (dm->stopping)
        return;
    int r = dp_config_init(&next);
    if (r >= 0)
        r = dp_config_parse_args(dm->argc, dm->argv, &next, &d);
    if (r >= 0)
        r = use_mock_root(dm, &next, &d);
    if (r < 0) {
        log_error("SIGHUP: keeping the old configuration", "error",
                  d.msg[0] ? d.msg : strerror(-r));
        dp_config_release(&next);
        return;
    }
    log_info("SIGHUP: reloading the configuration");
    if (!dm->nvml) {
        swap_config(dm, &next);
        return;
    }
    if (strcmp(next.kubelet_socket, dm->cfg.kubelet_socket) != 0) {
        reload_elsewhere(dm, &next, &d);
        dp_config_release(&next);
        return;
    }
    /* Resources that stay keep their endpoints, streams and registrations (commit). */
    r = gpu_inventory_read(dm->nvml, NULL, &d, &inv);
    if (r >= 0)
        r = prepare(dm, &next, inv, &d, &nx);
    if (r < 0) {
        log_error("SIGHUP: cannot build the new configuration; keeping the running one", "error",
                  d.msg[0] ? d.msg : strerror(-r));
        dp_config_release(&next);
        return;
    }
    swap_config(dm, &next);
    if (commit(dm, &nx, &d) < 0)
        log_error("cannot serve every resource of the new configuration", "error", d.msg);
    else
        log_info("SIGHUP: configuration applied", "resources", LOG_INT(dm->n));
}

static void on_sigquit(struct ev_signal *sig, const struct signalfd_siginfo *si, void *userdata)
{
    ev_loop_stop(userdata, 0);
}

static void closed_one(void *userdata)
{
    struct daemon *dm = userdata;
    if (--dm->closing == 0)
        ev_loop_stop(dm->loop, 0);
}

static void grace_over(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    ev_loop_stop(userdata, 0);
}

/* Stop serving: ListAndWatch streams end with OK, our sockets (only ours) are removed. */
static void graceful_stop(struct daemon *dm)
{
    struct ev_timer *grace = NULL;
    dm->stopping = true;
    dm->watch = dp_watch_free(dm->watch);
    for (size_t i = 0; i < dm->n; i++)
        dm->regs[i] = dp_registrar_free(dm->regs[i]);
    dm->closing = dm->n + 1;
    for (size_t i = 0; i < dm->n; i++) {
        if (dm->plugins[i])
            dp_plugin_shutdown(dm->plugins[i], closed_one, dm);
        else
            dm->closing--;
    }
    if (--dm->closing > 0 &&
        ev_timer_add(dm->loop, SHUTDOWN_GRACE_MS, 0, grace_over, dm->loop, &grace) >= 0) {
        if (ev_loop_run(dm->loop) < 0)
            log_warn("event loop failed while stopping");
        ev_timer_del(grace);
    }
    log_info("stopped; sockets removed", "cdi_specs", dm->cdi_dir ? "kept" : "none");
    dm->health = gpu_health_stop(dm->health);
}

/* ---- run ---- */

static int setup_loop(struct daemon *dm)
{
    int r = ev_loop_new(&dm->loop);
    if (r >= 0)
        r = ev_loop_handle_stop_signals(dm->loop);
    if (r >= 0)
        r = ev_signal_add(dm->loop, SIGQUIT, on_sigquit, dm->loop, &dm->sigquit);
    if (r >= 0)
        r = ev_work_pool_new(dm->loop, 1, &dm->pool);
    if (r >= 0)
        r = ev_timer_add(dm->loop, dm->cfg.health.probe_interval_ms,
                         dm->cfg.health.probe_interval_ms, on_probe_tick, dm, &dm->probe_timer);
    if (r >= 0)
        ev_loop_on_reload(dm->loop, on_reload, dm);
    return r;
}

static int setup_dir(struct daemon *dm)
{
    _cleanup_free_ char *copy = strdup(dm->cfg.kubelet_socket ? dm->cfg.kubelet_socket : "");
    if (!copy)
        return -ENOMEM;
    dm->do_register = copy[0] != '\0';
    dm->dir = strdup(dm->do_register ? dirname(copy) : DEFAULT_DIR);
    if (!dm->dir)
        return -ENOMEM;
    if (!dm->do_register) {
        log_warn("--kubelet-socket is empty: serving without registering");
        return 0;
    }
    _cleanup_free_ char *base = strdup(dm->cfg.kubelet_socket);
    if (!base)
        return -ENOMEM;
    return dp_watch_new(dm->loop, dm->dir, basename(base), on_watch, dm, &dm->watch);
}

static int open_nvml(struct daemon *dm)
{
    struct diag d;
    diag_init(&d);
    int r = gpu_nvml_open(cli_common_nvml_lib(&dm->cfg.common), &d, &dm->nvml);
    if (r >= 0)
        return 0;
    if (dm->cfg.fail_on_init_error) {
        log_error("cannot open NVML", "error", d.msg);
        return r;
    }
    log_warn("cannot open NVML (failOnInitError=false)", "error", d.msg);
    log_warn("No devices found. Waiting indefinitely.");
    return 0;
}

/* With --mock, the simulated node's driver root; the configuration uses it unless it names a
 * root of its own. */
static int open_mock_root(struct daemon *dm, struct diag *d)
{
    struct gpu_inventory *inv = NULL;
    const struct gpu_read_options opts = {.skip_topology = true};
    if (!dm->cfg.common.mock || !dm->nvml)
        return 0;
    int r = gpu_inventory_read(dm->nvml, &opts, d, &inv);
    if (r >= 0)
        r = nvcdi_mock_root_new(inv, cli_common_nvml_lib(&dm->cfg.common), d, &dm->mock);
    gpu_inventory_free(inv);
    if (r >= 0)
        r = use_mock_root(dm, &dm->cfg, d);
    if (r >= 0)
        log_info("the simulated node's driver root", "path", dm->mock->path, "made",
                 dm->mock->made ? "true" : "false", "device_nodes",
                 dm->mock->char_devices ? "character devices" : "regular files");
    return r;
}

static int start(struct daemon *dm)
{
    struct diag d;
    diag_init(&d);
    int r = setup_loop(dm);
    if (r >= 0)
        r = setup_dir(dm);
    if (r < 0) {
        log_error("cannot start", "error", strerror(-r));
        return r;
    }
    r = open_nvml(dm);
    if (r < 0 || !dm->nvml)
        return r;
    r = open_mock_root(dm, &d);
    if (r >= 0)
        r = build(dm, &d);
    if (r < 0)
        log_error("cannot start the device plugin", "error", d.msg[0] ? d.msg : strerror(-r));
    return r;
}

static void cleanup(struct daemon *dm)
{
    teardown(dm);
    dm->watch = dp_watch_free(dm->watch);
    dm->pool = ev_work_pool_free(dm->pool);
    dm->loop = ev_loop_free(dm->loop); /* runs late probe completions while dm is alive */
    dm->nvml = gpu_nvml_close(dm->nvml);
    free(dm->dir);
    free(dm->topo);
    free(dm->cdi_dir);
    dm->mock = nvcdi_mock_root_free(dm->mock);
    dp_config_release(&dm->cfg);
}

int dp_daemon_run(struct dp_config *cfg, int argc, char **argv)
{
    struct daemon dm = {.cfg = *cfg, .argc = argc, .argv = argv};
    *cfg = (struct dp_config){0};
    int r = start(&dm);
    if (r >= 0) {
        r = ev_loop_run(dm.loop);
        if (r < 0)
            log_error("event loop failed", "error", strerror(-r));
        graceful_stop(&dm);
    }
    cleanup(&dm);
    return r < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}
