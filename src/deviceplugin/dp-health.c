/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device health, the part where gpuplane goes beyond NVIDIA: the XID policy decides which events
 * are fatal (nvidia-compat.md §1.8), and unlike NVIDIA's plugin an unhealthy device can come back.
 * Each GPU and each MIG device has a state: healthy, or unhealthy since a time with a cause. A
 * fatal XID marks the GPU (all of its replicas and MIG devices follow it), or only the MIG device
 * the event names by GPU/compute instance. A failed event wait does not mark anything: it asks for
 * a probe, because one transient NVML error is no evidence about any particular GPU. Probes (a
 * fresh inventory read, done by the daemon on a worker) find lost GPUs and let unhealthy devices
 * recover once their GPU answers again and the recovery window has passed without a new fatal
 * event. Time is always passed in, so tests drive the state machine with a fake clock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dp.h"
#include "gpu-nvml-abi.h"

struct state {
    bool unhealthy;
    bool lost; /* the GPU did not answer at the last look */
    enum dp_cause cause;
    unsigned long long xid;
    uint64_t since_ms; /* the last fatal event (the quiet window counts from here) */
};

struct mig_state {
    char uuid[GPU_UUID_MAX];
    unsigned gi_id, ci_id;
    struct state s;
};

struct gpu_state {
    char uuid[GPU_UUID_MAX];
    struct state s;
    size_t n_migs;
    struct mig_state *migs;
};

struct dp_tracker {
    struct dp_health policy;
    size_t n;
    struct gpu_state *gpus;
};

static void mark(struct state *s, enum dp_cause cause, unsigned long long xid, uint64_t now)
{
    s->unhealthy = true;
    s->cause = cause;
    s->xid = xid;
    s->since_ms = now;
}

static int gpu_state_init(struct gpu_state *g, const struct gpu_device *dev, uint64_t now)
{
    snprintf(g->uuid, sizeof(g->uuid), "%s", dev->uuid);
    if (dev->error) {
        mark(&g->s, DP_CAUSE_LOST, 0, now);
        g->s.lost = true;
    }
    g->migs = calloc(dev->n_migs ? dev->n_migs : 1, sizeof(*g->migs));
    if (!g->migs)
        return -ENOMEM;
    g->n_migs = dev->n_migs;
    for (size_t m = 0; m < dev->n_migs; m++) {
        snprintf(g->migs[m].uuid, sizeof(g->migs[m].uuid), "%s", dev->migs[m].uuid);
        g->migs[m].gi_id = dev->migs[m].gi_id;
        g->migs[m].ci_id = dev->migs[m].ci_id;
    }
    return 0;
}

int dp_tracker_new(const struct gpu_inventory *inv, const struct dp_health *policy, uint64_t now_ms,
                   struct dp_tracker **ret)
{
    _cleanup_(dp_tracker_freep) struct dp_tracker *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->policy = *policy;
    t->gpus = calloc(inv->n_devices ? inv->n_devices : 1, sizeof(*t->gpus));
    if (!t->gpus)
        return -ENOMEM;
    t->n = inv->n_devices;
    for (size_t i = 0; i < inv->n_devices; i++) {
        int r = gpu_state_init(&t->gpus[i], &inv->devices[i], now_ms);
        if (r < 0)
            return r;
    }
    *ret = TAKE_PTR(t);
    return 0;
}

struct dp_tracker *dp_tracker_free(struct dp_tracker *t)
{
    if (!t)
        return NULL;
    for (size_t i = 0; t->gpus && i < t->n; i++)
        free(t->gpus[i].migs);
    free(t->gpus);
    free(t);
    return NULL;
}

static void tell(dp_change_fn fn, void *userdata, const char *uuid, const struct state *s)
{
    struct dp_change c = {.uuid = uuid, .healthy = !s->unhealthy, .cause = s->cause, .xid = s->xid};
    if (fn)
        fn(&c, userdata);
}

/* Marks a state; true when it was healthy (a change to report). A fatal event on an unhealthy
 * device restarts its quiet window. */
static bool mark_state(struct state *s, enum dp_cause cause, unsigned long long xid, uint64_t now)
{
    bool was = s->unhealthy;
    mark(s, cause, xid, now);
    return !was;
}

