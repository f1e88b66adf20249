/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CEL type checker (see cel-check.h for what it rejects). Types are small immutable records in
 * a pool that lives for one check; overload signatures are read from the registry's sig strings
 * (cel-lib.h syntax) when a call is checked, with type parameters bound per overload attempt.
 * Two kinds stand for "unknown": dyn (declared dynamic: accepts and is accepted by everything) and
 * free (the element type of an empty literal or an unbound type parameter: like dyn, but a later,
 * more precise type replaces it, so `[].map(x, x)` or `[] + [1]` get list(int)).
 *
 * The walk recurses on the tree, whose height cel_parse() bounded by CEL_AST_MAX_DEPTH; type
 * recursion (parsing, comparing, printing) is bounded by TYPE_MAX_DEPTH.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cel-check.h"
#include "cel-internal.h"

#define TYPE_MAX_DEPTH 64
#define TYPE_POOL_MAX ((size_t)1 << 20)
#define TYPE_CHUNK 256
/* Comprehension variables in scope at once: each nesting level adds at most three. */
#define SCOPE_MAX (3 * (size_t)CEL_AST_MAX_DEPTH + 3)
#define NPARAMS 26

enum tk {
    T_DYN,
    T_FREE,
    T_NULL,
    T_BOOL,
    T_INT,
    T_UINT,
    T_DOUBLE,
    T_STRING,
    T_BYTES,
    T_TIMESTAMP,
    T_DURATION,
    T_LIST,     /* p[0] element */
    T_MAP,      /* p[0] key, p[1] value */
    T_OPTIONAL, /* p[0] */
    T_TYPE,     /* p[0] the type named (dyn when not known) */
    T_OBJECT,   /* name/len */
    T_PARAM,    /* name[0] is the letter (only inside signatures) */
};

struct ctype {
    enum tk k;
    const struct ctype *p[2];
    const char *name;
    size_t len;
};

static const struct ctype TY_DYN = {.k = T_DYN};
static const struct ctype TY_FREE = {.k = T_FREE};
static const struct ctype TY_NULL = {.k = T_NULL};
static const struct ctype TY_BOOL = {.k = T_BOOL};
static const struct ctype TY_INT = {.k = T_INT};
static const struct ctype TY_UINT = {.k = T_UINT};
static const struct ctype TY_DOUBLE = {.k = T_DOUBLE};
static const struct ctype TY_STRING = {.k = T_STRING};
static const struct ctype TY_BYTES = {.k = T_BYTES};

static const struct {
    const char *name;
    const struct ctype *t;
    enum tk k; /* for the parameterised names, t == NULL */
} NAMED[] = {
    {"int", &TY_INT, T_INT},
    {"uint", &TY_UINT, T_UINT},
    {"double", &TY_DOUBLE, T_DOUBLE},
    {"bool", &TY_BOOL, T_BOOL},
    {"string", &TY_STRING, T_STRING},
    {"bytes", &TY_BYTES, T_BYTES},
    {"null_type", &TY_NULL, T_NULL},
    {"dyn", &TY_DYN, T_DYN},
    {"type", NULL, T_TYPE},
    {"list", NULL, T_LIST},
    {"map", NULL, T_MAP},
    {"optional_type", NULL, T_OPTIONAL},
    {"google.protobuf.Timestamp", NULL, T_TIMESTAMP},
    {"google.protobuf.Duration", NULL, T_DURATION},
};

struct type_chunk {
    struct type_chunk *next;
    size_t used;
    struct ctype t[TYPE_CHUNK];
};

struct scope_var {
    const char *name;
    const struct ctype *t;
};

struct checker {
    const struct cel_env *env;
    const struct cel_registry *reg;
    struct cel_check_opts opts;
    struct diag *d;
    struct type_chunk *chunks;
    size_t ntypes;
    struct scope_var *scope;
    size_t nscope;
    int err; /* the first error; once set, the walk unwinds */
};

/* ---- types ---- */

static const struct ctype *mk_type(struct checker *c, enum tk k, const struct ctype *p0,
                                   const struct ctype *p1)
{
    if (c->ntypes >= TYPE_POOL_MAX) {
        if (!c->err)
            c->err = diag_fail(c->d, -E2BIG, "1:1: expression too complex to type-check");
        return NULL;
    }
    if (!c->chunks || c->chunks->used == TYPE_CHUNK) {
        struct type_chunk *ch = calloc(1, sizeof(*ch));
        if (!ch) {
            if (!c->err)
                c->err = diag_fail(c->d, -ENOMEM, "out of memory");
            return NULL;
        }
        ch->next = c->chunks;
        c->chunks = ch;
    }
    struct ctype *t = &c->chunks->t[c->chunks->used++];
    c->ntypes++;
    *t = (struct ctype){.k = k, .p = {p0, p1}};
    return t;
}

