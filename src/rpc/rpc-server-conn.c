/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One server connection: a non-blocking unix socket and the nghttp2 server session behind it. Bytes
 * read are fed to nghttp2_session_mem_recv; what nghttp2 wants to send is pulled with
 * nghttp2_session_mem_send and written, and whatever the socket does not take waits in a small
 * buffer while EV_WRITE is watched. Nothing here blocks and nothing here frees a connection: a
 * broken or finished connection is marked dead and freed by the server's reaper.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "rpc-server-internal.h"

#define READ_CHUNK 16384
/* Reads per wake-up, so one busy connection cannot starve the others. */
#define READ_BATCH 8
/* Output gathered from nghttp2_session_mem_send before one write. */
#define OUT_BATCH ((size_t)64 << 10)
/* The unsent tail of one batch (OUT_BATCH plus at most one mem_send chunk); never more is
 * queued. */
#define OUT_CAP (OUT_BATCH + ((size_t)1 << 20))
/* The PING after the shutdown notice: its ACK tells the client has seen the notice. */
static const uint8_t shutdown_ping[8] = {'g', 'p', 'd', 'r', 'a', 'i', 'n', '!'};

void rpc_conn_kill(struct rpc_conn *conn)
{
    if (conn->dead)
        return;
    conn->dead = true;
    /* Not even hang-ups: the reaper closes the fd on the next iteration. */
    if (conn->io && ev_io_modify(conn->io, 0) == 0)
        conn->io_events = 0;
    rpc_server_reap_soon(conn->srv);
}

void rpc_conn_flush_soon(struct rpc_conn *conn)
{
    conn->flush_pending = true;
    if (conn->depth == 0)
        rpc_server_reap_soon(conn->srv);
}

/* Writes the queued tail; 0 also when the socket is full (the tail stays queued). */
static int conn_write_out(struct rpc_conn *conn)
{
    while (conn->out_off < conn->out.len) {
        ssize_t n = send(conn->fd, conn->out.buf + conn->out_off, conn->out.len - conn->out_off,
                         MSG_NOSIGNAL);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return 0;
            return negative_errno();
        }
        conn->out_off += (size_t)n;
    }
    strbuf_reset(&conn->out);
    conn->out_off = 0;
    return 0;
}

/* Gathers what nghttp2 has to send, frame after frame, up to OUT_BATCH bytes (plus one chunk), and
 * writes it with one send: a unary answer (HEADERS, DATA, trailers, and often a PING ACK or a
 * WINDOW_UPDATE) is one write, hence one wake-up of the peer, instead of one per frame. Output is
 * only gathered once the socket took everything before it. */
static int conn_send(struct rpc_conn *conn)
{
    for (;;) {
        int r = conn_write_out(conn);

        if (r < 0)
            return r;
        if (conn->out.len > 0)
            return 0;
        while (conn->out.len < OUT_BATCH) {
            const uint8_t *data = NULL;
            ssize_t n = nghttp2_session_mem_send(conn->session, &data);

            if (n < 0)
                return -EPROTO;
            if (n == 0)
                break;
            /* data lives until the next mem_send: copy it. */
            r = strbuf_add(&conn->out, data, (size_t)n);
            if (r < 0)
                return r;
        }
        if (conn->out.len == 0)
            return 0;
    }
}

static void conn_update_events(struct rpc_conn *conn)
{
    uint32_t events = EV_READ | (conn->out.len > 0 ? EV_WRITE : 0);

    if (events == conn->io_events)
        return;
    if (ev_io_modify(conn->io, events) < 0) {
        rpc_conn_kill(conn);
        return;
    }
    conn->io_events = events;
}

void rpc_conn_flush(struct rpc_conn *conn)
{
    int r;

    if (conn->dead || conn->depth > 0 || conn->srv->freeing)
        return;
    conn->flush_pending = false;
    conn->depth++;
    r = conn_send(conn);
    conn->depth--;
    if (r < 0 || conn->dead) {
        rpc_conn_kill(conn);
        return;
    }
    /* Both sides said goodbye (GOAWAY) and every stream is over, or nghttp2 gave up. */
    if (conn->out.len == 0 && !nghttp2_session_want_read(conn->session) &&
        !nghttp2_session_want_write(conn->session)) {
        rpc_conn_kill(conn);
        return;
    }
    conn_update_events(conn);
}

/* Returns false when the connection is done for (closed, error, garbage). */
static bool conn_read(struct rpc_conn *conn)
{
    uint8_t buf[READ_CHUNK];

    for (int i = 0; i < READ_BATCH; i++) {
        ssize_t n = read(conn->fd, buf, sizeof(buf)), rv;

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN;
        }
        if (n == 0)
            return false;
        conn->depth++;
        rv = nghttp2_session_mem_recv(conn->session, buf, (size_t)n);
        conn->depth--;
        if (rv < 0 || conn->dead)
            return false;
        if ((size_t)n < sizeof(buf))
            return true;
    }
    return true;
}

