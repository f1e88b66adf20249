/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Macro expansion: the parser hands every call it builds to cel_macro_expand(), which rewrites the
 * DRA environment's macros into the tree shapes the evaluator knows — has(x.f) into a test-only
 * select, the comprehension macros (all, exists, exists_one/existsOne, map, filter, and the
 * two-variable all, exists, existsOne, transformList, transformMap, transformMapEntry) into
 * comprehension nodes as cel-spec defines them, and cel.bind(v, init, e) into a comprehension over
 * an empty list whose accumulator is v. A call whose name matches but whose shape does not (wrong
 * argument count, no receiver) is not a macro and stays a call for the checker to judge; a macro
 * call with a bad argument (a variable that is not a simple name) is an error here.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cel-parse-internal.h"

#define ACCU "@result"

struct expander {
    struct cel_ast *ast;
    const struct cel_macro_call *call;
    struct diag *d;
    bool failed; /* allocation failed somewhere; reported once at the end */
};

static int macro_fail(const struct expander *x, const struct cel_node *at, const char *msg)
{
    uint32_t line = at ? at->line : x->call->line, col = at ? at->col : x->call->col;
    if (x->d) {
        diag_fail(x->d, -EINVAL, "%u:%u: %s", line, col, msg);
        x->d->line = (int)line;
        x->d->col = (int)col;
    }
    return -EINVAL;
}

static struct cel_node *mk(struct expander *x, enum cel_node_kind kind)
{
    struct cel_node *n = cel_ast_node(x->ast, kind, x->call->offset, x->call->line, x->call->col);
    if (!n)
        x->failed = true;
    return n;
}

static struct cel_node *mk_ident(struct expander *x, const char *name)
{
    struct cel_node *n = mk(x, CEL_NODE_IDENT);
    if (n) {
        n->u.ident.name = name;
        n->u.ident.len = strlen(name);
    }
    return n;
}

static struct cel_node *mk_bool(struct expander *x, bool b)
{
    struct cel_node *n = mk(x, CEL_NODE_CONST);
    if (n) {
        n->u.lit.kind = CEL_CONST_BOOL;
        n->u.lit.v.b = b;
    }
    return n;
}

static struct cel_node *mk_int(struct expander *x, int64_t i)
{
    struct cel_node *n = mk(x, CEL_NODE_CONST);
    if (n) {
        n->u.lit.kind = CEL_CONST_INT;
        n->u.lit.v.i = i;
    }
    return n;
}

static struct cel_node *mk_empty(struct expander *x, enum cel_node_kind kind)
{
    struct cel_node *n = mk(x, kind);
    if (n && kind == CEL_NODE_LIST)
        n->u.list.elems = cel_ast_alloc(x->ast, sizeof(struct cel_node *));
    else if (n)
        n->u.map.entries = cel_ast_alloc(x->ast, sizeof(struct cel_map_entry));
    if (n && !(kind == CEL_NODE_LIST ? (void *)n->u.list.elems : (void *)n->u.map.entries))
        x->failed = true;
    return n;
}

/* An operator call; any NULL argument (a failed allocation) makes the result NULL. */
static struct cel_node *mk_op(struct expander *x, enum cel_op op, uint32_t nargs,
                              struct cel_node *a, struct cel_node *b, struct cel_node *c)
{
    struct cel_node *args[3] = {a, b, c};
    for (uint32_t i = 0; i < nargs; i++)
        if (!args[i])
            return NULL;
    struct cel_node *n = mk(x, CEL_NODE_CALL);
    if (!n)
        return NULL;
    n->u.call.args = cel_ast_alloc(x->ast, nargs * sizeof(*n->u.call.args));
    if (!n->u.call.args) {
        x->failed = true;
        return NULL;
    }
    n->u.call.op = op;
    n->u.call.name = cel_op_name(op);
    n->u.call.name_len = strlen(n->u.call.name);
    n->u.call.nargs = nargs;
    memcpy(n->u.call.args, args, nargs * sizeof(*args));
    return n;
}

/* A macro variable must be a plain identifier (not qualified, not a reserved word). */
static int var_name(const struct expander *x, const struct cel_node *arg, const char **ret)
{
    if (arg->kind != CEL_NODE_IDENT || arg->u.ident.leading_dot)
        return macro_fail(x, arg, "argument must be a simple name");
    *ret = arg->u.ident.name;
    return 0;
}