static bool is_vague(const struct ctype *t, unsigned depth)
{
    if (depth > TYPE_MAX_DEPTH)
        return false;
    if (t->k == T_FREE)
        return true;
    for (int i = 0; i < 2; i++)
        if (t->p[i] && is_vague(t->p[i], depth + 1))
            return true;
    return false;
}

static bool is_any(const struct ctype *t)
{
    return t->k == T_DYN || t->k == T_FREE;
}

/* Type names in messages, as CEL spells them. */
static void fmt_type(char *buf, size_t size, size_t *pos, const struct ctype *t, unsigned depth)
{
    static const char *const names[] = {
        [T_DYN] = "dyn",
        [T_FREE] = "dyn",
        [T_NULL] = "null_type",
        [T_BOOL] = "bool",
        [T_INT] = "int",
        [T_UINT] = "uint",
        [T_DOUBLE] = "double",
        [T_STRING] = "string",
        [T_BYTES] = "bytes",
        [T_TIMESTAMP] = "google.protobuf.Timestamp",
        [T_DURATION] = "google.protobuf.Duration",
        [T_LIST] = "list",
        [T_MAP] = "map",
        [T_OPTIONAL] = "optional_type",
        [T_TYPE] = "type",
        [T_OBJECT] = "",
        [T_PARAM] = "",
    };
    int n;
    if (*pos >= size)
        return;
    if (depth > TYPE_MAX_DEPTH) {
        n = snprintf(buf + *pos, size - *pos, "...");
    } else if (t->k == T_OBJECT || t->k == T_PARAM) {
        n = snprintf(buf + *pos, size - *pos, "%.*s", (int)t->len, t->name);
    } else {
        n = snprintf(buf + *pos, size - *pos, "%s", names[t->k]);
    }
    *pos += n > 0 ? (size_t)n : 0;
    if (depth > TYPE_MAX_DEPTH || !t->p[0] || t->k == T_TYPE)
        return;
    for (int i = 0; i < 2 && t->p[i]; i++) {
        n = *pos < size ? snprintf(buf + *pos, size - *pos, i ? ", " : "(") : 0;
        *pos += n > 0 ? (size_t)n : 0;
        fmt_type(buf, size, pos, t->p[i], depth + 1);
    }
    n = *pos < size ? snprintf(buf + *pos, size - *pos, ")") : 0;
    *pos += n > 0 ? (size_t)n : 0;
}

static const char *type_str(const struct ctype *t, char *buf, size_t size)
{
    size_t pos = 0;
    buf[0] = '\0';
    fmt_type(buf, size, &pos, t, 0);
    return buf;
}

static const struct ctype *bad_type(struct checker *c, const char *s)
{
    if (!c->err)
        c->err = diag_fail(c->d, -EINVAL, "1:1: malformed type '%s'", s);
    return NULL;
}

/* Parses one type of the sig syntax at *s. NULL on a malformed type (c->err set). */
static const struct ctype *parse_type(struct checker *c, const char **s, unsigned depth)
{
    const char *p = *s, *start;
    while (*p == ' ')
        p++;
    start = p;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
           *p == '_' || *p == '.')
        p++;
    size_t len = (size_t)(p - start);
    const struct ctype *params[2] = {NULL, NULL};
    int np = 0;
    if (len == 0 || depth > TYPE_MAX_DEPTH)
        return bad_type(c, *s);
    if (*p == '(') {
        p++;
        for (;;) {
            if (np == 2)
                return bad_type(c, *s);
            params[np] = parse_type(c, &p, depth + 1);
            if (!params[np++])
                return NULL;
            while (*p == ' ')
                p++;
            if (*p == ')')
                break;
            if (*p++ != ',')
                return bad_type(c, *s);
        }
        p++;
    }
    *s = p;
    if (len == 1 && *start >= 'A' && *start <= 'Z') {
        struct ctype *t = (struct ctype *)mk_type(c, T_PARAM, NULL, NULL);
        if (t) {
            t->name = start;
            t->len = 1;
        }
        return t;
    }
    for (size_t i = 0; i < ARRAY_SIZE(NAMED); i++) {
        if (strlen(NAMED[i].name) != len || memcmp(NAMED[i].name, start, len) != 0)
            continue;
        if (NAMED[i].t)
            return NAMED[i].t;
        if (NAMED[i].k == T_LIST || NAMED[i].k == T_OPTIONAL || NAMED[i].k == T_TYPE)
            return mk_type(c, NAMED[i].k, params[0] ? params[0] : &TY_DYN, NULL);
        if (NAMED[i].k == T_MAP)
            return mk_type(c, T_MAP, params[0] ? params[0] : &TY_DYN,
                           params[1] ? params[1] : &TY_DYN);
        return mk_type(c, NAMED[i].k, NULL, NULL);
    }
    struct ctype *t = (struct ctype *)mk_type(c, T_OBJECT, NULL, NULL);
    if (t) {
        t->name = start;
        t->len = len;
    }
    return t;
}