static void conn_io_cb(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    struct rpc_conn *conn = userdata;

    if (conn->dead)
        return;
    if ((revents & EV_WRITE) && conn_write_out(conn) < 0) {
        rpc_conn_kill(conn);
        return;
    }
    if ((revents & (EV_READ | EV_HUP | EV_ERROR)) && !conn_read(conn)) {
        log_debug(5, "rpc: connection closed", "fd", LOG_INT(fd));
        /* What the last bytes asked for still goes out: a peer that only shut down its writing
         * side reads it; for one that is gone the write just fails. */
        rpc_conn_flush(conn);
        rpc_conn_kill(conn);
        return;
    }
    rpc_conn_arm_deadlines(conn);
    rpc_conn_flush(conn);
}

static int conn_session_new(struct rpc_conn *conn)
{
    nghttp2_session_callbacks *cbs = NULL;
    nghttp2_option *opt = NULL;
    const struct rpc_server_options *o = &conn->srv->opts;
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, o->max_concurrent_streams},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
         o->max_header_list > UINT32_MAX ? UINT32_MAX : (uint32_t)o->max_header_list},
    };
    int rv;

    if (nghttp2_session_callbacks_new(&cbs) != 0)
        return -ENOMEM;
    if (nghttp2_option_new(&opt) != 0) {
        nghttp2_session_callbacks_del(cbs);
        return -ENOMEM;
    }
    rpc_call_set_callbacks(cbs);
    /* nghttp2's HTTP checks reject an :authority holding a socket path ("/run/x.sock"), which
     * grpc-go may send for a unix target, and a gRPC server must not judge it; the few request
     * rules gRPC needs are checked per call. */
    nghttp2_option_set_no_http_messaging(opt, 1);
    /* gRPC clients send no priorities: a closed stream need not be kept for the priority tree
     * (by default every finished call would be, and pruned again later). */
    nghttp2_option_set_no_closed_streams(opt, 1);
    rv = nghttp2_session_server_new2(&conn->session, cbs, conn, opt);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cbs);
    if (rv != 0)
        return -ENOMEM;
    rv = nghttp2_submit_settings(conn->session, NGHTTP2_FLAG_NONE, settings, ARRAY_SIZE(settings));
    return rv == 0 ? 0 : -EIO;
}

static void conn_link(struct rpc_conn *conn)
{
    struct rpc_server *srv = conn->srv;

    conn->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = conn;
    srv->conns = conn;
    srv->n_conns++;
}

static void conn_unlink(struct rpc_conn *conn)
{
    struct rpc_server *srv = conn->srv;

    if (conn->prev)
        conn->prev->next = conn->next;
    else
        srv->conns = conn->next;
    if (conn->next)
        conn->next->prev = conn->prev;
    conn->prev = conn->next = NULL;
    srv->n_conns--;
}

int rpc_conn_new(struct rpc_server *srv, int fd)
{
    struct rpc_conn *conn = calloc(1, sizeof(*conn));
    int r;

    if (!conn) {
        close(fd);
        return -ENOMEM;
    }
    conn->srv = srv;
    conn->fd = fd;
    strbuf_init(&conn->out, OUT_CAP);
    conn_link(conn);
    r = conn_session_new(conn);
    if (r >= 0)
        r = ev_io_add(srv->loop, fd, EV_READ, conn_io_cb, conn, &conn->io);
    if (r < 0) {
        conn->dead = true;
        rpc_conn_free(conn);
        return r;
    }
    conn->io_events = EV_READ;
    /* The server preface (our SETTINGS) goes out at once. */
    rpc_conn_flush(conn);
    return 0;
}

void rpc_conn_free(struct rpc_conn *conn)
{
    conn->dead = true;
    /* Each detach may run a cancel callback, which may finish other calls of this connection. */
    while (conn->calls)
        rpc_call_detach(conn->calls);
    nghttp2_session_del(conn->session);
    conn->io = ev_io_del(conn->io);
    if (conn->fd >= 0)
        close(conn->fd);
    strbuf_release(&conn->out);
    conn_unlink(conn);
    free(conn);
}

void rpc_conn_shutdown(struct rpc_conn *conn)
{
    struct rpc_call *call, *next;

    if (conn->dead || conn->notice_sent)
        return;
    conn->notice_sent = true;
    /* GOAWAY with the largest stream id first, and a PING: once its ACK is back the client has
     * seen the notice, and the final GOAWAY can name the last stream we really took. */
    if (nghttp2_submit_shutdown_notice(conn->session) != 0 ||
        nghttp2_submit_ping(conn->session, NGHTTP2_FLAG_NONE, shutdown_ping) != 0)
        rpc_conn_goaway_final(conn);
    /* Cancel callbacks may finish other calls; with depth raised nothing is sent (or freed)
     * while the list is walked. */
    conn->depth++;
    for (call = conn->calls; call; call = next) {
        next = call->next;
        if (call->held && call->method->server_streaming)
            rpc_call_abort(call, RPC_OK, NULL);
    }
    conn->depth--;
    rpc_conn_flush_soon(conn);
}

void rpc_conn_goaway_final(struct rpc_conn *conn)
{
    int32_t last = nghttp2_session_get_last_proc_stream_id(conn->session);

    if (conn->goaway_final)
        return;
    conn->goaway_final = true;
    if (nghttp2_submit_goaway(conn->session, NGHTTP2_FLAG_NONE, last, NGHTTP2_NO_ERROR, NULL, 0) !=
        0)
        rpc_conn_kill(conn);
    rpc_conn_flush_soon(conn);
}
