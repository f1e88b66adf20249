/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gRPC client: unary calls over one HTTP/2 connection (nghttp2, driven with mem_recv/mem_send
 * from the ev loop) to a unix socket. The connection is made once, without blocking, and is never
 * remade: when it fails, closes or is told to go away, every call on it ends UNAVAILABLE and so do
 * later ones, and the owner makes a new client (the kubelet restarting is a new socket anyway).
 *
 * Each call is one stream. Its outcome is decided in nghttp2's callbacks, the deadline timer or a
 * connection failure, but the caller's function never runs there: finished calls wait in a queue
 * that a zero-delay timer delivers from. That keeps callbacks out of rpc_client_call() and out of
 * nghttp2 (a callback may free the client), and since the queue belongs to the client,
 * rpc_client_free() can still deliver whatever is left before it returns, which a function handed
 * to ev_post() could not promise once the client is gone.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "rpc-client-internal.h"
#include "rpc-internal.h"

#define CONNECT_TIMEOUT_DEFAULT_MS 5000u
/* A unix socket whose listen backlog is full answers EAGAIN and must be asked again. */
#define CONNECT_RETRY_MS 20u
#define MAX_CALLS 4096u
#define READ_CHUNK 16384
/* Reads per wake-up before the loop gets a turn (the fd is level-triggered, nothing is lost). */
#define READS_PER_WAKEUP 16
#define STREAM_WINDOW (1u << 20)
#define CONNECTION_WINDOW (4 << 20)
#define RESPONSE_HEADER_CAP ((size_t)64 << 10)

enum conn_state {
    CONN_CONNECTING,
    CONN_OPEN,
    CONN_CLOSED,
};

struct client_call {
    struct client_call *prev, *next; /* in client->calls, then (next only) in the done queue */
    struct rpc_client *client;
    int32_t stream_id;
    bool headers_sent; /* our HEADERS went out: the stream exists on the server */
    bool got_response; /* the response headers (not trailers) were handled */
    bool remote_ended; /* a frame with END_STREAM arrived (nghttp2 closes its side after) */
    uint32_t timeout_ms;
    const ProtobufCMessageDescriptor *response_type;
    rpc_reply_fn fn;
    rpc_reply_take_fn take_fn;
    void *userdata;
    uint64_t deadline_ms; /* CLOCK_MONOTONIC; 0: none */
    struct rpc_outbuf request;
    struct rpc_msg_reader reader;
    struct rpc_header_list headers;
    unsigned n_messages;
    ProtobufCMessage *response;
    struct rpc_status status;
};

struct rpc_client {
    struct ev_loop *loop;
    char *path;
    uint32_t connect_timeout_ms;
    size_t max_recv_message;
    enum conn_state state;
    int fd;
    struct ev_io *io;
    uint32_t io_events;
    struct ev_timer *connect_timer;
    struct ev_timer *retry_timer;
    struct ev_timer *deliver_timer;
    struct ev_timer *deadline_timer; /* one for all calls: at the earliest deadline */
    nghttp2_session *session;
    bool ready;  /* the server's SETTINGS arrived */
    bool goaway; /* no new streams on this connection */
    bool freeing;
    bool delivering; /* a callback that frees the client then leaves the last free() to delivery */
    struct client_call *calls;
    size_t n_calls;
    struct client_call *done_head, *done_tail;
    uint8_t *out; /* what a short write left of nghttp2's last chunk */
    size_t out_len, out_off;
    char reason[RPC_STATUS_MESSAGE_MAX]; /* why new calls fail, once closed */
};

/* ---- calls ---- */

static struct client_call *call_free(struct client_call *c)
{
    if (!c)
        return NULL;
    rpc_outbuf_release(&c->request);
    rpc_msg_reader_release(&c->reader);
    rpc_header_list_release(&c->headers);
    if (c->response)
        protobuf_c_message_free_unpacked(c->response, NULL);
    free(c);
    return NULL;
}
DEFINE_POINTER_CLEANUP(struct client_call, call_free)

static struct client_call *call_find(struct rpc_client *cl, int32_t stream_id)
{
    if (stream_id <= 0)
        return NULL;
    for (struct client_call *c = cl->calls; c; c = c->next)
        if (c->stream_id == stream_id)
            return c;
    return NULL;
}

static void call_link(struct rpc_client *cl, struct client_call *c)
{
    c->prev = NULL;
    c->next = cl->calls;
    if (cl->calls)
        cl->calls->prev = c;
    cl->calls = c;
    cl->n_calls++;
}

