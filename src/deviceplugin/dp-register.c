/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Registration with the kubelet: Register{version, endpoint, resource, options} on kubelet.sock
 * through the asynchronous rpc client, so the loop keeps serving while the kubelet, inside its
 * Register handler, dials our socket and calls GetDevicePluginOptions (kubelet-apis.md §3.3). A
 * failure (no kubelet yet, a rejection, a timeout) is logged and retried with back-off, never
 * fatal: the kubelet may come later, and the directory watch restarts the attempt at once when
 * kubelet.sock appears.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dp-internal.h"

#define REGISTER_PATH "/v1beta1.Registration/Register"
/* The kubelet dials us for up to 10 s inside Register; leave it room. */
#define REGISTER_TIMEOUT_MS 30000
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 30000

struct dp_registrar {
    struct ev_loop *loop;
    char *kubelet_socket;
    char *resource;
    char *endpoint;
    struct rpc_client *client;
    struct ev_timer *retry;
    unsigned backoff_ms;
    bool registered;
    bool dropping;            /* completions of a client being freed are not outcomes */
    bool in_flight;           /* a Register call is outstanding */
    bool again;               /* our socket was served anew while it was: register once more */
    struct dp_file_id target; /* the kubelet.sock the outstanding call went to */
    uint64_t started_ms;
};

static void attempt(struct dp_registrar *r);

static void free_client(void *userdata)
{
    rpc_client_free(userdata);
}

/* A client cannot be freed from inside its own callback: hand it to the loop. */
static void release_client_later(struct dp_registrar *r)
{
    struct rpc_client *c = TAKE_PTR(r->client);
    if (c && ev_post(r->loop, free_client, c) < 0) {
        r->dropping = true;
        rpc_client_free(c);
        r->dropping = false;
    }
}

static void drop_client(struct dp_registrar *r)
{
    r->dropping = true;
    r->client = rpc_client_free(r->client);
    r->dropping = false;
}

static void retry_later(struct dp_registrar *r)
{
    if (ev_timer_set(r->retry, r->backoff_ms, 0) < 0)
        log_error("cannot arm the registration retry timer", "resource", r->resource);
    r->backoff_ms = r->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : r->backoff_ms * 2;
}

static void on_reply(const struct rpc_status *st, const ProtobufCMessage *resp, void *userdata)
{
    struct dp_registrar *r = userdata;
    if (r->dropping)
        return;
    r->in_flight = false;
    release_client_later(r);
    bool again = r->again;
    r->again = false;
    if (st->code == RPC_OK) {
        r->registered = true;
        if (!r->target.exists) /* the kubelet that answered appeared after the call was made */
            dp_file_id_get(r->kubelet_socket, &r->target);
        r->backoff_ms = BACKOFF_FIRST_MS;
        log_info("registered with the kubelet", "resource", r->resource, "endpoint", r->endpoint,
                 "ms", LOG_INT(ev_loop_now_ms(r->loop) - r->started_ms));
        /* The kubelet dialled the socket we served before: it must hear of the new one. */
        if (again)
            attempt(r);
        return;
    }
    log_warn("registration with the kubelet failed", "resource", r->resource, "code",
             rpc_code_name((int)st->code), "message", st->message, "retry_ms",
             LOG_INT(r->backoff_ms));
    retry_later(r);
}

static void attempt(struct dp_registrar *r)
{
    V1beta1__DevicePluginOptions opts = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
    opts.get_preferred_allocation_available = true;
    req.version = (char *)DP_API_VERSION;
    req.endpoint = r->endpoint;
    req.resource_name = r->resource;
    req.options = &opts;
    drop_client(r);
    r->in_flight = false;
    r->again = false; /* this call announces the socket as it is now */
    r->started_ms = ev_loop_now_ms(r->loop);
    dp_file_id_get(r->kubelet_socket, &r->target);
    int ret = rpc_client_new(r->loop, r->kubelet_socket, NULL, &r->client);
    if (ret >= 0)
        ret = rpc_client_call(r->client, REGISTER_PATH, &req.base, &v1beta1__empty__descriptor,
                              REGISTER_TIMEOUT_MS, on_reply, r);
    r->in_flight = ret >= 0;
    if (ret < 0) {
        log_warn("cannot call the kubelet", "resource", r->resource, "error", strerror(-ret));
        drop_client(r);
        retry_later(r);
    }
}

static void on_retry(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    attempt(userdata);
}

int dp_registrar_new(struct ev_loop *loop, const char *kubelet_socket, const char *resource,
                     const char *endpoint, struct dp_registrar **ret)
{
    _cleanup_(dp_registrar_freep) struct dp_registrar *r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->loop = loop;
    r->backoff_ms = BACKOFF_FIRST_MS;
    r->kubelet_socket = strdup(kubelet_socket);
    r->resource = strdup(resource);
    r->endpoint = strdup(endpoint);
    if (!r->kubelet_socket || !r->resource || !r->endpoint)
        return -ENOMEM;
    int e = ev_timer_add(loop, BACKOFF_MAX_MS, 0, on_retry, r, &r->retry);
    if (e >= 0)
        e = ev_timer_disarm(r->retry);
    if (e < 0)
        return e;
    *ret = TAKE_PTR(r);
    return 0;
}

static void start(struct dp_registrar *r, bool served_again)
{
    struct dp_file_id now;
    dp_file_id_get(r->kubelet_socket, &now);
    /* A call made while kubelet.sock was missing connects later: to this kubelet or a newer one. */
    if (r->in_flight && now.exists && (!r->target.exists || dp_file_id_equal(&now, &r->target))) {
        /* already asking this very kubelet; should that call fail, soon again, and should it
         * announce a socket we have since replaced, once more when it answers */
        r->backoff_ms = BACKOFF_FIRST_MS;
        r->again |= served_again;
        return;
    }
    r->registered = false;
    r->backoff_ms = BACKOFF_FIRST_MS;
    if (ev_timer_disarm(r->retry) < 0)
        log_debug(1, "cannot disarm the registration retry timer");
    attempt(r);
}

void dp_registrar_start(struct dp_registrar *r)
{
    start(r, false);
}

void dp_registrar_served_again(struct dp_registrar *r)
{
    start(r, true);
}

void dp_registrar_kubelet_created(struct dp_registrar *r)
{
    struct dp_file_id now;
    dp_file_id_get(r->kubelet_socket, &now);
    if (r->registered && now.exists && dp_file_id_equal(&now, &r->target))
        return; /* registered with this very kubelet: its restart was seen through our socket */
    dp_registrar_start(r);
}

struct dp_registrar *dp_registrar_free(struct dp_registrar *r)
{
    if (!r)
        return NULL;
    drop_client(r);
    ev_timer_del(r->retry);
    free(r->kubelet_socket);
    free(r->resource);
    free(r->endpoint);
    free(r);
    return NULL;
}
