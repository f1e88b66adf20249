/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CEL abstract syntax tree: the contract between the front end (lexer, parser, macro expander,
 * checker) and the evaluator. Macros are already expanded into comprehension nodes, operators are
 * calls carrying an operator enum so the evaluator dispatches with one switch, and literals are
 * decoded (escapes applied, numbers converted) but kept as raw C data so this header depends on
 * nothing of the value layer.
 *
 * Ownership: every node, name, string payload and child array of one tree lives in the arena of its
 * struct cel_ast (or is a static string the front end chose, like "@result"); cel_ast_free()
 * releases it all at once. Nothing in a tree points outside it. A tree is immutable once
 * cel_parse() returned: the checker only reads it, and what compilation resolves per node lives
 * in a side table indexed by node id (cel-internal.h), so evaluations may share the tree across
 * threads.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base-diag.h"
#include "base-macro.h"

/* Limits on input the parser accepts: longer expressions and deeper nesting are compile errors
 * (the depth counts every recursive grammar rule entered, so it also bounds the evaluator's and
 * checker's recursion on the tree, which is never deeper than the parse was). */
#define CEL_EXPR_MAX_LEN ((size_t)100 * 1024)
#define CEL_PARSE_MAX_DEPTH 250
/* The tallest tree cel_parse() returns (left-associative chains such as a + b + c grow the tree
 * without nesting the grammar, so this is checked on the finished tree). Walkers of a parsed tree
 * may recurse this deep. */
#define CEL_AST_MAX_DEPTH 500
/* The most nodes one tree may hold (a cap on the arena, far above what CEL_EXPR_MAX_LEN allows
 * after macro expansion). */
#define CEL_AST_MAX_NODES ((uint32_t)1 << 20)

enum cel_node_kind {
    CEL_NODE_CONST,         /* literal: u.lit */
    CEL_NODE_IDENT,         /* variable, type name or comprehension variable: u.ident */
    CEL_NODE_SELECT,        /* operand.field, operand.?field, has(operand.field): u.select */
    CEL_NODE_INDEX,         /* operand[index], operand[?index]: u.index */
    CEL_NODE_CALL,          /* operator or function call, global or receiver style: u.call */
    CEL_NODE_LIST,          /* [a, ?b]: u.list */
    CEL_NODE_MAP,           /* {k: v, ?k2: v2}: u.map */
    CEL_NODE_STRUCT,        /* Msg{field: v}: u.strct (parsed; the DRA checker rejects it) */
    CEL_NODE_COMPREHENSION, /* expanded macro: u.comp */
};

enum cel_const_kind {
    CEL_CONST_NULL,
    CEL_CONST_BOOL,
    CEL_CONST_INT,
    CEL_CONST_UINT,
    CEL_CONST_DOUBLE,
    CEL_CONST_STRING, /* valid UTF-8 (the parser rejects anything else) */
    CEL_CONST_BYTES,
};

struct cel_const {
    enum cel_const_kind kind;
    union {
        bool b;
        int64_t i;
        uint64_t u;
        double d;
        struct {
            const char *ptr; /* decoded; NUL-terminated for convenience, may contain NULs */
            size_t len;
        } s; /* CEL_CONST_STRING and CEL_CONST_BYTES */
    } v;
};

/* Operators and the internal functions macros expand to. CEL_OP_NONE means a named function call
 * (cel_call.name). The CEL spelling of each is given by cel_op_name(). */