static void call_unlink(struct rpc_client *cl, struct client_call *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        cl->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    cl->n_calls--;
}

static void done_push(struct rpc_client *cl, struct client_call *c)
{
    int r;

    c->next = NULL;
    if (cl->done_tail)
        cl->done_tail->next = c;
    else
        cl->done_head = c;
    cl->done_tail = c;
    /* Only fails if timerfd_settime does; rpc_client_free() would still deliver. */
    r = ev_timer_set(cl->deliver_timer, 0, 0);
    (void)r;
}

static struct client_call *done_pop(struct rpc_client *cl)
{
    struct client_call *c = cl->done_head;

    if (c) {
        cl->done_head = c->next;
        if (!cl->done_head)
            cl->done_tail = NULL;
        c->next = NULL;
    }
    return c;
}

/*
 * Decides the call's outcome and moves it to the done queue: it leaves the stream (later frames for
 * it are ignored) and drops its buffers now rather than at delivery. Never runs the callback.
 */
static void call_complete_v(struct client_call *c, enum rpc_code code, const char *fmt, va_list ap)
    _printf_(3, 0);
static void call_complete_v(struct client_call *c, enum rpc_code code, const char *fmt, va_list ap)
{
    struct rpc_client *cl = c->client;

    c->status.code = code;
    vsnprintf(c->status.message, sizeof(c->status.message), fmt, ap);
    if (code != RPC_OK && c->response)
        c->response = (protobuf_c_message_free_unpacked(c->response, NULL), NULL);
    c->deadline_ms = 0;
    rpc_outbuf_release(&c->request);
    rpc_msg_reader_release(&c->reader);
    rpc_header_list_release(&c->headers);
    call_unlink(cl, c);
    done_push(cl, c);
}

static void call_complete(struct client_call *c, enum rpc_code code, const char *fmt, ...)
    _printf_(3, 4);
static void call_complete(struct client_call *c, enum rpc_code code, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    call_complete_v(c, code, fmt, ap);
    va_end(ap);
}

/* True while the stream exists or its HEADERS still wait in nghttp2's queue: then a RST_STREAM
 * ends it (or cancels the pending request); for a stream already closed it would be a stray frame.
 */
static bool call_stream_open(const struct client_call *c)
{
    nghttp2_session *s = c->client->session;

    if (!s || c->stream_id <= 0)
        return false;
    if (!c->headers_sent)
        return true;
    if (nghttp2_session_get_stream_local_close(s, c->stream_id) == 0)
        return true;
    return !c->remote_ended && nghttp2_session_get_stream_remote_close(s, c->stream_id) == 0;
}

/* Completes the call and resets its stream with error_code if the stream is still open. */
static void call_abort(struct client_call *c, uint32_t error_code, enum rpc_code code,
                       const char *fmt, ...) _printf_(4, 5);
static void call_abort(struct client_call *c, uint32_t error_code, enum rpc_code code,
                       const char *fmt, ...)
{
    va_list ap;

    if (call_stream_open(c))
        (void)nghttp2_submit_rst_stream(c->client->session, NGHTTP2_FLAG_NONE, c->stream_id,
                                        error_code);
    va_start(ap, fmt);
    call_complete_v(c, code, fmt, ap);
    va_end(ap);
}

/* Runs the caller's function for a finished call and frees it. */
static void call_deliver(struct client_call *c)
{
    if (c->take_fn)
        c->take_fn(&c->status, TAKE_PTR(c->response), c->userdata);
    else
        c->fn(&c->status, c->response, c->userdata);
    call_free(c);
}

static void deliver_cb(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct rpc_client *cl = userdata;

    cl->delivering = true;
    for (struct client_call *c; !cl->freeing && (c = done_pop(cl));)
        call_deliver(c);
    cl->delivering = false;
    if (cl->freeing)
        free(cl);
}

/* ---- the connection ---- */

static void conn_release(struct rpc_client *cl)
{
    cl->io = ev_io_del(cl->io);
    if (cl->fd >= 0)
        close(cl->fd);
    cl->fd = -1;
    cl->connect_timer = ev_timer_del(cl->connect_timer);
    cl->retry_timer = ev_timer_del(cl->retry_timer);
    if (cl->session)
        nghttp2_session_del(cl->session);
    cl->session = NULL;
    cl->out = (free(cl->out), NULL);
    cl->out_len = cl->out_off = 0;
}

/*
 * Closes the connection for good: every call in flight ends UNAVAILABLE with the reason, which
 * later calls get too. Not from inside nghttp2's callbacks (it deletes the session).
 */
