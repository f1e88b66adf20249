/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The raw HTTP/2 test client (see rpc-test.h): a nghttp2 client session driven from the loop,
 * recording everything the server sends.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "rpc-test.h"

static struct tstream *tc_stream(struct tconn *tc, int32_t id)
{
    for (size_t i = 0; i < tc->n_streams; i++)
        if (tc->streams[i]->id == id)
            return tc->streams[i];
    return NULL;
}

static void tc_flush(struct tconn *tc)
{
    for (;;) {
        const uint8_t *data = NULL;
        ssize_t n;

        while (tc->out_off < tc->out.len) {
            ssize_t w =
                send(tc->fd, tc->out.buf + tc->out_off, tc->out.len - tc->out_off, MSG_NOSIGNAL);

            if (w < 0) {
                if (errno == EAGAIN) {
                    assert_int_equal(ev_io_modify(tc->io, EV_READ | EV_WRITE), 0);
                    return;
                }
                /* The server closed on us: what we meant to say no longer matters. */
                tc->out_off = tc->out.len;
                break;
            }
            tc->out_off += (size_t)w;
        }
        strbuf_reset(&tc->out);
        tc->out_off = 0;
        n = nghttp2_session_mem_send(tc->session, &data);
        assert_true(n >= 0);
        if (n == 0)
            break;
        assert_int_equal(strbuf_add(&tc->out, data, (size_t)n), 0);
    }
    assert_int_equal(ev_io_modify(tc->io, EV_READ), 0);
}

static void tc_io_cb(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    struct tconn *tc = userdata;
    uint8_t buf[16384];
    ssize_t n;

    if (tc->eof)
        return;
    n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EAGAIN) {
        tc_flush(tc);
        return;
    }
    if (n <= 0) {
        tc->eof = true;
        assert_int_equal(ev_io_modify(tc->io, 0), 0);
        return;
    }
    assert_true(nghttp2_session_mem_recv(tc->session, buf, (size_t)n) >= 0);
    tc_flush(tc);
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *frame, void *userdata)
{
    struct tstream *ts = tc_stream(userdata, frame->hd.stream_id);

    if (ts)
        ts->blocks++;
    return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *userdata)
{
    struct tstream *ts = tc_stream(userdata, frame->hd.stream_id);

    if (ts)
        assert_int_equal(rpc_header_list_add(ts->blocks == 1 ? &ts->headers : &ts->trailers, name,
                                             namelen, value, valuelen),
                         0);
    return 0;
}

static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t stream_id, const uint8_t *data,
                         size_t len, void *userdata)
{
    struct tstream *ts = tc_stream(userdata, stream_id);

    if (ts)
        assert_int_equal(strbuf_add(&ts->data, data, len), 0);
    return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *frame, void *userdata)
{
    struct tconn *tc = userdata;
    struct tstream *ts = tc_stream(tc, frame->hd.stream_id);

    if (frame->hd.type == NGHTTP2_GOAWAY) {
        tc->goaway = true;
        tc->goaway_last = frame->goaway.last_stream_id;
        tc->goaway_code = frame->goaway.error_code;
    }
    if (!ts)
        return 0;
    if (frame->hd.type == NGHTTP2_RST_STREAM) {
        ts->rst = true;
        ts->rst_code = frame->rst_stream.error_code;
    }
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        ts->ended = true;
        if (frame->hd.type == NGHTTP2_HEADERS && ts->blocks == 1)
            ts->trailers_only = true;
    }
    return 0;
}

static int on_stream_close(nghttp2_session *s, int32_t stream_id, uint32_t error_code,
                           void *userdata)
{
    struct tstream *ts = tc_stream(userdata, stream_id);

    if (ts) {
        ts->closed = true;
        ts->close_code = error_code;
    }
    return 0;
}

struct tconn *tc_from_fd(struct ev_loop *loop, int fd)
{
    struct tconn *tc = calloc(1, sizeof(*tc));
    nghttp2_session_callbacks *cbs = NULL;

