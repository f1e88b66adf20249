/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rpc client against a scriptable HTTP/2 peer on the same loop (rpc-peer.c): the request it
 * sends, every shape of answer and how each maps to a status, deadlines, GOAWAY, connections that
 * fail or break, freeing with calls in flight, and the blocking call (peer on its own thread).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include <cmocka.h>

#include "rpc-peer.h"
#include "rpc.h"
#include "test-echo.pb-c.h"

#define TEST_DEADLINE_MS 20000u

struct fixture {
    char dir[64];
    char path[128];
    struct ev_loop *loop;
    struct peer *peer;
    struct rpc_client *client;
};

struct result {
    struct ev_loop *loop;
    bool done;
    unsigned n;
    struct rpc_status status;
    char text[256];
    size_t blob_len;
    struct rpc_client **free_client; /* freed from the callback when set */
};

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void deadline_cb(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    ev_loop_stop(userdata, -ETIMEDOUT);
}

static void poll_cb(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    ev_loop_stop(userdata, 0);
}

/* Runs the loop until cond(arg) holds; fails the test after TEST_DEADLINE_MS. Polls every 5 ms
 * as well as after every stop a callback asks for. */
static void run_until(struct ev_loop *loop, bool (*cond)(void *arg), void *arg)
{
    struct ev_timer *deadline = NULL, *poll = NULL;

    assert_int_equal(ev_timer_add(loop, TEST_DEADLINE_MS, 0, deadline_cb, loop, &deadline), 0);
    assert_int_equal(ev_timer_add(loop, 5, 5, poll_cb, loop, &poll), 0);
    while (!cond(arg))
        assert_int_equal(ev_loop_run(loop), 0);
    ev_timer_del(deadline);
    ev_timer_del(poll);
}

static bool result_done(void *arg)
{
    return ((struct result *)arg)->done;
}

static void on_reply(const struct rpc_status *status, const ProtobufCMessage *response,
                     void *userdata)
{
    struct result *res = userdata;
    const Gptest__EchoReply *reply = (const Gptest__EchoReply *)response;

    res->n++;
    res->done = true;
    res->status = *status;
    if (status->code == RPC_OK) {
        assert_non_null(reply);
        assert_ptr_equal(response->descriptor, &gptest__echo_reply__descriptor);
        snprintf(res->text, sizeof(res->text), "%s", reply->text);
        res->blob_len = reply->blob.len;
    } else {
        assert_null(response);
    }
    if (res->free_client)
        *res->free_client = rpc_client_free(*res->free_client);
    if (res->loop)
        ev_loop_stop(res->loop, 0);
}

static int start(struct rpc_client *client, const char *method, const char *text, uint32_t size,
                 uint32_t code, uint32_t timeout_ms, struct result *res)
{
    Gptest__EchoRequest req = GPTEST__ECHO_REQUEST__INIT;
    char path[128];

    req.text = (char *)(uintptr_t)text;
    req.size = size;
    req.code = code;
    snprintf(path, sizeof(path), "/gptest.Peer/%s", method);
    return rpc_client_call(client, path, &req.base, &gptest__echo_reply__descriptor, timeout_ms,
                           on_reply, res);
}

static struct result call(struct fixture *f, const char *method, const char *text, uint32_t size,
                          uint32_t code, uint32_t timeout_ms)
{
    struct result res = {.loop = f->loop};

    assert_int_equal(start(f->client, method, text, size, code, timeout_ms, &res), 0);
    assert_false(res.done); /* never from inside rpc_client_call */
    run_until(f->loop, result_done, &res);
    assert_int_equal(res.n, 1);
    return res;
}

static int setup_opts(void **state, const struct rpc_client_options *opts)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/gp-rpc-client-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/peer.sock", f->dir);
    assert_int_equal(ev_loop_new(&f->loop), 0);
    assert_int_equal(peer_new(f->loop, f->path, false, &f->peer), 0);
    assert_int_equal(rpc_client_new(f->loop, f->path, opts, &f->client), 0);
    *state = f;
    return 0;
}

