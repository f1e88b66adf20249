/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A server call is one HTTP/2 stream: the nghttp2 callbacks that collect its request (headers,
 * then DATA reassembled into one length-prefixed message), the checks gRPC asks for before a
 * handler sees it (content type, method, deadline, compression, size, decoding), the dispatch, and
 * the response (HEADERS, DATA pulled from the call's output buffer, trailers; or trailers-only when
 * it fails before any message).
 *
 * Two owners share a call: the stream (until nghttp2 closes it or the connection goes) and the
 * handler (from dispatch until it finishes the call or its cancel callback returns). The call is
 * freed when neither has it. Handler-facing functions never send on the spot: they submit to
 * nghttp2 and ask for a flush, so a handler is never called back from inside its own call.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc-server-internal.h"

/* The grpc-message of a status: RPC_STATUS_MESSAGE_MAX octets, up to 3 each once encoded. */
#define STATUS_ENCODED_CAP (3 * RPC_STATUS_MESSAGE_MAX)

static struct rpc_call *stream_call(nghttp2_session *session, int32_t stream_id)
{
    return nghttp2_session_get_stream_user_data(session, stream_id);
}

static void call_link(struct rpc_call **head, struct rpc_call *call)
{
    call->prev = NULL;
    call->next = *head;
    if (*head)
        (*head)->prev = call;
    *head = call;
}

static void call_unlink(struct rpc_call **head, struct rpc_call *call)
{
    if (call->prev)
        call->prev->next = call->next;
    else
        *head = call->next;
    if (call->next)
        call->next->prev = call->prev;
    call->prev = call->next = NULL;
}

int rpc_call_new(struct rpc_conn *conn, int32_t stream_id, struct rpc_call **ret)
{
    struct rpc_server *srv = conn->srv;
    struct rpc_call *call = calloc(1, sizeof(*call));

    if (!call)
        return -ENOMEM;
    call->srv = srv;
    call->conn = conn;
    call->stream_id = stream_id;
    call->status = RPC_OK;
    call->rst_code = NGHTTP2_NO_ERROR;
    rpc_header_list_init(&call->headers, srv->opts.max_header_list);
    rpc_msg_reader_init(&call->reader, srv->opts.max_recv_message);
    /* Pending output: a few messages at the largest size, then rpc_call_send says -ENOBUFS. */
    rpc_outbuf_init(&call->out, 2 * (srv->opts.max_send_message + RPC_PREFIX_LEN));
    call_link(&conn->calls, call);
    srv->n_calls++;
    *ret = call;
    return 0;
}

static void call_destroy(struct rpc_call *call)
{
    call->timer = ev_timer_del(call->timer);
    rpc_header_list_release(&call->headers);
    rpc_msg_reader_release(&call->reader);
    rpc_arena_release(&call->arena);
    rpc_outbuf_release(&call->out);
    free(call->status_message);
    call->srv->n_calls--;
    free(call);
}

void rpc_call_free(struct rpc_call *call)
{
    if (call->conn)
        call_unlink(&call->conn->calls, call);
    if (call->orphan)
        call_unlink(&call->srv->orphans, call);
    call_destroy(call);
}

/* Hands the call back from the handler: runs its cancel callback, if it set one. */
static void call_cancel(struct rpc_call *call)
{
    if (!call->held || !call->cancel_fn)
        return;
    call->held = false;
    call->cancel_fn(call, call->cancel_userdata);
}

void rpc_call_detach(struct rpc_call *call)
{
    struct rpc_conn *conn = call->conn;

    if (!conn)
        return;
    call_unlink(&conn->calls, call);
    call->conn = NULL;
    call->timer = ev_timer_del(call->timer);
    call_cancel(call);
    if (call->held) {
        /* No cancel callback: the handler still has it and finishes it later. */
        call->orphan = true;
        call_link(&call->srv->orphans, call);
        return;
    }
    call_destroy(call);
}

/* ---- the response ---- */

