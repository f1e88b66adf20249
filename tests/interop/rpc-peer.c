/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rpc-peer: the C interop peer, gpuplane's own gRPC layer (src/rpc) driven from the command line
 * so the interop tests can pit it against grpcio and grpc-go. It serves the Interop service of
 * interop.proto, or makes one unary call with rpc_call_blocking(); the command line and the JSON
 * it prints are those of the Python peer (peer.py documents them):
 *
 *   rpc-peer serve --socket PATH
 *   rpc-peer call --socket PATH --method Echo|Fail|Sleep|Stats [--path P] [--text S]
 *                 [--payload-size N] [--reply-size N] [--code N] [--message S] [--ms N]
 *                 [--timeout-ms N]
 *
 * serve prints "ready" once listening, logs every call that ends without its handler finishing
 * it (cancel, deadline, disconnect, shutdown) on stderr and counts those for Stats; SIGTERM or
 * SIGINT shut the server down gracefully (open Count streams end with OK), then it exits 0.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "ev.h"
#include "interop.pb-c.h"
#include "rpc.h"

#define SERVICE "/gpuplane.interop.Interop/"

struct peer {
    struct ev_loop *loop;
    struct rpc_server *srv;
    uint64_t cancels;
    uint64_t calls;
    uint64_t max_connections;
};

/* A call that waits on a timer: a Count stream or a Sleep. */
struct timed_call {
    struct peer *peer;
    struct rpc_call *call;
    struct ev_timer *timer;
    uint32_t sent;
    uint32_t count;
};

static void note_call(struct peer *peer)
{
    size_t conns = rpc_server_connections(peer->srv);

    peer->calls++;
    if (conns > peer->max_connections)
        peer->max_connections = conns;
}

static void timed_call_free(struct timed_call *tc)
{
    ev_timer_del(tc->timer);
    free(tc);
}

static void on_cancel(struct rpc_call *call, void *userdata)
{
    struct timed_call *tc = userdata;

    tc->peer->cancels++;
    log_info("call ended before its handler finished it", "path", rpc_call_path(call), "sent",
             LOG_INT(tc->sent));
    timed_call_free(tc);
}

/* Starts a timed call: the cancel callback owns tc until the handler finishes the call. */
static int timed_call_start(struct peer *peer, struct rpc_call *call, uint32_t count,
                            uint64_t first_ms, uint64_t interval_ms, ev_timer_fn cb)
{
    struct timed_call *tc = calloc(1, sizeof(*tc));
    int r;

    if (!tc)
        return -ENOMEM;
    *tc = (struct timed_call){.peer = peer, .call = call, .count = count};
    r = ev_timer_add(peer->loop, first_ms, interval_ms, cb, tc, &tc->timer);
    if (r < 0) {
        free(tc);
        return r;
    }
    rpc_call_on_cancel(call, on_cancel, tc);
    return 0;
}

static void handle_echo(struct rpc_call *call, const ProtobufCMessage *msg, void *userdata)
{
    const Gpuplane__Interop__EchoRequest *req = (const Gpuplane__Interop__EchoRequest *)msg;
    Gpuplane__Interop__EchoReply reply = GPUPLANE__INTEROP__ECHO_REPLY__INIT;
    _cleanup_free_ uint8_t *big = NULL;

    note_call(userdata);
    reply.text = req->text;
    reply.payload = req->payload;
    if (req->reply_size > 0) {
        big = calloc(1, req->reply_size);
        if (!big) {
            rpc_call_finish(call, RPC_RESOURCE_EXHAUSTED, "no memory for %u bytes",
                            req->reply_size);
            return;
        }
        reply.payload = (ProtobufCBinaryData){.len = req->reply_size, .data = big};
    }
    if (rpc_call_reply(call, &reply.base) < 0)
        log_warn("reply failed", "path", SERVICE "Echo");
}

/* Sends the next Count message; finishes the call after the last one. */
static void count_tick(struct ev_timer *timer, uint64_t expirations, void *userdata)
{
    struct timed_call *tc = userdata;
    Gpuplane__Interop__CountReply reply = GPUPLANE__INTEROP__COUNT_REPLY__INIT;
    int r;

    reply.n = ++tc->sent;
    r = rpc_call_send(tc->call, &reply.base);
    if (r == -ECANCELED)
        return; /* the cancel callback is about to free tc */
    if (r < 0) {
        rpc_call_finish(tc->call, RPC_INTERNAL, "send: %s", strerror(-r));
        timed_call_free(tc);
        return;
    }
    if (tc->count != 0 && tc->sent >= tc->count) {
        rpc_call_finish(tc->call, RPC_OK, "%s", "");
        timed_call_free(tc);
    }
}

