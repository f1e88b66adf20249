/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the server and the client of the rpc module share and nobody else sees: gRPC's
 * length-prefixed message framing (a capped reader that reassembles messages from DATA chunks, an
 * encoder that packs a protobuf-c message behind its 5-byte prefix, an output buffer nghttp2 pulls
 * DATA from), the status helpers (grpc-status, grpc-message percent-encoding, grpc-timeout), and
 * small nghttp2 helpers (header name/value pairs, a capped header list).
 *
 * Everything here is plain data manipulation: no loop, no socket, no logging.
 */
#pragma once

#include <nghttp2/nghttp2.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "base.h"
#include "rpc.h"

/* ---- message framing (rpc-frame.c) ---- */

/* flag octet + 4-octet big-endian length */
#define RPC_PREFIX_LEN 5
#define RPC_FLAG_COMPRESSED 0x01u

#define RPC_DEFAULT_MAX_RECV ((size_t)4 << 20)
#define RPC_DEFAULT_MAX_SEND ((size_t)16 << 20)

/*
 * Reassembles length-prefixed messages from DATA chunks whose boundaries have nothing to do with
 * message boundaries. It never holds more than the bytes that actually arrived for one message, and
 * refuses a prefix that announces more than max bytes before buffering any of the body.
 */
struct rpc_msg_reader {
    size_t max; /* largest message body accepted */
    uint8_t prefix[RPC_PREFIX_LEN];
    size_t prefix_len; /* prefix octets seen so far */
    size_t want;       /* body length announced by the prefix */
    struct strbuf body;
    bool complete; /* a whole message is ready (rpc_msg_reader_message) */
};

/* max 0 means RPC_DEFAULT_MAX_RECV. */
void rpc_msg_reader_init(struct rpc_msg_reader *r, size_t max);
void rpc_msg_reader_release(struct rpc_msg_reader *r);

/*
 * Consumes bytes of data up to the end of the next message and stores how many in *ret_used.
 * Returns 1 when a message is complete (read it with rpc_msg_reader_message(); the next feed
 * starts a new one), 0 when all of data was consumed without completing one, -EMSGSIZE when a
 * prefix announces a body over the cap (the reader is then unusable: fail the stream), -ENOMEM.
 * Call again with the rest of data while *ret_used < len.
 */
_wur_ int rpc_msg_reader_feed(struct rpc_msg_reader *r, const uint8_t *data, size_t len,
                              size_t *ret_used);

/* The complete message: its flag octet and its body (borrowed; valid until the next feed or the
 * release; never NULL, "" for an empty message). Only after feed returned 1. */
void rpc_msg_reader_message(const struct rpc_msg_reader *r, uint8_t *ret_flags,
                            const uint8_t **ret_data, size_t *ret_len);

/* True when part of a message (prefix or body) has arrived but not all of it: at END_STREAM, that
 * is a truncated message. */
bool rpc_msg_reader_partial(const struct rpc_msg_reader *r);

/*
 * Appends msg to out as one uncompressed length-prefixed message. -EMSGSIZE when the packed message
 * is larger than max (0: RPC_DEFAULT_MAX_SEND), -ENOBUFS past out's cap, -ENOMEM. out is unchanged
 * on failure.
 */
_wur_ int rpc_msg_encode(struct strbuf *out, const ProtobufCMessage *msg, size_t max);

/*
 * Unpacks an uncompressed message body. -EBADMSG when it does not decode, -ENOMEM. The caller
 * frees *ret with protobuf_c_message_free_unpacked(*ret, NULL).
 */
_wur_ int rpc_msg_decode(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                         ProtobufCMessage **ret);

/*
 * Where a server call's request is decoded: protobuf-c takes every piece of the message from it,
 * and all of them go at once with rpc_arena_release(), without walking the message (one allocation
 * for a small request instead of one per field, string and array). Grows by blocks as protobuf-c
 * asks, so what it holds is what the system allocator would have held.
 */
struct rpc_arena {
    struct rpc_arena_block *blocks;
};

void rpc_arena_release(struct rpc_arena *a);

/* rpc_msg_decode with every allocation from arena; *ret is freed by rpc_arena_release(). */
_wur_ int rpc_msg_decode_arena(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                               size_t len, struct rpc_arena *arena, ProtobufCMessage **ret);

/*
 * The bytes of a stream's outgoing DATA, which nghttp2 pulls through a data provider as flow
 * control allows. Appending wakes a deferred provider (the owner then calls
 * nghttp2_session_resume_data when rpc_outbuf_append reports it).
 */
struct rpc_outbuf {
    struct strbuf buf;
    size_t off;    /* bytes of buf already handed to nghttp2 */
    bool eof;      /* nothing more will be appended */
    bool deferred; /* the provider returned NGHTTP2_ERR_DEFERRED and waits for a resume */
};

/* cap: most bytes queued and not yet sent (0: STRBUF_DEFAULT_CAP). */
void rpc_outbuf_init(struct rpc_outbuf *ob, size_t cap);
void rpc_outbuf_release(struct rpc_outbuf *ob);

/* Appends one encoded message (rpc_msg_encode into the buffer). Returns 1 when the provider was
 * deferred and must be resumed (nghttp2_session_resume_data), 0 when not, or a negative errno from
 * rpc_msg_encode. Compacts already-sent bytes first, so the cap bounds what is pending. */
