/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rpc client against the project's own rpc server, both on one loop in one process: answers
 * now and later, error statuses with awkward text, deadlines seen from both ends, size limits on
 * both sides, many calls at once, graceful shutdown and an abrupt stop with calls in flight.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rpc.h"
#include "test-echo.pb-c.h"

#define TEST_DEADLINE_MS 20000u
#define MAX_DEFERRED 128

struct fixture {
    char dir[64];
    char path[128];
    struct ev_loop *loop;
    struct rpc_server *server;
    struct rpc_client *client;
    struct rpc_call *deferred[MAX_DEFERRED];
    size_t n_deferred;
    unsigned cancels;
    bool shutdown_done;
};

struct result {
    struct ev_loop *loop;
    bool done;
    unsigned n;
    struct rpc_status status;
    char text[256];
    size_t blob_len;
};

static void deadline_cb(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    ev_loop_stop(userdata, -ETIMEDOUT);
}

static void poll_cb(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    ev_loop_stop(userdata, 0);
}

/* Runs the loop until cond(arg) holds; fails the test after TEST_DEADLINE_MS. */
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

/* ---- server handlers ---- */

static void reply_text(struct rpc_call *call, const char *text, size_t blob)
{
    Gptest__EchoReply reply = GPTEST__ECHO_REPLY__INIT;
    uint8_t *data = NULL;

    reply.text = (char *)(uintptr_t)text;
    if (blob > 0) {
        data = malloc(blob);
        assert_non_null(data);
        memset(data, 'z', blob);
        reply.blob.data = data;
        reply.blob.len = blob;
    }
    assert_int_equal(rpc_call_reply(call, &reply.base), 0);
    free(data);
}

static void h_echo(struct rpc_call *call, const ProtobufCMessage *request, void *userdata)
{
    const Gptest__EchoRequest *req = (const Gptest__EchoRequest *)request;

    reply_text(call, req->text, req->size);
}

static void h_fail(struct rpc_call *call, const ProtobufCMessage *request, void *userdata)
{
    const Gptest__EchoRequest *req = (const Gptest__EchoRequest *)request;

    rpc_call_finish(call, (enum rpc_code)req->code, "%s", req->text);
}

static void on_cancel(struct rpc_call *call, void *userdata)
{
    struct fixture *f = userdata;

    f->cancels++;
    for (size_t i = 0; i < f->n_deferred; i++)
        if (f->deferred[i] == call)
            f->deferred[i] = f->deferred[--f->n_deferred];
}

static void h_defer(struct rpc_call *call, const ProtobufCMessage *request, void *userdata)
{
    struct fixture *f = userdata;

    assert_true(f->n_deferred < MAX_DEFERRED);
    f->deferred[f->n_deferred++] = call;
    rpc_call_on_cancel(call, on_cancel, f);
}

/* Answers every deferred call, newest first, with its index. */
static void answer_deferred(struct fixture *f)
{
    char text[32];

    while (f->n_deferred > 0) {
        struct rpc_call *call = f->deferred[--f->n_deferred];

        snprintf(text, sizeof(text), "late %zu", f->n_deferred);
        reply_text(call, text, 0);
    }
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
        snprintf(res->text, sizeof(res->text), "%s", reply->text);
        res->blob_len = reply->blob.len;
    } else {
        assert_null(response);
    }
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
    snprintf(path, sizeof(path), "/gptest.Test/%s", method);
    return rpc_client_call(client, path, &req.base, &gptest__echo_reply__descriptor, timeout_ms,
                           on_reply, res);
}

static struct result call(struct fixture *f, const char *method, const char *text, uint32_t size,
                          uint32_t code, uint32_t timeout_ms)
{
    struct result res = {.loop = f->loop};

    assert_int_equal(start(f->client, method, text, size, code, timeout_ms, &res), 0);
    run_until(f->loop, result_done, &res);
    assert_int_equal(res.n, 1);
    return res;
}

static const char *const paths[] = {"/gptest.Test/Echo", "/gptest.Test/Fail", "/gptest.Test/Defer"};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct rpc_server_options sopts = {.max_recv_message = 1024};
    struct rpc_client_options copts = {.max_recv_message = 32 * 1024};
    rpc_handler_fn fns[] = {h_echo, h_fail, h_defer};
    struct diag d;

    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/gp-rpc-client-srv-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/server.sock", f->dir);
    assert_int_equal(ev_loop_new(&f->loop), 0);
    assert_int_equal(rpc_server_new(f->loop, &sopts, &f->server), 0);
    for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
        struct rpc_method m = {
            .path = paths[i],
            .request = &gptest__echo_request__descriptor,
            .response = &gptest__echo_reply__descriptor,
            .handler = fns[i],
            .userdata = f,
        };
        assert_int_equal(rpc_server_add_method(f->server, &m), 0);
    }
    assert_int_equal(rpc_server_listen(f->server, f->path, &d), 0);
    assert_int_equal(rpc_client_new(f->loop, f->path, &copts, &f->client), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    rpc_client_free(f->client);
    rpc_server_free(f->server);
    ev_loop_free(f->loop);
    rmdir(f->dir);
    free(f);
    return 0;
}

