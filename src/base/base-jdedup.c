/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sharing equal JSON values (base-jdedup.h). Values are canonicalised bottom-up: a container's
 * elements first, so that two containers are equal exactly when their keys are equal and their
 * canonical elements are the same pointers, and comparing one never descends. The table is open
 * addressing with linear probing over (hash, value) slots and holds a reference to each value.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base-jdedup.h"

struct jdedup_slot {
    uint64_t hash;
    json_t *v;
};

/* A container's canonical elements, on the stack when they are few. */
#define SMALL 16

void jdedup_init(struct jdedup *t)
{
    *t = (struct jdedup){.slots = NULL};
}

void jdedup_release(struct jdedup *t)
{
    bool copy = t->copy;

    for (size_t i = 0; i < t->alloc; i++)
        json_decref(t->slots[i].v);
    free(t->slots);
    jdedup_init(t);
    t->copy = copy;
}

size_t jdedup_size(const struct jdedup *t)
{
    return t->used;
}

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
    return h ^ (h >> 32);
}

static uint64_t hash_bytes(uint64_t h, const char *s, size_t n)
{
    uint64_t w;

    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = mix(h, w);
    }
    w = 0;
    memcpy(&w, s, n);
    return mix(h, w ^ ((uint64_t)n << 56));
}

static uint64_t hash_ptr(uint64_t h, const json_t *v)
{
    return mix(h, (uint64_t)(uintptr_t)v);
}

/* A value being canonicalised: a scalar's text, or a container's canonical elements (borrowed
 * from the table, which holds them while the walk lasts) and keys. */
struct parts {
    const char *s; /* a string's bytes */
    size_t len;
    json_t *small[SMALL];
    const char *small_keys[SMALL];
    size_t small_klen[SMALL];
    json_t **v;
    const char **keys;
    size_t *klen;
    size_t n;
    bool changed;
};

static void parts_release(struct parts *p)
{
    if (p->v != p->small) {
        free(p->v);
        free(p->keys);
        free(p->klen);
    }
}

/* Whether slot value c equals v, whose text or canonical elements are p. */
static bool equal(const json_t *c, const json_t *v, const struct parts *p)
{
    size_t i;

    if (json_typeof(c) != json_typeof(v))
        return false;
    switch (json_typeof(v)) {
    case JSON_STRING:
        return json_string_length(c) == p->len && memcmp(json_string_value(c), p->s, p->len) == 0;
    case JSON_INTEGER:
        return json_integer_value(c) == json_integer_value(v);
    case JSON_REAL: {
        double a = json_real_value(c), b = json_real_value(v);
        return memcmp(&a, &b, sizeof(a)) == 0;
    }
    case JSON_ARRAY:
        if (json_array_size(c) != p->n)
            return false;
        for (i = 0; i < p->n; i++)
            if (json_array_get(c, i) != p->v[i])
                return false;
        return true;
    case JSON_OBJECT: {
        void *it = json_object_iter((json_t *)c);

        if (json_object_size(c) != p->n)
            return false;
        for (i = 0; i < p->n; i++, it = json_object_iter_next((json_t *)c, it))
            if (json_object_iter_value(it) != p->v[i] ||
                json_object_iter_key_len(it) != p->klen[i] ||
                memcmp(json_object_iter_key(it), p->keys[i], p->klen[i]) != 0)
                return false;
        return true;
    }
    default:
        return c == v;
    }
}

static int grow(struct jdedup *t)
{
    size_t n = t->alloc ? t->alloc * 2 : (size_t)1 << 16;
    struct jdedup_slot *s = calloc(n, sizeof(*s));

    if (!s)
        return -ENOMEM;
    for (size_t i = 0; i < t->alloc; i++) {
        size_t k;

        if (!t->slots[i].v)
            continue;
        for (k = t->slots[i].hash & (n - 1); s[k].v; k = (k + 1) & (n - 1))
            ;
        s[k] = t->slots[i];
    }
    free(t->slots);
    t->slots = s;
    t->alloc = n;
    return 0;
}

/* The held value equal to v, or NULL with *slot where it goes. */
static json_t *find(const struct jdedup *t, uint64_t h, const json_t *v, const struct parts *p,
                    size_t *slot)
{
    size_t k;

    for (k = h & (t->alloc - 1); t->slots[k].v; k = (k + 1) & (t->alloc - 1))
        if (t->slots[k].hash == h && equal(t->slots[k].v, v, p))
            return t->slots[k].v;
    *slot = k;
    return NULL;
}

