/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gRPC server against a raw HTTP/2 client on the same loop, over real unix sockets: the normal
 * unary and streaming shapes, then every way a request can be wrong (unknown method, content type,
 * size, compression, decoding, missing or extra messages, headers too large), deadlines, client
 * cancellation and disconnects, graceful shutdown with streams open, flow control with a handler
 * that sends later, and many connections at once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rpc-test.h"
#include "test.pb-c.h"

#define ECHO "/gptest.Test/Echo"
#define WATCH "/gptest.Test/Watch"
#define MAX_HELD 16

struct fx {
    struct ev_loop *loop;
    struct rpc_server *srv;
    char dir[64];
    char path[128];
    struct rpc_call *held[MAX_HELD];
    size_t n_held;
    int cancels;
    int dispatched;
    size_t max_calls_seen;
    bool done;
};

static void forget(struct fx *fx, struct rpc_call *call)
{
    for (size_t i = 0; i < fx->n_held; i++) {
        if (fx->held[i] == call) {
            fx->held[i] = fx->held[--fx->n_held];
            return;
        }
    }
    fail_msg("cancelled call was not held");
}

static void on_cancel(struct rpc_call *call, void *userdata)
{
    struct fx *fx = userdata;

    fx->cancels++;
    forget(fx, call);
}

static void hold(struct fx *fx, struct rpc_call *call, bool with_cancel)
{
    assert_true(fx->n_held < MAX_HELD);
    fx->held[fx->n_held++] = call;
    if (with_cancel)
        rpc_call_on_cancel(call, on_cancel, fx);
}

static void echo(struct rpc_call *call, const ProtobufCMessage *request, void *userdata)
{
    const Gptest__Req *req = (const Gptest__Req *)request;
    Gptest__Resp resp = GPTEST__RESP__INIT;
    struct fx *fx = userdata;

    fx->dispatched++;
    if (rpc_server_calls(fx->srv) > fx->max_calls_seen)
        fx->max_calls_seen = rpc_server_calls(fx->srv);
    if (strcmp(req->name, "fail") == 0) {
        (void)rpc_call_finish(call, (enum rpc_code)req->n, "bad %s", "%/\xc3\xbc\n");
        return;
    }
    if (strcmp(req->name, "hold") == 0 || strcmp(req->name, "hold-nocb") == 0) {
        hold(fx, call, strcmp(req->name, "hold") == 0);
        return;
    }
    resp.text = req->name;
    resp.n = req->n + 1;
    if (strcmp(req->name, "meta") == 0) {
        const char *v = rpc_call_header(call, "x-test");

        resp.text = (char *)(v ? v : "none");
        resp.n = (int64_t)rpc_call_deadline_ms(call);
        assert_string_equal(rpc_call_path(call), ECHO);
    }
    assert_int_equal(rpc_call_reply(call, &resp.base), 0);
}

/* Sends req->n messages with req->blob as payload, then keeps the call open. */
static void watch(struct rpc_call *call, const ProtobufCMessage *request, void *userdata)
{
    const Gptest__Req *req = (const Gptest__Req *)request;
    Gptest__Resp resp = GPTEST__RESP__INIT;
    struct fx *fx = userdata;

    fx->dispatched++;
    resp.blob = req->blob;
    for (int64_t i = 0; i < req->n; i++) {
        resp.n = i;
        assert_int_equal(rpc_call_send(call, &resp.base), 0);
    }
    if (strcmp(req->name, "end") == 0) {
        assert_int_equal(rpc_call_finish(call, RPC_OK, NULL), 0);
        return;
    }
    hold(fx, call, true);
}

