/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client: one curl multi handle driven by the event loop (curl's sockets become ev_io watches,
 * its timeout an ev_timer), TLS and credentials per request, and a token bucket in front of it.
 *
 * Callers' functions never run inside curl: curl's write callback only appends to a buffer and
 * queues the exchange, finished transfers are queued too, and the queue is delivered once
 * curl_multi_socket_action() has returned. That is what lets a callback start requests, cancel
 * others or free the whole client: a client freed during a delivery is torn down when the
 * delivery unwinds.
 */
#include <curl/curl.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "kube-internal.h"

#ifndef GP_KUBE_VERSION
#define GP_KUBE_VERSION "unknown"
#endif

#define CONNECT_TIMEOUT_MS 10000L
#define TOKEN_FILE_MAX ((size_t)64 << 10)

enum http_state {
    HTTP_WAITING,  /* behind the rate limiter */
    HTTP_ACTIVE,   /* on the multi handle */
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
    bool too_large;
    CURL *easy;
    struct curl_slist *headers;
    struct strbuf resp;
    int status;
    char error[DIAG_MSG_MAX]; /* curl's error buffer (at least CURL_ERROR_SIZE), then the outcome */
    uint64_t started_ms;
    kube_http_done_fn done;
    kube_http_data_fn data;
    kube_http_drop_fn drop;
    void *userdata;
};

struct http_list {
    struct kube_http *head, *tail;
};

struct sock {
    struct sock *prev, *next;
    struct kube_client *c;
    curl_socket_t fd;
    struct ev_io *io;
};

struct kube_client {
    struct ev_loop *loop;
    struct kube_config *cfg;
    char *user_agent;
    uint32_t timeout_ms;
    CURLM *multi;
    struct ev_timer *curl_timer;
    struct ev_timer *pump_timer;
    struct kube_bucket bucket;
    struct kube_token_cache token;
    struct http_list waiting, active;
    struct kube_http *ready_head, *ready_tail;
    struct kube_http *current; /* being delivered */
    struct sock *socks;
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
    if (h->easy)
        curl_easy_cleanup(h->easy);
    curl_slist_free_all(h->headers);
    strbuf_release(&h->resp);
    free(h->method);
    free(h->path);
    free(h->body);
    free(h->content_type);
    free(h);
}

/* Takes h off the multi handle and its list; it stays allocated. */
static void http_detach(struct kube_http *h)
{
    struct kube_client *c = h->c;
    if (h->state == HTTP_WAITING)
        list_unlink(&c->waiting, h);
    else if (h->state == HTTP_ACTIVE) {
        list_unlink(&c->active, h);
        curl_multi_remove_handle(c->multi, h->easy);
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

static size_t on_write(char *p, size_t size, size_t n, void *userdata)
{
    struct kube_http *h = userdata;
    size_t len = size * n;
    if (h->stream && !h->streaming) {
        long code = 0;
        curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, &code);
        h->streaming = code == 200;
    }
    if (strbuf_add(&h->resp, p, len) < 0) {
        h->too_large = true;
        return 0; /* curl ends the transfer with CURLE_WRITE_ERROR */
    }
    if (h->streaming) {
        h->data_pending = true;
        ready_push(h->c, h);
    }
    return len;
}

static int set_blob(CURL *e, CURLoption opt, const char *pem)
{
    struct curl_blob blob = {.data = (void *)pem, .len = strlen(pem), .flags = CURL_BLOB_COPY};
    return curl_easy_setopt(e, opt, &blob) == CURLE_OK ? 0 : -ENOTSUP;
}

static int add_header(struct curl_slist **list, const char *line)
{
    struct curl_slist *l = curl_slist_append(*list, line);
    if (!l)
        return -ENOMEM;
    *list = l;
    return 0;
}

static int set_tls(struct kube_client *c, CURL *e)
{
    const struct kube_config *cfg = c->cfg;
    int r = 0;
    if (cfg->insecure) {
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    } else if (cfg->ca_pem)
        r = set_blob(e, CURLOPT_CAINFO_BLOB, cfg->ca_pem);
    else if (cfg->ca_file && curl_easy_setopt(e, CURLOPT_CAINFO, cfg->ca_file) != CURLE_OK)
        r = -ENOMEM;
    if (r >= 0 && cfg->cert_pem)
        r = set_blob(e, CURLOPT_SSLCERT_BLOB, cfg->cert_pem);
    else if (r >= 0 && cfg->cert_file && curl_easy_setopt(e, CURLOPT_SSLCERT, cfg->cert_file))
        r = -ENOMEM;
    if (r >= 0 && cfg->key_pem)
        r = set_blob(e, CURLOPT_SSLKEY_BLOB, cfg->key_pem);
    else if (r >= 0 && cfg->key_file && curl_easy_setopt(e, CURLOPT_SSLKEY, cfg->key_file))
        r = -ENOMEM;
    return r;
}

/* The per-request headers, the token among them (read now: it may have rotated). */
static int build_headers(struct kube_http *h, struct diag *d)
{
    struct kube_client *c = h->c;
    const char *token = NULL;
    int r = kube_token_get(&c->token, c->cfg, d, &token);
    if (r < 0)
        return r;
    r = add_header(&h->headers, "Accept: application/json");
    if (r >= 0)
        r = add_header(&h->headers, "Expect:");
    if (r >= 0 && h->content_type) {
        _cleanup_free_ char *line = NULL;
        if (asprintf(&line, "Content-Type: %s", h->content_type) < 0)
            return -ENOMEM;
        r = add_header(&h->headers, line);
    }
    if (r >= 0 && token) {
        _cleanup_free_ char *line = NULL;
        if (asprintf(&line, "Authorization: Bearer %s", token) < 0)
            return -ENOMEM;
        r = add_header(&h->headers, line);
        explicit_bzero(line, strlen(line));
    }
    return r;
}

static int http_launch(struct kube_http *h, struct diag *d)
{
    struct kube_client *c = h->c;
    _cleanup_free_ char *url = NULL;
    if (asprintf(&url, "%s%s", c->cfg->server, h->path) < 0)
        return -ENOMEM;
    int r = build_headers(h, d);
    if (r < 0)
        return r;
    CURL *e = h->easy = curl_easy_init();
    if (!e)
        return -ENOMEM;
    if (curl_easy_setopt(e, CURLOPT_URL, url) != CURLE_OK)
        return diag_fail(d, -EINVAL, "cannot use URL %s%s", c->cfg->server, h->path);
    curl_easy_setopt(e, CURLOPT_PRIVATE, h);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "https,http");
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, h->error);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, h);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h->headers);
    curl_easy_setopt(e, CURLOPT_USERAGENT, c->user_agent);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    if (!h->stream)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)c->timeout_ms);
    if (strcmp(h->method, "GET") != 0)
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, h->method);
    if (h->body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)h->body_len);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, h->body);
    }
    r = set_tls(c, e);
    if (r < 0)
        return diag_fail(d, r, "libcurl refused the TLS settings");
    if (curl_multi_add_handle(c->multi, e) != CURLM_OK)
        return diag_fail(d, -ENOMEM, "cannot add the request to the multi handle");
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

