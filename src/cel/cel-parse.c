/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CEL parser: recursive descent over the grammar of the CEL language definition, one function
 * per rule (the rule is the function's first comment), building the tree in its arena and handing
 * every call to the macro expander as it is built. Operator precedence, loosest first: ?: || &&
 * relations (< <= >= > == != in), + -, * / %, unary ! -, member access. Optional syntax (x.?f,
 * x[?i], [?e], {?k: v}, Msg{?f: v}) is always on, as in the DRA environment.
 *
 * Recursion on input is bounded twice: the grammar nesting (every nested expression) by
 * CEL_PARSE_MAX_DEPTH while parsing, and the finished tree's height (which left-associative chains
 * grow without nesting) by CEL_AST_MAX_DEPTH in a bounded walk at the end. && and || chains are
 * built as balanced trees, as the reference implementation does, so long conjunctions stay shallow.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cel-parse-internal.h"

/* Arguments of one call, elements of one list: more is an error, not an allocation. */
#define MAX_LIST_ITEMS 65536

struct parser {
    struct cel_lexer lx;
    struct cel_token tok; /* the lookahead */
    struct cel_ast *ast;
    struct diag *d;
    unsigned depth;
};

static int parse_expr(struct parser *p, struct cel_node **ret);

static int fail_at(struct parser *p, int err, uint32_t line, uint32_t col, const char *fmt, ...)
    _printf_(5, 6);

static int fail_at(struct parser *p, int err, uint32_t line, uint32_t col, const char *fmt, ...)
{
    if (p->d) {
        char msg[DIAG_MSG_MAX - 32];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        diag_fail(p->d, err, "%u:%u: %s", line, col, msg);
        p->d->line = (int)line;
        p->d->col = (int)col;
    }
    return err;
}

static int nomem(struct parser *p)
{
    return fail_at(p, -ENOMEM, p->tok.line, p->tok.col, "out of memory (expression too large)");
}

/* "mismatched input" in the reference implementation's words, naming what was found. */
static int unexpected(struct parser *p, const char *expecting)
{
    const struct cel_token *t = &p->tok;
    if (t->kind == CEL_TOK_EOF)
        return fail_at(p, -EINVAL, t->line, t->col,
                       "Syntax error: mismatched input '<EOF>' expecting %s", expecting);
    return fail_at(p, -EINVAL, t->line, t->col,
                   "Syntax error: mismatched input '%.*s' expecting %s",
                   (int)(t->len > 40 ? 40 : t->len), t->start, expecting);
}

static int advance(struct parser *p)
{
    return cel_lex_next(&p->lx, &p->tok, p->d);
}

static int expect(struct parser *p, enum cel_tok kind)
{
    if (p->tok.kind != kind)
        return unexpected(p, cel_tok_name(kind));
    return advance(p);
}

static struct cel_node *node_at(struct parser *p, enum cel_node_kind kind,
                                const struct cel_token *at)
{
    return cel_ast_node(p->ast, kind, at->offset, at->line, at->col);
}

/* An operator call with its arguments. */
static struct cel_node *op_node(struct parser *p, enum cel_op op, const struct cel_token *at,
                                struct cel_node *a, struct cel_node *b, struct cel_node *c)
{
    struct cel_node *n = node_at(p, CEL_NODE_CALL, at);
    uint32_t nargs = c ? 3 : b ? 2 : 1;
    if (!n)
        return NULL;
    n->u.call.args = cel_ast_alloc(p->ast, nargs * sizeof(*n->u.call.args));
    if (!n->u.call.args)
        return NULL;
    n->u.call.op = op;
    n->u.call.name = cel_op_name(op);
    n->u.call.name_len = strlen(n->u.call.name);
    n->u.call.nargs = nargs;
    n->u.call.args[0] = a;
    if (b)
        n->u.call.args[1] = b;
    if (c)
        n->u.call.args[2] = c;
    return n;
}

/* A growable array of node pointers local to one rule; moved into the arena when complete. */
struct nodelist {
    struct cel_node **items;
    uint32_t n, alloc;
};

static void nodelist_release(struct nodelist *l)
{
    free(l->items);
}

