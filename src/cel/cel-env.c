/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Environments (declared variables + the registry of enabled libraries), activations (what the
 * variables are bound to for one evaluation) and compilation: parse, check, then resolve every
 * identifier, call and literal of the tree into the program's side table so evaluation never looks
 * a name up.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cel-check.h"
#include "cel-internal.h"
#include "cel-lib-ext.h"

#define ENV_MAX_VARS 1024

/* Which library each flag enables. */
static const struct {
    unsigned flag;
    const struct cel_library *lib;
} LIBRARIES[] = {
    {CEL_LIB_STD, &cel_lib_std},         {CEL_LIB_TIME, &cel_lib_time},
    {CEL_LIB_STRINGS, &cel_lib_strings}, {CEL_LIB_LISTS, &cel_lib_lists},
    {CEL_LIB_SETS, &cel_lib_sets},       {CEL_LIB_OPTIONAL, &cel_lib_optional},
    {CEL_LIB_REGEX, &cel_lib_regex},     {CEL_LIB_QUANTITY, &cel_lib_quantity},
    {CEL_LIB_SEMVER, &cel_lib_semver},
};

int cel_env_new(unsigned libs, struct cel_env **ret_env)
{
    struct cel_env *env = calloc(1, sizeof(*env));

    if (!env)
        return -ENOMEM;
    env->libs = libs | CEL_LIB_STD;
    for (size_t i = 0; i < ARRAY_SIZE(LIBRARIES); i++) {
        if (!(env->libs & LIBRARIES[i].flag))
            continue;
        int err = cel_registry_add(&env->reg, LIBRARIES[i].lib);
        if (err < 0) {
            cel_env_free(env);
            return err;
        }
    }
    *ret_env = env;
    return 0;
}

int cel_env_new_dra(struct cel_env **ret_env)
{
    struct cel_env *env = NULL;
    int err = cel_env_new(CEL_LIBS_DRA, &env);

    if (err < 0)
        return err;
    err = cel_env_declare(env, "device", CEL_DRA_DEVICE_TYPE);
    if (err < 0) {
        cel_env_free(env);
        return err;
    }
    *ret_env = env;
    return 0;
}

struct cel_env *cel_env_free(struct cel_env *env)
{
    if (!env)
        return NULL;
    for (size_t i = 0; i < env->nvars; i++) {
        free(env->vars[i].name);
        free(env->vars[i].type);
    }
    free(env->vars);
    cel_registry_release(&env->reg);
    free(env);
    return NULL;
}

int cel_env_declare(struct cel_env *env, const char *name, const char *type)
{
    const char *p = type;
    uint8_t kind;
    const char *tn;
    size_t tl;
    struct cel_var_decl *v;

    if (cel_env_var_index(env, name) >= 0)
        return -EEXIST;
    if (cel_sig_type(&p, &kind, &tn, &tl) < 0 || *p != '\0')
        return -EINVAL;
    if (env->nvars == ENV_MAX_VARS)
        return -E2BIG;
    if (env->nvars == env->vars_alloc) {
        size_t na = env->vars_alloc ? env->vars_alloc * 2 : 8;

        v = realloc(env->vars, na * sizeof(*v));
        if (!v)
            return -ENOMEM;
        env->vars = v;
        env->vars_alloc = na;
    }
    v = &env->vars[env->nvars];
    v->name = strdup(name);
    v->type = strdup(type);
    if (!v->name || !v->type) {
        free(v->name);
        free(v->type);
        return -ENOMEM;
    }
    env->nvars++;
    return 0;
}

void cel_env_require_bool(struct cel_env *env, bool on)
{
    env->want_bool = on;
}

int cel_env_add_library(struct cel_env *env, const struct cel_library *lib)
{
    return cel_registry_add(&env->reg, lib);
}

int cel_env_var_index(const struct cel_env *env, const char *name)
{
    for (size_t i = 0; i < env->nvars; i++)
        if (strcmp(env->vars[i].name, name) == 0)
            return (int)i;
    return -ENOENT;
}

static int var_index_n(const struct cel_env *env, const char *name, size_t len)
{
    for (size_t i = 0; i < env->nvars; i++)
        if (strncmp(env->vars[i].name, name, len) == 0 && env->vars[i].name[len] == '\0')
            return (int)i;
    return -ENOENT;
}

const struct cel_registry *cel_env_registry(const struct cel_env *env)
{
    return &env->reg;
}

/* ---- activations ---- */