enum cel_op {
    CEL_OP_NONE,
    CEL_OP_COND, /* _?_:_  args: cond, then, else (lazy) */
    CEL_OP_AND,  /* _&&_   args: 2 (lazy; errors absorbed commutatively) */
    CEL_OP_OR,   /* _||_   args: 2 (lazy; errors absorbed commutatively) */
    CEL_OP_NOT,  /* !_     args: 1 */
    CEL_OP_NEG,  /* -_     args: 1 */
    CEL_OP_EQ,   /* _==_ */
    CEL_OP_NE,   /* _!=_ */
    CEL_OP_LT,   /* _<_ */
    CEL_OP_LE,   /* _<=_ */
    CEL_OP_GT,   /* _>_ */
    CEL_OP_GE,   /* _>=_ */
    CEL_OP_IN,   /* @in    args: element, container */
    CEL_OP_ADD,  /* _+_ */
    CEL_OP_SUB,  /* _-_ */
    CEL_OP_MUL,  /* _*_ */
    CEL_OP_DIV,  /* _/_ */
    CEL_OP_MOD,  /* _%_ */
    /* Only in macro expansions: */
    CEL_OP_NOT_STRICTLY_FALSE, /* @not_strictly_false(x): false only for the bool false; an error
                                * or any other value is true (loop conditions of all/exists) */
    CEL_OP_LIST_APPEND, /* @list_append(accu, elem): accu + [elem]; the evaluator may append in
                         * place because the accumulator is private to its comprehension */
    CEL_OP_MAP_INSERT,  /* @map_insert(accu, key, value): accu with key -> value; error if the key
                         * is already present. With 2 args, @map_insert(accu, entry_map): inserts
                         * every entry of the (one-entry) map, same duplicate rule. In place too. */
    CEL_OP__COUNT,
};

/* The macro a comprehension was expanded from: lets the evaluator take shortcuts (and the checker
 * word its errors); a generic evaluation of the comprehension fields is always correct. */
enum cel_macro {
    CEL_MACRO_ALL,                 /* x.all(v, p), x.all(k, v, p) */
    CEL_MACRO_EXISTS,              /* x.exists(v, p), x.exists(k, v, p) */
    CEL_MACRO_EXISTS_ONE,          /* x.exists_one(v, p), x.existsOne(v, p), 2-variable forms */
    CEL_MACRO_MAP,                 /* x.map(v, t), x.map(v, p, t) */
    CEL_MACRO_FILTER,              /* x.filter(v, p) */
    CEL_MACRO_TRANSFORM_LIST,      /* x.transformList(i, v, t), x.transformList(i, v, p, t) */
    CEL_MACRO_TRANSFORM_MAP,       /* x.transformMap(k, v, t), x.transformMap(k, v, p, t) */
    CEL_MACRO_TRANSFORM_MAP_ENTRY, /* x.transformMapEntry(k, v, e), (k, v, p, e) */
    CEL_MACRO_BIND,                /* cel.bind(name, init, result) */
};

struct cel_node;

struct cel_ident {
    const char *name; /* NUL-terminated; a qualified name a.b.c is a select chain, which the
                       * checker and resolver may read as one dotted name */
    size_t len;
    bool leading_dot; /* `.name`: resolve from the root scope only */
};

struct cel_select {
    struct cel_node *operand;
    const char *field; /* NUL-terminated */
    size_t len;
    bool test_only; /* has(operand.field): yields bool presence instead of the value */
    bool optional;  /* operand.?field: yields an optional */
};

struct cel_index {
    struct cel_node *operand;
    struct cel_node *index;
    bool optional; /* operand[?index]: yields an optional */
};

struct cel_call {
    enum cel_op op;   /* CEL_OP_NONE: named function */
    const char *name; /* the function name, also set for operators (cel_op_name) */
    size_t name_len;
    struct cel_node *target; /* receiver of x.f(args), NULL for global calls and operators */
    struct cel_node **args;
    uint32_t nargs;
};

struct cel_list {
    struct cel_node **elems;
    uint32_t n;
    /* NULL when no element is optional; else optional[i] marks `?elem` (an optional value whose
     * absence drops the element). */
    bool *optional;
};

struct cel_map_entry {
    struct cel_node *key;
    struct cel_node *value;
    bool optional; /* `?key: value`: value is an optional, absent drops the entry */
};

struct cel_map {
    struct cel_map_entry *entries;
    uint32_t n;
};

struct cel_struct_field {
    const char *name; /* NUL-terminated */
    size_t len;
    struct cel_node *value;
    bool optional; /* `?field: value` */
};

struct cel_struct {
    const char *type_name; /* as written, dots included, NUL-terminated */
    size_t type_len;
    bool leading_dot;
    struct cel_struct_field *fields;
    uint32_t n;
};

