/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Watches: list, report, then follow the collection's changes from the list's resourceVersion.
 *
 * The watch remembers every object it reported (by namespace/name), so that after a re-list (the
 * server forgot our resourceVersion: 410 Gone, or an ERROR event) it can tell the caller what
 * changed while it was not looking (ADDED / MODIFIED / DELETED against what it had said) instead of
 * replaying the collection. Bookmarks move the resourceVersion forward without an object, which
 * keeps a quiet watch from falling out of the server's window.
 *
 * A broken connection is watched again from the last resourceVersion after a back-off; errors of
 * the list itself back off too. The back-off doubles from 1 s to 30 s and starts over once a
 * connection stayed up for a minute.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kube-internal.h"

#define BACKOFF_FIRST_MS 1000u
#define BACKOFF_MAX_MS 30000u
#define HEALTHY_MS 60000u
/* The server ends each watch after this long (client-go picks 5 to 10 minutes), so that load
 * balancers and restarts spread watches over the API servers. */
#define WATCH_TIMEOUT_MIN_S 300u
#define WATCH_TIMEOUT_SPREAD_S 300u

enum next_step {
    STEP_LIST,
    STEP_WATCH,
};

struct kube_watch {
    struct kube_client *c; /* NULL once the client is gone */
    struct kube_client_hook hook;
    char *path;
    kube_event_fn fn;
    kube_filter_fn filter; /* NULL: objects whole */
    void *userdata;
    json_t *known; /* "namespace/name" -> the object last reported */
    char *rv;
    struct kube_op *list;
    struct kube_http *http;
    struct ev_timer *retry;
    enum next_step next;
    uint64_t backoff_ms;
    uint64_t connected_ms;
    bool *freed; /* points into report()'s frame while fn runs: set when fn frees the watch */
};

static void start_list(struct kube_watch *w);
static void start_watch(struct kube_watch *w);

/* Calls the caller; false when the watch must not be touched any more. */
static bool report(struct kube_watch *w, enum kube_event ev, json_t *obj)
{
    bool freed = false;
    bool *outer = w->freed;
    w->freed = &freed;
    w->fn(ev, obj, w->userdata);
    if (freed) {
        if (outer)
            *outer = true;
        return false;
    }
    w->freed = outer;
    return w->c != NULL; /* the client was freed: the watch stays, stopped */
}

static void schedule(struct kube_watch *w, enum next_step next, bool now)
{
    w->next = next;
    uint64_t delay = now ? 0 : w->backoff_ms;
    if (!now) {
        w->backoff_ms *= 2;
        if (w->backoff_ms > BACKOFF_MAX_MS)
            w->backoff_ms = BACKOFF_MAX_MS;
    }
    log_debug(4, "kube watch retry", "path", w->path, "step", next == STEP_LIST ? "list" : "watch",
              "delay_ms", LOG_INT(delay));
    if (ev_timer_set(w->retry, delay, 0) < 0)
        log_debug(1, "kube watch: cannot arm the retry timer", "path", w->path);
}

static void on_retry(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct kube_watch *w = userdata;
    if (!w->c)
        return;
    if (w->next == STEP_LIST)
        start_list(w);
    else
        start_watch(w);
}

/* namespace/name: one per object of a collection, also across namespaces. */
static int object_key(const json_t *obj, char *buf, size_t n)
{
    const json_t *meta = json_object_get(obj, "metadata");
    const char *ns = json_string_value(json_object_get(meta, "namespace"));
    const char *name = json_string_value(json_object_get(meta, "name"));
    if (!name)
        return -EINVAL;
    int r = snprintf(buf, n, "%s/%s", ns ? ns : "", name);
    return r < 0 || (size_t)r >= n ? -ENAMETOOLONG : 0;
}

static const char *object_rv(const json_t *obj)
{
    return json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
}

static void set_rv(struct kube_watch *w, const char *rv)
{
    if (!rv || !*rv)
        return;
    char *copy = strdup(rv);
    if (!copy)
        return; /* keep the older one: a re-list at worst */
    free(w->rv);
    w->rv = copy;
}

/* ---- the (re)list ---- */

