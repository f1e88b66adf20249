/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gRPC's Length-Prefixed-Message framing: a flag octet, a 4-octet big-endian length, the protobuf
 * body. The reader reassembles bodies from DATA chunks under a cap that is checked against the
 * announced length before any body octet is kept; the encoder packs a message straight into a
 * capped buffer; the server's requests are decoded into an arena that goes with the call; the
 * output buffer is what a stream's nghttp2 data provider pulls from.
 */
#include <errno.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rpc-internal.h"

void rpc_msg_reader_init(struct rpc_msg_reader *r, size_t max)
{
    *r = (struct rpc_msg_reader){.max = max ? max : RPC_DEFAULT_MAX_RECV};
    strbuf_init(&r->body, r->max);
}

void rpc_msg_reader_release(struct rpc_msg_reader *r)
{
    strbuf_release(&r->body);
    r->prefix_len = 0;
    r->want = 0;
    r->complete = false;
}

static void reader_restart(struct rpc_msg_reader *r)
{
    strbuf_reset(&r->body);
    r->prefix_len = 0;
    r->want = 0;
    r->complete = false;
}

/* Fills the prefix; once whole, checks the announced length against the cap. */
static int reader_take_prefix(struct rpc_msg_reader *r, const uint8_t *data, size_t len,
                              size_t *used)
{
    size_t n = RPC_PREFIX_LEN - r->prefix_len;

    if (n > len)
        n = len;
    memcpy(r->prefix + r->prefix_len, data, n);
    r->prefix_len += n;
    *used = n;
    if (r->prefix_len < RPC_PREFIX_LEN)
        return 0;
    r->want = (size_t)r->prefix[1] << 24 | (size_t)r->prefix[2] << 16 | (size_t)r->prefix[3] << 8 |
              (size_t)r->prefix[4];
    if (r->want > r->max)
        return -EMSGSIZE;
    return 0;
}

int rpc_msg_reader_feed(struct rpc_msg_reader *r, const uint8_t *data, size_t len, size_t *ret_used)
{
    size_t used = 0, n;
    int k;

    if (r->complete)
        reader_restart(r);
    if (r->prefix_len < RPC_PREFIX_LEN) {
        k = reader_take_prefix(r, data, len, &used);
        if (k < 0)
            return k;
        if (r->prefix_len < RPC_PREFIX_LEN) {
            *ret_used = used;
            return 0;
        }
    }
    n = r->want - r->body.len;
    if (n > len - used)
        n = len - used;
    if (n > 0) {
        k = strbuf_add(&r->body, data + used, n);
        if (k < 0)
            return k == -ENOBUFS ? -EMSGSIZE : k;
        used += n;
    }
    *ret_used = used;
    if (r->body.len < r->want)
        return 0;
    r->complete = true;
    return 1;
}

void rpc_msg_reader_message(const struct rpc_msg_reader *r, uint8_t *ret_flags,
                            const uint8_t **ret_data, size_t *ret_len)
{
    *ret_flags = r->prefix[0];
    *ret_data = (const uint8_t *)strbuf_str(&r->body);
    *ret_len = r->body.len;
}

bool rpc_msg_reader_partial(const struct rpc_msg_reader *r)
{
    return !r->complete && r->prefix_len > 0;
}

/* A ProtobufCBuffer that appends to a strbuf and remembers the first failure, since protobuf-c's
 * append callback cannot report one. */
struct strbuf_sink {
    ProtobufCBuffer base;
    struct strbuf *sb;
    int error;
};

static void sink_append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data)
{
    struct strbuf_sink *s = (struct strbuf_sink *)buffer;

    if (s->error == 0)
        s->error = strbuf_add(s->sb, data, len);
}

int rpc_msg_encode(struct strbuf *out, const ProtobufCMessage *msg, size_t max)
{
    struct strbuf_sink sink = {.base.append = sink_append, .sb = out};
    size_t size = protobuf_c_message_get_packed_size(msg), start = out->len;
    /* Small messages (every device plugin answer) are packed here in one pass and appended at
     * once; pack_to_buffer's append per field costs several times that. */
    uint8_t small[RPC_PREFIX_LEN + 1024];
    uint8_t *prefix = small;
    int r;

    if (max == 0)
        max = RPC_DEFAULT_MAX_SEND;
    if (size > max || size > UINT32_MAX)
        return -EMSGSIZE;
    prefix[0] = 0;
    prefix[1] = (uint8_t)(size >> 24);
    prefix[2] = (uint8_t)(size >> 16);
    prefix[3] = (uint8_t)(size >> 8);
    prefix[4] = (uint8_t)size;
    if (size <= sizeof(small) - RPC_PREFIX_LEN) {
        if (protobuf_c_message_pack(msg, small + RPC_PREFIX_LEN) != size)
            return -EIO;
        return strbuf_add(out, small, RPC_PREFIX_LEN + size);
    }
    r = strbuf_add(out, prefix, RPC_PREFIX_LEN);
    if (r < 0)
        return r;
    protobuf_c_message_pack_to_buffer(msg, &sink.base);
    if (sink.error == 0 && out->len - start != RPC_PREFIX_LEN + size)
        sink.error = -EIO;
    if (sink.error < 0) {
        out->len = start;
        if (out->buf)
            out->buf[start] = '\0';
        return sink.error;
    }
    return 0;
}

