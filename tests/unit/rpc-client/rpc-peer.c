/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client tests' gRPC peer (see rpc-peer.h): a listening unix socket, one nghttp2 server session
 * per connection, and a table from method name to the way the request is answered. It trusts the
 * client under test only as far as a test needs: bodies are capped, everything is freed on close.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <nghttp2/nghttp2.h>

#include "base.h"
#include "rpc-peer.h"
#include "test-echo.pb-c.h"

#define BODY_CAP ((size_t)1 << 20)
#define MAX_HELD 256

struct pconn;

enum how {
    HOW_ECHO,          /* OK with the request's text */
    HOW_BLOB,          /* OK with a blob of `size` bytes */
    HOW_TRAILERS_ONLY, /* one HEADERS with END_STREAM: grpc-status `code`, grpc-message `text` */
    HOW_STATUS,        /* headers, no message, trailers with `code` and `text` */
    HOW_NO_STATUS,     /* headers, message, trailers without grpc-status */
    HOW_BAD_STATUS,    /* trailers with grpc-status "abc" */
    HOW_HTTP_404,      /* :status 404, END_STREAM */
    HOW_HTML,          /* :status 200, content-type text/html */
    HOW_TWO,           /* two messages, OK */
    HOW_NONE,          /* no message, OK */
    HOW_COMPRESSED,    /* a message flagged compressed, OK */
    HOW_UNDECODABLE,   /* a message that is not an EchoReply, OK */
    HOW_NO_TRAILERS,   /* a message, END_STREAM on the DATA */
    HOW_TRUNCATED,     /* half a message, then OK trailers */
    HOW_CLOSE_MID,     /* headers and half a message, then the connection closes */
    HOW_HOLD,          /* no answer until peer_release_held() */
    HOW_SILENT,        /* never an answer */
    HOW_GOAWAY,        /* GOAWAY that refuses this stream */
    HOW_GOAWAY_AFTER,  /* OK, then GOAWAY that takes no new stream */
    HOW_RST_REFUSED,   /* RST_STREAM(REFUSED_STREAM) */
    HOW_RST_INTERNAL,  /* RST_STREAM(INTERNAL_ERROR) */
    HOW_RST_CANCEL,    /* RST_STREAM(CANCEL) */
};

static const struct {
    const char *name;
    enum how how;
} methods[] = {
    {"Echo", HOW_ECHO},
    {"Blob", HOW_BLOB},
    {"TrailersOnly", HOW_TRAILERS_ONLY},
    {"Status", HOW_STATUS},
    {"NoStatus", HOW_NO_STATUS},
    {"BadStatus", HOW_BAD_STATUS},
    {"Http404", HOW_HTTP_404},
    {"Html", HOW_HTML},
    {"Two", HOW_TWO},
    {"None", HOW_NONE},
    {"Compressed", HOW_COMPRESSED},
    {"Undecodable", HOW_UNDECODABLE},
    {"NoTrailers", HOW_NO_TRAILERS},
    {"Truncated", HOW_TRUNCATED},
    {"CloseMid", HOW_CLOSE_MID},
    {"Hold", HOW_HOLD},
    {"Silent", HOW_SILENT},
    {"Goaway", HOW_GOAWAY},
    {"GoawayAfter", HOW_GOAWAY_AFTER},
    {"RstRefused", HOW_RST_REFUSED},
    {"RstInternal", HOW_RST_INTERNAL},
    {"RstCancel", HOW_RST_CANCEL},
};

struct pstream {
    struct pconn *conn;
    int32_t id;
    char path[128];
    struct strbuf body;
    struct strbuf out; /* response DATA */
    size_t out_off;
    bool hold_data;    /* stop after out: neither EOF nor trailers (CloseMid) */
    bool trailers;     /* trailers follow the data */
    bool no_status;    /* trailers without grpc-status */
    bool bad_status;   /* trailers with a malformed grpc-status */
    unsigned code;     /* grpc-status of the trailers */
    char message[256]; /* grpc-message of the trailers, sent as is */
    char text[128];    /* the request's text, for a held request */
    struct pstream *next;
};

struct pconn {
    struct peer *peer;
    int fd;
    struct ev_io *io;
    nghttp2_session *session;
    uint8_t *out;
    size_t out_len, out_off;
    bool close_when_flushed;
    struct pstream *streams;
    struct pconn *next;
};