/* What a comprehension macro does each iteration and at the end. */
enum shape {
    SHAPE_ALL,
    SHAPE_EXISTS,
    SHAPE_EXISTS_ONE,
    SHAPE_LIST,      /* map / transformList: append t (when p) */
    SHAPE_FILTER,    /* append the element when p */
    SHAPE_MAP,       /* transformMap: insert k -> t (when p) */
    SHAPE_MAP_ENTRY, /* transformMapEntry: insert the entries of e (when p) */
};

struct macro_def {
    const char *name;
    uint32_t nvars; /* iteration variables: 1 or 2 */
    uint32_t nargs; /* arguments in total: variables, optional filter, body */
    enum shape shape;
    enum cel_macro macro;
};

/* The index of map(x, t) in macros[], which sortBy reuses. */
#define MAP_MACRO 8

static const struct macro_def macros[] = {
    {"all", 1, 2, SHAPE_ALL, CEL_MACRO_ALL},
    {"all", 2, 3, SHAPE_ALL, CEL_MACRO_ALL},
    {"exists", 1, 2, SHAPE_EXISTS, CEL_MACRO_EXISTS},
    {"exists", 2, 3, SHAPE_EXISTS, CEL_MACRO_EXISTS},
    {"exists_one", 1, 2, SHAPE_EXISTS_ONE, CEL_MACRO_EXISTS_ONE},
    {"exists_one", 2, 3, SHAPE_EXISTS_ONE, CEL_MACRO_EXISTS_ONE},
    {"existsOne", 1, 2, SHAPE_EXISTS_ONE, CEL_MACRO_EXISTS_ONE},
    {"existsOne", 2, 3, SHAPE_EXISTS_ONE, CEL_MACRO_EXISTS_ONE},
    [MAP_MACRO] = {"map", 1, 2, SHAPE_LIST, CEL_MACRO_MAP},
    {"map", 1, 3, SHAPE_LIST, CEL_MACRO_MAP},
    {"filter", 1, 2, SHAPE_FILTER, CEL_MACRO_FILTER},
    {"transformList", 2, 3, SHAPE_LIST, CEL_MACRO_TRANSFORM_LIST},
    {"transformList", 2, 4, SHAPE_LIST, CEL_MACRO_TRANSFORM_LIST},
    {"transformMap", 2, 3, SHAPE_MAP, CEL_MACRO_TRANSFORM_MAP},
    {"transformMap", 2, 4, SHAPE_MAP, CEL_MACRO_TRANSFORM_MAP},
    {"transformMapEntry", 2, 3, SHAPE_MAP_ENTRY, CEL_MACRO_TRANSFORM_MAP_ENTRY},
    {"transformMapEntry", 2, 4, SHAPE_MAP_ENTRY, CEL_MACRO_TRANSFORM_MAP_ENTRY},
};

/* The accumulator's start value and the update for one iteration of `shape`. pred is the filter
 * (NULL: none), body the macro's last argument. */
static void loop_parts(struct expander *x, const struct macro_def *m, const char *const *vars,
                       struct cel_node *pred, struct cel_node *body, struct cel_comprehension *c)
{
    struct cel_node *step = NULL;
    switch (m->shape) {
    case SHAPE_ALL:
        c->accu_init = mk_bool(x, true);
        c->loop_cond = mk_op(x, CEL_OP_NOT_STRICTLY_FALSE, 1, mk_ident(x, ACCU), NULL, NULL);
        c->loop_step = mk_op(x, CEL_OP_AND, 2, mk_ident(x, ACCU), body, NULL);
        c->result = mk_ident(x, ACCU);
        return;
    case SHAPE_EXISTS:
        c->accu_init = mk_bool(x, false);
        c->loop_cond = mk_op(x, CEL_OP_NOT_STRICTLY_FALSE, 1,
                             mk_op(x, CEL_OP_NOT, 1, mk_ident(x, ACCU), NULL, NULL), NULL, NULL);
        c->loop_step = mk_op(x, CEL_OP_OR, 2, mk_ident(x, ACCU), body, NULL);
        c->result = mk_ident(x, ACCU);
        return;
    case SHAPE_EXISTS_ONE:
        c->accu_init = mk_int(x, 0);
        c->loop_cond = mk_bool(x, true);
        c->loop_step = mk_op(x, CEL_OP_COND, 3, body,
                             mk_op(x, CEL_OP_ADD, 2, mk_ident(x, ACCU), mk_int(x, 1), NULL),
                             mk_ident(x, ACCU));
        c->result = mk_op(x, CEL_OP_EQ, 2, mk_ident(x, ACCU), mk_int(x, 1), NULL);
        return;
    case SHAPE_LIST:
    case SHAPE_FILTER:
        c->accu_init = mk_empty(x, CEL_NODE_LIST);
        if (m->shape == SHAPE_FILTER) {
            pred = body;
            body = mk_ident(x, vars[0]);
        }
        step = mk_op(x, CEL_OP_LIST_APPEND, 2, mk_ident(x, ACCU), body, NULL);
        break;
    case SHAPE_MAP:
        c->accu_init = mk_empty(x, CEL_NODE_MAP);
        step = mk_op(x, CEL_OP_MAP_INSERT, 3, mk_ident(x, ACCU), mk_ident(x, vars[0]), body);
        break;
    case SHAPE_MAP_ENTRY:
        c->accu_init = mk_empty(x, CEL_NODE_MAP);
        step = mk_op(x, CEL_OP_MAP_INSERT, 2, mk_ident(x, ACCU), body, NULL);
        break;
    }
    c->loop_cond = mk_bool(x, true);
    c->loop_step = pred ? mk_op(x, CEL_OP_COND, 3, pred, step, mk_ident(x, ACCU)) : step;
    c->result = mk_ident(x, ACCU);
}

