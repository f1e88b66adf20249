/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --healthcheck-port: gRPC's standard health service (grpc.health.v1.Health/Check) on
 * 127.0.0.1:<port>, as NVIDIA's kubelet plugin serves it for a `grpc:` liveness probe. The
 * connections are plain gRPC over TCP: this file owns the listening socket and hands each
 * accepted connection to an rpc server (rpc_server_adopt), which does not care what kind of stream
 * socket it reads. The two messages are tiny and not part of the kubelet's protos, so their
 * protobuf-c descriptors are written out here: HealthCheckRequest {string service = 1} and
 * HealthCheckResponse {ServingStatus status = 1} (an enum is a varint on the wire, declared as
 * int32 here). Watch is not served; a probe only calls Check.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dra-internal.h"

#define CHECK_PATH "/grpc.health.v1.Health/Check"

/* grpc.health.v1.HealthCheckResponse.ServingStatus */
enum {
    SERVING_UNKNOWN = 0,
    SERVING = 1,
    NOT_SERVING = 2,
};

struct health_request {
    ProtobufCMessage base;
    char *service;
};

struct health_response {
    ProtobufCMessage base;
    int32_t status;
};

static void request_init(ProtobufCMessage *m);
static void response_init(ProtobufCMessage *m);

static const ProtobufCFieldDescriptor request_fields[] = {
    {.name = "service",
     .id = 1,
     .label = PROTOBUF_C_LABEL_NONE,
     .type = PROTOBUF_C_TYPE_STRING,
     .offset = offsetof(struct health_request, service),
     .default_value = &protobuf_c_empty_string},
};
static const ProtobufCFieldDescriptor response_fields[] = {
    {.name = "status",
     .id = 1,
     .label = PROTOBUF_C_LABEL_NONE,
     .type = PROTOBUF_C_TYPE_INT32,
     .offset = offsetof(struct health_response, status)},
};
static const unsigned by_name[] = {0};
static const ProtobufCIntRange ranges[] = {{1, 0}, {0, 1}};

static const ProtobufCMessageDescriptor request_desc = {
    .magic = PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC,
    .name = "grpc.health.v1.HealthCheckRequest",
    .short_name = "HealthCheckRequest",
    .c_name = "HealthCheckRequest",
    .package_name = "grpc.health.v1",
    .sizeof_message = sizeof(struct health_request),
    .n_fields = 1,
    .fields = request_fields,
    .fields_sorted_by_name = by_name,
    .n_field_ranges = 1,
    .field_ranges = ranges,
    .message_init = request_init,
};
static const ProtobufCMessageDescriptor response_desc = {
    .magic = PROTOBUF_C__MESSAGE_DESCRIPTOR_MAGIC,
    .name = "grpc.health.v1.HealthCheckResponse",
    .short_name = "HealthCheckResponse",
    .c_name = "HealthCheckResponse",
    .package_name = "grpc.health.v1",
    .sizeof_message = sizeof(struct health_response),
    .n_fields = 1,
    .fields = response_fields,
    .fields_sorted_by_name = by_name,
    .n_field_ranges = 1,
    .field_ranges = ranges,
    .message_init = response_init,
};

static void request_init(ProtobufCMessage *m)
{
    struct health_request *r = (struct health_request *)m;
    *r = (struct health_request){.base = PROTOBUF_C_MESSAGE_INIT(&request_desc),
                                 .service = (char *)protobuf_c_empty_string};
}

static void response_init(ProtobufCMessage *m)
{
    struct health_response *r = (struct health_response *)m;
    *r = (struct health_response){.base = PROTOBUF_C_MESSAGE_INIT(&response_desc)};
}

struct dra_healthcheck {
    int fd;
    struct ev_io *io;
    struct rpc_server *srv;
    bool (*serving)(void *userdata);
    void *userdata;
};

static void on_check(struct rpc_call *call, const ProtobufCMessage *request, void *userdata)
{
    struct dra_healthcheck *h = userdata;
    const struct health_request *req = (const struct health_request *)request;
    struct health_response resp;
    response_init(&resp.base);
    /* "" is the server as a whole; the probe of NVIDIA's chart names no service either. */
    if (req->service && req->service[0]) {
        rpc_call_finish(call, RPC_NOT_FOUND, "unknown service \"%s\"", req->service);
        return;
    }
    resp.status = h->serving(h->userdata) ? SERVING : NOT_SERVING;
    if (rpc_call_reply(call, &resp.base) < 0)
        log_debug(1, "cannot answer a health check");
}

static void on_accept(struct ev_io *io, int fd, uint32_t revents, void *userdata)
{
    struct dra_healthcheck *h = userdata;
    for (int i = 0; i < 16; i++) {
        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0)
            return;
        if (rpc_server_adopt(h->srv, c) < 0)
            log_debug(1, "cannot serve a health-check connection");
    }
}

static int listen_tcp(long port, struct diag *d, int *ret_fd, unsigned *ret_port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    socklen_t len = sizeof(sa);
    int one = 1;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return diag_fail(d, -errno, "socket: %s", strerror(errno));
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
        return diag_fail(d, -errno, "cannot listen on 127.0.0.1:%ld: %s", port, strerror(errno));
    *ret_port = ntohs(sa.sin_port);
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int dra_healthcheck_new(struct ev_loop *loop, long port, bool (*serving)(void *userdata),
                        void *userdata, struct diag *d, struct dra_healthcheck **ret)
{
    _cleanup_(dra_healthcheck_freep) struct dra_healthcheck *h = calloc(1, sizeof(*h));
    unsigned bound = 0;
    if (!h)
        return -ENOMEM;
    h->fd = -1;
    h->serving = serving;
    h->userdata = userdata;
    const struct rpc_method m = {.path = CHECK_PATH,
                                 .request = &request_desc,
                                 .response = &response_desc,
                                 .handler = on_check,
                                 .userdata = h};
    int r = rpc_server_new(loop, NULL, &h->srv);
    if (r >= 0)
        r = rpc_server_add_method(h->srv, &m);
    if (r < 0)
        return diag_fail(d, r, "cannot set up the health service: %s", strerror(-r));
    r = listen_tcp(port, d, &h->fd, &bound);
    if (r < 0)
        return r;
    r = ev_io_add(loop, h->fd, EV_READ, on_accept, h, &h->io);
    if (r < 0)
        return diag_fail(d, r, "cannot watch the health socket: %s", strerror(-r));
    log_info("serving grpc.health.v1 health checks", "address", "127.0.0.1", "port",
             LOG_INT(bound));
    *ret = TAKE_PTR(h);
    return 0;
}

struct dra_healthcheck *dra_healthcheck_free(struct dra_healthcheck *h)
{
    if (!h)
        return NULL;
    h->io = ev_io_del(h->io);
    if (h->fd >= 0)
        close(h->fd);
    h->srv = rpc_server_free(h->srv);
    free(h);
    return NULL;
}