static int setup(void **state)
{
    struct rpc_client_options opts = {.max_recv_message = 64 * 1024};

    return setup_opts(state, &opts);
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char p[160];

    rpc_client_free(f->client);
    peer_free(f->peer);
    ev_loop_free(f->loop);
    snprintf(p, sizeof(p), "%s/other.sock", f->dir);
    unlink(p);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* ---- the request and the plain answer ---- */

static void test_echo(void **state)
{
    struct fixture *f = *state;
    struct result res = call(f, "Echo", "hello", 0, 0, 0);
    const struct peer_stats *s = peer_stats(f->peer);

    assert_int_equal(res.status.code, RPC_OK);
    assert_string_equal(res.status.message, "");
    assert_string_equal(res.text, "hello");
    assert_string_equal(s->method, "POST");
    assert_string_equal(s->scheme, "http");
    assert_string_equal(s->path, "/gptest.Peer/Echo");
    assert_string_equal(s->authority, "localhost");
    assert_string_equal(s->te, "trailers");
    assert_string_equal(s->content_type, "application/grpc");
    assert_string_equal(s->timeout, "");
    assert_false(rpc_client_closed(f->client));
    assert_int_equal(rpc_client_calls(f->client), 0);
    /* A stream that ended normally is not reset (a second call makes sure the peer has read all
     * the first one sent). */
    res = call(f, "Echo", "again", 0, 0, 0);
    assert_int_equal(res.status.code, RPC_OK);
    assert_int_equal(s->rst_cancel + s->rst_other, 0);
}

static void test_timeout_header(void **state)
{
    struct fixture *f = *state;
    struct result res = call(f, "Echo", "t", 0, 0, 1500);

    assert_int_equal(res.status.code, RPC_OK);
    assert_string_equal(peer_stats(f->peer)->timeout, "1500m");
}

static void test_large_response(void **state)
{
    struct fixture *f = *state;
    struct result res = call(f, "Blob", "big", 60000, 0, 0);

    assert_int_equal(res.status.code, RPC_OK);
    assert_int_equal(res.blob_len, 60000);
}

/* ---- how each answer maps to a status; the connection stays usable after each ---- */

static const struct {
    const char *method;
    const char *text;
    uint32_t size, code;
    enum rpc_code want;
    const char *message; /* NULL: not checked */
} answers[] = {
    {"TrailersOnly", "not%20found%zz%", 0, 5, RPC_NOT_FOUND, "not found%zz%"},
    {"TrailersOnly", "caf%C3%A9", 0, 2, RPC_UNKNOWN, "caf\xc3\xa9"},
    {"TrailersOnly", "odd", 0, 99, RPC_UNKNOWN, "odd"},
    {"Status", "bad thing", 0, 3, RPC_INVALID_ARGUMENT, "bad thing"},
    {"Status", "", 0, 0, RPC_INTERNAL, "no response message"},
    {"NoStatus", "x", 0, 0, RPC_UNKNOWN, NULL},
    {"BadStatus", "x", 0, 0, RPC_INTERNAL, NULL},
    {"Http404", "", 0, 0, RPC_UNIMPLEMENTED, NULL},
    {"NoSuchMethod", "", 0, 0, RPC_UNIMPLEMENTED, NULL},
    {"Html", "", 0, 0, RPC_UNKNOWN, NULL},
    {"Two", "x", 0, 0, RPC_INTERNAL, NULL},
    {"None", "", 0, 0, RPC_INTERNAL, NULL},
    {"Compressed", "", 0, 0, RPC_INTERNAL, NULL},
    {"Undecodable", "", 0, 0, RPC_INTERNAL, NULL},
    {"NoTrailers", "x", 0, 0, RPC_INTERNAL, NULL},
    {"Truncated", "x", 0, 0, RPC_INTERNAL, NULL},
    {"RstRefused", "", 0, 0, RPC_UNAVAILABLE, NULL},
    {"RstInternal", "", 0, 0, RPC_INTERNAL, NULL},
    {"RstCancel", "", 0, 0, RPC_CANCELLED, NULL},
    {"Blob", "", 100000, 0, RPC_RESOURCE_EXHAUSTED, NULL},
};

static void test_answers(void **state)
{
    struct fixture *f = *state;

    for (size_t i = 0; i < ARRAY_SIZE(answers); i++) {
        struct result res =
            call(f, answers[i].method, answers[i].text, answers[i].size, answers[i].code, 0);

        if (res.status.code != answers[i].want)
            fail_msg("%s: got %s (%s), want %s", answers[i].method,
                     rpc_code_name((int)res.status.code), res.status.message,
                     rpc_code_name((int)answers[i].want));
        if (answers[i].message)
            assert_string_equal(res.status.message, answers[i].message);
        res = call(f, "Echo", "still there", 0, 0, 0);
        assert_int_equal(res.status.code, RPC_OK);
        assert_string_equal(res.text, "still there");
    }
    assert_int_equal(peer_stats(f->peer)->connections, 1);
}

static bool peer_saw_cancel(void *arg)
{
    return peer_stats(arg)->rst_cancel > 0;
}

static void test_oversized_resets_stream(void **state)
{
    struct fixture *f = *state;
    struct result res = call(f, "Blob", "", 200000, 0, 0);

    assert_int_equal(res.status.code, RPC_RESOURCE_EXHAUSTED);
    run_until(f->loop, peer_saw_cancel, f->peer);
}

/* ---- deadlines ---- */

static void test_deadline(void **state)
{
    struct fixture *f = *state;
    uint64_t t0 = now_ms();
    struct result res = call(f, "Silent", "", 0, 0, 100);
    uint64_t took = now_ms() - t0;

    assert_int_equal(res.status.code, RPC_DEADLINE_EXCEEDED);
    assert_true(took >= 100);
    assert_true(took < 5000);
    assert_string_equal(peer_stats(f->peer)->timeout, "100m");
    run_until(f->loop, peer_saw_cancel, f->peer);
    res = call(f, "Echo", "after", 0, 0, 0);
    assert_int_equal(res.status.code, RPC_OK);
}

/* One timer serves every call: each call still ends at its own deadline, not before. */
struct timed {
    struct result res;
    uint64_t t0, took;
};

static void on_timed(const struct rpc_status *status, const ProtobufCMessage *response,
                     void *userdata)
{
    struct timed *t = userdata;

    t->took = now_ms() - t->t0;
    on_reply(status, response, &t->res);
}

static bool timed_done(void *arg)
{
    struct timed *t = arg;

    for (size_t i = 0; i < 4; i++)
        if (!t[i].res.done)
            return false;
    return true;
}

static void test_deadlines(void **state)
{
    struct fixture *f = *state;
    static const uint32_t timeouts[] = {300, 50, 150, 0};
    Gptest__EchoRequest req = GPTEST__ECHO_REQUEST__INIT;
    struct timed t[4] = {0};

    for (size_t i = 0; i < 4; i++) {
        t[i].t0 = now_ms();
        assert_int_equal(rpc_client_call(f->client,
                                         i < 3 ? "/gptest.Peer/Silent" : "/gptest.Peer/Echo",
                                         &req.base, &gptest__echo_reply__descriptor, timeouts[i],
                                         on_timed, &t[i]),
                         0);
    }
    run_until(f->loop, timed_done, t);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(t[i].res.status.code, RPC_DEADLINE_EXCEEDED);
        assert_true(t[i].took >= timeouts[i]);
        assert_true(t[i].took < timeouts[i] + 3000);
    }
    assert_int_equal(t[3].res.status.code, RPC_OK);
    assert_int_equal(rpc_client_calls(f->client), 0);
}