    assert_non_null(tc);
    tc->loop = loop;
    tc->fd = fd;
    strbuf_init(&tc->out, 0);
    assert_int_equal(nghttp2_session_callbacks_new(&cbs), 0);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    assert_int_equal(nghttp2_session_client_new(&tc->session, cbs, tc), 0);
    nghttp2_session_callbacks_del(cbs);
    assert_int_equal(nghttp2_submit_settings(tc->session, NGHTTP2_FLAG_NONE, NULL, 0), 0);
    assert_int_equal(ev_io_add(loop, fd, EV_READ, tc_io_cb, tc, &tc->io), 0);
    tc_flush(tc);
    return tc;
}

struct tconn *tc_connect(struct ev_loop *loop, const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

    assert_true(fd >= 0);
    assert_true(strlen(path) < sizeof(sa.sun_path));
    memcpy(sa.sun_path, path, strlen(path) + 1);
    /* A unix socket connects at once or fails; it never reports EINPROGRESS. */
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return tc_from_fd(loop, fd);
}

void tc_free(struct tconn *tc)
{
    if (!tc)
        return;
    tc->io = ev_io_del(tc->io);
    close(tc->fd);
    nghttp2_session_del(tc->session);
    for (size_t i = 0; i < tc->n_streams; i++) {
        struct tstream *ts = tc->streams[i];

        rpc_header_list_release(&ts->headers);
        rpc_header_list_release(&ts->trailers);
        strbuf_release(&ts->data);
        strbuf_release(&ts->body);
        free(ts);
    }
    strbuf_release(&tc->out);
    free(tc);
}