static int nodelist_push(struct parser *p, struct nodelist *l, struct cel_node *n)
{
    if (l->n >= MAX_LIST_ITEMS)
        return fail_at(p, -E2BIG, p->tok.line, p->tok.col, "too many elements (more than %d)",
                       MAX_LIST_ITEMS);
    if (l->n == l->alloc) {
        uint32_t na = l->alloc ? l->alloc * 2 : 8;
        struct cel_node **items = realloc(l->items, na * sizeof(*items));
        if (!items)
            return nomem(p);
        l->items = items;
        l->alloc = na;
    }
    l->items[l->n++] = n;
    return 0;
}

static struct cel_node **nodelist_finish(struct parser *p, const struct nodelist *l)
{
    struct cel_node **a = cel_ast_alloc(p->ast, (l->n ? l->n : 1) * sizeof(*a));
    if (a && l->n)
        memcpy(a, l->items, l->n * sizeof(*a));
    return a;
}

/* exprList : expr (',' expr)* ; the caller consumed the opening token, this consumes `close`. */
static int parse_expr_list(struct parser *p, struct nodelist *l, enum cel_tok close)
{
    int r;
    if (p->tok.kind == close)
        return advance(p);
    for (;;) {
        struct cel_node *e = NULL;
        r = parse_expr(p, &e);
        if (r < 0)
            return r;
        r = nodelist_push(p, l, e);
        if (r < 0)
            return r;
        if (p->tok.kind != CEL_TOK_COMMA)
            break;
        r = advance(p);
        if (r < 0)
            return r;
    }
    return expect(p, close);
}

/* Builds a call (global when target is NULL) from parsed arguments, expanding macros. */
static int make_call(struct parser *p, const struct cel_token *name_tok, bool leading_dot,
                     struct cel_node *target, struct nodelist *args, struct cel_node **ret)
{
    struct cel_node **argv = nodelist_finish(p, args);
    if (!argv)
        return nomem(p);
    if (!leading_dot) {
        struct cel_macro_call mc = {
            .name = name_tok->start,
            .name_len = name_tok->len,
            .target = target,
            .args = argv,
            .nargs = args->n,
            .offset = name_tok->offset,
            .line = name_tok->line,
            .col = name_tok->col,
        };
        struct cel_node *exp = NULL;
        int r = cel_macro_expand(p->ast, &mc, &exp, p->d);
        if (r < 0)
            return r;
        if (exp) {
            *ret = exp;
            return 0;
        }
    }
    struct cel_node *n = node_at(p, CEL_NODE_CALL, name_tok);
    if (!n)
        return nomem(p);
    n->u.call.op = CEL_OP_NONE;
    n->u.call.name = cel_ast_strdup(p->ast, name_tok->start, name_tok->len);
    if (!n->u.call.name)
        return nomem(p);
    n->u.call.name_len = name_tok->len;
    n->u.call.target = target;
    n->u.call.args = argv;
    n->u.call.nargs = args->n;
    *ret = n;
    return 0;
}

/* An identifier node from an IDENT token (reserved words are rejected here, not as field names). */
static int ident_node(struct parser *p, const struct cel_token *t, bool leading_dot,
                      struct cel_node **ret)
{
    if (t->reserved)
        return fail_at(p, -EINVAL, t->line, t->col, "Syntax error: reserved identifier '%.*s'",
                       (int)t->len, t->start);
    struct cel_node *n = node_at(p, CEL_NODE_IDENT, t);
    if (!n)
        return nomem(p);
    n->u.ident.name = cel_ast_strdup(p->ast, t->start, t->len);
    if (!n->u.ident.name)
        return nomem(p);
    n->u.ident.len = t->len;
    n->u.ident.leading_dot = leading_dot;
    *ret = n;
    return 0;
}

/* literal : '-'? NUM_INT | NUM_UINT | '-'? NUM_FLOAT | STRING | BYTES | 'true' | 'false' | 'null'
 * (the minus is folded by parse_unary, which passes `negate`) */
