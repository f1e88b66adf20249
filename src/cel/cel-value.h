/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CEL values: what expressions evaluate to, what variables are bound to and what library functions
 * take and return. A value is a 16-byte tagged struct passed by value; scalars live inside it,
 * everything else (strings, bytes, lists, maps, errors, optionals, library objects) is a pointer.
 *
 * OWNERSHIP — the one rule. Values are never freed one by one and carry no reference counts. The
 * memory a value points to belongs to a struct cel_region (an arena) and lives until that region
 * is reset or released:
 *   - values made during an evaluation are allocated in the evaluation's arena (cel_ctx_region());
 *     they are valid until the next cel_eval() with the same context or its release;
 *   - constants of a compiled program live in the program's arena (valid while the program lives);
 *   - values bound in an activation (a device's attributes, --var results) are BORROWED: the
 *     evaluator never copies them, the caller keeps them alive for as long as it evaluates.
 * So a value may point into anything that outlives the evaluation, and a function may return one of
 * its arguments (or a piece of one, e.g. a substring) without copying. Nothing a value points to
 * is ever modified after the value was handed out.
 *
 * Strings are UTF-8 (pointer + byte length, not NUL-terminated); bytes the same with any content.
 * Errors are values (CEL_ERROR) carrying a code and a message; the evaluator propagates them, and
 * && / || absorb them as CEL requires.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base-macro.h"
#include "base-strbuf.h"

enum cel_kind {
    CEL_NULL = 0,
    CEL_BOOL,
    CEL_INT,
    CEL_UINT,
    CEL_DOUBLE,
    CEL_STRING,
    CEL_BYTES,
    CEL_LIST,
    CEL_MAP,
    CEL_TYPE,
    CEL_OPTIONAL,
    CEL_TIMESTAMP, /* google.protobuf.Timestamp: .i seconds since the epoch, .n nanoseconds */
    CEL_DURATION,  /* google.protobuf.Duration: .i seconds, .n nanoseconds as int32 (same sign) */
    CEL_OBJECT,    /* a library type (Quantity, Semver, ...) behind a class vtable */
    CEL_ERROR,
    CEL_KIND_COUNT,
};

struct cel_vlist;
struct cel_vmap;
struct cel_type;
struct cel_error;
struct cel_object;

struct cel_value {
    uint8_t kind;  /* enum cel_kind */
    uint8_t flags; /* reserved, 0 */
    uint16_t pad;
    uint32_t n; /* CEL_STRING/CEL_BYTES: length in bytes; TIMESTAMP/DURATION: nanoseconds */
    union {
        bool b;
        int64_t i; /* CEL_INT; TIMESTAMP/DURATION seconds */
        uint64_t u;
        double d;
        const char *s; /* CEL_STRING, CEL_BYTES */
        const struct cel_vlist *list;
        const struct cel_vmap *map;
        const struct cel_type *type;
        const struct cel_value *opt; /* CEL_OPTIONAL: NULL for optional.none() */
        const struct cel_error *err;
        const struct cel_object *obj;
    };
};

/* The most bytes a string or bytes value may hold (the length is 32 bits). */
#define CEL_STRING_MAX ((size_t)UINT32_MAX)

struct cel_vlist {
    size_t n;
    const struct cel_value *items;
};

struct cel_vmap_entry {
    struct cel_value key; /* CEL_BOOL, CEL_INT, CEL_UINT or CEL_STRING */
    struct cel_value value;
};

/* A map keeps its entries in insertion order (the order comprehensions iterate) plus an index
 * sorted by key for O(log n) lookup. Keys: bool, int, uint and string; an int and a uint with the
 * same numeric value are the same key ({1: 'a'}[1u] finds 'a'), and a double with an integral
 * value finds them too. Build maps with cel_vmap_build(). */
struct cel_vmap {
    size_t n;
    const struct cel_vmap_entry *entries;
    const uint32_t *index; /* entries[index[0..n)] sorted by key; NULL when n is small (scan) */
    /* When not NULL, looking up an absent key yields this value instead of a no_such_key error
     * (device.attributes["unknown.domain"] is an empty map, as in Kubernetes). `in` and has()
     * still report the key absent. */
    const struct cel_value *absent;
};

/* A type value: type(1) == int. Names as CEL prints them: int, uint, double, bool, string, bytes,
 * null_type, list, map, type, optional_type, google.protobuf.Timestamp,
 * google.protobuf.Duration, kubernetes.Quantity, kubernetes.Semver, ... */
struct cel_type {
    const char *name;
};

extern const struct cel_type cel_type_null, cel_type_bool, cel_type_int, cel_type_uint,
    cel_type_double, cel_type_string, cel_type_bytes, cel_type_list, cel_type_map, cel_type_type,
    cel_type_optional, cel_type_timestamp, cel_type_duration, cel_type_dyn;

enum cel_errcode {
    CEL_ERR_GENERIC = 0,
    CEL_ERR_NO_SUCH_KEY,          /* "no such key: x" */
    CEL_ERR_NO_SUCH_FIELD,        /* "no such field 'x'" */
    CEL_ERR_NO_MATCHING_OVERLOAD, /* "no matching overload for 'f'" / "... applied to (int, string)"
                                   */
    CEL_ERR_DIVIDE_BY_ZERO,       /* "division by zero" */
    CEL_ERR_MODULUS_BY_ZERO,      /* "modulus by zero" */
    CEL_ERR_OVERFLOW,             /* "integer overflow" / "unsigned integer overflow" */
    CEL_ERR_RANGE,                /* conversion out of range, index out of range */
    CEL_ERR_INVALID_ARGUMENT,     /* a bad argument: unparsable int("x"), a bad regex, ... */
    CEL_ERR_COST_LIMIT,           /* "operation cancelled: actual cost limit exceeded" (aborts) */
    CEL_ERR_DEPTH_LIMIT,          /* nesting deeper than the evaluator allows (aborts) */
    CEL_ERR_MEMORY,               /* the evaluation arena's cap was reached (aborts) */
};

struct cel_error {
    enum cel_errcode code;
    const char *msg; /* NUL-terminated */
};

/*
 * A library type: Quantity, Semver, ... The library allocates its struct with struct cel_object as
 * the FIRST member (in an arena, like every value) and points it at a static class.
 */
struct cel_object_class {
    const struct cel_type *type; /* what type(x) returns; its name is the checker's type name */
    /* a and b have this class. NULL: objects are equal only when identical. */
    bool (*equal)(const struct cel_object *a, const struct cel_object *b);
    /* <0, 0, >0 for ordering (sort(), min()/max()); NULL: not ordered. */
    int (*compare)(const struct cel_object *a, const struct cel_object *b);
    /* Appends the CEL literal that evaluates to o: quantity("1Gi"), semver("1.2.3"). 0/-errno. */
    int (*print)(const struct cel_object *o, struct strbuf *out);
};

struct cel_object {
    const struct cel_object_class *cls;
};

/* ---- constructing values (no allocation) ---- */

static inline struct cel_value cel_null(void)
{
    return (struct cel_value){.kind = CEL_NULL};
}

static inline struct cel_value cel_bool(bool b)
{
    return (struct cel_value){.kind = CEL_BOOL, .b = b};
}

static inline struct cel_value cel_int(int64_t i)
{
    return (struct cel_value){.kind = CEL_INT, .i = i};
}

static inline struct cel_value cel_uint(uint64_t u)
{
    return (struct cel_value){.kind = CEL_UINT, .u = u};
}

static inline struct cel_value cel_double(double d)
{
    return (struct cel_value){.kind = CEL_DOUBLE, .d = d};
}

/* s must stay valid (see the ownership rule); len <= CEL_STRING_MAX. */
static inline struct cel_value cel_string(const char *s, size_t len)
{
    return (struct cel_value){.kind = CEL_STRING, .n = (uint32_t)len, .s = s};
}

static inline struct cel_value cel_bytes(const void *s, size_t len)
{
    return (struct cel_value){.kind = CEL_BYTES, .n = (uint32_t)len, .s = (const char *)s};
}

static inline struct cel_value cel_list_value(const struct cel_vlist *l)
{
    return (struct cel_value){.kind = CEL_LIST, .list = l};
}

static inline struct cel_value cel_map_value(const struct cel_vmap *m)
{
    return (struct cel_value){.kind = CEL_MAP, .map = m};
}

static inline struct cel_value cel_type_value(const struct cel_type *t)
{
    return (struct cel_value){.kind = CEL_TYPE, .type = t};
}

static inline struct cel_value cel_object_value(const struct cel_object *o)
{
    return (struct cel_value){.kind = CEL_OBJECT, .obj = o};
}

/* optional.none(); optional.of(x) needs an arena copy of x: cel_optional_of(). */
static inline struct cel_value cel_optional_none(void)
{
    return (struct cel_value){.kind = CEL_OPTIONAL, .opt = NULL};
}

static inline bool cel_is_error(struct cel_value v)
{
    return v.kind == CEL_ERROR;
}

/* ---- regions (arenas) ---- */

/* Named cel_region, not cel_arena: cel-ast.h's tree arena is a different, private struct. */

/*
 * A bump allocator. Allocation never frees; cel_region_reset() forgets everything but keeps the
 * first block, so an evaluation that fits in it allocates nothing from the system after the first
 * run. The total size is capped (cap bytes; 0 means CEL_REGION_DEFAULT_CAP).
 */
#define CEL_REGION_DEFAULT_CAP ((size_t)64 << 20)

struct cel_region_block;
struct cel_region_defer;

struct cel_region {
    struct cel_region_block *head; /* the block being filled; older ones chained behind it */
    size_t used;                   /* bytes handed out from all blocks */
    size_t total;                  /* bytes of all blocks */
    size_t cap;
    struct cel_region_defer *defers; /* cleanups run on reset/release, newest first */
};

void cel_region_init(struct cel_region *a, size_t cap);
/* Runs the deferred cleanups and frees every block. */
void cel_region_release(struct cel_region *a);
/* Runs the deferred cleanups and forgets all allocations; keeps one block for reuse. */
void cel_region_reset(struct cel_region *a);
/* size bytes aligned for any value; NULL past the cap or when malloc fails. */
void *cel_region_alloc(struct cel_region *a, size_t size);
/* A copy of n bytes plus a NUL terminator (so the copy is also a C string); NULL as above. */
char *cel_region_strndup(struct cel_region *a, const char *s, size_t n);
/* Calls fn(data) when the arena is reset or released: for objects that hold outside resources (a
 * compiled regex). -ENOMEM when the bookkeeping cannot be allocated (fn is then called at once). */
_wur_ int cel_region_defer(struct cel_region *a, void (*fn)(void *data), void *data);

/* ---- building aggregates (in an arena) ---- */

/* A list of n items, copied from items (which may be NULL when n is 0). NULL on allocation failure.
 */
const struct cel_vlist *cel_vlist_new(struct cel_region *a, const struct cel_value *items,
                                      size_t n);

/*
 * Builds a map from n entries (copied; insertion order kept) and its lookup index. Fails with
 * -EINVAL when a key is not bool/int/uint/string, -EEXIST on a repeated key (1 and 1u are the same
 * key), -ENOMEM. On success *ret_map is set.
 */
_wur_ int cel_vmap_build(struct cel_region *a, const struct cel_vmap_entry *entries, size_t n,
                         const struct cel_value *absent, const struct cel_vmap **ret_map);

/* optional.of(v): v copied into the arena. An error value (CEL_ERR_MEMORY) on allocation failure.
 */
struct cel_value cel_optional_of(struct cel_region *a, struct cel_value v);

/* An error value with a printf-formatted message allocated in a. On allocation failure a static
 * CEL_ERR_MEMORY error is returned instead, so the result is always an error value. */
struct cel_value cel_error_new(struct cel_region *a, enum cel_errcode code, const char *fmt, ...)
    _printf_(3, 4);
/* An error value whose message is a static string (no allocation). */
struct cel_value cel_error_static(const struct cel_error *err);

/* ---- inspecting values ---- */

/* Looks key up in m: *ret_value set and true when present. A double key with an integral value
 * finds an int/uint key of that value. Does not apply m->absent. */
bool cel_vmap_find(const struct cel_vmap *m, struct cel_value key, struct cel_value *ret_value);
/* Same with a string key given as pointer + length (the fast path for m.field / m["name"]). */
bool cel_vmap_find_str(const struct cel_vmap *m, const char *s, size_t len,
                       struct cel_value *ret_value);

/* CEL equality (==) at run time: heterogeneous numeric equality (1 == 1u == 1.0 when values are
 * equal), NaN unequal to itself, lists/maps element-wise, different kinds unequal. Neither a nor
 * b may be an error. */
bool cel_value_equal(struct cel_value a, struct cel_value b);

/*
 * CEL ordering (<, <=, >, >=, sort): numbers across int/uint/double, strings by code point (bytes
 * compare), bytes, bools (false < true), timestamps, durations, objects with a compare hook.
 * Returns 0 and sets *ret_cmp to -1/0/1, or -EINVAL when a and b are not ordered against each
 * other; NaN compared with anything yields -EDOM (every comparison with NaN is false).
 */
_wur_ int cel_value_compare(struct cel_value a, struct cel_value b, int *ret_cmp);

/* The CEL type of v (type(v)); NULL for an error value. */
const struct cel_type *cel_value_type(struct cel_value v);

/* The kind's name for messages ("int", "string", "map", ...); objects use their type name. */
const char *cel_value_type_name(struct cel_value v);

/*
 * Appends v as a CEL literal, exactly as `gpuplane cel eval` prints it: 1, 1u, 1.0 / 1e+100
 * (round-trip precision), double("NaN") / double("Infinity"), "escaped", b"\x00", true, null,
 * [a, b], {k: v} with keys sorted, types by bare name, quantity("1Gi"), timestamp("..."),
 * duration("..."), optional.of(x) / optional.none(). An error value appends its message. 0/-errno.
 */
_wur_ int cel_value_print(struct strbuf *out, struct cel_value v);
