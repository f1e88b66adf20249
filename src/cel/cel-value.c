/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The value layer: regions (the arenas every value lives in), list and map construction, map
 * lookup with CEL's numeric key unification, equality and ordering as CEL defines them, error
 * values and the built-in type values. Everything here is allocation-free except the region itself
 * and the constructors that take one.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cel-internal.h"

/* ---- regions ---- */

/* The first block; each next one doubles. Small, because some regions stay small for good: each of
 * gpuplane schedule's 5,000 per-node allocators keeps its 8 devices' values (about 8 KiB) in one,
 * and a 16 KiB first block made them 80 MiB. A region that is reset keeps its largest block, so an
 * evaluation context grows to its size once. */
#define REGION_BLOCK_MIN ((size_t)1 << 10)
#define REGION_ALIGN 16

struct cel_region_block {
    struct cel_region_block *next;
    size_t size, used;
    _Alignas(REGION_ALIGN) unsigned char data[];
};

struct cel_region_defer {
    struct cel_region_defer *next;
    void (*fn)(void *);
    void *data;
};

void cel_region_init(struct cel_region *a, size_t cap)
{
    *a = (struct cel_region){.cap = cap ? cap : CEL_REGION_DEFAULT_CAP};
}

static void run_defers(struct cel_region *a)
{
    struct cel_region_defer *d = a->defers;

    /* the bookkeeping lives in the region itself, so only the callbacks run */
    a->defers = NULL;
    for (; d; d = d->next)
        d->fn(d->data);
}