/* ---- many calls on one connection ---- */

#define N_CONCURRENT 50

static bool peer_has_held(void *arg)
{
    return peer_held(arg) > 0;
}

static bool all_held(void *arg)
{
    return peer_held(arg) == N_CONCURRENT;
}

struct many {
    struct result res[N_CONCURRENT];
};

static bool all_done(void *arg)
{
    struct many *m = arg;

    for (size_t i = 0; i < N_CONCURRENT; i++)
        if (!m->res[i].done)
            return false;
    return true;
}

static void test_concurrent(void **state)
{
    struct fixture *f = *state;
    struct many m = {0};
    char text[32];

    for (size_t i = 0; i < N_CONCURRENT; i++) {
        snprintf(text, sizeof(text), "call %zu", i);
        assert_int_equal(start(f->client, "Hold", text, 0, 0, 0, &m.res[i]), 0);
    }
    assert_int_equal(rpc_client_calls(f->client), N_CONCURRENT);
    run_until(f->loop, all_held, f->peer);
    peer_release_held(f->peer);
    run_until(f->loop, all_done, &m);
    for (size_t i = 0; i < N_CONCURRENT; i++) {
        snprintf(text, sizeof(text), "call %zu", i);
        assert_int_equal(m.res[i].status.code, RPC_OK);
        assert_string_equal(m.res[i].text, text);
        assert_int_equal(m.res[i].n, 1);
    }
    assert_int_equal(peer_stats(f->peer)->connections, 1);
}