/* The grpc-status value: every gRPC code has its digits here, so no call formats a number. */
static const char *status_digits(int code, char buf[static 12])
{
    static const char *const digits[] = {"0", "1",  "2",  "3",  "4",  "5",  "6",  "7", "8",
                                         "9", "10", "11", "12", "13", "14", "15", "16"};

    if (code >= 0 && (size_t)code < ARRAY_SIZE(digits))
        return digits[code];
    (void)snprintf(buf, 12, "%d", code);
    return buf;
}

static int submit_trailers(struct rpc_call *call)
{
    char code[12];
    nghttp2_nv nva[2];
    size_t n = 0;

    nva[n++] = rpc_nv("grpc-status", status_digits(call->status, code));
    if (call->status_message)
        nva[n++] = rpc_nv("grpc-message", call->status_message);
    return nghttp2_submit_trailer(call->conn->session, call->stream_id, nva, n) == 0 ? 0 : -EIO;
}

static ssize_t data_read_cb(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t len,
                            uint32_t *data_flags, nghttp2_data_source *source, void *userdata)
{
    struct rpc_call *call = source->ptr;
    ssize_t n = rpc_outbuf_read(&call->out, buf, len, data_flags, true);

    /* The trailers must follow the last DATA frame, so they are submitted only now. */
    if (n >= 0 && (*data_flags & NGHTTP2_DATA_FLAG_EOF) && submit_trailers(call) < 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return n;
}

/* Response HEADERS with a data provider, once, before the first message. */
static int call_start_response(struct rpc_call *call)
{
    nghttp2_nv nva[] = {rpc_nv(":status", "200"), rpc_nv("content-type", "application/grpc")};
    nghttp2_data_provider prd = {.source.ptr = call, .read_callback = data_read_cb};

    if (call->responding)
        return 0;
    if (nghttp2_submit_response(call->conn->session, call->stream_id, nva, ARRAY_SIZE(nva), &prd) !=
        0)
        return -EIO;
    call->responding = true;
    return 0;
}

static void call_submit_trailers_only(struct rpc_call *call, unsigned http_status)
{
    char status[8], code[12];
    nghttp2_nv nva[4];
    size_t n = 0;

    (void)snprintf(status, sizeof(status), "%u", http_status);
    nva[n++] = rpc_nv(":status", status);
    nva[n++] = rpc_nv("content-type", "application/grpc");
    nva[n++] = rpc_nv("grpc-status", status_digits(call->status, code));
    if (call->status_message)
        nva[n++] = rpc_nv("grpc-message", call->status_message);
    /* Fails only when the stream is already closing: the status then has nobody to go to. */
    if (nghttp2_submit_response(call->conn->session, call->stream_id, nva, n, NULL) != 0)
        log_debug(5, "rpc: cannot submit status", "stream", LOG_INT(call->stream_id));
}

static char *encode_message(const char *message)
{
    struct strbuf sb;

    if (!message || !*message)
        return NULL;
    strbuf_init(&sb, STATUS_ENCODED_CAP);
    if (rpc_percent_encode(&sb, message) < 0) {
        strbuf_release(&sb);
        return NULL;
    }
    return strbuf_detach(&sb, NULL);
}

/* Decides the status and submits it: as trailers after the pending DATA, or trailers-only. */
static void call_submit_status(struct rpc_call *call, unsigned http_status, enum rpc_code code,
                               const char *message)
{
    if (call->ended)
        return;
    call->ended = true;
    call->status = (int)code;
    call->status_message = encode_message(message);
    call->timer = ev_timer_del(call->timer);
    if (!call->conn)
        return;
    if (!call->responding) {
        call_submit_trailers_only(call, http_status);
    } else if (rpc_outbuf_finish(&call->out) == 1) {
        if (nghttp2_session_resume_data(call->conn->session, call->stream_id) != 0)
            log_debug(5, "rpc: cannot resume stream", "stream", LOG_INT(call->stream_id));
    }
    rpc_conn_flush_soon(call->conn);
}

void rpc_call_abort(struct rpc_call *call, enum rpc_code code, const char *message)
{
    if (call->ended)
        return;
    call_cancel(call);
    call_submit_status(call, 200, code, message);
}

void rpc_call_fail(struct rpc_call *call, unsigned http_status, enum rpc_code code, const char *fmt,
                   ...)
{
    char message[RPC_STATUS_MESSAGE_MAX];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    log_debug(5, "rpc: call failed", "path", rpc_call_path(call), "code", rpc_code_name((int)code),
              "message", message);
    call_submit_status(call, http_status, code, message);
}

/* ---- the request ---- */

static void deadline_cb(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct rpc_call *call = userdata;

    if (call->ended || !call->conn)
        return;
    /* The client gave up too: what was not sent yet is of no use, and the stream is reset. */
    call->out.off = call->out.buf.len;
    call->rst_code = NGHTTP2_CANCEL;
    rpc_call_abort(call, RPC_DEADLINE_EXCEEDED, "context deadline exceeded");
}

static void fail_unknown_method(struct rpc_call *call, const char *path)
{
    const char *sm = path[0] == '/' ? path + 1 : path;
    const char *slash = strrchr(sm, '/');

    if (!slash) {
        rpc_call_fail(call, 200, RPC_UNIMPLEMENTED, "malformed method name: \"%s\"", path);
        return;
    }
    if (!rpc_server_has_service(call->srv, sm, (size_t)(slash - sm)))
        rpc_call_fail(call, 200, RPC_UNIMPLEMENTED, "unknown service %.*s", (int)(slash - sm), sm);
    else
        rpc_call_fail(call, 200, RPC_UNIMPLEMENTED, "unknown method %s for service %.*s", slash + 1,
                      (int)(slash - sm), sm);
}

/* Records the deadline. The timer is armed only if the call is still open when the I/O callback
 * that read its headers unwinds (rpc_conn_arm_deadlines): a handler that answers at once, the usual
 * unary call, costs no timer at all. */
static int start_deadline(struct rpc_call *call, const char *timeout)
{
    uint64_t ms;
    int r;

    r = rpc_timeout_parse(timeout, strlen(timeout), &ms);
    if (r < 0)
        return r;
    call->deadline_ms = ev_loop_now_ms(call->srv->loop) + ms;
    call->conn->deadlines_pending = true;
    return 0;
}

void rpc_conn_arm_deadlines(struct rpc_conn *conn)
{
    uint64_t now = ev_loop_now_ms(conn->srv->loop);
    struct rpc_call *call, *next;

    if (!conn->deadlines_pending)
        return;
    conn->deadlines_pending = false;
    /* A cancel callback (from the abort below) may finish other calls of this connection, which
     * only submits to nghttp2 (the stream stays open, so does the list), but keep the next link
     * first anyway. */
    for (call = conn->calls; call; call = next) {
        next = call->next;
        if (call->deadline_ms == 0 || call->timer || call->ended)
            continue;
        if (ev_timer_add(conn->srv->loop, call->deadline_ms > now ? call->deadline_ms - now : 0, 0,
                         deadline_cb, call, &call->timer) < 0)
            rpc_call_abort(call, RPC_RESOURCE_EXHAUSTED, "grpc: cannot arm the deadline timer");
    }
}

/* The request headers are complete: check them in grpc-go's order and route the call. */
static void call_headers_done(struct rpc_call *call)
{
    const char *method = rpc_header_list_get(&call->headers, ":method");
    const char *path = rpc_header_list_get(&call->headers, ":path");
    const char *ctype = rpc_header_list_get(&call->headers, "content-type");
    const char *timeout = rpc_header_list_get(&call->headers, "grpc-timeout");

    if (!method || strcmp(method, "POST") != 0 || !path || path[0] != '/') {
        call->ended = true;
        (void)nghttp2_submit_rst_stream(call->conn->session, NGHTTP2_FLAG_NONE, call->stream_id,
                                        NGHTTP2_PROTOCOL_ERROR);
        return;
    }
    if (!rpc_content_type_ok(ctype)) {
        rpc_call_fail(call, 415, RPC_INVALID_ARGUMENT, "invalid gRPC request content-type \"%s\"",
                      ctype ? ctype : "");
        return;
    }
    if (timeout && start_deadline(call, timeout) < 0) {
        rpc_call_fail(call, 200, RPC_INTERNAL, "malformed grpc-timeout: \"%s\"", timeout);
        return;
    }
    call->method = rpc_server_find_method(call->srv, path);
    if (!call->method)
        fail_unknown_method(call, path);
}

/* A whole message arrived: check its flag, decode it, keep it for the handler. */
static void call_message(struct rpc_call *call)
{
    const char *encoding = rpc_header_list_get(&call->headers, "grpc-encoding");
    const uint8_t *data = NULL;
    size_t len = 0;
    uint8_t flags = 0;

    rpc_msg_reader_message(&call->reader, &flags, &data, &len);
    if (++call->n_messages > 1) {
        rpc_call_fail(call, 200, RPC_INTERNAL,
                      "grpc: client streaming protocol violation: more than one request message");
        return;
    }
    if (flags & RPC_FLAG_COMPRESSED) {
        if (!encoding || strcmp(encoding, "identity") == 0)
            rpc_call_fail(call, 200, RPC_INTERNAL,
                          "grpc: compressed flag set with identity or empty encoding");
        else
            rpc_call_fail(call, 200, RPC_UNIMPLEMENTED,
                          "grpc: Decompressor is not installed for grpc-encoding \"%s\"", encoding);
        return;
    }
    if (flags != 0) {
        rpc_call_fail(call, 200, RPC_INTERNAL, "grpc: received unexpected payload format %u",
                      flags);
        return;
    }
    if (rpc_msg_decode_arena(call->method->request, data, len, &call->arena, &call->request) < 0)
        rpc_call_fail(call, 200, RPC_INVALID_ARGUMENT,
                      "grpc: error unmarshalling request: invalid %s message",
                      call->method->request->name);
}

static void call_dispatch(struct rpc_call *call)
{
    const struct rpc_method *m = call->method;

    call->dispatched = true;
    call->held = true;
    log_debug(6, "rpc: call", "path", m->path, "stream", LOG_INT(call->stream_id));
    m->handler(call, call->request, m->userdata);
    /* Still attached: streams are closed (and calls freed) only after this callback returns.
     * A stream that starts while the server drains ends as the others did. */
    if (call->srv->shutting_down && m->server_streaming && call->held)
        rpc_call_abort(call, RPC_OK, NULL);
}

/* The client half-closed: the request is complete, or it is not and never will be. */
static void call_remote_end(struct rpc_call *call)
{
    call->remote_closed = true;
    if (call->ended || call->dispatched || !call->method)
        return;
    if (rpc_msg_reader_partial(&call->reader)) {
        rpc_call_fail(call, 200, RPC_INTERNAL, "grpc: truncated request message");
        return;
    }
    if (call->n_messages == 0) {
        rpc_call_fail(call, 200, RPC_INTERNAL, "grpc: no request message");
        return;
    }
    call_dispatch(call);
}

/* ---- nghttp2 callbacks ---- */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *userdata)
{
    struct rpc_conn *conn = userdata;
    struct rpc_call *call = NULL;

    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    if (rpc_call_new(conn, frame->hd.stream_id, &call) < 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, call) != 0) {
        rpc_call_free(call);
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *userdata)
{
    struct rpc_call *call = stream_call(session, frame->hd.stream_id);

    /* Request trailers carry nothing gRPC uses. */
    if (!call || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    /* Over the header list cap: the stream is reset (nghttp2 sends RST_STREAM). */
    if (rpc_header_list_add(&call->headers, name, namelen, value, valuelen) < 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                         const uint8_t *data, size_t len, void *userdata)
{
    struct rpc_call *call = stream_call(session, stream_id);

    /* After a status was decided the rest of the request is dropped, never buffered. */
    while (call && !call->ended && call->method && len > 0) {
        size_t used = 0;
        int r = rpc_msg_reader_feed(&call->reader, data, len, &used);

        if (r == -EMSGSIZE) {
            rpc_call_fail(call, 200, RPC_RESOURCE_EXHAUSTED,
                          "grpc: received message larger than max (%zu vs. %zu)", call->reader.want,
                          call->reader.max);
            break;
        }
        if (r < 0) {
            rpc_call_fail(call, 200, RPC_RESOURCE_EXHAUSTED, "grpc: out of memory");
            break;
        }
        data += used;
        len -= used;
        if (r == 1)
            call_message(call);
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *userdata)
{
    struct rpc_conn *conn = userdata;
    struct rpc_call *call;

    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
        call = stream_call(session, frame->hd.stream_id);
        if (!call)
            break;
        if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
            call_headers_done(call);
        if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)
            call_remote_end(call);
        break;
    case NGHTTP2_PING:
        if ((frame->hd.flags & NGHTTP2_FLAG_ACK) && conn->notice_sent)
            rpc_conn_goaway_final(conn);
        break;
    default:
        break;
    }
    return 0;
}

static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *userdata)
{
    struct rpc_call *call;

    if (frame->hd.type != NGHTTP2_HEADERS || !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    call = stream_call(session, frame->hd.stream_id);
    /* The status is out but the client is still sending: release the stream (PROTOCOL-HTTP2). */
    if (call && !call->remote_closed)
        (void)nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                        call->rst_code);
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                           void *userdata)
{
    struct rpc_call *call = stream_call(session, stream_id);

    if (call) {
        log_debug(6, "rpc: stream closed", "stream", LOG_INT(stream_id), "error",
                  nghttp2_http2_strerror(error_code));
        rpc_call_detach(call);
    }
    return 0;
}

