/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemon: one event loop that owns every piece of state (architecture.md, Threads). A "build"
 * reads the inventory, derives the resources, starts one endpoint per resource, registers each
 * with the kubelet and starts the NVML event thread; a teardown undoes it. SIGHUP re-reads the
 * configuration and does teardown + build, which re-registers with the new resources; the watch
 * on the kubelet's directory re-serves and re-registers when the kubelet restarts or our socket
 * disappears. Health events and probe results arrive on the loop, go through the tracker, and any
 * change is sent to the ListAndWatch streams from the same callback. Probes (an inventory read,
 * which can block on a sick GPU) run on a worker.
 */
#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dp-internal.h"
#include "gpu-nvml-abi.h"

#define DEFAULT_DIR "/var/lib/kubelet/device-plugins"
#define MIG_MINORS "/proc/driver/nvidia-caps/mig-minors"
/* How long a graceful stop may take before the remaining connections are cut. */
#define SHUTDOWN_GRACE_MS 2000
/* The longest single NVML event wait, so that SIGTERM and SIGHUP never wait long for the thread. */
#define MAX_WAIT_MS 500

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
    size_t closing;

    /* what a build makes */
    struct gpu_inventory *inv;
    struct dp_resources *res;
    struct dp_tracker *tracker;
    struct dp_topo *topo;
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

/* Copies the tracker's state into the resources and tells the streams of those that changed. */
static void refresh(struct daemon *dm)
{
    for (size_t i = 0; i < dm->n; i++) {
        struct dp_resource *r = &dm->res->items[i];
        if (!dp_resource_apply_health(r, dm->tracker))
            continue;
        size_t healthy = 0;
        for (size_t k = 0; k < r->n_devices; k++)
            healthy += r->devices[k].healthy;
        log_info("resource changed", "resource", r->name, "healthy", LOG_INT(healthy), "devices",
                 LOG_INT(r->n_devices));
        dp_plugin_broadcast(dm->plugins[i]);
    }
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

static void probe_done(int result, void *userdata)
{
    struct probe *p = userdata;
    struct daemon *dm = p->dm;
    dm->probing = false;
    if (result < 0 && result != -ECANCELED)
        log_warn("GPU probe failed", "error", strerror(-result));
    if (result >= 0 && p->generation == dm->generation && dm->tracker &&
        dp_tracker_probe(dm->tracker, p->inv, now_ms(dm), log_change, dm))
        refresh(dm);
    gpu_inventory_free(p->inv);
    free(p);
}

static void probe_now(struct daemon *dm)
{
    struct probe *p;
    if (dm->probing || !dm->pool || !dm->nvml)
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

static int make_resources(struct daemon *dm, struct diag *d)
{
    _cleanup_free_ char *minors = read_mig_minors(&dm->cfg);
    int r = gpu_inventory_read(dm->nvml, NULL, d, &dm->inv);
    if (r >= 0)
        r = dp_resources_build(&dm->cfg, dm->inv, minors, d, &dm->res);
    if (r >= 0)
        r = dp_tracker_new(dm->inv, &dm->cfg.health, now_ms(dm), &dm->tracker);
    if (r < 0)
        return r;
    dm->topo = malloc(sizeof(*dm->topo));
    if (!dm->topo)
        return -ENOMEM;
    dp_topo_build(dm->topo, dm->inv);
    dp_alloc_ctx_init(&dm->alloc, &dm->cfg);
    dm->n = dm->res->n;
    dm->plugins = calloc(dm->n ? dm->n : 1, sizeof(*dm->plugins));
    dm->regs = calloc(dm->n ? dm->n : 1, sizeof(*dm->regs));
    return dm->plugins && dm->regs ? 0 : -ENOMEM;
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

static int build(struct daemon *dm, struct diag *d)
{
    dm->generation++;
    int r = make_resources(dm, d);
    for (size_t i = 0; i < dm->n && r >= 0; i++)
        r = serve_one(dm, i, d);
    if (r < 0)
        return r;
    if (dm->n == 0)
        log_warn("No devices found. Waiting indefinitely.");
    /* Serve every endpoint first, then register: the kubelet dials back inside Register. */
    for (size_t i = 0; i < dm->n; i++)
        if (dm->regs[i])
            dp_registrar_start(dm->regs[i]);
    refresh(dm);
    start_health(dm);
    return 0;
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
    free(dm->topo);
    dm->topo = NULL;
    dm->inv = gpu_inventory_free(dm->inv);
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
        dp_registrar_start(dm->regs[i]);
}

static void on_watch(enum dp_watch_what what, const char *name, void *userdata)
{
    struct daemon *dm = userdata;
    if (what == DP_WATCH_KUBELET)
        log_info("kubelet.sock created: the kubelet restarted; registering again");
    for (size_t i = 0; i < dm->n; i++) {
        if (what == DP_WATCH_REMOVED && strcmp(name, dm->res->items[i].endpoint) != 0)
            continue;
        bool was_ok = dp_plugin_socket_ok(dm->plugins[i]);
        reserve(dm, i);
        if (what == DP_WATCH_KUBELET && was_ok && dm->regs[i])
            dp_registrar_start(dm->regs[i]);
    }
}

/* ---- signals ---- */

static void on_reload(void *userdata)
{
    struct daemon *dm = userdata;
    struct dp_config next;
    struct diag d;
    diag_init(&d);
    int r = dp_config_init(&next);
    if (r >= 0)
        r = dp_config_parse_args(dm->argc, dm->argv, &next, &d);
    if (r < 0) {
        log_error("SIGHUP: keeping the old configuration", "error",
                  d.msg[0] ? d.msg : strerror(-r));
        dp_config_release(&next);
        return;
    }
    log_info("SIGHUP: reloading the configuration and re-registering");
    /* The NVML library chosen at start (--mock, --nvml-lib) stays. */
    struct cli_common common = next.common;
    next.common = dm->cfg.common;
    dm->cfg.common = common;
    teardown(dm);
    dp_config_release(&dm->cfg);
    dm->cfg = next;
    if (build(dm, &d) < 0)
        log_error("cannot serve the new configuration; waiting for the next SIGHUP", "error",
                  d.msg);
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
    dm->watch = dp_watch_free(dm->watch);
    for (size_t i = 0; i < dm->n; i++)
        dm->regs[i] = dp_registrar_free(dm->regs[i]);
    dm->closing = dm->n + 1;
    for (size_t i = 0; i < dm->n; i++)
        dp_plugin_shutdown(dm->plugins[i], closed_one, dm);
    if (--dm->closing > 0 &&
        ev_timer_add(dm->loop, SHUTDOWN_GRACE_MS, 0, grace_over, dm->loop, &grace) >= 0) {
        if (ev_loop_run(dm->loop) < 0)
            log_warn("event loop failed while stopping");
        ev_timer_del(grace);
    }
    log_info("stopped; sockets removed");
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