struct peer {
    struct ev_loop *loop;
    char path[108];
    bool garbage;
    int fd;
    struct ev_io *io;
    struct pconn *conns;
    struct peer_stats stats;
    struct {
        struct pconn *conn;
        int32_t id;
    } held[MAX_HELD];
    size_t n_held;
};

static void copy_str(char *dst, size_t size, const uint8_t *src, size_t len)
{
    if (len >= size)
        len = size - 1;
    memcpy(dst, src, len);
    dst[len] = '\0';
}

/* ---- connections ---- */

static void pstream_free(struct pstream *st)
{
    struct pconn *c = st->conn;

    for (struct pstream **pp = &c->streams; *pp; pp = &(*pp)->next)
        if (*pp == st) {
            *pp = st->next;
            break;
        }
    strbuf_release(&st->body);
    strbuf_release(&st->out);
    free(st);
}

static void pconn_free(struct pconn *c)
{
    struct peer *p = c->peer;

    for (struct pconn **pp = &p->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    for (size_t i = 0; i < p->n_held;)
        if (p->held[i].conn == c)
            p->held[i] = p->held[--p->n_held];
        else
            i++;
    ev_io_del(c->io);
    close(c->fd);
    if (c->session)
        nghttp2_session_del(c->session);
    while (c->streams)
        pstream_free(c->streams);
    free(c->out);
    free(c);
}

/* Writes what is pending; false when the connection was closed. */
static bool pconn_flush(struct pconn *c)
{
    const uint8_t *data;
    ssize_t n;

    for (;;) {
        if (c->out_off < c->out_len) {
            n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
            if (n < 0 && errno == EAGAIN)
                return ev_io_modify(c->io, EV_READ | EV_WRITE) == 0;
            if (n < 0) {
                pconn_free(c);
                return false;
            }
            c->out_off += (size_t)n;
            continue;
        }
        free(c->out);
        c->out = NULL;
        c->out_len = c->out_off = 0;
        if (!c->session)
            break;
        n = nghttp2_session_mem_send(c->session, &data);
        if (n < 0) {
            pconn_free(c);
            return false;
        }
        if (n == 0)
            break;
        c->out = malloc((size_t)n);
        if (!c->out) {
            pconn_free(c);
            return false;
        }
        memcpy(c->out, data, (size_t)n);
        c->out_len = (size_t)n;
    }
    if (c->close_when_flushed) {
        pconn_free(c);
        return false;
    }
    return ev_io_modify(c->io, EV_READ) == 0;
}

/* ---- answers ---- */

static int stream_add_msg(struct pstream *st, uint8_t flags, const uint8_t *data, size_t len)
{
    uint8_t prefix[5] = {flags, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                         (uint8_t)len};
    int r = strbuf_add(&st->out, prefix, sizeof(prefix));

    return r < 0 ? r : strbuf_add(&st->out, data, len);
}

static int stream_add_reply(struct pstream *st, const char *text, size_t blob_size)
{
    Gptest__EchoReply reply = GPTEST__ECHO_REPLY__INIT;
    _cleanup_free_ uint8_t *blob = NULL, *packed = NULL;
    size_t len;

    reply.text = (char *)(uintptr_t)text;
    if (blob_size > 0) {
        blob = malloc(blob_size);
        if (!blob)
            return -ENOMEM;
        memset(blob, 'b', blob_size);
        reply.blob.data = blob;
        reply.blob.len = blob_size;
    }
    len = gptest__echo_reply__get_packed_size(&reply);
    packed = malloc(len + 1);
    if (!packed)
        return -ENOMEM;
    gptest__echo_reply__pack(&reply, packed);
    return stream_add_msg(st, 0, packed, len);
}

static ssize_t stream_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                           uint32_t *data_flags, nghttp2_data_source *source, void *userdata)
{
    struct pstream *st = source->ptr;
    size_t n = st->out.len - st->out_off;
    char code[16];

    if (n > length)
        n = length;
    if (n > 0)
        memcpy(buf, st->out.buf + st->out_off, n);
    st->out_off += n;
    if (st->out_off < st->out.len)
        return (ssize_t)n;
    if (st->hold_data) {
        if (n == 0)
            return NGHTTP2_ERR_DEFERRED;
        return (ssize_t)n;
    }
    *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    if (st->trailers) {
        nghttp2_nv nv[2];
        size_t k = 0;

        *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        snprintf(code, sizeof(code), "%u", st->code);
        if (st->no_status)
            nv[k++] = (nghttp2_nv){(uint8_t *)"x-peer", (uint8_t *)"no-status", 6, 9, 0};
        else if (st->bad_status)
            nv[k++] = (nghttp2_nv){(uint8_t *)"grpc-status", (uint8_t *)"abc", 11, 3, 0};
        else
            nv[k++] = (nghttp2_nv){(uint8_t *)"grpc-status", (uint8_t *)code, 11, strlen(code), 0};
        if (st->message[0])
            nv[k++] = (nghttp2_nv){(uint8_t *)"grpc-message", (uint8_t *)st->message, 12,
                                   strlen(st->message), 0};
        if (nghttp2_submit_trailer(session, stream_id, nv, k) != 0)
            return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return (ssize_t)n;
}

#define NV(n, v) ((nghttp2_nv){(uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), 0})

/* Headers, then out, then (unless hold_data) trailers or END_STREAM. */
static int stream_respond(struct pstream *st)
{
    nghttp2_nv nv[] = {NV(":status", "200"), NV("content-type", "application/grpc")};
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = stream_read};

    return nghttp2_submit_response(st->conn->session, st->id, nv, ARRAY_SIZE(nv), &prd);
}

