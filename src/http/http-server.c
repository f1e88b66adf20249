/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The server: a listening socket and its connections on the event loop. A connection goes through
 * a TLS handshake (when configured), then reads a request head into a buffer of max_head bytes,
 * answers it (auth, method, route, handler) and writes the response as the socket takes it (large
 * bodies in as many writes as it needs, never blocking the loop), then waits for the next request
 * on the same connection until the client closes, asks to close, or stays idle too long.
 *
 * One timer sweeps every connection's deadline: a head must arrive whole within head_timeout_ms of
 * its first byte (a client sending a byte a second cannot hold a connection), a response must make
 * progress within write_timeout_ms, an idle keep-alive connection lives idle_timeout_ms. Past
 * max_conns, the listening socket is not watched: further clients wait in the kernel's backlog
 * instead of costing memory here.
 *
 * Closing is graceful: after the last response the write side is shut and what the client still
 * sends is read and dropped for a moment, so a response to a request that was refused before its
 * end is not lost to a reset.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include "base-strbuf.h"
#include "ev.h"
#include "http-internal.h"

#define LINGER_MS 1000
#define GZIP_MIN 1024

enum conn_state {
    C_HANDSHAKE,
    C_READ,
    C_AUTH, /* waiting for a bcrypt on the worker pool */
    C_WRITE,
    C_LINGER,
};

struct route {
    char *path;
    http_handler_fn fn;
    void *userdata;
};

/* A bcrypt on the worker pool: the request waits for it with its head (pointing into c->in, which
 * is left alone meanwhile) and the decoded credentials. conn is cleared when the connection goes
 * first. */
struct auth_job {
    struct http_conn *conn;
    struct http_head head;
    const char *hash;
    uint64_t key;
    bool known, ok;
    char creds[512]; /* user NUL password */
    size_t creds_len;
};

struct http_conn {
    struct http_server *srv;
    struct http_conn *prev, *next;
    int fd;
    struct ev_io *io;
    struct http_tls_conn *tls;
    enum conn_state state;
    uint32_t watching;
    char *in; /* max_head bytes */
    size_t in_len;
    size_t head_len; /* the request being answered: dropped from in after its response */
    struct strbuf out;
    size_t out_off;
    struct http_body *body; /* being sent; its bytes at send, send_len */
    const char *send;
    size_t send_len, send_off;
    bool close_after;
    unsigned requests;
    uint64_t deadline;
    struct auth_job *auth; /* while in C_AUTH */
};

struct http_server {
    struct ev_loop *loop;
    int fd;
    struct ev_io *io;
    struct ev_timer *sweep;
    struct ev_work_pool *pool; /* bcrypt, with basic auth */
    struct http_web_config *web;
    struct http_tls *tls;
    struct http_limits lim;
    struct route *routes;
    size_t n_routes;
    struct http_conn *conns;
    unsigned n_conns;
    bool accepting;
    uint16_t port;
};

struct http_request {
    struct http_conn *conn;
    struct http_head head;
    const char *user;
    bool answered;
};

static const struct http_limits default_limits = {
    .max_head = 8192,
    .max_uri = 4096,
    .max_conns = 64,
    .max_requests = 1000,
    .idle_timeout_ms = 60000,
    .head_timeout_ms = 10000,
    .write_timeout_ms = 30000,
};

const char *http_status_reason(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 204:
        return "No Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "";
    }
}

/* ---- connections ---- */

static void conn_free(struct http_conn *c)
{
    struct http_server *srv = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->n_conns--;
    if (c->auth)
        c->auth->conn = NULL; /* its done function frees it */
    c->io = ev_io_del(c->io);
    http_tls_conn_free(c->tls);
    if (c->fd >= 0)
        close(c->fd);
    strbuf_release(&c->out);
    http_body_unref(c->body);
    free(c->in);
    free(c);
    if (!srv->accepting && srv->n_conns < srv->lim.max_conns && srv->io &&
        ev_io_modify(srv->io, EV_READ) >= 0)
        srv->accepting = true;
}