static int expand_comprehension(struct expander *x, const struct macro_def *m,
                                struct cel_node *target, struct cel_node **args, uint32_t nargs,
                                struct cel_node **ret)
{
    const char *vars[2] = {NULL, NULL};
    int r;
    for (uint32_t i = 0; i < m->nvars; i++)
        if ((r = var_name(x, args[i], &vars[i])) < 0)
            return r;
    if (m->nvars == 2 && strcmp(vars[0], vars[1]) == 0)
        return macro_fail(x, args[1], "duplicate variable name");
    struct cel_node *n = mk(x, CEL_NODE_COMPREHENSION);
    if (!n)
        return diag_fail(x->d, -ENOMEM, "out of memory");
    struct cel_comprehension *c = &n->u.comp;
    c->macro = m->macro;
    c->iter_var = vars[0];
    c->iter_var2 = vars[1];
    c->accu_var = ACCU;
    c->iter_slot = x->ast->nlocals++;
    c->iter_slot2 = m->nvars == 2 ? x->ast->nlocals++ : 0;
    c->accu_slot = x->ast->nlocals++;
    c->iter_range = target;
    struct cel_node *pred = nargs - m->nvars == 2 ? args[m->nvars] : NULL;
    loop_parts(x, m, vars, pred, args[nargs - 1], c);
    if (x->failed || !c->accu_init || !c->loop_cond || !c->loop_step || !c->result)
        return diag_fail(x->d, -ENOMEM, "out of memory");
    *ret = n;
    return 0;
}

/* has(e.f) -> test-only select */
static int expand_has(struct expander *x, struct cel_node **ret)
{
    struct cel_node *arg = x->call->args[0];
    if (arg->kind != CEL_NODE_SELECT || arg->u.select.optional)
        return macro_fail(x, arg, "invalid argument to has() macro");
    arg->u.select.test_only = true;
    *ret = arg;
    return 0;
}

/* cel.bind(v, init, e) -> comprehension over [] with accumulator v = init, result e */
static struct cel_node *make_bind(struct expander *x, const char *name, struct cel_node *init,
                                  struct cel_node *result)
{
    struct cel_node *n = mk(x, CEL_NODE_COMPREHENSION);
    if (!n || !init || !result)
        return NULL;
    struct cel_comprehension *c = &n->u.comp;
    c->macro = CEL_MACRO_BIND;
    c->iter_var = "#unused";
    c->accu_var = name;
    c->iter_slot = x->ast->nlocals++;
    c->accu_slot = x->ast->nlocals++;
    c->iter_range = mk_empty(x, CEL_NODE_LIST);
    c->accu_init = init;
    c->loop_cond = mk_bool(x, false);
    c->loop_step = mk_ident(x, name);
    c->result = result;
    return x->failed ? NULL : n;
}

static int expand_bind(struct expander *x, struct cel_node **ret)
{
    const struct cel_macro_call *call = x->call;
    const char *name = NULL;
    int r = var_name(x, call->args[0], &name);
    if (r < 0)
        return r;
    *ret = make_bind(x, name, call->args[1], call->args[2]);
    return *ret ? 0 : diag_fail(x->d, -ENOMEM, "out of memory");
}