/* A parsed overload signature. */
struct sig {
    const struct ctype *args[CEL_OVERLOAD_MAX_ARGS + 1];
    size_t n;
    const struct ctype *result;
};

static int parse_sig(struct checker *c, const char *s, struct sig *sig)
{
    const char *p = s;
    sig->n = 0;
    sig->result = NULL;
    while (*p == ' ')
        p++;
    if (*p++ != '(')
        goto bad;
    while (*p == ' ')
        p++;
    if (*p == ')') {
        p++;
    } else {
        for (;;) {
            if (sig->n >= ARRAY_SIZE(sig->args))
                goto bad;
            sig->args[sig->n] = parse_type(c, &p, 0);
            if (!sig->args[sig->n++])
                return c->err;
            while (*p == ' ')
                p++;
            if (*p == ')') {
                p++;
                break;
            }
            if (*p++ != ',')
                goto bad;
        }
    }
    while (*p == ' ')
        p++;
    if (p[0] != '-' || p[1] != '>')
        goto bad;
    p += 2;
    sig->result = parse_type(c, &p, 0);
    return sig->result ? 0 : c->err;
bad:
    if (!c->err)
        c->err = diag_fail(c->d, -EINVAL, "1:1: malformed signature '%s'", s);
    return c->err;
}

/* Whether a value of type `arg` may be passed where `param` is expected, binding the signature's
 * type parameters in bind[] on the way. */
static bool assign(const struct ctype *param, const struct ctype *arg, const struct ctype **bind,
                   unsigned depth)
{
    if (depth > TYPE_MAX_DEPTH)
        return true;
    if (param->k == T_PARAM) {
        int i = param->name[0] - 'A';
        const struct ctype *b = bind[i];
        if (!b || (is_vague(b, 0) && assign(arg, b, bind, depth + 1))) {
            bind[i] = arg;
            return true;
        }
        return assign(b, arg, bind, depth + 1);
    }
    if (is_any(param) || is_any(arg))
        return true;
    if (param->k != arg->k)
        return false;
    switch (param->k) {
    case T_LIST:
    case T_OPTIONAL:
        return assign(param->p[0], arg->p[0], bind, depth + 1);
    case T_MAP:
        return assign(param->p[0], arg->p[0], bind, depth + 1) &&
               assign(param->p[1], arg->p[1], bind, depth + 1);
    case T_OBJECT:
        return param->len == arg->len && memcmp(param->name, arg->name, arg->len) == 0;
    default:
        return true; /* T_TYPE: type values of any type compare */
    }
}

/* The signature's type with bound parameters replaced (unbound ones are free). */
static const struct ctype *subst(struct checker *c, const struct ctype *t,
                                 const struct ctype **bind, unsigned depth)
{
    if (depth > TYPE_MAX_DEPTH)
        return &TY_DYN;
    if (t->k == T_PARAM) {
        const struct ctype *b = bind[t->name[0] - 'A'];
        return b ? b : &TY_FREE;
    }
    if (!t->p[0])
        return t;
    const struct ctype *p0 = subst(c, t->p[0], bind, depth + 1);
    const struct ctype *p1 = t->p[1] ? subst(c, t->p[1], bind, depth + 1) : NULL;
    if (!p0 || (t->p[1] && !p1))
        return NULL;
    if (p0 == t->p[0] && p1 == t->p[1])
        return t;
    return mk_type(c, t->k, p0, p1);
}

/* The homogeneous-literal rule: the same type, free matching anything. */
static bool equivalent(const struct ctype *a, const struct ctype *b, unsigned depth)
{
    if (depth > TYPE_MAX_DEPTH || a->k == T_FREE || b->k == T_FREE)
        return true;
    if (a->k != b->k)
        return false;
    if (a->k == T_OBJECT)
        return a->len == b->len && memcmp(a->name, b->name, a->len) == 0;
    if (a->k == T_TYPE)
        return true;
    for (int i = 0; i < 2; i++)
        if (a->p[i] && !equivalent(a->p[i], b->p[i], depth + 1))
            return false;
    return true;
}

/* ---- errors ---- */

static const struct ctype *fail(struct checker *c, const struct cel_node *n, const char *fmt, ...)
    _printf_(3, 4);

static const struct ctype *fail(struct checker *c, const struct cel_node *n, const char *fmt, ...)
{
    char msg[DIAG_MSG_MAX - 32];
    va_list ap;
    if (c->err)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    c->err = diag_fail(c->d, -EINVAL, "%u:%u: %s", n->line, n->col, msg);
    if (c->d) {
        c->d->line = (int)n->line;
        c->d->col = (int)n->col;
    }
    return NULL;
}

