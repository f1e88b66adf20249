/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A unary call for command-line use: a private loop, one client, one call, run until the call is
 * decided. The client's connect timeout and the call's deadline bound the wait; a guard timer a
 * little past both makes sure a bug there cannot hang a command forever.
 */
#include <errno.h>

#include "rpc-client-internal.h"

/* The client's default connect timeout, plus slack for the loop itself. */
#define GUARD_MS (5000u + 1000u)

struct blocking {
    struct ev_loop *loop;
    bool done;
    struct rpc_status status;
    ProtobufCMessage *response;
};

static void blocking_done(const struct rpc_status *status, ProtobufCMessage *response,
                          void *userdata)
{
    struct blocking *b = userdata;

    b->done = true;
    b->status = *status;
    b->response = response;
    ev_loop_stop(b->loop, 0);
}

static void guard_cb(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    ev_loop_stop(userdata, -ETIMEDOUT);
}

/* Runs the loop until the call is decided; the client is freed (and the call delivered) here. */
static int blocking_run(struct blocking *b, struct rpc_client *client, uint32_t timeout_ms)
{
    _cleanup_(ev_timer_delp) struct ev_timer *guard = NULL;
    int r;

    if (timeout_ms > 0) {
        r = ev_timer_add(b->loop, (uint64_t)timeout_ms + GUARD_MS, 0, guard_cb, b->loop, &guard);
        if (r < 0)
            return r;
    }
    r = ev_loop_run(b->loop);
    rpc_client_free(client);
    return b->done ? r : -EIO;
}

int rpc_call_blocking(const char *socket_path, const char *path, const ProtobufCMessage *request,
                      const ProtobufCMessageDescriptor *response_type, uint32_t timeout_ms,
                      struct rpc_status *ret_status, ProtobufCMessage **ret_response)
{
    _cleanup_(ev_loop_freep) struct ev_loop *loop = NULL;
    struct rpc_client *client = NULL;
    struct blocking b = {0};
    int r;

    if (!ret_status || !ret_response)
        return -EINVAL;
    r = ev_loop_new(&loop);
    if (r < 0)
        return r;
    b.loop = loop;
    r = rpc_client_new(loop, socket_path, NULL, &client);
    if (r < 0)
        return r;
    r = rpc_client_call_take(client, path, request, response_type, timeout_ms, blocking_done, &b);
    if (r < 0) {
        rpc_client_free(client);
        return r;
    }
    r = blocking_run(&b, client, timeout_ms);
    if (r < 0) {
        if (b.response)
            protobuf_c_message_free_unpacked(b.response, NULL);
        return r;
    }
    *ret_status = b.status;
    *ret_response = b.response;
    return 0;
}
