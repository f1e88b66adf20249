/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client: exchanges queued behind a token bucket, sent on the connection pool (kube-conn.c)
 * with the credentials of the moment, and their outcomes delivered to the callers.
 *
 * Callers' functions never run inside the transport: the pool's callbacks only append to a buffer
 * and queue the exchange, and the queue is delivered when the pool has finished with the event
 * (its leave hook). That is what lets a callback start requests, cancel others or free the whole
 * client: a client freed during a delivery is torn down when the delivery unwinds.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "kube-internal.h"

#ifndef GP_KUBE_VERSION
#define GP_KUBE_VERSION "unknown"
#endif

#define TOKEN_FILE_MAX ((size_t)64 << 10)

enum http_state {
    HTTP_WAITING,  /* behind the rate limiter */
    HTTP_ACTIVE,   /* on a connection */
    HTTP_FINISHED, /* outcome known, waiting for delivery */
};

struct kube_http {
    struct kube_http *prev, *next; /* in the client's waiting or active list */
    struct kube_http *ready_next;
    bool in_ready;
    struct kube_client *c;
    enum http_state state;
    char *method, *path, *body, *content_type;
    size_t body_len;
    bool stream;
    bool streaming; /* a 200 stream: bytes go to data as they come */
    bool data_pending;
    bool cancelled;
    struct kube_conn *conn;
    struct strbuf resp;
    int status;
    char error[DIAG_MSG_MAX];
    uint64_t started_ms;
    kube_http_done_fn done;
    kube_http_data_fn data;
    kube_http_drop_fn drop;
    void *userdata;
};

struct http_list {
    struct kube_http *head, *tail;
};

struct kube_client {
    struct ev_loop *loop;
    struct kube_config *cfg;
    char *user_agent;
    uint32_t timeout_ms;
    struct kube_pool *pool;
    char pool_error[DIAG_MSG_MAX]; /* why there is no pool: every request fails with it */
    struct ev_timer *pump_timer;
    struct kube_bucket bucket;
    struct kube_token_cache token;
    struct http_list waiting, active;
    struct kube_http *ready_head, *ready_tail;
    struct kube_http *current; /* being delivered */
    struct kube_client_hook *hooks;
    unsigned busy; /* inside a delivery: freeing waits */
    bool dead;
};

/* ---- lists ---- */

static void list_append(struct http_list *l, struct kube_http *h)
{
    h->next = NULL;
    h->prev = l->tail;
    if (l->tail)
        l->tail->next = h;
    else
        l->head = h;
    l->tail = h;
}

static void list_unlink(struct http_list *l, struct kube_http *h)
{
    if (h->prev)
        h->prev->next = h->next;
    else
        l->head = h->next;
    if (h->next)
        h->next->prev = h->prev;
    else
        l->tail = h->prev;
    h->prev = h->next = NULL;
}

static void ready_push(struct kube_client *c, struct kube_http *h)
{
    if (h->in_ready)
        return;
    h->in_ready = true;
    h->ready_next = NULL;
    if (c->ready_tail)
        c->ready_tail->ready_next = h;
    else
        c->ready_head = h;
    c->ready_tail = h;
}

static struct kube_http *ready_pop(struct kube_client *c)
{
    struct kube_http *h = c->ready_head;
    if (!h)
        return NULL;
    c->ready_head = h->ready_next;
    if (!c->ready_head)
        c->ready_tail = NULL;
    h->in_ready = false;
    h->ready_next = NULL;
    return h;
}

/* ---- tokens ---- */

void kube_token_cache_release(struct kube_token_cache *tc)
{
    if (tc->token) {
        explicit_bzero(tc->token, strlen(tc->token));
        free(tc->token);
    }
    *tc = (struct kube_token_cache){0};
}