static const struct ctype *no_overload(struct checker *c, const struct cel_node *n,
                                       const char *name, size_t name_len,
                                       const struct ctype *const *args, size_t nargs)
{
    char buf[512], one[160];
    size_t pos = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < nargs && pos < sizeof(buf); i++) {
        int w = snprintf(buf + pos, sizeof(buf) - pos, "%s%s", i ? ", " : "",
                         type_str(args[i], one, sizeof(one)));
        pos += w > 0 ? (size_t)w : 0;
    }
    return fail(c, n, "found no matching overload for '%.*s' applied to '(%s)'", (int)name_len,
                name, buf);
}

/* ---- overload resolution ---- */

/* The result type of calling one of sigs[0..n) with args, or NULL when none accepts them. When
 * several do, their common result (or dyn). */
static const struct ctype *resolve_sigs(struct checker *c, const char *const *sigs, size_t n,
                                        const struct ctype *const *args, size_t nargs,
                                        bool *ret_matched)
{
    const struct ctype *res = NULL;
    *ret_matched = false;
    for (size_t i = 0; i < n; i++) {
        struct sig sig;
        const struct ctype *bind[NPARAMS] = {0};
        bool ok = true;
        if (parse_sig(c, sigs[i], &sig) < 0)
            return NULL;
        if (sig.n != nargs)
            continue;
        for (size_t j = 0; j < nargs && ok; j++)
            ok = assign(sig.args[j], args[j], bind, 0);
        if (!ok)
            continue;
        const struct ctype *r = subst(c, sig.result, bind, 0);
        if (!r)
            return NULL;
        if (!*ret_matched)
            res = r;
        else if (!equivalent(res, r, 0) || res->k != r->k)
            res = &TY_DYN;
        *ret_matched = true;
    }
    return res;
}

/* Resolves through the registry: the function named name (receiver style or not). *ret_found is
 * false when the registry has no such function at all. */
static const struct ctype *resolve_registry(struct checker *c, const char *name, size_t len,
                                            bool receiver, const struct ctype *const *args,
                                            size_t nargs, bool *ret_found, bool *ret_matched)
{
    const struct cel_func *f = c->reg ? cel_registry_find(c->reg, name, len, receiver) : NULL;
    const char *sigs[64];
    size_t n = 0;
    const struct ctype *res = NULL;
    bool matched = false;
    *ret_found = f != NULL;
    *ret_matched = false;
    if (!f)
        return NULL;
    for (size_t i = 0; i < f->n; i++) {
        sigs[n++] = f->overloads[i]->sig;
        if (n == ARRAY_SIZE(sigs) || i + 1 == f->n) {
            const struct ctype *r = resolve_sigs(c, sigs, n, args, nargs, &matched);
            if (c->err)
                return NULL;
            if (matched) {
                res = *ret_matched && (res->k != r->k || !equivalent(res, r, 0)) ? &TY_DYN : r;
                *ret_matched = true;
            }
            n = 0;
        }
    }
    return res;
}

/* ---- the walk ---- */

static const struct ctype *check_node(struct checker *c, const struct cel_node *n);

static bool push_var(struct checker *c, const struct cel_node *at, const char *name,
                     const struct ctype *t)
{
    if (c->nscope >= SCOPE_MAX) {
        fail(c, at, "comprehensions nested too deeply");
        return false;
    }
    c->scope[c->nscope++] = (struct scope_var){name, t};
    return true;
}

static const struct ctype *lookup_local(const struct checker *c, const char *name, size_t len)
{
    for (size_t i = c->nscope; i > 0; i--) {
        const char *s = c->scope[i - 1].name;
        if (strlen(s) == len && memcmp(s, name, len) == 0)
            return c->scope[i - 1].t;
    }
    return NULL;
}

/* A declared variable or a type name spelled name[0..len): its type, or NULL (no error). */
static const struct ctype *lookup_global(struct checker *c, const char *name, size_t len)
{
    if (c->env)
        for (size_t i = 0; i < c->env->nvars; i++) {
            const char *v = c->env->vars[i].name;
            if (strlen(v) == len && memcmp(v, name, len) == 0) {
                const char *s = c->env->vars[i].type;
                return parse_type(c, &s, 0);
            }
        }
    /* dyn denotes no type value (`dyn` alone is undeclared); the other names are type values */
    for (size_t i = 0; i < ARRAY_SIZE(NAMED); i++)
        if (NAMED[i].k != T_DYN && strlen(NAMED[i].name) == len &&
            memcmp(NAMED[i].name, name, len) == 0)
            return mk_type(c, T_TYPE, NAMED[i].t ? NAMED[i].t : &TY_DYN, NULL);
    if (!(len == 3 && memcmp(name, "dyn", 3) == 0) && cel_type_by_name(name, len))
        return mk_type(c, T_TYPE, &TY_DYN, NULL);
    return NULL;
}

