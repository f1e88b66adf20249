/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The server object: options, the method table, listening sockets and accepting, and the two ways
 * to stop (graceful shutdown and immediate free). Connections and calls live in their own files;
 * here they are only created, counted and reaped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rpc-server-internal.h"

#define DEFAULT_SOCKET_MODE 0600
#define DEFAULT_MAX_STREAMS 100
#define DEFAULT_MAX_HEADER_LIST ((size_t)16 << 10)
#define DEFAULT_MAX_CONNECTIONS 1024
/* Accepts per wake-up, so a flood of connects cannot starve the loop. */
#define ACCEPT_BATCH 32

static void reaper_cb(struct ev_timer *t, uint64_t expirations, void *userdata);

int rpc_server_new(struct ev_loop *loop, const struct rpc_server_options *opts,
                   struct rpc_server **ret)
{
    _cleanup_free_ struct rpc_server *srv = calloc(1, sizeof(*srv));
    int r;

    if (!srv)
        return -ENOMEM;
    srv->loop = loop;
    if (opts)
        srv->opts = *opts;
    if (srv->opts.socket_mode == 0)
        srv->opts.socket_mode = DEFAULT_SOCKET_MODE;
    if (srv->opts.max_recv_message == 0)
        srv->opts.max_recv_message = RPC_DEFAULT_MAX_RECV;
    if (srv->opts.max_send_message == 0)
        srv->opts.max_send_message = RPC_DEFAULT_MAX_SEND;
    if (srv->opts.max_concurrent_streams == 0)
        srv->opts.max_concurrent_streams = DEFAULT_MAX_STREAMS;
    if (srv->opts.max_header_list == 0)
        srv->opts.max_header_list = DEFAULT_MAX_HEADER_LIST;
    if (srv->opts.max_connections == 0)
        srv->opts.max_connections = DEFAULT_MAX_CONNECTIONS;
    if (srv->opts.max_recv_message > UINT32_MAX || srv->opts.max_send_message > UINT32_MAX)
        return -EINVAL;
    r = ev_timer_add(loop, 0, 0, reaper_cb, srv, &srv->reaper);
    if (r < 0)
        return r;
    r = ev_timer_disarm(srv->reaper);
    if (r < 0) {
        srv->reaper = ev_timer_del(srv->reaper);
        return r;
    }
    *ret = TAKE_PTR(srv);
    return 0;
}

int rpc_server_add_method(struct rpc_server *srv, const struct rpc_method *method)
{
    struct rpc_method **methods;
    struct rpc_method *m;

    if (!method->path || method->path[0] != '/' || !method->request || !method->response ||
        !method->handler)
        return -EINVAL;
    for (size_t i = 0; i < srv->n_methods; i++)
        if (strcmp(srv->methods[i]->path, method->path) == 0)
            return -EEXIST;
    methods = realloc(srv->methods, (srv->n_methods + 1) * sizeof(*methods));
    if (!methods)
        return -ENOMEM;
    srv->methods = methods;
    m = malloc(sizeof(*m));
    if (!m)
        return -ENOMEM;
    *m = *method;
    srv->methods[srv->n_methods++] = m;
    return 0;
}

const struct rpc_method *rpc_server_find_method(const struct rpc_server *srv, const char *path)
{
    for (size_t i = 0; i < srv->n_methods; i++)
        if (strcmp(srv->methods[i]->path, path) == 0)
            return srv->methods[i];
    return NULL;
}

bool rpc_server_has_service(const struct rpc_server *srv, const char *service, size_t len)
{
    for (size_t i = 0; i < srv->n_methods; i++) {
        const char *p = srv->methods[i]->path + 1;

        if (strncmp(p, service, len) == 0 && p[len] == '/')
            return true;
    }
    return false;
}

static void accept_cb(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    struct rpc_listener *l = userdata;
    struct rpc_server *srv = l->srv;

    for (int i = 0; i < ACCEPT_BATCH; i++) {
        int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

        if (cfd < 0) {
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                log_debug(4, "rpc: accept failed", "error", strerror(errno));
            return;
        }
        if (srv->n_conns >= srv->opts.max_connections) {
            log_debug(4, "rpc: connection limit reached, closing new connection");
            close(cfd);
            continue;
        }
        /* rpc_conn_new owns cfd from here, also on failure. */
        if (rpc_conn_new(srv, cfd) < 0)
            log_debug(4, "rpc: cannot set up connection");
    }
}