static void fx_server(struct fx *fx, const struct rpc_server_options *opts)
{
    struct rpc_method echo_m = {
        .path = ECHO,
        .request = &gptest__req__descriptor,
        .response = &gptest__resp__descriptor,
        .handler = echo,
        .userdata = fx,
    };
    struct rpc_method watch_m = {
        .path = WATCH,
        .request = &gptest__req__descriptor,
        .response = &gptest__resp__descriptor,
        .server_streaming = true,
        .handler = watch,
        .userdata = fx,
    };
    struct diag d;

    assert_int_equal(rpc_server_new(fx->loop, opts, &fx->srv), 0);
    assert_int_equal(rpc_server_add_method(fx->srv, &echo_m), 0);
    assert_int_equal(rpc_server_add_method(fx->srv, &watch_m), 0);
    assert_int_equal(rpc_server_add_method(fx->srv, &echo_m), -EEXIST);
    assert_int_equal(rpc_server_listen(fx->srv, fx->path, &d), 0);
}

static int setup_opts(void **state, const struct rpc_server_options *opts)
{
    struct fx *fx = calloc(1, sizeof(*fx));

    assert_non_null(fx);
    assert_int_equal(ev_loop_new(&fx->loop), 0);
    (void)snprintf(fx->dir, sizeof(fx->dir), "/tmp/rpc-test-XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    (void)snprintf(fx->path, sizeof(fx->path), "%s/s.sock", fx->dir);
    fx_server(fx, opts);
    *state = fx;
    return 0;
}

static int setup(void **state)
{
    return setup_opts(state, NULL);
}

static int setup_small(void **state)
{
    struct rpc_server_options o = {
        .max_recv_message = 1024, .max_concurrent_streams = 2, .max_header_list = 4096};

    return setup_opts(state, &o);
}

static int teardown(void **state)
{
    struct fx *fx = *state;

    fx->srv = rpc_server_free(fx->srv);
    /* Our socket is gone with the server. */
    assert_int_equal(access(fx->path, F_OK), -1);
    assert_int_equal(rmdir(fx->dir), 0);
    fx->loop = ev_loop_free(fx->loop);
    free(fx);
    return 0;
}

static Gptest__Req req_of(const char *name, int64_t n)
{
    Gptest__Req req = GPTEST__REQ__INIT;

    req.name = (char *)name;
    req.n = n;
    return req;
}

static bool no_calls(void *p)
{
    struct fx *fx = p;

    return rpc_server_calls(fx->srv) == 0;
}

static bool no_connections(void *p)
{
    struct fx *fx = p;

    return rpc_server_connections(fx->srv) == 0;
}

static bool held_one(void *p)
{
    return ((struct fx *)p)->n_held == 1;
}

static bool held_two(void *p)
{
    return ((struct fx *)p)->n_held == 2;
}

static bool one_cancel_one_conn(void *p)
{
    struct fx *fx = p;

    return fx->cancels == 1 && rpc_server_connections(fx->srv) == 1;
}

static void test_unary_ok(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    Gptest__Req req = req_of("hello", 41);
    ProtobufCMessage *m = NULL;
    struct tstream *ts = tc_call(tc, ECHO, NULL, &req.base, true);

    assert_true(run_until(fx->loop, ts_is_closed, ts));
    assert_false(ts->trailers_only);
    assert_string_equal(rpc_header_list_get(&ts->headers, ":status"), "200");
    assert_string_equal(rpc_header_list_get(&ts->headers, "content-type"), "application/grpc");
    assert_int_equal(ts_status(ts), RPC_OK);
    assert_null(rpc_header_list_get(&ts->trailers, "grpc-message"));
    assert_int_equal(ts_messages(ts, &gptest__resp__descriptor, 0, &m), 1);
    assert_string_equal(((Gptest__Resp *)m)->text, "hello");
    assert_int_equal(((Gptest__Resp *)m)->n, 42);
    protobuf_c_message_free_unpacked(m, NULL);
    assert_false(ts->rst);
    assert_true(run_until(fx->loop, no_calls, fx));
    tc_free(tc);
}

static void test_metadata_and_deadline(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    Gptest__Req req = req_of("meta", 0);
    struct strbuf body = STRBUF_INIT;
    nghttp2_nv nva[] = {
        rpc_nv(":method", "POST"),
        rpc_nv(":scheme", "http"),
        rpc_nv(":authority", "/x/y.sock"),
        rpc_nv(":path", ECHO),
        rpc_nv("content-type", "application/grpc+proto"),
        rpc_nv("grpc-timeout", "10S"),
        rpc_nv("x-test", "v1"),
    };
    ProtobufCMessage *m = NULL;
    struct tstream *ts;

    assert_int_equal(rpc_msg_encode(&body, &req.base, 0), 0);
    ts = tc_start(tc, nva, ARRAY_SIZE(nva), body.buf, body.len, true);
    assert_true(run_until(fx->loop, ts_is_closed, ts));
    assert_int_equal(ts_status(ts), RPC_OK);
    assert_int_equal(ts_messages(ts, &gptest__resp__descriptor, 0, &m), 1);
    assert_string_equal(((Gptest__Resp *)m)->text, "v1");
    /* The deadline is absolute, on the loop's clock, about 10 s ahead. */
    assert_true(((Gptest__Resp *)m)->n >= (int64_t)ev_loop_now_ms(fx->loop) + 9000);
    protobuf_c_message_free_unpacked(m, NULL);
    strbuf_release(&body);
    tc_free(tc);
}

/* A status before any message: one HEADERS block with END_STREAM and everything in it. */
static void assert_trailers_only(const struct tstream *ts, const char *http_status, int code,
                                 const char *message)
{
    char buf[RPC_STATUS_MESSAGE_MAX];

    assert_true(ts->trailers_only);
    assert_int_equal(ts->blocks, 1);
    assert_int_equal(ts->data.len, 0);
    assert_string_equal(rpc_header_list_get(&ts->headers, ":status"), http_status);
    assert_string_equal(rpc_header_list_get(&ts->headers, "content-type"), "application/grpc");
    assert_int_equal(ts_status(ts), code);
    assert_string_equal(ts_message(ts, buf, sizeof(buf)), message);
}

static void test_unknown_method(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    Gptest__Req req = req_of("x", 0);
    struct tstream *a = tc_call(tc, "/gptest.Test/Nope", NULL, &req.base, true);
    struct tstream *b = tc_call(tc, "/other.Svc/Echo", NULL, &req.base, true);
    struct tstream *c = tc_call(tc, "/nomethod", NULL, &req.base, true);

    assert_true(run_until(fx->loop, ts_is_closed, a));
    assert_true(run_until(fx->loop, ts_is_closed, b));
    assert_true(run_until(fx->loop, ts_is_closed, c));
    assert_trailers_only(a, "200", RPC_UNIMPLEMENTED,
                         "unknown method Nope for service gptest.Test");
    assert_trailers_only(b, "200", RPC_UNIMPLEMENTED, "unknown service other.Svc");
    assert_trailers_only(c, "200", RPC_UNIMPLEMENTED, "malformed method name: \"/nomethod\"");
    assert_int_equal(fx->dispatched, 0);
    tc_free(tc);
}

static void test_bad_content_type(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    nghttp2_nv nva[] = {
        rpc_nv(":method", "POST"),
        rpc_nv(":scheme", "http"),
        rpc_nv(":authority", "localhost"),
        rpc_nv(":path", ECHO),
        rpc_nv("content-type", "application/json"),
    };
    struct tstream *ts = tc_start(tc, nva, ARRAY_SIZE(nva), "{}", 2, true);

    assert_true(run_until(fx->loop, ts_is_closed, ts));
    assert_trailers_only(ts, "415", RPC_INVALID_ARGUMENT,
                         "invalid gRPC request content-type \"application/json\"");
    tc_free(tc);
}

static void test_oversized(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    Gptest__Req req = req_of("big", 0);
    uint8_t blob[2000] = {0};
    struct tstream *ts;
    char buf[256];

    req.blob.data = blob;
    req.blob.len = sizeof(blob);
    /* No END_STREAM: the server answers early and then resets the stream. */
    ts = tc_call(tc, ECHO, NULL, &req.base, false);
    assert_true(run_until(fx->loop, ts_is_closed, ts));
    assert_trailers_only(ts, "200", RPC_RESOURCE_EXHAUSTED, ts_message(ts, buf, sizeof(buf)));
    assert_non_null(strstr(buf, "grpc: received message larger than max ("));
    assert_non_null(strstr(buf, " vs. 1024)"));
    assert_true(ts->rst);
    assert_int_equal(ts->rst_code, NGHTTP2_NO_ERROR);
    assert_int_equal(fx->dispatched, 0);
    tc_free(tc);
}

static void test_deadline(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    Gptest__Req req = req_of("hold", 0);
    struct tstream *held = tc_call(tc, ECHO, "30m", &req.base, true);
    /* Still sending (no END_STREAM) when the deadline passes: reset with CANCEL. */
    struct tstream *open = tc_call(tc, ECHO, "20m", &req.base, false);
    char buf[256];

    assert_true(run_until(fx->loop, ts_is_closed, held));
    assert_true(run_until(fx->loop, ts_is_closed, open));
    assert_int_equal(ts_status(held), RPC_DEADLINE_EXCEEDED);
    assert_string_equal(ts_message(held, buf, sizeof(buf)), "context deadline exceeded");
    assert_int_equal(fx->cancels, 1);
    assert_int_equal(fx->n_held, 0);
    assert_int_equal(ts_status(open), RPC_DEADLINE_EXCEEDED);
    assert_true(open->rst);
    assert_int_equal(open->rst_code, NGHTTP2_CANCEL);
    assert_true(run_until(fx->loop, no_calls, fx));
    tc_free(tc);
}

/* A handler without a cancel callback keeps its call after the deadline and answers into the void.
 */
static void test_deadline_orphan(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    Gptest__Req req = req_of("hold-nocb", 0);
    Gptest__Resp resp = GPTEST__RESP__INIT;
    struct tstream *ts = tc_call(tc, ECHO, "10m", &req.base, true);

    assert_true(run_until(fx->loop, ts_is_closed, ts));
    assert_int_equal(ts_status(ts), RPC_DEADLINE_EXCEEDED);
    assert_int_equal(fx->n_held, 1);
    assert_int_equal(rpc_server_calls(fx->srv), 1);
    /* rpc_call_send is for streaming calls. */
    assert_int_equal(rpc_call_send(fx->held[0], &resp.base), -EINVAL);
    assert_int_equal(rpc_call_reply(fx->held[0], &resp.base), -ECANCELED);
    fx->n_held = 0;
    assert_int_equal(rpc_server_calls(fx->srv), 0);
    tc_free(tc);
}

static bool got_two_messages(void *p)
{
    return ts_messages(p, &gptest__resp__descriptor, 0, NULL) >= 2;
}

static void test_cancel_streaming(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    Gptest__Req req = req_of("watch", 2);
    struct tstream *ts = tc_call(tc, WATCH, NULL, &req.base, true);

    assert_true(run_until(fx->loop, got_two_messages, ts));
    assert_int_equal(fx->n_held, 1);
    tc_rst(tc, ts, NGHTTP2_CANCEL);
    assert_true(run_until(fx->loop, no_calls, fx));
    assert_int_equal(fx->cancels, 1);
    assert_int_equal(fx->n_held, 0);
    /* The connection lives on. */
    req = req_of("again", 1);
    ts = tc_call(tc, ECHO, NULL, &req.base, true);
    assert_true(run_until(fx->loop, ts_is_closed, ts));
    assert_int_equal(ts_status(ts), RPC_OK);
    tc_free(tc);
}

static void test_disconnect(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    struct tconn *other = tc_connect(fx->loop, fx->path);
    Gptest__Req req = req_of("watch", 2);
    struct tstream *ts = tc_call(tc, WATCH, NULL, &req.base, true);
    struct tstream *ts2 = tc_call(other, WATCH, NULL, &req.base, true);

    assert_true(run_until(fx->loop, got_two_messages, ts));
    assert_true(run_until(fx->loop, got_two_messages, ts2));
    tc_free(tc);
    assert_true(run_until(fx->loop, one_cancel_one_conn, fx));
    assert_int_equal(fx->n_held, 1);
    assert_int_equal(rpc_call_finish(fx->held[0], RPC_OK, NULL), 0);
    fx->n_held = 0;
    assert_true(run_until(fx->loop, ts_is_closed, ts2));
    assert_int_equal(ts_status(ts2), RPC_OK);
    tc_free(other);
    assert_true(run_until(fx->loop, no_connections, fx));
}

static void test_percent_message(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    Gptest__Req req = req_of("fail", RPC_FAILED_PRECONDITION);
    struct tstream *ts = tc_call(tc, ECHO, NULL, &req.base, true);

    assert_true(run_until(fx->loop, ts_is_closed, ts));
    assert_trailers_only(ts, "200", RPC_FAILED_PRECONDITION, "bad %/\xc3\xbc\n");
    assert_string_equal(rpc_header_list_get(&ts->headers, "grpc-message"), "bad %25/%C3%BC%0A");
    tc_free(tc);
}

static void on_done(void *userdata)
{
    struct fx *fx = userdata;

    fx->done = true;
}

static bool is_done(void *p)
{
    return ((struct fx *)p)->done;
}

static bool stream_closed(void *p)
{
    return ((struct tstream *)p)->closed;
}

static bool goaway_and_stream_closed(void *p)
{
    struct tstream *ts = p;

    return ts->tc->goaway && ts->closed;
}

static void test_shutdown(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    Gptest__Req w = req_of("watch", 1), u = req_of("hold", 0);
    Gptest__Resp resp = GPTEST__RESP__INIT;
    struct tstream *ws = tc_call(tc, WATCH, NULL, &w.base, true);
    struct tstream *us = tc_call(tc, ECHO, NULL, &u.base, true);
    struct rpc_call *unary;

    assert_true(run_until(fx->loop, held_two, fx));
    assert_int_equal(fx->n_held, 2);
    unary = fx->held[1];
    rpc_server_shutdown(fx->srv, on_done, fx);
    /* Not listening any more: the socket is gone at once. */
    assert_int_equal(access(fx->path, F_OK), -1);
    assert_true(run_until(fx->loop, goaway_and_stream_closed, ws));
    assert_int_equal(tc->goaway_code, NGHTTP2_NO_ERROR);
    assert_int_equal(ts_status(ws), RPC_OK);
    assert_int_equal(ts_messages(ws, &gptest__resp__descriptor, 0, NULL), 1);
    assert_int_equal(fx->cancels, 1);
    /* The unary call in flight still answers. */
    assert_false(fx->done);
    assert_false(us->closed);
    assert_ptr_equal(fx->held[0], unary);
    fx->n_held = 0;
    assert_int_equal(rpc_call_reply(unary, &resp.base), 0);
    assert_true(run_until(fx->loop, is_done, fx));
    /* The server is done once it has sent the reply; the client reads it in a later turn. */
    assert_true(run_until(fx->loop, stream_closed, us));
    assert_int_equal(ts_status(us), RPC_OK);
    assert_int_equal(rpc_server_connections(fx->srv), 0);
    assert_true(run_until(fx->loop, tc_is_eof, tc));
    tc_free(tc);
}

static void test_shutdown_idle(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    Gptest__Req req = req_of("ping", 0);
    struct tstream *ts = tc_call(tc, ECHO, NULL, &req.base, true);

    assert_true(run_until(fx->loop, ts_is_closed, ts));
    rpc_server_shutdown(fx->srv, on_done, fx);
    assert_true(run_until(fx->loop, is_done, fx));
    assert_true(run_until(fx->loop, tc_is_eof, tc));
    assert_true(tc->goaway);
    tc_free(tc);
    /* Nothing open: done comes on the next iteration. */
    fx->done = false;
    rpc_server_shutdown(fx->srv, on_done, fx);
    assert_true(run_until(fx->loop, is_done, fx));
}

#define N_CONNS 50

struct many {
    struct tstream *ts[N_CONNS];
};

static bool all_closed(void *p)
{
    struct many *m = p;

    for (size_t i = 0; i < N_CONNS; i++)
        if (!m->ts[i]->closed)
            return false;
    return true;
}

static void test_many_connections(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc[N_CONNS];
    struct many m;

    for (size_t i = 0; i < N_CONNS; i++) {
        Gptest__Req req = req_of("many", (int64_t)i);

        tc[i] = tc_connect(fx->loop, fx->path);
        m.ts[i] = tc_call(tc[i], ECHO, NULL, &req.base, true);
    }
    assert_true(run_until(fx->loop, all_closed, &m));
    assert_int_equal(rpc_server_connections(fx->srv), N_CONNS);
    for (size_t i = 0; i < N_CONNS; i++) {
        ProtobufCMessage *msg = NULL;

        assert_int_equal(ts_status(m.ts[i]), RPC_OK);
        assert_int_equal(ts_messages(m.ts[i], &gptest__resp__descriptor, 0, &msg), 1);
        assert_int_equal(((Gptest__Resp *)msg)->n, (int64_t)i + 1);
        protobuf_c_message_free_unpacked(msg, NULL);
        tc_free(tc[i]);
    }
    assert_true(run_until(fx->loop, no_connections, fx));
}

static struct tstream *raw_message(struct tconn *tc, const char *encoding, uint8_t flag,
                                   const void *body, size_t len)
{
    nghttp2_nv nva[] = {
        rpc_nv(":method", "POST"),
        rpc_nv(":scheme", "http"),
        rpc_nv(":authority", "localhost"),
        rpc_nv(":path", ECHO),
        rpc_nv("content-type", "application/grpc"),
        rpc_nv("grpc-encoding", encoding ? encoding : ""),
    };
    uint8_t msg[64] = {flag, 0, 0, 0, (uint8_t)len};

    assert_true(len <= sizeof(msg) - RPC_PREFIX_LEN);
    memcpy(msg + RPC_PREFIX_LEN, body, len);
    return tc_start(tc, nva, ARRAY_SIZE(nva) - (encoding ? 0 : 1), msg, RPC_PREFIX_LEN + len, true);
}

static void test_bad_messages(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    static const struct {
        const char *encoding;
        uint8_t flag;
        const char *body;
        int code;
    } cases[] = {
        {"gzip", 1, "\x1f\x8b", RPC_UNIMPLEMENTED},
        {NULL, 1, "x", RPC_INTERNAL},
        {"identity", 1, "x", RPC_INTERNAL},
        {NULL, 2, "x", RPC_INTERNAL},
        {NULL, 0, "\xff\xff\xff", RPC_INVALID_ARGUMENT}, /* not protobuf */
        {NULL, 0, "\x0a\x05zz", RPC_INVALID_ARGUMENT},   /* truncated string field */
    };

    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        struct tstream *ts =
            raw_message(tc, cases[i].encoding, cases[i].flag, cases[i].body, strlen(cases[i].body));

        assert_true(run_until(fx->loop, ts_is_closed, ts));
        assert_true(ts->trailers_only);
        assert_int_equal(ts_status(ts), cases[i].code);
    }
    assert_int_equal(fx->dispatched, 0);
    tc_free(tc);
}

