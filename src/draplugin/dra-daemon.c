/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemon: one event loop owns everything (architecture.md, Threads). Start-up reads the GPUs,
 * scans the driver root for the CDI edits, connects to the API server, loads the checkpoint (a
 * file that cannot be trusted is moved aside and the driver starts empty, loudly), then serves
 * dra.sock, publishes the ResourceSlices and offers the registration socket, in that order, so
 * that by the time the kubelet learns of us everything it may call is there.
 *
 * Health follows gpuplane's device plugin rather than NVIDIA's DRA driver: a fatal XID (NVIDIA's
 * ignored list aside) or a double-bit ECC error taints the GPU in the republished slice, and a
 * tainted GPU that answers NVML again after a quiet window (--health-recovery-window; 0 keeps
 * NVIDIA's never) is untainted. Probes are inventory reads on the worker.
 *
 * SIGTERM/SIGINT: claims in flight stop at their next step (what they wrote is consistent: the
 * checkpoint and the CDI specs stay), the sockets go, the slices stay (the kubelet removes them
 * when no driver instance is left), and a driver root made for --mock is removed.
 */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dra-claim.h"
#include "dra-internal.h"
#include "dra-slices.h"
#include "gpu-nvml-abi.h"

/* One NVML event wait: SIGTERM waits at most this long for the health thread (a wait costs one
 * call; ten a second is nothing). */
#define HEALTH_WAIT_MS 100
#define PROBE_MS 5000
#define SOCKET_CHECK_MS 1000
/* Quiet time after a change to our slices by someone else before publishing again. */
#define RESYNC_DELAY_MS 1000

/* NVIDIA's default ignored XIDs: application faults and recoverable engine errors. */
static const unsigned long long IGNORED_XIDS[] = {13, 31, 43, 45, 68, 109};

struct daemon {
    const struct dra_options *o;
    struct ev_loop *loop;
    struct ev_work_pool *pool;
    struct gpu_nvml *nvml;
    struct gpu_inventory *inv;
    struct nvcdi *nv;
    struct nvcdi_mock_root *mock; /* --mock without a driver root: the simulated node's */
    struct kube_config *kcfg;
    struct kube_client *kube;
    struct dra_publisher *pub;
    struct dra_preparer *prep;
    struct rpc_server *srv;
    struct dra_registrar *reg;
    struct dra_healthcheck *hc;
    struct gpu_health *health;
    struct ev_timer *probe_timer;
    struct ev_timer *sock_timer;
    struct kube_watch *slice_watch;
    struct ev_timer *resync_timer;
    bool slices_synced;
    bool probing;
    bool stopping;
    bool *unhealthy;    /* per NVML index: what the slices taint */
    uint64_t *since_ms; /* per NVML index: the last fatal event */
    char *plugin_dir, *dra_sock, *reg_sock, *cp_path, *mps_root;
    struct dra_file_id dra_bound;
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- slices and health ---- */

static void published(int result, void *userdata)
{
    if (result >= 0)
        log_info("the API holds our ResourceSlices");
}

static void republish(struct daemon *dm)
{
    if (dra_publish(dm->pub, published, dm) < 0)
        log_error("cannot republish the ResourceSlices");
}

/* Someone else changed or deleted our slices (a starting kubelet wipes the node's, an operator
 * edits one): publish again once the burst of events is over. Our own writes come back as events
 * too; the run they cause finds everything in place and writes nothing. */
static void on_slice_event(enum kube_event ev, json_t *obj, void *userdata)
{
    struct daemon *dm = userdata;
    if (ev == KUBE_SYNCED) {
        dm->slices_synced = true;
        return;
    }
    if (dm->slices_synced && ev_timer_set(dm->resync_timer, RESYNC_DELAY_MS, 0) < 0)
        log_warn("cannot arm the slice resync timer");
}

static void on_resync(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct daemon *dm = userdata;
    log_debug(1, "our ResourceSlices changed in the API; publishing again");
    republish(dm);
}

static int watch_slices(struct daemon *dm, struct diag *d)
{
    char path[1024];
    int r = kube_path(path, sizeof(path), "resource.k8s.io/v1", "resourceslices", NULL, NULL, d);
    size_t len = strlen(path);
    if (r >= 0 && (size_t)snprintf(path + len, sizeof(path) - len,
                                   "?fieldSelector=spec.nodeName%%3D%s%%2Cspec.driver%%3D%s",
                                   dm->o->node_name, dm->o->driver_name) >= sizeof(path) - len)
        r = diag_fail(d, -ENAMETOOLONG, "node or driver name too long");
    if (r >= 0)
        r = ev_timer_add(dm->loop, RESYNC_DELAY_MS, 0, on_resync, dm, &dm->resync_timer);
    if (r >= 0)
        r = ev_timer_disarm(dm->resync_timer);
    if (r >= 0)
        r = kube_watch_new(dm->kube, path, on_slice_event, dm, &dm->slice_watch);
    if (r < 0 && (!d || !d->msg[0]))
        diag_fail(d, r, "cannot watch the ResourceSlices: %s", strerror(-r));
    return r;
}

static void set_unhealthy(struct daemon *dm, size_t i, const char *why, unsigned long long xid)
{
    dm->since_ms[i] = now_ms();
    if (dm->unhealthy[i])
        return;
    dm->unhealthy[i] = true;
    log_warn("device unhealthy: tainting it", "uuid", dm->inv->devices[i].uuid, "cause", why, "xid",
             LOG_INT(xid));
    republish(dm);
}

static bool xid_fatal(unsigned long long xid)
{
    for (size_t i = 0; i < ARRAY_SIZE(IGNORED_XIDS); i++)
        if (IGNORED_XIDS[i] == xid)
            return false;
    return true;
}

static void probe_now(struct daemon *dm);

static void on_health(const struct gpu_health_event *e, void *userdata)
{
    struct daemon *dm = userdata;
    bool known = e->gpu_index >= 0 && (size_t)e->gpu_index < dm->inv->n_devices;
    if (e->wait_error) {
        if (known)
            set_unhealthy(dm, (size_t)e->gpu_index, "event-registration", 0);
        else
            probe_now(dm); /* one failed wait says nothing about a particular GPU */
        return;
    }
    if (!known)
        return;
    if (e->type == nvmlEventTypeXidCriticalError && xid_fatal(e->xid))
        set_unhealthy(dm, (size_t)e->gpu_index, "xid", e->xid);
    else if (e->type == nvmlEventTypeDoubleBitEccError)
        set_unhealthy(dm, (size_t)e->gpu_index, "double-bit-ecc", 0);
    else if (e->type == nvmlEventTypeXidCriticalError)
        log_info("XID event leaves the device healthy", "uuid", e->uuid, "xid", LOG_INT(e->xid));
}

struct probe {
    struct daemon *dm;
    struct gpu_inventory *inv;
};

static int probe_work(void *userdata)
{
    struct probe *pr = userdata;
    const struct gpu_read_options opts = {.skip_topology = true};
    return gpu_inventory_read(pr->dm->nvml, &opts, NULL, &pr->inv);
}

/* A probe: GPUs that fail are (still) unhealthy; tainted ones that answer and have been quiet for
 * the recovery window are untainted. */
static void probe_done(int result, void *userdata)
{
    struct probe *pr = userdata;
    struct daemon *dm = pr->dm;
    uint64_t window = (uint64_t)dm->o->recovery_window_s * 1000u;
    bool changed = false;
    dm->probing = false;
    for (size_t i = 0; result >= 0 && i < dm->inv->n_devices; i++) {
        const struct gpu_device *g = i < pr->inv->n_devices ? &pr->inv->devices[i] : NULL;
        if (!g || g->error || strcmp(g->uuid, dm->inv->devices[i].uuid) != 0) {
            if (!dm->unhealthy[i])
                changed = true;
            dm->unhealthy[i] = true;
            dm->since_ms[i] = now_ms();
        } else if (dm->unhealthy[i] && window && now_ms() - dm->since_ms[i] >= window) {
            dm->unhealthy[i] = false;
            changed = true;
            log_info("device healthy again: untainting it", "uuid", g->uuid);
        }
    }
    if (result < 0 && result != -ECANCELED)
        log_warn("GPU probe failed", "error", strerror(-result));
    gpu_inventory_free(pr->inv);
    free(pr);
    if (changed && !dm->stopping)
        republish(dm);
}

static void probe_now(struct daemon *dm)
{
    struct probe *pr;
    if (dm->probing || !(pr = calloc(1, sizeof(*pr))))
        return;
    pr->dm = dm;
    if (ev_work_submit(dm->pool, probe_work, probe_done, pr) < 0) {
        free(pr);
        return;
    }
    dm->probing = true;
}

static void on_probe_tick(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct daemon *dm = userdata;
    for (size_t i = 0; i < dm->inv->n_devices; i++) {
        if (dm->unhealthy[i]) {
            probe_now(dm);
            return;
        }
    }
}

static int start_health(struct daemon *dm)
{
    const struct gpu_health_options opts = {.wait_timeout_ms = HEALTH_WAIT_MS};
    size_t n = dm->inv->n_devices;
    dm->unhealthy = calloc(n ? n : 1, sizeof(*dm->unhealthy));
    dm->since_ms = calloc(n ? n : 1, sizeof(*dm->since_ms));
    if (!dm->unhealthy || !dm->since_ms)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        dm->unhealthy[i] = dm->inv->devices[i].error != 0;
    int r = gpu_health_start_with(dm->nvml, dm->inv, dm->loop, &opts, on_health, dm, &dm->health);
    if (r < 0)
        log_warn("GPU health events unavailable; devices stay untainted", "error", strerror(-r));
    return ev_timer_add(dm->loop, PROBE_MS, PROBE_MS, on_probe_tick, dm, &dm->probe_timer);
}

/* ---- sockets ---- */

static int serve_dra(struct daemon *dm, struct diag *d)
{
    int r = file_mkdir_p(dm->plugin_dir, 0750);
    if (r < 0)
        return diag_fail(d, r, "cannot create %s: %s", dm->plugin_dir, strerror(-r));
    r = rpc_server_listen(dm->srv, dm->dra_sock, d);
    if (r < 0)
        return r;
    dra_file_id_get(dm->dra_sock, &dm->dra_bound);
    log_info("serving the DRA services", "socket", dm->dra_sock);
    return 0;
}

/* dra.sock gone (the kubelet's plugins directory removed): listen again; calls in flight on the
 * old connections go on. */
static void on_sock_check(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct daemon *dm = userdata;
    struct dra_file_id now;
    struct diag d;
    diag_init(&d);
    dra_file_id_get(dm->dra_sock, &now);
    if (dra_file_id_equal(&now, &dm->dra_bound))
        return;
    log_info("dra.sock is gone; serving it again", "socket", dm->dra_sock);
    if (serve_dra(dm, &d) < 0)
        log_error("cannot serve dra.sock", "error", d.msg);
}

static bool serving(void *userdata)
{
    struct daemon *dm = userdata;
    struct dra_file_id now;
    dra_file_id_get(dm->dra_sock, &now);
    return dra_file_id_equal(&now, &dm->dra_bound);
}

/* ---- start-up ---- */

/* With --mock and no driver root, the simulated node's (removed in stop()). */
static int open_mock_root(struct daemon *dm, struct nvcdi_options *nopts, struct diag *d)
{
    if (dm->o->driver_root)
        return 0;
    int r = nvcdi_mock_root_new(dm->inv, cli_common_nvml_lib(&dm->o->common), d, &dm->mock);
    if (r < 0)
        return r;
    nopts->driver_root = dm->mock->path;
    if (!nopts->hook_path)
        nopts->hook_path = dm->mock->cdi_hook;
    log_info("the simulated node's driver root", "path", dm->mock->path, "made",
             dm->mock->made ? "true" : "false", "device_nodes",
             dm->mock->char_devices ? "character devices" : "regular files");
    return 0;
}

static int open_gpus(struct daemon *dm, struct diag *d)
{
    struct nvcdi_options nopts = {
        .kind = NVCDI_KIND_CLAIM,
        .driver_root = dm->o->driver_root,
        .dev_root = dm->o->dev_root,
        .hook_path = dm->o->hook_path,
    };
    int r = gpu_nvml_open(cli_common_nvml_lib(&dm->o->common), d, &dm->nvml);
    if (r >= 0)
        r = gpu_inventory_read(dm->nvml, NULL, d, &dm->inv);
    if (r >= 0)
        r = open_mock_root(dm, &nopts, d);
    if (r >= 0)
        r = nvcdi_new(dm->inv, &nopts, d, &dm->nv);
    if (r >= 0)
        log_info("GPUs found", "count", LOG_INT(dm->inv->n_devices), "driver",
                 dm->inv->driver_version);
    return r;
}

static int open_kube(struct daemon *dm, struct diag *d)
{
    const struct kube_config_options copts = {.kubeconfig = dm->o->kubeconfig,
                                              .allow_insecure = dm->o->allow_insecure};
    const struct kube_client_options kopts = {.qps = dm->o->kube_qps,
                                              .burst = (unsigned)dm->o->kube_burst};
    int r = kube_config_load(&copts, d, &dm->kcfg);
    if (r < 0)
        return r;
    r = kube_client_new(dm->loop, dm->kcfg, &kopts, &dm->kube);
    if (r < 0)
        return diag_fail(d, r, "cannot create the API client: %s", strerror(-r));
    log_info("API server", "server", dm->kcfg->server, "config", dm->kcfg->source);
    return 0;
}

static int make_paths(struct daemon *dm)
{
    const struct dra_options *o = dm->o;
    if (asprintf(&dm->plugin_dir, "%s/%s", o->plugins_dir, o->driver_name) < 0 ||
        asprintf(&dm->dra_sock, "%s/%s", dm->plugin_dir, DRA_SOCKET_NAME) < 0 ||
        asprintf(&dm->cp_path, "%s/%s", dm->plugin_dir, DRA_CHECKPOINT_NAME) < 0 ||
        asprintf(&dm->mps_root, "%s/mps", dm->plugin_dir) < 0 ||
        asprintf(&dm->reg_sock, "%s/%s-reg.sock", o->registrar_dir, o->driver_name) < 0)
        return -ENOMEM;
    return 0;
}

/* Removes the temporary files of atomic writes (".<name>.tmpXXXXXX") a crash left in dir, those
 * whose name starts with prefix: a killed driver may have been half way through writing the
 * checkpoint or another claim's CDI spec. Nothing else writes these names (a second instance
 * during a rolling update would at worst see one write fail and be retried by the kubelet). */
static void remove_stale_temps(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    if (!d)
        return;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 || !strstr(e->d_name, ".tmp"))
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            log_warn("removed a temporary file a crash left", "dir", dir, "file", e->d_name);
    }
    closedir(d);
}