static ssize_t body_read(nghttp2_session *s, int32_t stream_id, uint8_t *buf, size_t len,
                         uint32_t *data_flags, nghttp2_data_source *source, void *userdata)
{
    struct tstream *ts = source->ptr;
    size_t n = ts->body.len - ts->body_off;

    if (n > len)
        n = len;
    memcpy(buf, ts->body.buf + ts->body_off, n);
    ts->body_off += n;
    if (ts->body_off == ts->body.len) {
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
        if (!ts->end_stream)
            *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
    return (ssize_t)n;
}

struct tstream *tc_start(struct tconn *tc, const nghttp2_nv *nva, size_t n, const void *body,
                         size_t len, bool end_stream)
{
    struct tstream *ts = calloc(1, sizeof(*ts));
    nghttp2_data_provider prd = {.read_callback = body_read};

    assert_non_null(ts);
    assert_true(tc->n_streams < TC_MAX_STREAMS);
    ts->tc = tc;
    ts->end_stream = end_stream;
    rpc_header_list_init(&ts->headers, 1 << 20);
    rpc_header_list_init(&ts->trailers, 1 << 20);
    strbuf_init(&ts->data, 0);
    strbuf_init(&ts->body, 0);
    if (len > 0)
        assert_int_equal(strbuf_add(&ts->body, body, len), 0);
    prd.source.ptr = ts;
    /* No body and no END_STREAM: headers only, the stream stays open. */
    ts->id = nghttp2_submit_request(tc->session, NULL, nva, n,
                                    (len > 0 || !end_stream) ? &prd : NULL, ts);
    assert_true(ts->id > 0);
    tc->streams[tc->n_streams++] = ts;
    tc_flush(tc);
    return ts;
}

struct tstream *tc_call(struct tconn *tc, const char *path, const char *timeout,
                        const ProtobufCMessage *msg, bool end_stream)
{
    nghttp2_nv nva[] = {
        rpc_nv(":method", "POST"),
        rpc_nv(":scheme", "http"),
        rpc_nv(":authority", "localhost"),
        rpc_nv(":path", path),
        rpc_nv("content-type", "application/grpc"),
        rpc_nv("te", "trailers"),
        rpc_nv("grpc-timeout", timeout ? timeout : ""),
    };
    struct strbuf sb = STRBUF_INIT;
    struct tstream *ts;

    if (msg)
        assert_int_equal(rpc_msg_encode(&sb, msg, 0), 0);
    ts = tc_start(tc, nva, ARRAY_SIZE(nva) - (timeout ? 0 : 1), sb.buf, sb.len, end_stream);
    strbuf_release(&sb);
    return ts;
}

void tc_rst(struct tconn *tc, struct tstream *ts, uint32_t code)
{
    assert_int_equal(nghttp2_submit_rst_stream(tc->session, NGHTTP2_FLAG_NONE, ts->id, code), 0);
    tc_flush(tc);
}

void tc_write_raw(struct tconn *tc, const void *data, size_t len)
{
    assert_int_equal(send(tc->fd, data, len, MSG_NOSIGNAL), (ssize_t)len);
}

int ts_status(const struct tstream *ts)
{
    const char *s =
        rpc_header_list_get(ts->trailers_only ? &ts->headers : &ts->trailers, "grpc-status");
    int code = -1;

    if (!s || rpc_status_parse(s, strlen(s), &code) < 0)
        return -1;
    return code;
}

const char *ts_message(const struct tstream *ts, char *buf, size_t size)
{
    const char *s =
        rpc_header_list_get(ts->trailers_only ? &ts->headers : &ts->trailers, "grpc-message");

    rpc_percent_decode(s ? s : "", s ? strlen(s) : 0, buf, size);
    return buf;
}

size_t ts_messages(const struct tstream *ts, const ProtobufCMessageDescriptor *desc, size_t nth,
                   ProtobufCMessage **ret)
{
    struct rpc_msg_reader r;
    size_t off = 0, count = 0;

    rpc_msg_reader_init(&r, 0);
    while (off < ts->data.len) {
        size_t used = 0;
        int k =
            rpc_msg_reader_feed(&r, (const uint8_t *)ts->data.buf + off, ts->data.len - off, &used);

        assert_true(k >= 0);
        off += used;
        if (k == 1) {
            const uint8_t *data = NULL;
            size_t len = 0;
            uint8_t flags = 0;

            rpc_msg_reader_message(&r, &flags, &data, &len);
            assert_int_equal(flags, 0);
            if (ret && count == nth)
                assert_int_equal(rpc_msg_decode(desc, data, len, ret), 0);
            count++;
        }
    }
    /* A message still arriving is not counted: conditions poll this while DATA comes in. */
    rpc_msg_reader_release(&r);
    return count;
}

struct wait {
    bool (*cond)(void *ctx);
    void *ctx;
    struct ev_loop *loop;
};

static void poll_cb(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct wait *w = userdata;

    if (w->cond(w->ctx))
        ev_loop_stop(w->loop, 0);
}

static void deadline_cb(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    ev_loop_stop(userdata, -ETIMEDOUT);
}

bool run_until(struct ev_loop *loop, bool (*cond)(void *ctx), void *ctx)
{
    struct wait w = {.cond = cond, .ctx = ctx, .loop = loop};
    struct ev_timer *poll = NULL, *deadline = NULL;
    int r;

    if (cond(ctx))
        return true;
    assert_int_equal(ev_timer_add(loop, 1, 1, poll_cb, &w, &poll), 0);
    assert_int_equal(ev_timer_add(loop, TEST_DEADLINE_MS, 0, deadline_cb, loop, &deadline), 0);
    r = ev_loop_run(loop);
    ev_timer_del(poll);
    ev_timer_del(deadline);
    return r == 0 && cond(ctx);
}

bool ts_is_closed(void *ts)
{
    return ((struct tstream *)ts)->closed;
}

bool ts_has_status(void *ts)
{
    return ts_status(ts) >= 0 && ((struct tstream *)ts)->ended;
}

bool tc_is_eof(void *tc)
{
    return ((struct tconn *)tc)->eof;
}