/* ---- GOAWAY and broken connections ---- */

static void test_goaway_refuses(void **state)
{
    struct fixture *f = *state;
    struct result res = call(f, "Echo", "first", 0, 0, 0);

    assert_int_equal(res.status.code, RPC_OK);
    res = call(f, "Goaway", "", 0, 0, 0);
    assert_int_equal(res.status.code, RPC_UNAVAILABLE);
    assert_true(rpc_client_closed(f->client));
    res = call(f, "Echo", "later", 0, 0, 0);
    assert_int_equal(res.status.code, RPC_UNAVAILABLE);
}

static bool client_closed(void *arg)
{
    return rpc_client_closed(arg);
}

static void test_goaway_after_answer(void **state)
{
    struct fixture *f = *state;
    struct result res = call(f, "GoawayAfter", "last", 0, 0, 0);

    assert_int_equal(res.status.code, RPC_OK);
    assert_string_equal(res.text, "last");
    run_until(f->loop, client_closed, f->client);
    res = call(f, "Echo", "later", 0, 0, 0);
    assert_int_equal(res.status.code, RPC_UNAVAILABLE);
}

static void test_close_mid_message(void **state)
{
    struct fixture *f = *state;
    struct result res = call(f, "CloseMid", "x", 0, 0, 0);

    assert_int_equal(res.status.code, RPC_UNAVAILABLE);
    assert_non_null(strstr(res.status.message, "peer.sock"));
    assert_true(rpc_client_closed(f->client));
}

static void test_peer_gone(void **state)
{
    struct fixture *f = *state;
    struct result res = {.loop = f->loop};

    assert_int_equal(start(f->client, "Hold", "x", 0, 0, 0, &res), 0);
    run_until(f->loop, peer_has_held, f->peer);
    f->peer = peer_free(f->peer);
    run_until(f->loop, result_done, &res);
    assert_int_equal(res.status.code, RPC_UNAVAILABLE);
}

static void test_garbage(void **state)
{
    struct fixture *f = *state;
    struct peer *bad = NULL;
    struct rpc_client *client = NULL;
    struct result res = {.loop = f->loop};
    char path[160];

    snprintf(path, sizeof(path), "%s/other.sock", f->dir);
    assert_int_equal(peer_new(f->loop, path, true, &bad), 0);
    assert_int_equal(rpc_client_new(f->loop, path, NULL, &client), 0);
    assert_int_equal(start(client, "Echo", "x", 0, 0, 0, &res), 0);
    run_until(f->loop, result_done, &res);
    assert_int_not_equal(res.status.code, RPC_OK);
    assert_true(rpc_client_closed(client));
    rpc_client_free(client);
    peer_free(bad);
}

/* ---- connecting ---- */

static void test_missing_socket(void **state)
{
    struct fixture *f = *state;
    struct rpc_client *client = NULL;
    struct result res = {.loop = f->loop};
    char path[160];

    snprintf(path, sizeof(path), "%s/missing.sock", f->dir);
    assert_int_equal(rpc_client_new(f->loop, path, NULL, &client), 0);
    assert_true(rpc_client_closed(client));
    assert_int_equal(start(client, "Echo", "x", 0, 0, 0, &res), 0);
    assert_false(res.done);
    run_until(f->loop, result_done, &res);
    assert_int_equal(res.status.code, RPC_UNAVAILABLE);
    assert_non_null(strstr(res.status.message, path));
    assert_non_null(strstr(res.status.message, "No such file or directory"));
    rpc_client_free(client);
}