static bool report_relist(struct kube_watch *w, json_t *list)
{
    _cleanup_json_ json_t *old = w->known;
    w->known = json_object();
    if (!w->known) {
        w->known = TAKE_PTR(old);
        return true;
    }
    char key[512];
    size_t i;
    json_t *item;
    json_t *items = json_object_get(list, "items");
    json_array_foreach(items, i, item)
    {
        if (object_key(item, key, sizeof(key)) >= 0)
            (void)!json_object_set(w->known, key, item);
    }
    json_array_foreach(items, i, item)
    {
        if (object_key(item, key, sizeof(key)) < 0)
            continue;
        json_t *before = json_object_get(old, key);
        const char *rv_before = object_rv(before), *rv_now = object_rv(item);
        if (!before) {
            if (!report(w, KUBE_ADDED, item))
                return false;
        } else if (!rv_before || !rv_now || strcmp(rv_before, rv_now) != 0) {
            if (!report(w, KUBE_MODIFIED, item))
                return false;
        }
    }
    const char *k;
    void *tmp;
    json_t *before;
    json_object_foreach_safe(old, tmp, k, before)
    {
        if (!json_object_get(w->known, k) && !report(w, KUBE_DELETED, before))
            return false;
    }
    return report(w, KUBE_SYNCED, list);
}

static void on_list(const struct kube_response *res, void *userdata)
{
    struct kube_watch *w = userdata;
    w->list = NULL;
    if (res->status != 200) {
        log_debug(2, "kube watch: list failed", "path", w->path, "status", LOG_INT(res->status),
                  "reason", res->reason, "message", res->message);
        schedule(w, STEP_LIST, false);
        return;
    }
    set_rv(w, json_string_value(
                  json_object_get(json_object_get(res->body, "metadata"), "resourceVersion")));
    if (!report_relist(w, res->body))
        return;
    start_watch(w);
}

static void start_list(struct kube_watch *w)
{
    free(w->rv);
    w->rv = NULL;
    int r = kube_list_op_filtered(w->c, w->path, w->filter, w->userdata, on_list, w, &w->list);
    if (r < 0) {
        w->list = NULL;
        schedule(w, STEP_LIST, false);
    }
}

/* ---- the watch stream ---- */

/* false when the stream must end (the watch lists again, or is gone). */
static bool handle_event(struct kube_watch *w, enum kube_wire_event type, json_t *obj)
{
    _cleanup_json_ json_t *kept = NULL;
    char key[512];
    switch (type) {
    case KUBE_WIRE_BOOKMARK:
        set_rv(w, object_rv(obj));
        return true;
    case KUBE_WIRE_ERROR: {
        json_int_t code = json_integer_value(json_object_get(obj, "code"));
        const char *msg = json_string_value(json_object_get(obj, "message"));
        log_debug(2, "kube watch: error event, listing again", "path", w->path, "code",
                  LOG_INT(code), "message", msg ? msg : "");
        kube_http_cancel(w->http);
        w->http = NULL;
        schedule(w, STEP_LIST, code == 410);
        return false;
    }
    case KUBE_WIRE_ADDED:
    case KUBE_WIRE_MODIFIED:
    case KUBE_WIRE_DELETED:
        break;
    }
    if (object_key(obj, key, sizeof(key)) < 0) {
        log_debug(2, "kube watch: object without a name", "path", w->path);
        return true;
    }
    set_rv(w, object_rv(obj));
    if (w->filter) {
        kept = w->filter(obj, w->userdata);
        if (!kept || object_key(kept, key, sizeof(key)) < 0)
            return true; /* dropped by the caller */
        obj = kept;
    }
    enum kube_event ev = KUBE_ADDED;
    if (type == KUBE_WIRE_DELETED) {
        /* Keep the object alive through the call: the map held the only reference. */
        _cleanup_json_ json_t *held = json_incref(obj);
        json_object_del(w->known, key);
        return report(w, KUBE_DELETED, held);
    }
    if (type == KUBE_WIRE_MODIFIED || json_object_get(w->known, key))
        ev = json_object_get(w->known, key) ? KUBE_MODIFIED : KUBE_ADDED;
    (void)!json_object_set(w->known, key, obj);
    return report(w, ev, obj);
}

/* false when the stream must end. */
static bool handle_line(struct kube_watch *w, const char *line, size_t len)
{
    struct diag d;
    enum kube_wire_event type;
    _cleanup_json_ json_t *obj = NULL;
    diag_init(&d);
    int r = kube_watch_decode(line, len, &type, &obj, &d);
    if (r == -ENODATA)
        return true;
    if (r < 0) {
        log_debug(2, "kube watch: bad event, listing again", "path", w->path, "err", d.msg);
        kube_http_cancel(w->http);
        w->http = NULL;
        schedule(w, STEP_LIST, false);
        return false;
    }
    return handle_event(w, type, obj);
}

static void on_stream(struct kube_http *h, struct strbuf *buf, void *userdata)
{
    struct kube_watch *w = userdata;
    for (;;) {
        _cleanup_free_ char *line = NULL;
        size_t len;
        int r = kube_lines_next(buf, &line, &len);
        if (r < 0) {
            log_debug(2, "kube watch: event too long, listing again", "path", w->path);
            kube_http_cancel(w->http);
            w->http = NULL;
            schedule(w, STEP_LIST, false);
            return;
        }
        if (!line || !handle_line(w, line, len))
            return;
    }
}