static void handle_count(struct rpc_call *call, const ProtobufCMessage *msg, void *userdata)
{
    const Gpuplane__Interop__CountRequest *req = (const Gpuplane__Interop__CountRequest *)msg;
    uint64_t interval = req->interval_ms ? req->interval_ms : 1;
    int r;

    note_call(userdata);
    r = timed_call_start(userdata, call, req->count, 0, interval, count_tick);
    if (r < 0)
        rpc_call_finish(call, RPC_INTERNAL, "timer: %s", strerror(-r));
}

static void handle_fail(struct rpc_call *call, const ProtobufCMessage *msg, void *userdata)
{
    const Gpuplane__Interop__FailRequest *req = (const Gpuplane__Interop__FailRequest *)msg;

    note_call(userdata);
    rpc_call_finish(call, (enum rpc_code)req->code, "%s", req->message);
}

static void sleep_done(struct ev_timer *timer, uint64_t expirations, void *userdata)
{
    struct timed_call *tc = userdata;
    Gpuplane__Interop__Empty reply = GPUPLANE__INTEROP__EMPTY__INIT;

    if (rpc_call_reply(tc->call, &reply.base) < 0)
        log_warn("reply failed", "path", SERVICE "Sleep");
    timed_call_free(tc);
}

static void handle_sleep(struct rpc_call *call, const ProtobufCMessage *msg, void *userdata)
{
    const Gpuplane__Interop__SleepRequest *req = (const Gpuplane__Interop__SleepRequest *)msg;
    int r;

    note_call(userdata);
    /* A one-shot timer: 0 would mean "next iteration", which is what 0 ms asks for anyway. */
    r = timed_call_start(userdata, call, 0, req->ms, 0, sleep_done);
    if (r < 0)
        rpc_call_finish(call, RPC_INTERNAL, "timer: %s", strerror(-r));
}

static void handle_stats(struct rpc_call *call, const ProtobufCMessage *msg, void *userdata)
{
    struct peer *peer = userdata;
    Gpuplane__Interop__StatsReply reply = GPUPLANE__INTEROP__STATS_REPLY__INIT;

    note_call(peer);
    reply.cancels = peer->cancels;
    reply.calls = peer->calls;
    reply.max_connections = peer->max_connections;
    if (rpc_call_reply(call, &reply.base) < 0)
        log_warn("reply failed", "path", SERVICE "Stats");
}

static const struct rpc_method methods[] = {
    {SERVICE "Echo", &gpuplane__interop__echo_request__descriptor,
     &gpuplane__interop__echo_reply__descriptor, false, handle_echo, NULL},
    {SERVICE "Count", &gpuplane__interop__count_request__descriptor,
     &gpuplane__interop__count_reply__descriptor, true, handle_count, NULL},
    {SERVICE "Fail", &gpuplane__interop__fail_request__descriptor,
     &gpuplane__interop__empty__descriptor, false, handle_fail, NULL},
    {SERVICE "Sleep", &gpuplane__interop__sleep_request__descriptor,
     &gpuplane__interop__empty__descriptor, false, handle_sleep, NULL},
    {SERVICE "Stats", &gpuplane__interop__empty__descriptor,
     &gpuplane__interop__stats_reply__descriptor, false, handle_stats, NULL},
};

static void shutdown_done(void *userdata)
{
    struct peer *peer = userdata;

    ev_loop_stop(peer->loop, 0);
}

static void on_stop_signal(struct ev_signal *sig, const struct signalfd_siginfo *si, void *userdata)
{
    struct peer *peer = userdata;

    log_info("shutting down", "signal", LOG_INT(si->ssi_signo));
    rpc_server_shutdown(peer->srv, shutdown_done, peer);
}

static int add_methods(struct peer *peer)
{
    for (size_t i = 0; i < ARRAY_SIZE(methods); i++) {
        struct rpc_method m = methods[i];
        int r;

        m.userdata = peer;
        r = rpc_server_add_method(peer->srv, &m);
        if (r < 0)
            return r;
    }
    return 0;
}

static int serve(const char *socket_path)
{
    _cleanup_(ev_loop_freep) struct ev_loop *loop = NULL;
    _cleanup_(rpc_server_freep) struct rpc_server *srv = NULL;
    struct peer peer = {0};
    struct ev_signal *sig;
    struct diag d;
    int r;

    diag_init(&d);
    r = ev_loop_new(&loop);
    if (r >= 0)
        r = rpc_server_new(loop, NULL, &srv);
    if (r < 0)
        return r;
    peer = (struct peer){.loop = loop, .srv = srv};
    r = add_methods(&peer);
    if (r >= 0)
        r = ev_signal_add(loop, SIGTERM, on_stop_signal, &peer, &sig);
    if (r >= 0)
        r = ev_signal_add(loop, SIGINT, on_stop_signal, &peer, &sig);
    if (r < 0)
        return r;
    r = rpc_server_listen(srv, socket_path, &d);
    if (r < 0) {
        log_error("cannot listen", "socket", socket_path, "error", d.msg);
        return r;
    }
    printf("ready\n");
    fflush(stdout);
    return ev_loop_run(loop);
}