static int stream_trailers_only(struct pstream *st, unsigned code, const char *message)
{
    char c[16];
    nghttp2_nv nv[4];

    snprintf(c, sizeof(c), "%u", code);
    nv[0] = NV(":status", "200");
    nv[1] = NV("content-type", "application/grpc");
    nv[2] = NV("grpc-status", c);
    nv[3] = NV("grpc-message", message);
    return nghttp2_submit_response(st->conn->session, st->id, nv, ARRAY_SIZE(nv), NULL);
}

static int stream_http(struct pstream *st, const char *status, const char *ct)
{
    nghttp2_nv nv[] = {NV(":status", status), NV("content-type", ct)};

    return nghttp2_submit_response(st->conn->session, st->id, nv, ARRAY_SIZE(nv), NULL);
}

static enum how how_of(const char *path)
{
    const char *prefix = "/gptest.Peer/";

    if (strncmp(path, prefix, strlen(prefix)) == 0)
        for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
            if (strcmp(path + strlen(prefix), methods[i].name) == 0)
                return methods[i].how;
    return HOW_HTTP_404;
}

static int answer_echo(struct pstream *st, const char *text, size_t blob)
{
    int r = stream_add_reply(st, text, blob);

    st->trailers = true;
    return r < 0 ? r : stream_respond(st);
}

static void hold(struct pstream *st, const char *text)
{
    struct peer *p = st->conn->peer;

    snprintf(st->text, sizeof(st->text), "%s", text);
    if (p->n_held < MAX_HELD) {
        p->held[p->n_held].conn = st->conn;
        p->held[p->n_held].id = st->id;
        p->n_held++;
    }
}