static const struct ctype *check_ident(struct checker *c, const struct cel_node *n)
{
    const struct cel_ident *id = &n->u.ident;
    const struct ctype *t = id->leading_dot ? NULL : lookup_local(c, id->name, id->len);
    if (!t && !c->err)
        t = lookup_global(c, id->name, id->len);
    if (!t && !c->err)
        return fail(c, n, "undeclared reference to '%.*s' (in container '')", (int)id->len,
                    id->name);
    return t;
}

/* The dotted name of an ident/select chain whose root is not a comprehension variable, so it may
 * name a qualified variable, type or function namespace. false when it is not one. */
static bool qualified(const struct checker *c, const struct cel_node *n, char *buf, size_t size,
                      size_t *len, unsigned depth)
{
    if (depth > TYPE_MAX_DEPTH)
        return false;
    if (n->kind == CEL_NODE_IDENT) {
        if (!n->u.ident.leading_dot && lookup_local(c, n->u.ident.name, n->u.ident.len))
            return false;
        if (n->u.ident.len >= size)
            return false;
        memcpy(buf, n->u.ident.name, n->u.ident.len);
        *len = n->u.ident.len;
        return true;
    }
    if (n->kind != CEL_NODE_SELECT || n->u.select.optional || n->u.select.test_only ||
        !qualified(c, n->u.select.operand, buf, size, len, depth + 1) ||
        *len + 1 + n->u.select.len >= size)
        return false;
    buf[(*len)++] = '.';
    memcpy(buf + *len, n->u.select.field, n->u.select.len);
    *len += n->u.select.len;
    return true;
}

/* Whether the root identifier of a chain is a declared variable (then x.y.f() is a method call on
 * x.y, not a function in namespace x.y). */
static bool root_is_var(struct checker *c, const struct cel_node *n)
{
    while (n->kind == CEL_NODE_SELECT)
        n = n->u.select.operand;
    if (n->kind != CEL_NODE_IDENT || !c->env)
        return false;
    for (size_t i = 0; i < c->env->nvars; i++)
        if (strlen(c->env->vars[i].name) == n->u.ident.len &&
            memcmp(c->env->vars[i].name, n->u.ident.name, n->u.ident.len) == 0)
            return true;
    return false;
}

static const struct ctype *field_of(struct checker *c, const struct cel_node *n,
                                    const struct ctype *t)
{
    const struct cel_select *s = &n->u.select;
    char buf[160];
    switch (t->k) {
    case T_DYN:
    case T_FREE:
        return &TY_DYN;
    case T_MAP:
        return t->p[1];
    case T_OBJECT:
        if (c->opts.field_type) {
            const char *ft = c->opts.field_type(t->name, t->len, s->field, s->len);
            if (!ft)
                return fail(c, n, "undefined field '%s'", s->field);
            return parse_type(c, &ft, 0);
        }
        return &TY_DYN;
    default:
        return fail(c, n, "type '%s' does not support field selection",
                    type_str(t, buf, sizeof(buf)));
    }
}

static const struct ctype *check_select(struct checker *c, const struct cel_node *n)
{
    const struct cel_select *s = &n->u.select;
    char name[512];
    size_t len = 0;
    if (!s->test_only && qualified(c, n, name, sizeof(name), &len, 0) && !root_is_var(c, n)) {
        const struct ctype *t = lookup_global(c, name, len);
        if (t || c->err)
            return t;
    }
    const struct ctype *t = check_node(c, s->operand);
    if (!t)
        return NULL;
    bool opt = false;
    if (t->k == T_OPTIONAL) {
        opt = true;
        t = t->p[0];
    }
    const struct ctype *ft = field_of(c, n, t);
    if (!ft)
        return NULL;
    if (s->test_only)
        return &TY_BOOL;
    if (opt || s->optional)
        return mk_type(c, T_OPTIONAL, ft, NULL);
    return ft;
}

static const char *const INDEX_SIGS[] = {
    "(list(A), int) -> A",
    "(map(K, V), K) -> V",
};