/* A socket file nobody listens on: bound, never listen()ed. */
static void test_refused(void **state)
{
    struct fixture *f = *state;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct rpc_client *client = NULL;
    struct result res = {.loop = f->loop};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/other.sock", f->dir);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(rpc_client_new(f->loop, sa.sun_path, NULL, &client), 0);
    assert_int_equal(start(client, "Echo", "x", 0, 0, 0, &res), 0);
    run_until(f->loop, result_done, &res);
    assert_int_equal(res.status.code, RPC_UNAVAILABLE);
    assert_non_null(strstr(res.status.message, "Connection refused"));
    rpc_client_free(client);
    close(fd);
}

/* A listener that never accepts: connect(2) succeeds (the backlog), the server never speaks. */
static int mute_listener(struct fixture *f, char path[static 108])
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/other.sock", f->dir);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 4), 0);
    memcpy(path, sa.sun_path, sizeof(sa.sun_path));
    return fd;
}

static void test_connect_timeout(void **state)
{
    struct fixture *f = *state;
    struct rpc_client_options opts = {.connect_timeout_ms = 200};
    struct rpc_client *client = NULL;
    struct result res = {.loop = f->loop};
    char path[108];
    int fd = mute_listener(f, path);
    uint64_t t0 = now_ms(), took;

    assert_int_equal(rpc_client_new(f->loop, path, &opts, &client), 0);
    assert_int_equal(start(client, "Echo", "x", 0, 0, 0, &res), 0);
    run_until(f->loop, result_done, &res);
    took = now_ms() - t0;
    assert_int_equal(res.status.code, RPC_UNAVAILABLE);
    assert_non_null(strstr(res.status.message, "connect timeout"));
    assert_true(took >= 200 && took < 5000);
    assert_true(rpc_client_closed(client));
    rpc_client_free(client);
    close(fd);
}

static void test_deadline_while_connecting(void **state)
{
    struct fixture *f = *state;
    struct rpc_client *client = NULL;
    struct result res = {.loop = f->loop};
    char path[108];
    int fd = mute_listener(f, path);

    assert_int_equal(rpc_client_new(f->loop, path, NULL, &client), 0);
    assert_int_equal(start(client, "Echo", "x", 0, 0, 100, &res), 0);
    run_until(f->loop, result_done, &res);
    assert_int_equal(res.status.code, RPC_DEADLINE_EXCEEDED);
    rpc_client_free(client);
    close(fd);
}

/* ---- lifetime ---- */

static void test_free_cancels(void **state)
{
    struct fixture *f = *state;
    struct result held = {0}, queued = {0};

    assert_int_equal(start(f->client, "Hold", "x", 0, 0, 5000, &held), 0);
    run_until(f->loop, peer_has_held, f->peer);
    f->client = rpc_client_free(f->client);
    assert_true(held.done);
    assert_int_equal(held.status.code, RPC_CANCELLED);

    /* A call decided but not yet delivered is delivered by the free, with its own outcome. */
    assert_int_equal(rpc_client_new(f->loop, "/nonexistent/x.sock", NULL, &f->client), 0);
    assert_int_equal(start(f->client, "Echo", "x", 0, 0, 0, &queued), 0);
    assert_false(queued.done);
    f->client = rpc_client_free(f->client);
    assert_true(queued.done);
    assert_int_equal(queued.status.code, RPC_UNAVAILABLE);
}

/* The first callback frees the client: the second still runs, inside that free. */
static void test_free_from_callback(void **state)
{
    struct fixture *f = *state;
    struct result a = {.loop = f->loop, .free_client = &f->client}, b = {0};

    assert_int_equal(start(f->client, "Echo", "a", 0, 0, 0, &a), 0);
    assert_int_equal(start(f->client, "Hold", "b", 0, 0, 0, &b), 0);
    run_until(f->loop, result_done, &a);
    assert_null(f->client);
    assert_int_equal(a.status.code, RPC_OK);
    assert_true(b.done);
    assert_int_equal(b.status.code, RPC_CANCELLED);
}

static void test_bad_arguments(void **state)
{
    struct fixture *f = *state;
    Gptest__EchoRequest req = GPTEST__ECHO_REQUEST__INIT;
    struct rpc_client *client = NULL;
    char longpath[200];

    assert_int_equal(rpc_client_call(f->client, "no-slash", &req.base,
                                     &gptest__echo_reply__descriptor, 0, on_reply, NULL),
                     -EINVAL);
    assert_int_equal(rpc_client_call(f->client, "/a/b", &req.base, &gptest__echo_reply__descriptor,
                                     0, NULL, NULL),
                     -EINVAL);
    memset(longpath, 'a', sizeof(longpath) - 1);
    longpath[0] = '/';
    longpath[sizeof(longpath) - 1] = '\0';
    assert_int_equal(rpc_client_new(f->loop, longpath, NULL, &client), -ENAMETOOLONG);
    assert_null(client);
    assert_null(rpc_client_free(NULL));
}