static int answer(struct pstream *st, const Gptest__EchoRequest *req)
{
    nghttp2_session *s = st->conn->session;
    const char *text = req ? req->text : "";
    uint32_t size = req ? req->size : 0, code = req ? req->code : 0;
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f};
    int r;

    switch (how_of(st->path)) {
    case HOW_ECHO:
        return answer_echo(st, text, 0);
    case HOW_BLOB:
        return answer_echo(st, text, size);
    case HOW_TRAILERS_ONLY:
        return stream_trailers_only(st, code, text);
    case HOW_STATUS:
        st->trailers = true;
        st->code = code;
        snprintf(st->message, sizeof(st->message), "%s", text);
        return stream_respond(st);
    case HOW_NO_STATUS:
        st->no_status = true;
        return answer_echo(st, text, 0);
    case HOW_BAD_STATUS:
        st->bad_status = true;
        return answer_echo(st, text, 0);
    case HOW_HTTP_404:
        return stream_http(st, "404", "application/grpc");
    case HOW_HTML:
        return stream_http(st, "200", "text/html");
    case HOW_TWO:
        r = stream_add_reply(st, text, 0);
        if (r < 0)
            return r;
        return answer_echo(st, text, 0);
    case HOW_NONE:
        st->trailers = true;
        return stream_respond(st);
    case HOW_COMPRESSED:
        st->trailers = true;
        r = stream_add_msg(st, 1, (const uint8_t *)"", 0);
        return r < 0 ? r : stream_respond(st);
    case HOW_UNDECODABLE:
        st->trailers = true;
        r = stream_add_msg(st, 0, junk, sizeof(junk));
        return r < 0 ? r : stream_respond(st);
    case HOW_NO_TRAILERS:
        r = stream_add_reply(st, text, 0);
        return r < 0 ? r : stream_respond(st);
    case HOW_TRUNCATED:
    case HOW_CLOSE_MID:
        r = stream_add_reply(st, text, 64);
        if (r < 0)
            return r;
        st->out.len -= 10;
        if (how_of(st->path) == HOW_CLOSE_MID) {
            st->hold_data = true;
            st->conn->close_when_flushed = true;
        } else {
            st->trailers = true;
        }
        return stream_respond(st);
    case HOW_HOLD:
        hold(st, text);
        return 0;
    case HOW_SILENT:
        return 0;
    case HOW_GOAWAY:
        return nghttp2_submit_goaway(s, NGHTTP2_FLAG_NONE, st->id > 2 ? st->id - 2 : 0,
                                     NGHTTP2_NO_ERROR, NULL, 0);
    case HOW_GOAWAY_AFTER:
        r = answer_echo(st, text, 0);
        return r < 0
                   ? r
                   : nghttp2_submit_goaway(s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_NO_ERROR, NULL, 0);
    case HOW_RST_REFUSED:
        return nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_REFUSED_STREAM);
    case HOW_RST_INTERNAL:
        return nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
    case HOW_RST_CANCEL:
        return nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
    }
    return 0;
}

static int on_request(struct pstream *st)
{
    Gptest__EchoRequest *req = NULL;
    int r;

    st->conn->peer->stats.requests++;
    if (st->body.len >= 5)
        req =
            gptest__echo_request__unpack(NULL, st->body.len - 5, (const uint8_t *)st->body.buf + 5);
    r = answer(st, req);
    if (req)
        gptest__echo_request__free_unpacked(req, NULL);
    return r;
}

/* ---- nghttp2 server callbacks ---- */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *userdata)
{
    struct pconn *c = userdata;
    struct pstream *st;

    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    st = calloc(1, sizeof(*st));
    if (!st)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    st->conn = c;
    st->id = frame->hd.stream_id;
    strbuf_init(&st->body, BODY_CAP);
    strbuf_init(&st->out, 0);
    st->next = c->streams;
    c->streams = st;
    return nghttp2_session_set_stream_user_data(session, st->id, st);
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *userdata)
{
    struct pconn *c = userdata;
    struct peer_stats *s = &c->peer->stats;
    struct pstream *st = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    static const struct {
        const char *name;
        size_t offset, size;
    } keep[] = {
        {":authority", offsetof(struct peer_stats, authority), sizeof(s->authority)},
        {"te", offsetof(struct peer_stats, te), sizeof(s->te)},
        {"content-type", offsetof(struct peer_stats, content_type), sizeof(s->content_type)},
        {"user-agent", offsetof(struct peer_stats, user_agent), sizeof(s->user_agent)},
        {"grpc-timeout", offsetof(struct peer_stats, timeout), sizeof(s->timeout)},
        {":method", offsetof(struct peer_stats, method), sizeof(s->method)},
        {":scheme", offsetof(struct peer_stats, scheme), sizeof(s->scheme)},
    };

    if (!st)
        return 0;
    if (namelen == 5 && memcmp(name, ":path", 5) == 0) {
        copy_str(st->path, sizeof(st->path), value, valuelen);
        copy_str(s->path, sizeof(s->path), value, valuelen);
        s->timeout[0] = '\0';
    }
    for (size_t i = 0; i < ARRAY_SIZE(keep); i++)
        if (strlen(keep[i].name) == namelen && memcmp(keep[i].name, name, namelen) == 0)
            copy_str((char *)s + keep[i].offset, keep[i].size, value, valuelen);
    return 0;
}