static const struct ctype *check_index(struct checker *c, const struct cel_node *n)
{
    const struct ctype *args[2];
    bool found = false, matched = false, opt = false;
    if (!(args[0] = check_node(c, n->u.index.operand)) ||
        !(args[1] = check_node(c, n->u.index.index)))
        return NULL;
    if (args[0]->k == T_OPTIONAL) {
        opt = true;
        args[0] = args[0]->p[0];
    }
    const struct ctype *r = resolve_registry(c, "_[_]", 4, false, args, 2, &found, &matched);
    if (!found && !c->err)
        r = resolve_sigs(c, INDEX_SIGS, ARRAY_SIZE(INDEX_SIGS), args, 2, &matched);
    if (c->err)
        return NULL;
    if (!matched)
        return no_overload(c, n, "_[_]", 4, args, 2);
    if (opt || n->u.index.optional)
        return mk_type(c, T_OPTIONAL, r, NULL);
    return r;
}

/* The internal operators macros and the grammar produce, typed here rather than by the registry. */
static const char *builtin_sig(const struct cel_call *call)
{
    switch (call->op) {
    case CEL_OP_COND:
        return "(bool, A, A) -> A";
    case CEL_OP_AND:
    case CEL_OP_OR:
        return "(bool, bool) -> bool";
    case CEL_OP_NOT_STRICTLY_FALSE:
        return "(dyn) -> bool";
    case CEL_OP_LIST_APPEND:
        return "(list(A), A) -> list(A)";
    case CEL_OP_MAP_INSERT:
        return call->nargs == 3 ? "(map(K, V), K, V) -> map(K, V)"
                                : "(map(K, V), map(K, V)) -> map(K, V)";
    default:
        return NULL;
    }
}

static const struct ctype *check_list(struct checker *c, const struct cel_node *n, bool exempt);

/* Checks the call's arguments (receiver first) into args; the format() exemption from the
 * homogeneous-literal rule applies to its list argument. */
static bool check_args(struct checker *c, const struct cel_call *call, bool receiver,
                       const struct ctype **args)
{
    size_t k = 0;
    bool exempt = call->op == CEL_OP_NONE && call->name_len == 6 &&
                  memcmp(call->name, "format", 6) == 0 && receiver;
    if (receiver && !(args[k++] = check_node(c, call->target)))
        return false;
    for (uint32_t i = 0; i < call->nargs; i++) {
        const struct cel_node *a = call->args[i];
        args[k] = exempt && a->kind == CEL_NODE_LIST ? check_list(c, a, true) : check_node(c, a);
        if (!args[k++])
            return false;
    }
    return true;
}

/* Which argument types a format() clause accepts (strings extension v2, as Kubernetes validates
 * literal format strings at compile time); NULL for an unknown clause. */
static const char *clause_kinds(char verb)
{
    switch (verb) {
    case 's':
        return "*";
    case 'd':
    case 'o':
        return "iu";
    case 'b':
        return "iub";
    case 'x':
    case 'X':
        return "iusy";
    case 'f':
    case 'e':
        return "f";
    default:
        return NULL;
    }
}

static char kind_letter(const struct ctype *t)
{
    switch (t->k) {
    case T_INT:
        return 'i';
    case T_UINT:
        return 'u';
    case T_BOOL:
        return 'b';
    case T_STRING:
        return 's';
    case T_BYTES:
        return 'y';
    case T_DOUBLE:
        return 'f';
    default:
        return '?';
    }
}

/* "...".format([args]) with both literal: every clause must be known, have an argument, and accept
 * that argument's type (dyn arguments are checked at run time). */
static const struct ctype *check_format(struct checker *c, const struct cel_node *n,
                                        const struct cel_node *fmt, const struct cel_node *list)
{
    const char *s = fmt->u.lit.v.s.ptr, *end = s + fmt->u.lit.v.s.len;
    uint32_t next = 0;
    char buf[160];
    if (list->u.list.optional)
        return &TY_STRING;
    for (const char *p = s; p < end; p++) {
        if (*p != '%')
            continue;
        if (++p < end && *p == '%')
            continue;
        if (p < end && *p == '.')
            for (p++; p < end && *p >= '0' && *p <= '9'; p++)
                ;
        const char *kinds = p < end ? clause_kinds(*p) : NULL;
        if (!kinds)
            return fail(c, n, "could not parse formatting clause: unrecognized formatting clause");
        if (next >= list->u.list.n)
            return fail(c, n, "index %u out of range", next);
        const struct ctype *t = check_node(c, list->u.list.elems[next++]);
        if (!t)
            return NULL;
        if (kinds[0] == '*' || is_any(t) || strchr(kinds, kind_letter(t)))
            continue;
        return fail(c, n, "unsupported type for formatting clause '%c': %s", *p,
                    type_str(t, buf, sizeof(buf)));
    }
    return &TY_STRING;
}