static void conn_fail(struct rpc_client *cl, const char *fmt, ...) _printf_(2, 3);
static void conn_fail(struct rpc_client *cl, const char *fmt, ...)
{
    va_list ap;

    if (cl->state == CONN_CLOSED)
        return;
    va_start(ap, fmt);
    vsnprintf(cl->reason, sizeof(cl->reason), fmt, ap);
    va_end(ap);
    cl->state = CONN_CLOSED;
    log_debug(4, "rpc client connection closed", "socket", cl->path, "reason", cl->reason);
    while (cl->calls)
        call_complete(cl->calls, RPC_UNAVAILABLE, "%s", cl->reason);
    conn_release(cl);
}

static int io_update(struct rpc_client *cl)
{
    uint32_t events = EV_READ;

    if (cl->out_off < cl->out_len)
        events |= EV_WRITE;
    if (events == cl->io_events)
        return 0;
    cl->io_events = events;
    return ev_io_modify(cl->io, events);
}

/* Keeps what a short write left; nghttp2's buffer is only valid until its next mem_send. */
static int out_keep(struct rpc_client *cl, const uint8_t *data, size_t len)
{
    uint8_t *copy = malloc(len);

    if (!copy)
        return -ENOMEM;
    memcpy(copy, data, len);
    free(cl->out);
    cl->out = copy;
    cl->out_len = len;
    cl->out_off = 0;
    return 0;
}

/* Writes what it can; returns the bytes written (0 when the socket is full) or -errno. */
static ssize_t sock_write(int fd, const uint8_t *data, size_t len)
{
    for (;;) {
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        return -errno;
    }
}

/* Writes the leftover, then what nghttp2 has, until the socket is full or nothing is left. */
static int conn_flush(struct rpc_client *cl)
{
    const uint8_t *data;
    ssize_t n, w;

    while (cl->out_off < cl->out_len) {
        w = sock_write(cl->fd, cl->out + cl->out_off, cl->out_len - cl->out_off);
        if (w <= 0)
            return w < 0 ? (int)w : io_update(cl);
        cl->out_off += (size_t)w;
    }
    cl->out = (free(cl->out), NULL);
    cl->out_len = cl->out_off = 0;
    for (;;) {
        n = nghttp2_session_mem_send(cl->session, &data);
        if (n < 0)
            return -EPROTO;
        if (n == 0)
            break;
        w = sock_write(cl->fd, data, (size_t)n);
        if (w < 0)
            return (int)w;
        if (w < n) {
            int r = out_keep(cl, data + w, (size_t)(n - w));
            if (r < 0)
                return r;
            break;
        }
    }
    return io_update(cl);
}

/* Sends what is pending; a write error closes the connection. */
static void conn_send(struct rpc_client *cl)
{
    int r;

    if (cl->state != CONN_OPEN)
        return;
    r = conn_flush(cl);
    if (r < 0)
        conn_fail(cl, "write to %s: %s", cl->path, strerror(-r));
}

/* After GOAWAY the connection is of no more use once its last call is done; nghttp2 also says
 * when the session is over (it sent or got a GOAWAY for a connection error). */
static void conn_close_if_done(struct rpc_client *cl)
{
    if (cl->state != CONN_OPEN)
        return;
    if (cl->goaway && cl->n_calls == 0)
        conn_fail(cl, "connection to %s: the server sent GOAWAY", cl->path);
    else if (!nghttp2_session_want_read(cl->session) && !nghttp2_session_want_write(cl->session))
        conn_fail(cl, "connection to %s: HTTP/2 session ended", cl->path);
}

/* Feeds what the socket has to nghttp2. -EPIPE when the connection was closed here. */
static int conn_read(struct rpc_client *cl)
{
    uint8_t buf[READ_CHUNK];

    for (int i = 0; i < READS_PER_WAKEUP; i++) {
        ssize_t n = read(cl->fd, buf, sizeof(buf)), rv;

        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            conn_fail(cl, "read from %s: %s", cl->path, strerror(errno));
            return -EPIPE;
        }
        if (n == 0) {
            conn_fail(cl, "connection to %s closed by the server", cl->path);
            return -EPIPE;
        }
        rv = nghttp2_session_mem_recv(cl->session, buf, (size_t)n);
        if (rv < 0) {
            conn_fail(cl, "connection to %s: HTTP/2 error: %s", cl->path,
                      nghttp2_strerror((int)rv));
            return -EPIPE;
        }
        if ((size_t)n < sizeof(buf))
            return 0;
    }
    return 0;
}

