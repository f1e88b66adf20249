/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connections to the API server: HTTP/1.1 over TCP, with TLS (kube-tls.c) for https servers and a
 * CONNECT tunnel when a proxy is configured in the environment (kube-target.c). One exchange at a
 * time per connection; a connection whose response ended cleanly goes back to the idle pool and is
 * reused by the next request, so a daemon that publishes and reads now and then keeps one or two
 * connections open, and each watch holds one of its own while it streams.
 *
 * Everything runs on the event loop: names that are not addresses are resolved on a worker thread
 * (getaddrinfo may block), connect is non-blocking with a deadline, and the TLS handshake and the
 * exchange advance as the socket becomes ready. A request sent on a reused connection that the
 * server had closed meanwhile (no byte of a response came back) is sent again once on a new one,
 * as client-go's transport does. The owner's functions are called only between the pool's enter and
 * leave hooks, so the client can deliver outcomes once the pool is done with the event.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kube-internal.h"

#define CONNECT_TIMEOUT_MS 10000u
#define IDLE_TIMEOUT_MS 90000u /* as Go's http.Transport's IdleConnTimeout */
#define IDLE_MAX 8
#define READ_CHUNK 16384

enum conn_state {
    CONN_RESOLVING,
    CONN_CONNECTING,
    CONN_TUNNEL, /* CONNECT sent to the proxy, waiting for its 200 */
    CONN_HANDSHAKE,
    CONN_ACTIVE,
    CONN_IDLE,
};

struct resolve_job {
    struct kube_conn *conn; /* NULL once the connection is gone: the job only frees itself */
    char host[256];
    char port[8];
    struct addrinfo *res;
    int err;
};

struct kube_conn {
    struct kube_conn *prev, *next;
    struct kube_pool *pool;
    enum conn_state state;
    int fd;
    struct ev_io *io;
    struct ev_timer *timer;
    struct kube_tls_conn *tls;
    struct resolve_job *job;
    struct addrinfo *addrs, *addr;
    struct strbuf out; /* the bytes to send: the CONNECT request, then the request */
    size_t out_off;
    struct strbuf request;
    struct strbuf tunnel_body;
    struct kube_h1 h1;
    bool reused, got_bytes, retried;
    char pending_error[DIAG_MSG_MAX];
    /* the exchange */
    struct strbuf *resp;
    const struct kube_conn_ops *ops;
    void *userdata;
    uint64_t deadline_ms; /* 0: none */
};

struct conn_list {
    struct kube_conn *head;
    unsigned n;
};

struct kube_pool {
    struct ev_loop *loop;
    struct kube_target target;
    struct kube_tls *tls;
    struct ev_work_pool *work;
    struct conn_list idle, busy;
    struct kube_pool_hooks hooks;
};

/* ---- lists ---- */

static void list_add(struct conn_list *l, struct kube_conn *c)
{
    c->prev = NULL;
    c->next = l->head;
    if (l->head)
        l->head->prev = c;
    l->head = c;
    l->n++;
}

static void list_del(struct conn_list *l, struct kube_conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        l->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    l->n--;
}

static struct conn_list *list_of(struct kube_conn *c)
{
    return c->state == CONN_IDLE ? &c->pool->idle : &c->pool->busy;
}

/* ---- closing ---- */