int cel_activation_new(const struct cel_env *env, struct cel_activation **ret_act)
{
    struct cel_activation *act = calloc(1, sizeof(*act));
    size_t n = env->nvars ? env->nvars : 1;

    if (!act)
        return -ENOMEM;
    act->env = env;
    act->n = env->nvars;
    act->values = calloc(n, sizeof(*act->values));
    act->bound = calloc(n, sizeof(*act->bound));
    if (!act->values || !act->bound) {
        cel_activation_free(act);
        return -ENOMEM;
    }
    *ret_act = act;
    return 0;
}

struct cel_activation *cel_activation_free(struct cel_activation *act)
{
    if (!act)
        return NULL;
    free(act->values);
    free(act->bound);
    free(act);
    return NULL;
}

int cel_activation_bind(struct cel_activation *act, const char *name, struct cel_value v)
{
    int i = cel_env_var_index(act->env, name);

    if (i < 0 || (size_t)i >= act->n)
        return -ENOENT;
    cel_activation_set(act, i, v);
    return 0;
}

void cel_activation_set(struct cel_activation *act, int index, struct cel_value v)
{
    act->values[index] = v;
    act->bound[index] = true;
}

/* ---- resolution ---- */

struct scope {
    const char *name;
    uint32_t slot;
};

#define RESOLVE_MAX_SCOPE 512

struct resolver {
    struct cel_program *p;
    struct diag *d;
    struct scope scope[RESOLVE_MAX_SCOPE];
    size_t nscope;
};

static int resolve_node(struct resolver *r, const struct cel_node *n);

/* "line:col: <prefix>'<name>'<suffix>" for a name in the expression. */
static int fail_at(struct resolver *r, const struct cel_node *n, const char *prefix,
                   const char *what, size_t len, const char *suffix)
{
    return diag_fail(r->d, -EINVAL, "%u:%u: %s'%.*s'%s", n->line, n->col, prefix,
                     (int)(len > 200 ? 200 : len), what, suffix);
}

static int find_local(const struct resolver *r, const char *name, size_t len)
{
    for (size_t i = r->nscope; i-- > 0;)
        if (strncmp(r->scope[i].name, name, len) == 0 && r->scope[i].name[len] == '\0')
            return (int)r->scope[i].slot;
    return -1;
}

/* The dotted name a chain of idents and selects spells ("google.protobuf.Timestamp"), written
 * into buf; false when n is not such a chain or it starts with a local or variable. */
static bool qualified_name(const struct resolver *r, const struct cel_node *n, char *buf,
                           size_t size, size_t *ret_len)
{
    size_t len;

    if (n->kind == CEL_NODE_IDENT) {
        len = n->u.ident.len;
        if (len >= size || find_local(r, n->u.ident.name, len) >= 0 ||
            var_index_n(r->p->env, n->u.ident.name, len) >= 0)
            return false;
        memcpy(buf, n->u.ident.name, len);
    } else if (n->kind == CEL_NODE_SELECT && !n->u.select.test_only && !n->u.select.optional) {
        if (!qualified_name(r, n->u.select.operand, buf, size, &len))
            return false;
        if (len + 1 + n->u.select.len >= size)
            return false;
        buf[len++] = '.';
        memcpy(buf + len, n->u.select.field, n->u.select.len);
        len += n->u.select.len;
    } else {
        return false;
    }
    buf[len] = '\0';
    *ret_len = len;
    return true;
}

static int resolve_ident(struct resolver *r, const struct cel_node *n)
{
    struct cel_node_info *info = &r->p->info[n->id];
    const struct cel_ident *id = &n->u.ident;
    int slot = id->leading_dot ? -1 : find_local(r, id->name, id->len);

    info->var = -1;
    info->local = -1;
    if (slot >= 0) {
        info->local = slot;
        return 0;
    }
    info->var = var_index_n(r->p->env, id->name, id->len);
    if (info->var >= 0)
        return 0;
    info->type = cel_type_by_name(id->name, id->len);
    if (info->type)
        return 0;
    return fail_at(r, n, "undeclared reference to ", id->name, id->len, " (in container '')");
}

static int resolve_select(struct resolver *r, const struct cel_node *n)
{
    char buf[256];
    size_t len;

    r->p->info[n->id].var = -1;
    r->p->info[n->id].local = -1;
    if (qualified_name(r, n, buf, sizeof(buf), &len)) {
        const struct cel_type *t = cel_type_by_name(buf, len);
        int v = var_index_n(r->p->env, buf, len);

        if (v >= 0) {
            r->p->info[n->id].var = v;
            return 0;
        }
        if (t) {
            r->p->info[n->id].type = t;
            return 0;
        }
    }
    return resolve_node(r, n->u.select.operand);
}

static const struct cel_func_entry *lookup(const struct resolver *r, const char *name, size_t len,
                                           bool receiver)
{
    return (const struct cel_func_entry *)cel_registry_find(&r->p->env->reg, name, len, receiver);
}