/* The checkpoint as saved; one that cannot be trusted is moved aside and the driver starts
 * empty (the claims it knew are prepared again on the kubelet's next call). */
static int load_checkpoint(struct daemon *dm, struct diag *d, struct dra_checkpoint **ret)
{
    _cleanup_free_ char *boot = NULL;
    int r = dra_boot_id(NULL, &boot);
    if (r < 0)
        return diag_fail(d, r, "cannot read the boot ID: %s", strerror(-r));
    r = file_mkdir_p(dm->plugin_dir, 0750);
    if (r < 0)
        return diag_fail(d, r, "cannot create %s: %s", dm->plugin_dir, strerror(-r));
    remove_stale_temps(dm->plugin_dir, "." DRA_CHECKPOINT_NAME);
    remove_stale_temps(dm->o->cdi_root, ".k8s.gpu.nvidia.com-claim_");
    r = dra_checkpoint_load(dm->cp_path, boot, d, ret);
    if (r != -EBADMSG)
        return r;
    _cleanup_free_ char *aside = NULL;
    if (asprintf(&aside, "%s.corrupt", dm->cp_path) < 0)
        return -ENOMEM;
    log_error("the checkpoint cannot be trusted; moving it aside and starting empty", "error",
              d->msg, "moved_to", aside);
    if (rename(dm->cp_path, aside) < 0)
        return diag_fail(d, -errno, "cannot move %s aside: %s", dm->cp_path, strerror(errno));
    diag_init(d);
    return dra_checkpoint_new(boot, ret);
}

