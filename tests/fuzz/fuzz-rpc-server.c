/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the gRPC server: the input is everything a client sends after the 24-octet
 * HTTP/2 preface (frames, header blocks, gRPC messages, or garbage), written into one connection
 * of a real server through a socketpair. The client then shuts down its writing side and the loop
 * runs until the server has closed the connection. Whatever the bytes, the server must not crash,
 * leak or hang, and its handlers (a unary one that answers at once, a streaming one that sends
 * and keeps its call, a unary one that keeps its call) must see every call end.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "deviceplugin/v1beta1/api.pb-c.h"
#include "rpc-internal.h"

/* What fits in the socket buffer at once: the server reads only after this function writes. */
#define FUZZ_MAX_INPUT ((size_t)96 << 10)
#define MAX_HELD 256

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static struct ev_loop *loop;
static struct rpc_server *srv;
static size_t n_held;

static void on_cancel(struct rpc_call *call, void *userdata)
{
    n_held--;
}

static void keep(struct rpc_call *call)
{
    if (n_held >= MAX_HELD) {
        (void)rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "too many calls");
        return;
    }
    n_held++;
    rpc_call_on_cancel(call, on_cancel, NULL);
}

static void allocate(struct rpc_call *call, const ProtobufCMessage *request, void *userdata)
{
    const V1beta1__AllocateRequest *req = (const V1beta1__AllocateRequest *)request;
    V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;

    if (req->n_container_requests > 1) {
        (void)rpc_call_finish(call, RPC_INVALID_ARGUMENT, "%zu containers: \xff%%\n",
                              req->n_container_requests);
        return;
    }
    (void)rpc_call_reply(call, &resp.base);
}

static void list_and_watch(struct rpc_call *call, const ProtobufCMessage *request, void *userdata)
{
    V1beta1__ListAndWatchResponse resp = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
    V1beta1__Device dev = V1BETA1__DEVICE__INIT;
    V1beta1__Device *devs[] = {&dev};

    dev.id = "GPU-0";
    dev.health = "Healthy";
    resp.devices = devs;
    resp.n_devices = 1;
    for (int i = 0; i < 3; i++)
        (void)rpc_call_send(call, &resp.base);
    keep(call);
}

static void pre_start(struct rpc_call *call, const ProtobufCMessage *request, void *userdata)
{
    keep(call);
}

static void setup(void)
{
    static const struct rpc_method methods[] = {
        {"/v1beta1.DevicePlugin/Allocate", &v1beta1__allocate_request__descriptor,
         &v1beta1__allocate_response__descriptor, false, allocate, NULL},
        {"/v1beta1.DevicePlugin/ListAndWatch", &v1beta1__empty__descriptor,
         &v1beta1__list_and_watch_response__descriptor, true, list_and_watch, NULL},
        {"/v1beta1.DevicePlugin/PreStartContainer",
         &v1beta1__pre_start_container_request__descriptor,
         &v1beta1__pre_start_container_response__descriptor, false, pre_start, NULL},
    };
    /* Small limits, so inputs of fuzzer size reach them. */
    struct rpc_server_options opts = {
        .max_recv_message = 4096,
        .max_send_message = 4096,
        .max_concurrent_streams = 8,
        .max_header_list = 2048,
    };

    if (ev_loop_new(&loop) < 0 || rpc_server_new(loop, &opts, &srv) < 0)
        abort();
    for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
        if (rpc_server_add_method(srv, &methods[i]) < 0)
            abort();
}

/* Stops the loop once the server closed the connection, checking on every loop iteration. */
static void check_closed(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    unsigned *spins = userdata;

    if (rpc_server_connections(srv) == 0 || ++*spins > 100000) {
        ev_loop_stop(loop, 0);
        return;
    }
    if (ev_timer_set(t, 0, 0) < 0)
        abort();
}

static void write_all(int fd, const void *data, size_t len)
{
    if (len > 0 && send(fd, data, len, MSG_NOSIGNAL) != (ssize_t)len)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ev_timer *check = NULL;
    int sv[2], buf = 1 << 20;
    unsigned spins = 0;

    if (!srv)
        setup();
    if (size > FUZZ_MAX_INPUT)
        return 0;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        abort();
    (void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    if (rpc_server_adopt(srv, sv[0]) < 0)
        abort();
    write_all(sv[1], preface, sizeof(preface) - 1);
    write_all(sv[1], data, size);
    if (shutdown(sv[1], SHUT_WR) < 0 || ev_timer_add(loop, 0, 0, check_closed, &spins, &check) < 0)
        abort();
    if (ev_loop_run(loop) < 0 || rpc_server_connections(srv) != 0)
        abort();
    check = ev_timer_del(check);
    /* Every kept call was cancelled with its connection. */
    if (n_held != 0 || rpc_server_calls(srv) != 0)
        abort();
    close(sv[1]);
    return 0;
}