/* ---- the blocking call, with the peer on a thread of its own ---- */

struct peer_thread {
    pthread_t thread;
    struct ev_loop *loop;
    struct peer *peer;
};

static void *peer_thread_main(void *arg)
{
    struct peer_thread *pt = arg;

    /* cmocka's asserts are not for threads: the main thread checks the calls instead. */
    (void)!ev_loop_run(pt->loop);
    return NULL;
}

static void peer_thread_stop(void *arg)
{
    ev_loop_stop(arg, 0);
}

static void blocking_call(const char *socket_path, const char *method, uint32_t timeout_ms,
                          struct rpc_status *status, Gptest__EchoReply **reply)
{
    Gptest__EchoRequest req = GPTEST__ECHO_REQUEST__INIT;
    ProtobufCMessage *resp = NULL;
    char path[64];

    req.text = (char *)"blocking";
    snprintf(path, sizeof(path), "/gptest.Peer/%s", method);
    assert_int_equal(rpc_call_blocking(socket_path, path, &req.base,
                                       &gptest__echo_reply__descriptor, timeout_ms, status, &resp),
                     0);
    *reply = (Gptest__EchoReply *)resp;
}

static void test_blocking(void **state)
{
    struct fixture *f = *state;
    struct peer_thread pt = {0};
    struct rpc_status status;
    Gptest__EchoReply *reply = NULL;
    char path[160];
    uint64_t t0;

    snprintf(path, sizeof(path), "%s/other.sock", f->dir);
    assert_int_equal(ev_loop_new(&pt.loop), 0);
    assert_int_equal(peer_new(pt.loop, path, false, &pt.peer), 0);
    assert_int_equal(pthread_create(&pt.thread, NULL, peer_thread_main, &pt), 0);

    blocking_call(path, "Echo", 5000, &status, &reply);
    assert_int_equal(status.code, RPC_OK);
    assert_non_null(reply);
    assert_string_equal(reply->text, "blocking");
    gptest__echo_reply__free_unpacked(reply, NULL);

    blocking_call(path, "TrailersOnly", 5000, &status, &reply);
    assert_int_equal(status.code, RPC_INTERNAL); /* grpc-status 0 without a message */
    assert_null(reply);

    t0 = now_ms();
    blocking_call(path, "Silent", 200, &status, &reply);
    assert_int_equal(status.code, RPC_DEADLINE_EXCEEDED);
    assert_null(reply);
    assert_true(now_ms() - t0 < 5000);

    assert_int_equal(ev_post(pt.loop, peer_thread_stop, pt.loop), 0);
    assert_int_equal(pthread_join(pt.thread, NULL), 0);
    peer_free(pt.peer);
    ev_loop_free(pt.loop);
}

static void test_blocking_missing_socket(void **state)
{
    struct fixture *f = *state;
    struct rpc_status status;
    Gptest__EchoReply *reply = NULL;
    char path[160];

    snprintf(path, sizeof(path), "%s/missing.sock", f->dir);
    blocking_call(path, "Echo", 1000, &status, &reply);
    assert_int_equal(status.code, RPC_UNAVAILABLE);
    assert_null(reply);
    assert_non_null(strstr(status.message, path));
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_echo),
        T(test_timeout_header),
        T(test_large_response),
        T(test_answers),
        T(test_oversized_resets_stream),
        T(test_deadline),
        T(test_deadlines),
        T(test_concurrent),
        T(test_goaway_refuses),
        T(test_goaway_after_answer),
        T(test_close_mid_message),
        T(test_peer_gone),
        T(test_garbage),
        T(test_missing_socket),
        T(test_refused),
        T(test_connect_timeout),
        T(test_deadline_while_connecting),
        T(test_free_cancels),
        T(test_free_from_callback),
        T(test_bad_arguments),
        T(test_blocking),
        T(test_blocking_missing_socket),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