static void conn_established(struct rpc_client *cl)
{
    cl->state = CONN_OPEN;
    cl->io_events = EV_READ;
    if (ev_io_modify(cl->io, EV_READ) < 0) {
        conn_fail(cl, "connect to %s: cannot watch the socket", cl->path);
        return;
    }
    conn_send(cl);
}

/* The non-blocking connect finished (EINPROGRESS, then writable): did it work? */
static void conn_check_connect(struct rpc_client *cl)
{
    int err = 0;
    socklen_t len = sizeof(err);

    if (getsockopt(cl->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    if (err != 0)
        conn_fail(cl, "connect to %s: %s", cl->path, strerror(err));
    else
        conn_established(cl);
}

static void io_cb(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    struct rpc_client *cl = userdata;

    if (cl->state == CONN_CONNECTING) {
        conn_check_connect(cl);
        return;
    }
    if ((revents & (EV_READ | EV_HUP | EV_ERROR)) && conn_read(cl) < 0)
        return;
    conn_send(cl);
    conn_close_if_done(cl);
}

static void connect_timeout_cb(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct rpc_client *cl = userdata;

    if (!cl->ready)
        conn_fail(cl, "connect to %s: connect timeout (%" PRIu32 " ms)", cl->path,
                  cl->connect_timeout_ms);
}

static void conn_try(struct rpc_client *cl);

static void retry_cb(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    conn_try(userdata);
}

static void conn_retry_later(struct rpc_client *cl)
{
    int r;

    if (cl->retry_timer)
        r = ev_timer_set(cl->retry_timer, CONNECT_RETRY_MS, 0);
    else
        r = ev_timer_add(cl->loop, CONNECT_RETRY_MS, 0, retry_cb, cl, &cl->retry_timer);
    if (r < 0)
        conn_fail(cl, "connect to %s: %s", cl->path, strerror(-r));
}

/* One connect(2) attempt on the non-blocking socket. */
static void conn_try(struct rpc_client *cl)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};

    memcpy(sa.sun_path, cl->path, strlen(cl->path));
    if (connect(cl->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        conn_established(cl);
        return;
    }
    switch (errno) {
    case EINPROGRESS:
        if (ev_io_modify(cl->io, EV_WRITE) < 0)
            conn_fail(cl, "connect to %s: cannot watch the socket", cl->path);
        break;
    case EAGAIN:
    case EINTR:
        conn_retry_later(cl);
        break;
    default:
        conn_fail(cl, "connect to %s: %s", cl->path, strerror(errno));
        break;
    }
}

/* ---- nghttp2 callbacks: decide outcomes, never run the caller's function ---- */

static enum rpc_code code_from_http(const char *status)
{
    static const struct {
        const char *http;
        enum rpc_code code;
    } map[] = {
        {"400", RPC_INTERNAL},      {"401", RPC_UNAUTHENTICATED}, {"403", RPC_PERMISSION_DENIED},
        {"404", RPC_UNIMPLEMENTED}, {"429", RPC_UNAVAILABLE},     {"502", RPC_UNAVAILABLE},
        {"503", RPC_UNAVAILABLE},   {"504", RPC_UNAVAILABLE},
    };

    if (!status)
        return RPC_INTERNAL;
    for (size_t i = 0; i < ARRAY_SIZE(map); i++)
        if (strcmp(status, map[i].http) == 0)
            return map[i].code;
    return RPC_UNKNOWN;
}

/* What a RST_STREAM (or a stream closed under the call) means, as grpc-go maps it. */
static enum rpc_code code_from_h2(uint32_t error_code)
{
    switch (error_code) {
    case NGHTTP2_REFUSED_STREAM:
        return RPC_UNAVAILABLE;
    case NGHTTP2_CANCEL:
        return RPC_CANCELLED;
    case NGHTTP2_ENHANCE_YOUR_CALM:
        return RPC_RESOURCE_EXHAUSTED;
    case NGHTTP2_INADEQUATE_SECURITY:
        return RPC_PERMISSION_DENIED;
    default:
        return RPC_INTERNAL;
    }
}

/* A complete response message: a unary call takes exactly one, uncompressed, that decodes. */
static void on_message(struct client_call *c)
{
    const uint8_t *data;
    size_t len;
    uint8_t flags;

    rpc_msg_reader_message(&c->reader, &flags, &data, &len);
    if (++c->n_messages > 1) {
        call_abort(c, NGHTTP2_CANCEL, RPC_INTERNAL, "more than one response message");
        return;
    }
    if (flags & RPC_FLAG_COMPRESSED) {
        call_abort(c, NGHTTP2_CANCEL, RPC_INTERNAL, "compressed response message not supported");
        return;
    }
    if (rpc_msg_decode(c->response_type, data, len, &c->response) < 0)
        call_abort(c, NGHTTP2_CANCEL, RPC_INTERNAL, "cannot decode the response as %s",
                   c->response_type->name);
}

static int on_data_chunk_recv(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                              const uint8_t *data, size_t len, void *userdata)
{
    struct rpc_client *cl = userdata;
    struct client_call *c = call_find(cl, stream_id);

    while (c && len > 0) {
        size_t used = 0;
        int r = rpc_msg_reader_feed(&c->reader, data, len, &used);

        if (r == -EMSGSIZE) {
            call_abort(c, NGHTTP2_CANCEL, RPC_RESOURCE_EXHAUSTED,
                       "response message larger than max (%zu bytes)", c->reader.max);
            return 0;
        }
        if (r < 0) {
            call_abort(c, NGHTTP2_CANCEL, RPC_INTERNAL, "response: %s", strerror(-r));
            return 0;
        }
        data += used;
        len -= used;
        if (r == 1) {
            on_message(c);
            c = call_find(cl, stream_id);
        }
    }
    return 0;
}

/* The grpc-status and grpc-message of a trailers block (or trailers-only headers) end the call. */
static void on_trailers(struct client_call *c)
{
    const char *s = rpc_header_list_get(&c->headers, "grpc-status");
    const char *m = rpc_header_list_get(&c->headers, "grpc-message");
    char message[RPC_STATUS_MESSAGE_MAX] = "";
    int code;

    if (!s) {
        call_abort(c, NGHTTP2_NO_ERROR, RPC_UNKNOWN, "grpc-status missing from the trailers");
        return;
    }
    if (rpc_status_parse(s, strlen(s), &code) < 0) {
        call_abort(c, NGHTTP2_NO_ERROR, RPC_INTERNAL, "malformed grpc-status \"%.32s\"", s);
        return;
    }
    if (m)
        rpc_percent_decode(m, strlen(m), message, sizeof(message));
    if (code != RPC_OK) {
        call_abort(c, NGHTTP2_NO_ERROR,
                   code > RPC_UNAUTHENTICATED ? RPC_UNKNOWN : (enum rpc_code)code, "%s", message);
        return;
    }
    if (rpc_msg_reader_partial(&c->reader))
        call_abort(c, NGHTTP2_NO_ERROR, RPC_INTERNAL, "truncated response message");
    else if (c->n_messages == 0)
        call_abort(c, NGHTTP2_NO_ERROR, RPC_INTERNAL, "no response message");
    else
        call_abort(c, NGHTTP2_NO_ERROR, RPC_OK, "%s", message);
}

/* The first header block: HTTP 200 with gRPC's content-type, or the call ends here. */
static bool on_response_headers(struct client_call *c, bool end_stream)
{
    const char *status = rpc_header_list_get(&c->headers, ":status");
    const char *ct = rpc_header_list_get(&c->headers, "content-type");

    c->got_response = true;
    if (!status || strcmp(status, "200") != 0) {
        call_abort(c, NGHTTP2_CANCEL, code_from_http(status),
                   "unexpected HTTP status code received from server: %.16s",
                   status ? status : "(none)");
        return false;
    }
    /* Lenient with a trailers-only answer that carries a grpc-status without a content-type. */
    if (!rpc_content_type_ok(ct) &&
        !(end_stream && rpc_header_list_get(&c->headers, "grpc-status") && !ct)) {
        call_abort(c, NGHTTP2_CANCEL, RPC_UNKNOWN, "unexpected content-type \"%.64s\"",
                   ct ? ct : "");
        return false;
    }
    return true;
}

static void on_headers(struct client_call *c, const nghttp2_frame *frame)
{
    bool end_stream = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;

    if (!c->got_response) {
        const char *status = rpc_header_list_get(&c->headers, ":status");

        /* An informational 1xx answer precedes the real one. */
        if (status && status[0] == '1' && !end_stream)
            return;
        if (!on_response_headers(c, end_stream))
            return;
    }
    if (end_stream)
        on_trailers(c);
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *userdata)
{
    struct client_call *c = call_find(userdata, frame->hd.stream_id);

    if (c)
        rpc_header_list_reset(&c->headers);
    return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *userdata)
{
    struct client_call *c = call_find(userdata, frame->hd.stream_id);
    int r;

    if (!c || frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    r = rpc_header_list_add(&c->headers, name, namelen, value, valuelen);
    if (r == -ENOBUFS)
        call_abort(c, NGHTTP2_CANCEL, RPC_INTERNAL, "response headers larger than %zu bytes",
                   c->headers.cap);
    else if (r < 0)
        call_abort(c, NGHTTP2_CANCEL, RPC_INTERNAL, "response headers: %s", strerror(-r));
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *userdata)
{
    struct rpc_client *cl = userdata;
    struct client_call *c = call_find(cl, frame->hd.stream_id);

    if (c && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        (frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA))
        c->remote_ended = true;

    switch (frame->hd.type) {
    case NGHTTP2_SETTINGS:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK) && !cl->ready) {
            cl->ready = true;
            cl->connect_timer = ev_timer_del(cl->connect_timer);
        }
        return 0;
    case NGHTTP2_GOAWAY:
        /* nghttp2 itself refuses the streams above last_stream_id (REFUSED_STREAM). */
        cl->goaway = true;
        return 0;
    case NGHTTP2_HEADERS:
        if (c)
            on_headers(c, frame);
        return 0;
    case NGHTTP2_DATA:
        if (c && c->remote_ended)
            call_abort(c, NGHTTP2_NO_ERROR, RPC_INTERNAL,
                       "server closed the stream without sending trailers");
        return 0;
    default:
        return 0;
    }
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                           void *userdata)
{
    struct rpc_client *cl = userdata;
    struct client_call *c = call_find(cl, stream_id);

    if (!c)
        return 0;
    if (error_code == NGHTTP2_NO_ERROR)
        call_complete(c, RPC_INTERNAL, "stream closed without a grpc-status");
    else if (error_code == NGHTTP2_REFUSED_STREAM && cl->goaway)
        call_complete(c, RPC_UNAVAILABLE, "the server sent GOAWAY before taking the call");
    else
        call_complete(c, code_from_h2(error_code), "stream reset: %s",
                      nghttp2_http2_strerror(error_code));
    return 0;
}