static void conn_watch(struct http_conn *c, uint32_t events)
{
    if (c->watching == events)
        return;
    if (ev_io_modify(c->io, events) < 0) {
        conn_free(c);
        return;
    }
    c->watching = events;
}

static uint64_t now_ms(const struct http_conn *c)
{
    return ev_loop_now_ms(c->srv->loop);
}

static void conn_linger(struct http_conn *c)
{
    if (c->tls)
        http_tls_shutdown(c->tls);
    shutdown(c->fd, SHUT_WR);
    c->state = C_LINGER;
    c->deadline = now_ms(c) + LINGER_MS;
    c->watching = 0;
    if (ev_io_modify(c->io, EV_READ) < 0) {
        conn_free(c);
        return;
    }
    c->watching = EV_READ;
}

/* Reads what the socket holds; 0 at the end of the stream, -EAGAIN with *want when it has
 * nothing. */
static ssize_t conn_recv(struct http_conn *c, void *buf, size_t n, uint32_t *want)
{
    if (c->tls)
        return http_tls_read(c->tls, buf, n, want);
    ssize_t r = read(c->fd, buf, n);
    if (r >= 0)
        return r;
    *want = EV_READ;
    return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : negative_errno();
}

static void conn_process(struct http_conn *c);
static bool conn_send_more(struct http_conn *c);

/* ---- responses ---- */