static void close_socket(struct kube_conn *c)
{
    c->tls = kube_tls_conn_free(c->tls);
    c->io = ev_io_del(c->io);
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

/* Requests carry the bearer token: their bytes are zeroed before the memory goes back. */
static void wipe(struct strbuf *sb)
{
    if (sb->buf)
        explicit_bzero(sb->buf, sb->len);
    strbuf_release(sb);
}

static void conn_free(struct kube_conn *c)
{
    if (c->state != CONN_RESOLVING || c->job)
        log_debug(4, "kube connection closed", "server", c->pool->target.authority, "idle",
                  LOG_INT(c->state == CONN_IDLE), "reused", LOG_INT(c->reused));
    list_del(list_of(c), c);
    close_socket(c);
    if (c->job)
        c->job->conn = NULL;
    ev_timer_del(c->timer);
    if (c->addrs)
        freeaddrinfo(c->addrs);
    wipe(&c->out);
    wipe(&c->request);
    strbuf_release(&c->tunnel_body);
    kube_h1_release(&c->h1);
    free(c);
}

void kube_conn_cancel(struct kube_conn *c)
{
    if (c)
        conn_free(c);
}

static void hooks_enter(struct kube_pool *p)
{
    if (p->hooks.enter)
        p->hooks.enter(p->hooks.userdata);
}

static void hooks_leave(struct kube_pool *p)
{
    if (p->hooks.leave)
        p->hooks.leave(p->hooks.userdata);
}

/* The exchange ends: the owner hears of it once, the connection is closed. */
static void conn_fail(struct kube_conn *c, const char *error)
{
    char why[DIAG_MSG_MAX]; /* error may live in c */
    snprintf(why, sizeof(why), "%s", error);
    int status = c->h1.head_complete ? c->h1.status : 0;
    const struct kube_conn_ops *ops = c->ops;
    void *userdata = c->userdata;
    conn_free(c);
    ops->end(userdata, status, why);
}

/* ---- setting up ---- */

static void on_io(struct ev_io *io, int fd, uint32_t revents, void *userdata);
static void on_timer(struct ev_timer *t, uint64_t expirations, void *userdata);
static void watch(struct kube_conn *c, enum kube_io want);
static void start_exchange(struct kube_conn *c);
static int start_connect(struct kube_conn *c, struct diag *d);

static void arm_deadline(struct kube_conn *c, uint64_t ms)
{
    (void)!ev_timer_set(c->timer, ms ? ms : 1, 0);
}

/* Reports err from the loop, never inside the call that started the exchange. */
static void fail_later(struct kube_conn *c, const char *error)
{
    snprintf(c->pending_error, sizeof(c->pending_error), "%s", error);
    arm_deadline(c, 1);
}

static int set_socket_options(int fd)
{
    int one = 1, idle = 30;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof(idle));
    return 0;
}

static const char *dial_host(const struct kube_conn *c)
{
    return c->pool->target.proxied ? c->pool->target.proxy_host : c->pool->target.host;
}

static const char *dial_port(const struct kube_conn *c)
{
    return c->pool->target.proxied ? c->pool->target.proxy_port : c->pool->target.port;
}

/* Tries the addresses from c->addr on; a synchronous refusal moves to the next one. */
static int start_connect(struct kube_conn *c, struct diag *d)
{
    int err = ENOENT;
    for (; c->addr; c->addr = c->addr->ai_next) {
        close_socket(c);
        c->fd = socket(c->addr->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (c->fd < 0) {
            err = errno;
            continue;
        }
        set_socket_options(c->fd);
        if (connect(c->fd, c->addr->ai_addr, c->addr->ai_addrlen) < 0 && errno != EINPROGRESS) {
            err = errno;
            continue;
        }
        c->state = CONN_CONNECTING;
        return ev_io_add(c->pool->loop, c->fd, EV_WRITE, on_io, c, &c->io);
    }
    return diag_fail(d, -err, "connect to %s:%s: %s", dial_host(c), dial_port(c), strerror(err));
}

static int resolve_work(void *userdata)
{
    struct resolve_job *job = userdata;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    job->err = getaddrinfo(job->host, job->port, &hints, &job->res);
    return 0;
}

static void resolve_done(int result, void *userdata)
{
    struct resolve_job *job = userdata;
    struct kube_conn *c = job->conn;
    if (!c) {
        if (job->res)
            freeaddrinfo(job->res);
        free(job);
        return;
    }
    struct kube_pool *p = c->pool;
    c->job = NULL;
    c->addrs = c->addr = job->res;
    int err = result < 0 ? EAI_SYSTEM : job->err;
    free(job);
    hooks_enter(p);
    struct diag d;
    diag_init(&d);
    if (err)
        conn_fail(c, err == EAI_SYSTEM ? "name resolution failed" : gai_strerror(err));
    else if (start_connect(c, &d) < 0)
        conn_fail(c, d.msg);
    hooks_leave(p);
}

/* Addresses are used at once; names go to a worker thread. */
static int resolve(struct kube_conn *c, struct diag *d)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV};
    if (getaddrinfo(dial_host(c), dial_port(c), &hints, &c->addrs) == 0) {
        c->addr = c->addrs;
        if (start_connect(c, d) < 0)
            fail_later(c, d->msg);
        return 0;
    }
    c->addrs = NULL;
    struct kube_pool *p = c->pool;
    if (!p->work) {
        int r = ev_work_pool_new(p->loop, 1, &p->work);
        if (r < 0)
            return r;
    }
    struct resolve_job *job = calloc(1, sizeof(*job));
    if (!job)
        return -ENOMEM;
    job->conn = c;
    snprintf(job->host, sizeof(job->host), "%s", dial_host(c));
    snprintf(job->port, sizeof(job->port), "%s", dial_port(c));
    int r = ev_work_submit(p->work, resolve_work, resolve_done, job);
    if (r < 0) {
        free(job);
        return r;
    }
    c->job = job;
    c->state = CONN_RESOLVING;
    return 0;
}

