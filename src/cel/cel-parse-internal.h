/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the CEL front end (cel-lex.c, cel-parse.c, cel-macro.c) shares inside itself: tokens, the
 * lexer state, and the macro expander's entry point. Not for the evaluator: it sees only cel-ast.h.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cel-ast.h"

enum cel_tok {
    CEL_TOK_EOF,
    CEL_TOK_INT,    /* tok.v.u holds the magnitude (up to 2^63, so a leading '-' can fold it) */
    CEL_TOK_UINT,   /* tok.v.u */
    CEL_TOK_DOUBLE, /* tok.v.d */
    CEL_TOK_STRING, /* tok.v.s: decoded in the tree's arena */
    CEL_TOK_BYTES,  /* tok.v.s */
    CEL_TOK_IDENT,  /* tok.start/len; tok.reserved for the reserved words */
    CEL_TOK_TRUE,
    CEL_TOK_FALSE,
    CEL_TOK_NULL,
    CEL_TOK_IN,
    CEL_TOK_LPAREN,
    CEL_TOK_RPAREN,
    CEL_TOK_LBRACKET,
    CEL_TOK_RBRACKET,
    CEL_TOK_LBRACE,
    CEL_TOK_RBRACE,
    CEL_TOK_DOT,
    CEL_TOK_COMMA,
    CEL_TOK_COLON,
    CEL_TOK_QUESTION,
    CEL_TOK_PLUS,
    CEL_TOK_MINUS,
    CEL_TOK_STAR,
    CEL_TOK_SLASH,
    CEL_TOK_PERCENT,
    CEL_TOK_BANG,
    CEL_TOK_EQ, /* == */
    CEL_TOK_NE,
    CEL_TOK_LT,
    CEL_TOK_LE,
    CEL_TOK_GT,
    CEL_TOK_GE,
    CEL_TOK_AND,
    CEL_TOK_OR,
};

struct cel_token {
    enum cel_tok kind;
    uint32_t offset;
    uint32_t line;
    uint32_t col;
    const char *start; /* the token's source text */
    size_t len;
    bool reserved; /* CEL_TOK_IDENT spelled as a reserved word (allowed only as a field name) */
    union {
        uint64_t u;
        double d;
        struct {
            const char *ptr;
            size_t len;
        } s;
    } v;
};

struct cel_lexer {
    const char *src;
    size_t len;
    size_t pos;
    uint32_t line;
    size_t line_start;   /* offset of the current line's first byte */
    struct cel_ast *ast; /* string payloads are decoded into its arena */
};

void cel_lex_init(struct cel_lexer *lx, const char *src, size_t len, struct cel_ast *ast);
/* Reads the next token into *tok. 0, or -EINVAL / -ENOMEM with d set to "line:col: message". */
_wur_ int cel_lex_next(struct cel_lexer *lx, struct cel_token *tok, struct diag *d);
/* A short description of a token for error messages ("')'", "identifier 'x'", "end of input"). */
const char *cel_tok_name(enum cel_tok kind);

/* Whether the name is one of CEL's reserved words (as, break, const, ...). */
bool cel_is_reserved(const char *s, size_t len);

/* The macro expander, called by the parser for every call it builds. When the call (name, target,
 * args as parsed) is a macro of the DRA environment, *ret is the expansion; otherwise *ret is NULL
 * and the parser builds a plain call. Errors ("1:5: ...") for a macro with malformed arguments,
 * e.g. `x.all(1, true)` or `has(x)`. */
struct cel_macro_call {
    const char *name;
    size_t name_len;
    struct cel_node *target; /* NULL for global calls */
    struct cel_node **args;
    uint32_t nargs;
    uint32_t offset, line, col; /* the position of the call */
};
_wur_ int cel_macro_expand(struct cel_ast *ast, const struct cel_macro_call *call,
                           struct cel_node **ret, struct diag *d);
