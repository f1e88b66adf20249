/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the CEL module's files share and nobody outside sees: the environment (variables and the
 * function registry), a compiled program (tree + per-node resolution side table), the evaluation
 * context functions receive, and the helpers the evaluator, printer and standard library call in
 * each other. Libraries use only cel-lib.h.
 */
#pragma once

#include "cel-ast.h"
#include "cel-lib.h"
#include "cel-value.h"
#include "cel.h"

/* ---- registry ---- */

/* An overload with what dispatch needs, derived from its sig once at registration. */
struct cel_ovl_rt {
    const struct cel_overload *o;
    uint8_t arity;
    uint8_t kinds[CEL_OVERLOAD_MAX_ARGS];       /* enum cel_kind, or CEL_KIND_ANY */
    const char *objtype[CEL_OVERLOAD_MAX_ARGS]; /* for CEL_OBJECT: the required type name */
    size_t objlen[CEL_OVERLOAD_MAX_ARGS];
};
#define CEL_KIND_ANY 0xff

/* struct cel_func first, so the public view is a cast away. */
struct cel_func_entry {
    struct cel_func f;
    struct cel_ovl_rt *rt; /* f.n entries, parallel to f.overloads */
    bool nonstrict;        /* some overload takes error arguments (CEL_OVL_NONSTRICT) */
};

struct cel_registry {
    struct cel_func_entry *funcs;
    size_t n, alloc;
};

void cel_registry_release(struct cel_registry *r);
_wur_ int cel_registry_add(struct cel_registry *r, const struct cel_library *lib);
/* The first overload of fe whose kinds match args, or NULL. */
const struct cel_ovl_rt *cel_registry_dispatch(const struct cel_func_entry *fe,
                                               const struct cel_value *args, size_t n);
/* Parses one type of the sig grammar at *p: sets the run-time kind (CEL_KIND_ANY for dyn and type
 * parameters) and, for objects, the type name; advances *p. -EINVAL on a malformed type. */
_wur_ int cel_sig_type(const char **p, uint8_t *ret_kind, const char **ret_name, size_t *ret_len);

/* ---- environment ---- */

struct cel_var_decl {
    char *name;
    char *type; /* sig type syntax */
};

struct cel_env {
    unsigned libs;
    bool want_bool; /* cel_env_require_bool() */
    struct cel_var_decl *vars;
    size_t nvars, vars_alloc;
    struct cel_registry reg;
};

const struct cel_registry *cel_env_registry(const struct cel_env *env);

/* ---- programs ---- */

/* What compile resolved for one node (indexed by node id). */
struct cel_node_info {
    const struct cel_func_entry *fn; /* CALL: the function (NULL: operator or not found) */
    const struct cel_type *type;     /* IDENT naming a type */
    int32_t var;   /* IDENT (or a SELECT chain spelling a dotted name): variable slot, else -1 */
    int32_t local; /* IDENT: comprehension slot, else -1 */
    uint8_t call_style;        /* CALL: enum cel_call_style */
    struct cel_value constant; /* CONST: the literal as a value */
};

enum cel_call_style {
    CEL_CALL_GLOBAL,     /* f(args) */
    CEL_CALL_RECEIVER,   /* x.f(args) */
    CEL_CALL_NAMESPACED, /* ns.f(args): a global function with a dotted name; target not evaluated
                          */
};

struct cel_site {
    void *data;
    void (*free_fn)(void *);
};

struct cel_program {
    unsigned refs;
    const struct cel_env *env;
    struct cel_ast *ast;
    char *expr;
    struct cel_node_info *info; /* ast->nnodes + 1 entries */
    struct cel_site *sites;     /* ast->nnodes + 1 entries, per call node */
    struct cel_region region;   /* constants */
};

/* Resolves identifiers, calls and constants of p->ast into p->info; "line:col: message" errors for
 * undeclared names and functions. */
_wur_ int cel_resolve(struct cel_program *p, struct diag *d);

/* ---- evaluation ---- */

struct cel_activation {
    const struct cel_env *env;
    size_t n;
    struct cel_value *values;
    bool *bound;
};

struct cel_eval_ctx {
    struct cel_region region;
    const struct cel_program *prog;
    const struct cel_activation *act;
    struct cel_value *locals; /* comprehension slots */
    size_t locals_alloc;
    uint64_t cost, cost_limit;
    unsigned depth;
    bool aborted;                 /* the cost/depth/memory limit was hit: unwind at once */
    struct cel_value abort_error; /* the error that ends the evaluation then */
    const struct cel_node *call;  /* the call node being dispatched (site cache key) */
};

struct cel_evaluator {
    struct cel_eval_ctx ctx;
};

/* Marks the evaluation aborted with err (cost limit, depth, memory) and returns err. */
struct cel_value cel_ctx_abort(struct cel_eval_ctx *ctx, struct cel_value err);

/* Built-in operators (cel-eval.c): a binary arithmetic/comparison operator on two non-error
 * values. */
struct cel_value cel_eval_binary(struct cel_eval_ctx *ctx, enum cel_op op, struct cel_value a,
                                 struct cel_value b);

/* ---- standard library helpers shared with the evaluator (cel-lib-std.c, cel-lib-time.c) ---- */

/* string(v) for the scalar kinds string() accepts; error value otherwise. */
struct cel_value cel_std_to_string(struct cel_eval_ctx *ctx, struct cel_value v);
/* Formats a double as CEL's string() does (shortest round-trip, Go %g-like). */
_wur_ int cel_format_double(struct strbuf *out, double d);
/* Timestamp/duration helpers (cel-lib-time.c). */
_wur_ int cel_timestamp_format(struct strbuf *out, int64_t sec, int32_t nanos);
_wur_ int cel_duration_format(struct strbuf *out, int64_t sec, int32_t nanos);
struct cel_value cel_time_add(struct cel_eval_ctx *ctx, enum cel_op op, struct cel_value a,
                              struct cel_value b);

/* Strings: the UTF-8 code point count (size()). */
size_t cel_str_len(const char *s, size_t n);
/* A string value copied into the region (an error value on failure). */
struct cel_value cel_ctx_string(struct cel_eval_ctx *ctx, const char *s, size_t n);

/* Static type values looked up by name ("int", "google.protobuf.Timestamp"); NULL when not a
 * type name. */
const struct cel_type *cel_type_by_name(const char *name, size_t len);

/* Cost of an extra call as cel-go charges string traversal: ceil(0.1 * n). */
static inline uint64_t cel_cost_tenth(size_t n)
{
    return (n + 9) / 10;
}