int kube_token_get(struct kube_token_cache *tc, const struct kube_config *cfg, struct diag *d,
                   const char **ret)
{
    if (!cfg->token_file) {
        *ret = cfg->token;
        return 0;
    }
    struct stat st;
    if (stat(cfg->token_file, &st) < 0) {
        int err = negative_errno();
        if (tc->valid) { /* mid-rotation: the last token read is still the best guess */
            *ret = tc->token;
            return 0;
        }
        return diag_fail(d, err, "token file %s: %s", cfg->token_file, strerror(-err));
    }
    if (tc->valid && tc->dev == st.st_dev && tc->ino == st.st_ino && tc->size == st.st_size &&
        tc->mtime.tv_sec == st.st_mtim.tv_sec && tc->mtime.tv_nsec == st.st_mtim.tv_nsec) {
        *ret = tc->token;
        return 0;
    }
    char *data = NULL;
    size_t len;
    int r = file_read_all(cfg->token_file, TOKEN_FILE_MAX, &data, &len);
    if (r < 0) {
        if (tc->valid) {
            *ret = tc->token;
            return 0;
        }
        return diag_fail(d, r, "token file %s: %s", cfg->token_file, strerror(-r));
    }
    size_t start = strspn(data, " \t\r\n");
    while (len > start && strchr(" \t\r\n", data[len - 1]))
        len--;
    if (len == start || memchr(data + start, '\n', len - start) ||
        memchr(data + start, '\r', len - start)) {
        explicit_bzero(data, len);
        free(data);
        if (tc->valid) {
            *ret = tc->token;
            return 0;
        }
        return diag_fail(d, -EINVAL, "token file %s holds no token (empty or several lines)",
                         cfg->token_file);
    }
    memmove(data, data + start, len - start);
    data[len - start] = '\0';
    kube_token_cache_release(tc);
    tc->token = data;
    tc->dev = st.st_dev;
    tc->ino = st.st_ino;
    tc->size = st.st_size;
    tc->mtime = st.st_mtim;
    tc->valid = true;
    *ret = tc->token;
    return 0;
}

/* ---- exchanges ---- */

static void http_free(struct kube_http *h)
{
    strbuf_release(&h->resp);
    free(h->method);
    free(h->path);
    free(h->body);
    free(h->content_type);
    free(h);
}

/* Takes h off its connection and its list; it stays allocated. */
static void http_detach(struct kube_http *h)
{
    struct kube_client *c = h->c;
    if (h->state == HTTP_WAITING)
        list_unlink(&c->waiting, h);
    else if (h->state == HTTP_ACTIVE) {
        list_unlink(&c->active, h);
        kube_conn_cancel(h->conn);
        h->conn = NULL;
    }
    h->state = HTTP_FINISHED;
}

static void http_finish(struct kube_http *h, int status, const char *error)
{
    http_detach(h);
    h->status = status;
    if (error)
        snprintf(h->error, sizeof(h->error), "%s", error);
    ready_push(h->c, h);
}

void kube_http_cancel(struct kube_http *h)
{
    if (!h || h->cancelled)
        return;
    h->cancelled = true;
    http_detach(h);
    /* The delivery loop frees what it holds or still has queued. */
    if (h->c->current == h || h->in_ready)
        return;
    http_free(h);
}

static void on_body(void *userdata, int status)
{
    struct kube_http *h = userdata;
    if (h->stream && status == 200)
        h->streaming = true;
    if (h->streaming) {
        h->data_pending = true;
        ready_push(h->c, h);
    }
}

static void on_end(void *userdata, int status, const char *error)
{
    struct kube_http *h = userdata;
    h->conn = NULL; /* the pool is done with it */
    /* A stream that broke after its 200 keeps the status: what it delivered stands. */
    if (error && !h->streaming)
        status = 0;
    http_finish(h, status, error);
}

static void on_moved(void *userdata, struct kube_conn *conn)
{
    struct kube_http *h = userdata;
    h->conn = conn;
}

static const struct kube_conn_ops http_ops = {.body = on_body, .end = on_end, .moved = on_moved};

/* The request's bytes, the token among its headers (read now: it may have rotated). */
static int build_request(struct kube_http *h, struct strbuf *out, struct diag *d)
{
    struct kube_client *c = h->c;
    const struct kube_target *t = kube_pool_target(c->pool);
    _cleanup_free_ char *agent = NULL, *type = NULL, *auth = NULL, *target = NULL;
    const char *token = NULL;
    int r = kube_token_get(&c->token, c->cfg, d, &token);
    if (r < 0)
        return r;
    if (asprintf(&agent, "User-Agent: %s", c->user_agent) < 0 ||
        asprintf(&target, "%s%s", t->base_path, h->path) < 0)
        return -ENOMEM;
    if (h->content_type && asprintf(&type, "Content-Type: %s", h->content_type) < 0)
        return -ENOMEM;
    if (token && asprintf(&auth, "Authorization: Bearer %s", token) < 0)
        return -ENOMEM;
    const char *headers[] = {"Accept: application/json", agent, type, auth};
    r = kube_h1_request(out, h->method, t->authority, target, headers, ARRAY_SIZE(headers), h->body,
                        h->body_len);
    if (auth)
        explicit_bzero(auth, strlen(auth));
    return r;
}

