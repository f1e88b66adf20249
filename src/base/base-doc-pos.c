/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The position table of a document: for every value built (and every mapping member, by key) the
 * line and column it came from, so that errors found long after parsing can still point into the
 * file. Values are keyed by address, which stays stable because the doc holds a reference to every
 * root for as long as the table lives.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base-doc-internal.h"

static size_t pos_hash(const void *ptr, const char *key)
{
    uint64_t h = (uint64_t)(uintptr_t)ptr * 0x9e3779b97f4a7c15ULL;

    /* FNV-1a over the key, folded in so that members of one mapping spread out. */
    for (const unsigned char *p = (const unsigned char *)key; p && *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    return (size_t)(h ^ (h >> 29));
}

static bool pos_match(const struct pos_entry *e, const void *ptr, const char *key)
{
    if (e->ptr != ptr)
        return false;
    if (!e->key || !key)
        return !e->key && !key;
    return strcmp(e->key, key) == 0;
}

struct pos_entry *doc_pos_find(const struct pos_table *t, const void *ptr, const char *key)
{
    size_t i;

    if (t->alloc == 0)
        return NULL;
    for (i = pos_hash(ptr, key) & (t->alloc - 1);; i = (i + 1) & (t->alloc - 1)) {
        struct pos_entry *e = &t->slots[i];

        if (!e->ptr)
            return NULL;
        if (pos_match(e, ptr, key))
            return e;
    }
}

/* Places an entry that is known to be absent; the table has room. */
static void pos_place(struct pos_table *t, struct pos_entry e)
{
    size_t i = pos_hash(e.ptr, e.key) & (t->alloc - 1);

    while (t->slots[i].ptr)
        i = (i + 1) & (t->alloc - 1);
    t->slots[i] = e;
    t->used++;
}

static int pos_grow(struct pos_table *t)
{
    struct pos_table n = {.alloc = t->alloc ? t->alloc * 2 : 64};

    n.slots = calloc(n.alloc, sizeof(*n.slots));
    if (!n.slots)
        return -ENOMEM;
    for (size_t i = 0; i < t->alloc; i++)
        if (t->slots[i].ptr)
            pos_place(&n, t->slots[i]);
    free(t->slots);
    *t = n;
    return 0;
}

/* Remembers where ptr (or its member key) came from; the first position recorded wins. */
int doc_pos_put(struct pos_table *t, const void *ptr, const char *key, int line, int col)
{
    struct pos_entry e = {.ptr = ptr, .line = line, .col = col};
    int r;

    if (doc_pos_find(t, ptr, key))
        return 0;
    if ((t->used + 1) * 2 > t->alloc) {
        r = pos_grow(t);
        if (r < 0)
            return r;
    }
    if (key) {
        e.key = strdup(key);
        if (!e.key)
            return -ENOMEM;
    }
    pos_place(t, e);
    return 0;
}

void doc_pos_release(struct pos_table *t)
{
    for (size_t i = 0; i < t->alloc; i++)
        free(t->slots[i].key);
    free(t->slots);
    t->slots = NULL;
    t->alloc = t->used = 0;
}
