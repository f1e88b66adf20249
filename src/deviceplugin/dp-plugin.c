/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One served endpoint per resource, as NVIDIA runs one gRPC server per resource name: the
 * v1beta1.DevicePlugin service on <dir>/nvidia-<name>.sock. The handlers are thin: options are
 * constant, Allocate and GetPreferredAllocation call the pure builders of dp-allocate.c and
 * dp-prefer.c, and ListAndWatch streams are kept open and sent a full snapshot at once and then
 * whenever the daemon says the devices changed (dp_plugin_broadcast, called on the loop in the
 * same callback that saw the change, so a health event reaches the kubelet without delay).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dp-internal.h"

#define METHOD(m) "/v1beta1.DevicePlugin/" m

struct dp_plugin {
    struct dp_plugin_ctx ctx;
    struct dp_resource *res;
    char *path;
    struct rpc_server *srv;
    struct dp_file_id id;
    struct vec streams; /* struct rpc_call *: open ListAndWatch calls */
};

/* ---- ListAndWatch ---- */

struct snapshot {
    V1beta1__ListAndWatchResponse msg;
    V1beta1__Device *devs;
    V1beta1__Device **ptrs;
    V1beta1__TopologyInfo *topo;
    V1beta1__NUMANode *nodes;
    V1beta1__NUMANode **node_ptrs;
};

static void snapshot_release(struct snapshot *s)
{
    free(s->devs);
    free(s->ptrs);
    free(s->topo);
    free(s->nodes);
    free(s->node_ptrs);
}

static void snapshot_device(struct snapshot *s, const struct dp_device *dev, size_t i)
{
    v1beta1__device__init(&s->devs[i]);
    s->devs[i].id = (char *)dev->id;
    s->devs[i].health = (char *)(dev->healthy ? DP_HEALTHY : DP_UNHEALTHY);
    s->ptrs[i] = &s->devs[i];
    if (dev->numa < 0)
        return;
    v1beta1__numanode__init(&s->nodes[i]);
    s->nodes[i].id = dev->numa;
    s->node_ptrs[i] = &s->nodes[i];
    v1beta1__topology_info__init(&s->topo[i]);
    s->topo[i].n_nodes = 1;
    s->topo[i].nodes = &s->node_ptrs[i];
    s->devs[i].topology = &s->topo[i];
}

/* The resource's devices as one message; pointers into res, valid until res changes. */
static int snapshot_build(struct snapshot *s, const struct dp_resource *res)
{
    size_t n = res->n_devices ? res->n_devices : 1;
    *s = (struct snapshot){0};
    v1beta1__list_and_watch_response__init(&s->msg);
    s->devs = calloc(n, sizeof(*s->devs));
    s->ptrs = calloc(n, sizeof(*s->ptrs));
    s->topo = calloc(n, sizeof(*s->topo));
    s->nodes = calloc(n, sizeof(*s->nodes));
    s->node_ptrs = calloc(n, sizeof(*s->node_ptrs));
    if (!s->devs || !s->ptrs || !s->topo || !s->nodes || !s->node_ptrs)
        return snapshot_release(s), -ENOMEM;
    for (size_t i = 0; i < res->n_devices; i++)
        snapshot_device(s, &res->devices[i], i);
    s->msg.n_devices = res->n_devices;
    s->msg.devices = s->ptrs;
    return 0;
}

static void drop_stream(struct dp_plugin *p, struct rpc_call *call)
{
    for (size_t i = 0; i < p->streams.len; i++) {
        struct rpc_call **c = VEC_AT(&p->streams, struct rpc_call *, i);
        if (*c != call)
            continue;
        *c = *VEC_AT(&p->streams, struct rpc_call *, p->streams.len - 1);
        p->streams.len--;
        return;
    }
}

static void stream_cancelled(struct rpc_call *call, void *userdata)
{
    struct dp_plugin *p = userdata;
    log_debug(1, "ListAndWatch stream ended", "resource", p->res->name);
    drop_stream(p, call);
}

/* Sends to one stream; a stream that cannot take it is ended (the kubelet re-opens by
 * re-registering, which the daemon does when it notices). */
static void send_snapshot(struct dp_plugin *p, struct rpc_call *call, const struct snapshot *s)
{
    int r = rpc_call_send(call, &s->msg.base);
    if (r >= 0 || r == -ECANCELED)
        return;
    log_warn("cannot send ListAndWatch update", "resource", p->res->name, "error", strerror(-r));
    drop_stream(p, call);
    rpc_call_finish(call, RPC_INTERNAL, "cannot send the device list: %s", strerror(-r));
}

void dp_plugin_broadcast(struct dp_plugin *p)
{
    struct snapshot s;
    if (p->streams.len == 0)
        return;
    if (snapshot_build(&s, p->res) < 0) {
        log_error("out of memory building a device list", "resource", p->res->name);
        return;
    }
    /* Backwards: send_snapshot may drop the current entry by swapping in the last one. */
    for (size_t i = p->streams.len; i-- > 0;)
        send_snapshot(p, *VEC_AT(&p->streams, struct rpc_call *, i), &s);
    snapshot_release(&s);
    log_debug(4, "ListAndWatch update queued", "resource", p->res->name, "streams",
              LOG_INT(p->streams.len));
}