static int http_launch(struct kube_http *h, struct diag *d)
{
    struct kube_client *c = h->c;
    _cleanup_strbuf_ struct strbuf request = STRBUF_INIT;
    if (!c->pool)
        return diag_fail(d, -EINVAL, "%s", c->pool_error);
    int r = build_request(h, &request, d);
    if (r >= 0)
        r = kube_pool_send(c->pool, &request, &h->resp, h->stream ? 0 : c->timeout_ms, &http_ops, h,
                           d, &h->conn);
    if (request.buf)
        explicit_bzero(request.buf, request.len); /* it held the token */
    if (r < 0)
        return r;
    h->started_ms = ev_loop_now_ms(c->loop);
    h->state = HTTP_ACTIVE;
    list_append(&c->active, h);
    return 0;
}

/* Starts what the bucket lets through; the timer comes back for the rest. */
static void pump(struct kube_client *c)
{
    while (c->waiting.head && !c->dead) {
        uint64_t wait = kube_bucket_take(&c->bucket, ev_loop_now_ms(c->loop));
        if (wait > 0) {
            (void)!ev_timer_set(c->pump_timer, wait, 0);
            return;
        }
        struct kube_http *h = c->waiting.head;
        list_unlink(&c->waiting, h);
        h->state = HTTP_FINISHED; /* until launched */
        struct diag d;
        diag_init(&d);
        int r = http_launch(h, &d);
        if (r < 0) {
            if (!*d.msg)
                snprintf(d.msg, sizeof(d.msg), "%s", strerror(-r));
            http_finish(h, 0, d.msg);
        }
    }
}

static void client_destroy(struct kube_client *c);

static void deliver(struct kube_client *c)
{
    struct kube_http *h;
    while (!c->dead && (h = ready_pop(c))) {
        c->current = h;
        if (h->data_pending && !h->cancelled) {
            h->data_pending = false;
            if (h->data)
                h->data(h, &h->resp, h->userdata);
        }
        if (h->state == HTTP_FINISHED && !h->cancelled) {
            log_debug(5, "kube response", "method", h->method, "path", h->path, "status",
                      LOG_INT(h->status), "ms", LOG_INT(ev_loop_now_ms(c->loop) - h->started_ms));
            h->done(h, h->status, strbuf_str(&h->resp), h->resp.len,
                    h->status == 0 || h->error[0] ? h->error : NULL, h->userdata);
        }
        c->current = NULL;
        if (h->cancelled || h->state == HTTP_FINISHED)
            http_free(h);
    }
}

static void enter(void *userdata)
{
    struct kube_client *c = userdata;
    c->busy++;
}

static void leave(void *userdata)
{
    struct kube_client *c = userdata;
    if (!c->dead)
        pump(c);
    deliver(c);
    if (--c->busy == 0 && c->dead)
        client_destroy(c);
}

static void on_pump_timer(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct kube_client *c = userdata;
    enter(c);
    leave(c);
}

int kube_http_start(struct kube_client *c, const struct kube_http_spec *spec,
                    kube_http_done_fn done, kube_http_data_fn data, kube_http_drop_fn drop,
                    void *userdata, struct kube_http **ret)
{
    if (c->dead)
        return -ECANCELED;
    struct kube_http *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->c = c;
    h->state = HTTP_WAITING;
    h->stream = spec->stream;
    h->done = done;
    h->data = data;
    h->drop = drop;
    h->userdata = userdata;
    strbuf_init(&h->resp, spec->stream ? KUBE_LINE_MAX + 65536 : 0);
    h->method = strdup(spec->method);
    h->path = strdup(spec->path);
    h->content_type = spec->content_type ? strdup(spec->content_type) : NULL;
    if (spec->body) {
        h->body = malloc(spec->body_len + 1);
        if (h->body) {
            memcpy(h->body, spec->body, spec->body_len);
            h->body[spec->body_len] = '\0';
        }
        h->body_len = spec->body_len;
    }
    if (!h->method || !h->path || (spec->content_type && !h->content_type) ||
        (spec->body && !h->body)) {
        http_free(h);
        return -ENOMEM;
    }
    list_append(&c->waiting, h);
    /* Launched from the loop, never inside the caller: a failure to launch is a callback too. */
    (void)!ev_timer_set(c->pump_timer, 0, 0);
    if (ret)
        *ret = h;
    return 0;
}

struct ev_loop *kube_client_loop(const struct kube_client *c)
{
    return c->loop;
}

bool kube_client_closing(const struct kube_client *c)
{
    return c->dead;
}

void kube_client_hook_add(struct kube_client *c, struct kube_client_hook *hook)
{
    hook->prev = NULL;
    hook->next = c->hooks;
    if (c->hooks)
        c->hooks->prev = hook;
    c->hooks = hook;
}

