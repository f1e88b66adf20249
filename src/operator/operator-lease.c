/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leader election (operator-lease.h): the Lease record and its MicroTime fields, client-go's
 * decision rules as a state machine, and the elector that reads and writes the Lease on the event
 * loop. The elector has a kube client of its own (the daemon makes it), so a burst of reconcile
 * requests waiting in the reconciler's rate limiter never delays a renewal.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "ev.h"
#include "kube.h"
#include "operator-lease.h"

/* ---- the record ---- */

void op_microtime_format(int64_t us, char buf[static 32])
{
    time_t s = (time_t)(us / 1000000);
    int64_t frac = us % 1000000;
    if (frac < 0) {
        frac += 1000000;
        s--;
    }
    struct tm tm;
    if (!gmtime_r(&s, &tm)) {
        snprintf(buf, 32, "1970-01-01T00:00:00.000000Z");
        return;
    }
    char wide[96] = ""; /* what the compiler cannot bound; the result always fits 32 bytes */
    snprintf(wide, sizeof(wide), "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)frac);
    memcpy(buf, wide, 31);
    buf[31] = '\0';
}

static int digits(const char **p, int n, int *ret)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if ((*p)[i] < '0' || (*p)[i] > '9')
            return -EINVAL;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *ret = v;
    return 0;
}

static int expect(const char **p, char c)
{
    if (**p != c)
        return -EINVAL;
    (*p)++;
    return 0;
}

int op_microtime_parse(const char *s, int64_t *ret_us)
{
    struct tm tm = {0};
    int y, mo, d, h, mi, sec;
    const char *p = s;
    if (digits(&p, 4, &y) < 0 || expect(&p, '-') < 0 || digits(&p, 2, &mo) < 0 ||
        expect(&p, '-') < 0 || digits(&p, 2, &d) < 0 || (*p != 'T' && *p != 't') ||
        (p++, digits(&p, 2, &h)) < 0 || expect(&p, ':') < 0 || digits(&p, 2, &mi) < 0 ||
        expect(&p, ':') < 0 || digits(&p, 2, &sec) < 0)
        return -EINVAL;
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
        return -EINVAL;
    int64_t frac = 0;
    if (*p == '.') {
        p++;
        int n = 0;
        while (*p >= '0' && *p <= '9') {
            if (n < 6)
                frac = frac * 10 + (*p - '0');
            n++;
            p++;
        }
        if (n == 0 || n > 9)
            return -EINVAL;
        for (; n < 6; n++)
            frac *= 10;
    }
    int64_t offset_s = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p == '-' ? -1 : 1, oh, om;
        p++;
        if (digits(&p, 2, &oh) < 0 || expect(&p, ':') < 0 || digits(&p, 2, &om) < 0 || oh > 23 ||
            om > 59)
            return -EINVAL;
        offset_s = sign * (oh * 3600 + om * 60);
    } else {
        return -EINVAL;
    }
    if (*p)
        return -EINVAL;
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    time_t t = timegm(&tm);
    *ret_us = ((int64_t)t - offset_s) * 1000000 + frac;
    return 0;
}

static int read_int32(const json_t *spec, const char *key, int32_t *ret)
{
    const json_t *v = json_object_get(spec, key);
    if (!v || json_is_null(v)) {
        *ret = 0;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < INT32_MIN ||
        json_integer_value(v) > INT32_MAX)
        return -EINVAL;
    *ret = (int32_t)json_integer_value(v);
    return 0;
}

static int read_time(const json_t *spec, const char *key, int64_t *ret)
{
    const json_t *v = json_object_get(spec, key);
    *ret = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return -EINVAL;
    return op_microtime_parse(json_string_value(v), ret);
}

int op_lease_record_from_json(const json_t *lease, struct op_lease_record *ret)
{
    struct op_lease_record rec = {0};
    const json_t *spec = json_object_get(lease, "spec");
    if (spec && !json_is_object(spec) && !json_is_null(spec))
        return -EINVAL;
    const json_t *holder = json_object_get(spec, "holderIdentity");
    if (holder && !json_is_null(holder)) {
        if (!json_is_string(holder) || json_string_length(holder) >= sizeof(rec.holder))
            return -EINVAL;
        memcpy(rec.holder, json_string_value(holder), json_string_length(holder) + 1);
    }
    int r = read_int32(spec, "leaseDurationSeconds", &rec.duration_s);
    if (r >= 0)
        r = read_int32(spec, "leaseTransitions", &rec.transitions);
    if (r >= 0)
        r = read_time(spec, "acquireTime", &rec.acquire_us);
    if (r >= 0)
        r = read_time(spec, "renewTime", &rec.renew_us);
    if (r < 0)
        return r;
    *ret = rec;
    return 0;
}