int rpc_msg_decode(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                   ProtobufCMessage **ret)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, len, data);

    /* protobuf-c reports allocation failure and malformed input alike. */
    if (!m)
        return -EBADMSG;
    *ret = m;
    return 0;
}

/* ---- the request arena ---- */

/* With its header, a block stays within what malloc serves from its per-thread cache. */
#define ARENA_BLOCK 480

struct rpc_arena_block {
    struct rpc_arena_block *next;
    size_t size;
    size_t used;
    max_align_t data[];
};

static void *arena_alloc(void *userdata, size_t size)
{
    struct rpc_arena *a = userdata;
    struct rpc_arena_block *b = a->blocks;
    const size_t align = alignof(max_align_t);

    if (size > SIZE_MAX - align - sizeof(*b))
        return NULL;
    size = (size + align - 1) & ~(align - 1);
    if (!b || b->size - b->used < size) {
        size_t n = size > ARENA_BLOCK ? size : ARENA_BLOCK;

        b = malloc(sizeof(*b) + n);
        if (!b)
            return NULL;
        b->size = n;
        b->used = 0;
        /* A block bigger than the default serves that one allocation: keep bumping the other. */
        if (a->blocks && n > ARENA_BLOCK) {
            b->next = a->blocks->next;
            a->blocks->next = b;
        } else {
            b->next = a->blocks;
            a->blocks = b;
        }
    }
    b->used += size;
    return (char *)b->data + b->used - size;
}

/* Pieces go with the arena. */
static void arena_free(void *userdata, void *p)
{
}

void rpc_arena_release(struct rpc_arena *a)
{
    while (a->blocks) {
        struct rpc_arena_block *next = a->blocks->next;

        free(a->blocks);
        a->blocks = next;
    }
}

int rpc_msg_decode_arena(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                         struct rpc_arena *arena, ProtobufCMessage **ret)
{
    ProtobufCAllocator allocator = {
        .alloc = arena_alloc, .free = arena_free, .allocator_data = arena};
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, &allocator, len, data);

    if (!m)
        return -EBADMSG;
    *ret = m;
    return 0;
}

void rpc_outbuf_init(struct rpc_outbuf *ob, size_t cap)
{
    *ob = (struct rpc_outbuf){0};
    strbuf_init(&ob->buf, cap);
}

void rpc_outbuf_release(struct rpc_outbuf *ob)
{
    strbuf_release(&ob->buf);
    ob->off = 0;
}

/* Drops the bytes nghttp2 already took, so the cap counts only what is pending. */
static void outbuf_compact(struct rpc_outbuf *ob)
{
    if (ob->off == 0)
        return;
    memmove(ob->buf.buf, ob->buf.buf + ob->off, ob->buf.len - ob->off);
    ob->buf.len -= ob->off;
    ob->buf.buf[ob->buf.len] = '\0';
    ob->off = 0;
}

static int outbuf_wake(struct rpc_outbuf *ob)
{
    if (!ob->deferred)
        return 0;
    ob->deferred = false;
    return 1;
}

int rpc_outbuf_append_msg(struct rpc_outbuf *ob, const ProtobufCMessage *msg, size_t max)
{
    int r;

    outbuf_compact(ob);
    r = rpc_msg_encode(&ob->buf, msg, max);
    if (r < 0)
        return r;
    return outbuf_wake(ob);
}

int rpc_outbuf_finish(struct rpc_outbuf *ob)
{
    ob->eof = true;
    return outbuf_wake(ob);
}

bool rpc_outbuf_pending(const struct rpc_outbuf *ob)
{
    return ob->off < ob->buf.len;
}

ssize_t rpc_outbuf_read(struct rpc_outbuf *ob, uint8_t *buf, size_t len, uint32_t *data_flags,
                        bool trailers_follow)
{
    size_t n = ob->buf.len - ob->off;

    if (n == 0 && !ob->eof) {
        ob->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    if (n > len)
        n = len;
    if (n > 0)
        memcpy(buf, ob->buf.buf + ob->off, n);
    ob->off += n;
    if (ob->eof && ob->off == ob->buf.len) {
        *data_flags |= NGHTTP2_DATA_FLAG_EOF;
        if (trailers_follow)
            *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
    }
    return (ssize_t)n;
}