void kube_client_hook_remove(struct kube_client *c, struct kube_client_hook *hook)
{
    if (hook->prev)
        hook->prev->next = hook->next;
    else if (c->hooks == hook)
        c->hooks = hook->next;
    if (hook->next)
        hook->next->prev = hook->prev;
    hook->prev = hook->next = NULL;
}

/* ---- the client ---- */

static char *dup_or_null(const char *s, bool *fail)
{
    if (!s)
        return NULL;
    char *r = strdup(s);
    if (!r)
        *fail = true;
    return r;
}

static struct kube_config *config_copy(const struct kube_config *src)
{
    struct kube_config *cfg = calloc(1, sizeof(*cfg));
    if (!cfg)
        return NULL;
    bool fail = false;
    cfg->server = dup_or_null(src->server, &fail);
    cfg->ca_file = dup_or_null(src->ca_file, &fail);
    cfg->ca_pem = dup_or_null(src->ca_pem, &fail);
    cfg->token = dup_or_null(src->token, &fail);
    cfg->token_file = dup_or_null(src->token_file, &fail);
    cfg->cert_file = dup_or_null(src->cert_file, &fail);
    cfg->key_file = dup_or_null(src->key_file, &fail);
    cfg->cert_pem = dup_or_null(src->cert_pem, &fail);
    cfg->key_pem = dup_or_null(src->key_pem, &fail);
    cfg->namespace_ = dup_or_null(src->namespace_, &fail);
    cfg->source = dup_or_null(src->source, &fail);
    cfg->insecure = src->insecure;
    if (fail || !cfg->server)
        return kube_config_free(cfg);
    return cfg;
}

static void client_destroy(struct kube_client *c)
{
    kube_pool_free(c->pool);
    ev_timer_del(c->pump_timer);
    kube_token_cache_release(&c->token);
    kube_config_free(c->cfg);
    free(c->user_agent);
    free(c);
}

/* Ends every exchange; drop releases what the owner of each one kept. */
static void drop_all(struct kube_client *c, struct http_list *l)
{
    while (l->head) {
        struct kube_http *h = l->head;
        kube_http_drop_fn drop = h->drop;
        void *userdata = h->userdata;
        kube_http_cancel(h);
        if (drop)
            drop(userdata);
    }
}

struct kube_client *kube_client_free(struct kube_client *c)
{
    if (!c || c->dead)
        return NULL;
    c->dead = true;
    while (c->hooks) {
        struct kube_client_hook *hook = c->hooks;
        kube_client_hook_remove(c, hook);
        hook->detach(hook);
    }
    drop_all(c, &c->waiting);
    drop_all(c, &c->active);
    /* Finished but not delivered: dropped as well; the one being delivered is freed by deliver().
     */
    struct kube_http *h;
    while ((h = ready_pop(c))) {
        if (h == c->current)
            continue;
        if (!h->cancelled && h->drop)
            h->drop(h->userdata);
        http_free(h);
    }
    if (c->busy == 0)
        client_destroy(c);
    return NULL;
}

int kube_client_new(struct ev_loop *loop, const struct kube_config *cfg,
                    const struct kube_client_options *opts, struct kube_client **ret)
{
    static const struct kube_client_options defaults = {0};
    if (!opts)
        opts = &defaults;
    struct kube_client *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->loop = loop;
    c->timeout_ms = opts->timeout_ms ? opts->timeout_ms : 30000;
    kube_bucket_init(&c->bucket, opts->qps, opts->burst, ev_loop_now_ms(loop));
    c->cfg = config_copy(cfg);
    if (opts->user_agent)
        c->user_agent = strdup(opts->user_agent);
    else if (asprintf(&c->user_agent, "gpuplane/%s", GP_KUBE_VERSION) < 0)
        c->user_agent = NULL;
    int r = c->cfg && c->user_agent ? 0 : -ENOMEM;
    if (r >= 0)
        r = ev_timer_add(loop, 0, 0, on_pump_timer, c, &c->pump_timer);
    if (r >= 0)
        r = ev_timer_disarm(c->pump_timer);
    if (r < 0) {
        client_destroy(c);
        return r;
    }
    /* A pool that cannot be made (no OpenSSL, a CA that does not parse) fails every request with
     * the reason, as a server that cannot be reached does. */
    struct diag d;
    diag_init(&d);
    const struct kube_pool_hooks hooks = {.enter = enter, .leave = leave, .userdata = c};
    if (kube_pool_new(loop, c->cfg, &hooks, &d, &c->pool) < 0)
        snprintf(c->pool_error, sizeof(c->pool_error), "%s", d.msg[0] ? d.msg : "out of memory");
    *ret = c;
    return 0;
}
