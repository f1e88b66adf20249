/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The function registry: every overload of every enabled library, grouped by (name, call style).
 * Registration parses each overload's type signature once into the argument kinds dispatch
 * compares; a call node is resolved to its group when the program is compiled, so a call at run
 * time is a short scan of a few overloads comparing one byte per argument.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cel-internal.h"

#define REGISTRY_MAX_FUNCS 4096

static bool is_ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
}

static void skip_space(const char **p)
{
    while (**p == ' ')
        (*p)++;
}

static const struct {
    const char *name;
    uint8_t kind;
} SIG_KINDS[] = {
    {"int", CEL_INT},
    {"uint", CEL_UINT},
    {"double", CEL_DOUBLE},
    {"bool", CEL_BOOL},
    {"string", CEL_STRING},
    {"bytes", CEL_BYTES},
    {"null_type", CEL_NULL},
    {"dyn", CEL_KIND_ANY},
    {"type", CEL_TYPE},
    {"list", CEL_LIST},
    {"map", CEL_MAP},
    {"optional_type", CEL_OPTIONAL},
    {"google.protobuf.Timestamp", CEL_TIMESTAMP},
    {"google.protobuf.Duration", CEL_DURATION},
};

/* Skips a parenthesised type-argument list "(...)" at *p, nesting included. */
static int skip_params(const char **p)
{
    int depth = 0;

    do {
        if (**p == '(')
            depth++;
        else if (**p == ')')
            depth--;
        else if (**p == '\0')
            return -EINVAL;
        (*p)++;
    } while (depth > 0);
    return 0;
}

int cel_sig_type(const char **p, uint8_t *ret_kind, const char **ret_name, size_t *ret_len)
{
    const char *start;
    size_t len;
    uint8_t kind = CEL_OBJECT;

    skip_space(p);
    start = *p;
    while (is_ident_char(**p))
        (*p)++;
    len = (size_t)(*p - start);
    if (len == 0)
        return -EINVAL;
    if (len == 1 && start[0] >= 'A' && start[0] <= 'Z')
        kind = CEL_KIND_ANY;
    for (size_t i = 0; i < ARRAY_SIZE(SIG_KINDS); i++)
        if (strlen(SIG_KINDS[i].name) == len && memcmp(SIG_KINDS[i].name, start, len) == 0)
            kind = SIG_KINDS[i].kind;
    if (**p == '(' && skip_params(p) < 0)
        return -EINVAL;
    skip_space(p);
    *ret_kind = kind;
    *ret_name = start;
    *ret_len = len;
    return 0;
}

static int parse_sig(const struct cel_overload *o, struct cel_ovl_rt *rt)
{
    const char *p = o->sig;

    *rt = (struct cel_ovl_rt){.o = o};
    skip_space(&p);
    if (*p++ != '(')
        return -EINVAL;
    skip_space(&p);
    while (*p != ')') {
        uint8_t kind;
        const char *name;
        size_t len;

        if (rt->arity == CEL_OVERLOAD_MAX_ARGS || cel_sig_type(&p, &kind, &name, &len) < 0)
            return -EINVAL;
        rt->kinds[rt->arity] = kind;
        if (kind == CEL_OBJECT) {
            rt->objtype[rt->arity] = name;
            rt->objlen[rt->arity] = len;
        }
        rt->arity++;
        if (*p == ',')
            p++;
        else if (*p != ')')
            return -EINVAL;
    }
    return 0;
}

size_t cel_overload_arity(const struct cel_overload *o)
{
    struct cel_ovl_rt rt;

    return parse_sig(o, &rt) < 0 ? 0 : rt.arity;
}

static struct cel_func_entry *find_entry(const struct cel_registry *r, const char *name, size_t len,
                                         bool receiver)
{
    for (size_t i = 0; i < r->n; i++) {
        struct cel_func_entry *e = &r->funcs[i];

        if (e->f.receiver == receiver && strncmp(e->f.name, name, len) == 0 &&
            e->f.name[len] == '\0')
            return e;
    }
    return NULL;
}

const struct cel_func *cel_registry_find(const struct cel_registry *r, const char *name, size_t len,
                                         bool receiver)
{
    struct cel_func_entry *e = find_entry(r, name, len, receiver);

    return e ? &e->f : NULL;
}

static int add_overload(struct cel_registry *r, const struct cel_overload *o)
{
    struct cel_func_entry *e = find_entry(r, o->name, strlen(o->name), o->receiver);
    const struct cel_overload **ovl;
    struct cel_ovl_rt *rt;

    if (!e) {
        if (r->n == REGISTRY_MAX_FUNCS)
            return -E2BIG;
        if (r->n == r->alloc) {
            size_t na = r->alloc ? r->alloc * 2 : 64;
            struct cel_func_entry *f = realloc(r->funcs, na * sizeof(*f));

            if (!f)
                return -ENOMEM;
            r->funcs = f;
            r->alloc = na;
        }
        e = &r->funcs[r->n++];
        *e = (struct cel_func_entry){.f = {.name = o->name, .receiver = o->receiver}};
    }
    ovl = realloc((void *)e->f.overloads, (e->f.n + 1) * sizeof(*ovl));
    if (!ovl)
        return -ENOMEM;
    e->f.overloads = (const struct cel_overload *const *)ovl;
    rt = realloc(e->rt, (e->f.n + 1) * sizeof(*rt));
    if (!rt)
        return -ENOMEM;
    e->rt = rt;
    if (parse_sig(o, &rt[e->f.n]) < 0)
        return -EINVAL;
    ovl[e->f.n++] = o;
    e->nonstrict |= (o->flags & CEL_OVL_NONSTRICT) != 0;
    return 0;
}

int cel_registry_add(struct cel_registry *r, const struct cel_library *lib)
{
    for (size_t i = 0; i < lib->n; i++) {
        int err = add_overload(r, &lib->overloads[i]);

        if (err < 0)
            return err;
    }
    return 0;
}

void cel_registry_release(struct cel_registry *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free((void *)r->funcs[i].f.overloads);
        free(r->funcs[i].rt);
    }
    free(r->funcs);
    *r = (struct cel_registry){0};
}

static bool kind_matches(const struct cel_ovl_rt *rt, size_t i, struct cel_value v)
{
    if (rt->kinds[i] == CEL_KIND_ANY)
        return true;
    if (rt->kinds[i] != v.kind)
        return false;
    if (v.kind == CEL_OBJECT) {
        const char *tn = v.obj->cls->type->name;

        return strlen(tn) == rt->objlen[i] && memcmp(tn, rt->objtype[i], rt->objlen[i]) == 0;
    }
    return true;
}

const struct cel_ovl_rt *cel_registry_dispatch(const struct cel_func_entry *fe,
                                               const struct cel_value *args, size_t n)
{
    for (size_t k = 0; k < fe->f.n; k++) {
        const struct cel_ovl_rt *rt = &fe->rt[k];
        size_t i;

        if (rt->arity != n)
            continue;
        for (i = 0; i < n; i++)
            if (!kind_matches(rt, i, args[i]))
                break;
        if (i == n)
            return rt;
    }
    return NULL;
}