void cel_region_release(struct cel_region *a)
{
    run_defers(a);
    for (struct cel_region_block *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    a->head = NULL;
    a->used = a->total = 0;
}

void cel_region_reset(struct cel_region *a)
{
    struct cel_region_block *keep = a->head;

    run_defers(a);
    if (!keep)
        return;
    /* keep the newest (largest) block, free the rest */
    for (struct cel_region_block *b = keep->next, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    keep->next = NULL;
    keep->used = 0;
    a->used = 0;
    a->total = keep->size;
}

void *cel_region_alloc(struct cel_region *a, size_t size)
{
    struct cel_region_block *b = a->head;

    if (size > a->cap)
        return NULL;
    size = (size + REGION_ALIGN - 1) & ~(size_t)(REGION_ALIGN - 1);
    if (size == 0)
        size = REGION_ALIGN;
    if (size > a->cap || a->used > a->cap - size)
        return NULL;
    if (!b || b->size - b->used < size) {
        size_t bsize = b ? b->size * 2 : REGION_BLOCK_MIN;

        while (bsize < size)
            bsize *= 2;
        b = malloc(sizeof(*b) + bsize);
        if (!b)
            return NULL;
        b->next = a->head;
        b->size = bsize;
        b->used = 0;
        a->head = b;
        a->total += bsize;
    }
    void *p = b->data + b->used;
    b->used += size;
    a->used += size;
    return p;
}

char *cel_region_strndup(struct cel_region *a, const char *s, size_t n)
{
    char *p;

    if (n == SIZE_MAX)
        return NULL;
    p = cel_region_alloc(a, n + 1);
    if (!p)
        return NULL;
    if (n)
        memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

int cel_region_defer(struct cel_region *a, void (*fn)(void *data), void *data)
{
    struct cel_region_defer *d = cel_region_alloc(a, sizeof(*d));

    if (!d) {
        fn(data);
        return -ENOMEM;
    }
    d->fn = fn;
    d->data = data;
    d->next = a->defers;
    a->defers = d;
    return 0;
}

/* ---- types ---- */

const struct cel_type cel_type_null = {"null_type"}, cel_type_bool = {"bool"},
                      cel_type_int = {"int"}, cel_type_uint = {"uint"},
                      cel_type_double = {"double"}, cel_type_string = {"string"},
                      cel_type_bytes = {"bytes"}, cel_type_list = {"list"}, cel_type_map = {"map"},
                      cel_type_type = {"type"}, cel_type_optional = {"optional_type"},
                      cel_type_timestamp = {"google.protobuf.Timestamp"},
                      cel_type_duration = {"google.protobuf.Duration"}, cel_type_dyn = {"dyn"};

/* The types an identifier can name (dyn is not one: `dyn` alone is a compile error). */

static const struct cel_type *const BUILTIN_TYPES[] = {
    &cel_type_null,     &cel_type_bool,      &cel_type_int,      &cel_type_uint, &cel_type_double,
    &cel_type_string,   &cel_type_bytes,     &cel_type_list,     &cel_type_map,  &cel_type_type,
    &cel_type_optional, &cel_type_timestamp, &cel_type_duration,
};

const struct cel_type *cel_type_by_name(const char *name, size_t len)
{
    for (size_t i = 0; i < ARRAY_SIZE(BUILTIN_TYPES); i++)
        if (strlen(BUILTIN_TYPES[i]->name) == len && memcmp(BUILTIN_TYPES[i]->name, name, len) == 0)
            return BUILTIN_TYPES[i];
    return NULL;
}

const struct cel_type *cel_value_type(struct cel_value v)
{
    switch ((enum cel_kind)v.kind) {
    case CEL_NULL:
        return &cel_type_null;
    case CEL_BOOL:
        return &cel_type_bool;
    case CEL_INT:
        return &cel_type_int;
    case CEL_UINT:
        return &cel_type_uint;
    case CEL_DOUBLE:
        return &cel_type_double;
    case CEL_STRING:
        return &cel_type_string;
    case CEL_BYTES:
        return &cel_type_bytes;
    case CEL_LIST:
        return &cel_type_list;
    case CEL_MAP:
        return &cel_type_map;
    case CEL_TYPE:
        return &cel_type_type;
    case CEL_OPTIONAL:
        return &cel_type_optional;
    case CEL_TIMESTAMP:
        return &cel_type_timestamp;
    case CEL_DURATION:
        return &cel_type_duration;
    case CEL_OBJECT:
        return v.obj->cls->type;
    case CEL_ERROR:
    case CEL_KIND_COUNT:
        break;
    }
    return NULL;
}

const char *cel_value_type_name(struct cel_value v)
{
    const struct cel_type *t = cel_value_type(v);

    return t ? t->name : "error";
}

/* ---- errors ---- */

static const struct cel_error OOM_ERROR = {CEL_ERR_MEMORY, "out of memory"};

struct cel_value cel_error_static(const struct cel_error *err)
{
    return (struct cel_value){.kind = CEL_ERROR, .err = err};
}

_printf_(3, 0) static struct cel_value
    verror(struct cel_region *a, enum cel_errcode code, const char *fmt, va_list ap)
{
    char buf[512];
    struct cel_error *e;
    int n;

    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    if (n < 0)
        n = 0;
    e = cel_region_alloc(a, sizeof(*e));
    if (!e)
        return cel_error_static(&OOM_ERROR);
    e->code = code;
    e->msg = cel_region_strndup(a, buf, strnlen(buf, sizeof(buf)));
    if (!e->msg)
        return cel_error_static(&OOM_ERROR);
    return (struct cel_value){.kind = CEL_ERROR, .err = e};
}

struct cel_value cel_error_new(struct cel_region *a, enum cel_errcode code, const char *fmt, ...)
{
    va_list ap;
    struct cel_value v;

    va_start(ap, fmt);
    v = verror(a, code, fmt, ap);
    va_end(ap);
    return v;
}

/* ---- lists, optionals ---- */

const struct cel_vlist *cel_vlist_new(struct cel_region *a, const struct cel_value *items, size_t n)
{
    struct cel_vlist *l;
    struct cel_value *copy = NULL;

    if (n > SIZE_MAX / sizeof(*copy))
        return NULL;
    l = cel_region_alloc(a, sizeof(*l));
    if (!l)
        return NULL;
    if (n) {
        copy = cel_region_alloc(a, n * sizeof(*copy));
        if (!copy)
            return NULL;
        memcpy(copy, items, n * sizeof(*copy));
    }
    l->n = n;
    l->items = copy;
    return l;
}

struct cel_value cel_optional_of(struct cel_region *a, struct cel_value v)
{
    struct cel_value *p = cel_region_alloc(a, sizeof(*p));

    if (!p)
        return cel_error_static(&OOM_ERROR);
    *p = v;
    return (struct cel_value){.kind = CEL_OPTIONAL, .opt = p};
}

/* ---- map keys ---- */

/*
 * Key order: bools, then numbers (int and uint on one numeric line, so 1 and 1u are one key), then
 * strings. Returns <0, 0, >0.
 */
static int key_class(struct cel_value k)
{
    switch (k.kind) {
    case CEL_BOOL:
        return 0;
    case CEL_INT:
    case CEL_UINT:
        return 1;
    default:
        return 2;
    }
}

static int cmp_int_uint(int64_t i, uint64_t u)
{
    if (i < 0)
        return -1;
    return (uint64_t)i < u ? -1 : (uint64_t)i > u;
}

static int cmp_bytes(const char *a, size_t an, const char *b, size_t bn)
{
    int c = an && bn ? memcmp(a, b, an < bn ? an : bn) : 0;

    if (c)
        return c < 0 ? -1 : 1;
    return an < bn ? -1 : an > bn;
}

static int key_cmp(struct cel_value a, struct cel_value b)
{
    int ca = key_class(a), cb = key_class(b);

    if (ca != cb)
        return ca < cb ? -1 : 1;
    switch (ca) {
    case 0:
        return (int)a.b - (int)b.b;
    case 1:
        if (a.kind == CEL_INT && b.kind == CEL_INT)
            return a.i < b.i ? -1 : a.i > b.i;
        if (a.kind == CEL_UINT && b.kind == CEL_UINT)
            return a.u < b.u ? -1 : a.u > b.u;
        if (a.kind == CEL_INT)
            return cmp_int_uint(a.i, b.u);
        return -cmp_int_uint(b.i, a.u);
    default:
        return cmp_bytes(a.s, a.n, b.s, b.n);
    }
}

static bool valid_key(struct cel_value k)
{
    return k.kind == CEL_BOOL || k.kind == CEL_INT || k.kind == CEL_UINT || k.kind == CEL_STRING;
}

#define MAP_SCAN_MAX 8

static int index_cmp(const void *x, const void *y, void *base)
{
    const struct cel_vmap_entry *e = base;

    return key_cmp(e[*(const uint32_t *)x].key, e[*(const uint32_t *)y].key);
}

int cel_vmap_build(struct cel_region *a, const struct cel_vmap_entry *entries, size_t n,
                   const struct cel_value *absent, const struct cel_vmap **ret_map)
{
    struct cel_vmap *m;
    struct cel_vmap_entry *copy = NULL;
    uint32_t *index = NULL;

    if (n > UINT32_MAX || n > SIZE_MAX / sizeof(*copy))
        return -E2BIG;
    for (size_t i = 0; i < n; i++)
        if (!valid_key(entries[i].key))
            return -EINVAL;
    m = cel_region_alloc(a, sizeof(*m));
    if (!m)
        return -ENOMEM;
    if (n) {
        copy = cel_region_alloc(a, n * sizeof(*copy));
        if (!copy)
            return -ENOMEM;
        memcpy(copy, entries, n * sizeof(*copy));
    }
    if (n > MAP_SCAN_MAX) {
        index = cel_region_alloc(a, n * sizeof(*index));
        if (!index)
            return -ENOMEM;
        for (size_t i = 0; i < n; i++)
            index[i] = (uint32_t)i;
        qsort_r(index, n, sizeof(*index), index_cmp, copy);
        for (size_t i = 1; i < n; i++)
            if (key_cmp(copy[index[i - 1]].key, copy[index[i]].key) == 0)
                return -EEXIST;
    } else {
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < i; j++)
                if (key_cmp(copy[i].key, copy[j].key) == 0)
                    return -EEXIST;
    }
    m->n = n;
    m->entries = copy;
    m->index = index;
    m->absent = absent;
    *ret_map = m;
    return 0;
}

static bool find_key(const struct cel_vmap *m, struct cel_value key, struct cel_value *ret)
{
    if (!m->index) {
        for (size_t i = 0; i < m->n; i++)
            if (key_cmp(m->entries[i].key, key) == 0) {
                *ret = m->entries[i].value;
                return true;
            }
        return false;
    }
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct cel_vmap_entry *e = &m->entries[m->index[mid]];
        int c = key_cmp(e->key, key);

        if (c == 0) {
            *ret = e->value;
            return true;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return false;
}

bool cel_vmap_find(const struct cel_vmap *m, struct cel_value key, struct cel_value *ret_value)
{
    if (key.kind == CEL_STRING)
        return cel_vmap_find_str(m, key.s, key.n, ret_value);
    if (key.kind == CEL_DOUBLE) {
        double d = key.d;

        /* a double finds an int/uint key of the same value (heterogeneous equality) */
        if (d != d || floor(d) != d)
            return false;
        if (d >= -9223372036854775808.0 && d < 9223372036854775808.0)
            key = cel_int((int64_t)d);
        else if (d >= 0 && d < 18446744073709551616.0)
            key = cel_uint((uint64_t)d);
        else
            return false;
    }
    if (!valid_key(key))
        return false;
    return find_key(m, key, ret_value);
}

bool cel_vmap_find_str(const struct cel_vmap *m, const char *s, size_t len,
                       struct cel_value *ret_value)
{
    /* the selector hot path (m.field, m["domain"]): small maps, string keys, no generic compare */
    if (!m->index) {
        for (size_t i = 0; i < m->n; i++) {
            const struct cel_value *k = &m->entries[i].key;

            if (k->kind == CEL_STRING && k->n == len && (len == 0 || memcmp(k->s, s, len) == 0)) {
                *ret_value = m->entries[i].value;
                return true;
            }
        }
        return false;
    }
    return find_key(m, cel_string(s, len), ret_value);
}

/* ---- equality and ordering ---- */

static bool is_number(struct cel_value v)
{
    return v.kind == CEL_INT || v.kind == CEL_UINT || v.kind == CEL_DOUBLE;
}

/*
 * int/uint vs double as cel-go compares them (so results match Kubernetes): a double beyond the
 * integer type's range orders outside it, otherwise the integer is converted to double (lossy for
 * magnitudes above 2^53: 9223372036854775807 equals 9223372036854775808.0).
 */
static int cmp_dd(double a, double b)
{
    return a < b ? -1 : a > b;
}

static int cmp_int_double(int64_t i, double d, bool *nan)
{
    if (d != d) {
        *nan = true;
        return 0;
    }
    if (d < -9223372036854775808.0)
        return 1;
    if (d > 9223372036854775808.0)
        return -1;
    return cmp_dd((double)i, d);
}

static int cmp_uint_double(uint64_t u, double d, bool *nan)
{
    if (d != d) {
        *nan = true;
        return 0;
    }
    if (d < 0)
        return 1;
    if (d > 18446744073709551616.0)
        return -1;
    return cmp_dd((double)u, d);
}

/* Numeric comparison across kinds; *nan set when either is NaN. */
static int num_cmp(struct cel_value a, struct cel_value b, bool *nan)
{
    *nan = false;
    switch (a.kind) {
    case CEL_INT:
        if (b.kind == CEL_INT)
            return a.i < b.i ? -1 : a.i > b.i;
        if (b.kind == CEL_UINT)
            return cmp_int_uint(a.i, b.u);
        return cmp_int_double(a.i, b.d, nan);
    case CEL_UINT:
        if (b.kind == CEL_UINT)
            return a.u < b.u ? -1 : a.u > b.u;
        if (b.kind == CEL_INT)
            return -cmp_int_uint(b.i, a.u);
        return cmp_uint_double(a.u, b.d, nan);
    default:
        if (b.kind == CEL_DOUBLE) {
            if (a.d != a.d || b.d != b.d) {
                *nan = true;
                return 0;
            }
            return a.d < b.d ? -1 : a.d > b.d;
        }
        if (b.kind == CEL_INT)
            return -cmp_int_double(b.i, a.d, nan);
        return -cmp_uint_double(b.u, a.d, nan);
    }
}

static bool list_equal(const struct cel_vlist *a, const struct cel_vlist *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (!cel_value_equal(a->items[i], b->items[i]))
            return false;
    return true;
}

static bool map_equal(const struct cel_vmap *a, const struct cel_vmap *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++) {
        struct cel_value v;

        if (!find_key(b, a->entries[i].key, &v) || !cel_value_equal(a->entries[i].value, v))
            return false;
    }
    return true;
}

bool cel_value_equal(struct cel_value a, struct cel_value b)
{
    if (is_number(a) && is_number(b)) {
        bool nan;
        int c = num_cmp(a, b, &nan);

        return !nan && c == 0;
    }
    if (a.kind != b.kind)
        return false;
    switch ((enum cel_kind)a.kind) {
    case CEL_NULL:
        return true;
    case CEL_BOOL:
        return a.b == b.b;
    case CEL_STRING:
    case CEL_BYTES:
        return a.n == b.n && (a.n == 0 || memcmp(a.s, b.s, a.n) == 0);
    case CEL_LIST:
        return list_equal(a.list, b.list);
    case CEL_MAP:
        return map_equal(a.map, b.map);
    case CEL_TYPE:
        return a.type == b.type || strcmp(a.type->name, b.type->name) == 0;
    case CEL_OPTIONAL:
        if (!a.opt || !b.opt)
            return a.opt == b.opt;
        return cel_value_equal(*a.opt, *b.opt);
    case CEL_TIMESTAMP:
    case CEL_DURATION:
        return a.i == b.i && a.n == b.n;
    case CEL_OBJECT:
        if (a.obj->cls != b.obj->cls)
            return false;
        return a.obj->cls->equal ? a.obj->cls->equal(a.obj, b.obj) : a.obj == b.obj;
    default:
        return false;
    }
}

int cel_value_compare(struct cel_value a, struct cel_value b, int *ret_cmp)
{
    int c;

    if (is_number(a) && is_number(b)) {
        bool nan;

        c = num_cmp(a, b, &nan);
        if (nan)
            return -EDOM;
        *ret_cmp = c;
        return 0;
    }
    if (a.kind != b.kind)
        return -EINVAL;
    switch (a.kind) {
    case CEL_BOOL:
        c = (int)a.b - (int)b.b;
        break;
    case CEL_STRING:
    case CEL_BYTES:
        /* UTF-8 byte order is code point order */
        c = cmp_bytes(a.s, a.n, b.s, b.n);
        break;
    case CEL_TIMESTAMP:
    case CEL_DURATION:
        c = a.i != b.i ? (a.i < b.i ? -1 : 1)
                       : ((int32_t)a.n > (int32_t)b.n) - ((int32_t)a.n < (int32_t)b.n);
        break;
    case CEL_OBJECT:
        if (a.obj->cls != b.obj->cls || !a.obj->cls->compare)
            return -EINVAL;
        c = a.obj->cls->compare(a.obj, b.obj);
        break;
    default:
        return -EINVAL;
    }
    *ret_cmp = c < 0 ? -1 : c > 0;
    return 0;
}