static void on_list_and_watch(struct rpc_call *call, const ProtobufCMessage *req, void *userdata)
{
    struct dp_plugin *p = userdata;
    struct snapshot s;
    if (vec_push(&p->streams, &call) < 0 || snapshot_build(&s, p->res) < 0) {
        drop_stream(p, call);
        rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    rpc_call_on_cancel(call, stream_cancelled, p);
    log_info("ListAndWatch stream opened", "resource", p->res->name, "devices",
             LOG_INT(p->res->n_devices));
    send_snapshot(p, call, &s);
    snapshot_release(&s);
}

/* ---- unary methods ---- */

/* A reply that cannot be sent means the kubelet went away; it will call again. */
static void reply(struct rpc_call *call, const ProtobufCMessage *msg)
{
    int r = rpc_call_reply(call, msg);
    if (r < 0)
        log_debug(1, "reply not sent", "error", strerror(-r));
}

static void on_options(struct rpc_call *call, const ProtobufCMessage *req, void *userdata)
{
    V1beta1__DevicePluginOptions opts = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    opts.pre_start_required = false;
    opts.get_preferred_allocation_available = true;
    reply(call, &opts.base);
}

static void on_prestart(struct rpc_call *call, const ProtobufCMessage *req, void *userdata)
{
    V1beta1__PreStartContainerResponse resp = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
    reply(call, &resp.base);
}

static void on_allocate(struct rpc_call *call, const ProtobufCMessage *req, void *userdata)
{
    struct dp_plugin *p = userdata;
    V1beta1__AllocateResponse *resp = NULL;
    struct dp_error err = {0};
    if (dp_allocate(p->ctx.alloc, p->res, (const V1beta1__AllocateRequest *)req, &err, &resp) < 0) {
        log_warn("Allocate refused", "resource", p->res->name, "reason", err.msg);
        rpc_call_finish(call, err.code, "%s", err.msg);
        return;
    }
    log_debug(1, "Allocate", "resource", p->res->name);
    reply(call, &resp->base);
    protobuf_c_message_free_unpacked(&resp->base, NULL);
}

static void on_preferred(struct rpc_call *call, const ProtobufCMessage *req, void *userdata)
{
    struct dp_plugin *p = userdata;
    V1beta1__PreferredAllocationResponse *resp = NULL;
    if (dp_prefer(p->ctx.cfg, p->res, p->ctx.topo, (const V1beta1__PreferredAllocationRequest *)req,
                  &resp) < 0) {
        rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "out of memory");
        return;
    }
    reply(call, &resp->base);
    protobuf_c_message_free_unpacked(&resp->base, NULL);
}

/* ---- the server ---- */

static int add_methods(struct dp_plugin *p)
{
    const struct rpc_method methods[] = {
        {METHOD("GetDevicePluginOptions"), &v1beta1__empty__descriptor,
         &v1beta1__device_plugin_options__descriptor, false, on_options, p},
        {METHOD("ListAndWatch"), &v1beta1__empty__descriptor,
         &v1beta1__list_and_watch_response__descriptor, true, on_list_and_watch, p},
        {METHOD("GetPreferredAllocation"), &v1beta1__preferred_allocation_request__descriptor,
         &v1beta1__preferred_allocation_response__descriptor, false, on_preferred, p},
        {METHOD("Allocate"), &v1beta1__allocate_request__descriptor,
         &v1beta1__allocate_response__descriptor, false, on_allocate, p},
        {METHOD("PreStartContainer"), &v1beta1__pre_start_container_request__descriptor,
         &v1beta1__pre_start_container_response__descriptor, false, on_prestart, p},
    };
    for (size_t i = 0; i < ARRAY_SIZE(methods); i++) {
        int r = rpc_server_add_method(p->srv, &methods[i]);
        if (r < 0)
            return r;
    }
    return 0;
}

int dp_plugin_new(const struct dp_plugin_ctx *ctx, struct dp_resource *res, const char *dir,
                  struct dp_plugin **ret)
{
    _cleanup_(dp_plugin_freep) struct dp_plugin *p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->ctx = *ctx;
    p->res = res;
    vec_init(&p->streams, sizeof(struct rpc_call *), 0);
    if (asprintf(&p->path, "%s/%s", dir, res->endpoint) < 0) {
        p->path = NULL;
        return -ENOMEM;
    }
    *ret = TAKE_PTR(p);
    return 0;
}

static void stop_server(struct dp_plugin *p)
{
    p->srv = rpc_server_free(p->srv);
    p->streams.len = 0; /* cancelled with the server */
}

int dp_plugin_serve(struct dp_plugin *p, struct diag *d)
{
    stop_server(p);
    int r = rpc_server_new(p->ctx.loop, NULL, &p->srv);
    if (r >= 0)
        r = add_methods(p);
    if (r >= 0)
        r = rpc_server_listen(p->srv, p->path, d);
    if (r < 0) {
        stop_server(p);
        return r;
    }
    dp_file_id_get(p->path, &p->id);
    return 0;
}

bool dp_plugin_socket_ok(const struct dp_plugin *p)
{
    struct dp_file_id now;
    if (!p->srv)
        return false;
    dp_file_id_get(p->path, &now);
    return dp_file_id_equal(&now, &p->id);
}

void dp_plugin_shutdown(struct dp_plugin *p, void (*done)(void *userdata), void *userdata)
{
    if (!p->srv) {
        done(userdata);
        return;
    }
    rpc_server_shutdown(p->srv, done, userdata);
}

void dp_plugin_set_resource(struct dp_plugin *p, struct dp_resource *res)
{
    assert(strcmp(res->endpoint, p->res->endpoint) == 0);
    p->res = res;
}

struct dp_plugin *dp_plugin_free(struct dp_plugin *p)
{
    if (!p)
        return NULL;
    stop_server(p);
    vec_release(&p->streams);
    free(p->path);
    free(p);
    return NULL;
}