static const struct ctype *check_call(struct checker *c, const struct cel_node *n)
{
    const struct cel_call *call = &n->u.call;
    const struct ctype *args[CEL_OVERLOAD_MAX_ARGS + 2];
    char qname[512];
    size_t qlen = 0, nargs;
    bool receiver = call->target != NULL, found = false, matched = false;
    const char *name = call->name;
    size_t name_len = call->name_len;
    const struct ctype *r;

    if (call->nargs > CEL_OVERLOAD_MAX_ARGS)
        return fail(c, n, "found no matching overload for '%.*s' (too many arguments)",
                    (int)name_len, name);
    /* ns.f(args): a function with a dotted name, when ns is no variable. */
    if (receiver && qualified(c, call->target, qname, sizeof(qname) - 1, &qlen, 0) &&
        !root_is_var(c, call->target) && qlen + 1 + name_len < sizeof(qname)) {
        qname[qlen++] = '.';
        memcpy(qname + qlen, name, name_len);
        qlen += name_len;
        if (c->reg && cel_registry_find(c->reg, qname, qlen, false)) {
            name = qname;
            name_len = qlen;
            receiver = false;
        }
    }
    if (!check_args(c, call, receiver, args))
        return NULL;
    nargs = call->nargs + (receiver ? 1 : 0);
    const char *bsig = builtin_sig(call);
    if (bsig) {
        r = resolve_sigs(c, &bsig, 1, args, nargs, &matched);
        if (!matched && !c->err)
            return no_overload(c, n, name, name_len, args, nargs);
        return r;
    }
    r = resolve_registry(c, name, name_len, receiver, args, nargs, &found, &matched);
    if (c->err)
        return NULL;
    if (found && matched && receiver && call->nargs == 1 && name_len == 6 &&
        memcmp(name, "format", 6) == 0 && call->target->kind == CEL_NODE_CONST &&
        call->target->u.lit.kind == CEL_CONST_STRING && call->args[0]->kind == CEL_NODE_LIST)
        return check_format(c, n, call->target, call->args[0]);
    if (!found) {
        /* Operators the registry does not type are left to the evaluator. */
        if (call->op != CEL_OP_NONE)
            return &TY_DYN;
        if (receiver && c->reg && cel_registry_find(c->reg, name, name_len, false))
            return no_overload(c, n, name, name_len, args, nargs);
        return fail(c, n, "undeclared reference to '%.*s' (in container '')", (int)name_len, name);
    }
    if (!matched)
        return no_overload(c, n, name, name_len, args, nargs);
    return r;
}

static const struct ctype *elem_type(struct checker *c, const struct cel_node *e, bool optional)
{
    const struct ctype *t = check_node(c, e);
    char buf[160];
    if (!t || !optional || is_any(t))
        return t && optional ? &TY_DYN : t;
    if (t->k != T_OPTIONAL)
        return fail(c, e, "expected type 'optional_type' but found '%s'",
                    type_str(t, buf, sizeof(buf)));
    return t->p[0];
}

static const struct ctype *mismatch(struct checker *c, const struct cel_node *at,
                                    const struct ctype *want, const struct ctype *got)
{
    char a[160], b[160];
    return fail(c, at, "expected type '%s' but found '%s'", type_str(want, a, sizeof(a)),
                type_str(got, b, sizeof(b)));
}

/* Joins the running element type with the next one under the homogeneous-literal rule. */
static const struct ctype *join(struct checker *c, const struct cel_node *at,
                                const struct ctype *acc, const struct ctype *t, bool exempt)
{
    if (!acc || acc->k == T_FREE)
        return t;
    if (equivalent(acc, t, 0))
        return is_vague(acc, 0) ? t : acc;
    if (exempt)
        return &TY_DYN;
    return mismatch(c, at, acc, t);
}

static const struct ctype *check_list(struct checker *c, const struct cel_node *n, bool exempt)
{
    const struct cel_list *l = &n->u.list;
    const struct ctype *et = NULL;
    for (uint32_t i = 0; i < l->n; i++) {
        const struct ctype *t = elem_type(c, l->elems[i], l->optional && l->optional[i]);
        if (!t || !(et = join(c, l->elems[i], et, t, exempt)))
            return NULL;
    }
    return mk_type(c, T_LIST, et ? et : &TY_FREE, NULL);
}

static const struct ctype *check_map(struct checker *c, const struct cel_node *n)
{
    const struct cel_map *m = &n->u.map;
    const struct ctype *kt = NULL, *vt = NULL;
    for (uint32_t i = 0; i < m->n; i++) {
        const struct cel_map_entry *e = &m->entries[i];
        const struct ctype *k = check_node(c, e->key);
        if (!k || !(kt = join(c, e->key, kt, k, false)))
            return NULL;
        const struct ctype *v = elem_type(c, e->value, e->optional);
        if (!v || !(vt = join(c, e->value, vt, v, false)))
            return NULL;
    }
    return mk_type(c, T_MAP, kt ? kt : &TY_FREE, vt ? vt : &TY_FREE);
}