/* What curl finished since the last look. */
static void collect(struct kube_client *c)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(c->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        struct kube_http *h = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&h);
        CURLcode result = msg->data.result;
        long code = 0;
        curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, &code);
        if (result == CURLE_OK) {
            h->error[0] = '\0';
            http_finish(h, (int)code, NULL);
            continue;
        }
        char why[DIAG_MSG_MAX];
        if (h->too_large)
            snprintf(why, sizeof(why), "response larger than %zu bytes", h->resp.cap);
        else
            snprintf(why, sizeof(why), "%s", h->error[0] ? h->error : curl_easy_strerror(result));
        /* A stream that broke after its 200 keeps the status: what it delivered stands. */
        http_finish(h, h->streaming ? (int)code : 0, why);
    }
}

static void enter(struct kube_client *c)
{
    c->busy++;
}

static void leave(struct kube_client *c)
{
    collect(c);
    if (!c->dead)
        pump(c);
    deliver(c);
    if (--c->busy == 0 && c->dead)
        client_destroy(c);
}

static void on_io(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    struct sock *s = userdata;
    struct kube_client *c = s->c;
    int flags = 0, running;
    if (revents & (EV_READ | EV_HUP))
        flags |= CURL_CSELECT_IN;
    if (revents & EV_WRITE)
        flags |= CURL_CSELECT_OUT;
    if (revents & EV_ERROR)
        flags |= CURL_CSELECT_ERR;
    enter(c);
    curl_multi_socket_action(c->multi, fd, flags, &running);
    leave(c);
}

static void on_curl_timer(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct kube_client *c = userdata;
    int running;
    enter(c);
    curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    leave(c);
}

static void on_pump_timer(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct kube_client *c = userdata;
    enter(c);
    leave(c);
}

static void sock_free(struct kube_client *c, struct sock *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        c->socks = s->next;
    if (s->next)
        s->next->prev = s->prev;
    ev_io_del(s->io);
    free(s);
}

static int on_socket(CURL *e, curl_socket_t fd, int what, void *userdata, void *socketp)
{
    struct kube_client *c = userdata;
    struct sock *s = socketp;
    if (what == CURL_POLL_REMOVE) {
        if (s) {
            curl_multi_assign(c->multi, fd, NULL);
            sock_free(c, s);
        }
        return 0;
    }
    uint32_t events = 0;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
        events |= EV_READ;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
        events |= EV_WRITE;
    if (s)
        return ev_io_modify(s->io, events) < 0 ? -1 : 0;
    s = calloc(1, sizeof(*s));
    if (!s)
        return -1;
    s->c = c;
    s->fd = fd;
    if (ev_io_add(c->loop, fd, events, on_io, s, &s->io) < 0) {
        free(s);
        return -1;
    }
    s->next = c->socks;
    if (c->socks)
        c->socks->prev = s;
    c->socks = s;
    curl_multi_assign(c->multi, fd, s);
    return 0;
}

static int on_timer_change(CURLM *m, long timeout_ms, void *userdata)
{
    struct kube_client *c = userdata;
    if (timeout_ms < 0)
        return ev_timer_disarm(c->curl_timer) < 0 ? -1 : 0;
    return ev_timer_set(c->curl_timer, (uint64_t)timeout_ms, 0) < 0 ? -1 : 0;
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
    if (c->multi) {
        /* Handles first, so curl has nothing left to call back about when the multi goes. */
        curl_multi_cleanup(c->multi);
    }
    while (c->socks)
        sock_free(c, c->socks);
    ev_timer_del(c->curl_timer);
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
    static bool curl_ready;
    if (!curl_ready) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
            return -ENOMEM;
        curl_ready = true;
    }
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
    c->multi = curl_multi_init();
    int r = c->cfg && c->user_agent && c->multi ? 0 : -ENOMEM;
    if (r >= 0)
        r = ev_timer_add(loop, 0, 0, on_curl_timer, c, &c->curl_timer);
    if (r >= 0)
        r = ev_timer_disarm(c->curl_timer);
    if (r >= 0)
        r = ev_timer_add(loop, 0, 0, on_pump_timer, c, &c->pump_timer);
    if (r >= 0)
        r = ev_timer_disarm(c->pump_timer);
    if (r < 0) {
        client_destroy(c);
        return r;
    }
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_timer_change);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    *ret = c;
    return 0;
}