json_t *op_lease_record_to_json(const struct op_lease_record *rec)
{
    char acquire[32], renew[32];
    op_microtime_format(rec->acquire_us, acquire);
    op_microtime_format(rec->renew_us, renew);
    return json_pack("{s:s,s:i,s:s,s:s,s:i}", "holderIdentity", rec->holder, "leaseDurationSeconds",
                     (json_int_t)rec->duration_s, "acquireTime", acquire, "renewTime", renew,
                     "leaseTransitions", (json_int_t)rec->transitions);
}

bool op_lease_record_equal(const struct op_lease_record *a, const struct op_lease_record *b)
{
    return strcmp(a->holder, b->holder) == 0 && a->duration_s == b->duration_s &&
           a->acquire_us == b->acquire_us && a->renew_us == b->renew_us &&
           a->transitions == b->transitions;
}

/* ---- the decision logic ---- */

void op_lease_sm_init(struct op_lease_sm *sm, const char *identity, uint64_t lease_ms,
                      uint64_t renew_deadline_ms)
{
    *sm = (struct op_lease_sm){.lease_ms = lease_ms, .renew_deadline_ms = renew_deadline_ms};
    snprintf(sm->identity, sizeof(sm->identity), "%s", identity);
}

static int32_t lease_seconds(uint64_t ms)
{
    uint64_t s = (ms + 999) / 1000;
    return s > INT32_MAX ? INT32_MAX : (int32_t)(s ? s : 1);
}

enum op_lease_action op_lease_sm_step(struct op_lease_sm *sm, const struct op_lease_record *live,
                                      uint64_t now_ms, int64_t now_us,
                                      struct op_lease_record *ret_write)
{
    struct op_lease_record w = {
        .duration_s = lease_seconds(sm->lease_ms),
        .acquire_us = now_us,
        .renew_us = now_us,
    };
    snprintf(w.holder, sizeof(w.holder), "%s", sm->identity);
    if (!live) {
        *ret_write = w;
        return OP_LEASE_CREATE;
    }
    if (!sm->have_observed || !op_lease_record_equal(live, &sm->observed)) {
        sm->observed = *live;
        sm->observed_ms = now_ms;
        sm->have_observed = true;
    }
    bool ours = strcmp(live->holder, sm->identity) == 0;
    /* The record's own duration, as client-go reads it; ours when the record has none. */
    uint64_t valid_ms = live->duration_s > 0 ? (uint64_t)live->duration_s * 1000 : sm->lease_ms;
    if (live->holder[0] && !ours && now_ms < sm->observed_ms + valid_ms)
        return OP_LEASE_WAIT;
    if (ours) {
        w.acquire_us = live->acquire_us;
        w.transitions = live->transitions;
    } else {
        w.transitions = live->transitions + 1;
    }
    *ret_write = w;
    return OP_LEASE_UPDATE;
}

void op_lease_sm_written(struct op_lease_sm *sm, bool ok, const struct op_lease_record *rec,
                         uint64_t now_ms)
{
    if (!ok)
        return;
    sm->observed = *rec;
    sm->observed_ms = now_ms;
    sm->have_observed = true;
    sm->leader = strcmp(rec->holder, sm->identity) == 0;
    if (sm->leader)
        sm->renewed_ms = now_ms;
}

bool op_lease_sm_lost(const struct op_lease_sm *sm, uint64_t now_ms)
{
    return sm->leader && now_ms >= sm->renewed_ms + sm->renew_deadline_ms;
}

/* ---- identity ---- */

