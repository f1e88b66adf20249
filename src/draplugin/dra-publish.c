/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Keeps this node's ResourceSlices in the API as dra_slices_build describes them (see
 * dra-slices.h). Each run starts from what the API holds (a list of this node's slices of this
 * driver), so a restart, a slice someone deleted or edited, or a run cut short by an error all
 * converge the same way: build the wanted slices, write those that differ, delete the others.
 *
 * The pool generation is what keeps the scheduler from mixing two states of the pool: consumers
 * only look at the slices of the highest generation. So whenever the devices change (or the API
 * holds anything else than what was last wanted) every slice is written again with a generation
 * above any seen; a retry of the same content keeps the generation it started, so slices already
 * written need not be written again.
 *
 * Runs never overlap: a dra_publish during a run is served by one more run afterwards (with the
 * health as it is then). A failed run is retried after a back-off (1 s doubling to 30 s).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "dra-slices.h"

#define PATH_MAX_LEN 1024
#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS 30000

struct waiter {
    void (*done)(int result, void *userdata);
    void *userdata;
};

enum op_kind {
    OP_LIST,
    OP_CREATE,
    OP_UPDATE,
    OP_MODIFY,
    OP_DELETE,
};

/* One request in flight. It outlives the publisher when the publisher is freed first (p NULL):
 * kube calls back anyway, and the callback frees it. Until then it waits on the orphans list, so
 * that a client freed without calling back leaves it reachable rather than leaked (the daemon
 * frees both at exit, and a leak checker would fail the run). */
struct op {
    struct dra_publisher *p;
    struct op *next;
    enum op_kind kind;
    char path[PATH_MAX_LEN];
    char *name;    /* the slice's name */
    json_t *slice; /* the wanted slice (create, update, modify) */
};

struct dra_publisher {
    struct ev_loop *loop;
    struct kube_client *kube;
    const struct gpu_inventory *inv;
    char *node, *driver, *sysfs_root;
    const bool *unhealthy;
    char list_path[PATH_MAX_LEN];

    int64_t generation; /* of the content last wanted; -1 before the first run */
    json_t *content;    /* the slices last wanted, generation 0: to see whether devices changed */

    struct ev_timer *timer; /* the next run: at once after dra_publish, or a retry */
    uint64_t backoff_ms;
    bool running, again;
    struct op *ops; /* in flight */
    size_t pending; /* requests of this run still in flight */
    int error;      /* the first failure of this run */
    unsigned created, updated, deleted;

    struct waiter *waiting; /* answered by the next run */
    size_t n_waiting;
    struct waiter *serving; /* answered by this run */
    size_t n_serving;
};

static struct op *orphans;
static pthread_mutex_t orphans_lock = PTHREAD_MUTEX_INITIALIZER;

static void run_start(struct dra_publisher *p);
static void op_done(const struct kube_response *res, void *userdata);
static int mutate_to_wanted(json_t *obj, void *userdata);

/* ---- requests ---- */

static struct op *op_free(struct op *op)
{
    if (op) {
        free(op->name);
        json_decref(op->slice);
        free(op);
    }
    return NULL;
}

static void op_unlink(struct dra_publisher *p, struct op *op)
{
    for (struct op **q = &p->ops; *q; q = &(*q)->next)
        if (*q == op) {
            *q = op->next;
            return;
        }
}

static int op_new(struct dra_publisher *p, enum op_kind kind, const char *name, json_t *slice,
                  struct op **ret)
{
    struct op *op = calloc(1, sizeof(*op));
    struct diag d;
    int r;

    if (!op)
        return -ENOMEM;
    op->p = p;
    op->kind = kind;
    op->slice = json_incref(slice);
    if (name) {
        op->name = strdup(name);
        r = op->name ? kube_path(op->path, sizeof(op->path), "resource.k8s.io/v1", "resourceslices",
                                 NULL, name, &d)
                     : -ENOMEM;
        if (r < 0) {
            op_free(op);
            return r;
        }
    }
    *ret = op;
    return 0;
}