static void test_message_count(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    Gptest__Req req = req_of("x", 0);
    struct strbuf two = STRBUF_INIT;
    struct tstream *none = tc_call(tc, ECHO, NULL, NULL, true);
    const uint8_t cut[] = {0, 0, 0, 0, 9, 1};
    struct tstream *truncated = raw_message(tc, NULL, 0, "", 0);
    nghttp2_nv nva[] = {
        rpc_nv(":method", "POST"),
        rpc_nv(":scheme", "http"),
        rpc_nv(":authority", "l"),
        rpc_nv(":path", ECHO),
        rpc_nv("content-type", "application/grpc"),
    };
    struct tstream *ts2, *ts3;

    assert_int_equal(rpc_msg_encode(&two, &req.base, 0), 0);
    assert_int_equal(rpc_msg_encode(&two, &req.base, 0), 0);
    ts2 = tc_start(tc, nva, ARRAY_SIZE(nva), two.buf, two.len, true);
    ts3 = tc_start(tc, nva, ARRAY_SIZE(nva), cut, sizeof(cut), true);
    assert_true(run_until(fx->loop, ts_is_closed, none));
    assert_true(run_until(fx->loop, ts_is_closed, ts2));
    assert_true(run_until(fx->loop, ts_is_closed, ts3));
    assert_true(run_until(fx->loop, ts_is_closed, truncated));
    assert_int_equal(ts_status(none), RPC_INTERNAL);
    assert_int_equal(ts_status(ts2), RPC_INTERNAL);
    assert_int_equal(ts_status(ts3), RPC_INTERNAL);
    /* An empty message is a valid empty request. */
    assert_int_equal(ts_status(truncated), RPC_OK);
    assert_int_equal(fx->dispatched, 1);
    strbuf_release(&two);
    tc_free(tc);
}