static void on_stream_end(struct kube_http *h, int status, const char *body, size_t len,
                          const char *error, void *userdata)
{
    struct kube_watch *w = userdata;
    w->http = NULL;
    uint64_t now = ev_loop_now_ms(kube_client_loop(w->c));
    if (status == 200) {
        if (len > 0 && !handle_line(w, body, len))
            return;
        if (now - w->connected_ms >= HEALTHY_MS)
            w->backoff_ms = BACKOFF_FIRST_MS;
        log_debug(4, "kube watch: stream ended", "path", w->path, "error", error ? error : "");
        schedule(w, STEP_WATCH, now - w->connected_ms >= HEALTHY_MS);
        return;
    }
    if (status == 410) {
        schedule(w, STEP_LIST, true);
        return;
    }
    char reason[128], message[512];
    json_error_t jerr;
    _cleanup_json_ json_t *st = len ? json_loadb(body, len, 0, &jerr) : NULL;
    if (status)
        kube_status_describe(status, st, body, len, reason, sizeof(reason), message,
                             sizeof(message));
    log_debug(2, "kube watch failed", "path", w->path, "status", LOG_INT(status), "message",
              status ? message : (error ? error : ""));
    /* No answer: the server may be back with our resourceVersion; an answer: list afresh. */
    schedule(w, status == 0 ? STEP_WATCH : STEP_LIST, false);
}

static void start_watch(struct kube_watch *w)
{
    _cleanup_free_ char *query = NULL, *path = NULL;
    unsigned timeout = WATCH_TIMEOUT_MIN_S +
                       (unsigned)(ev_loop_now_ms(kube_client_loop(w->c)) % WATCH_TIMEOUT_SPREAD_S);
    if (asprintf(&query, "watch=1&allowWatchBookmarks=true&timeoutSeconds=%u%s%s", timeout,
                 w->rv ? "&resourceVersion=" : "", w->rv ? w->rv : "") < 0)
        query = NULL;
    if (query)
        path = kube_path_add_query(w->path, query);
    struct kube_http_spec spec = {.method = "GET", .path = path, .stream = true};
    int r =
        path ? kube_http_start(w->c, &spec, on_stream_end, on_stream, NULL, w, &w->http) : -ENOMEM;
    if (r < 0) {
        w->http = NULL;
        schedule(w, STEP_WATCH, false);
        return;
    }
    w->connected_ms = ev_loop_now_ms(kube_client_loop(w->c));
}

/* ---- lifetime ---- */

static void watch_stop(struct kube_watch *w)
{
    kube_op_cancel(w->list);
    w->list = NULL;
    kube_http_cancel(w->http);
    w->http = NULL;
    w->retry = ev_timer_del(w->retry);
    w->c = NULL;
}

static void on_client_gone(struct kube_client_hook *hook)
{
    struct kube_watch *w = (struct kube_watch *)((char *)hook - offsetof(struct kube_watch, hook));
    watch_stop(w);
}

struct kube_watch *kube_watch_free(struct kube_watch *w)
{
    if (!w)
        return NULL;
    if (w->c)
        kube_client_hook_remove(w->c, &w->hook);
    if (w->freed)
        *w->freed = true;
    watch_stop(w);
    json_decref(w->known);
    free(w->rv);
    free(w->path);
    free(w);
    return NULL;
}

int kube_watch_new(struct kube_client *c, const char *path, kube_event_fn fn, void *userdata,
                   struct kube_watch **ret)
{
    return kube_watch_new_filtered(c, path, NULL, fn, userdata, ret);
}

int kube_watch_new_filtered(struct kube_client *c, const char *path, kube_filter_fn filter,
                            kube_event_fn fn, void *userdata, struct kube_watch **ret)
{
    if (!path || path[0] != '/' || !fn)
        return -EINVAL;
    _cleanup_(kube_watch_freep) struct kube_watch *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->fn = fn;
    w->filter = filter;
    w->userdata = userdata;
    w->backoff_ms = BACKOFF_FIRST_MS;
    w->path = strdup(path);
    w->known = json_object();
    if (!w->path || !w->known)
        return -ENOMEM;
    int r = ev_timer_add(kube_client_loop(c), 0, 0, on_retry, w, &w->retry);
    if (r < 0)
        return r;
    r = ev_timer_disarm(w->retry);
    if (r < 0)
        return r;
    w->c = c;
    kube_client_hook_add(c, &w->hook);
    w->hook.detach = on_client_gone;
    r = kube_list_op_filtered(c, w->path, w->filter, w->userdata, on_list, w, &w->list);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(w);
    return 0;
}
