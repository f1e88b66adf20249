/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gRPC over HTTP/2 on unix sockets, driven by an ev loop: what the kubelet's APIs need and no more.
 * HTTP/2 is nghttp2's; this layer adds gRPC's length-prefixed messages, status trailers, deadlines
 * and method routing by path, on protobuf-c messages. No threads: every callback runs on the loop.
 *
 * Server: register methods by full path ("/v1beta1.DevicePlugin/Allocate"), unary or server
 * streaming, then listen on one or more socket paths. A handler gets a struct rpc_call and answers
 * now or later; a streaming handler keeps the call and sends messages whenever it likes until it
 * finishes the call or is told the client went away.
 *
 * Client: unary calls over one connection, asynchronous on a loop, or blocking for command-line
 * use.
 */
#pragma once

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base.h"
#include "ev.h"

/* gRPC status codes (the grpc-status trailer). */
enum rpc_code {
    RPC_OK = 0,
    RPC_CANCELLED = 1,
    RPC_UNKNOWN = 2,
    RPC_INVALID_ARGUMENT = 3,
    RPC_DEADLINE_EXCEEDED = 4,
    RPC_NOT_FOUND = 5,
    RPC_ALREADY_EXISTS = 6,
    RPC_PERMISSION_DENIED = 7,
    RPC_RESOURCE_EXHAUSTED = 8,
    RPC_FAILED_PRECONDITION = 9,
    RPC_ABORTED = 10,
    RPC_OUT_OF_RANGE = 11,
    RPC_UNIMPLEMENTED = 12,
    RPC_INTERNAL = 13,
    RPC_UNAVAILABLE = 14,
    RPC_DATA_LOSS = 15,
    RPC_UNAUTHENTICATED = 16,
};

/* "OK", "CANCELLED", ... as gRPC spells them; "UNKNOWN" for values out of range. */
const char *rpc_code_name(int code);

#define RPC_STATUS_MESSAGE_MAX 1024

/* The outcome of a call: code plus the (decoded) grpc-message text. */
struct rpc_status {
    enum rpc_code code;
    char message[RPC_STATUS_MESSAGE_MAX];
};

/* ---- server ---- */

struct rpc_server;
struct rpc_call;

struct rpc_server_options {
    mode_t socket_mode;              /* 0: 0600 */
    size_t max_recv_message;         /* 0: 4 MiB; larger requests fail RESOURCE_EXHAUSTED */
    size_t max_send_message;         /* 0: 16 MiB */
    uint32_t max_concurrent_streams; /* per connection; 0: 100 */
    size_t max_header_list;          /* bytes of decoded request headers; 0: 16 KiB */
    unsigned max_connections;        /* 0: 1024; further connections are closed at accept */
};

/*
 * A method handler. request is the decoded request message, owned by the call (valid until the call
 * ends). A unary handler answers with rpc_call_reply() or rpc_call_finish(), at once or later from
 * any loop callback; a streaming handler sends with rpc_call_send() and ends with
 * rpc_call_finish().
 */
typedef void (*rpc_handler_fn)(struct rpc_call *call, const ProtobufCMessage *request,
                               void *userdata);

struct rpc_method {
    const char *path;                           /* "/<package>.<Service>/<Method>" */
    const ProtobufCMessageDescriptor *request;  /* how to decode the request */
    const ProtobufCMessageDescriptor *response; /* what handlers send (checked) */
    bool server_streaming;
    rpc_handler_fn handler;
    void *userdata;
};

_wur_ int rpc_server_new(struct ev_loop *loop, const struct rpc_server_options *opts,
                         struct rpc_server **ret);

/* Copies the method (not the strings/descriptors it points to, which must outlive the server).
 * -EEXIST for a path registered twice. */
_wur_ int rpc_server_add_method(struct rpc_server *srv, const struct rpc_method *method);

/*
 * Listens on a unix socket path with the configured mode. A stale socket at the path is replaced;
 * anything that is not a socket is refused (-EEXIST with a message). The socket appears atomically
 * (bound under a dot-name in the same directory, then renamed). May be called for several paths.
 */
_wur_ int rpc_server_listen(struct rpc_server *srv, const char *path, struct diag *d);

/*
 * Graceful stop: stop accepting, send GOAWAY, finish every open stream with OK (streaming handlers
 * get their cancel callback first), let unary calls in flight answer, close each connection when it
 * has drained, remove the sockets this server created (checked by inode). done(userdata) runs on
 * the loop once every connection is closed (at once if there are none).
 */
void rpc_server_shutdown(struct rpc_server *srv, void (*done)(void *userdata), void *userdata);

/* Immediate stop: closes every connection (calls are cancelled), removes this server's sockets,
 * frees. Not from inside a handler or cancel callback of this server. NULL-safe; returns NULL. */
struct rpc_server *rpc_server_free(struct rpc_server *srv);
DEFINE_POINTER_CLEANUP(struct rpc_server, rpc_server_free)

/*
 * Serves an already connected stream socket as if it had been accepted from a listening socket:
 * for listeners the caller owns (the DRA driver's health service on a TCP port). The server owns
 * fd from then on, also on failure (it is then closed).
 */
_wur_ int rpc_server_adopt(struct rpc_server *srv, int fd);

/* Number of open connections and of calls in flight (for tests and metrics). */
size_t rpc_server_connections(const struct rpc_server *srv);
size_t rpc_server_calls(const struct rpc_server *srv);