static void test_garbage(void **state)
{
    struct fx *fx = *state;
    struct tconn *good = tc_connect(fx->loop, fx->path);
    struct tconn *bad = tc_connect(fx->loop, fx->path);
    Gptest__Req req = req_of("still here", 0);
    struct tstream *ts = tc_call(good, ECHO, NULL, &req.base, true);
    static const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    struct tconn *bad2;

    assert_true(run_until(fx->loop, ts_is_closed, ts));
    tc_write_raw(bad, junk, sizeof(junk) - 1);
    assert_true(run_until(fx->loop, tc_is_eof, bad));
    /* A frame with a bogus length after a valid preface. */
    bad2 = tc_connect(fx->loop, fx->path);
    tc_write_raw(bad2, "\xff\xff\xff\x00\x00\x00\x00\x00\x01garbage", 16);
    assert_true(run_until(fx->loop, tc_is_eof, bad2));
    ts = tc_call(good, ECHO, NULL, &req.base, true);
    assert_true(run_until(fx->loop, ts_is_closed, ts));
    assert_int_equal(ts_status(ts), RPC_OK);
    assert_int_equal(rpc_server_connections(fx->srv), 1);
    tc_free(bad);
    tc_free(bad2);
    tc_free(good);
}

#define LATER_MSGS 200