/* A named call, receiver style when target is not NULL. */
static struct cel_node *mk_call(struct expander *x, const char *name, struct cel_node *target,
                                struct cel_node *arg)
{
    struct cel_node *n = mk(x, CEL_NODE_CALL);
    if (!n || !target)
        return NULL;
    n->u.call.name = name;
    n->u.call.name_len = strlen(name);
    n->u.call.target = target;
    if (arg) {
        n->u.call.args = cel_ast_alloc(x->ast, sizeof(*n->u.call.args));
        if (!n->u.call.args) {
            x->failed = true;
            return NULL;
        }
        n->u.call.args[0] = arg;
        n->u.call.nargs = 1;
    }
    return n;
}

/* l.sortBy(e, key) -> cel.bind(@__sortBy_input__, l,
 *                        @__sortBy_input__.@sortByAssociatedKeys(@__sortBy_input__.map(e, key)))
 * (the lists extension's macro: the keys are computed once, then the list sorted by them) */
static int expand_sort_by(struct expander *x, struct cel_node **ret)
{
    static const char input[] = "@__sortBy_input__";
    const struct cel_macro_call *call = x->call;
    struct cel_node *keys = NULL;
    int r = expand_comprehension(x, &macros[MAP_MACRO], mk_ident(x, input), call->args, 2, &keys);
    if (r < 0)
        return r;
    struct cel_node *sorted = mk_call(x, "@sortByAssociatedKeys", mk_ident(x, input), keys);
    *ret = make_bind(x, input, call->target, sorted);
    return *ret ? 0 : diag_fail(x->d, -ENOMEM, "out of memory");
}

/* o.optMap(v, e)     -> o.hasValue() ? optional.of(cel.bind(v, o.value(), e)) : optional.none()
 * o.optFlatMap(v, e) -> o.hasValue() ? cel.bind(v, o.value(), e) : optional.none()
 * with o itself bound once to a hidden variable, so the tree stays a tree (no shared subtree, no
 * copy that doubles with every chained optMap). */
static int expand_opt_map(struct expander *x, bool flat, struct cel_node **ret)
{
    static const char target[] = "@__optMap_target__";
    const struct cel_macro_call *call = x->call;
    const char *name = NULL;
    int r = var_name(x, call->args[0], &name);
    if (r < 0)
        return r;
    struct cel_node *bound =
        make_bind(x, name, mk_call(x, "value", mk_ident(x, target), NULL), call->args[1]);
    if (!flat)
        bound = mk_call(x, "of", mk_ident(x, "optional"), bound);
    struct cel_node *cond =
        mk_op(x, CEL_OP_COND, 3, mk_call(x, "hasValue", mk_ident(x, target), NULL), bound,
              mk_call(x, "none", mk_ident(x, "optional"), NULL));
    *ret = make_bind(x, target, call->target, cond);
    return *ret && !x->failed ? 0 : diag_fail(x->d, -ENOMEM, "out of memory");
}

static bool name_is(const struct cel_macro_call *c, const char *s)
{
    return strlen(s) == c->name_len && memcmp(c->name, s, c->name_len) == 0;
}

int cel_macro_expand(struct cel_ast *ast, const struct cel_macro_call *call, struct cel_node **ret,
                     struct diag *d)
{
    struct expander x = {.ast = ast, .call = call, .d = d};
    *ret = NULL;
    if (!call->target) {
        if (name_is(call, "has") && call->nargs == 1)
            return expand_has(&x, ret);
        return 0;
    }
    if (name_is(call, "bind") && call->nargs == 3 && call->target->kind == CEL_NODE_IDENT &&
        !call->target->u.ident.leading_dot && strcmp(call->target->u.ident.name, "cel") == 0)
        return expand_bind(&x, ret);
    if (name_is(call, "sortBy") && call->nargs == 2)
        return expand_sort_by(&x, ret);
    if ((name_is(call, "optMap") || name_is(call, "optFlatMap")) && call->nargs == 2)
        return expand_opt_map(&x, name_is(call, "optFlatMap"), ret);
    for (size_t i = 0; i < ARRAY_SIZE(macros); i++)
        if (name_is(call, macros[i].name) && call->nargs == macros[i].nargs)
            return expand_comprehension(&x, &macros[i], call->target, call->args, call->nargs, ret);
    return 0;
}