static int add_date(struct strbuf *sb)
{
    static const char days[][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t t = time(NULL);
    struct tm tm;
    if (!gmtime_r(&t, &tm))
        return 0;
    return strbuf_addf(sb, "Date: %s, %02d %s %04d %02d:%02d:%02d GMT\r\n", days[tm.tm_wday % 7],
                       tm.tm_mday, months[tm.tm_mon % 12], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
                       tm.tm_sec);
}

/* Queues the response (head, and body unless HEAD) and starts sending it. extra: more header
 * lines, each ending in CRLF, or NULL. */
static int respond(struct http_request *req, int status, const char *ctype, struct http_body *body,
                   const char *extra)
{
    struct http_conn *c = req->conn;
    if (req->answered)
        return -EALREADY;
    req->answered = true;
    size_t len = 0;
    const char *data = http_body_data(body, &len);
    bool gz = false, vary = len >= GZIP_MIN;
    if (req->head.gzip && len >= GZIP_MIN && http_body_gzip(body, NULL) >= 0) {
        data = http_body_gzip_data(body, &len);
        gz = true;
    }
    bool head_only = req->head.method && strcmp(req->head.method, "HEAD") == 0;
    struct strbuf *o = &c->out;
    strbuf_reset(o);
    int r = strbuf_addf(o, "HTTP/1.1 %d %s\r\n", status, http_status_reason(status));
    if (r >= 0)
        r = add_date(o);
    if (r >= 0 && ctype)
        r = strbuf_addf(o, "Content-Type: %s\r\n", ctype);
    if (r >= 0 && gz)
        r = strbuf_addstr(o, "Content-Encoding: gzip\r\n");
    if (r >= 0 && vary)
        r = strbuf_addstr(o, "Vary: Accept-Encoding\r\n");
    if (r >= 0 && extra)
        r = strbuf_addstr(o, extra);
    if (r >= 0 && c->srv->web && c->srv->web->headers)
        r = strbuf_addstr(o, c->srv->web->headers);
    if (r >= 0)
        r = strbuf_addf(o, "Content-Length: %zu\r\n", len);
    if (r >= 0 && c->close_after)
        r = strbuf_addstr(o, "Connection: close\r\n");
    else if (r >= 0 && req->head.minor == 0)
        r = strbuf_addstr(o, "Connection: keep-alive\r\n");
    if (r >= 0)
        r = strbuf_add(o, "\r\n", 2);
    if (r < 0) {
        c->close_after = true;
        return r;
    }
    c->out_off = 0;
    c->body = head_only ? NULL : http_body_ref(body);
    c->send = head_only ? NULL : data;
    c->send_len = head_only ? 0 : len;
    c->send_off = 0;
    c->state = C_WRITE;
    c->deadline = now_ms(c) + c->srv->lim.write_timeout_ms;
    return 0;
}

int http_respond_body(struct http_request *req, int status, const char *content_type,
                      struct http_body *body)
{
    return respond(req, status, content_type, body, NULL);
}

int http_respond(struct http_request *req, int status, const char *content_type, const void *body,
                 size_t len)
{
    _cleanup_(http_body_unrefp) struct http_body *b = NULL;
    if (req->answered)
        return -EALREADY;
    int r = http_body_new(body, len, &b);
    return r < 0 ? r : respond(req, status, content_type, b, NULL);
}

/* An answer of the server's own: "404 Not Found\n" as text. */
static void respond_plain(struct http_request *req, int status, const char *extra)
{
    char text[96];
    int n = snprintf(text, sizeof(text), "%d %s\n", status, http_status_reason(status));
    _cleanup_(http_body_unrefp) struct http_body *b = NULL;
    if (http_body_new(text, (size_t)n, &b) < 0 ||
        respond(req, status, "text/plain; charset=utf-8", b, extra) < 0)
        req->conn->close_after = true;
}

/* ---- requests ---- */

const char *http_request_method(const struct http_request *req)
{
    return req->head.method;
}

const char *http_request_path(const struct http_request *req)
{
    return req->head.path;
}

const char *http_request_query(const struct http_request *req)
{
    return req->head.query;
}

const char *http_request_header(const struct http_request *req, const char *name)
{
    return http_head_get(&req->head, name);
}

const char *http_request_user(const struct http_request *req)
{
    return req->user;
}

static const struct route *find_route(const struct http_server *srv, const char *path)
{
    for (size_t i = 0; i < srv->n_routes; i++)
        if (strcmp(srv->routes[i].path, path) == 0)
            return &srv->routes[i];
    return NULL;
}

/* Answers a request that passed authentication. */
static void conn_answer(struct http_request *req)
{
    struct http_conn *c = req->conn;
    const struct http_head *h = &req->head;
    bool get = strcmp(h->method, "GET") == 0, head = strcmp(h->method, "HEAD") == 0;
    if (!get && !head) {
        if (h->has_body)
            c->close_after = true;
        respond_plain(req, 405, "Allow: GET, HEAD\r\n");
    } else if (h->has_body) {
        c->close_after = true; /* the body is not read: the connection cannot be reused */
        respond_plain(req, 400, NULL);
    } else if (h->path[0] != '/') {
        respond_plain(req, 400, NULL);
    } else {
        const struct route *rt = find_route(c->srv, h->path);
        if (!rt) {
            respond_plain(req, 404, NULL);
        } else {
            rt->fn(req, rt->userdata);
            if (!req->answered)
                respond_plain(req, 500, NULL);
        }
    }
}

static void refuse_auth(struct http_request *req)
{
    if (req->head.has_body)
        req->conn->close_after = true;
    respond_plain(req, 401, "WWW-Authenticate: Basic\r\n");
}

static int auth_work(void *userdata)
{
    struct auth_job *j = userdata;
    const char *password = j->creds + strlen(j->creds) + 1;
    j->ok = http_bcrypt_matches(password, j->hash) && j->known;
    return 0;
}

static void auth_job_free(struct auth_job *j)
{
    explicit_bzero(j->creds, sizeof(j->creds));
    free(j);
}

static void auth_done(int result, void *userdata)
{
    struct auth_job *j = userdata;
    struct http_conn *c = j->conn;
    if (!c) {
        auth_job_free(j);
        return;
    }
    c->auth = NULL;
    struct http_request req = {.conn = c, .head = j->head};
    bool ok = result == 0 && j->ok;
    if (ok) {
        http_web_config_remember(c->srv->web, j->key);
        req.user = j->creds;
        conn_answer(&req);
    } else {
        refuse_auth(&req);
    }
    auth_job_free(j);
    c->state = C_WRITE;
    if (conn_send_more(c))
        conn_process(c);
}

/* Authorization: Basic base64(user ":" password). 1: let in (req->user set, pointing into buf);
 * 0: refused; 2: a bcrypt is running for it (the connection waits in C_AUTH). */
static int authenticate(struct http_request *req, char *buf, size_t n)
{
    struct http_conn *c = req->conn;
    struct http_server *srv = c->srv;
    const char *v = http_head_get(&req->head, "Authorization");
    if (!v || strncasecmp(v, "Basic ", 6) != 0)
        return 0;
    v += 6;
    while (*v == ' ')
        v++;
    size_t len;
    if (http_base64_decode(v, buf, n, &len) < 0 || strlen(buf) != len)
        return 0;
    char *colon = strchr(buf, ':');
    if (!colon)
        return 0;
    *colon = '\0';
    const char *hash = NULL;
    uint64_t key = 0;
    bool known = false;
    if (http_web_config_lookup(srv->web, buf, colon + 1, &hash, &key, &known) == 1) {
        req->user = buf;
        return 1;
    }
    struct auth_job *j = srv->pool ? calloc(1, sizeof(*j)) : NULL;
    if (!j) /* no worker: check here */
        return http_bcrypt_matches(colon + 1, hash) && known
                   ? (http_web_config_remember(srv->web, key), req->user = buf, 1)
                   : 0;
    *j = (struct auth_job){.conn = c, .head = req->head, .hash = hash, .key = key, .known = known};
    memcpy(j->creds, buf, len + 1);
    j->creds_len = len;
    if (ev_work_submit(srv->pool, auth_work, auth_done, j) < 0) {
        auth_job_free(j);
        return 0;
    }
    c->auth = j;
    c->state = C_AUTH;
    c->deadline = now_ms(c) + c->srv->lim.write_timeout_ms;
    return 2;
}

/* Answers the complete head of head_len bytes at the start of c->in. True when the answer waits
 * for a bcrypt on the worker pool. */
static bool conn_dispatch(struct http_conn *c, size_t head_len)
{
    struct http_server *srv = c->srv;
    struct http_request req = {.conn = c};
    char creds[512];
    c->head_len = head_len;
    if (++c->requests >= srv->lim.max_requests)
        c->close_after = true;
    int status = http_head_parse(c->in, head_len, srv->lim.max_uri, &req.head);
    if (status) {
        c->close_after = true;
        respond_plain(&req, status, NULL);
        return false;
    }
    if (req.head.close)
        c->close_after = true;
    int a = http_web_config_has_auth(srv->web) ? authenticate(&req, creds, sizeof(creds)) : 1;
    if (a == 2) {
        explicit_bzero(creds, sizeof(creds));
        conn_watch(c, 0);
        return true;
    }
    if (a == 1)
        conn_answer(&req);
    else
        refuse_auth(&req);
    explicit_bzero(creds, sizeof(creds));
    return false;
}

/* After a response: drop its request, then close or wait for the next one. True when the
 * connection is ready for its next request. */
static bool conn_finish(struct http_conn *c)
{
    c->body = http_body_unref(c->body);
    c->send = NULL;
    strbuf_release(&c->out);
    memmove(c->in, c->in + c->head_len, c->in_len - c->head_len);
    c->in_len -= c->head_len;
    c->head_len = 0;
    if (c->close_after) {
        conn_linger(c);
        return false;
    }
    c->state = C_READ;
    const struct http_limits *l = &c->srv->lim;
    c->deadline = now_ms(c) + (c->in_len ? l->head_timeout_ms : l->idle_timeout_ms);
    return true;
}

/* Sends what the socket takes. True when the response is done and the connection is ready for
 * its next request; false when it waits for the socket, lingers or was freed. */
static bool conn_send_more(struct http_conn *c)
{
    for (;;) {
        size_t head_left = c->out.len - c->out_off, body_left = c->send_len - c->send_off;
        if (!head_left && !body_left)
            return conn_finish(c);
        ssize_t n;
        uint32_t want = EV_WRITE;
        if (c->tls) {
            n = head_left ? http_tls_write(c->tls, c->out.buf + c->out_off, head_left, &want)
                          : http_tls_write(c->tls, c->send + c->send_off, body_left, &want);
        } else {
            struct iovec iov[2];
            int k = 0;
            if (head_left)
                iov[k++] = (struct iovec){c->out.buf + c->out_off, head_left};
            if (body_left)
                iov[k++] = (struct iovec){(void *)(c->send + c->send_off), body_left};
            n = writev(c->fd, iov, k);
            if (n < 0)
                n = errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : negative_errno();
        }
        if (n == -EAGAIN) {
            conn_watch(c, want);
            return false;
        }
        if (n < 0) {
            conn_free(c);
            return false;
        }
        size_t done = (size_t)n;
        size_t h = done < head_left ? done : head_left;
        c->out_off += h;
        c->send_off += done - h;
        c->deadline = now_ms(c) + c->srv->lim.write_timeout_ms;
    }
}

/* Answers every complete request in the buffer, then reads for more. */
static void conn_process(struct http_conn *c)
{
    const struct http_limits *l = &c->srv->lim;
    for (;;) {
        /* empty lines between requests are ignored (RFC 9112 2.2) */
        size_t skip = 0;
        while (skip < c->in_len && (c->in[skip] == '\r' || c->in[skip] == '\n'))
            skip++;
        if (skip) {
            memmove(c->in, c->in + skip, c->in_len - skip);
            c->in_len -= skip;
        }
        size_t end = http_head_end(c->in, c->in_len);
        if (end) {
            if (conn_dispatch(c, end))
                return; /* answered when the bcrypt is done */
            if (!conn_send_more(c))
                return;
            continue; /* a pipelined request may be in the buffer already */
        }
        if (c->in_len >= l->max_head) {
            struct http_request req = {.conn = c};
            c->close_after = true;
            c->head_len = c->in_len;
            respond_plain(&req, 431, NULL);
            (void)conn_send_more(c); /* closes after */
            return;
        }
        uint32_t want = EV_READ;
        size_t before = c->in_len;
        ssize_t n = conn_recv(c, c->in + c->in_len, l->max_head - c->in_len, &want);
        if (n == -EAGAIN) {
            conn_watch(c, want);
            return;
        }
        if (n <= 0) { /* the client closed, or the connection failed */
            conn_free(c);
            return;
        }
        c->in_len += (size_t)n;
        if (before == 0)
            c->deadline = now_ms(c) + l->head_timeout_ms;
    }
}

static void conn_handshake(struct http_conn *c)
{
    uint32_t want = EV_READ;
    int r = http_tls_handshake(c->tls, &want);
    if (r == -EAGAIN) {
        conn_watch(c, want);
        return;
    }
    if (r < 0) {
        conn_free(c);
        return;
    }
    c->state = C_READ;
    c->deadline = now_ms(c) + c->srv->lim.idle_timeout_ms;
    conn_process(c);
}

static void conn_drain(struct http_conn *c)
{
    char scratch[4096];
    for (int i = 0; i < 16; i++) {
        ssize_t n = read(c->fd, scratch, sizeof(scratch));
        if (n > 0)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        break;
    }
    conn_free(c);
}

static void on_conn(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    struct http_conn *c = userdata;
    (void)io;
    (void)fd;
    (void)revents;
    switch (c->state) {
    case C_HANDSHAKE:
        conn_handshake(c);
        break;
    case C_READ:
        conn_process(c);
        break;
    case C_AUTH:
        break; /* not watched */
    case C_WRITE:
        if (conn_send_more(c))
            conn_process(c);
        break;
    case C_LINGER:
        conn_drain(c);
        break;
    }
}

/* ---- the listening socket ---- */

static void conn_start(struct http_server *srv, int fd)
{
    struct http_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        close(fd);
        return;
    }
    c->srv = srv;
    c->fd = fd;
    strbuf_init(&c->out, 1 << 20);
    c->in = malloc(srv->lim.max_head);
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->n_conns++;
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (!c->in || ev_io_add(srv->loop, fd, EV_READ, on_conn, c, &c->io) < 0 ||
        (srv->tls && http_tls_conn_new(srv->tls, fd, &c->tls) < 0)) {
        conn_free(c);
        return;
    }
    c->watching = EV_READ;
    if (srv->tls) {
        c->state = C_HANDSHAKE;
        c->deadline = ev_loop_now_ms(srv->loop) + srv->lim.head_timeout_ms;
        return;
    }
    c->state = C_READ;
    c->deadline = ev_loop_now_ms(srv->loop) + srv->lim.idle_timeout_ms;
}

