/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CEL type checker: what can be decided about a parsed tree before evaluation, as the
 * Kubernetes DRA environment decides it (it always type-checks). It infers a type for every node
 * from literals, the environment's declared variables and the registry's overload signatures
 * (cel-lib.h type syntax), and rejects: undeclared identifiers and functions, calls no overload
 * accepts (wrong arity or argument types, e.g. 1.0 == 1, 'a' < 1, !0, -(1u)), non-bool operands
 * of && || ! and ?:, branches of ?: with different types, field selection on types without
 * fields, comprehension ranges that are not lists or maps, optional syntax on non-optionals, and
 * — Kubernetes' HomogeneousAggregateLiterals validator — list and map literals whose elements
 * (keys, values) have different types (except a list literal passed to format()). dyn defeats
 * every check, as in CEL. The tree is not changed.
 */
#pragma once

#include <stddef.h>

#include "cel-ast.h"

struct cel_env;

/* Field types of an object type (e.g. kubernetes.DRADevice), for field selection on variables
 * declared with one: the type of `field` in sig syntax, or NULL when the object has no such field
 * (a compile error). Without a hook every field of every object type is dyn. */
typedef const char *(*cel_check_field_fn)(const char *object_type, size_t type_len,
                                          const char *field, size_t field_len);

struct cel_check_opts {
    cel_check_field_fn field_type; /* NULL: object fields are dyn */
    bool want_bool;                /* the result must be bool (or dyn): Kubernetes' selector rule */
};

/*
 * Checks ast against env (variables and enabled functions). opts may be NULL. On success returns
 * 0 and, when ret_type is not NULL, writes the result type in sig syntax ("bool", "list(int)",
 * "dyn") into ret_type (size bytes, truncated). On failure returns -EINVAL (a type error; d holds
 * "line:col: message" of the first one), -E2BIG (too many types) or -ENOMEM.
 */
_wur_ int cel_check(const struct cel_ast *ast, const struct cel_env *env,
                    const struct cel_check_opts *opts, char *ret_type, size_t size, struct diag *d);
