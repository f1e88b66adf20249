/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A raw HTTP/2 client for the rpc server tests, on nghttp2's client session and the same ev loop
 * as the server under test: it sends whatever headers and bytes a test wants (including what no
 * real gRPC client would send) and records every header block, DATA octet, RST_STREAM and GOAWAY
 * that comes back. Tests wait with run_until(), which polls a condition under a deadline.
 */
#pragma once

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "rpc-internal.h"

/* Generous: valgrind runs these tests too. */
#define TEST_DEADLINE_MS 10000u
#define TC_MAX_STREAMS 256

struct tconn;

struct tstream {
    struct tconn *tc;
    int32_t id;
    struct rpc_header_list headers;  /* the first header block */
    struct rpc_header_list trailers; /* the second one */
    int blocks;                      /* header blocks received */
    bool trailers_only;              /* the first block carried END_STREAM */
    struct strbuf data;              /* every DATA octet received */
    bool ended;                      /* END_STREAM received */
    bool closed;                     /* nghttp2 closed the stream */
    uint32_t close_code;
    bool rst; /* RST_STREAM received */
    uint32_t rst_code;
    struct strbuf body; /* what we send */
    size_t body_off;
    bool end_stream;
};

struct tconn {
    struct ev_loop *loop;
    int fd;
    struct ev_io *io;
    nghttp2_session *session;
    struct strbuf out;
    size_t out_off;
    bool eof; /* the server closed the connection */
    bool goaway;
    int32_t goaway_last;
    uint32_t goaway_code;
    struct tstream *streams[TC_MAX_STREAMS];
    size_t n_streams;
};

/* Connects to a unix socket path, sends the preface and our SETTINGS. */
struct tconn *tc_connect(struct ev_loop *loop, const char *path);
/* Same over an fd already connected (a socketpair end); takes the fd. */
struct tconn *tc_from_fd(struct ev_loop *loop, int fd);
/* Closes the socket at once (an abrupt disconnect) and frees everything. */
void tc_free(struct tconn *tc);

/* Starts a stream with these headers, sends body (may be empty) and END_STREAM if asked. */
struct tstream *tc_start(struct tconn *tc, const nghttp2_nv *nva, size_t n, const void *body,
                         size_t len, bool end_stream);
/* A well-formed gRPC request: POST path, application/grpc, te: trailers, and timeout if set. */
struct tstream *tc_call(struct tconn *tc, const char *path, const char *timeout,
                        const ProtobufCMessage *msg, bool end_stream);
void tc_rst(struct tconn *tc, struct tstream *ts, uint32_t code);
/* Writes raw octets on the socket, bypassing nghttp2 (garbage tests). */
void tc_write_raw(struct tconn *tc, const void *data, size_t len);

/* grpc-status from the trailers (or the trailers-only block), -1 when there is none. */
int ts_status(const struct tstream *ts);
/* grpc-message, decoded; "" when absent. */
const char *ts_message(const struct tstream *ts, char *buf, size_t size);
/* Number of whole length-prefixed messages in the DATA received (one still arriving is not
 * counted); the n-th one decoded into *ret
 * when ret is not NULL (free with protobuf_c_message_free_unpacked). */
size_t ts_messages(const struct tstream *ts, const ProtobufCMessageDescriptor *desc, size_t nth,
                   ProtobufCMessage **ret);

/* Runs the loop until cond(ctx) is true; false when TEST_DEADLINE_MS passed first. */
bool run_until(struct ev_loop *loop, bool (*cond)(void *ctx), void *ctx);

/* Conditions for run_until. */
bool ts_is_closed(void *ts);
bool ts_has_status(void *ts);
bool tc_is_eof(void *tc);