static struct rpc_listener *listener_free(struct rpc_listener *l)
{
    if (!l)
        return NULL;
    l->io = ev_io_del(l->io);
    if (l->fd >= 0) {
        close(l->fd);
        rpc_socket_remove(l->path, l->dev, l->ino);
    }
    free(l->path);
    free(l);
    return NULL;
}
DEFINE_POINTER_CLEANUP(struct rpc_listener, listener_free)

static int listeners_push(struct rpc_server *srv, struct rpc_listener *l)
{
    struct rpc_listener **ls = realloc(srv->listeners, (srv->n_listeners + 1) * sizeof(*ls));

    if (!ls)
        return -ENOMEM;
    srv->listeners = ls;
    srv->listeners[srv->n_listeners++] = l;
    return 0;
}

int rpc_server_listen(struct rpc_server *srv, const char *path, struct diag *d)
{
    _cleanup_(listener_freep) struct rpc_listener *l = NULL;
    int r;

    if (srv->shutting_down)
        return diag_fail(d, -ESHUTDOWN, "server is shutting down");
    l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->srv = srv;
    l->fd = -1;
    l->path = strdup(path);
    if (!l->path)
        return -ENOMEM;
    r = rpc_socket_listen(path, srv->opts.socket_mode, &l->fd, &l->dev, &l->ino, d);
    if (r < 0)
        return r;
    r = ev_io_add(srv->loop, l->fd, EV_READ, accept_cb, l, &l->io);
    if (r < 0)
        return diag_fail(d, r, "cannot watch %s", path);
    r = listeners_push(srv, l);
    if (r < 0)
        return r;
    TAKE_PTR(l);
    return 0;
}

static void listeners_close(struct rpc_server *srv)
{
    for (size_t i = 0; i < srv->n_listeners; i++)
        listener_free(srv->listeners[i]);
    free(srv->listeners);
    srv->listeners = NULL;
    srv->n_listeners = 0;
}

int rpc_server_adopt(struct rpc_server *srv, int fd)
{
    if (srv->shutting_down) {
        close(fd);
        return -ESHUTDOWN;
    }
    return rpc_conn_new(srv, fd);
}

void rpc_server_reap_soon(struct rpc_server *srv)
{
    if (srv->freeing)
        return;
    /* Arming an existing timer cannot fail short of a broken timerfd; the next reap then comes
     * with the next event on the connection. */
    if (ev_timer_set(srv->reaper, 0, 0) < 0)
        log_debug(4, "rpc: cannot arm the reaper");
}

static void reaper_cb(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct rpc_server *srv = userdata;
    struct rpc_conn *c, *next;

    /* Flushing never frees a connection, so the walk is safe. */
    for (c = srv->conns; c; c = next) {
        next = c->next;
        if (c->flush_pending)
            rpc_conn_flush(c);
    }
    /* Freeing one connection runs cancel callbacks that may kill another: look again each time. */
    for (;;) {
        for (c = srv->conns; c && !c->dead; c = c->next)
            ;
        if (!c)
            break;
        rpc_conn_free(c);
    }
    if (srv->shutting_down && srv->n_conns == 0 && srv->done) {
        void (*done)(void *) = srv->done;

        srv->done = NULL;
        done(srv->done_userdata);
    }
}

void rpc_server_shutdown(struct rpc_server *srv, void (*done)(void *userdata), void *userdata)
{
    struct rpc_conn *c, *next;

    srv->done = done;
    srv->done_userdata = userdata;
    if (srv->shutting_down) {
        rpc_server_reap_soon(srv);
        return;
    }
    srv->shutting_down = true;
    listeners_close(srv);
    for (c = srv->conns; c; c = next) {
        next = c->next;
        rpc_conn_shutdown(c);
    }
    rpc_server_reap_soon(srv);
}

struct rpc_server *rpc_server_free(struct rpc_server *srv)
{
    if (!srv)
        return NULL;
    srv->freeing = true;
    listeners_close(srv);
    for (struct rpc_conn *c = srv->conns; c; c = c->next)
        c->dead = true;
    while (srv->conns)
        rpc_conn_free(srv->conns);
    while (srv->orphans)
        rpc_call_free(srv->orphans);
    for (size_t i = 0; i < srv->n_methods; i++)
        free(srv->methods[i]);
    free(srv->methods);
    srv->reaper = ev_timer_del(srv->reaper);
    free(srv);
    return NULL;
}

size_t rpc_server_connections(const struct rpc_server *srv)
{
    return srv->n_conns;
}

size_t rpc_server_calls(const struct rpc_server *srv)
{
    return srv->n_calls;
}