/*
 * A comprehension, as cel-spec expands macros:
 *
 *     accu = accu_init
 *     for (iter_var[, iter_var2]) in iter_range:   -- lists: (elem) or (index, elem);
 *         if !loop_cond: break                     -- maps: (key) or (key, value), in map order
 *         accu = loop_step
 *     value = result
 *
 * loop_cond is evaluated before each iteration (with accu in scope). Variables are scoped to the
 * loop (iter vars in cond/step, accu in cond/step/result) and shadow outer names. Every variable
 * has a slot in the evaluator's frame of cel_ast.nlocals values; iter_slot2 is meaningful only when
 * iter_var2 is not NULL.
 */
struct cel_comprehension {
    enum cel_macro macro;
    const char *iter_var;  /* NUL-terminated; for cel.bind an unused dummy ("#unused") */
    const char *iter_var2; /* NULL for 1-variable forms */
    const char *accu_var;  /* "@result" for macros; the bound name for cel.bind */
    uint32_t iter_slot, iter_slot2, accu_slot;
    struct cel_node *iter_range;
    struct cel_node *accu_init;
    struct cel_node *loop_cond;
    struct cel_node *loop_step;
    struct cel_node *result;
};

struct cel_node {
    enum cel_node_kind kind;
    uint32_t id;     /* 1.. in creation order, unique in the tree */
    uint32_t offset; /* byte offset of the node's first token (operators: the operator token) */
    uint32_t line;   /* 1-based */
    uint32_t col;    /* 1-based, in bytes */
    union {
        struct cel_const lit;
        struct cel_ident ident;
        struct cel_select select;
        struct cel_index index;
        struct cel_call call;
        struct cel_list list;
        struct cel_map map;
        struct cel_struct strct;
        struct cel_comprehension comp;
    } u;
};

struct cel_arena;

struct cel_ast {
    struct cel_node *root;
    uint32_t nnodes;    /* ids run 1..nnodes */
    uint32_t nlocals;   /* comprehension variable slots the evaluator frame needs */
    uint32_t max_depth; /* deepest nesting of the tree (a bound for evaluator recursion) */
    struct cel_arena *arena;
};

/* Parses and macro-expands expr (len bytes, need not be NUL-terminated). On success *ret owns a
 * new tree (free it with cel_ast_free). On failure returns -EINVAL (syntax), -E2BIG (too long or
 * nested too deep) or -ENOMEM, and d holds "line:col: message", e.g.
 * "1:5: Syntax error: mismatched input ')'", with d->line/col set. */
_wur_ int cel_parse(const char *expr, size_t len, struct cel_ast **ret, struct diag *d);

/* Frees the tree and everything in its arena. NULL is allowed; returns NULL. */
struct cel_ast *cel_ast_free(struct cel_ast *ast);
DEFINE_POINTER_CLEANUP(struct cel_ast, cel_ast_free)

/* The CEL spelling of an operator: "_+_", "_&&_", "@in", "!_", "-_", "_?_:_", ... */
const char *cel_op_name(enum cel_op op);

/* Node constructors for the front end and tests: allocate in the tree's arena, zeroed except for
 * kind, id and position; NULL on allocation failure or past CEL_AST_MAX_NODES. */
struct cel_ast *cel_ast_new(void);
struct cel_node *cel_ast_node(struct cel_ast *ast, enum cel_node_kind kind, uint32_t offset,
                              uint32_t line, uint32_t col);
/* Arena allocation (zeroed, 16-byte aligned) and string copies (NUL-terminated) in the tree. */
void *cel_ast_alloc(struct cel_ast *ast, size_t size);
char *cel_ast_strdup(struct cel_ast *ast, const char *s, size_t len);
/* Writes the tree in a stable, fully parenthesised S-expression form (for tests and debugging),
 * e.g. `(_+_ 1 (. x f))`; returns the bytes written excluding the NUL, or -ENOBUFS if it was cut.
 */
_wur_ int cel_ast_dump(const struct cel_node *n, char *buf, size_t size);