/* ---- call ---- */

struct call_args {
    const char *socket;
    const char *method;
    const char *path;
    const char *text;
    const char *message;
    unsigned long payload_size;
    unsigned long reply_size;
    unsigned long ms;
    unsigned long timeout_ms;
    long code;
};

/* The request of a call, with storage for what it points to. */
struct request {
    Gpuplane__Interop__EchoRequest echo;
    Gpuplane__Interop__FailRequest fail;
    Gpuplane__Interop__SleepRequest sleep;
    Gpuplane__Interop__Empty empty;
    uint8_t *payload;
};

/* Fills req for args->method; returns the message and its reply type, or -EINVAL. */
static int build_request(const struct call_args *a, struct request *req,
                         const ProtobufCMessage **ret_msg,
                         const ProtobufCMessageDescriptor **ret_reply)
{
    if (strcmp(a->method, "Echo") == 0) {
        req->echo = (Gpuplane__Interop__EchoRequest)GPUPLANE__INTEROP__ECHO_REQUEST__INIT;
        req->payload = malloc(a->payload_size ? a->payload_size : 1);
        if (!req->payload)
            return -ENOMEM;
        memset(req->payload, 'p', a->payload_size);
        req->echo.text = (char *)a->text;
        req->echo.payload = (ProtobufCBinaryData){.len = a->payload_size, .data = req->payload};
        req->echo.reply_size = (uint32_t)a->reply_size;
        *ret_msg = &req->echo.base;
        *ret_reply = &gpuplane__interop__echo_reply__descriptor;
    } else if (strcmp(a->method, "Fail") == 0) {
        req->fail = (Gpuplane__Interop__FailRequest)GPUPLANE__INTEROP__FAIL_REQUEST__INIT;
        req->fail.code = (int32_t)a->code;
        req->fail.message = (char *)a->message;
        *ret_msg = &req->fail.base;
        *ret_reply = &gpuplane__interop__empty__descriptor;
    } else if (strcmp(a->method, "Sleep") == 0) {
        req->sleep = (Gpuplane__Interop__SleepRequest)GPUPLANE__INTEROP__SLEEP_REQUEST__INIT;
        req->sleep.ms = (uint32_t)a->ms;
        *ret_msg = &req->sleep.base;
        *ret_reply = &gpuplane__interop__empty__descriptor;
    } else if (strcmp(a->method, "Stats") == 0) {
        req->empty = (Gpuplane__Interop__Empty)GPUPLANE__INTEROP__EMPTY__INIT;
        *ret_msg = &req->empty.base;
        *ret_reply = &gpuplane__interop__stats_reply__descriptor;
    } else {
        return -EINVAL;
    }
    return 0;
}

/* The reply as the JSON the peers print: bytes fields as <name>_size. */
static json_t *reply_json(const ProtobufCMessage *msg)
{
    if (msg->descriptor == &gpuplane__interop__echo_reply__descriptor) {
        const Gpuplane__Interop__EchoReply *r = (const Gpuplane__Interop__EchoReply *)msg;
        return json_pack("{s:s, s:I}", "text", r->text, "payload_size", (json_int_t)r->payload.len);
    }
    if (msg->descriptor == &gpuplane__interop__stats_reply__descriptor) {
        const Gpuplane__Interop__StatsReply *r = (const Gpuplane__Interop__StatsReply *)msg;
        return json_pack("{s:I, s:I, s:I}", "cancels", (json_int_t)r->cancels, "calls",
                         (json_int_t)r->calls, "max_connections", (json_int_t)r->max_connections);
    }
    return json_object();
}

static int print_result(const struct rpc_status *st, const ProtobufCMessage *reply)
{
    json_t *message = json_string(st->message);
    _cleanup_(json_decrefp) json_t *out = NULL;

    if (!message) /* not UTF-8: show it, visibly wrong, rather than fail */
        message = json_string("<message is not valid UTF-8>");
    out = json_pack("{s:i, s:s, s:o, s:o}", "code", (int)st->code, "name",
                    rpc_code_name((int)st->code), "message", message, "reply",
                    reply ? reply_json(reply) : json_null());
    if (!out || json_dumpf(out, stdout, JSON_COMPACT) < 0 || fputc('\n', stdout) == EOF)
        return -EIO;
    return fflush(stdout) == 0 ? 0 : -errno;
}