/* A new value equal to v: a scalar's copy, or a container of v's type holding p's elements (under
 * p's keys). */
static json_t *rebuild(const json_t *v, const struct parts *p)
{
    json_t *c;

    switch (json_typeof(v)) {
    case JSON_STRING:
        return json_stringn_nocheck(p->s, p->len);
    case JSON_INTEGER:
        return json_integer(json_integer_value(v));
    case JSON_REAL:
        return json_real(json_real_value(v));
    case JSON_ARRAY:
    case JSON_OBJECT:
        break;
    default:
        return json_incref((json_t *)v);
    }
    c = json_is_array(v) ? json_array() : json_object();
    if (!c)
        return NULL;
    for (size_t i = 0; i < p->n; i++) {
        int r = json_is_array(v) ? json_array_append(c, p->v[i])
                                 : json_object_setn_nocheck(c, p->keys[i], p->klen[i], p->v[i]);
        if (r < 0) {
            json_decref(c);
            return NULL;
        }
    }
    return c;
}

static json_t *dedup(struct jdedup *t, json_t *v, unsigned depth);

/* Canonicalises v's elements into p and hashes them into *h. */
static int collect(struct jdedup *t, json_t *v, unsigned depth, struct parts *p, uint64_t *h)
{
    bool array = json_is_array(v);
    size_t n = array ? json_array_size(v) : json_object_size(v);
    void *it = array ? NULL : json_object_iter(v);

    p->v = p->small;
    p->keys = p->small_keys;
    p->klen = p->small_klen;
    if (n > SMALL) {
        p->v = malloc(n * sizeof(*p->v));
        p->keys = malloc(n * sizeof(*p->keys));
        p->klen = malloc(n * sizeof(*p->klen));
        if (!p->v || !p->keys || !p->klen) {
            free(p->v);
            free(p->keys);
            free(p->klen);
            p->v = p->small;
            return -ENOMEM;
        }
    }
    for (size_t i = 0; i < n; i++) {
        json_t *x;

        if (array) {
            x = json_array_get(v, i);
        } else {
            p->keys[i] = json_object_iter_key(it);
            p->klen[i] = json_object_iter_key_len(it);
            *h = hash_bytes(*h, p->keys[i], p->klen[i]);
            x = json_object_iter_value(it);
            it = json_object_iter_next(v, it);
        }
        p->v[i] = dedup(t, x, depth + 1);
        if (!p->v[i])
            return -ENOMEM;
        p->n++;
        p->changed = p->changed || p->v[i] != x;
        *h = hash_ptr(*h, p->v[i]);
    }
    return 0;
}

/* v's canonical value, borrowed: the table holds it (or v, the caller's, for what is not shared).
 */
static json_t *dedup(struct jdedup *t, json_t *v, unsigned depth)
{
    struct parts p; /* not zeroed: its arrays are filled as far as n says */
    uint64_t h = (uint64_t)json_typeof(v) + 1;
    json_t *found, *keep;
    size_t slot = 0;

    p.n = 0;
    p.changed = false;
    p.v = p.small;
    switch (json_typeof(v)) {
    case JSON_STRING:
        p.s = json_string_value(v);
        p.len = json_string_length(v);
        h = hash_bytes(h, p.s, p.len);
        break;
    case JSON_INTEGER:
        h = mix(h, (uint64_t)json_integer_value(v));
        break;
    case JSON_REAL: {
        double x = json_real_value(v);
        uint64_t bits;

        memcpy(&bits, &x, sizeof(bits));
        h = mix(h, bits);
        break;
    }
    case JSON_ARRAY:
    case JSON_OBJECT:
        if (depth >= JDEDUP_MAX_DEPTH)
            return v;
        if (collect(t, v, depth, &p, &h) < 0) {
            parts_release(&p);
            return NULL;
        }
        break;
    default:
        return v; /* null, true, false: jansson's own singletons */
    }
    if ((t->used + 1) * 2 > t->alloc && grow(t) < 0) {
        parts_release(&p);
        return NULL;
    }
    found = find(t, h, v, &p, &slot);
    if (found) {
        parts_release(&p);
        return found;
    }
    keep = t->copy || p.changed ? rebuild(v, &p) : json_incref(v);
    parts_release(&p);
    if (!keep)
        return NULL;
    t->slots[slot] = (struct jdedup_slot){h, keep};
    t->used++;
    return keep;
}

json_t *jdedup_value(struct jdedup *t, json_t *v)
{
    return v ? json_incref(dedup(t, v, 0)) : NULL;
}
