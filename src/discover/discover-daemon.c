/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane discover`: NVIDIA GPU Feature Discovery's node labels. Each pass reads the GPUs,
 * computes the label set and publishes it (the NFD features file, or the NodeFeature object), then
 * sleeps
 * --sleep-interval. SIGHUP reloads the configuration and labels again at once; SIGTERM stops.
 *
 * Unlike NVIDIA's GFD, labels do not flap: the features file is never removed on exit, a label set
 * is published only when complete, and a pass that cannot read the GPUs (a transient NVML error, or
 * every GPU lost) keeps the last good labels instead of publishing an empty set. A GPU that is lost
 * or unhealthy does not take the node's labels away either: the GPUs that answer are labelled.
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "discover-internal.h"
#include "ev.h"
#include "kube.h"

#define MACHINE_MAX 4096

struct daemon {
    struct discover_options *o;
    int argc;
    char **argv;
    struct ev_loop *loop;
    struct ev_timer *timer;
    struct gpu_nvml *nvml;
    struct kube_config *kcfg;
    struct kube_client *kube;
    struct discover_nf *nf;
    struct discover_labels last; /* the last good set (what is published, or being published) */
    bool have_last;
    bool publishing;
    bool again; /* a pass was asked for while publishing */
    int passes;
};

/* ---- one labelling pass ---- */

/* The DMI product name, trimmed; NULL when unreadable (the label says "unknown"). */
static char *read_machine(const char *path)
{
    char *data = NULL;
    size_t len = 0;
    if (!path || !path[0] || file_read_all(path, MACHINE_MAX, &data, &len) < 0)
        return NULL;
    while (len > 0 && strchr(" \t\r\n", data[len - 1]))
        data[--len] = '\0';
    return data;
}

static int compute(struct daemon *dm, struct discover_labels *ret, struct diag *d)
{
    _cleanup_(gpu_inventory_freep) struct gpu_inventory *inv = NULL;
    _cleanup_free_ char *machine = read_machine(dm->o->machine_type_file);
    const struct gpu_read_options ropts = {.skip_topology = true};
    int r = gpu_inventory_read(dm->nvml, &ropts, d, &inv);
    if (r < 0)
        return r;
    const struct discover_input in = {
        .inv = inv,
        .mig = dm->o->mig,
        .shares = dm->o->shares,
        .n_shares = dm->o->n_shares,
        .machine = machine,
        .timestamp = dm->o->no_timestamp ? -1 : (int64_t)time(NULL),
    };
    r = discover_labels_compute(&in, d, ret);
    for (size_t i = 0; r >= 0 && ret->warnings && ret->warnings[i]; i++)
        log_warn(ret->warnings[i]);
    return r;
}

static void arm_next(struct daemon *dm)
{
    if (dm->o->oneshot || dm->o->sleep_interval_ms == DISCOVER_SLEEP_INFINITE)
        return;
    if (ev_timer_set(dm->timer, dm->o->sleep_interval_ms, 0) < 0)
        log_error("cannot arm the labelling timer");
}

/* A pass is over: the next one is due after the interval (or now, if asked for meanwhile). */
static void pass_done(struct daemon *dm, bool ok)
{
    dm->publishing = false;
    dm->passes++;
    if (dm->o->oneshot) {
        ev_loop_stop(dm->loop, ok ? CLI_EXIT_OK : CLI_EXIT_FAILURE);
        return;
    }
    if (dm->again) {
        dm->again = false;
        (void)!ev_timer_set(dm->timer, 1, 0);
        return;
    }
    arm_next(dm);
}

static void on_published(int result, const char *error, void *userdata)
{
    struct daemon *dm = userdata;
    char name[300];
    if (discover_nf_name(dm->o->node_name, name, sizeof(name)) < 0)
        name[0] = '\0';
    if (result < 0)
        log_error("cannot publish the labels", "error", error);
    else if (result == DISCOVER_NF_CREATED)
        log_info("NodeFeature created", "name", name, "labels", LOG_INT(dm->last.n));
    else if (result == DISCOVER_NF_UPDATED)
        log_info("NodeFeature updated", "name", name, "labels", LOG_INT(dm->last.n));
    else
        log_debug(2, "NodeFeature unchanged", "name", name);
    pass_done(dm, result >= 0);
}

static void publish(struct daemon *dm)
{
    struct diag d;
    diag_init(&d);
    dm->publishing = true;
    if (dm->nf) {
        int r = discover_nf_publish(dm->nf, &dm->last, on_published, dm);
        if (r < 0) {
            log_error("cannot publish the labels", "error", strerror(-r));
            pass_done(dm, false);
        }
        return;
    }
    int r = discover_output_file(dm->o->output_file, &dm->last, &d);
    if (r < 0)
        log_error("cannot write the labels", "error", d.msg);
    else if (r > 0)
        log_info("labels written", "file", dm->o->output_file, "labels", LOG_INT(dm->last.n));
    else
        log_debug(2, "labels unchanged", "file", dm->o->output_file);
    pass_done(dm, r >= 0);
}

/* Computes the labels; keeps the last good set when the GPUs cannot be read. */
static void pass(struct daemon *dm)
{
    struct discover_labels now = {0};
    struct diag d;
    diag_init(&d);
    if (dm->publishing) {
        dm->again = true;
        return;
    }
    int r = compute(dm, &now, &d);
    if (r >= 0 && now.n == 0 && dm->have_last) {
        log_warn("no GPU answers: keeping the last labels");
        discover_labels_release(&now);
    } else if (r < 0 && dm->have_last) {
        log_warn("cannot read the GPUs: keeping the last labels", "error", d.msg);
    } else if (r < 0) {
        log_error("cannot read the GPUs", "error", d.msg);
        if (dm->o->fail_on_init_error && dm->passes == 0) /* as NVIDIA's: exit, write nothing */
            ev_loop_stop(dm->loop, CLI_EXIT_FAILURE);
        else
            pass_done(dm, false);
        return;
    } else {
        discover_labels_release(&dm->last);
        dm->last = now;
        dm->have_last = true;
    }
    publish(dm);
}

static void on_timer(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    pass(userdata);
}

/* ---- reload ---- */

static void on_reload(void *userdata)
{
    struct daemon *dm = userdata;
    struct discover_options fresh;
    struct diag d;
    diag_init(&d);
    discover_options_init(&fresh);
    optind = 0;
    if (discover_options_parse(dm->argc, dm->argv, &fresh, &d) < 0) {
        log_error("SIGHUP: the new configuration is refused; keeping the running one", "error",
                  d.msg);
        discover_options_release(&fresh);
        return;
    }
    /* What a pass reads; the outputs and the NVML library stay as started. */
    dm->o->mig = fresh.mig;
    dm->o->no_timestamp = fresh.no_timestamp;
    dm->o->sleep_interval_ms = fresh.sleep_interval_ms;
    struct discover_share *shares = dm->o->shares;
    size_t n_shares = dm->o->n_shares;
    dm->o->shares = fresh.shares;
    dm->o->n_shares = fresh.n_shares;
    fresh.shares = shares;
    fresh.n_shares = n_shares;
    discover_options_release(&fresh);
    log_info("SIGHUP: configuration reloaded; labelling now");
    (void)!ev_timer_set(dm->timer, 1, 0);
}

/* ---- start and stop ---- */

static int open_kube(struct daemon *dm, struct diag *d)
{
    const struct discover_options *o = dm->o;
    if (!o->node_name || !o->node_name[0])
        return diag_fail(d, -EINVAL,
                         "the NodeFeature API needs the node's name: --node-name or NODE_NAME "
                         "(or --use-node-feature-api=false to write %s)",
                         o->output_file);
    const struct kube_config_options copts = {.kubeconfig = o->kubeconfig};
    int r = kube_config_load(&copts, d, &dm->kcfg);
    if (r >= 0)
        r = kube_client_new(dm->loop, dm->kcfg, NULL, &dm->kube);
    if (r < 0)
        return r;
    const struct discover_nf_options nopts = {
        .node = o->node_name,
        .namespace_ = o->namespace_ && o->namespace_[0] ? o->namespace_ : dm->kcfg->namespace_,
        .pod = o->pod_name,
    };
    r = discover_nf_new(dm->kube, &nopts, &dm->nf);
    if (r < 0)
        return diag_fail(d, r, "NodeFeature for node %s: %s", o->node_name, strerror(-r));
    log_info("publishing to the NodeFeature API", "server", dm->kcfg->server, "namespace",
             nopts.namespace_, "node", o->node_name);
    return 0;
}

static int start(struct daemon *dm, struct diag *d)
{
    int r = ev_loop_new(&dm->loop);
    if (r >= 0)
        r = ev_loop_handle_stop_signals(dm->loop);
    if (r >= 0)
        r = ev_timer_add(dm->loop, 1, 0, on_timer, dm, &dm->timer);
    if (r < 0)
        return diag_fail(d, r, "cannot start: %s", strerror(-r));
    ev_loop_on_reload(dm->loop, on_reload, dm);
    r = gpu_nvml_open(cli_common_nvml_lib(&dm->o->common), d, &dm->nvml);
    if (r < 0)
        return r;
    if (dm->o->use_node_feature_api)
        return open_kube(dm, d);
    return 0;
}

static void stop(struct daemon *dm)
{
    dm->nf = discover_nf_free(dm->nf);
    dm->kube = kube_client_free(dm->kube);
    dm->loop = ev_loop_free(dm->loop);
    dm->kcfg = kube_config_free(dm->kcfg);
    dm->nvml = gpu_nvml_close(dm->nvml);
    discover_labels_release(&dm->last);
}

static int run(struct discover_options *o, int argc, char **argv)
{
    struct daemon dm = {.o = o, .argc = argc, .argv = argv};
    struct diag d;
    diag_init(&d);
    int r = start(&dm, &d);
    if (r >= 0)
        log_info("GPU feature discovery running", "output",
                 o->use_node_feature_api ? "NodeFeature" : o->output_file, "mig-strategy",
                 o->mig == DISCOVER_MIG_NONE     ? "none"
                 : o->mig == DISCOVER_MIG_SINGLE ? "single"
                                                 : "mixed");
    if (r < 0) {
        log_error("cannot start GPU feature discovery", "error", d.msg[0] ? d.msg : strerror(-r));
        /* NVIDIA's --fail-on-init-error=false: no NVML means no labels, not a crash loop. */
        if (dm.timer && !dm.nvml && !o->fail_on_init_error && !o->oneshot) {
            log_warn("--fail-on-init-error=false: running without labels");
            r = 0;
            (void)!ev_timer_disarm(dm.timer);
        } else {
            stop(&dm);
            return CLI_EXIT_FAILURE;
        }
    }
    r = ev_loop_run(dm.loop);
    if (r < 0)
        log_error("event loop failed", "error", strerror(-r));
    else if (!o->oneshot)
        log_info("stopping; the published labels stay in place");
    stop(&dm);
    return r == CLI_EXIT_OK ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}

/* --print-labels: one pass, printed, no output touched. */
static int print_labels(struct discover_options *o)
{
    struct daemon dm = {.o = o};
    struct discover_labels l = {0};
    _cleanup_strbuf_ struct strbuf text = STRBUF_INIT;
    struct diag d;
    diag_init(&d);
    int r = gpu_nvml_open(cli_common_nvml_lib(&o->common), &d, &dm.nvml);
    if (r >= 0)
        r = compute(&dm, &l, &d);
    if (r >= 0)
        r = discover_labels_format(&l, &text);
    if (r >= 0)
        fputs(strbuf_str(&text), stdout);
    else
        cli_error("%s", d.msg[0] ? d.msg : strerror(-r));
    discover_labels_release(&l);
    dm.nvml = gpu_nvml_close(dm.nvml);
    return r < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

int discover_main(int argc, char **argv)
{
    struct discover_options o;
    struct diag d;
    diag_init(&d);
    discover_options_init(&o);
    int r = discover_options_parse(argc, argv, &o, &d);
    if (r < 0) {
        cli_error("%s", d.msg[0] ? d.msg : "invalid options");
        /* A config file that does not load is a failure, as with the device plugin; a wrong
         * command line is a usage error. */
        r = r == -EINVAL && d.line == 0 ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
    } else if (o.common.help) {
        discover_usage(stdout);
        r = CLI_EXIT_OK;
    } else if (cli_common_finish(&o.common, DISCOVER_COMMAND) < 0) {
        r = CLI_EXIT_USAGE;
    } else if (o.print_labels) {
        r = print_labels(&o);
    } else {
        r = run(&o, argc, argv);
    }
    discover_options_release(&o);
    return r;
}