static int parse_literal(struct parser *p, bool negate, const struct cel_token *at,
                         struct cel_node **ret)
{
    const struct cel_token *t = &p->tok;
    struct cel_node *n = node_at(p, CEL_NODE_CONST, at);
    if (!n)
        return nomem(p);
    struct cel_const *c = &n->u.lit;
    switch (t->kind) {
    case CEL_TOK_INT:
        if (!negate && t->v.u > (uint64_t)INT64_MAX)
            return fail_at(p, -EINVAL, t->line, t->col, "invalid int literal: out of range");
        c->kind = CEL_CONST_INT;
        c->v.i = negate ? (int64_t)(0 - t->v.u) : (int64_t)t->v.u;
        break;
    case CEL_TOK_UINT:
        c->kind = CEL_CONST_UINT;
        c->v.u = t->v.u;
        break;
    case CEL_TOK_DOUBLE:
        c->kind = CEL_CONST_DOUBLE;
        c->v.d = negate ? -t->v.d : t->v.d;
        break;
    case CEL_TOK_STRING:
    case CEL_TOK_BYTES:
        c->kind = t->kind == CEL_TOK_STRING ? CEL_CONST_STRING : CEL_CONST_BYTES;
        c->v.s.ptr = t->v.s.ptr;
        c->v.s.len = t->v.s.len;
        break;
    case CEL_TOK_TRUE:
    case CEL_TOK_FALSE:
        c->kind = CEL_CONST_BOOL;
        c->v.b = t->kind == CEL_TOK_TRUE;
        break;
    default:
        c->kind = CEL_CONST_NULL;
        break;
    }
    *ret = n;
    return advance(p);
}

/* listInit : optExpr (',' optExpr)* ','? ;  optExpr : '?'? expr ; inside '[' ... ']' */
static int parse_list(struct parser *p, const struct cel_token *at, struct cel_node **ret)
{
    _cleanup_(nodelist_release) struct nodelist elems = {0};
    _cleanup_free_ bool *opt = NULL;
    uint32_t opt_alloc = 0;
    bool any_opt = false;
    int r;
    while (p->tok.kind != CEL_TOK_RBRACKET) {
        bool is_opt = p->tok.kind == CEL_TOK_QUESTION;
        struct cel_node *e = NULL;
        if (is_opt && (r = advance(p)) < 0)
            return r;
        if ((r = parse_expr(p, &e)) < 0 || (r = nodelist_push(p, &elems, e)) < 0)
            return r;
        if (elems.n > opt_alloc) {
            bool *no = realloc(opt, elems.alloc * sizeof(*no));
            if (!no)
                return nomem(p);
            opt = no;
            opt_alloc = elems.alloc;
        }
        opt[elems.n - 1] = is_opt;
        any_opt |= is_opt;
        if (p->tok.kind != CEL_TOK_COMMA)
            break;
        if ((r = advance(p)) < 0)
            return r;
    }
    if ((r = expect(p, CEL_TOK_RBRACKET)) < 0)
        return r;
    struct cel_node *n = node_at(p, CEL_NODE_LIST, at);
    if (!n || !(n->u.list.elems = nodelist_finish(p, &elems)))
        return nomem(p);
    n->u.list.n = elems.n;
    if (any_opt) {
        n->u.list.optional = cel_ast_alloc(p->ast, elems.n * sizeof(bool));
        if (!n->u.list.optional)
            return nomem(p);
        memcpy(n->u.list.optional, opt, elems.n * sizeof(bool));
    }
    *ret = n;
    return 0;
}

/* One growable array of map entries or struct fields (same shape: key node or name, value). */
struct entries {
    struct cel_map_entry *items;
    uint32_t n, alloc;
};

static void entries_release(struct entries *e)
{
    free(e->items);
}

static int entries_push(struct parser *p, struct entries *e, struct cel_map_entry ent)
{
    if (e->n >= MAX_LIST_ITEMS)
        return fail_at(p, -E2BIG, p->tok.line, p->tok.col, "too many entries (more than %d)",
                       MAX_LIST_ITEMS);
    if (e->n == e->alloc) {
        uint32_t na = e->alloc ? e->alloc * 2 : 8;
        struct cel_map_entry *items = realloc(e->items, na * sizeof(*items));
        if (!items)
            return nomem(p);
        e->items = items;
        e->alloc = na;
    }
    e->items[e->n++] = ent;
    return 0;
}

/* mapInitializerList : optExpr ':' expr (',' optExpr ':' expr)* ','? ; inside '{' ... '}' */
static int parse_map(struct parser *p, const struct cel_token *at, struct cel_node **ret)
{
    _cleanup_(entries_release) struct entries ents = {0};
    int r;
    while (p->tok.kind != CEL_TOK_RBRACE) {
        struct cel_map_entry ent = {.optional = p->tok.kind == CEL_TOK_QUESTION};
        if (ent.optional && (r = advance(p)) < 0)
            return r;
        if ((r = parse_expr(p, &ent.key)) < 0 || (r = expect(p, CEL_TOK_COLON)) < 0 ||
            (r = parse_expr(p, &ent.value)) < 0 || (r = entries_push(p, &ents, ent)) < 0)
            return r;
        if (p->tok.kind != CEL_TOK_COMMA)
            break;
        if ((r = advance(p)) < 0)
            return r;
    }
    if ((r = expect(p, CEL_TOK_RBRACE)) < 0)
        return r;
    struct cel_node *n = node_at(p, CEL_NODE_MAP, at);
    if (!n)
        return nomem(p);
    n->u.map.entries = cel_ast_alloc(p->ast, (ents.n ? ents.n : 1) * sizeof(*ents.items));
    if (!n->u.map.entries)
        return nomem(p);
    if (ents.n)
        memcpy(n->u.map.entries, ents.items, ents.n * sizeof(*ents.items));
    n->u.map.n = ents.n;
    *ret = n;
    return 0;
}