static void stop_accepting(struct http_server *srv)
{
    if (srv->accepting && ev_io_modify(srv->io, 0) >= 0)
        srv->accepting = false;
}

static void on_listen(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    struct http_server *srv = userdata;
    (void)io;
    (void)revents;
    while (srv->n_conns < srv->lim.max_conns) {
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                stop_accepting(srv); /* the sweep tries again */
            return;
        }
        conn_start(srv, cfd);
    }
    stop_accepting(srv);
}

static void on_sweep(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct http_server *srv = userdata;
    (void)t;
    (void)expirations;
    uint64_t now = ev_loop_now_ms(srv->loop);
    struct http_conn *next;
    for (struct http_conn *c = srv->conns; c; c = next) {
        next = c->next;
        if (now >= c->deadline)
            conn_free(c);
    }
    if (!srv->accepting && srv->n_conns < srv->lim.max_conns && ev_io_modify(srv->io, EV_READ) >= 0)
        srv->accepting = true;
}

/* dcgm-exporter's (Go's) address: [host]:port, host may be empty, a name, an IPv4 address or an
 * IPv6 address in brackets. */
static int split_address(const char *address, char *host, size_t host_size, char *port,
                         size_t port_size, uint16_t *ret_port)
{
    const char *colon;
    const char *h = address;
    size_t hl;
    if (address[0] == '[') {
        const char *close = strchr(address, ']');
        if (!close || close[1] != ':')
            return -EINVAL;
        h = address + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(address, ':');
        if (!colon || memchr(address, ':', (size_t)(colon - address)))
            return -EINVAL; /* an IPv6 address needs brackets */
        hl = (size_t)(colon - address);
    }
    const char *p = colon + 1;
    size_t pl = strlen(p);
    if (pl == 0 || pl > 5 || hl >= host_size || pl >= port_size)
        return -EINVAL;
    unsigned long v = 0;
    for (size_t i = 0; i < pl; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -EINVAL;
        v = v * 10 + (unsigned long)(p[i] - '0');
    }
    if (v > 65535)
        return -EINVAL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    memcpy(port, p, pl + 1);
    *ret_port = (uint16_t)v;
    return 0;
}