/* Sends op (its kind says how); the op is tracked until its callback. */
static int op_send(struct dra_publisher *p, struct op *op)
{
    int r;

    switch (op->kind) {
    case OP_LIST:
        r = kube_list(p->kube, p->list_path, op_done, op);
        break;
    case OP_CREATE: {
        char path[PATH_MAX_LEN];
        r = kube_path(path, sizeof(path), "resource.k8s.io/v1", "resourceslices", NULL, NULL, NULL);
        if (r >= 0)
            r = kube_create(p->kube, path, op->slice, op_done, op);
        break;
    }
    case OP_UPDATE:
        r = kube_update(p->kube, op->path, op->slice, op_done, op);
        break;
    case OP_MODIFY:
        r = kube_modify(p->kube, op->path, mutate_to_wanted, op_done, op);
        break;
    case OP_DELETE:
        r = kube_delete(p->kube, op->path, op_done, op);
        break;
    default:
        r = -EINVAL;
    }
    if (r < 0)
        return r;
    op->next = p->ops;
    p->ops = op;
    return 0;
}

/* ---- comparing what the API holds with what is wanted ---- */

static json_t *slice_spec(json_t *slice)
{
    return json_object_get(slice, "spec");
}

static const char *slice_name(json_t *slice)
{
    return json_string_value(json_object_get(json_object_get(slice, "metadata"), "name"));
}

static int64_t slice_generation(json_t *slice)
{
    json_t *g = json_object_get(json_object_get(slice_spec(slice), "pool"), "generation");
    return json_is_integer(g) ? json_integer_value(g) : 0;
}

/* The device's taint with key and effect, or NULL. */
static json_t *find_taint(json_t *device, json_t *taint)
{
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(device, "taints"), i, t)
    {
        if (json_equal(json_object_get(t, "key"), json_object_get(taint, "key")) &&
            json_equal(json_object_get(t, "effect"), json_object_get(taint, "effect")))
            return t;
    }
    return NULL;
}

static json_t *find_device(json_t *spec, const char *name)
{
    size_t i;
    json_t *dev;
    json_array_foreach(json_object_get(spec, "devices"), i, dev)
    {
        const char *n = json_string_value(json_object_get(dev, "name"));
        if (n && strcmp(n, name) == 0)
            return dev;
    }
    return NULL;
}

/*
 * The API server stamps a taint's timeAdded when it is written without one. Copies the stamps of
 * `have` into `want` for the taints both carry, so that an unchanged taint compares equal and
 * keeps the time it was first added.
 */
static void carry_taint_times(json_t *want_spec, json_t *have_spec)
{
    size_t i, j;
    json_t *dev, *taint;

    json_array_foreach(json_object_get(want_spec, "devices"), i, dev)
    {
        json_t *have = find_device(have_spec, json_string_value(json_object_get(dev, "name")));
        json_array_foreach(json_object_get(dev, "taints"), j, taint)
        {
            json_t *old = have ? find_taint(have, taint) : NULL;
            json_t *when = old ? json_object_get(old, "timeAdded") : NULL;
            if (when && !json_object_get(taint, "timeAdded"))
                json_object_set(taint, "timeAdded", when);
        }
    }
}

/* A copy of the wanted slices with generation 0: equal when the devices are. */
static json_t *content_of(json_t *slices)
{
    json_t *copy = json_deep_copy(slices);
    size_t i;
    json_t *s;
    json_array_foreach(copy, i, s)
    {
        json_object_set_new(json_object_get(slice_spec(s), "pool"), "generation", json_integer(0));
    }
    return copy;
}

static json_t *find_slice(json_t *slices, const char *name)
{
    size_t i;
    json_t *s;
    json_array_foreach(slices, i, s)
    {
        const char *n = slice_name(s);
        if (n && strcmp(n, name) == 0)
            return s;
    }
    return NULL;
}

/* Whether have (as read from the API) already says what want says. */
static bool slice_matches(json_t *want, json_t *have)
{
    _cleanup_json_ json_t *w = json_deep_copy(slice_spec(want));
    if (!w)
        return false;
    carry_taint_times(w, slice_spec(have));
    return json_equal(w, slice_spec(have));
}

/* Every wanted slice is in the API as wanted, and nothing else is. */
static bool all_match(json_t *want, json_t *have)
{
    size_t i;
    json_t *s;

    if (json_array_size(want) != json_array_size(have))
        return false;
    json_array_foreach(want, i, s)
    {
        json_t *h = find_slice(have, slice_name(s));
        if (!h || !slice_matches(s, h))
            return false;
    }
    return true;
}

/* ---- one run ---- */

static void waiters_answer(struct waiter *w, size_t n, int result)
{
    for (size_t i = 0; i < n; i++)
        if (w[i].done)
            w[i].done(result, w[i].userdata);
    free(w);
}