static struct gpu_state *event_gpu(struct dp_tracker *t, const struct gpu_health_event *e)
{
    if (e->gpu_index >= 0 && (size_t)e->gpu_index < t->n)
        return &t->gpus[e->gpu_index];
    for (size_t i = 0; e->uuid[0] && i < t->n; i++)
        if (strcmp(t->gpus[i].uuid, e->uuid) == 0)
            return &t->gpus[i];
    return NULL;
}

/* The MIG device an event names by instance ids, or NULL when the event is not attributable to one
 * (ids 0xFFFFFFFF) or names none of the GPU's. */
static struct mig_state *event_mig(struct gpu_state *g, const struct gpu_health_event *e)
{
    const unsigned none = NVML_EVENT_NO_INSTANCE;
    if (e->gi_id == none)
        return NULL;
    for (size_t m = 0; m < g->n_migs; m++)
        if (g->migs[m].gi_id == e->gi_id && (e->ci_id == none || g->migs[m].ci_id == e->ci_id))
            return &g->migs[m];
    return NULL;
}

static enum dp_event_result fatal_xid(struct dp_tracker *t, struct gpu_state *g,
                                      const struct gpu_health_event *e, uint64_t now,
                                      dp_change_fn fn, void *userdata)
{
    struct mig_state *mig = event_mig(g, e);
    struct state *s = mig ? &mig->s : &g->s;
    bool changed = mark_state(s, DP_CAUSE_XID, e->xid, now);
    if (changed)
        tell(fn, userdata, mig ? mig->uuid : g->uuid, s);
    return changed ? DP_EVENT_CHANGED : DP_EVENT_IGNORED;
}

enum dp_event_result dp_tracker_event(struct dp_tracker *t, const struct gpu_health_event *e,
                                      uint64_t now_ms, dp_change_fn fn, void *userdata)
{
    if (e->wait_error && e->gpu_index < 0)
        return DP_EVENT_PROBE;
    struct gpu_state *g = event_gpu(t, e);
    if (!g)
        return DP_EVENT_IGNORED;
    if (e->wait_error) {
        /* Events could not be registered on this GPU: NVIDIA marks it unhealthy; a probe may
         * still bring it back after the window. */
        bool changed = mark_state(&g->s, DP_CAUSE_REGISTER, 0, now_ms);
        if (changed)
            tell(fn, userdata, g->uuid, &g->s);
        return changed ? DP_EVENT_CHANGED : DP_EVENT_IGNORED;
    }
    if (!(e->type & nvmlEventTypeXidCriticalError))
        return DP_EVENT_IGNORED; /* ECC events are logged by NVIDIA and otherwise ignored */
    if (dp_health_xid_ignored(&t->policy, e->xid))
        return DP_EVENT_IGNORED;
    return fatal_xid(t, g, e, now_ms, fn, userdata);
}

static bool recovered(const struct dp_tracker *t, const struct state *s, uint64_t now)
{
    uint64_t window = t->policy.recovery_window_ms;
    return s->unhealthy && !s->lost && window > 0 && now >= s->since_ms &&
           now - s->since_ms >= window;
}

static bool heal(const struct dp_tracker *t, struct state *s, const char *uuid, uint64_t now,
                 dp_change_fn fn, void *userdata)
{
    if (!recovered(t, s, now))
        return false;
    tell(fn, userdata, uuid, &(struct state){.cause = s->cause, .xid = s->xid});
    *s = (struct state){0};
    return true;
}

/* The GPU answered the probe unless it is missing, has another UUID, or an NVML error. */
static bool answers(const struct gpu_inventory *probe, size_t i, const char *uuid)
{
    if (i >= probe->n_devices)
        return false;
    const struct gpu_device *dev = &probe->devices[i];
    return !dev->error && strcmp(dev->uuid, uuid) == 0;
}

static bool probe_gpu(struct dp_tracker *t, struct gpu_state *g, bool ok, uint64_t now,
                      dp_change_fn fn, void *userdata)
{
    bool changed = false;
    if (!ok) {
        changed = mark_state(&g->s, DP_CAUSE_LOST, 0, now);
        g->s.lost = true;
        if (changed)
            tell(fn, userdata, g->uuid, &g->s);
        return changed;
    }
    g->s.lost = false;
    changed |= heal(t, &g->s, g->uuid, now, fn, userdata);
    for (size_t m = 0; m < g->n_migs; m++)
        changed |= heal(t, &g->migs[m].s, g->migs[m].uuid, now, fn, userdata);
    return changed;
}

