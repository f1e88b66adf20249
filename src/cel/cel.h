/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpuplane's CEL interpreter: the public API. An environment declares variables and enables
 * function libraries (the DRA preset is Kubernetes' device-selector environment); an expression is
 * compiled once against it into a program (parsed, macro-expanded, checked, resolved) and evaluated
 * many times, each time against an activation that binds the variables. Evaluation runs in an
 * evaluator that owns the scratch memory, so after the first run a typical selector evaluates with
 * no allocation. Values follow cel-value.h's ownership rule; library authors see cel-lib.h.
 *
 * Typical use:
 *
 *     cel_env_new_dra(&env);
 *     cel_compile(env, expr, strlen(expr), &prog, &diag);       -- "line:col: message" on failure
 *     cel_evaluator_new(&ev);
 *     cel_activation_new(env, &act); cel_activation_bind(act, "device", device_value);
 *     struct cel_value v = cel_eval(ev, prog, act, NULL);       -- v.kind == CEL_ERROR on failure
 *
 * Not thread-safe per object: use one evaluator (and activation) per thread; environments and
 * programs may be shared once built.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base-diag.h"
#include "base-macro.h"
#include "cel-lib.h"
#include "cel-value.h"

/* Libraries an environment can enable (cel-lib.h lists what each holds). */
enum cel_lib_flag {
    CEL_LIB_STD = 1u << 0, /* always enabled */
    CEL_LIB_TIME = 1u << 1,
    CEL_LIB_STRINGS = 1u << 2,
    CEL_LIB_LISTS = 1u << 3,
    CEL_LIB_SETS = 1u << 4,
    CEL_LIB_OPTIONAL = 1u << 5,
    CEL_LIB_REGEX = 1u << 6,
    CEL_LIB_QUANTITY = 1u << 7,
    CEL_LIB_SEMVER = 1u << 8,
};
/* Everything Kubernetes' stored-expression DRA environment enables. */
#define CEL_LIBS_DRA 0x1ffu

/* Kubernetes' runtime cost limit per device-selector evaluation. */
#define CEL_DEFAULT_COST_LIMIT ((uint64_t)1000000)
/* The deepest the evaluator recurses (nested calls, comprehensions inside comprehensions). */
#define CEL_EVAL_MAX_DEPTH 1024

struct cel_env;
struct cel_program;
struct cel_activation;
struct cel_evaluator;

/* ---- environments ---- */

/* An environment with the libraries in `libs` (enum cel_lib_flag; CEL_LIB_STD is implied) and no
 * variables. 0, -ENOMEM. */
_wur_ int cel_env_new(unsigned libs, struct cel_env **ret_env);
/* The DRA device-selector environment: CEL_LIBS_DRA and the variable `device` of type
 * kubernetes.DRADevice (driver, attributes, capacity, allowMultipleAllocations). */
_wur_ int cel_env_new_dra(struct cel_env **ret_env);
struct cel_env *cel_env_free(struct cel_env *env);
DEFINE_POINTER_CLEANUP(struct cel_env, cel_env_free)

/* Declares a variable. type uses cel-lib.h's type syntax ("int", "map(string, dyn)", "dyn",
 * "kubernetes.DRADevice"). 0, -EEXIST (declared already), -EINVAL (bad type), -ENOMEM. The strings
 * are copied. */
_wur_ int cel_env_declare(struct cel_env *env, const char *name, const char *type);
/* Makes cel_compile() reject expressions whose type is known and not bool: Kubernetes' rule for
 * device selectors (the CLI leaves it off to print any value). */
void cel_env_require_bool(struct cel_env *env, bool on);
/* The type of the DRA `device` variable. */
#define CEL_DRA_DEVICE_TYPE "kubernetes.DRADevice"
/* Enables one more library (e.g. a test's own). The library must outlive the environment. */
_wur_ int cel_env_add_library(struct cel_env *env, const struct cel_library *lib);
/* The variable's slot in activations made for env, or -ENOENT. */
int cel_env_var_index(const struct cel_env *env, const char *name);

/* ---- programs ---- */

/*
 * Compiles expr (len bytes) against env: parse, expand macros, check (undefined names, arities,
 * types where they are known), fold what can fail at build time as Kubernetes does. On failure
 * returns a negative errno (-EINVAL for a bad expression, -E2BIG past the size/depth limits,
 * -ENOMEM) and d holds "line:col: message". env must outlive the program.
 */
_wur_ int cel_compile(const struct cel_env *env, const char *expr, size_t len,
                      struct cel_program **ret_prog, struct diag *d);
/* Programs are reference counted so a cache can hand them out and evict them safely. */
struct cel_program *cel_program_ref(struct cel_program *p);
struct cel_program *cel_program_unref(struct cel_program *p);
DEFINE_POINTER_CLEANUP(struct cel_program, cel_program_unref)
/* The expression text the program was compiled from. */
const char *cel_program_expr(const struct cel_program *p);

/* ---- activations: variable bindings ---- */

_wur_ int cel_activation_new(const struct cel_env *env, struct cel_activation **ret_act);
struct cel_activation *cel_activation_free(struct cel_activation *act);
DEFINE_POINTER_CLEANUP(struct cel_activation, cel_activation_free)
/* Binds a declared variable to v (borrowed: see cel-value.h). -ENOENT when not declared. */
_wur_ int cel_activation_bind(struct cel_activation *act, const char *name, struct cel_value v);
/* The hot-path form: bind slot `index` (from cel_env_var_index). */
void cel_activation_set(struct cel_activation *act, int index, struct cel_value v);

/* ---- evaluation ---- */

struct cel_eval_opts {
    uint64_t cost_limit; /* 0: CEL_DEFAULT_COST_LIMIT; UINT64_MAX: unlimited */
};

_wur_ int cel_evaluator_new(struct cel_evaluator **ret_ev);
struct cel_evaluator *cel_evaluator_free(struct cel_evaluator *ev);
DEFINE_POINTER_CLEANUP(struct cel_evaluator, cel_evaluator_free)

/*
 * Evaluates p with the variables of act (NULL: none bound) and returns the result: a value, or a
 * CEL_ERROR value whose message says why (an unbound variable, no such key, a division by zero,
 * "operation cancelled: actual cost limit exceeded", ...). The result lives in ev's memory until
 * the next cel_eval() on ev (or its release), plus whatever it borrows from act and p.
 */
struct cel_value cel_eval(struct cel_evaluator *ev, const struct cel_program *p,
                          const struct cel_activation *act, const struct cel_eval_opts *opts);
/* The cost the last cel_eval() on ev was charged (as Kubernetes counts it). */
uint64_t cel_evaluator_cost(const struct cel_evaluator *ev);

/* ---- the program cache ---- */

/* Compiled programs keyed by expression text, bounded to `max` entries (least recently used
 * evicted first). One cache per environment. */
struct cel_cache;
_wur_ int cel_cache_new(const struct cel_env *env, size_t max, struct cel_cache **ret_cache);
struct cel_cache *cel_cache_free(struct cel_cache *c);
DEFINE_POINTER_CLEANUP(struct cel_cache, cel_cache_free)
/* The program for expr from the cache, compiling (and caching) it on a miss; a failed compile is
 * cached too, so a bad selector is reported again without re-parsing. *ret_prog is a new reference
 * (cel_program_unref it). Same errors as cel_compile(). */
_wur_ int cel_cache_get(struct cel_cache *c, const char *expr, size_t len,
                        struct cel_program **ret_prog, struct diag *d);
