/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Preparing and unpreparing claims, one step at a time on the event loop, so that many claims
 * progress together while each claim's operations run strictly one after the other (a queue per
 * UID: a repeated prepare waits for the first and then answers from the checkpoint).
 *
 * Prepare: GET the ResourceClaim, decode it (UID, allocation, reservation, this driver's results
 * on this node, their configs); answer from the checkpoint when it is PrepareCompleted; roll back
 * what a crash left PrepareStarted (the CDI spec); record PrepareStarted durably; write the CDI
 * spec; apply the sharing configs; record PrepareCompleted with the devices durably; answer. The
 * order makes every crash recoverable: a spec exists only under a PrepareStarted or
 * PrepareCompleted entry, and an answer is given only once PrepareCompleted is on disk.
 * Unprepare: remove the CDI spec, then the entry (unknown claims are fine: both steps are
 * idempotent).
 *
 * File writes that fsync run on the work pool. Checkpoint writes have a single writer: each change
 * takes a snapshot on the loop; while a write is in flight the newest snapshot waits (replacing an
 * older waiting one, whose waiters it carries), so the file only ever moves forward and a step
 * continues only once a snapshot containing its change is on disk.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dra-claim.h"
#include "dra-internal.h"

#define GROUP_VERSION "resource.k8s.io/v1"

enum op_kind {
    OP_PREPARE,
    OP_UNPREPARE,
};

struct op;
typedef void (*step_fn)(struct op *op, int result);

struct op {
    struct op *next;
    struct dra_preparer *p;
    enum op_kind kind;
    char *ns, *name, *uid;
    dra_claim_done_fn fn;
    void *userdata;
    bool running;
    struct dra_claim *claim;
    char **cdi_ids;
    struct diag d; /* a worker's failure */
};

/* Steps waiting for a checkpoint snapshot to reach the disk. */
struct waiter {
    struct waiter *next;
    struct op *op;
    step_fn step;
};

struct write_job {
    struct dra_preparer *p;
    char *data;
    size_t len;
    struct waiter *waiters;
    struct diag d;
};

struct dra_preparer {
    struct dra_prepare_ctx ctx;
    struct dra_checkpoint *cp;
    struct op *ops; /* in arrival order */
    bool stopping;
    bool writing;              /* a write_job is on the pool */
    struct write_job *pending; /* the newest snapshot, waiting for the one in flight */
};

static void run(struct op *op);

/* ---- operations ---- */

static struct op *op_free(struct op *op)
{
    if (!op)
        return NULL;
    free(op->ns);
    free(op->name);
    free(op->uid);
    dra_claim_free(op->claim);
    dra_strv_free(op->cdi_ids);
    free(op);
    return NULL;
}

static void unlink_op(struct dra_preparer *p, struct op *op)
{
    for (struct op **pp = &p->ops; *pp; pp = &(*pp)->next) {
        if (*pp == op) {
            *pp = op->next;
            return;
        }
    }
}

/* The first waiting operation on uid, if none of uid runs. */
static struct op *next_of(struct dra_preparer *p, const char *uid)
{
    for (struct op *o = p->ops; o; o = o->next)
        if (strcmp(o->uid, uid) == 0)
            return o->running ? NULL : o;
    return NULL;
}

/* Ends op with an answer, then starts the next operation on the same claim. */
static void finish(struct op *op, const char *error, json_t *devices)
{
    struct dra_preparer *p = op->p;
    struct dra_claim_result res = {.error = error, .devices = devices};
    unlink_op(p, op);
    if (op->fn)
        op->fn(&res, op->userdata);
    struct op *next = p->stopping ? NULL : next_of(p, op->uid);
    op_free(op);
    if (next)
        run(next);
}