static void run_finish(struct dra_publisher *p, int result)
{
    struct waiter *serving = p->serving;
    size_t n_serving = p->n_serving;
    uint64_t next_ms = 0;
    bool next = p->again;

    p->serving = NULL;
    p->n_serving = 0;
    p->running = false;
    p->again = false;
    if (result < 0) {
        next_ms = p->backoff_ms;
        log_warn("publishing ResourceSlices failed, will retry", "node", p->node, "driver",
                 p->driver, "err", strerror(-result), "retryInMs", LOG_INT(next_ms));
        p->backoff_ms = p->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : p->backoff_ms * 2;
        next = true;
    } else {
        p->backoff_ms = BACKOFF_FIRST_MS;
        if (p->created || p->updated || p->deleted)
            log_info("ResourceSlices published", "node", p->node, "driver", p->driver, "generation",
                     LOG_INT(p->generation), "created", LOG_INT(p->created), "updated",
                     LOG_INT(p->updated), "deleted", LOG_INT(p->deleted));
        else
            log_debug(2, "ResourceSlices up to date", "node", p->node, "driver", p->driver,
                      "generation", LOG_INT(p->generation));
    }
    if (next) {
        int r = ev_timer_set(p->timer, next_ms, 0);
        if (r < 0)
            log_error("cannot schedule the next ResourceSlice publication", "err", strerror(-r));
    }
    /* Last: a callback may free the publisher. */
    waiters_answer(serving, n_serving, result);
}

/* One request of the run is over. */
static void step_done(struct dra_publisher *p, int result)
{
    if (result < 0 && p->error == 0)
        p->error = result;
    if (--p->pending == 0)
        run_finish(p, p->error);
}

static int send_new(struct dra_publisher *p, enum op_kind kind, const char *name, json_t *slice)
{
    struct op *op = NULL;
    int r = op_new(p, kind, name, slice, &op);
    if (r >= 0 && (r = op_send(p, op)) < 0)
        op_free(op);
    if (r >= 0)
        p->pending++;
    return r;
}

/* The generation to publish at, given the highest the API holds and the slices wanted now. */
static int64_t choose_generation(struct dra_publisher *p, json_t *content, int64_t seen,
                                 json_t *want, json_t *have)
{
    if (p->generation >= 0 && p->generation >= seen && json_equal(content, p->content))
        return p->generation;
    /* First run of this process: what an earlier one published may still be right. */
    if (p->generation < 0 && all_match(want, have))
        return seen;
    return (p->generation > seen ? p->generation : seen) + 1;
}

static int build(struct dra_publisher *p, int64_t generation, json_t **ret)
{
    struct dra_slices_options opts = {
        .node = p->node,
        .driver = p->driver,
        .sysfs_root = p->sysfs_root,
        .unhealthy = p->unhealthy,
    };
    struct diag d;

    diag_init(&d);
    int r = dra_slices_build(p->inv, &opts, generation, &d, ret);
    if (r < 0)
        log_error("cannot build the ResourceSlices", "node", p->node, "err", d.msg);
    return r;
}

/* Writes what differs and deletes what is not wanted. */
static int reconcile(struct dra_publisher *p, json_t *want, json_t *have)
{
    size_t i;
    json_t *s;
    int r;

    json_array_foreach(want, i, s)
    {
        json_t *h = find_slice(have, slice_name(s));
        if (!h) {
            if ((r = send_new(p, OP_CREATE, slice_name(s), s)) < 0)
                return r;
            continue;
        }
        if (slice_matches(s, h))
            continue;
        _cleanup_json_ json_t *put = json_deep_copy(s);
        json_t *rv = json_object_get(json_object_get(h, "metadata"), "resourceVersion");
        if (!put || json_object_set(json_object_get(put, "metadata"), "resourceVersion", rv) < 0)
            return -ENOMEM;
        carry_taint_times(slice_spec(put), slice_spec(h));
        if ((r = send_new(p, OP_UPDATE, slice_name(s), put)) < 0)
            return r;
    }
    json_array_foreach(have, i, s)
    {
        if (!find_slice(want, slice_name(s)) &&
            (r = send_new(p, OP_DELETE, slice_name(s), NULL)) < 0)
            return r;
    }
    return 0;
}

/* The slices of this node and driver in a list (filtered again: a server may ignore the field
 * selector), with names: nothing nameless can be written or deleted anyway. */
