/* SPDX-License-Identifier: Apache-2.0 */
/*
 * HTTP/2 pieces both sides need on top of nghttp2: a header list copied out of nghttp2's header
 * callbacks under a size cap (nghttp2 hands us each field once, and a peer may send as many as its
 * frames hold), and the content-type check gRPC asks for.
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
    for (size_t i = 0; i < h->n; i++) {
        free(h->items[i].name);
        free(h->items[i].value);
    }
    h->n = 0;
    h->bytes = 0;
}

void rpc_header_list_release(struct rpc_header_list *h)
{
    rpc_header_list_reset(h);
    free(h->items);
    h->items = NULL;
    h->alloc = 0;
}

static char *memdup_nul(const uint8_t *p, size_t len)
{
    char *s = malloc(len + 1);

    if (!s)
        return NULL;
    if (len > 0)
        memcpy(s, p, len);
    s[len] = '\0';
    return s;
}

static int header_list_grow(struct rpc_header_list *h)
{
    struct rpc_header *items;
    size_t alloc;

    if (h->n < h->alloc)
        return 0;
    alloc = h->alloc ? h->alloc * 2 : 8;
    items = realloc(h->items, alloc * sizeof(*items));
    if (!items)
        return -ENOMEM;
    h->items = items;
    h->alloc = alloc;
    return 0;
}

int rpc_header_list_add(struct rpc_header_list *h, const uint8_t *name, size_t namelen,
                        const uint8_t *value, size_t valuelen)
{
    _cleanup_free_ char *n = NULL, *v = NULL;
    size_t size = namelen + valuelen + HEADER_OVERHEAD;
    int r;

    if (size > h->cap || h->bytes > h->cap - size)
        return -ENOBUFS;
    r = header_list_grow(h);
    if (r < 0)
        return r;
    n = memdup_nul(name, namelen);
    v = memdup_nul(value, valuelen);
    if (!n || !v)
        return -ENOMEM;
    h->items[h->n++] = (struct rpc_header){
        .name = TAKE_PTR(n),
        .value = TAKE_PTR(v),
        .value_len = valuelen,
    };
    h->bytes += size;
    return 0;
}

const char *rpc_header_list_get(const struct rpc_header_list *h, const char *name)
{
    for (size_t i = 0; i < h->n; i++)
        if (strcmp(h->items[i].name, name) == 0)
            return h->items[i].value;
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