static bool has_arity(const struct cel_func_entry *fe, size_t n)
{
    for (size_t i = 0; i < fe->f.n; i++)
        if (fe->rt[i].arity == n)
            return true;
    return false;
}

static bool name_is(const struct cel_call *c, const char *name)
{
    return c->name_len == strlen(name) && memcmp(c->name, name, c->name_len) == 0;
}

/* Kubernetes' compile-time validators: literal format strings and regular expressions. */
static int validate_call(struct resolver *r, const struct cel_node *n)
{
    const struct cel_call *c = &n->u.call;
    struct diag vd;
    int err = 0;

    diag_init(&vd);
    if (name_is(c, "format") && c->target)
        err = cel_format_check(n, &vd);
    else if (name_is(c, "matches") || name_is(c, "find") || name_is(c, "findAll"))
        err = cel_regex_check(n, &vd);
    if (err >= 0)
        return 0;
    if (err == -ENOMEM)
        return err;
    return diag_fail(r->d, -EINVAL, "%u:%u: %s", n->line, n->col, vd.msg);
}

static int resolve_call(struct resolver *r, const struct cel_node *n)
{
    const struct cel_call *c = &n->u.call;
    struct cel_node_info *info = &r->p->info[n->id];
    const struct cel_func_entry *fe = NULL;
    size_t nargs = c->nargs;
    int err;

    if (c->op == CEL_OP_NONE) {
        char buf[256];
        size_t len;

        if (!c->target) {
            fe = lookup(r, c->name, c->name_len, false);
            info->call_style = CEL_CALL_GLOBAL;
        } else if (c->name_len < 128 &&
                   qualified_name(r, c->target, buf, sizeof(buf) - c->name_len - 2, &len) &&
                   (buf[len] = '.', memcpy(buf + len + 1, c->name, c->name_len),
                    (fe = lookup(r, buf, len + 1 + c->name_len, false)) != NULL)) {
            info->call_style = CEL_CALL_NAMESPACED;
        } else {
            fe = lookup(r, c->name, c->name_len, true);
            info->call_style = CEL_CALL_RECEIVER;
            nargs++;
        }
        if (!fe)
            return fail_at(r, n, "undeclared reference to ", c->name, c->name_len,
                           " (in container '')");
        if (!has_arity(fe, nargs))
            return fail_at(r, n, "found no matching overload for ", c->name, c->name_len, "");
        info->fn = fe;
        if ((err = validate_call(r, n)) < 0)
            return err;
        if (info->call_style == CEL_CALL_RECEIVER && (err = resolve_node(r, c->target)) < 0)
            return err;
    }
    for (uint32_t i = 0; i < c->nargs; i++)
        if ((err = resolve_node(r, c->args[i])) < 0)
            return err;
    return 0;
}

static int push_scope(struct resolver *r, const char *name, uint32_t slot)
{
    if (r->nscope == RESOLVE_MAX_SCOPE)
        return -E2BIG;
    r->scope[r->nscope++] = (struct scope){name, slot};
    return 0;
}

static int resolve_comprehension(struct resolver *r, const struct cel_node *n)
{
    const struct cel_comprehension *c = &n->u.comp;
    size_t saved = r->nscope;
    int err;

    if ((err = resolve_node(r, c->iter_range)) < 0 || (err = resolve_node(r, c->accu_init)) < 0)
        return err;
    if ((err = push_scope(r, c->accu_var, c->accu_slot)) < 0 ||
        (err = push_scope(r, c->iter_var, c->iter_slot)) < 0 ||
        (c->iter_var2 && (err = push_scope(r, c->iter_var2, c->iter_slot2)) < 0))
        return err;
    if ((err = resolve_node(r, c->loop_cond)) < 0 || (err = resolve_node(r, c->loop_step)) < 0)
        return err;
    r->nscope = saved + 1; /* only the accumulator is in scope for the result */
    err = resolve_node(r, c->result);
    r->nscope = saved;
    return err;
}

static struct cel_value const_value(const struct cel_const *k)
{
    switch (k->kind) {
    case CEL_CONST_NULL:
        return cel_null();
    case CEL_CONST_BOOL:
        return cel_bool(k->v.b);
    case CEL_CONST_INT:
        return cel_int(k->v.i);
    case CEL_CONST_UINT:
        return cel_uint(k->v.u);
    case CEL_CONST_DOUBLE:
        return cel_double(k->v.d);
    case CEL_CONST_STRING:
        return cel_string(k->v.s.ptr, k->v.s.len);
    case CEL_CONST_BYTES:
        return cel_bytes(k->v.s.ptr, k->v.s.len);
    }
    return cel_null();
}