static json_t *ours(struct dra_publisher *p, json_t *list)
{
    json_t *out = json_array();
    size_t i;
    json_t *s;

    json_array_foreach(json_object_get(list, "items"), i, s)
    {
        const char *driver = json_string_value(json_object_get(slice_spec(s), "driver"));
        const char *node = json_string_value(json_object_get(slice_spec(s), "nodeName"));
        if (out && slice_name(s) && driver && node && strcmp(driver, p->driver) == 0 &&
            strcmp(node, p->node) == 0 && json_array_append(out, s) < 0)
            json_decref(TAKE_PTR(out));
    }
    return out;
}

static void on_list(struct dra_publisher *p, const struct kube_response *res)
{
    _cleanup_json_ json_t *have = NULL, *want = NULL, *content = NULL;
    int64_t seen = 0;
    size_t i;
    json_t *s;
    int r;

    if (res->status != 200) {
        log_warn("cannot list ResourceSlices", "node", p->node, "status", LOG_INT(res->status),
                 "reason", res->reason, "message", res->message);
        run_finish(p, -EIO);
        return;
    }
    if (!(have = ours(p, res->body))) {
        run_finish(p, -ENOMEM);
        return;
    }
    json_array_foreach(have, i, s)
    {
        if (slice_generation(s) > seen)
            seen = slice_generation(s);
    }

    int64_t generation = p->generation >= 0 ? p->generation : seen;
    if ((r = build(p, generation, &want)) < 0 || !(content = content_of(want))) {
        run_finish(p, r < 0 ? r : -ENOMEM);
        return;
    }
    int64_t target = choose_generation(p, content, seen, want, have);
    if (target != generation) {
        json_decref(TAKE_PTR(want));
        if ((r = build(p, target, &want)) < 0) {
            run_finish(p, r);
            return;
        }
    }
    json_decref(p->content);
    p->content = TAKE_PTR(content);
    p->generation = target;

    /* Counts the requests as one more until all are sent, so none can finish the run early. */
    p->pending++;
    r = reconcile(p, want, have);
    step_done(p, r);
}

static bool ok_status(enum op_kind kind, int status)
{
    if (kind == OP_DELETE && status == 404)
        return true; /* gone already */
    return status >= 200 && status < 300;
}

/* Retries a write that met another version of the slice: read it again and write ours over it. */
static int mutate_to_wanted(json_t *obj, void *userdata)
{
    struct op *op = userdata;
    json_t *want = slice_spec(op->slice);

    if (slice_matches(op->slice, obj))
        return 1;
    _cleanup_json_ json_t *spec = json_deep_copy(want);
    if (!spec)
        return -ENOMEM;
    carry_taint_times(spec, slice_spec(obj));
    return json_object_set(obj, "spec", spec) == 0 ? 0 : -ENOMEM;
}

static const char *op_verb(enum op_kind kind)
{
    switch (kind) {
    case OP_CREATE:
        return "create";
    case OP_UPDATE:
    case OP_MODIFY:
        return "update";
    case OP_DELETE:
        return "delete";
    default:
        return "list";
    }
}

static void op_done(const struct kube_response *res, void *userdata)
{
    struct op *op = userdata;
    struct dra_publisher *p = op->p;

    if (!p) {
        pthread_mutex_lock(&orphans_lock);
        for (struct op **q = &orphans; *q; q = &(*q)->next)
            if (*q == op) {
                *q = op->next;
                break;
            }
        pthread_mutex_unlock(&orphans_lock);
        op_free(op);
        return;
    }
    op_unlink(p, op);
    if (op->kind == OP_LIST) {
        op_free(op);
        p->pending--;
        on_list(p, res);
        return;
    }
    /* Someone else wrote the slice since the list (409), or removed it (404 on update): read it
     * again and write over it, or create it. */
    if ((op->kind == OP_CREATE || op->kind == OP_UPDATE) &&
        (res->status == 409 || res->status == 404)) {
        op->kind = res->status == 404 ? OP_CREATE : OP_MODIFY;
        json_object_del(json_object_get(op->slice, "metadata"), "resourceVersion");
        int r = op_send(p, op);
        if (r < 0) {
            op_free(op);
            step_done(p, r);
        }
        return;
    }
    if (!ok_status(op->kind, res->status)) {
        log_warn("ResourceSlice request failed", "verb", op_verb(op->kind), "slice", op->name,
                 "status", LOG_INT(res->status), "reason", res->reason, "message", res->message);
        op_free(op);
        step_done(p, res->status == 0 ? -EIO : -EPROTO);
        return;
    }
    log_debug(2, "ResourceSlice written", "verb", op_verb(op->kind), "slice", op->name);
    if (op->kind == OP_CREATE)
        p->created++;
    else if (op->kind == OP_DELETE)
        p->deleted++;
    else
        p->updated++;
    op_free(op);
    step_done(p, 0);
}