/* Claims a crash left PrepareStarted were never answered: the kubelet prepares them again if it
 * still wants them, and may never call for them again if their pod went away meanwhile. Rolling
 * them back now (spec removed, entry dropped) leaves nothing behind either way. */
static int roll_back_started(struct daemon *dm, struct dra_checkpoint *cp, struct diag *d)
{
    const struct dra_cdi_options copts = {.mps_root = dm->mps_root};
    const char *uid;
    json_t *entry, *tmp;
    size_t n = 0;
    json_object_foreach_safe(cp->claims, tmp, uid, entry)
    {
        const char *state = json_string_value(json_object_get(entry, "state"));
        if (!state || strcmp(state, DRA_STATE_STARTED) != 0)
            continue;
        log_warn("claim left half prepared by a crash: rolling it back", "uid", uid, "claim",
                 json_string_value(json_object_get(entry, "name")));
        int r = dra_cdi_remove_with(dm->o->cdi_root, uid, &copts, d);
        if (r < 0)
            return r;
        dra_checkpoint_drop(cp, uid);
        n++;
    }
    return n ? dra_checkpoint_save(cp, dm->cp_path, d) : 0;
}

static int start_claims(struct daemon *dm, struct diag *d)
{
    struct dra_checkpoint *cp = NULL;
    int r = file_mkdir_p(dm->o->cdi_root, 0755);
    if (r < 0)
        return diag_fail(d, r, "cannot create %s: %s", dm->o->cdi_root, strerror(-r));
    r = load_checkpoint(dm, d, &cp);
    if (r >= 0)
        r = roll_back_started(dm, cp, d);
    if (r < 0) {
        dra_checkpoint_free(cp);
        return r;
    }
    log_info("checkpoint loaded", "path", dm->cp_path, "claims",
             LOG_INT(json_object_size(cp->claims)));
    const struct dra_prepare_ctx ctx = {
        .loop = dm->loop,
        .pool = dm->pool,
        .kube = dm->kube,
        .nv = dm->nv,
        .inv = dm->inv,
        .node = dm->o->node_name,
        .driver = dm->o->driver_name,
        .cdi_root = dm->o->cdi_root,
        .mps_root = dm->mps_root,
        .checkpoint_path = dm->cp_path,
    };
    r = dra_preparer_new(&ctx, cp, &dm->prep);
    if (r < 0) {
        dra_checkpoint_free(cp);
        return diag_fail(d, r, "out of memory");
    }
    r = rpc_server_new(dm->loop, NULL, &dm->srv);
    if (r >= 0)
        r = dra_service_add(dm->srv, dm->prep);
    if (r < 0)
        return diag_fail(d, r, "cannot set up the DRA services: %s", strerror(-r));
    return serve_dra(dm, d);
}