int op_lease_identity(char buf[static OP_LEASE_HOLDER_MAX])
{
    char host[128];
    unsigned char u[16];
    if (gethostname(host, sizeof(host)) < 0)
        snprintf(host, sizeof(host), "localhost");
    host[sizeof(host) - 1] = '\0';
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    ssize_t n = read(fd, u, sizeof(u));
    close(fd);
    if (n != (ssize_t)sizeof(u))
        return -EIO;
    u[6] = (unsigned char)((u[6] & 0x0f) | 0x40);
    u[8] = (unsigned char)((u[8] & 0x3f) | 0x80);
    snprintf(buf, OP_LEASE_HOLDER_MAX,
             "%s_%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", host, u[0],
             u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
    return 0;
}

/* ---- the elector ---- */

/* A request in flight holds this; freeing the elector clears it, so a late answer is dropped. */
struct lease_call {
    struct op_elector *e;
    struct op_lease_record rec; /* what is being written */
};

struct op_elector {
    struct ev_loop *loop;
    struct kube_client *kube;
    struct op_elector_options o;
    char *namespace_, *name;
    char path[512], collection[512];
    struct op_lease_sm sm;
    struct ev_timer *timer;
    struct lease_call *call;
    json_t *live; /* the Lease as last read or written (its resourceVersion), or NULL */
    bool leading_reported;
    char logged_holder[OP_LEASE_HOLDER_MAX]; /* the other holder last logged */
    bool lost_reported;
    bool stopped;
    void (*release_done)(void *userdata);
    void *release_userdata;
};

static int64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static struct op_elector *call_end(struct lease_call *call)
{
    struct op_elector *e = call->e;
    if (e)
        e->call = NULL;
    free(call);
    return e;
}

static void check_lost(struct op_elector *e)
{
    if (e->lost_reported || e->stopped || !op_lease_sm_lost(&e->sm, ev_loop_now_ms(e->loop)))
        return;
    e->lost_reported = true;
    e->stopped = true;
    (void)!ev_timer_disarm(e->timer);
    if (e->o.on_lost)
        e->o.on_lost(e->o.userdata);
}

static void set_live(struct op_elector *e, const json_t *obj)
{
    json_decref(e->live);
    e->live = obj ? json_deep_copy(obj) : NULL;
}

static void on_written(const struct kube_response *res, void *userdata)
{
    struct lease_call *call = userdata;
    struct op_lease_record rec = call->rec;
    struct op_elector *e = call_end(call);
    if (!e)
        return;
    bool ok = res->status == 200 || res->status == 201;
    uint64_t now = ev_loop_now_ms(e->loop);
    if (ok)
        set_live(e, res->body);
    else
        log_debug(1, "lease write failed", "lease", e->name, "status", LOG_INT(res->status),
                  "reason", res->reason, "message", res->message);
    op_lease_sm_written(&e->sm, ok, &rec, now);
    if (e->stopped)
        return;
    if (e->sm.leader && !e->leading_reported) {
        e->leading_reported = true;
        log_info("successfully acquired lease", "lease", e->name, "namespace", e->namespace_,
                 "identity", e->sm.identity);
        if (e->o.on_leading)
            e->o.on_leading(e->o.userdata);
    }
    check_lost(e);
}

static int start_call(struct op_elector *e, const struct op_lease_record *rec,
                      struct lease_call **ret)
{
    struct lease_call *call = calloc(1, sizeof(*call));
    if (!call)
        return -ENOMEM;
    call->e = e;
    if (rec)
        call->rec = *rec;
    e->call = call;
    *ret = call;
    return 0;
}

static void write_record(struct op_elector *e, enum op_lease_action action,
                         const struct op_lease_record *rec)
{
    struct lease_call *call = NULL;
    _cleanup_json_ json_t *obj = NULL;
    json_t *spec = op_lease_record_to_json(rec);
    if (action == OP_LEASE_CREATE) {
        obj = json_pack("{s:s,s:s,s:{s:s,s:s},s:o*}", "apiVersion", "coordination.k8s.io/v1",
                        "kind", "Lease", "metadata", "name", e->name, "namespace", e->namespace_,
                        "spec", spec);
    } else {
        obj = e->live ? json_deep_copy(e->live) : NULL;
        if (obj && json_object_set_new(obj, "spec", spec) < 0)
            obj = (json_decref(obj), NULL);
        else if (!obj)
            json_decref(spec);
    }
    int r = obj ? start_call(e, rec, &call) : -ENOMEM;
    if (r >= 0)
        r = action == OP_LEASE_CREATE ? kube_create(e->kube, e->collection, obj, on_written, call)
                                      : kube_update(e->kube, e->path, obj, on_written, call);
    if (r < 0) {
        if (call)
            call_end(call);
        log_debug(1, "lease write not sent", "lease", e->name, "error", strerror(-r));
    }
}

static void on_read(const struct kube_response *res, void *userdata)
{
    struct op_elector *e = call_end(userdata);
    if (!e || e->stopped)
        return;
    struct op_lease_record live, w;
    uint64_t now = ev_loop_now_ms(e->loop);
    if (res->status == 404) {
        set_live(e, NULL);
    } else if (res->status != 200) {
        log_debug(1, "lease read failed", "lease", e->name, "status", LOG_INT(res->status),
                  "reason", res->reason, "message", res->message);
        check_lost(e);
        return;
    } else if (op_lease_record_from_json(res->body, &live) < 0) {
        log_warn("lease has a malformed spec; taking it over when it expires", "lease", e->name);
        memset(&live, 0, sizeof(live));
        snprintf(live.holder, sizeof(live.holder), "<malformed>");
    }
    if (res->status == 200)
        set_live(e, res->body);
    enum op_lease_action a =
        op_lease_sm_step(&e->sm, res->status == 404 ? NULL : &live, now, wall_us(), &w);
    if (a == OP_LEASE_WAIT) {
        if (strcmp(e->logged_holder, e->sm.observed.holder) != 0) {
            snprintf(e->logged_holder, sizeof(e->logged_holder), "%s", e->sm.observed.holder);
            log_info("lease held by another candidate; waiting", "lease", e->name, "holder",
                     e->sm.observed.holder);
        }
        check_lost(e);
        return;
    }
    write_record(e, a, &w);
}

static void on_timer(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct op_elector *e = userdata;
    check_lost(e);
    if (e->stopped || e->call)
        return;
    struct lease_call *call = NULL;
    int r = start_call(e, NULL, &call);
    if (r >= 0)
        r = kube_get(e->kube, e->path, on_read, call);
    if (r < 0 && call)
        call_end(call);
}

bool op_elector_is_leader(const struct op_elector *e)
{
    return e && e->sm.leader && !e->lost_reported;
}

/* The release: the Lease read afresh and written with an empty holder, as long as it is still
 * ours (kube_modify reads again on a conflict with a renewal still in flight). */
static int on_release_mutate(json_t *obj, void *userdata)
{
    struct op_elector *e = userdata;
    struct op_lease_record rec;
    if (op_lease_record_from_json(obj, &rec) < 0 || strcmp(rec.holder, e->sm.identity) != 0)
        return 1;
    rec.holder[0] = '\0';
    rec.duration_s = 1;
    rec.acquire_us = rec.renew_us = wall_us();
    json_t *spec = op_lease_record_to_json(&rec);
    if (!spec || json_object_set_new(obj, "spec", spec) < 0)
        return -ENOMEM;
    return 0;
}

static void on_released(const struct kube_response *res, void *userdata)
{
    struct op_elector *e = userdata;
    void (*done)(void *) = e->release_done;
    e->release_done = NULL;
    if (res->status == 200)
        log_info("leader lease released", "lease", e->name);
    else
        log_warn("cannot release the leader lease", "lease", e->name, "status",
                 LOG_INT(res->status), "message", res->message);
    if (done)
        done(e->release_userdata);
}

void op_elector_release(struct op_elector *e, void (*done)(void *userdata), void *userdata)
{
    e->stopped = true;
    (void)!ev_timer_disarm(e->timer);
    if (!e->sm.leader || e->lost_reported) {
        done(userdata);
        return;
    }
    if (e->call) { /* a renewal in flight: its answer is dropped */
        e->call->e = NULL;
        e->call = NULL;
    }
    e->release_done = done;
    e->release_userdata = userdata;
    if (kube_modify(e->kube, e->path, on_release_mutate, on_released, e) < 0) {
        e->release_done = NULL;
        done(userdata);
    }
}

struct op_elector *op_elector_free(struct op_elector *e)
{
    if (!e)
        return NULL;
    free(e->call); /* its client is gone (see the header): no answer will come */
    e->timer = ev_timer_del(e->timer);
    json_decref(e->live);
    free(e->namespace_);
    free(e->name);
    free(e);
    return NULL;
}

int op_elector_new(struct ev_loop *loop, struct kube_client *kube,
                   const struct op_elector_options *o, struct diag *d, struct op_elector **ret)
{
    _cleanup_(op_elector_freep) struct op_elector *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    e->loop = loop;
    e->kube = kube;
    e->o = *o;
    e->namespace_ = strdup(o->namespace_);
    e->name = strdup(o->name ? o->name : OP_LEASE_NAME);
    if (!e->namespace_ || !e->name)
        return -ENOMEM;
    e->o.namespace_ = e->o.name = e->o.identity = NULL;
    int r = kube_path(e->path, sizeof(e->path), "coordination.k8s.io/v1", "leases", e->namespace_,
                      e->name, d);
    if (r >= 0)
        r = kube_path(e->collection, sizeof(e->collection), "coordination.k8s.io/v1", "leases",
                      e->namespace_, NULL, d);
    if (r < 0)
        return r;
    op_lease_sm_init(&e->sm, o->identity, o->lease_ms, o->renew_deadline_ms);
    r = ev_timer_add(loop, 0, o->retry_ms, on_timer, e, &e->timer);
    if (r < 0)
        return diag_fail(d, r, "cannot start the leader election timer: %s", strerror(-r));
    *ret = TAKE_PTR(e);
    return 0;
}