static bool got_all_later(void *p)
{
    return ts_messages(p, &gptest__resp__descriptor, 0, NULL) == LATER_MSGS;
}

/* A streaming handler sends from outside any callback, more than the flow-control window holds. */
static void test_stream_later(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    Gptest__Req req = req_of("watch", 0);
    Gptest__Resp resp = GPTEST__RESP__INIT;
    uint8_t blob[1000];
    struct tstream *ts = tc_call(tc, WATCH, NULL, &req.base, true);
    ProtobufCMessage *m = NULL;

    memset(blob, 'b', sizeof(blob));
    resp.blob.data = blob;
    resp.blob.len = sizeof(blob);
    assert_true(run_until(fx->loop, held_one, fx));
    assert_false(ts->closed);
    for (int i = 0; i < LATER_MSGS; i++) {
        resp.n = i;
        assert_int_equal(rpc_call_send(fx->held[0], &resp.base), 0);
    }
    assert_true(run_until(fx->loop, got_all_later, ts));
    assert_int_equal(ts_messages(ts, &gptest__resp__descriptor, LATER_MSGS - 1, &m), LATER_MSGS);
    assert_int_equal(((Gptest__Resp *)m)->n, LATER_MSGS - 1);
    protobuf_c_message_free_unpacked(m, NULL);
    /* The wrong message type is refused; the call stays usable. */
    assert_int_equal(rpc_call_send(fx->held[0], &req.base), -EINVAL);
    assert_int_equal(rpc_call_finish(fx->held[0], RPC_ABORTED, "enough"), 0);
    fx->n_held = 0;
    assert_true(run_until(fx->loop, ts_is_closed, ts));
    assert_false(ts->trailers_only);
    assert_int_equal(ts_status(ts), RPC_ABORTED);
    tc_free(tc);
}