/* fieldInitializerList : optField ':' expr (',' optField ':' expr)* ','? ;
 * optField : '?'? IDENTIFIER ; inside Name '{' ... '}'. The field name rides in the key slot of a
 * map entry as an identifier node while parsing. */
static int parse_struct_fields(struct parser *p, struct entries *ents)
{
    int r;
    while (p->tok.kind != CEL_TOK_RBRACE) {
        struct cel_map_entry ent = {.optional = p->tok.kind == CEL_TOK_QUESTION};
        if (ent.optional && (r = advance(p)) < 0)
            return r;
        if (p->tok.kind != CEL_TOK_IDENT)
            return unexpected(p, "a field name");
        struct cel_token name = p->tok;
        name.reserved = false;
        if ((r = ident_node(p, &name, false, &ent.key)) < 0 || (r = advance(p)) < 0 ||
            (r = expect(p, CEL_TOK_COLON)) < 0 || (r = parse_expr(p, &ent.value)) < 0 ||
            (r = entries_push(p, ents, ent)) < 0)
            return r;
        if (p->tok.kind != CEL_TOK_COMMA)
            break;
        if ((r = advance(p)) < 0)
            return r;
    }
    return expect(p, CEL_TOK_RBRACE);
}

/* Writes the dotted name of an ident/select chain into buf; false when it is not one. */
static bool qualified_name(const struct cel_node *n, char *buf, size_t size, size_t *len,
                           bool *leading_dot, unsigned depth)
{
    if (depth > CEL_PARSE_MAX_DEPTH)
        return false;
    if (n->kind == CEL_NODE_IDENT) {
        *leading_dot = n->u.ident.leading_dot;
        if (n->u.ident.len >= size)
            return false;
        memcpy(buf, n->u.ident.name, n->u.ident.len);
        *len = n->u.ident.len;
        return true;
    }
    if (n->kind != CEL_NODE_SELECT || n->u.select.optional || n->u.select.test_only)
        return false;
    if (!qualified_name(n->u.select.operand, buf, size, len, leading_dot, depth + 1))
        return false;
    if (*len + 1 + n->u.select.len >= size)
        return false;
    buf[(*len)++] = '.';
    memcpy(buf + *len, n->u.select.field, n->u.select.len);
    *len += n->u.select.len;
    return true;
}

/* Name '{' fieldInitializerList? '}' : the message construction form (`{` already current). */
static int parse_struct(struct parser *p, struct cel_node *name, struct cel_node **ret)
{
    char buf[512];
    size_t len = 0;
    bool leading_dot = false;
    _cleanup_(entries_release) struct entries ents = {0};
    int r;
    if (!qualified_name(name, buf, sizeof(buf), &len, &leading_dot, 0))
        return unexpected(p, "an operator");
    if ((r = advance(p)) < 0 || (r = parse_struct_fields(p, &ents)) < 0)
        return r;
    struct cel_node *n = cel_ast_node(p->ast, CEL_NODE_STRUCT, name->offset, name->line, name->col);
    if (!n || !(n->u.strct.type_name = cel_ast_strdup(p->ast, buf, len)))
        return nomem(p);
    n->u.strct.type_len = len;
    n->u.strct.leading_dot = leading_dot;
    n->u.strct.fields = cel_ast_alloc(p->ast, (ents.n ? ents.n : 1) * sizeof(*n->u.strct.fields));
    if (!n->u.strct.fields)
        return nomem(p);
    for (uint32_t i = 0; i < ents.n; i++) {
        struct cel_struct_field *f = &n->u.strct.fields[i];
        f->name = ents.items[i].key->u.ident.name;
        f->len = ents.items[i].key->u.ident.len;
        f->value = ents.items[i].value;
        f->optional = ents.items[i].optional;
    }
    n->u.strct.n = ents.n;
    *ret = n;
    return 0;
}