/* ---- a call, on the server side ---- */

/* The method path of the call. */
const char *rpc_call_path(const struct rpc_call *call);

/* The absolute deadline (ev_loop_now_ms clock) from grpc-timeout, or 0 when there is none. The
 * server itself ends the call with DEADLINE_EXCEEDED when it passes. */
uint64_t rpc_call_deadline_ms(const struct rpc_call *call);

/* Value of a request header (metadata) by lower-case name, or NULL. */
const char *rpc_call_header(const struct rpc_call *call, const char *name);

/*
 * Sends one response message (streaming calls; a unary call uses rpc_call_reply). The message is
 * serialised at once, so the caller keeps ownership. -ECANCELED if the call has ended on the client
 * side (the cancel callback has run or is about to) or the server ended it (deadline), -EMSGSIZE
 * over max_send_message, -EINVAL for a unary call or a message of another type than the method's
 * response, -ENOBUFS when about two messages of the largest size are still queued because the
 * client does not read. Never calls back into the handler: the bytes go out from the loop.
 */
_wur_ int rpc_call_send(struct rpc_call *call, const ProtobufCMessage *msg);

/* Unary answer: the response message, then status OK. Ends the call (call is freed) whatever it
 * returns: -ECANCELED when the client is gone (nothing is sent), -EMSGSIZE when the message is over
 * max_send_message (the call then ends RESOURCE_EXHAUSTED), -EINVAL for a wrong message type (ends
 * INTERNAL). */
_wur_ int rpc_call_reply(struct rpc_call *call, const ProtobufCMessage *msg);

/* Ends the call with a status (trailers-only when nothing was sent). Frees the call. Returns 0 even
 * when the client is already gone: the status is then dropped. */
int rpc_call_finish(struct rpc_call *call, enum rpc_code code, const char *fmt, ...) _printf_(3, 4);

/*
 * Called once when the call ends without the handler finishing it: the client cancelled
 * (RST_STREAM), disconnected, the deadline passed, or the server is shutting down. After the
 * callback returns the call is freed: the handler drops its pointer and does not finish it.
 * A handler that keeps a call past its own return should set this: without it, a call whose
 * client is gone stays allocated until the handler finishes it (rpc_call_send says -ECANCELED),
 * and rpc_server_free() frees it regardless.
 */
void rpc_call_on_cancel(struct rpc_call *call, void (*fn)(struct rpc_call *call, void *userdata),
                        void *userdata);

/* ---- client ---- */

struct rpc_client;

struct rpc_client_options {
    uint32_t connect_timeout_ms; /* 0: 5000 */
    size_t max_recv_message;     /* 0: 4 MiB */
};

/*
 * The outcome of a unary call. response is the decoded message when status->code is RPC_OK, else
 * NULL; it is borrowed: freed when the callback returns.
 */
typedef void (*rpc_reply_fn)(const struct rpc_status *status, const ProtobufCMessage *response,
                             void *userdata);

/* Starts connecting to a unix socket (non-blocking). Calls made before the connection is up wait
 * for it; a failed connection completes them with UNAVAILABLE. */
_wur_ int rpc_client_new(struct ev_loop *loop, const char *socket_path,
                         const struct rpc_client_options *opts, struct rpc_client **ret);

/* A unary call. timeout_ms 0 means no deadline (none is sent). fn runs exactly once, on the loop,
 * never from inside this function. The deadline counts from this call, connecting included. A
 * closed client still takes calls (they complete UNAVAILABLE); -EINVAL for a path without a leading
 * '/', -EMSGSIZE for a request over 16 MiB, -EBUSY with 4096 calls in flight. */
_wur_ int rpc_client_call(struct rpc_client *client, const char *path,
                          const ProtobufCMessage *request,
                          const ProtobufCMessageDescriptor *response_type, uint32_t timeout_ms,
                          rpc_reply_fn fn, void *userdata);

/* True once new calls can only fail UNAVAILABLE: the connection failed or closed, or the server
 * sent GOAWAY. The client never reconnects: make a new one. */
bool rpc_client_closed(const struct rpc_client *client);

/* Number of calls in flight (started, outcome not yet decided). */
size_t rpc_client_calls(const struct rpc_client *client);

/*
 * Closes the connection; calls in flight complete with CANCELLED, and calls already decided but not
 * yet delivered complete with their outcome, all before it returns (the one exception to "never
 * from inside" a client function). A callback that runs then may not start calls (-ECANCELED).
 * NULL-safe.
 */
struct rpc_client *rpc_client_free(struct rpc_client *client);
DEFINE_POINTER_CLEANUP(struct rpc_client, rpc_client_free)

/*
 * A blocking unary call on a private loop, for command-line use: connect (connect timeout), call
 * (deadline timeout_ms), close. Returns 0 when the call completed (whatever its status, in
 * *ret_status); the caller frees *ret_response (protobuf_c_message_free_unpacked), which is set
 * only for RPC_OK. A missing socket or refused connection is a completed call with UNAVAILABLE.
 * With timeout_ms 0 there is no deadline: it waits as long as the server takes to answer.
 */
_wur_ int rpc_call_blocking(const char *socket_path, const char *path,
                            const ProtobufCMessage *request,
                            const ProtobufCMessageDescriptor *response_type, uint32_t timeout_ms,
                            struct rpc_status *ret_status, ProtobufCMessage **ret_response);