static void run_start(struct dra_publisher *p)
{
    p->running = true;
    p->error = 0;
    p->created = p->updated = p->deleted = 0;
    p->serving = p->waiting;
    p->n_serving = p->n_waiting;
    p->waiting = NULL;
    p->n_waiting = 0;

    int r = send_new(p, OP_LIST, NULL, NULL);
    if (r < 0)
        run_finish(p, r);
}

static void on_timer(struct ev_timer *timer, uint64_t expirations, void *userdata)
{
    struct dra_publisher *p = userdata;
    (void)timer;
    (void)expirations;
    if (p->running)
        p->again = true;
    else
        run_start(p);
}

/* ---- the public side ---- */

int dra_publisher_new(struct ev_loop *loop, struct kube_client *kube,
                      const struct gpu_inventory *inv, const struct dra_slices_options *opts,
                      struct dra_publisher **ret)
{
    _cleanup_(dra_publisher_freep) struct dra_publisher *p = NULL;
    struct diag d;
    int r, n;

    if (!opts->node || !opts->driver)
        return -EINVAL;
    p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->loop = loop;
    p->kube = kube;
    p->inv = inv;
    p->unhealthy = opts->unhealthy;
    p->generation = -1;
    p->backoff_ms = BACKOFF_FIRST_MS;
    p->node = strdup(opts->node);
    p->driver = strdup(opts->driver);
    p->sysfs_root = opts->sysfs_root ? strdup(opts->sysfs_root) : NULL;
    if (!p->node || !p->driver || (opts->sysfs_root && !p->sysfs_root))
        return -ENOMEM;
    diag_init(&d);
    if ((r = kube_path(p->list_path, sizeof(p->list_path), "resource.k8s.io/v1", "resourceslices",
                       NULL, NULL, &d)) < 0)
        return r;
    /* client-go's encoding of "spec.nodeName=<node>,spec.driver=<driver>"; both names are DNS
     * subdomains (checked by dra_slices_build), so nothing else needs escaping. */
    size_t len = strlen(p->list_path);
    n = snprintf(p->list_path + len, sizeof(p->list_path) - len,
                 "?fieldSelector=spec.nodeName%%3D%s%%2Cspec.driver%%3D%s", p->node, p->driver);
    if (n < 0 || (size_t)n >= sizeof(p->list_path) - len)
        return -ENAMETOOLONG;
    if ((r = ev_timer_add(loop, 0, 0, on_timer, p, &p->timer)) < 0)
        return r;
    /* Nothing to do until the first dra_publish. */
    if ((r = ev_timer_disarm(p->timer)) < 0)
        return r;
    *ret = TAKE_PTR(p);
    return 0;
}

struct dra_publisher *dra_publisher_free(struct dra_publisher *p)
{
    if (!p)
        return NULL;
    /* Requests in flight are left to free themselves when kube answers them. */
    pthread_mutex_lock(&orphans_lock);
    for (struct op *op = p->ops, *next; op; op = next) {
        next = op->next;
        op->p = NULL;
        op->next = orphans;
        orphans = op;
    }
    pthread_mutex_unlock(&orphans_lock);
    ev_timer_del(p->timer);
    json_decref(p->content);
    free(p->waiting);
    free(p->serving);
    free(p->node);
    free(p->driver);
    free(p->sysfs_root);
    free(p);
    return NULL;
}

int dra_publish(struct dra_publisher *p, void (*done)(int result, void *userdata), void *userdata)
{
    struct waiter *w = realloc(p->waiting, (p->n_waiting + 1) * sizeof(*w));
    if (!w)
        return -ENOMEM;
    p->waiting = w;
    p->waiting[p->n_waiting++] = (struct waiter){.done = done, .userdata = userdata};
    /* The run starts from the loop, never inside this call: several health changes in one batch
     * of events make one run, and done is never called before dra_publish returns. */
    if (p->running) {
        p->again = true;
        return 0;
    }
    p->backoff_ms = BACKOFF_FIRST_MS;
    return ev_timer_set(p->timer, 0, 0);
}

int64_t dra_publisher_generation(const struct dra_publisher *p)
{
    return p->generation;
}