static int resolve_node(struct resolver *r, const struct cel_node *n)
{
    int err;

    switch (n->kind) {
    case CEL_NODE_CONST:
        r->p->info[n->id].constant = const_value(&n->u.lit);
        return 0;
    case CEL_NODE_IDENT:
        return resolve_ident(r, n);
    case CEL_NODE_SELECT:
        return resolve_select(r, n);
    case CEL_NODE_INDEX:
        if ((err = resolve_node(r, n->u.index.operand)) < 0)
            return err;
        return resolve_node(r, n->u.index.index);
    case CEL_NODE_CALL:
        return resolve_call(r, n);
    case CEL_NODE_LIST:
        for (uint32_t i = 0; i < n->u.list.n; i++)
            if ((err = resolve_node(r, n->u.list.elems[i])) < 0)
                return err;
        return 0;
    case CEL_NODE_MAP:
        for (uint32_t i = 0; i < n->u.map.n; i++)
            if ((err = resolve_node(r, n->u.map.entries[i].key)) < 0 ||
                (err = resolve_node(r, n->u.map.entries[i].value)) < 0)
                return err;
        return 0;
    case CEL_NODE_STRUCT:
        return fail_at(r, n, "undeclared reference to ", n->u.strct.type_name, n->u.strct.type_len,
                       " (in container '')");
    case CEL_NODE_COMPREHENSION:
        return resolve_comprehension(r, n);
    }
    return -EINVAL;
}

int cel_resolve(struct cel_program *p, struct diag *d)
{
    struct resolver *r = calloc(1, sizeof(*r));
    int err;

    if (!r)
        return -ENOMEM;
    r->p = p;
    r->d = d;
    err = resolve_node(r, p->ast->root);
    free(r);
    return err;
}

/* ---- programs ---- */

/* Field types of the object types an environment declares (kubernetes.DRADevice). */
static const char *field_type(const char *type, size_t type_len, const char *field, size_t len)
{
    static const struct {
        const char *name, *type;
    } DRA_DEVICE[] = {
        {"driver", "string"},
        {"attributes", "map(string, map(string, dyn))"},
        {"capacity", "map(string, map(string, kubernetes.Quantity))"},
        {"allowMultipleAllocations", "bool"},
    };

    if (type_len != strlen(CEL_DRA_DEVICE_TYPE) || memcmp(type, CEL_DRA_DEVICE_TYPE, type_len) != 0)
        return "dyn";
    for (size_t i = 0; i < ARRAY_SIZE(DRA_DEVICE); i++)
        if (strlen(DRA_DEVICE[i].name) == len && memcmp(DRA_DEVICE[i].name, field, len) == 0)
            return DRA_DEVICE[i].type;
    return NULL;
}

int cel_compile(const struct cel_env *env, const char *expr, size_t len,
                struct cel_program **ret_prog, struct diag *d)
{
    _cleanup_(cel_program_unrefp) struct cel_program *p = calloc(1, sizeof(*p));
    size_t nn;
    int err;

    if (!p)
        return -ENOMEM;
    p->refs = 1;
    p->env = env;
    cel_region_init(&p->region, 0);
    p->expr = strndup(expr, len);
    if (!p->expr)
        return -ENOMEM;
    err = cel_parse(expr, len, &p->ast, d);
    if (err < 0)
        return err;
    nn = (size_t)p->ast->nnodes + 1;
    p->info = calloc(nn, sizeof(*p->info));
    p->sites = calloc(nn, sizeof(*p->sites));
    if (!p->info || !p->sites)
        return -ENOMEM;
    struct cel_check_opts copts = {.field_type = field_type, .want_bool = env->want_bool};
    err = cel_check(p->ast, env, &copts, NULL, 0, d);
    if (err < 0)
        return err;
    err = cel_resolve(p, d);
    if (err < 0)
        return err;
    *ret_prog = TAKE_PTR(p);
    return 0;
}

struct cel_program *cel_program_ref(struct cel_program *p)
{
    if (p)
        __atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
    return p;
}

struct cel_program *cel_program_unref(struct cel_program *p)
{
    if (!p || __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) > 0)
        return NULL;
    if (p->sites && p->ast)
        for (size_t i = 0; i <= p->ast->nnodes; i++)
            if (p->sites[i].free_fn)
                p->sites[i].free_fn(p->sites[i].data);
    free(p->sites);
    free(p->info);
    cel_ast_free(p->ast);
    cel_region_release(&p->region);
    free(p->expr);
    free(p);
    return NULL;
}

const char *cel_program_expr(const struct cel_program *p)
{
    return p->expr;
}