static int conn_new(struct kube_pool *p, struct kube_conn **ret)
{
    struct kube_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->pool = p;
    c->fd = -1;
    c->state = CONN_RESOLVING;
    strbuf_init(&c->out, 0);
    strbuf_init(&c->request, 0);
    strbuf_init(&c->tunnel_body, 4096);
    kube_h1_init(&c->h1, false);
    list_add(&p->busy, c);
    int r = ev_timer_add(p->loop, 0, 0, on_timer, c, &c->timer);
    if (r >= 0)
        r = ev_timer_disarm(c->timer);
    if (r < 0) {
        conn_free(c);
        return r;
    }
    *ret = c;
    return 0;
}

/* ---- the tunnel and TLS ---- */

static int start_tunnel(struct kube_conn *c)
{
    const struct kube_target *t = &c->pool->target;
    strbuf_reset(&c->out);
    c->out_off = 0;
    c->state = CONN_TUNNEL;
    kube_h1_release(&c->h1);
    kube_h1_init(&c->h1, true); /* a CONNECT answer has no body to read */
    const char *headers[] = {t->proxy_auth};
    watch(c, KUBE_IO_WRITE);
    return kube_h1_request(&c->out, "CONNECT", t->authority, t->authority, headers, 1, NULL, 0);
}

static int start_tls(struct kube_conn *c, struct diag *d)
{
    c->state = CONN_HANDSHAKE;
    watch(c, KUBE_IO_WRITE);
    return kube_tls_conn_new(c->pool->tls, c->fd, c->pool->target.host, d, &c->tls);
}

/* The socket is connected (or the tunnel is up): on to TLS or straight to the request. */
static int after_connect(struct kube_conn *c, struct diag *d)
{
    if (c->state == CONN_CONNECTING && c->pool->target.proxied)
        return start_tunnel(c);
    if (c->pool->target.https)
        return start_tls(c, d);
    start_exchange(c);
    return 0;
}

/* ---- I/O ---- */

static ssize_t sock_write(struct kube_conn *c, const char *buf, size_t n, enum kube_io *want,
                          struct diag *d)
{
    if (c->tls)
        return kube_tls_write(c->tls, buf, n, want, d);
    ssize_t w = send(c->fd, buf, n, MSG_NOSIGNAL);
    if (w >= 0)
        return w;
    if (errno == EAGAIN || errno == EINTR) {
        *want = KUBE_IO_WRITE;
        return -EAGAIN;
    }
    return diag_fail(d, -errno, "write to %s: %s", dial_host(c), strerror(errno));
}

static ssize_t sock_read(struct kube_conn *c, char *buf, size_t n, enum kube_io *want,
                         struct diag *d)
{
    if (c->tls)
        return kube_tls_read(c->tls, buf, n, want, d);
    ssize_t got = recv(c->fd, buf, n, 0);
    if (got >= 0)
        return got;
    if (errno == EAGAIN || errno == EINTR) {
        *want = KUBE_IO_READ;
        return -EAGAIN;
    }
    return diag_fail(d, -errno, "read from %s: %s", dial_host(c), strerror(errno));
}

static void watch(struct kube_conn *c, enum kube_io want)
{
    (void)!ev_io_modify(c->io, want == KUBE_IO_WRITE ? EV_WRITE : EV_READ);
}

/* Sends what is left of c->out; 1 when all of it went. */
static int flush(struct kube_conn *c, struct diag *d)
{
    while (c->out_off < c->out.len) {
        enum kube_io want = KUBE_IO_READ;
        ssize_t w = sock_write(c, c->out.buf + c->out_off, c->out.len - c->out_off, &want, d);
        if (w == -EAGAIN) {
            watch(c, want);
            return 0;
        }
        if (w < 0)
            return (int)w;
        c->out_off += (size_t)w;
    }
    return 1;
}

static int finish_tunnel(struct kube_conn *c, struct diag *d)
{
    if (c->h1.status != 200)
        return diag_fail(d, -ECONNREFUSED, "proxy %s:%s refused the tunnel: HTTP %d", dial_host(c),
                         dial_port(c), c->h1.status);
    kube_h1_release(&c->h1);
    kube_h1_init(&c->h1, false);
    return after_connect(c, d);
}