static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *userdata)
{
    struct client_call *c;

    if (frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    c = call_find(userdata, frame->hd.stream_id);
    if (c)
        c->headers_sent = true;
    return 0;
}

static int on_frame_not_send(nghttp2_session *session, const nghttp2_frame *frame, int lib_error,
                             void *userdata)
{
    struct client_call *c;

    if (frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    c = call_find(userdata, frame->hd.stream_id);
    if (c)
        call_complete(
            c, lib_error == NGHTTP2_ERR_START_STREAM_NOT_ALLOWED ? RPC_UNAVAILABLE : RPC_INTERNAL,
            "request not sent: %s", nghttp2_strerror(lib_error));
    return 0;
}

static ssize_t request_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf,
                            size_t length, uint32_t *data_flags, nghttp2_data_source *source,
                            void *userdata)
{
    struct client_call *c = call_find(userdata, stream_id);

    /* A finished call resets its stream first, so this is not expected; nghttp2 resets it. */
    if (!c)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return rpc_outbuf_read(&c->request, buf, length, data_flags, false);
}

static int session_new(struct rpc_client *cl)
{
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)RESPONSE_HEADER_CAP},
    };
    nghttp2_session_callbacks *cbs;
    int r;

    if (nghttp2_session_callbacks_new(&cbs) != 0)
        return -ENOMEM;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
    nghttp2_session_callbacks_set_on_frame_not_send_callback(cbs, on_frame_not_send);
    r = nghttp2_session_client_new(&cl->session, cbs, cl);
    nghttp2_session_callbacks_del(cbs);
    if (r != 0)
        return -ENOMEM;
    if (nghttp2_submit_settings(cl->session, NGHTTP2_FLAG_NONE, settings, ARRAY_SIZE(settings)) !=
            0 ||
        nghttp2_session_set_local_window_size(cl->session, NGHTTP2_FLAG_NONE, 0,
                                              CONNECTION_WINDOW) != 0)
        return -ENOMEM;
    return 0;
}

