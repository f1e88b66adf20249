/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The compiled-program cache: selectors repeat across claims and scheduling attempts, so each
 * expression text is compiled once. Bounded (least recently used out first); compile failures are
 * cached with their diagnostic so a bad selector costs one parse. Entries are found by a hash of
 * the text, then compared in full; the table is small (hundreds), so a linear scan of hashes is
 * cheaper than anything cleverer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cel-internal.h"

#define CACHE_MAX_ENTRIES 65536

struct cache_entry {
    uint64_t hash;
    char *expr;
    size_t len;
    struct cel_program *prog; /* NULL: the compile failed with err/diag */
    int err;
    struct diag diag;
    uint64_t used; /* tick of the last hit */
};

struct cel_cache {
    const struct cel_env *env;
    struct cache_entry *entries;
    size_t n, max;
    uint64_t tick;
};

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;

    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

int cel_cache_new(const struct cel_env *env, size_t max, struct cel_cache **ret_cache)
{
    struct cel_cache *c;

    if (max == 0 || max > CACHE_MAX_ENTRIES)
        return -EINVAL;
    c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->entries = calloc(max, sizeof(*c->entries));
    if (!c->entries) {
        free(c);
        return -ENOMEM;
    }
    c->env = env;
    c->max = max;
    *ret_cache = c;
    return 0;
}

static void entry_release(struct cache_entry *e)
{
    free(e->expr);
    cel_program_unref(e->prog);
    *e = (struct cache_entry){0};
}

struct cel_cache *cel_cache_free(struct cel_cache *c)
{
    if (!c)
        return NULL;
    for (size_t i = 0; i < c->n; i++)
        entry_release(&c->entries[i]);
    free(c->entries);
    free(c);
    return NULL;
}

static int answer(struct cache_entry *e, struct cel_program **ret_prog, struct diag *d)
{
    if (!e->prog) {
        if (d)
            *d = e->diag;
        return e->err;
    }
    *ret_prog = cel_program_ref(e->prog);
    return 0;
}

/* The slot for a new entry: a free one, else the least recently used (released). */
static struct cache_entry *victim(struct cel_cache *c)
{
    struct cache_entry *old;

    if (c->n < c->max)
        return &c->entries[c->n++];
    old = &c->entries[0];
    for (size_t i = 1; i < c->n; i++)
        if (c->entries[i].used < old->used)
            old = &c->entries[i];
    entry_release(old);
    return old;
}

int cel_cache_get(struct cel_cache *c, const char *expr, size_t len, struct cel_program **ret_prog,
                  struct diag *d)
{
    uint64_t h = fnv1a(expr, len);
    struct cache_entry *e;
    struct diag local;
    struct cel_program *p = NULL;
    int err;

    c->tick++;
    for (size_t i = 0; i < c->n; i++) {
        e = &c->entries[i];
        if (e->hash == h && e->len == len && memcmp(e->expr, expr, len) == 0) {
            e->used = c->tick;
            return answer(e, ret_prog, d);
        }
    }
    diag_init(&local);
    err = cel_compile(c->env, expr, len, &p, &local);
    if (err == -ENOMEM) {
        /* not a property of the expression: do not cache it */
        if (d)
            *d = local;
        return err;
    }
    char *copy = malloc(len + 1);
    if (!copy) {
        cel_program_unref(p);
        return -ENOMEM;
    }
    memcpy(copy, expr, len);
    copy[len] = '\0';
    e = victim(c);
    *e = (struct cache_entry){
        .hash = h, .expr = copy, .len = len, .prog = p, .err = err, .diag = local, .used = c->tick};
    return answer(e, ret_prog, d);
}