/* The exchange's response is complete: back to the pool, or closed. */
static void finish_exchange(struct kube_conn *c)
{
    struct kube_pool *p = c->pool;
    int status = c->h1.status;
    const struct kube_conn_ops *ops = c->ops;
    void *userdata = c->userdata;
    if (c->h1.close || p->idle.n >= IDLE_MAX) {
        conn_free(c);
    } else {
        list_del(&p->busy, c);
        wipe(&c->request);
        wipe(&c->out);
        c->state = CONN_IDLE;
        c->ops = NULL;
        c->resp = NULL;
        list_add(&p->idle, c);
        watch(c, KUBE_IO_READ); /* anything read now means the server closed it */
        arm_deadline(c, IDLE_TIMEOUT_MS);
    }
    ops->end(userdata, status, NULL);
}

static int retry_on_new_connection(struct kube_conn *old);

/* Feeds what arrived to the parser; 1 when the response is complete. */
static int take_bytes(struct kube_conn *c, const char *buf, size_t n, struct diag *d)
{
    struct strbuf *body = c->state == CONN_TUNNEL ? &c->tunnel_body : c->resp;
    size_t before = body->len, used = 0;
    int r = kube_h1_feed(&c->h1, buf, n, body, d, &used);
    if (r < 0)
        return r;
    if (used < n) /* bytes past the end of the response: nothing we asked for */
        c->h1.close = true;
    if (c->state == CONN_ACTIVE && body->len > before)
        c->ops->body(c->userdata, c->h1.status);
    return c->h1.state == H1_DONE;
}

/* Reads until the socket has nothing more; 1 when the response is complete, 2 at a stale reuse. */
static int pump_reads(struct kube_conn *c, struct diag *d)
{
    char buf[READ_CHUNK];
    for (;;) {
        enum kube_io want = KUBE_IO_READ;
        ssize_t got = sock_read(c, buf, sizeof(buf), &want, d);
        if (got == -EAGAIN) {
            watch(c, want);
            return 0;
        }
        if (got < 0 || got == 0) {
            if (c->reused && !c->got_bytes && !c->retried)
                return 2;
            if (got < 0)
                return (int)got;
            int r = kube_h1_eof(&c->h1, d);
            return r < 0 ? r : 1;
        }
        c->got_bytes = true;
        int r = take_bytes(c, buf, (size_t)got, d);
        if (r != 0)
            return r;
    }
}

static int step_connecting(struct kube_conn *c, struct diag *d)
{
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err) {
        c->addr = c->addr ? c->addr->ai_next : NULL;
        if (c->addr)
            return start_connect(c, d);
        return diag_fail(d, -err, "connect to %s:%s: %s", dial_host(c), dial_port(c),
                         strerror(err));
    }
    return after_connect(c, d);
}

static int step_handshake(struct kube_conn *c, struct diag *d)
{
    enum kube_io want = KUBE_IO_READ;
    int r = kube_tls_handshake(c->tls, &want, d);
    if (r == -EAGAIN) {
        watch(c, want);
        return 0;
    }
    if (r < 0)
        return r;
    start_exchange(c);
    return 0;
}

static int step_exchange(struct kube_conn *c, struct diag *d)
{
    int r = flush(c, d);
    if (r <= 0)
        return r;
    r = pump_reads(c, d);
    if (r == 2)
        return retry_on_new_connection(c);
    if (r == 1 && c->state == CONN_TUNNEL)
        return finish_tunnel(c, d);
    if (r == 1)
        finish_exchange(c);
    return r < 0 ? r : 0;
}

static void step(struct kube_conn *c)
{
    struct diag d;
    diag_init(&d);
    int r = 0;
    switch (c->state) {
    case CONN_CONNECTING:
        r = step_connecting(c, &d);
        break;
    case CONN_HANDSHAKE:
        r = step_handshake(c, &d);
        break;
    case CONN_TUNNEL:
    case CONN_ACTIVE:
        r = step_exchange(c, &d);
        break;
    case CONN_IDLE: /* the server closed it, or said something unasked */
        conn_free(c);
        return;
    case CONN_RESOLVING:
        return;
    }
    if (r < 0)
        conn_fail(c, d.msg[0] ? d.msg : strerror(-r));
}

static void on_io(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    struct kube_conn *c = userdata;
    struct kube_pool *p = c->pool;
    hooks_enter(p);
    step(c);
    hooks_leave(p);
}

static void on_timer(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct kube_conn *c = userdata;
    struct kube_pool *p = c->pool;
    hooks_enter(p);
    if (c->pending_error[0])
        conn_fail(c, c->pending_error);
    else if (c->state == CONN_IDLE)
        conn_free(c);
    else if (c->state == CONN_ACTIVE && c->h1.head_complete)
        conn_fail(c, "timed out waiting for the rest of the response");
    else if (c->state == CONN_ACTIVE || c->state == CONN_TUNNEL)
        conn_fail(c, "timed out waiting for the response");
    else {
        char why[DIAG_MSG_MAX];
        snprintf(why, sizeof(why), "connect to %s:%s: timed out", dial_host(c), dial_port(c));
        conn_fail(c, why);
    }
    hooks_leave(p);
}