static int on_data_chunk_recv(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                              const uint8_t *data, size_t len, void *userdata)
{
    struct pstream *st = nghttp2_session_get_stream_user_data(session, stream_id);

    if (st && strbuf_add(&st->body, data, len) < 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *userdata)
{
    struct pconn *c = userdata;
    struct pstream *st;

    switch (frame->hd.type) {
    case NGHTTP2_RST_STREAM:
        if (frame->rst_stream.error_code == NGHTTP2_CANCEL)
            c->peer->stats.rst_cancel++;
        else
            c->peer->stats.rst_other++;
        return 0;
    case NGHTTP2_GOAWAY:
        c->peer->stats.goaway++;
        return 0;
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
        if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
            return 0;
        st = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (st && on_request(st) != 0)
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        return 0;
    default:
        return 0;
    }
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                           void *userdata)
{
    struct pconn *c = userdata;
    struct pstream *st = nghttp2_session_get_stream_user_data(session, stream_id);
    struct peer *p = c->peer;

    for (size_t i = 0; i < p->n_held;)
        if (p->held[i].conn == c && p->held[i].id == stream_id)
            p->held[i] = p->held[--p->n_held];
        else
            i++;
    if (st)
        pstream_free(st);
    return 0;
}

static int session_new(struct pconn *c)
{
    nghttp2_session_callbacks *cbs;
    int r;

    if (nghttp2_session_callbacks_new(&cbs) != 0)
        return -ENOMEM;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk_recv);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    r = nghttp2_session_server_new(&c->session, cbs, c);
    nghttp2_session_callbacks_del(cbs);
    if (r != 0)
        return -ENOMEM;
    return nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, NULL, 0) == 0 ? 0 : -ENOMEM;
}

/* ---- sockets ---- */

static void pconn_io(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    struct pconn *c = userdata;
    uint8_t buf[16384];
    ssize_t n;

    if (revents & EV_READ) {
        n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            pconn_free(c);
            return;
        }
        if (c->session && nghttp2_session_mem_recv(c->session, buf, (size_t)n) < 0) {
            pconn_free(c);
            return;
        }
    }
    pconn_flush(c);
}

static const char garbage[] = "HTTP/1.1 400 Bad Request\r\n\r\n\x00\x00\x12\x04\x00\x00\x00\x00";

static void peer_accept(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    struct peer *p = userdata;
    struct pconn *c;
    int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

    if (cfd < 0)
        return;
    c = calloc(1, sizeof(*c));
    if (!c) {
        close(cfd);
        return;
    }
    c->peer = p;
    c->fd = cfd;
    c->next = p->conns;
    p->conns = c;
    p->stats.connections++;
    if (ev_io_add(p->loop, cfd, EV_READ, pconn_io, c, &c->io) < 0) {
        pconn_free(c);
        return;
    }
    if (p->garbage) {
        c->out = malloc(sizeof(garbage));
        if (c->out) {
            memcpy(c->out, garbage, sizeof(garbage));
            c->out_len = sizeof(garbage);
        }
    } else if (session_new(c) < 0) {
        pconn_free(c);
        return;
    }
    pconn_flush(c);
}

int peer_new(struct ev_loop *loop, const char *path, bool garbage_only, struct peer **ret)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct peer *p;

    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->loop = loop;
    p->garbage = garbage_only;
    snprintf(p->path, sizeof(p->path), "%s", path);
    memcpy(sa.sun_path, path, strlen(path));
    unlink(path);
    p->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->fd < 0 || bind(p->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(p->fd, 16) < 0 ||
        ev_io_add(loop, p->fd, EV_READ, peer_accept, p, &p->io) < 0) {
        int r = negative_errno();

        if (p->fd >= 0)
            close(p->fd);
        free(p);
        return r;
    }
    *ret = p;
    return 0;
}

struct peer *peer_free(struct peer *p)
{
    if (!p)
        return NULL;
    while (p->conns)
        pconn_free(p->conns);
    ev_io_del(p->io);
    close(p->fd);
    unlink(p->path);
    free(p);
    return NULL;
}

const struct peer_stats *peer_stats(const struct peer *p)
{
    return &p->stats;
}

size_t peer_held(const struct peer *p)
{
    return p->n_held;
}

void peer_release_held(struct peer *p)
{
    while (p->n_held > 0) {
        struct pconn *c = p->held[p->n_held - 1].conn;
        int32_t id = p->held[--p->n_held].id;
        struct pstream *st = nghttp2_session_get_stream_user_data(c->session, id);

        if (st && answer_echo(st, st->text, 0) == 0)
            pconn_flush(c);
    }
}