static int listen_on(const struct sockaddr *sa, socklen_t len, bool dual_stack)
{
    _cleanup_close_ int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return negative_errno();
    int one = 1, zero = 0;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
        return negative_errno();
    if (dual_stack && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) < 0)
        return negative_errno();
    if (bind(fd, sa, len) < 0 || listen(fd, 128) < 0)
        return negative_errno();
    return TAKE_FD(fd);
}

static int open_listener(const char *address, struct diag *d, int *ret_fd)
{
    char host[256], port[8];
    uint16_t pn;
    if (split_address(address, host, sizeof(host), port, sizeof(port), &pn) < 0)
        return diag_fail(d, -EINVAL,
                         "listen address \"%s\": expected [host]:port (\":9400\", "
                         "\"127.0.0.1:9400\", \"[::1]:9400\")",
                         address);
    int fd;
    if (!host[0]) {
        /* every address: one IPv6 socket that takes IPv4 too, else IPv4 alone */
        struct sockaddr_in6 a6 = {
            .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT, .sin6_port = htons(pn)};
        fd = listen_on((struct sockaddr *)&a6, sizeof(a6), true);
        if (fd == -EAFNOSUPPORT || fd == -EADDRNOTAVAIL) {
            struct sockaddr_in a4 = {
                .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY), .sin_port = htons(pn)};
            fd = listen_on((struct sockaddr *)&a4, sizeof(a4), false);
        }
    } else {
        struct addrinfo hints = {.ai_family = AF_UNSPEC,
                                 .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
        struct addrinfo *ai = NULL;
        int g = getaddrinfo(host, port, &hints, &ai);
        if (g != 0)
            return diag_fail(d, -EADDRNOTAVAIL, "listen address \"%s\": %s", address,
                             gai_strerror(g));
        fd = -EADDRNOTAVAIL;
        for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next)
            fd = listen_on(a->ai_addr, a->ai_addrlen, false);
        freeaddrinfo(ai);
    }
    if (fd < 0)
        return diag_fail(d, fd, "listen on %s: %s", address, strerror(-fd));
    *ret_fd = fd;
    return 0;
}