/* ---- exchanges ---- */

static void start_exchange(struct kube_conn *c)
{
    c->state = CONN_ACTIVE;
    strbuf_reset(&c->out);
    c->out_off = 0;
    if (strbuf_add(&c->out, c->request.buf, c->request.len) < 0) {
        fail_later(c, "out of memory");
        return;
    }
    uint64_t now = ev_loop_now_ms(c->pool->loop);
    if (c->deadline_ms)
        arm_deadline(c, c->deadline_ms > now ? c->deadline_ms - now : 1);
    else
        (void)!ev_timer_disarm(c->timer);
    watch(c, KUBE_IO_WRITE);
}

static void adopt_exchange(struct kube_conn *c, struct kube_conn *from)
{
    c->resp = from->resp;
    c->ops = from->ops;
    c->userdata = from->userdata;
    c->deadline_ms = from->deadline_ms;
}

static int open_for(struct kube_pool *p, struct kube_conn *c, struct diag *d)
{
    log_debug(4, "kube connection opened", "server", p->target.authority, "idle",
              LOG_INT(p->idle.n), "busy", LOG_INT(p->busy.n));
    uint64_t now = ev_loop_now_ms(p->loop);
    uint64_t connect_by = now + CONNECT_TIMEOUT_MS;
    if (c->deadline_ms && c->deadline_ms < connect_by)
        connect_by = c->deadline_ms;
    arm_deadline(c, connect_by - now);
    return resolve(c, d);
}

static int retry_on_new_connection(struct kube_conn *old)
{
    struct kube_pool *p = old->pool;
    struct kube_conn *c;
    struct diag d;
    diag_init(&d);
    int r = conn_new(p, &c);
    if (r >= 0) {
        adopt_exchange(c, old);
        c->retried = true;
        r = strbuf_add(&c->request, old->request.buf, old->request.len);
    }
    if (r >= 0)
        r = open_for(p, c, &d);
    if (r < 0)
        return r;
    /* The owner holds old as its handle; it now holds c. */
    c->ops->moved(c->userdata, c);
    conn_free(old);
    return 0;
}

int kube_pool_send(struct kube_pool *p, struct strbuf *request, struct strbuf *resp,
                   uint32_t timeout_ms, const struct kube_conn_ops *ops, void *userdata,
                   struct diag *d, struct kube_conn **ret)
{
    struct kube_conn *c = p->idle.head;
    if (c) {
        (void)!ev_timer_disarm(c->timer);
        list_del(&p->idle, c);
        c->state = CONN_ACTIVE;
        list_add(&p->busy, c);
        c->reused = true;
        c->got_bytes = false;
        kube_h1_release(&c->h1);
        kube_h1_init(&c->h1, false);
    } else {
        int r = conn_new(p, &c);
        if (r < 0)
            return r;
    }
    strbuf_reset(&c->request);
    int r = strbuf_add(&c->request, request->buf, request->len);
    c->resp = resp;
    c->ops = ops;
    c->userdata = userdata;
    c->deadline_ms = timeout_ms ? ev_loop_now_ms(p->loop) + timeout_ms : 0;
    if (r >= 0 && c->reused)
        start_exchange(c);
    else if (r >= 0)
        r = open_for(p, c, d);
    if (r < 0) {
        conn_free(c);
        return r;
    }
    *ret = c;
    return 0;
}

/* ---- the pool ---- */

const struct kube_target *kube_pool_target(const struct kube_pool *p)
{
    return &p->target;
}

struct kube_pool *kube_pool_free(struct kube_pool *p)
{
    if (!p)
        return NULL;
    while (p->idle.head)
        conn_free(p->idle.head);
    while (p->busy.head)
        conn_free(p->busy.head);
    ev_work_pool_free(p->work);
    kube_tls_free(p->tls);
    kube_target_release(&p->target);
    free(p);
    return NULL;
}

int kube_pool_new(struct ev_loop *loop, const struct kube_config *cfg,
                  const struct kube_pool_hooks *hooks, struct diag *d, struct kube_pool **ret)
{
    _cleanup_(kube_pool_freep) struct kube_pool *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->loop = loop;
    p->hooks = *hooks;
    int r = kube_target_parse(cfg->server, &p->target, d);
    if (r >= 0 && p->target.https)
        r = kube_tls_new(cfg, d, &p->tls);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(p);
    return 0;
}