static void fail(struct op *op, const char *fmt, ...) _printf_(2, 3);
static void fail(struct op *op, const char *fmt, ...)
{
    char msg[DIAG_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    log_warn(op->kind == OP_PREPARE ? "cannot prepare claim" : "cannot unprepare claim", "claim",
             op->name, "namespace", op->ns, "uid", op->uid, "error", msg);
    finish(op, msg, NULL);
}

static void add_op(struct dra_preparer *p, enum op_kind kind, const char *ns, const char *name,
                   const char *uid, dra_claim_done_fn fn, void *userdata)
{
    struct op *op = calloc(1, sizeof(*op));
    if (op) {
        *op = (struct op){.p = p, .kind = kind, .fn = fn, .userdata = userdata};
        op->ns = strdup(ns ? ns : "");
        op->name = strdup(name ? name : "");
        op->uid = strdup(uid ? uid : "");
    }
    if (!op || !op->ns || !op->name || !op->uid) {
        struct dra_claim_result res = {.error = "out of memory"};
        op_free(op);
        fn(&res, userdata);
        return;
    }
    struct op **tail = &p->ops;
    while (*tail)
        tail = &(*tail)->next;
    *tail = op;
    if (p->stopping) {
        fail(op, "the driver is shutting down");
        return;
    }
    if (next_of(p, op->uid) == op)
        run(op);
}

void dra_prepare_claim(struct dra_preparer *p, const char *ns, const char *name, const char *uid,
                       dra_claim_done_fn fn, void *userdata)
{
    add_op(p, OP_PREPARE, ns, name, uid, fn, userdata);
}

void dra_unprepare_claim(struct dra_preparer *p, const char *ns, const char *name, const char *uid,
                         dra_claim_done_fn fn, void *userdata)
{
    add_op(p, OP_UNPREPARE, ns, name, uid, fn, userdata);
}

/* ---- the checkpoint writer ---- */

static void write_start(struct dra_preparer *p, struct write_job *job);

static int write_work(void *userdata)
{
    struct write_job *job = userdata;
    return dra_checkpoint_write(job->p->ctx.checkpoint_path, job->data, job->len, &job->d);
}

static void write_job_free(struct write_job *job)
{
    free(job->data);
    free(job);
}

static void write_done(int result, void *userdata)
{
    struct write_job *job = userdata;
    struct dra_preparer *p = job->p;
    p->writing = false;
    if (result < 0)
        log_error("cannot write the checkpoint", "path", p->ctx.checkpoint_path, "error",
                  job->d.msg[0] ? job->d.msg : strerror(-result));
    struct waiter *w = job->waiters;
    job->waiters = NULL;
    if (p->pending && !p->stopping)
        write_start(p, TAKE_PTR(p->pending));
    while (w) {
        struct waiter *next = w->next;
        w->step(w->op, result < 0 ? result : 0);
        free(w);
        w = next;
    }
    write_job_free(job);
}

static void write_start(struct dra_preparer *p, struct write_job *job)
{
    int r = ev_work_submit(p->ctx.pool, write_work, write_done, job);
    if (r >= 0) {
        p->writing = true;
        return;
    }
    /* Cannot queue: each waiter hears of it now. */
    while (job->waiters) {
        struct waiter *w = job->waiters;
        job->waiters = w->next;
        w->step(w->op, r);
        free(w);
    }
    write_job_free(job);
}

/* Snapshots the checkpoint as it is now; step(op, 0) runs once it is on disk (or with a negative
 * errno when it could not be written). */
static void commit(struct op *op, step_fn step)
{
    struct dra_preparer *p = op->p;
    struct waiter *w = calloc(1, sizeof(*w));
    struct write_job *job = calloc(1, sizeof(*job));
    int r = w && job ? dra_checkpoint_serialize(p->cp, &job->data, &job->len) : -ENOMEM;
    if (r < 0) {
        free(w);
        if (job)
            write_job_free(job);
        step(op, r);
        return;
    }
    *w = (struct waiter){.op = op, .step = step};
    job->p = p;
    diag_init(&job->d);
    if (p->pending) {
        /* the newer snapshot replaces the waiting one and takes over its waiters */
        struct waiter **tail = &p->pending->waiters;
        while (*tail)
            tail = &(*tail)->next;
        *tail = w;
        job->waiters = TAKE_PTR(p->pending->waiters);
        write_job_free(p->pending);
        p->pending = job;
        return;
    }
    job->waiters = w;
    if (p->writing)
        p->pending = job;
    else
        write_start(p, job);
}

/* ---- CDI work ---- */

struct cdi_job {
    struct op *op;
    step_fn step;
};

static int cdi_write_work(void *userdata)
{
    struct op *op = ((struct cdi_job *)userdata)->op;
    const struct dra_prepare_ctx *c = &op->p->ctx;
    const struct dra_cdi_options opts = {.mps_root = c->mps_root};
    return dra_cdi_write_with(c->nv, c->inv, c->cdi_root, op->claim, &opts, &op->d, &op->cdi_ids);
}

static int cdi_remove_work(void *userdata)
{
    struct op *op = ((struct cdi_job *)userdata)->op;
    const struct dra_cdi_options opts = {.mps_root = op->p->ctx.mps_root};
    return dra_cdi_remove_with(op->p->ctx.cdi_root, op->uid, &opts, &op->d);
}

static void cdi_done(int result, void *userdata)
{
    struct cdi_job *job = userdata;
    struct op *op = job->op;
    step_fn step = job->step;
    free(job);
    step(op, result);
}

static void cdi_submit(struct op *op, ev_work_fn work, step_fn step)
{
    struct cdi_job *job = calloc(1, sizeof(*job));
    int r = job ? 0 : -ENOMEM;
    diag_init(&op->d);
    if (job) {
        *job = (struct cdi_job){.op = op, .step = step};
        r = ev_work_submit(op->p->ctx.pool, work, cdi_done, job);
    }
    if (r < 0) {
        free(job);
        step(op, r);
    }
}

/* ---- prepare ---- */

static const char *errmsg(const struct diag *d, int r)
{
    return d->msg[0] ? d->msg : strerror(-r);
}

/* The claim's devices as the checkpoint records them (and the answer is built from). */
static int devices_json(const struct op *op, json_t **ret)
{
    json_t *arr = json_array();
    if (!arr)
        return -ENOMEM;
    for (size_t i = 0; i < op->claim->n_devices; i++) {
        const struct dra_claim_device *dev = &op->claim->devices[i];
        json_t *e =
            json_pack("{s:[s],s:s,s:s,s:[s]}", "requests", dev->base_request, "poolName", dev->pool,
                      "deviceName", dev->device, "cdiDeviceIDs", op->cdi_ids ? op->cdi_ids[i] : "");
        if (e && dev->share_id && json_object_set_new(e, "shareID", json_string(dev->share_id)) < 0)
            e = (json_decref(e), NULL);
        if (!e || json_array_append_new(arr, e) < 0) {
            json_decref(arr);
            return -ENOMEM;
        }
    }
    *ret = arr;
    return 0;
}

static const char *interval_name(enum dra_timeslice t)
{
    static const char *const names[] = {"Default", "Short", "Medium", "Long"};
    return (unsigned)t < ARRAY_SIZE(names) ? names[t] : "Default";
}

/* The sharing configs. NVML as gpuplane declares it (nvml-abi.md) has no call that sets a GPU's
 * time-slice, so the interval is recorded and logged; MPS needs nothing beyond the CDI edits
 * dra_cdi_write made (the control daemon is the cluster's business, as with NVIDIA's driver). */
static void apply_configs(const struct op *op)
{
    for (size_t i = 0; i < op->claim->n_devices; i++) {
        const struct dra_claim_device *dev = &op->claim->devices[i];
        if (dev->config.sharing == DRA_SHARING_TIMESLICING)
            log_info("time-slicing requested (recorded; NVML offers no time-slice setting)",
                     "claim", op->name, "device", dev->device, "interval",
                     interval_name(dev->config.interval));
        else if (dev->config.sharing == DRA_SHARING_MPS)
            log_info("MPS sharing requested (CDI edits in the claim's spec)", "claim", op->name,
                     "device", dev->device, "activeThreadPercentage",
                     LOG_INT(dev->config.mps_active_thread_percentage));
    }
}

static void prepare_completed(struct op *op, int r)
{
    if (r < 0) {
        fail(op, "cannot write the checkpoint: %s", strerror(-r));
        return;
    }
    dra_fault("prepare-after-completed");
    json_t *entry = dra_checkpoint_get(op->p->cp, op->uid);
    json_t *devices = entry ? json_object_get(entry, "devices") : NULL;
    log_info("claim prepared", "claim", op->name, "namespace", op->ns, "uid", op->uid, "devices",
             LOG_INT(op->claim->n_devices));
    finish(op, NULL, devices);
}

static void after_failed_cleanup(struct op *op, int r)
{
    fail(op, "%s", op->d.msg);
}

/* A failure after PrepareStarted: take the claim back out so nothing lingers, then answer. */
static void undo_started(struct op *op, const char *msg)
{
    struct diag d;
    diag_init(&d);
    const struct dra_cdi_options opts = {.mps_root = op->p->ctx.mps_root};
    if (dra_cdi_remove_with(op->p->ctx.cdi_root, op->uid, &opts, &d) < 0)
        log_warn("cannot remove a claim's CDI spec", "uid", op->uid, "error", d.msg);
    dra_checkpoint_drop(op->p->cp, op->uid);
    snprintf(op->d.msg, sizeof(op->d.msg), "%s", msg);
    commit(op, after_failed_cleanup);
}

static void prepare_cdi_written(struct op *op, int r)
{
    json_t *devices = NULL;
    if (op->p->stopping) {
        fail(op, "the driver is shutting down");
        return;
    }
    if (r < 0) {
        char msg[DIAG_MSG_MAX];
        snprintf(msg, sizeof(msg), "cannot write the CDI spec: %.900s", errmsg(&op->d, r));
        undo_started(op, msg);
        return;
    }
    dra_fault("prepare-after-cdi");
    apply_configs(op);
    r = devices_json(op, &devices);
    if (r >= 0)
        r = dra_checkpoint_put(op->p->cp, op->uid, DRA_STATE_COMPLETED, op->ns, op->name, devices);
    json_decref(devices);
    if (r < 0) {
        undo_started(op, "cannot record the prepared devices");
        return;
    }
    commit(op, prepare_completed);
}

static void prepare_started(struct op *op, int r)
{
    if (op->p->stopping) {
        fail(op, "the driver is shutting down");
        return;
    }
    if (r < 0) {
        fail(op, "cannot write the checkpoint: %s", strerror(-r));
        return;
    }
    dra_fault("prepare-after-started");
    if (op->claim->n_devices == 0) {
        prepare_cdi_written(op, 0);
        return;
    }
    cdi_submit(op, cdi_write_work, prepare_cdi_written);
}

/* Whether a prepared claim's CDI spec is still there (an entry with devices without it — a file
 * removed by hand, a crash between an unprepare's two steps followed by a prepare — is prepared
 * again rather than answered with IDs the runtime cannot resolve). */
static bool spec_present(const struct op *op, json_t *entry)
{
    char path[4096];
    if (json_array_size(json_object_get(entry, "devices")) == 0)
        return true;
    if (dra_cdi_path(op->p->ctx.cdi_root, op->uid, path, sizeof(path)) < 0)
        return false;
    return access(path, F_OK) == 0;
}

/* The claim as decoded: answer from the checkpoint, or prepare it. */
static void prepare_decoded(struct op *op)
{
    struct dra_preparer *p = op->p;
    json_t *entry = dra_checkpoint_get(p->cp, op->uid);
    const char *state = entry ? json_string_value(json_object_get(entry, "state")) : NULL;
    if (state && strcmp(state, DRA_STATE_COMPLETED) == 0 && spec_present(op, entry)) {
        log_debug(1, "claim already prepared", "claim", op->name, "uid", op->uid);
        finish(op, NULL, json_object_get(entry, "devices"));
        return;
    }
    if (state) {
        struct diag d;
        diag_init(&d);
        log_warn("claim left half prepared (a crash?); rolling back and preparing again", "claim",
                 op->name, "uid", op->uid);
        const struct dra_cdi_options opts = {.mps_root = p->ctx.mps_root};
        int r = dra_cdi_remove_with(p->ctx.cdi_root, op->uid, &opts, &d);
        if (r < 0) {
            fail(op, "cannot roll back: %s", errmsg(&d, r));
            return;
        }
    }
    dra_fault("prepare-before-started");
    int r = dra_checkpoint_put(p->cp, op->uid, DRA_STATE_STARTED, op->ns, op->name, NULL);
    if (r < 0) {
        fail(op, "cannot record the claim: %s", strerror(-r));
        return;
    }
    commit(op, prepare_started);
}

static void on_claim(const struct kube_response *res, void *userdata)
{
    struct op *op = userdata;
    struct diag d;
    diag_init(&d);
    if (op->p->stopping) {
        fail(op, "the driver is shutting down");
        return;
    }
    if (res->status == 404) {
        fail(op, "ResourceClaim %s/%s not found", op->ns, op->name);
        return;
    }
    if (res->status != 200 || !res->body) {
        fail(op, "cannot get ResourceClaim %s/%s: %s", op->ns, op->name,
             res->message && res->message[0] ? res->message : "no answer");
        return;
    }
    int r =
        dra_claim_decode(res->body, op->uid, op->p->ctx.driver, op->p->ctx.node, &d, &op->claim);
    if (r < 0) {
        fail(op, "%s", errmsg(&d, r)); /* the decoder's message names the claim */
        return;
    }
    prepare_decoded(op);
}

static void run_prepare(struct op *op)
{
    char path[1024];
    struct diag d;
    diag_init(&d);
    if (!dra_claim_uid_valid(op->uid)) {
        fail(op, "invalid claim UID \"%s\"", op->uid);
        return;
    }
    int r = kube_path(path, sizeof(path), GROUP_VERSION, "resourceclaims", op->ns, op->name, &d);
    if (r < 0) {
        fail(op, "invalid claim %s/%s: %s", op->ns, op->name, errmsg(&d, r));
        return;
    }
    r = kube_get(op->p->ctx.kube, path, on_claim, op);
    if (r < 0)
        fail(op, "cannot get ResourceClaim %s/%s: %s", op->ns, op->name, strerror(-r));
}

/* ---- unprepare ---- */

static void unprepare_dropped(struct op *op, int r)
{
    if (r < 0) {
        fail(op, "cannot write the checkpoint: %s", strerror(-r));
        return;
    }
    dra_fault("unprepare-after-checkpoint");
    log_info("claim unprepared", "claim", op->name, "namespace", op->ns, "uid", op->uid);
    finish(op, NULL, NULL);
}

static void unprepare_removed(struct op *op, int r)
{
    if (op->p->stopping) {
        fail(op, "the driver is shutting down");
        return;
    }
    if (r < 0) {
        fail(op, "cannot remove the CDI spec: %s", errmsg(&op->d, r));
        return;
    }
    dra_fault("unprepare-after-cdi-remove");
    if (!dra_checkpoint_get(op->p->cp, op->uid)) {
        unprepare_dropped(op, 0); /* never prepared here, or already unprepared */
        return;
    }
    dra_checkpoint_drop(op->p->cp, op->uid);
    commit(op, unprepare_dropped);
}

static void run_unprepare(struct op *op)
{
    if (!dra_claim_uid_valid(op->uid)) {
        fail(op, "invalid claim UID \"%s\"", op->uid);
        return;
    }
    dra_fault("unprepare-before-cdi-remove");
    /* Removed even without an entry: a spec must never outlive its claim. */
    cdi_submit(op, cdi_remove_work, unprepare_removed);
}

static void run(struct op *op)
{
    op->running = true;
    if (op->kind == OP_PREPARE)
        run_prepare(op);
    else
        run_unprepare(op);
}

/* ---- the preparer ---- */

int dra_preparer_new(const struct dra_prepare_ctx *ctx, struct dra_checkpoint *cp,
                     struct dra_preparer **ret)
{
    struct dra_preparer *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->ctx = *ctx;
    p->cp = cp;
    *ret = p;
    return 0;
}

void dra_preparer_stop(struct dra_preparer *p)
{
    if (p)
        p->stopping = true;
}

struct dra_preparer *dra_preparer_free(struct dra_preparer *p)
{
    if (!p)
        return NULL;
    p->stopping = true;
    /* Operations still waiting (on the API, say) end now, so that their callers can let go. */
    while (p->ops)
        finish(p->ops, "the driver is shutting down", NULL);
    if (p->pending) {
        for (struct waiter *w = p->pending->waiters, *next; w; w = next) {
            next = w->next;
            free(w);
        }
        write_job_free(p->pending);
    }
    dra_checkpoint_free(p->cp);
    free(p);
    return NULL;
}
