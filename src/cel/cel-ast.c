/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The AST's arena and node constructors, operator names, and a dump in S-expression form that the
 * unit tests compare against. One arena per tree: the parser allocates as it goes and never frees a
 * node on its own, so a failed parse and a finished tree are both released with one cel_ast_free().
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cel-ast.h"

/* Chunks grow with the tree so a one-token expression costs one small allocation; the total is
 * capped because the tree grows from outside input. */
#define ARENA_FIRST_CHUNK ((size_t)2048)
#define ARENA_MAX_CHUNK ((size_t)256 * 1024)
#define ARENA_MAX_TOTAL ((size_t)256 * 1024 * 1024)

struct cel_chunk {
    struct cel_chunk *next;
    size_t size; /* usable bytes after the header */
    size_t used;
    _Alignas(16) unsigned char data[];
};

struct cel_arena {
    struct cel_chunk *head;
    size_t total;
};

static void *arena_alloc(struct cel_arena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    if (size == 0)
        size = 16;
    struct cel_chunk *c = a->head;
    if (!c || c->size - c->used < size) {
        size_t want = c ? c->size * 2 : ARENA_FIRST_CHUNK;
        if (want > ARENA_MAX_CHUNK)
            want = ARENA_MAX_CHUNK;
        if (want < size)
            want = size;
        if (a->total + want > ARENA_MAX_TOTAL)
            return NULL;
        c = malloc(sizeof(*c) + want);
        if (!c)
            return NULL;
        c->next = a->head;
        c->size = want;
        c->used = 0;
        a->head = c;
        a->total += want;
    }
    void *p = c->data + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}

struct cel_ast *cel_ast_new(void)
{
    struct cel_ast *ast = calloc(1, sizeof(*ast));
    if (!ast)
        return NULL;
    ast->arena = calloc(1, sizeof(*ast->arena));
    if (!ast->arena) {
        free(ast);
        return NULL;
    }
    return ast;
}

struct cel_ast *cel_ast_free(struct cel_ast *ast)
{
    if (!ast)
        return NULL;
    if (ast->arena) {
        struct cel_chunk *c = ast->arena->head;
        while (c) {
            struct cel_chunk *next = c->next;
            free(c);
            c = next;
        }
        free(ast->arena);
    }
    free(ast);
    return NULL;
}

void *cel_ast_alloc(struct cel_ast *ast, size_t size)
{
    return arena_alloc(ast->arena, size);
}

char *cel_ast_strdup(struct cel_ast *ast, const char *s, size_t len)
{
    if (len >= ARENA_MAX_TOTAL)
        return NULL;
    char *p = arena_alloc(ast->arena, len + 1);
    if (p && len)
        memcpy(p, s, len);
    return p;
}

struct cel_node *cel_ast_node(struct cel_ast *ast, enum cel_node_kind kind, uint32_t offset,
                              uint32_t line, uint32_t col)
{
    if (ast->nnodes >= CEL_AST_MAX_NODES)
        return NULL;
    struct cel_node *n = arena_alloc(ast->arena, sizeof(*n));
    if (!n)
        return NULL;
    n->kind = kind;
    n->id = ++ast->nnodes;
    n->offset = offset;
    n->line = line;
    n->col = col;
    return n;
}

static const char *const op_names[CEL_OP__COUNT] = {
    [CEL_OP_NONE] = "",
    [CEL_OP_COND] = "_?_:_",
    [CEL_OP_AND] = "_&&_",
    [CEL_OP_OR] = "_||_",
    [CEL_OP_NOT] = "!_",
    [CEL_OP_NEG] = "-_",
    [CEL_OP_EQ] = "_==_",
    [CEL_OP_NE] = "_!=_",
    [CEL_OP_LT] = "_<_",
    [CEL_OP_LE] = "_<=_",
    [CEL_OP_GT] = "_>_",
    [CEL_OP_GE] = "_>=_",
    [CEL_OP_IN] = "@in",
    [CEL_OP_ADD] = "_+_",
    [CEL_OP_SUB] = "_-_",
    [CEL_OP_MUL] = "_*_",
    [CEL_OP_DIV] = "_/_",
    [CEL_OP_MOD] = "_%_",
    [CEL_OP_NOT_STRICTLY_FALSE] = "@not_strictly_false",
    [CEL_OP_LIST_APPEND] = "@list_append",
    [CEL_OP_MAP_INSERT] = "@map_insert",
};

const char *cel_op_name(enum cel_op op)
{
    if ((unsigned)op >= CEL_OP__COUNT)
        return "?";
    return op_names[op];
}

/* The dump writes into a fixed buffer and remembers that it was cut rather than failing midway, so
 * a test sees as much of the tree as fits. */
struct dump {
    char *buf;
    size_t size;
    size_t pos;
    bool cut;
};

static void _printf_(2, 3) put(struct dump *d, const char *fmt, ...)
{
    va_list ap;
    size_t room = d->pos < d->size ? d->size - d->pos : 0;
    va_start(ap, fmt);
    int n = vsnprintf(room ? d->buf + d->pos : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= room) {
        d->cut = true;
        d->pos = d->size ? d->size - 1 : 0;
        return;
    }
    d->pos += (size_t)n;
}