/* ---- the API ---- */

int rpc_client_new(struct ev_loop *loop, const char *socket_path,
                   const struct rpc_client_options *opts, struct rpc_client **ret)
{
    _cleanup_(rpc_client_freep) struct rpc_client *cl = NULL;
    int r;

    if (!loop || !socket_path || !ret || !*socket_path)
        return -EINVAL;
    if (strlen(socket_path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path))
        return -ENAMETOOLONG;
    cl = calloc(1, sizeof(*cl));
    if (!cl)
        return -ENOMEM;
    cl->fd = -1;
    cl->loop = loop;
    cl->connect_timeout_ms =
        opts && opts->connect_timeout_ms ? opts->connect_timeout_ms : CONNECT_TIMEOUT_DEFAULT_MS;
    cl->max_recv_message =
        opts && opts->max_recv_message ? opts->max_recv_message : RPC_DEFAULT_MAX_RECV;
    cl->path = strdup(socket_path);
    if (!cl->path)
        return -ENOMEM;
    r = ev_timer_add(loop, 0, 0, deliver_cb, cl, &cl->deliver_timer);
    if (r < 0)
        return r;
    r = ev_timer_disarm(cl->deliver_timer);
    if (r < 0)
        return r;
    r = session_new(cl);
    if (r < 0)
        return r;
    r = ev_timer_add(loop, cl->connect_timeout_ms, 0, connect_timeout_cb, cl, &cl->connect_timer);
    if (r < 0)
        return r;
    cl->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (cl->fd < 0)
        return -errno;
    r = ev_io_add(loop, cl->fd, 0, io_cb, cl, &cl->io);
    if (r < 0)
        return r;
    conn_try(cl);
    *ret = TAKE_PTR(cl);
    return 0;
}