/* primary : '.'? IDENTIFIER ('(' exprList? ')')? | '(' expr ')' | '[' listInit? ']'
 *         | '{' mapInitializerList? '}' | literal
 * (Name '{' ... '}' is recognised by parse_member once the name is complete) */
static int parse_primary(struct parser *p, struct cel_node **ret, bool *ret_name)
{
    struct cel_token at = p->tok;
    bool leading_dot = false;
    int r;
    *ret_name = false;
    switch (p->tok.kind) {
    case CEL_TOK_LPAREN:
        if ((r = advance(p)) < 0 || (r = parse_expr(p, ret)) < 0)
            return r;
        return expect(p, CEL_TOK_RPAREN);
    case CEL_TOK_LBRACKET:
        if ((r = advance(p)) < 0)
            return r;
        return parse_list(p, &at, ret);
    case CEL_TOK_LBRACE:
        if ((r = advance(p)) < 0)
            return r;
        return parse_map(p, &at, ret);
    case CEL_TOK_INT:
    case CEL_TOK_UINT:
    case CEL_TOK_DOUBLE:
    case CEL_TOK_STRING:
    case CEL_TOK_BYTES:
    case CEL_TOK_TRUE:
    case CEL_TOK_FALSE:
    case CEL_TOK_NULL:
        return parse_literal(p, false, &at, ret);
    case CEL_TOK_DOT:
        leading_dot = true;
        if ((r = advance(p)) < 0)
            return r;
        if (p->tok.kind != CEL_TOK_IDENT)
            return unexpected(p, "an identifier");
        break;
    case CEL_TOK_IDENT:
        break;
    default:
        return unexpected(p, "an expression");
    }
    struct cel_token name = p->tok;
    if ((r = advance(p)) < 0)
        return r;
    if (p->tok.kind == CEL_TOK_LPAREN) {
        _cleanup_(nodelist_release) struct nodelist args = {0};
        if (name.reserved)
            return fail_at(p, -EINVAL, name.line, name.col,
                           "Syntax error: reserved identifier '%.*s'", (int)name.len, name.start);
        if ((r = advance(p)) < 0 || (r = parse_expr_list(p, &args, CEL_TOK_RPAREN)) < 0)
            return r;
        return make_call(p, &name, leading_dot, NULL, &args, ret);
    }
    *ret_name = true;
    return ident_node(p, &name, leading_dot, ret);
}

/* '.' '?'? IDENTIFIER ('(' exprList? ')')? after a member (the '.' is current). */
static int parse_dot(struct parser *p, struct cel_node *operand, bool *is_name,
                     struct cel_node **ret)
{
    struct cel_token dot = p->tok;
    bool optional = false;
    int r;
    if ((r = advance(p)) < 0)
        return r;
    if (p->tok.kind == CEL_TOK_QUESTION) {
        optional = true;
        if ((r = advance(p)) < 0)
            return r;
    }
    if (p->tok.kind != CEL_TOK_IDENT)
        return unexpected(p, "an identifier");
    struct cel_token name = p->tok;
    if ((r = advance(p)) < 0)
        return r;
    if (p->tok.kind == CEL_TOK_LPAREN) {
        _cleanup_(nodelist_release) struct nodelist args = {0};
        if (optional)
            return fail_at(p, -EINVAL, dot.line, dot.col, "Syntax error: unsupported syntax '.?'");
        if ((r = advance(p)) < 0 || (r = parse_expr_list(p, &args, CEL_TOK_RPAREN)) < 0)
            return r;
        *is_name = false;
        return make_call(p, &name, false, operand, &args, ret);
    }
    struct cel_node *n = node_at(p, CEL_NODE_SELECT, &dot);
    if (!n || !(n->u.select.field = cel_ast_strdup(p->ast, name.start, name.len)))
        return nomem(p);
    n->u.select.operand = operand;
    n->u.select.len = name.len;
    n->u.select.optional = optional;
    *is_name = *is_name && !optional;
    *ret = n;
    return 0;
}

