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

/* A value being canonicalised: its type, a scalar's value, or a container's canonical elements
 * (borrowed from the table, which holds them while the walk lasts) and keys. */
struct parts {
    json_type type;
    const char *s; /* a string's bytes */
    size_t len;
    json_int_t i;
    double x;
    json_t *small[SMALL];
    const char *small_keys[SMALL];
    size_t small_klen[SMALL];
    json_t **v;
    const char *const *keys;
    const size_t *klen;
    size_t n;
    bool changed;
    bool owned; /* v, keys and klen are malloc'd here */
};

static void parts_release(struct parts *p)
{
    if (p->owned) {
        free(p->v);
        free((void *)p->keys);
        free((void *)p->klen);
    }
}

/* Whether slot value c equals the value whose parts are p. */
static bool equal(const json_t *c, const struct parts *p)
{
    size_t i;

    if (json_typeof(c) != p->type)
        return false;
    switch (p->type) {
    case JSON_STRING:
        return json_string_length(c) == p->len && memcmp(json_string_value(c), p->s, p->len) == 0;
    case JSON_INTEGER:
        return json_integer_value(c) == p->i;
    case JSON_REAL: {
        double a = json_real_value(c);
        return memcmp(&a, &p->x, sizeof(a)) == 0;
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
        return false;
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

/* The held value equal to p's, or NULL with *slot where it goes. */
static json_t *find(const struct jdedup *t, uint64_t h, const struct parts *p, size_t *slot)
{
    size_t k;

    for (k = h & (t->alloc - 1); t->slots[k].v; k = (k + 1) & (t->alloc - 1))
        if (t->slots[k].hash == h && equal(t->slots[k].v, p))
            return t->slots[k].v;
    *slot = k;
    return NULL;
}

/* A new value made of p. */
static json_t *rebuild(const struct parts *p)
{
    json_t *c;

    switch (p->type) {
    case JSON_STRING:
        return json_stringn_nocheck(p->s, p->len);
    case JSON_INTEGER:
        return json_integer(p->i);
    case JSON_REAL:
        return json_real(p->x);
    case JSON_ARRAY:
        c = json_array();
        break;
    case JSON_OBJECT:
        c = json_object();
        break;
    default:
        return NULL;
    }
    if (!c)
        return NULL;
    for (size_t i = 0; i < p->n; i++) {
        int r = p->type == JSON_ARRAY
                    ? json_array_append(c, p->v[i])
                    : json_object_setn_nocheck(c, p->keys[i], p->klen[i], p->v[i]);
        if (r < 0) {
            json_decref(c);
            return NULL;
        }
    }
    return c;
}

/* The hash of a value of p's type over its scalar value, or over its elements' keys and
 * canonical pointers. */
static uint64_t hash_parts(const struct parts *p)
{
    uint64_t h = (uint64_t)p->type + 1, bits;

    switch (p->type) {
    case JSON_STRING:
        return hash_bytes(h, p->s, p->len);
    case JSON_INTEGER:
        return mix(h, (uint64_t)p->i);
    case JSON_REAL:
        memcpy(&bits, &p->x, sizeof(bits));
        return mix(h, bits);
    default:
        for (size_t i = 0; i < p->n; i++) {
            if (p->type == JSON_OBJECT)
                h = hash_bytes(h, p->keys[i], p->klen[i]);
            h = hash_ptr(h, p->v[i]);
        }
        return h;
    }
}

/* The table's value equal to p's: found, or v (a value the caller lends, when it is made of the
 * shared parts and no copy is wanted) or a new one made of p, added. Borrowed. */
static json_t *intern(struct jdedup *t, const struct parts *p, json_t *v)
{
    uint64_t h = hash_parts(p);
    json_t *found, *keep;
    size_t slot = 0;

    if ((t->used + 1) * 2 > t->alloc && grow(t) < 0)
        return NULL;
    found = find(t, h, p, &slot);
    if (found)
        return found;
    keep = v && !t->copy && !p->changed ? json_incref(v) : rebuild(p);
    if (!keep)
        return NULL;
    t->slots[slot] = (struct jdedup_slot){h, keep};
    t->used++;
    return keep;
}

static json_t *dedup(struct jdedup *t, json_t *v, unsigned depth, bool trust);

/* Canonicalises v's elements into p. */
static int collect(struct jdedup *t, json_t *v, unsigned depth, bool trust, struct parts *p)
{
    bool array = json_is_array(v);
    size_t n = array ? json_array_size(v) : json_object_size(v);
    void *it = array ? NULL : json_object_iter(v);
    const char **keys = p->small_keys;
    size_t *klen = p->small_klen;

    p->v = p->small;
    if (n > SMALL) {
        p->v = malloc(n * sizeof(*p->v));
        keys = malloc(n * sizeof(*keys));
        klen = malloc(n * sizeof(*klen));
        p->owned = true;
        p->keys = keys;
        p->klen = klen;
        if (!p->v || !keys || !klen)
            return -ENOMEM;
    }
    p->keys = keys;
    p->klen = klen;
    for (size_t i = 0; i < n; i++) {
        json_t *x;

        if (array) {
            x = json_array_get(v, i);
        } else {
            keys[i] = json_object_iter_key(it);
            klen[i] = json_object_iter_key_len(it);
            x = json_object_iter_value(it);
            it = json_object_iter_next(v, it);
        }
        p->v[i] = dedup(t, x, depth + 1, trust);
        if (!p->v[i])
            return -ENOMEM;
        p->n++;
        p->changed = p->changed || p->v[i] != x;
    }
    return 0;
}

/* v's parts, its elements taken as they are (not canonicalised). */
static void shallow(const json_t *v, struct parts *p)
{
    p->type = json_typeof(v);
    switch (p->type) {
    case JSON_STRING:
        p->s = json_string_value(v);
        p->len = json_string_length(v);
        break;
    case JSON_INTEGER:
        p->i = json_integer_value(v);
        break;
    case JSON_REAL:
        p->x = json_real_value(v);
        break;
    default:
        break;
    }
}

/* Whether container v is the table's own (its elements, taken as they are, are then the shared
 * ones: their pointers hash as the table hashed them). */
static bool holds(const struct jdedup *t, json_t *v)
{
    struct parts p = {.type = json_typeof(v)};
    bool array = p.type == JSON_ARRAY, yes = false;
    size_t n = array ? json_array_size(v) : json_object_size(v);
    void *it = array ? NULL : json_object_iter(v);
    json_t **vals = p.small;
    const char **keys = p.small_keys;
    size_t *klen = p.small_klen, k;

    if (t->alloc == 0 || n > SMALL)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (array) {
            vals[i] = json_array_get(v, i);
        } else {
            keys[i] = json_object_iter_key(it);
            klen[i] = json_object_iter_key_len(it);
            vals[i] = json_object_iter_value(it);
            it = json_object_iter_next(v, it);
        }
    }
    p.v = vals;
    p.keys = keys;
    p.klen = klen;
    p.n = n;
    uint64_t h = hash_parts(&p);
    for (k = h & (t->alloc - 1); t->slots[k].v && !yes; k = (k + 1) & (t->alloc - 1))
        yes = t->slots[k].v == v;
    return yes;
}

/* v's canonical value, borrowed: the table holds it (or v, the caller's, for what is not shared).
 * trust: containers that are the table's own already are taken without a look inside. */
static json_t *dedup(struct jdedup *t, json_t *v, unsigned depth, bool trust)
{
    struct parts p; /* not zeroed: its arrays are filled as far as n says */
    json_t *r;

    p.n = 0;
    p.changed = false;
    p.owned = false;
    shallow(v, &p);
    switch (p.type) {
    case JSON_STRING:
    case JSON_INTEGER:
    case JSON_REAL:
        return intern(t, &p, v);
    case JSON_ARRAY:
    case JSON_OBJECT:
        if (depth >= JDEDUP_MAX_DEPTH)
            return v;
        if (trust && holds(t, v))
            return v;
        r = collect(t, v, depth, trust, &p) < 0 ? NULL : intern(t, &p, v);
        parts_release(&p);
        return r;
    default:
        return v; /* null, true, false: jansson's own singletons */
    }
}

json_t *jdedup_value(struct jdedup *t, json_t *v)
{
    return v ? json_incref(dedup(t, v, 0, false)) : NULL;
}

json_t *jdedup_value_over(struct jdedup *t, json_t *v)
{
    return v ? json_incref(dedup(t, v, 0, true)) : NULL;
}

bool jdedup_holds(const struct jdedup *t, json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_ARRAY:
    case JSON_OBJECT:
        return holds(t, v);
    default:
        return false;
    }
}

json_t *jdedup_string(struct jdedup *t, const char *s, size_t len)
{
    return intern(t, &(struct parts){.type = JSON_STRING, .s = s, .len = len}, NULL);
}

json_t *jdedup_integer(struct jdedup *t, json_int_t i)
{
    return intern(t, &(struct parts){.type = JSON_INTEGER, .i = i}, NULL);
}

json_t *jdedup_real(struct jdedup *t, double x)
{
    return intern(t, &(struct parts){.type = JSON_REAL, .x = x}, NULL);
}

json_t *jdedup_array(struct jdedup *t, json_t *const *v, size_t n)
{
    return intern(t, &(struct parts){.type = JSON_ARRAY, .v = (json_t **)v, .n = n}, NULL);
}

json_t *jdedup_object(struct jdedup *t, const char *const *keys, const size_t *klen,
                      json_t *const *v, size_t n)
{
    return intern(
        t,
        &(struct parts){.type = JSON_OBJECT, .keys = keys, .klen = klen, .v = (json_t **)v, .n = n},
        NULL);
}