/* ---- the server ---- */

struct http_server *http_server_free(struct http_server *srv)
{
    if (!srv)
        return NULL;
    while (srv->conns)
        conn_free(srv->conns);
    srv->pool = ev_work_pool_free(srv->pool); /* waits for a running bcrypt */
    srv->io = ev_io_del(srv->io);
    srv->sweep = ev_timer_del(srv->sweep);
    if (srv->fd >= 0)
        close(srv->fd);
    http_tls_free(srv->tls);
    for (size_t i = 0; i < srv->n_routes; i++)
        free(srv->routes[i].path);
    free(srv->routes);
    free(srv);
    return NULL;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

int http_server_new(struct ev_loop *loop, const char *address, struct http_web_config *web,
                    const struct http_limits *limits, struct diag *d, struct http_server **ret)
{
    _cleanup_(http_server_freep) struct http_server *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return -ENOMEM;
    srv->fd = -1;
    srv->loop = loop;
    srv->web = web;
    srv->lim = default_limits;
    if (limits) {
#define TAKE(f)                                                                                    \
    if (limits->f)                                                                                 \
        srv->lim.f = limits->f;
        TAKE(max_head)
        TAKE(max_uri)
        TAKE(max_conns)
        TAKE(max_requests)
        TAKE(idle_timeout_ms)
        TAKE(head_timeout_ms)
        TAKE(write_timeout_ms)
#undef TAKE
    }
    if (srv->lim.max_head < 64)
        return diag_fail(d, -EINVAL, "max_head below 64 bytes");
    int r;
    if (http_web_config_has_tls(web)) {
        r = http_tls_new(&web->tls, d, &srv->tls);
        if (r < 0)
            return r;
    }
    if (http_web_config_has_auth(web)) {
        /* bcrypt takes tens of milliseconds: off the loop, so wrong passwords cannot stall it */
        r = ev_work_pool_new(loop, 2, &srv->pool);
        if (r < 0)
            return diag_fail(d, r, "worker threads: %s", strerror(-r));
    }
    r = open_listener(address, d, &srv->fd);
    if (r < 0)
        return r;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(srv->fd, (struct sockaddr *)&ss, &sl) < 0)
        return diag_fail(d, negative_errno(), "getsockname: %m");
    srv->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    r = ev_io_add(loop, srv->fd, EV_READ, on_listen, srv, &srv->io);
    if (r < 0)
        return diag_fail(d, r, "watch the listening socket: %s", strerror(-r));
    srv->accepting = true;
    uint64_t tick = min_u64(srv->lim.idle_timeout_ms,
                            min_u64(srv->lim.head_timeout_ms, srv->lim.write_timeout_ms)) /
                    4;
    tick = tick < 10 ? 10 : tick > 1000 ? 1000 : tick;
    r = ev_timer_add(loop, tick, tick, on_sweep, srv, &srv->sweep);
    if (r < 0)
        return diag_fail(d, r, "timer: %s", strerror(-r));
    *ret = TAKE_PTR(srv);
    return 0;
}

int http_server_route(struct http_server *srv, const char *path, http_handler_fn fn, void *userdata)
{
    if (!path || path[0] != '/' || !fn)
        return -EINVAL;
    if (find_route(srv, path))
        return -EEXIST;
    struct route *rs = realloc(srv->routes, (srv->n_routes + 1) * sizeof(*rs));
    if (!rs)
        return -ENOMEM;
    srv->routes = rs;
    char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    rs[srv->n_routes++] = (struct route){p, fn, userdata};
    return 0;
}

uint16_t http_server_port(const struct http_server *srv)
{
    return srv->port;
}

unsigned http_server_conns(const struct http_server *srv)
{
    return srv->n_conns;
}
