/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP/2 pieces both sides need on top of nghttp2: a header list copied out of nghttp2's header
 * callbacks under a size cap (nghttp2 hands us each field once, and a peer may send as many as its
 * frames hold), in one text buffer so a call's headers cost two allocations, and the content-type
 * check gRPC asks for.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rpc-internal.h"

#define HEADER_LIST_DEFAULT_CAP ((size_t)16 << 10)
/* What RFC 9113 §6.5.2 adds per field when sizing a header list. */
#define HEADER_OVERHEAD 32

void rpc_header_list_init(struct rpc_header_list *h, size_t cap)
{
    *h = (struct rpc_header_list){.cap = cap ? cap : HEADER_LIST_DEFAULT_CAP};
}

void rpc_header_list_reset(struct rpc_header_list *h)
{
    h->n = 0;
    h->text_len = 0;
    h->bytes = 0;
}

void rpc_header_list_release(struct rpc_header_list *h)
{
    free(h->items);
    free(h->text);
    *h = (struct rpc_header_list){.cap = h->cap};
}

static int header_list_grow(struct rpc_header_list *h, size_t text)
{
    if (h->n == h->alloc) {
        size_t alloc = h->alloc ? h->alloc * 2 : 8;
        struct rpc_header *items = realloc(h->items, alloc * sizeof(*items));

        if (!items)
            return -ENOMEM;
        h->items = items;
        h->alloc = alloc;
    }
    /* The text stays under the cap (each field counts HEADER_OVERHEAD octets more than it stores),
     * its allocation under twice the cap. */
    if (h->text_len + text > h->text_alloc) {
        size_t alloc = h->text_alloc ? h->text_alloc : 256;
        char *p;

        while (alloc < h->text_len + text)
            alloc *= 2;
        p = realloc(h->text, alloc);
        if (!p)
            return -ENOMEM;
        h->text = p;
        h->text_alloc = alloc;
    }
    return 0;
}

static size_t text_add(struct rpc_header_list *h, const uint8_t *p, size_t len)
{
    size_t off = h->text_len;

    if (len > 0)
        memcpy(h->text + off, p, len);
    h->text[off + len] = '\0';
    h->text_len += len + 1;
    return off;
}

int rpc_header_list_add(struct rpc_header_list *h, const uint8_t *name, size_t namelen,
                        const uint8_t *value, size_t valuelen)
{
    size_t size = namelen + valuelen + HEADER_OVERHEAD;
    struct rpc_header *item;
    int r;

    if (size > h->cap || h->bytes > h->cap - size)
        return -ENOBUFS;
    r = header_list_grow(h, namelen + valuelen + 2);
    if (r < 0)
        return r;
    item = &h->items[h->n++];
    item->name = text_add(h, name, namelen);
    item->value = text_add(h, value, valuelen);
    item->value_len = valuelen;
    h->bytes += size;
    return 0;
}

const char *rpc_header_list_get(const struct rpc_header_list *h, const char *name)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->text + h->items[i].name, name) == 0)
            return h->text + h->items[i].value;
    return NULL;
}

bool rpc_content_type_ok(const char *value)
{
    static const char prefix[] = "application/grpc";
    size_t n = sizeof(prefix) - 1;

    if (!value || strncasecmp(value, prefix, n) != 0)
        return false;
    return value[n] == '\0' || value[n] == '+' || value[n] == ';';
}