static int call_submit(struct rpc_client *cl, struct client_call *c, const char *path)
{
    char timeout[RPC_TIMEOUT_STR_MAX];
    nghttp2_data_provider body = {.source.ptr = c, .read_callback = request_read};
    nghttp2_nv nv[8] = {
        rpc_nv(":method", "POST"),
        rpc_nv(":scheme", "http"),
        rpc_nv(":path", path),
        rpc_nv(":authority", "localhost"),
        rpc_nv("content-type", "application/grpc"),
        rpc_nv("te", "trailers"),
        rpc_nv("user-agent", "gpuplane-rpc"),
    };
    size_t n = 7;
    int32_t id;

    if (c->timeout_ms > 0) {
        rpc_timeout_format(c->timeout_ms, timeout);
        nv[n++] = rpc_nv("grpc-timeout", timeout);
    }
    id = nghttp2_submit_request(cl->session, NULL, nv, n, &body, NULL);
    if (id < 0)
        return id == NGHTTP2_ERR_NOMEM ? -ENOMEM : -EPROTO;
    c->stream_id = id;
    return 0;
}

static uint64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Arms the client's deadline timer for the earliest deadline of the calls in flight. A call that
 * ends first leaves the timer as it is: it then fires for nothing and is armed again. */
static int deadline_arm(struct rpc_client *cl)
{
    uint64_t first = 0, now = mono_ms();

    for (struct client_call *c = cl->calls; c; c = c->next)
        if (c->deadline_ms && (!first || c->deadline_ms < first))
            first = c->deadline_ms;
    if (!first)
        return cl->deadline_timer ? ev_timer_disarm(cl->deadline_timer) : 0;
    return ev_timer_set(cl->deadline_timer, first > now ? first - now : 0, 0);
}

static void deadline_cb(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct rpc_client *cl = userdata;
    uint64_t now = mono_ms();
    struct client_call *c = cl->calls, *next;

    for (; c; c = next) {
        next = c->next;
        if (c->deadline_ms && c->deadline_ms <= now)
            call_abort(c, NGHTTP2_CANCEL, RPC_DEADLINE_EXCEEDED,
                       "deadline exceeded (%" PRIu32 " ms)", c->timeout_ms);
    }
    conn_send(cl);
    if (deadline_arm(cl) < 0)
        conn_fail(cl, "connection to %s: cannot arm the deadline timer", cl->path);
}

static int call_new(struct rpc_client *cl, const ProtobufCMessage *request,
                    const ProtobufCMessageDescriptor *response_type, uint32_t timeout_ms,
                    struct client_call **ret)
{
    _cleanup_(call_freep) struct client_call *c = calloc(1, sizeof(*c));
    int r;

    if (!c)
        return -ENOMEM;
    c->client = cl;
    c->response_type = response_type;
    c->timeout_ms = timeout_ms;
    rpc_outbuf_init(&c->request, 0);
    rpc_msg_reader_init(&c->reader, cl->max_recv_message);
    rpc_header_list_init(&c->headers, RESPONSE_HEADER_CAP);
    r = rpc_outbuf_append_msg(&c->request, request, 0);
    if (r < 0)
        return r;
    (void)rpc_outbuf_finish(&c->request);
    *ret = TAKE_PTR(c);
    return 0;
}