static int start_slices(struct daemon *dm, struct diag *d)
{
    const struct dra_slices_options sopts = {
        .node = dm->o->node_name,
        .driver = dm->o->driver_name,
        .sysfs_root = dm->o->sysfs_root,
        .unhealthy = dm->unhealthy,
    };
    int r = dra_publisher_new(dm->loop, dm->kube, dm->inv, &sopts, &dm->pub);
    if (r >= 0)
        r = dra_publish(dm->pub, published, dm);
    if (r >= 0)
        r = watch_slices(dm, d);
    if (r < 0)
        return diag_fail(d, r, "cannot publish the ResourceSlices: %s", strerror(-r));
    return 0;
}

static int start(struct daemon *dm, struct diag *d)
{
    int r = ev_loop_new(&dm->loop);
    if (r >= 0)
        r = ev_loop_handle_stop_signals(dm->loop);
    if (r >= 0)
        r = ev_work_pool_new(dm->loop, 1, &dm->pool);
    if (r >= 0)
        r = make_paths(dm);
    if (r < 0)
        return diag_fail(d, r, "cannot start: %s", strerror(-r));
    r = open_gpus(dm, d);
    if (r >= 0)
        r = open_kube(dm, d);
    if (r >= 0)
        r = start_health(dm);
    if (r >= 0)
        r = start_claims(dm, d);
    if (r >= 0)
        r = start_slices(dm, d);
    if (r >= 0)
        r = dra_registrar_new(dm->loop, dm->reg_sock, dm->o->driver_name, dm->dra_sock, d,
                              &dm->reg);
    if (r >= 0)
        r = ev_timer_add(dm->loop, SOCKET_CHECK_MS, SOCKET_CHECK_MS, on_sock_check, dm,
                         &dm->sock_timer);
    if (r >= 0 && dm->o->healthcheck_port >= 0)
        r = dra_healthcheck_new(dm->loop, dm->o->healthcheck_port, serving, dm, d, &dm->hc);
    return r;
}