_wur_ int rpc_outbuf_append_msg(struct rpc_outbuf *ob, const ProtobufCMessage *msg, size_t max);

/* Marks the end of the data. Returns 1 when the provider must be resumed, else 0. */
int rpc_outbuf_finish(struct rpc_outbuf *ob);

/* True when bytes are queued that nghttp2 has not taken yet. */
bool rpc_outbuf_pending(const struct rpc_outbuf *ob);

/*
 * The body of a nghttp2_data_source_read_callback: copies up to len pending bytes into buf. With
 * nothing pending, returns NGHTTP2_ERR_DEFERRED (and remembers it) unless eof is set, in which case
 * it sets NGHTTP2_DATA_FLAG_EOF in *data_flags, plus NGHTTP2_DATA_FLAG_NO_END_STREAM when
 * trailers follow (the server submits them from its callback right after this returns EOF).
 */
ssize_t rpc_outbuf_read(struct rpc_outbuf *ob, uint8_t *buf, size_t len, uint32_t *data_flags,
                        bool trailers_follow);

/* ---- status (rpc-status.c) ---- */

/*
 * Appends s percent-encoded as grpc-message wants it: 0x20-0x7E except '%' as-is, every other
 * octet as %XX (upper-case hex). -ENOBUFS past out's cap, -ENOMEM.
 */
_wur_ int rpc_percent_encode(struct strbuf *out, const char *s);

/* Decodes a grpc-message value into out (always NUL-terminated, truncated to outsz - 1 octets).
 * Malformed escapes are kept as they are. Returns the decoded length. */
size_t rpc_percent_decode(const char *in, size_t len, char *out, size_t outsz);

/* Parses a grpc-status value (decimal, 1-10 digits). Codes above 16 are returned as they are (the
 * caller maps them to UNKNOWN). -EINVAL when not a number. */
_wur_ int rpc_status_parse(const char *s, size_t len, int *ret);

/* Longest grpc-timeout value plus NUL: 8 digits and a unit. */
#define RPC_TIMEOUT_STR_MAX 10

/*
 * Parses a grpc-timeout value (1-8 digits then H/M/S/m/u/n) into milliseconds, rounding sub-
 * millisecond parts up so a short positive timeout is never 0. -EINVAL when malformed.
 */
_wur_ int rpc_timeout_parse(const char *s, size_t len, uint64_t *ret_ms);

/* Formats ms (> 0) as a grpc-timeout value, in the finest unit that fits 8 digits (rounding up). */
void rpc_timeout_format(uint64_t ms, char buf[static RPC_TIMEOUT_STR_MAX]);

/* ---- HTTP/2 helpers (rpc-h2.c) ---- */

/* A header field for nghttp2_submit_*; name and value are borrowed and must stay valid until the
 * submit call returns (nghttp2 copies them). */
static inline nghttp2_nv rpc_nv(const char *name, const char *value)
{
    return (nghttp2_nv){
        .name = (uint8_t *)(uintptr_t)name,
        .value = (uint8_t *)(uintptr_t)value,
        .namelen = strlen(name),
        .valuelen = strlen(value),
        .flags = NGHTTP2_NV_FLAG_NONE,
    };
}

/* The request or response headers of one stream, copied out of nghttp2's callbacks, with a cap on
 * their total size (name + value + 32 octets each, as HTTP/2 counts SETTINGS_MAX_HEADER_LIST_SIZE).
 * Names and values are kept NUL-terminated one after the other in one buffer (two allocations per
 * header block, not two per field); items hold their offsets. */
struct rpc_header_list {
    struct rpc_header {
        size_t name;  /* offset in text */
        size_t value; /* offset in text */
        size_t value_len;
    } * items;
    size_t n;
    size_t alloc;
    char *text;
    size_t text_len;
    size_t text_alloc;
    size_t bytes;
    size_t cap;
};

/* cap 0: 16 KiB. */
void rpc_header_list_init(struct rpc_header_list *h, size_t cap);
void rpc_header_list_release(struct rpc_header_list *h);
/* Drops every header (trailers after headers, on the client) but keeps the cap and the memory. */
void rpc_header_list_reset(struct rpc_header_list *h);

/* Copies a header. -ENOBUFS when the list would exceed its cap, -ENOMEM. Values returned by
 * rpc_header_list_get() before stay valid only until the next add. */
_wur_ int rpc_header_list_add(struct rpc_header_list *h, const uint8_t *name, size_t namelen,
                              const uint8_t *value, size_t valuelen);

/* The value of the first header with that (lower-case) name, or NULL. */
const char *rpc_header_list_get(const struct rpc_header_list *h, const char *name);

/* True when a content-type value is gRPC's: "application/grpc" alone or followed by '+' or ';'. */
bool rpc_content_type_ok(const char *value);

/* ---- server entry points for tests and the fuzzer (rpc-server.c) ---- */

/*
 * Makes an already connected stream socket a server connection, as if accepted; the server owns fd
 * from then on (also on failure, when it is closed). Lets a test or the fuzzer drive a connection
 * through a socketpair without a listening socket.
 */
_wur_ int rpc_server_adopt(struct rpc_server *srv, int fd);