static void put_quoted(struct dump *d, const char *s, size_t len, bool bytes)
{
    put(d, "%s\"", bytes ? "b" : "");
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            put(d, "\\%c", c);
        else if (c < 0x20 || c == 0x7f || (bytes && c >= 0x80))
            put(d, "\\x%02x", c);
        else
            put(d, "%c", c);
    }
    put(d, "\"");
}

static void dump_const(struct dump *d, const struct cel_const *c)
{
    switch (c->kind) {
    case CEL_CONST_NULL:
        put(d, "null");
        break;
    case CEL_CONST_BOOL:
        put(d, "%s", c->v.b ? "true" : "false");
        break;
    case CEL_CONST_INT:
        put(d, "%" PRId64, c->v.i);
        break;
    case CEL_CONST_UINT:
        put(d, "%" PRIu64 "u", c->v.u);
        break;
    case CEL_CONST_DOUBLE:
        put(d, "%.17gd", c->v.d);
        break;
    case CEL_CONST_STRING:
    case CEL_CONST_BYTES:
        put_quoted(d, c->v.s.ptr, c->v.s.len, c->kind == CEL_CONST_BYTES);
        break;
    }
}

static void dump_node(struct dump *d, const struct cel_node *n);

static void dump_call(struct dump *d, const struct cel_call *c)
{
    put(d, "(%s", c->op == CEL_OP_NONE ? c->name : cel_op_name(c->op));
    if (c->target) {
        put(d, " .");
        dump_node(d, c->target);
    }
    for (uint32_t i = 0; i < c->nargs; i++) {
        put(d, " ");
        dump_node(d, c->args[i]);
    }
    put(d, ")");
}

static void dump_aggregate(struct dump *d, const struct cel_node *n)
{
    if (n->kind == CEL_NODE_LIST) {
        put(d, "[");
        for (uint32_t i = 0; i < n->u.list.n; i++) {
            put(d, "%s%s", i ? " " : "", n->u.list.optional && n->u.list.optional[i] ? "?" : "");
            dump_node(d, n->u.list.elems[i]);
        }
        put(d, "]");
    } else if (n->kind == CEL_NODE_MAP) {
        put(d, "{");
        for (uint32_t i = 0; i < n->u.map.n; i++) {
            put(d, "%s%s", i ? " " : "", n->u.map.entries[i].optional ? "?" : "");
            dump_node(d, n->u.map.entries[i].key);
            put(d, ":");
            dump_node(d, n->u.map.entries[i].value);
        }
        put(d, "}");
    } else {
        put(d, "%s%s{", n->u.strct.leading_dot ? "." : "", n->u.strct.type_name);
        for (uint32_t i = 0; i < n->u.strct.n; i++) {
            const struct cel_struct_field *f = &n->u.strct.fields[i];
            put(d, "%s%s%s:", i ? " " : "", f->optional ? "?" : "", f->name);
            dump_node(d, f->value);
        }
        put(d, "}");
    }
}

static void dump_comp(struct dump *d, const struct cel_comprehension *c)
{
    put(d, "(comp %s", c->iter_var);
    if (c->iter_var2)
        put(d, ",%s", c->iter_var2);
    put(d, " ");
    dump_node(d, c->iter_range);
    put(d, " %s ", c->accu_var);
    dump_node(d, c->accu_init);
    put(d, " ");
    dump_node(d, c->loop_cond);
    put(d, " ");
    dump_node(d, c->loop_step);
    put(d, " ");
    dump_node(d, c->result);
    put(d, ")");
}

static void dump_node(struct dump *d, const struct cel_node *n)
{
    if (!n) {
        put(d, "<null>");
        return;
    }
    switch (n->kind) {
    case CEL_NODE_CONST:
        dump_const(d, &n->u.lit);
        break;
    case CEL_NODE_IDENT:
        put(d, "%s%s", n->u.ident.leading_dot ? "." : "", n->u.ident.name);
        break;
    case CEL_NODE_SELECT:
        put(d, "(%s ", n->u.select.test_only ? "has" : n->u.select.optional ? "?." : ".");
        dump_node(d, n->u.select.operand);
        put(d, " %s)", n->u.select.field);
        break;
    case CEL_NODE_INDEX:
        put(d, "(%s ", n->u.index.optional ? "[?]" : "[]");
        dump_node(d, n->u.index.operand);
        put(d, " ");
        dump_node(d, n->u.index.index);
        put(d, ")");
        break;
    case CEL_NODE_CALL:
        dump_call(d, &n->u.call);
        break;
    case CEL_NODE_LIST:
    case CEL_NODE_MAP:
    case CEL_NODE_STRUCT:
        dump_aggregate(d, n);
        break;
    case CEL_NODE_COMPREHENSION:
        dump_comp(d, &n->u.comp);
        break;
    }
}

int cel_ast_dump(const struct cel_node *n, char *buf, size_t size)
{
    struct dump d = {.buf = buf, .size = size};
    if (size)
        buf[0] = '\0';
    dump_node(&d, n);
    if (d.cut)
        return -ENOBUFS;
    return (int)d.pos;
}