/* Starts a call whose outcome goes to fn or (owning the response) to take_fn. */
static int client_call(struct rpc_client *cl, const char *path, const ProtobufCMessage *request,
                       const ProtobufCMessageDescriptor *response_type, uint32_t timeout_ms,
                       struct client_call **ret)
{
    _cleanup_(call_freep) struct client_call *c = NULL;
    int r;

    if (!cl || !path || path[0] != '/' || !request || !response_type)
        return -EINVAL;
    if (cl->freeing)
        return -ECANCELED;
    if (cl->n_calls >= MAX_CALLS)
        return -EBUSY;
    r = call_new(cl, request, response_type, timeout_ms, &c);
    if (r < 0)
        return r;
    if (cl->state != CONN_CLOSED && !cl->goaway) {
        if (timeout_ms > 0 && !cl->deadline_timer) {
            r = ev_timer_add(cl->loop, timeout_ms, 0, deadline_cb, cl, &cl->deadline_timer);
            if (r < 0)
                return r;
        }
        c->deadline_ms = timeout_ms > 0 ? mono_ms() + timeout_ms : 0;
        r = call_submit(cl, c, path);
        if (r < 0)
            return r;
    }
    *ret = TAKE_PTR(c);
    return 0;
}

/* Puts a new call in flight, or (connection gone) straight into the done queue. */
static void client_start(struct rpc_client *cl, struct client_call *c)
{
    call_link(cl, c);
    if (c->deadline_ms && deadline_arm(cl) < 0)
        call_abort(c, NGHTTP2_CANCEL, RPC_INTERNAL, "cannot arm the deadline timer");
    else if (cl->state == CONN_CLOSED)
        call_complete(c, RPC_UNAVAILABLE, "%s", cl->reason);
    else if (cl->goaway)
        call_complete(c, RPC_UNAVAILABLE, "connection to %s: the server sent GOAWAY", cl->path);
    else
        conn_send(cl);
}

int rpc_client_call(struct rpc_client *client, const char *path, const ProtobufCMessage *request,
                    const ProtobufCMessageDescriptor *response_type, uint32_t timeout_ms,
                    rpc_reply_fn fn, void *userdata)
{
    struct client_call *c = NULL;
    int r;

    if (!fn)
        return -EINVAL;
    r = client_call(client, path, request, response_type, timeout_ms, &c);
    if (r < 0)
        return r;
    c->fn = fn;
    c->userdata = userdata;
    client_start(client, c);
    return 0;
}

int rpc_client_call_take(struct rpc_client *client, const char *path,
                         const ProtobufCMessage *request,
                         const ProtobufCMessageDescriptor *response_type, uint32_t timeout_ms,
                         rpc_reply_take_fn fn, void *userdata)
{
    struct client_call *c = NULL;
    int r;

    if (!fn)
        return -EINVAL;
    r = client_call(client, path, request, response_type, timeout_ms, &c);
    if (r < 0)
        return r;
    c->take_fn = fn;
    c->userdata = userdata;
    client_start(client, c);
    return 0;
}

bool rpc_client_closed(const struct rpc_client *client)
{
    return client->state == CONN_CLOSED || client->goaway;
}

size_t rpc_client_calls(const struct rpc_client *client)
{
    return client->n_calls;
}

/* Tells the server we are leaving, if the socket takes it at once; no waiting. */
static void conn_say_goodbye(struct rpc_client *cl)
{
    if (cl->state != CONN_OPEN)
        return;
    if (nghttp2_session_terminate_session(cl->session, NGHTTP2_NO_ERROR) == 0)
        (void)conn_flush(cl);
}

struct rpc_client *rpc_client_free(struct rpc_client *client)
{
    struct rpc_client *cl = client;

    if (!cl || cl->freeing)
        return NULL;
    cl->freeing = true;
    while (cl->calls)
        call_complete(cl->calls, RPC_CANCELLED, "the client was closed");
    conn_say_goodbye(cl);
    conn_release(cl);
    for (struct client_call *c; (c = done_pop(cl));)
        call_deliver(c);
    cl->deliver_timer = ev_timer_del(cl->deliver_timer);
    cl->deadline_timer = ev_timer_del(cl->deadline_timer);
    cl->path = (free(cl->path), NULL);
    if (!cl->delivering)
        free(cl);
    return NULL;
}