bool dp_tracker_probe(struct dp_tracker *t, const struct gpu_inventory *probe, uint64_t now_ms,
                      dp_change_fn fn, void *userdata)
{
    bool changed = false;
    if (!probe)
        return false;
    for (size_t i = 0; i < t->n; i++) {
        struct gpu_state *g = &t->gpus[i];
        if (!g->uuid[0])
            continue; /* lost before we ever knew it: not advertised */
        changed |= probe_gpu(t, g, answers(probe, i, g->uuid), now_ms, fn, userdata);
    }
    return changed;
}

bool dp_tracker_any_unhealthy(const struct dp_tracker *t)
{
    for (size_t i = 0; i < t->n; i++) {
        if (t->gpus[i].s.unhealthy)
            return true;
        for (size_t m = 0; m < t->gpus[i].n_migs; m++)
            if (t->gpus[i].migs[m].s.unhealthy)
                return true;
    }
    return false;
}

bool dp_tracker_healthy(const struct dp_tracker *t, unsigned gpu, int mig)
{
    if (gpu >= t->n)
        return false;
    const struct gpu_state *g = &t->gpus[gpu];
    if (g->s.unhealthy)
        return false;
    return mig < 0 || (size_t)mig >= g->n_migs || !g->migs[mig].s.unhealthy;
}

bool dp_resource_apply_health(struct dp_resource *r, const struct dp_tracker *t)
{
    bool changed = false;
    for (size_t i = 0; i < r->n_devices; i++) {
        struct dp_device *dev = &r->devices[i];
        bool healthy = dp_tracker_healthy(t, dev->gpu, dev->mig);
        changed |= healthy != dev->healthy;
        dev->healthy = healthy;
    }
    return changed;
}

static const struct gpu_state *find_gpu(const struct dp_tracker *t, const char *uuid)
{
    for (size_t i = 0; uuid[0] && i < t->n; i++)
        if (strcmp(t->gpus[i].uuid, uuid) == 0)
            return &t->gpus[i];
    return NULL;
}

void dp_tracker_inherit(struct dp_tracker *t, const struct dp_tracker *old)
{
    for (size_t i = 0; old && i < t->n; i++) {
        struct gpu_state *g = &t->gpus[i];
        const struct gpu_state *o = find_gpu(old, g->uuid);
        if (!o)
            continue;
        if (!g->s.lost)
            g->s = o->s;
        for (size_t m = 0; m < g->n_migs; m++)
            for (size_t k = 0; k < o->n_migs; k++)
                if (strcmp(g->migs[m].uuid, o->migs[k].uuid) == 0)
                    g->migs[m].s = o->migs[k].s;
    }
}

static bool names_mig(const struct gpu_inventory *inv, const char *uuid)
{
    for (size_t i = 0; i < inv->n_devices; i++)
        for (size_t m = 0; !inv->devices[i].error && m < inv->devices[i].n_migs; m++)
            if (strcmp(inv->devices[i].migs[m].uuid, uuid) == 0)
                return true;
    return false;
}

/* Whether inv holds the GPU uuid readable (named, no NVML error). */
static bool names_gpu(const struct gpu_inventory *inv, const char *uuid)
{
    for (size_t i = 0; i < inv->n_devices; i++)
        if (!inv->devices[i].error && strcmp(inv->devices[i].uuid, uuid) == 0)
            return true;
    return false;
}

bool dp_inventory_gained(const struct gpu_inventory *cur, const struct gpu_inventory *probe)
{
    for (size_t i = 0; probe && i < probe->n_devices; i++) {
        const struct gpu_device *dev = &probe->devices[i];
        if (dev->error || !dev->uuid[0])
            continue;
        if (!names_gpu(cur, dev->uuid))
            return true;
        for (size_t m = 0; m < dev->n_migs; m++)
            if (dev->migs[m].uuid[0] && !names_mig(cur, dev->migs[m].uuid))
                return true;
    }
    return false;
}
