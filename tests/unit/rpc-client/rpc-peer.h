/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A scriptable gRPC server for the client tests, on nghttp2's server session and the test's own ev
 * loop. The method name of a request says how to answer it, so one peer serves every test case,
 * including the answers a well-behaved server never gives (trailers-only errors, HTTP 404, no
 * grpc-status, an oversized or compressed message, GOAWAY, a connection closed mid-message):
 *
 *   /gptest.Peer/<Name>   with an EchoRequest {text, size, code}
 *
 * See rpc-peer.c for the list of names. What the peer saw (request headers, RST_STREAM codes) is
 * kept in struct peer_stats for the tests to check.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "ev.h"

struct peer;

struct peer_stats {
    unsigned connections;
    unsigned requests;
    unsigned rst_cancel; /* RST_STREAM(CANCEL) from the client */
    unsigned rst_other;
    unsigned goaway; /* GOAWAY from the client */
    /* headers of the last request */
    char path[128];
    char authority[64];
    char te[32];
    char content_type[64];
    char user_agent[64];
    char timeout[16]; /* "" when there was no grpc-timeout */
    char method[16];
    char scheme[16];
};

/* Listens on path. With garbage set, every connection gets non-HTTP/2 bytes instead. */
int peer_new(struct ev_loop *loop, const char *path, bool garbage, struct peer **ret);
struct peer *peer_free(struct peer *p);

const struct peer_stats *peer_stats(const struct peer *p);

/* Number of requests held by the Hold method. */
size_t peer_held(const struct peer *p);

/* Answers every held request, newest first, with OK and the request's text. */
void peer_release_held(struct peer *p);