/* '[' '?'? expr ']' after a member (the '[' is current). */
static int parse_index(struct parser *p, struct cel_node *operand, struct cel_node **ret)
{
    struct cel_token at = p->tok;
    struct cel_node *idx = NULL;
    bool optional = false;
    int r;
    if ((r = advance(p)) < 0)
        return r;
    if (p->tok.kind == CEL_TOK_QUESTION) {
        optional = true;
        if ((r = advance(p)) < 0)
            return r;
    }
    if ((r = parse_expr(p, &idx)) < 0 || (r = expect(p, CEL_TOK_RBRACKET)) < 0)
        return r;
    struct cel_node *n = node_at(p, CEL_NODE_INDEX, &at);
    if (!n)
        return nomem(p);
    n->u.index.operand = operand;
    n->u.index.index = idx;
    n->u.index.optional = optional;
    *ret = n;
    return 0;
}

/* member : primary ( '.' '?'? IDENTIFIER ('(' exprList? ')')? | '[' '?'? expr ']' )*
 *        | qualifiedName '{' fieldInitializerList? '}' */
static int parse_member(struct parser *p, struct cel_node **ret)
{
    struct cel_node *n = NULL;
    bool is_name = false;
    int r = parse_primary(p, &n, &is_name);
    if (r < 0)
        return r;
    for (;;) {
        if (p->tok.kind == CEL_TOK_DOT)
            r = parse_dot(p, n, &is_name, &n);
        else if (p->tok.kind == CEL_TOK_LBRACKET) {
            r = parse_index(p, n, &n);
            is_name = false;
        } else if (p->tok.kind == CEL_TOK_LBRACE && is_name) {
            r = parse_struct(p, n, &n);
            is_name = false;
        } else
            break;
        if (r < 0)
            return r;
    }
    *ret = n;
    return 0;
}

/* unary : member | '!'+ member | '-'+ member ; a '-' directly before a number literal is the
 * literal's sign, so -9223372036854775808 is an int. */
static int parse_unary(struct parser *p, struct cel_node **ret)
{
    struct cel_token ops[64];
    unsigned nops = 0;
    struct cel_token first = p->tok;
    enum cel_tok kind = p->tok.kind;
    int r;
    if (kind != CEL_TOK_BANG && kind != CEL_TOK_MINUS)
        return parse_member(p, ret);
    /* Repeated operators are counted, not recursed on; the token array only keeps positions, so
     * past its size later operators reuse the last position. */
    uint32_t count = 0;
    while (p->tok.kind == kind) {
        if (count >= CEL_AST_MAX_DEPTH)
            return fail_at(p, -E2BIG, p->tok.line, p->tok.col,
                           "expression nested too deeply (more than %d levels)", CEL_AST_MAX_DEPTH);
        if (nops < ARRAY_SIZE(ops))
            ops[nops++] = p->tok;
        count++;
        if ((r = advance(p)) < 0)
            return r;
    }
    struct cel_node *n = NULL;
    bool number = p->tok.kind == CEL_TOK_INT || p->tok.kind == CEL_TOK_DOUBLE;
    if (kind == CEL_TOK_MINUS && number) {
        struct cel_token sign = nops ? ops[nops - 1] : first;
        count--;
        if ((r = parse_literal(p, true, &sign, &n)) < 0)
            return r;
        /* A folded literal still takes member suffixes: -1.abs() is (-1).abs(). */
        bool is_name = false;
        for (;;) {
            if (p->tok.kind == CEL_TOK_DOT)
                r = parse_dot(p, n, &is_name, &n);
            else if (p->tok.kind == CEL_TOK_LBRACKET)
                r = parse_index(p, n, &n);
            else
                break;
            if (r < 0)
                return r;
        }
    } else if ((r = parse_member(p, &n)) < 0) {
        return r;
    }
    for (uint32_t i = count; i > 0; i--) {
        const struct cel_token *at = i <= nops ? &ops[i - 1] : &ops[nops - 1];
        n = op_node(p, kind == CEL_TOK_BANG ? CEL_OP_NOT : CEL_OP_NEG, at, n, NULL, NULL);
        if (!n)
            return nomem(p);
    }
    *ret = n;
    return 0;
}