static void test_echo(void **state)
{
    struct fixture *f = *state;
    struct result res = call(f, "Echo", "hello server", 0, 0, 2000);

    assert_int_equal(res.status.code, RPC_OK);
    assert_string_equal(res.text, "hello server");
    res = call(f, "Echo", "", 0, 0, 0);
    assert_int_equal(res.status.code, RPC_OK);
    assert_string_equal(res.text, "");
    assert_int_equal(rpc_server_connections(f->server), 1);
}

static void test_error_status(void **state)
{
    struct fixture *f = *state;
    static const char *const texts[] = {"plain", "100% sure", "caf\xc3\xa9\nnext line", ""};

    for (size_t i = 0; i < ARRAY_SIZE(texts); i++) {
        struct result res = call(f, "Fail", texts[i], 0, RPC_FAILED_PRECONDITION, 0);

        assert_int_equal(res.status.code, RPC_FAILED_PRECONDITION);
        assert_string_equal(res.status.message, texts[i]);
    }
}

static void test_unknown_method(void **state)
{
    struct fixture *f = *state;
    struct result res = call(f, "Nope", "", 0, 0, 0);

    assert_int_equal(res.status.code, RPC_UNIMPLEMENTED);
}

static void test_size_limits(void **state)
{
    struct fixture *f = *state;
    char big[2048];
    struct result res;

    memset(big, 'r', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    res = call(f, "Echo", big, 0, 0, 0); /* over the server's 1 KiB */
    assert_int_equal(res.status.code, RPC_RESOURCE_EXHAUSTED);
    res = call(f, "Echo", "x", 64 * 1024, 0, 0); /* over the client's 32 KiB */
    assert_int_equal(res.status.code, RPC_RESOURCE_EXHAUSTED);
    res = call(f, "Echo", "x", 30 * 1024, 0, 0);
    assert_int_equal(res.status.code, RPC_OK);
    assert_int_equal(res.blob_len, 30 * 1024);
}

static bool cancelled(void *arg)
{
    return ((struct fixture *)arg)->cancels > 0;
}

static void test_deadline(void **state)
{
    struct fixture *f = *state;
    struct result res = call(f, "Defer", "", 0, 0, 100);

    assert_int_equal(res.status.code, RPC_DEADLINE_EXCEEDED);
    run_until(f->loop, cancelled, f);
    assert_int_equal(f->n_deferred, 0);
    res = call(f, "Echo", "after", 0, 0, 0);
    assert_int_equal(res.status.code, RPC_OK);
}

#define N_CALLS 100

struct many {
    struct fixture *f;
    struct result res[N_CALLS];
};

static bool all_deferred(void *arg)
{
    return ((struct fixture *)arg)->n_deferred == N_CALLS;
}

static bool all_done(void *arg)
{
    struct many *m = arg;

    for (size_t i = 0; i < N_CALLS; i++)
        if (!m->res[i].done)
            return false;
    return true;
}

static void test_many(void **state)
{
    struct fixture *f = *state;
    static struct many m;
    char text[32];

    memset(&m, 0, sizeof(m));
    for (size_t i = 0; i < N_CALLS; i++)
        assert_int_equal(start(f->client, "Defer", "", 0, 0, 10000, &m.res[i]), 0);
    run_until(f->loop, all_deferred, f);
    answer_deferred(f);
    run_until(f->loop, all_done, &m);
    /* The server saw the calls in order, so call i got index i. */
    for (size_t i = 0; i < N_CALLS; i++) {
        snprintf(text, sizeof(text), "late %zu", i);
        assert_int_equal(m.res[i].status.code, RPC_OK);
        assert_string_equal(m.res[i].text, text);
    }
    assert_int_equal(rpc_server_connections(f->server), 1);
}

static void shutdown_done(void *userdata)
{
    ((struct fixture *)userdata)->shutdown_done = true;
}

static bool deferred_one(void *arg)
{
    return ((struct fixture *)arg)->n_deferred == 1;
}

static bool client_closed(void *arg)
{
    return rpc_client_closed(arg);
}

/* A graceful stop lets the call in flight answer; afterwards the client takes no new calls. */
static void test_shutdown(void **state)
{
    struct fixture *f = *state;
    struct result a = {.loop = f->loop}, b;

    assert_int_equal(start(f->client, "Defer", "", 0, 0, 0, &a), 0);
    run_until(f->loop, deferred_one, f);
    rpc_server_shutdown(f->server, shutdown_done, f);
    run_until(f->loop, client_closed, f->client);
    assert_false(a.done);
    answer_deferred(f);
    run_until(f->loop, result_done, &a);
    assert_int_equal(a.status.code, RPC_OK);
    b = call(f, "Echo", "late", 0, 0, 0);
    assert_int_equal(b.status.code, RPC_UNAVAILABLE);
}

/* An abrupt stop: the call in flight fails UNAVAILABLE. */
static void test_server_free(void **state)
{
    struct fixture *f = *state;
    struct result a = {.loop = f->loop};

    assert_int_equal(start(f->client, "Defer", "", 0, 0, 0, &a), 0);
    run_until(f->loop, deferred_one, f);
    f->server = rpc_server_free(f->server);
    run_until(f->loop, result_done, &a);
    assert_int_equal(a.status.code, RPC_UNAVAILABLE);
    assert_true(rpc_client_closed(f->client));
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_echo),     T(test_error_status), T(test_unknown_method), T(test_size_limits),
        T(test_deadline), T(test_many),         T(test_shutdown),       T(test_server_free),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