static int call(const struct call_args *a)
{
    struct request req = {0};
    const ProtobufCMessage *msg = NULL;
    const ProtobufCMessageDescriptor *reply_type = NULL;
    ProtobufCMessage *reply = NULL;
    struct rpc_status st = {0};
    char path[256];
    int r;

    r = build_request(a, &req, &msg, &reply_type);
    if (r < 0) {
        free(req.payload);
        return r;
    }
    if (a->path)
        snprintf(path, sizeof(path), "%s", a->path);
    else
        snprintf(path, sizeof(path), SERVICE "%s", a->method);
    r = rpc_call_blocking(a->socket, path, msg, reply_type, (uint32_t)a->timeout_ms, &st, &reply);
    free(req.payload);
    if (r < 0)
        return r;
    r = print_result(&st, reply);
    if (reply)
        protobuf_c_message_free_unpacked(reply, NULL);
    return r;
}

/* ---- command line ---- */

static int parse_ulong(const char *s, unsigned long max, unsigned long *ret)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v > max)
        return -EINVAL;
    *ret = v;
    return 0;
}

enum {
    OPT_SOCKET = 1000,
    OPT_METHOD,
    OPT_PATH,
    OPT_TEXT,
    OPT_PAYLOAD_SIZE,
    OPT_REPLY_SIZE,
    OPT_CODE,
    OPT_MESSAGE,
    OPT_MS,
    OPT_TIMEOUT_MS,
};

static const struct option options[] = {
    {"socket", required_argument, NULL, OPT_SOCKET},
    {"method", required_argument, NULL, OPT_METHOD},
    {"path", required_argument, NULL, OPT_PATH},
    {"text", required_argument, NULL, OPT_TEXT},
    {"payload-size", required_argument, NULL, OPT_PAYLOAD_SIZE},
    {"reply-size", required_argument, NULL, OPT_REPLY_SIZE},
    {"code", required_argument, NULL, OPT_CODE},
    {"message", required_argument, NULL, OPT_MESSAGE},
    {"ms", required_argument, NULL, OPT_MS},
    {"timeout-ms", required_argument, NULL, OPT_TIMEOUT_MS},
    {0},
};

static int parse_option(int opt, const char *arg, struct call_args *a)
{
    unsigned long code;
    int r;

    switch (opt) {
    case OPT_SOCKET:
        a->socket = arg;
        return 0;
    case OPT_METHOD:
        a->method = arg;
        return 0;
    case OPT_PATH:
        a->path = arg;
        return 0;
    case OPT_TEXT:
        a->text = arg;
        return 0;
    case OPT_MESSAGE:
        a->message = arg;
        return 0;
    case OPT_PAYLOAD_SIZE:
        return parse_ulong(arg, UINT32_MAX, &a->payload_size);
    case OPT_REPLY_SIZE:
        return parse_ulong(arg, UINT32_MAX, &a->reply_size);
    case OPT_MS:
        return parse_ulong(arg, UINT32_MAX, &a->ms);
    case OPT_TIMEOUT_MS:
        return parse_ulong(arg, UINT32_MAX, &a->timeout_ms);
    case OPT_CODE:
        r = parse_ulong(arg, INT32_MAX, &code);
        a->code = (long)code;
        return r;
    default:
        return -EINVAL;
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: rpc-peer serve --socket PATH\n"
                    "       rpc-peer call --socket PATH --method Echo|Fail|Sleep|Stats [--path P]\n"
                    "                [--text S] [--payload-size N] [--reply-size N] [--code N]\n"
                    "                [--message S] [--ms N] [--timeout-ms N]\n");
    return 2;
}

int main(int argc, char **argv)
{
    struct call_args a = {.method = "Echo", .text = "", .message = "", .code = RPC_UNKNOWN};
    int opt, r;

    if (argc < 2)
        return usage();
    log_setup(0, LOG_FORMAT_TEXT);
    while ((opt = getopt_long(argc - 1, argv + 1, "", options, NULL)) != -1)
        if (parse_option(opt, optarg, &a) < 0)
            return usage();
    if (!a.socket || optind != argc - 1)
        return usage();
    if (strcmp(argv[1], "serve") == 0)
        r = serve(a.socket);
    else if (strcmp(argv[1], "call") == 0)
        r = call(&a);
    else
        return usage();
    if (r < 0) {
        fprintf(stderr, "rpc-peer %s: %s\n", argv[1], strerror(-r));
        return 1;
    }
    return 0;
}
