/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the client shares with rpc_call_blocking() and the module's tests: a variant of
 * rpc_client_call() whose callback owns the response, so the blocking call can hand it to its
 * caller without packing and unpacking it again.
 */
#pragma once

#include "rpc.h"

/* The outcome of a call; the callback owns response (NULL unless status->code is RPC_OK) and frees
 * it with protobuf_c_message_free_unpacked(response, NULL). */
typedef void (*rpc_reply_take_fn)(const struct rpc_status *status, ProtobufCMessage *response,
                                  void *userdata);

/* rpc_client_call() with a callback that takes ownership of the response. */
_wur_ int rpc_client_call_take(struct rpc_client *client, const char *path,
                               const ProtobufCMessage *request,
                               const ProtobufCMessageDescriptor *response_type, uint32_t timeout_ms,
                               rpc_reply_take_fn fn, void *userdata);