/* The binary operator a token spells at one precedence level, or CEL_OP_NONE. */
static enum cel_op binop(enum cel_tok t, int level)
{
    switch (level) {
    case 0: /* relation */
        switch (t) {
        case CEL_TOK_LT:
            return CEL_OP_LT;
        case CEL_TOK_LE:
            return CEL_OP_LE;
        case CEL_TOK_GT:
            return CEL_OP_GT;
        case CEL_TOK_GE:
            return CEL_OP_GE;
        case CEL_TOK_EQ:
            return CEL_OP_EQ;
        case CEL_TOK_NE:
            return CEL_OP_NE;
        case CEL_TOK_IN:
            return CEL_OP_IN;
        default:
            return CEL_OP_NONE;
        }
    case 1: /* addition */
        return t == CEL_TOK_PLUS ? CEL_OP_ADD : t == CEL_TOK_MINUS ? CEL_OP_SUB : CEL_OP_NONE;
    default: /* multiplication */
        return t == CEL_TOK_STAR      ? CEL_OP_MUL
               : t == CEL_TOK_SLASH   ? CEL_OP_DIV
               : t == CEL_TOK_PERCENT ? CEL_OP_MOD
                                      : CEL_OP_NONE;
    }
}

/* relation : calc (relop calc)* ; calc : mul (('+'|'-') mul)* ; mul : unary (('*'|'/'|'%') unary)*
 * — precedence climbing over the three left-associative levels. */
static int parse_binary(struct parser *p, int level, struct cel_node **ret)
{
    struct cel_node *lhs = NULL;
    int r = level == 3 ? parse_unary(p, &lhs) : parse_binary(p, level + 1, &lhs);
    if (r < 0 || level == 3)
        goto out;
    for (;;) {
        enum cel_op op = binop(p->tok.kind, level);
        struct cel_token at = p->tok;
        struct cel_node *rhs = NULL;
        if (op == CEL_OP_NONE)
            break;
        if ((r = advance(p)) < 0 || (r = parse_binary(p, level + 1, &rhs)) < 0)
            return r;
        lhs = op_node(p, op, &at, lhs, rhs, NULL);
        if (!lhs)
            return nomem(p);
    }
out:
    *ret = lhs;
    return r < 0 ? r : 0;
}

/* Joins terms[lo..hi) with op as a balanced tree (&& and || are associative, and their error
 * absorption is commutative, so the shape does not change the result). */
static struct cel_node *balance(struct parser *p, enum cel_op op, struct cel_node **terms,
                                struct cel_token *ops, uint32_t lo, uint32_t hi)
{
    if (hi - lo == 1)
        return terms[lo];
    uint32_t mid = lo + (hi - lo) / 2;
    struct cel_node *l = balance(p, op, terms, ops, lo, mid);
    struct cel_node *r = l ? balance(p, op, terms, ops, mid, hi) : NULL;
    return r ? op_node(p, op, &ops[mid - 1], l, r, NULL) : NULL;
}

/* conditionalOr : conditionalAnd ('||' conditionalAnd)* ;
 * conditionalAnd : relation ('&&' relation)* */
static int parse_logical(struct parser *p, bool is_or, struct cel_node **ret)
{
    _cleanup_(nodelist_release) struct nodelist terms = {0};
    _cleanup_free_ struct cel_token *ops = NULL;
    enum cel_tok tok = is_or ? CEL_TOK_OR : CEL_TOK_AND;
    uint32_t ops_alloc = 0;
    int r;
    for (;;) {
        struct cel_node *t = NULL;
        r = is_or ? parse_logical(p, false, &t) : parse_binary(p, 0, &t);
        if (r < 0 || (r = nodelist_push(p, &terms, t)) < 0)
            return r;
        if (p->tok.kind != tok)
            break;
        if (ops_alloc < terms.alloc) {
            struct cel_token *no = realloc(ops, terms.alloc * sizeof(*no));
            if (!no)
                return nomem(p);
            ops = no;
            ops_alloc = terms.alloc;
        }
        ops[terms.n - 1] = p->tok;
        if ((r = advance(p)) < 0)
            return r;
    }
    *ret = balance(p, is_or ? CEL_OP_OR : CEL_OP_AND, terms.items, ops, 0, terms.n);
    return *ret ? 0 : nomem(p);
}

/* expr : conditionalOr ('?' conditionalOr ':' expr)? */
static int parse_expr(struct parser *p, struct cel_node **ret)
{
    struct cel_node *cond = NULL, *a = NULL, *b = NULL;
    int r;
    if (++p->depth > CEL_PARSE_MAX_DEPTH)
        return fail_at(p, -E2BIG, p->tok.line, p->tok.col,
                       "expression nested too deeply (more than %d levels)", CEL_PARSE_MAX_DEPTH);
    r = parse_logical(p, true, &cond);
    if (r < 0)
        return r;
    if (p->tok.kind == CEL_TOK_QUESTION) {
        struct cel_token at = p->tok;
        if ((r = advance(p)) < 0 || (r = parse_logical(p, true, &a)) < 0 ||
            (r = expect(p, CEL_TOK_COLON)) < 0 || (r = parse_expr(p, &b)) < 0)
            return r;
        cond = op_node(p, CEL_OP_COND, &at, cond, a, b);
        if (!cond)
            return nomem(p);
    }
    p->depth--;
    *ret = cond;
    return 0;
}