/* ---- shutdown ---- */

static void stop(struct daemon *dm)
{
    dm->stopping = true;
    dra_preparer_stop(dm->prep);
    dm->reg = dra_registrar_free(dm->reg);
    dm->hc = dra_healthcheck_free(dm->hc);
    dm->srv = rpc_server_free(dm->srv); /* removes dra.sock; open calls are cancelled */
    dm->health = gpu_health_stop(dm->health);
    dm->pool = ev_work_pool_free(dm->pool);
    dm->slice_watch = kube_watch_free(dm->slice_watch);
    dm->pub = dra_publisher_free(dm->pub);
    dm->kube = kube_client_free(dm->kube);
    /* runs the completions of work still queued while the preparer is alive */
    dm->loop = ev_loop_free(dm->loop);
    dm->prep = dra_preparer_free(dm->prep);
    dm->kcfg = kube_config_free(dm->kcfg);
    dm->nv = nvcdi_free(dm->nv);
    dm->mock = nvcdi_mock_root_free(dm->mock);
    dm->inv = gpu_inventory_free(dm->inv);
    dm->nvml = gpu_nvml_close(dm->nvml);
    free(dm->unhealthy);
    free(dm->since_ms);
    free(dm->plugin_dir);
    free(dm->dra_sock);
    free(dm->reg_sock);
    free(dm->cp_path);
    free(dm->mps_root);
}

int dra_daemon_run(const struct dra_options *o)
{
    struct daemon dm = {.o = o};
    struct diag d;
    diag_init(&d);
    int r = start(&dm, &d);
    if (r < 0) {
        log_error("cannot start the DRA driver", "error", d.msg[0] ? d.msg : strerror(-r));
    } else {
        log_info("DRA driver running", "driver", o->driver_name, "node", o->node_name);
        r = ev_loop_run(dm.loop);
        if (r < 0)
            log_error("event loop failed", "error", strerror(-r));
        else
            log_info("stopping: sockets removed; checkpoint, CDI specs and slices kept");
    }
    stop(&dm);
    return r < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}