void rpc_call_set_callbacks(nghttp2_session_callbacks *cbs)
{
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
}

/* ---- the handler's side ---- */

const char *rpc_call_path(const struct rpc_call *call)
{
    const char *path;

    if (call->method)
        return call->method->path;
    path = rpc_header_list_get(&call->headers, ":path");
    return path ? path : "";
}

uint64_t rpc_call_deadline_ms(const struct rpc_call *call)
{
    return call->deadline_ms;
}

const char *rpc_call_header(const struct rpc_call *call, const char *name)
{
    return rpc_header_list_get(&call->headers, name);
}

void rpc_call_on_cancel(struct rpc_call *call, void (*fn)(struct rpc_call *call, void *userdata),
                        void *userdata)
{
    call->cancel_fn = fn;
    call->cancel_userdata = userdata;
}

static bool call_gone(const struct rpc_call *call)
{
    return !call->held || call->ended || !call->conn || call->conn->dead;
}

static int call_send(struct rpc_call *call, const ProtobufCMessage *msg)
{
    int r, wake;

    if (call_gone(call))
        return -ECANCELED;
    if (!msg || msg->descriptor != call->method->response)
        return -EINVAL;
    wake = rpc_outbuf_append_msg(&call->out, msg, call->srv->opts.max_send_message);
    if (wake < 0)
        return wake;
    r = call_start_response(call);
    if (r < 0)
        return r;
    if (wake == 1 && nghttp2_session_resume_data(call->conn->session, call->stream_id) != 0)
        return -EIO;
    rpc_conn_flush_soon(call->conn);
    return 0;
}

