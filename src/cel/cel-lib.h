/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The contract between CEL function libraries and the rest of the module. A library is a static
 * table of overloads; an environment (cel.h) enables a set of libraries, which the registry indexes
 * by function name. The checker asks the registry whether a call can resolve and reads each
 * overload's type signature; the evaluator resolves a call node to its candidate overloads once
 * and, at run time, picks the first whose argument kinds match — no allocation, no string
 * comparison on the hot path.
 *
 * Writing a function:
 *
 *     static struct cel_value str_contains(struct cel_eval_ctx *ctx, const struct cel_value *args,
 *                                          size_t n)
 *     {
 *         ... args[0] is the receiver (a string), args[1] the argument ...
 *         return cel_bool(found);
 *     }
 *     static const struct cel_overload OVERLOADS[] = {
 *         {.name = "contains", .receiver = true, .sig = "(string, string) -> bool",
 *          .fn = str_contains, .cost_fn = cost_string_scan},
 *     };
 *     const struct cel_library cel_lib_strings = {"strings", OVERLOADS, ARRAY_SIZE(OVERLOADS)};
 *
 * A function receives no error values (the evaluator returns an argument's error before calling,
 * unless the overload is CEL_OVL_NONSTRICT) and returns a value or an error value
 * (cel_ctx_error()). Values it returns follow cel-value.h's ownership rule: allocate in
 * cel_ctx_region(ctx), or return (parts of) the arguments, or static data.
 */
#pragma once

#include "cel-value.h"

struct cel_eval_ctx;

/* args[0..n) — the receiver first for receiver-style calls. */
typedef struct cel_value (*cel_fn)(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                   size_t n);

/* The run-time cost of one call beyond the evaluator's fixed 1 per call, from its arguments and
 * result (cel-go charges e.g. string scans by length: ceil(0.1 * size)). */
typedef uint64_t (*cel_cost_fn)(const struct cel_value *args, size_t n, struct cel_value result);

enum {
    /* The function is also called with error (and unknown) arguments, as `or`-like functions need.
     */
    CEL_OVL_NONSTRICT = 1u << 0,
};

#define CEL_OVERLOAD_MAX_ARGS 4

/*
 * One overload. `sig` is the overload's type, receiver first, in CEL's type syntax:
 *
 *     sig    := "(" [type {"," type}] ")" "->" type
 *     type   := "int" | "uint" | "double" | "bool" | "string" | "bytes" | "null_type" | "dyn"
 *             | "type" ["(" type ")"] | "list(" type ")" | "map(" type "," type ")"
 *             | "optional_type(" type ")" | "google.protobuf.Timestamp" |
 * "google.protobuf.Duration" | PARAM | OBJECT PARAM  := one upper-case letter (A, B, ...): a type
 * parameter, bound consistently across the sig OBJECT := a library type name (kubernetes.Quantity,
 * kubernetes.Semver): matched at run time against struct cel_object_class.type->name
 *
 * e.g. "(list(A), A) -> bool", "(map(K, V)) -> int", "(kubernetes.Quantity, int) ->
 * kubernetes.Quantity". The registry derives the arity and the run-time argument kinds from it
 * (PARAM and dyn match any kind). Operators are registered under CEL's operator names: _+_ _-_ _*_
 * _/_ _%_ -_ !_ _==_ _!=_
 * _<_ _<=_ _>_ _>=_ @in _[_] (the evaluator implements the built-in ones directly; the entries give
 * the checker their types).
 */
struct cel_overload {
    const char *name; /* "contains", "size", "sets.contains", "optional.of", "_+_" */
    bool receiver;    /* called as target.name(args...); args[0] is the target */
    const char *sig;
    cel_fn fn;
    uint32_t cost;       /* fixed extra cost per call (0: none) */
    cel_cost_fn cost_fn; /* NULL: only the fixed cost */
    unsigned flags;      /* CEL_OVL_* */
};

struct cel_library {
    const char *name;
    const struct cel_overload *overloads;
    size_t n;
};

/*
 * The libraries. Each is defined by its own file (cel-lib-<name>.c); an environment enables them by
 * flag (enum cel_lib in cel.h). Kubernetes' DRA environment enables all of them.
 */
extern const struct cel_library cel_lib_std;      /* operators, size, conversions, type(), string
                                                     contains/startsWith/endsWith/matches */
extern const struct cel_library cel_lib_time;     /* timestamp(), duration(), getters */
extern const struct cel_library cel_lib_strings;  /* ext strings v2 + strings.quote */
extern const struct cel_library cel_lib_lists;    /* k8s lists + ext lists v3 */
extern const struct cel_library cel_lib_sets;     /* ext sets */
extern const struct cel_library cel_lib_optional; /* optional.of/none/ofNonZeroValue, hasValue... */
extern const struct cel_library cel_lib_regex;    /* find, findAll (matches is std, same engine) */
extern const struct cel_library cel_lib_quantity; /* kubernetes.Quantity */
extern const struct cel_library cel_lib_semver;   /* kubernetes.Semver */

/* ---- the registry (what the checker and evaluator consult) ---- */

struct cel_registry;

/* A resolved function: every overload of one name and call style, in registration order. */
struct cel_func {
    const char *name;
    bool receiver;
    size_t n;
    const struct cel_overload *const *overloads;
};

/* The overloads of name (len bytes) called as receiver or global; NULL when there is none. Any
 * arity: the checker compares arities with cel_overload_arity(). */
const struct cel_func *cel_registry_find(const struct cel_registry *r, const char *name, size_t len,
                                         bool receiver);

/* The number of arguments of an overload, receiver included (from its sig). */
size_t cel_overload_arity(const struct cel_overload *o);

/* ---- what a function may do with its evaluation context ---- */

/* The evaluation's arena: allocate returned values here. */
struct cel_region *cel_ctx_region(struct cel_eval_ctx *ctx);

/* An error value (message formatted into the evaluation's arena). */
struct cel_value cel_ctx_error(struct cel_eval_ctx *ctx, enum cel_errcode code, const char *fmt,
                               ...) _printf_(3, 4);

/* The standard "no matching overload for 'name' applied to (int, string)" error for these args. */
struct cel_value cel_ctx_no_overload(struct cel_eval_ctx *ctx, const char *name,
                                     const struct cel_value *args, size_t n);

/*
 * Charges extra cost for work proportional to input (a loop inside a function). Returns false when
 * the evaluation's cost limit is now exceeded: the function should return at once (any value); the
 * evaluation then fails with the cost-limit error.
 */
bool cel_ctx_charge(struct cel_eval_ctx *ctx, uint64_t cost);

/*
 * A per-call-site cache that lives as long as the compiled program: e.g. a regex compiled from a
 * constant pattern, kept for the next evaluation. The first data stored at a site stays there (it
 * belongs to the program, which calls free_fn(data) when it is freed); later stores, and stores
 * racing with another thread's, do not replace it: that data then belongs to the current
 * evaluation and is freed (free_fn) when the evaluation's region is reset, so the caller may use it
 * until the evaluation ends either way. The function must itself check that the cached data fits
 * the current arguments (the pattern may differ between evaluations). cel_ctx_site_get returns
 * NULL when nothing is cached; cel_ctx_site_set returns -ENOMEM (free_fn(data) already called)
 * when the data could not be recorded.
 */
void *cel_ctx_site_get(struct cel_eval_ctx *ctx);
_wur_ int cel_ctx_site_set(struct cel_eval_ctx *ctx, void *data, void (*free_fn)(void *));
