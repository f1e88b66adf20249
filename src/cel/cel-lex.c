/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CEL lexer: turns the expression text into tokens on demand for the parser. Numbers are
 * converted here (ints keep their magnitude so the parser can fold a leading minus into
 * -9223372036854775808), and string and bytes literals are decoded here into the tree's arena with
 * every escape of the CEL language definition: quotes ' " ''' """, raw r/R prefixes, b/B bytes,
 * \a \b \f \n \r \t \v \\ \? \" \' \`, octal \NNN, \xHH \XHH, \uHHHH, \UHHHHHHHH. In strings an
 * octal or hex escape is a code point (encoded as UTF-8); in bytes it is one byte, and \u \U are
 * not allowed. Strings must be valid UTF-8.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cel-parse-internal.h"

void cel_lex_init(struct cel_lexer *lx, const char *src, size_t len, struct cel_ast *ast)
{
    *lx = (struct cel_lexer){.src = src, .len = len, .line = 1, .ast = ast};
}

static uint32_t col_of(const struct cel_lexer *lx, size_t pos)
{
    return (uint32_t)(pos - lx->line_start + 1);
}

static int lex_fail(const struct cel_lexer *lx, size_t pos, struct diag *d, const char *msg)
{
    /* pos may be on a later line than lx->line only inside multi-line strings, where lx->line is
     * kept current; so lx->line and line_start describe pos. */
    uint32_t col = col_of(lx, pos);
    if (d) {
        diag_fail(d, -EINVAL, "%u:%u: Syntax error: %s", lx->line, col, msg);
        d->line = (int)lx->line;
        d->col = (int)col;
    }
    return -EINVAL;
}

static const char *const reserved_words[] = {
    "as",  "break", "const",   "continue",  "else",   "for", "function", "if",    "import",
    "let", "loop",  "package", "namespace", "return", "var", "void",     "while",
};

bool cel_is_reserved(const char *s, size_t len)
{
    for (size_t i = 0; i < ARRAY_SIZE(reserved_words); i++)
        if (strlen(reserved_words[i]) == len && memcmp(reserved_words[i], s, len) == 0)
            return true;
    return false;
}

static bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static bool is_ident_start(int c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_ident_char(int c)
{
    return is_ident_start(c) || is_digit(c);
}

static int peek_at(const struct cel_lexer *lx, size_t pos)
{
    return pos < lx->len ? (unsigned char)lx->src[pos] : -1;
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when it is not one. Overlong forms,
 * surrogates and code points past U+10FFFF are invalid. */
static size_t utf8_len(const unsigned char *p, size_t avail)
{
    size_t n;
    if (p[0] < 0x80)
        return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        n = 2;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        n = 3;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        n = 4;
    else
        return 0;
    if (avail < n)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) ||
        (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))
        return 0;
    return n;
}

static size_t utf8_put(unsigned char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xc0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xe0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (unsigned char)(0xf0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* Skips whitespace and // comments, keeping the line count. */
static void skip_space(struct cel_lexer *lx)
{
    while (lx->pos < lx->len) {
        char c = lx->src[lx->pos];
        if (c == '\n') {
            lx->pos++;
            lx->line++;
            lx->line_start = lx->pos;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
            lx->pos++;
        } else if (c == '/' && peek_at(lx, lx->pos + 1) == '/') {
            while (lx->pos < lx->len && lx->src[lx->pos] != '\n')
                lx->pos++;
        } else {
            break;
        }
    }
}

/* What a string literal looks like: where its text starts and ends, and how to decode it. */
struct strlit {
    bool raw, bytes, triple;
    char quote;
};

/* Decodes one escape sequence starting at src[*pos] == '\\' into out (at most 4 bytes), advancing
 * *pos. Returns the bytes written, or -EINVAL with the message in *ret_msg. */
static int decode_escape(const char *src, size_t end, size_t *pos, bool bytes, unsigned char *out,
                         const char **ret_msg)
{
    size_t p = *pos + 1;
    if (p >= end) {
        *ret_msg = "invalid escape sequence at end of string";
        return -EINVAL;
    }
    char c = src[p++];
    static const char simple_from[] = "abfnrtv\\?\"'`";
    static const char simple_to[] = "\a\b\f\n\r\t\v\\?\"'`";
    const char *s = strchr(simple_from, c);
    if (s && c) {
        out[0] = (unsigned char)simple_to[s - simple_from];
        *pos = p;
        return 1;
    }
    uint32_t cp = 0;
    int digits = 0;
    if (c >= '0' && c <= '3') {
        cp = (uint32_t)(c - '0');
        for (int i = 0; i < 2; i++) {
            if (p >= end || src[p] < '0' || src[p] > '7') {
                *ret_msg = "invalid octal escape (want 3 octal digits)";
                return -EINVAL;
            }
            cp = cp * 8 + (uint32_t)(src[p++] - '0');
        }
    } else if (c == 'x' || c == 'X' || c == 'u' || c == 'U') {
        digits = c == 'u' ? 4 : c == 'U' ? 8 : 2;
        if (bytes && (c == 'u' || c == 'U')) {
            *ret_msg = "unicode escape not allowed in bytes literal";
            return -EINVAL;
        }
        for (int i = 0; i < digits; i++) {
            int h = p < end ? hex_digit_value((unsigned char)src[p]) : -1;
            if (h < 0) {
                *ret_msg = "invalid hex escape";
                return -EINVAL;
            }
            cp = cp * 16 + (uint32_t)h;
            p++;
        }
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
            *ret_msg = "invalid unicode code point in escape";
            return -EINVAL;
        }
    } else {
        *ret_msg = "invalid escape sequence";
        return -EINVAL;
    }
    *pos = p;
    if (bytes) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    return (int)utf8_put(out, cp);
}

/* Decodes the literal's body src[start..end) into the arena. The output never exceeds the input
 * length (every escape is at least as long as what it produces) plus the NUL. */
static int decode_body(struct cel_lexer *lx, const struct strlit *sl, size_t start, size_t end,
                       struct cel_token *tok, struct diag *d)
{
    unsigned char *out = cel_ast_alloc(lx->ast, end - start + 1);
    size_t n = 0;
    if (!out)
        return diag_fail(d, -ENOMEM, "out of memory");
    for (size_t p = start; p < end;) {
        unsigned char c = (unsigned char)lx->src[p];
        if (c == '\\' && !sl->raw) {
            const char *msg = NULL;
            int r = decode_escape(lx->src, end, &p, sl->bytes, out + n, &msg);
            if (r < 0)
                return lex_fail(lx, tok->offset, d, msg);
            n += (size_t)r;
            continue;
        }
        size_t k = c < 0x80 ? 1 : utf8_len((const unsigned char *)lx->src + p, end - p);
        if (k == 0)
            return lex_fail(lx, tok->offset, d, "invalid UTF-8 in string literal");
        memcpy(out + n, lx->src + p, k);
        n += k;
        p += k;
    }
    out[n] = '\0';
    tok->v.s.ptr = (const char *)out;
    tok->v.s.len = n;
    return 0;
}

/* Finds the end of a literal whose opening quote(s) end at lx->pos; moves lx->pos past the closing
 * quote(s) and returns the body's end offset, or -EINVAL. Newlines are allowed only in
 * triple-quoted literals; a backslash always takes the next character with it unless the literal is
 * raw. */
static int scan_body(struct cel_lexer *lx, const struct strlit *sl, size_t *ret_end,
                     struct cel_token *tok, struct diag *d)
{
    size_t p = lx->pos;
    for (;;) {
        if (p >= lx->len)
            return lex_fail(lx, tok->offset, d, "unterminated string literal");
        char c = lx->src[p];
        if (c == sl->quote) {
            if (!sl->triple) {
                *ret_end = p;
                lx->pos = p + 1;
                return 0;
            }
            if (peek_at(lx, p + 1) == sl->quote && peek_at(lx, p + 2) == sl->quote) {
                *ret_end = p;
                lx->pos = p + 3;
                return 0;
            }
        }
        if ((c == '\n' || c == '\r') && !sl->triple)
            return lex_fail(lx, tok->offset, d, "newline in string literal");
        if (c == '\\' && !sl->raw && p + 1 < lx->len)
            p++;
        p++;
    }
}

/* Counts the newlines of a triple-quoted literal so later positions stay right. */
static void count_lines(struct cel_lexer *lx, size_t from, size_t to)
{
    for (size_t p = from; p < to; p++)
        if (lx->src[p] == '\n') {
            lx->line++;
            lx->line_start = p + 1;
        }
}

static int lex_string(struct cel_lexer *lx, struct strlit sl, struct cel_token *tok, struct diag *d)
{
    size_t body_start, body_end = 0;
    sl.quote = lx->src[lx->pos];
    sl.triple = peek_at(lx, lx->pos + 1) == sl.quote && peek_at(lx, lx->pos + 2) == sl.quote;
    lx->pos += sl.triple ? 3 : 1;
    body_start = lx->pos;
    int r = scan_body(lx, &sl, &body_end, tok, d);
    if (r < 0)
        return r;
    tok->kind = sl.bytes ? CEL_TOK_BYTES : CEL_TOK_STRING;
    r = decode_body(lx, &sl, body_start, body_end, tok, d);
    count_lines(lx, body_start, body_end);
    return r;
}

/* Parses the digits of an int or uint literal (decimal, 0x hex, or with a leading 0 octal — the
 * base the reference implementation's number parser infers). */
static int parse_uint(const char *s, size_t n, uint64_t *ret)
{
    unsigned base = 10;
    uint64_t v = 0;
    size_t i = 0;
    if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        i = 2;
    } else if (n > 1 && s[0] == '0') {
        base = 8;
        i = 1;
    }
    for (; i < n; i++) {
        int dv = hex_digit_value((unsigned char)s[i]);
        if (dv < 0 || (unsigned)dv >= base)
            return -EINVAL;
        if (v > (UINT64_MAX - (unsigned)dv) / base)
            return -ERANGE;
        v = v * base + (unsigned)dv;
    }
    *ret = v;
    return 0;
}

static size_t scan_digits(const struct cel_lexer *lx, size_t p)
{
    while (is_digit(peek_at(lx, p)))
        p++;
    return p;
}

/* Exponent: ('e'|'E') ('+'|'-')? DIGIT+ ; returns p unchanged when there is none. */
static size_t scan_exponent(const struct cel_lexer *lx, size_t p)
{
    int c = peek_at(lx, p);
    if (c != 'e' && c != 'E')
        return p;
    size_t q = p + 1;
    if (peek_at(lx, q) == '+' || peek_at(lx, q) == '-')
        q++;
    if (!is_digit(peek_at(lx, q)))
        return p;
    return scan_digits(lx, q);
}

/* NUM_FLOAT: DIGIT+ '.' DIGIT+ EXPONENT? | DIGIT+ EXPONENT | '.' DIGIT+ EXPONENT?
 * NUM_INT: DIGIT+ | '0x' HEXDIGIT+ ;  NUM_UINT: NUM_INT ('u'|'U') */
static int lex_number(struct cel_lexer *lx, struct cel_token *tok, struct diag *d)
{
    size_t start = lx->pos, p = start;
    bool is_double = false;
    if (peek_at(lx, p) == '0' && (peek_at(lx, p + 1) == 'x' || peek_at(lx, p + 1) == 'X') &&
        hex_digit_value(peek_at(lx, p + 2)) >= 0) {
        p += 2;
        while (hex_digit_value(peek_at(lx, p)) >= 0)
            p++;
    } else {
        p = scan_digits(lx, p);
        if (peek_at(lx, p) == '.' && is_digit(peek_at(lx, p + 1))) {
            p = scan_digits(lx, p + 1);
            is_double = true;
        }
        size_t q = scan_exponent(lx, p);
        is_double = is_double || q != p;
        p = q;
    }
    size_t digits_end = p;
    if (is_double) {
        char buf[128];
        size_t n = digits_end - start;
        if (n >= sizeof(buf))
            return lex_fail(lx, start, d, "floating point literal too long");
        memcpy(buf, lx->src + start, n);
        buf[n] = '\0';
        tok->kind = CEL_TOK_DOUBLE;
        tok->v.d = strtod(buf, NULL);
    } else {
        bool u = peek_at(lx, p) == 'u' || peek_at(lx, p) == 'U';
        int r = parse_uint(lx->src + start, digits_end - start, &tok->v.u);
        if (r == -EINVAL)
            return lex_fail(lx, start, d, "invalid int literal");
        if (r < 0 || (!u && tok->v.u > (uint64_t)INT64_MAX + 1))
            return lex_fail(lx, start, d,
                            u ? "uint literal out of range" : "int literal out of range");
        tok->kind = u ? CEL_TOK_UINT : CEL_TOK_INT;
        if (u)
            p++;
    }
    if (is_ident_char(peek_at(lx, p)) || (peek_at(lx, p) == '.' && is_digit(peek_at(lx, p + 1))))
        return lex_fail(lx, start, d, "malformed number literal");
    lx->pos = p;
    return 0;
}

/* A string prefix: up to one r/R and one b/B in either order, directly followed by a quote. */
static bool string_prefix(const struct cel_lexer *lx, struct strlit *sl, size_t *ret_len)
{
    size_t p = lx->pos;
    *sl = (struct strlit){0};
    for (int i = 0; i < 2; i++) {
        int c = peek_at(lx, p);
        if ((c == 'r' || c == 'R') && !sl->raw)
            sl->raw = true;
        else if ((c == 'b' || c == 'B') && !sl->bytes)
            sl->bytes = true;
        else
            break;
        p++;
    }
    int q = peek_at(lx, p);
    *ret_len = p - lx->pos;
    return q == '\'' || q == '"';
}

static void lex_ident(struct cel_lexer *lx, struct cel_token *tok)
{
    size_t p = lx->pos;
    while (is_ident_char(peek_at(lx, p)))
        p++;
    const char *s = lx->src + lx->pos;
    size_t n = p - lx->pos;
    lx->pos = p;
    tok->kind = CEL_TOK_IDENT;
    if (n == 4 && memcmp(s, "true", 4) == 0)
        tok->kind = CEL_TOK_TRUE;
    else if (n == 5 && memcmp(s, "false", 5) == 0)
        tok->kind = CEL_TOK_FALSE;
    else if (n == 4 && memcmp(s, "null", 4) == 0)
        tok->kind = CEL_TOK_NULL;
    else if (n == 2 && memcmp(s, "in", 2) == 0)
        tok->kind = CEL_TOK_IN;
    else
        tok->reserved = cel_is_reserved(s, n);
}

/* Two-character operators first, then single characters. */
static int lex_punct(struct cel_lexer *lx, struct cel_token *tok, struct diag *d)
{
    static const struct {
        char s[3];
        enum cel_tok kind;
    } ops[] = {
        {"==", CEL_TOK_EQ},      {"!=", CEL_TOK_NE},    {"<=", CEL_TOK_LE},
        {">=", CEL_TOK_GE},      {"&&", CEL_TOK_AND},   {"||", CEL_TOK_OR},
        {"(", CEL_TOK_LPAREN},   {")", CEL_TOK_RPAREN}, {"[", CEL_TOK_LBRACKET},
        {"]", CEL_TOK_RBRACKET}, {"{", CEL_TOK_LBRACE}, {"}", CEL_TOK_RBRACE},
        {".", CEL_TOK_DOT},      {",", CEL_TOK_COMMA},  {":", CEL_TOK_COLON},
        {"?", CEL_TOK_QUESTION}, {"+", CEL_TOK_PLUS},   {"-", CEL_TOK_MINUS},
        {"*", CEL_TOK_STAR},     {"/", CEL_TOK_SLASH},  {"%", CEL_TOK_PERCENT},
        {"!", CEL_TOK_BANG},     {"<", CEL_TOK_LT},     {">", CEL_TOK_GT},
    };
    for (size_t i = 0; i < ARRAY_SIZE(ops); i++) {
        size_t n = ops[i].s[1] ? 2 : 1;
        if (lx->pos + n <= lx->len && memcmp(lx->src + lx->pos, ops[i].s, n) == 0) {
            tok->kind = ops[i].kind;
            lx->pos += n;
            return 0;
        }
    }
    unsigned char c = (unsigned char)lx->src[lx->pos];
    if (c >= 0x20 && c < 0x7f) {
        char msg[64];
        snprintf(msg, sizeof(msg), "token recognition error at: '%c'", c);
        return lex_fail(lx, lx->pos, d, msg);
    }
    return lex_fail(lx, lx->pos, d, "token recognition error (unexpected character)");
}

static int lex_dispatch(struct cel_lexer *lx, struct cel_token *tok, struct diag *d)
{
    int c = peek_at(lx, lx->pos);
    struct strlit sl;
    size_t plen;
    if (c < 0) {
        tok->kind = CEL_TOK_EOF;
        return 0;
    }
    if (is_digit(c) || (c == '.' && is_digit(peek_at(lx, lx->pos + 1))))
        return lex_number(lx, tok, d);
    if (c == '\'' || c == '"')
        return lex_string(lx, (struct strlit){0}, tok, d);
    if (is_ident_start(c)) {
        if (string_prefix(lx, &sl, &plen) && plen > 0) {
            lx->pos += plen;
            return lex_string(lx, sl, tok, d);
        }
        lex_ident(lx, tok);
        return 0;
    }
    return lex_punct(lx, tok, d);
}

int cel_lex_next(struct cel_lexer *lx, struct cel_token *tok, struct diag *d)
{
    skip_space(lx);
    *tok = (struct cel_token){0};
    tok->offset = (uint32_t)lx->pos;
    tok->line = lx->line;
    tok->col = col_of(lx, lx->pos);
    tok->start = lx->src + lx->pos;
    int r = lex_dispatch(lx, tok, d);
    if (r < 0)
        return r;
    tok->len = (size_t)(lx->src + lx->pos - tok->start);
    return 0;
}

const char *cel_tok_name(enum cel_tok kind)
{
    static const char *const names[] = {
        [CEL_TOK_EOF] = "<EOF>",
        [CEL_TOK_INT] = "int literal",
        [CEL_TOK_UINT] = "uint literal",
        [CEL_TOK_DOUBLE] = "double literal",
        [CEL_TOK_STRING] = "string literal",
        [CEL_TOK_BYTES] = "bytes literal",
        [CEL_TOK_IDENT] = "identifier",
        [CEL_TOK_TRUE] = "'true'",
        [CEL_TOK_FALSE] = "'false'",
        [CEL_TOK_NULL] = "'null'",
        [CEL_TOK_IN] = "'in'",
        [CEL_TOK_LPAREN] = "'('",
        [CEL_TOK_RPAREN] = "')'",
        [CEL_TOK_LBRACKET] = "'['",
        [CEL_TOK_RBRACKET] = "']'",
        [CEL_TOK_LBRACE] = "'{'",
        [CEL_TOK_RBRACE] = "'}'",
        [CEL_TOK_DOT] = "'.'",
        [CEL_TOK_COMMA] = "','",
        [CEL_TOK_COLON] = "':'",
        [CEL_TOK_QUESTION] = "'?'",
        [CEL_TOK_PLUS] = "'+'",
        [CEL_TOK_MINUS] = "'-'",
        [CEL_TOK_STAR] = "'*'",
        [CEL_TOK_SLASH] = "'/'",
        [CEL_TOK_PERCENT] = "'%'",
        [CEL_TOK_BANG] = "'!'",
        [CEL_TOK_EQ] = "'=='",
        [CEL_TOK_NE] = "'!='",
        [CEL_TOK_LT] = "'<'",
        [CEL_TOK_LE] = "'<='",
        [CEL_TOK_GT] = "'>'",
        [CEL_TOK_GE] = "'>='",
        [CEL_TOK_AND] = "'&&'",
        [CEL_TOK_OR] = "'||'",
    };
    if ((size_t)kind >= ARRAY_SIZE(names) || !names[kind])
        return "token";
    return names[kind];
}