static void test_header_limit(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    Gptest__Req req = req_of("x", 0);
    struct strbuf body = STRBUF_INIT;
    char big[8000];
    nghttp2_nv nva[] = {
        rpc_nv(":method", "POST"),
        rpc_nv(":scheme", "http"),
        rpc_nv(":authority", "l"),
        rpc_nv(":path", ECHO),
        rpc_nv("content-type", "application/grpc"),
        rpc_nv("x-big", big),
    };
    struct tstream *ts;

    memset(big, 'h', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    nva[5].valuelen = strlen(big);
    assert_int_equal(rpc_msg_encode(&body, &req.base, 0), 0);
    ts = tc_start(tc, nva, ARRAY_SIZE(nva), body.buf, body.len, true);
    assert_true(run_until(fx->loop, ts_is_closed, ts));
    assert_true(ts->rst || ts->close_code != NGHTTP2_NO_ERROR);
    assert_int_equal(fx->dispatched, 0);
    ts = tc_call(tc, ECHO, NULL, &req.base, true);
    assert_true(run_until(fx->loop, ts_is_closed, ts));
    assert_int_equal(ts_status(ts), RPC_OK);
    strbuf_release(&body);
    tc_free(tc);
}

static void test_concurrent_streams(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    Gptest__Req req = req_of("hold", 0);
    struct tstream *ts[3];

    /* Let the client learn the limit first. */
    ts[0] = tc_call(tc, ECHO, NULL, &req.base, true);
    assert_true(run_until(fx->loop, held_one, fx));
    ts[1] = tc_call(tc, ECHO, NULL, &req.base, true);
    ts[2] = tc_call(tc, ECHO, NULL, &req.base, true);
    assert_true(run_until(fx->loop, held_two, fx));
    assert_true(fx->max_calls_seen <= 2);
    for (int round = 0; round < 2; round++) {
        Gptest__Resp resp = GPTEST__RESP__INIT;

        while (fx->n_held > 0)
            assert_int_equal(rpc_call_reply(fx->held[--fx->n_held], &resp.base), 0);
        if (round == 0)
            assert_true(run_until(fx->loop, held_one, fx));
    }
    for (int i = 0; i < 3; i++) {
        assert_true(run_until(fx->loop, ts_is_closed, ts[i]));
        assert_int_equal(ts_status(ts[i]), RPC_OK);
    }
    assert_true(fx->max_calls_seen <= 2);
    tc_free(tc);
}

/* rpc_server_free with streams open: cancel callbacks run, nothing leaks. */
static void test_free_with_open_calls(void **state)
{
    struct fx *fx = *state;
    struct tconn *tc = tc_connect(fx->loop, fx->path);
    Gptest__Req w = req_of("watch", 1), u = req_of("hold-nocb", 0);
    struct tstream *ws = tc_call(tc, WATCH, NULL, &w.base, true);
    struct tstream *us = tc_call(tc, ECHO, NULL, &u.base, true);

    assert_true(run_until(fx->loop, held_two, fx));
    fx->srv = rpc_server_free(fx->srv);
    assert_int_equal(fx->cancels, 1);
    assert_true(run_until(fx->loop, tc_is_eof, tc));
    assert_false(ws->ended);
    assert_false(us->ended);
    tc_free(tc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_unary_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metadata_and_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_method, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_content_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_oversized, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline_orphan, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_streaming, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disconnect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_percent_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_idle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_connections, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_messages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_message_count, setup, teardown),
        cmocka_unit_test_setup_teardown(test_garbage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stream_later, setup, teardown),
        cmocka_unit_test_setup_teardown(test_header_limit, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_streams, setup_small, teardown),
        cmocka_unit_test_setup_teardown(test_free_with_open_calls, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