/* The types of a comprehension's iteration variables for a range of type t. */
static bool iter_types(struct checker *c, const struct cel_node *n, const struct ctype *t,
                       const struct ctype **v1, const struct ctype **v2)
{
    char buf[160];
    switch (t->k) {
    case T_LIST:
        *v1 = n->u.comp.iter_var2 ? &TY_INT : t->p[0];
        *v2 = t->p[0];
        return true;
    case T_MAP:
        *v1 = t->p[0];
        *v2 = t->p[1];
        return true;
    case T_DYN:
    case T_FREE:
        *v1 = *v2 = &TY_DYN;
        return true;
    default:
        fail(c, n->u.comp.iter_range,
             "expression of type '%s' cannot be the range of a comprehension (must be list, map, "
             "or dynamic)",
             type_str(t, buf, sizeof(buf)));
        return false;
    }
}

static const struct ctype *check_comprehension(struct checker *c, const struct cel_node *n)
{
    const struct cel_comprehension *k = &n->u.comp;
    const struct ctype *range, *accu, *v1 = NULL, *v2 = NULL, *step, *res;
    size_t base = c->nscope;
    if (!(range = check_node(c, k->iter_range)) || !iter_types(c, n, range, &v1, &v2) ||
        !(accu = check_node(c, k->accu_init)))
        return NULL;
    if (!push_var(c, n, k->accu_var, accu) || !push_var(c, n, k->iter_var, v1) ||
        (k->iter_var2 && !push_var(c, n, k->iter_var2, v2)))
        return NULL;
    if (!check_node(c, k->loop_cond) || !(step = check_node(c, k->loop_step)))
        return NULL;
    /* The accumulator of map/filter/transform* starts as an empty literal: its type is what the
     * step makes of it. */
    if (is_vague(accu, 0))
        accu = step;
    c->nscope = base;
    if (!push_var(c, n, k->accu_var, accu))
        return NULL;
    res = check_node(c, k->result);
    c->nscope = base;
    return res;
}

static const struct ctype *check_const(const struct cel_const *k)
{
    switch (k->kind) {
    case CEL_CONST_NULL:
        return &TY_NULL;
    case CEL_CONST_BOOL:
        return &TY_BOOL;
    case CEL_CONST_INT:
        return &TY_INT;
    case CEL_CONST_UINT:
        return &TY_UINT;
    case CEL_CONST_DOUBLE:
        return &TY_DOUBLE;
    case CEL_CONST_STRING:
        return &TY_STRING;
    case CEL_CONST_BYTES:
        return &TY_BYTES;
    }
    return &TY_DYN;
}

static const struct ctype *check_node(struct checker *c, const struct cel_node *n)
{
    if (c->err)
        return NULL;
    switch (n->kind) {
    case CEL_NODE_CONST:
        return check_const(&n->u.lit);
    case CEL_NODE_IDENT:
        return check_ident(c, n);
    case CEL_NODE_SELECT:
        return check_select(c, n);
    case CEL_NODE_INDEX:
        return check_index(c, n);
    case CEL_NODE_CALL:
        return check_call(c, n);
    case CEL_NODE_LIST:
        return check_list(c, n, false);
    case CEL_NODE_MAP:
        return check_map(c, n);
    case CEL_NODE_STRUCT:
        return fail(c, n, "undeclared reference to '%s' (in container '')", n->u.strct.type_name);
    case CEL_NODE_COMPREHENSION:
        return check_comprehension(c, n);
    }
    return fail(c, n, "unknown node");
}

static void checker_release(struct checker *c)
{
    while (c->chunks) {
        struct type_chunk *next = c->chunks->next;
        free(c->chunks);
        c->chunks = next;
    }
    free(c->scope);
}

int cel_check(const struct cel_ast *ast, const struct cel_env *env,
              const struct cel_check_opts *opts, char *ret_type, size_t size, struct diag *d)
{
    _cleanup_(checker_release) struct checker c = {
        .env = env,
        .reg = env ? cel_env_registry(env) : NULL,
        .d = d,
    };
    char buf[160];
    if (opts)
        c.opts = *opts;
    c.scope = calloc(SCOPE_MAX, sizeof(*c.scope));
    if (!c.scope)
        return diag_fail(d, -ENOMEM, "out of memory");
    const struct ctype *t = check_node(&c, ast->root);
    if (!t)
        return c.err ? c.err : diag_fail(d, -EINVAL, "1:1: type check failed");
    if (c.opts.want_bool && t->k != T_BOOL && !is_any(t)) {
        fail(&c, ast->root, "must evaluate to bool, got '%s'", type_str(t, buf, sizeof(buf)));
        return c.err;
    }
    if (ret_type && size)
        type_str(t, ret_type, size);
    return 0;
}