int rpc_call_send(struct rpc_call *call, const ProtobufCMessage *msg)
{
    if (call->held && !call->method->server_streaming)
        return -EINVAL;
    return call_send(call, msg);
}

/* Ends the call for the handler, who gives it up here. */
static void call_finish(struct rpc_call *call, enum rpc_code code, const char *message)
{
    /* From inside the cancel callback: the call is already ended. */
    if (!call->held)
        return;
    call->held = false;
    if (!call->conn) {
        rpc_call_free(call);
        return;
    }
    call_submit_status(call, 200, code, message);
}

int rpc_call_finish(struct rpc_call *call, enum rpc_code code, const char *fmt, ...)
{
    char message[RPC_STATUS_MESSAGE_MAX] = "";
    va_list ap;

    if (fmt) {
        va_start(ap, fmt);
        (void)vsnprintf(message, sizeof(message), fmt, ap);
        va_end(ap);
    }
    call_finish(call, code, message);
    return 0;
}

int rpc_call_reply(struct rpc_call *call, const ProtobufCMessage *msg)
{
    int r = call_send(call, msg);

    if (r == -EMSGSIZE)
        call_finish(call, RPC_RESOURCE_EXHAUSTED, "grpc: trying to send message larger than max");
    else if (r < 0 && r != -ECANCELED)
        call_finish(call, RPC_INTERNAL, "grpc: cannot send response");
    else
        call_finish(call, RPC_OK, NULL);
    return r;
}