/* The children of a node, for the height walk. */
static uint32_t children(const struct cel_node *n, const struct cel_node **out, uint32_t max,
                         uint32_t from)
{
    uint32_t k = 0;
#define CHILD(c)                                                                                   \
    do {                                                                                           \
        if (idx++ >= from && k < max)                                                              \
            out[k++] = (c);                                                                        \
    } while (0)
    uint32_t idx = 0;
    switch (n->kind) {
    case CEL_NODE_CONST:
    case CEL_NODE_IDENT:
        break;
    case CEL_NODE_SELECT:
        CHILD(n->u.select.operand);
        break;
    case CEL_NODE_INDEX:
        CHILD(n->u.index.operand);
        CHILD(n->u.index.index);
        break;
    case CEL_NODE_CALL:
        if (n->u.call.target)
            CHILD(n->u.call.target);
        for (uint32_t i = 0; i < n->u.call.nargs; i++)
            CHILD(n->u.call.args[i]);
        break;
    case CEL_NODE_LIST:
        for (uint32_t i = 0; i < n->u.list.n; i++)
            CHILD(n->u.list.elems[i]);
        break;
    case CEL_NODE_MAP:
        for (uint32_t i = 0; i < n->u.map.n; i++) {
            CHILD(n->u.map.entries[i].key);
            CHILD(n->u.map.entries[i].value);
        }
        break;
    case CEL_NODE_STRUCT:
        for (uint32_t i = 0; i < n->u.strct.n; i++)
            CHILD(n->u.strct.fields[i].value);
        break;
    case CEL_NODE_COMPREHENSION:
        CHILD(n->u.comp.iter_range);
        CHILD(n->u.comp.accu_init);
        CHILD(n->u.comp.loop_cond);
        CHILD(n->u.comp.loop_step);
        CHILD(n->u.comp.result);
        break;
    }
#undef CHILD
    return k;
}

/* The height of the tree at n, stopping (with an error) past CEL_AST_MAX_DEPTH: the recursion is
 * bounded by that limit, not by the input. */
static int tree_height(struct parser *p, const struct cel_node *n, uint32_t depth,
                       uint32_t *max_depth)
{
    const struct cel_node *kids[8];
    if (depth > CEL_AST_MAX_DEPTH)
        return fail_at(p, -E2BIG, n->line, n->col,
                       "expression nested too deeply (more than %d levels)", CEL_AST_MAX_DEPTH);
    if (depth > *max_depth)
        *max_depth = depth;
    for (uint32_t from = 0;; from += ARRAY_SIZE(kids)) {
        uint32_t k = children(n, kids, ARRAY_SIZE(kids), from);
        for (uint32_t i = 0; i < k; i++) {
            int r = tree_height(p, kids[i], depth + 1, max_depth);
            if (r < 0)
                return r;
        }
        if (k < ARRAY_SIZE(kids))
            return 0;
    }
}

int cel_parse(const char *expr, size_t len, struct cel_ast **ret, struct diag *d)
{
    _cleanup_(cel_ast_freep) struct cel_ast *ast = NULL;
    struct parser p = {.d = d};
    int r;
    if (len > CEL_EXPR_MAX_LEN) {
        if (d) {
            diag_fail(d, -E2BIG, "1:1: expression too long (%zu bytes, at most %zu)", len,
                      CEL_EXPR_MAX_LEN);
            d->line = d->col = 1;
        }
        return -E2BIG;
    }
    ast = cel_ast_new();
    if (!ast)
        return diag_fail(d, -ENOMEM, "out of memory");
    p.ast = ast;
    cel_lex_init(&p.lx, expr, len, ast);
    if ((r = advance(&p)) < 0 || (r = parse_expr(&p, &ast->root)) < 0)
        return r;
    if (p.tok.kind != CEL_TOK_EOF)
        return unexpected(&p, "<EOF>");
    if ((r = tree_height(&p, ast->root, 1, &ast->max_depth)) < 0)
        return r;
    *ret = TAKE_PTR(ast);
    return 0;
}
