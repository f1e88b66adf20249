/* SPDX-License-Identifier: Apache-2.0 */
/*
 * RE2 syntax on a PCRE2 engine. Kubernetes evaluates matches/find/findAll with Go's regexp package
 * (RE2 syntax, linear-time matching); gpuplane runs PCRE2 underneath, which accepts a superset with
 * some different meanings. This file walks an RE2 pattern once, rejects everything RE2 rejects
 * (lookarounds, backreferences, atomic groups, possessive and stacked quantifiers, recursion,
 * conditionals, verbs, unknown escapes, repeat counts over 1000) and rewrites the constructs whose
 * meaning differs: \s and \S (RE2's \s has no \v), \v (a character in RE2, a class in PCRE2),
 * octal and \x escapes (PCRE2 reads \12 as a backreference), a '{' that does not start a repeat
 * (PCRE2 10.43 takes {,n} as one) and POSIX-looking brackets inside classes. Everything else is
 * copied through: \d \w \b and the POSIX classes are ASCII in both engines as long as the pattern
 * is compiled without PCRE2_UCP.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cel-lib-ext.h"

/* Go's regexp/syntax limits: repeat bounds and group nesting. */
#define RE2_MAX_REPEAT 1000
#define RE2_MAX_NEST 1000

struct re2x {
    const char *p;   /* next byte */
    const char *end; /* one past the pattern */
    struct strbuf *out;
    struct diag *d;
    int nest;
    /* What the previous item was, for the repetition rules: a quantifier needs an operand and may
     * not follow another quantifier (Go rejects a** and a*?? alike). */
    bool have_operand;
    bool after_repeat;
};

static int re2x_fail(struct re2x *x, const char *what)
{
    return diag_fail(x->d, -EINVAL, "invalid RE2 pattern: %s", what);
}

static int emit(struct re2x *x, const char *s, size_t n)
{
    if (x->out->len + n > CEL_RE_MAX_PATTERN)
        return diag_fail(x->d, -E2BIG, "regular expression too long");
    return strbuf_add(x->out, s, n);
}

static int emits(struct re2x *x, const char *s)
{
    return emit(x, s, strlen(s));
}

static int emit_cp(struct re2x *x, uint32_t cp)
{
    char buf[16];
    int k = snprintf(buf, sizeof(buf), "\\x{%x}", (unsigned)cp);

    return emit(x, buf, (size_t)k);
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static uint32_t hex_val(char c)
{
    if (c >= '0' && c <= '9')
        return (uint32_t)(c - '0');
    return (uint32_t)((c | 0x20) - 'a' + 10);
}

static bool is_word(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* \x escapes after the 'x': \xHH (exactly two digits) or \x{H...} up to U+10FFFF. */
static int parse_hex_escape(struct re2x *x, uint32_t *cp)
{
    uint32_t v = 0;

    if (x->p < x->end && *x->p == '{') {
        const char *q = x->p + 1;

        while (q < x->end && is_hex(*q)) {
            v = v * 16 + hex_val(*q++);
            if (v > 0x10ffff)
                return re2x_fail(x, "invalid escape sequence \\x{...}");
        }
        if (q == x->p + 1 || q >= x->end || *q != '}')
            return re2x_fail(x, "invalid escape sequence \\x{...}");
        x->p = q + 1;
    } else {
        if (x->end - x->p < 2 || !is_hex(x->p[0]) || !is_hex(x->p[1]))
            return re2x_fail(x, "invalid escape sequence \\x");
        v = hex_val(x->p[0]) * 16 + hex_val(x->p[1]);
        x->p += 2;
    }
    *cp = v;
    return 0;
}

/* Octal after the first digit c: \0, \0NN, \NN, \NNN; a lone \1..\7 is a backreference. */
static int parse_octal_escape(struct re2x *x, char c, uint32_t *cp)
{
    uint32_t v = (uint32_t)(c - '0');

    if (c != '0' && (x->p >= x->end || *x->p < '0' || *x->p > '7'))
        return re2x_fail(x, "backreferences are not supported");
    for (int i = 1; i < 3 && x->p < x->end && *x->p >= '0' && *x->p <= '7'; i++)
        v = v * 8 + (uint32_t)(*x->p++ - '0');
    *cp = v;
    return 0;
}

/* \p and \P: one letter, or a braced name (possibly ^-negated) made of word characters. */
static int copy_unicode_class(struct re2x *x, char c)
{
    const char *start = x->p;

    if (x->p >= x->end)
        return re2x_fail(x, "invalid character class \\p");
    if (*x->p == '{') {
        const char *q = x->p + 1;

        if (q < x->end && *q == '^')
            q++;
        while (q < x->end && is_word(*q))
            q++;
        if (q >= x->end || *q != '}' || q == x->p + 1)
            return re2x_fail(x, "invalid character class \\p{...}");
        x->p = q + 1;
    } else {
        if (!((*x->p >= 'A' && *x->p <= 'Z') || (*x->p >= 'a' && *x->p <= 'z')))
            return re2x_fail(x, "invalid character class \\p");
        x->p++;
    }
    char head[2] = {'\\', c};
    int r = emit(x, head, 2);

    return r < 0 ? r : emit(x, start, (size_t)(x->p - start));
}

/*
 * One escape (the backslash already consumed), in or out of a class. Character escapes become
 * \x{...}; class escapes are copied or rewritten; in_class rejects the assertions RE2 only allows
 * outside. *is_char tells the class parser whether the escape was a single character (a possible
 * range end).
 */
static int translate_escape(struct re2x *x, bool in_class, bool *is_char)
{
    uint32_t cp = 0;
    int r;
    char c;

    if (x->p >= x->end)
        return re2x_fail(x, "trailing backslash at end of expression");
    c = *x->p++;
    *is_char = true;
    switch (c) {
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
        r = parse_octal_escape(x, c, &cp);
        return r < 0 ? r : emit_cp(x, cp);
    case 'x':
        r = parse_hex_escape(x, &cp);
        return r < 0 ? r : emit_cp(x, cp);
    case 'a':
        return emit_cp(x, 0x07);
    case 'f':
        return emit_cp(x, 0x0c);
    case 'n':
        return emit_cp(x, 0x0a);
    case 'r':
        return emit_cp(x, 0x0d);
    case 't':
        return emit_cp(x, 0x09);
    case 'v':
        return emit_cp(x, 0x0b);
    default:
        break;
    }
    *is_char = false;
    switch (c) {
    case 'd':
    case 'D':
    case 'w':
    case 'W':
        return emit(x, x->p - 2, 2);
    case 's':
        return emits(x, in_class ? "\\t\\n\\f\\r " : "[\\t\\n\\f\\r ]");
    case 'S':
        return emits(x, in_class ? "\\x{0}-\\x{8}\\x{b}\\x{e}-\\x{1f}\\x{21}-\\x{10ffff}"
                                 : "[^\\t\\n\\f\\r ]");
    case 'p':
    case 'P':
        return copy_unicode_class(x, c);
    case 'A':
    case 'z':
    case 'b':
    case 'B':
        if (in_class)
            return re2x_fail(x, "invalid escape sequence in character class");
        return emit(x, x->p - 2, 2);
    default:
        break;
    }
    /* ASCII punctuation escapes itself; any other escape is unknown to RE2 (\C \K \G \R \X \h \k
     * \g \N \Z \E \e \c \o \u ...). */
    if ((unsigned char)c < 0x80 && !is_word(c)) {
        *is_char = true;
        return emit(x, x->p - 2, 2);
    }
    return re2x_fail(x, "invalid or unsupported escape sequence");
}

/* \Q...\E outside a class: literal text up to \E or the end, each byte quoted for PCRE2. */
static int translate_quoted(struct re2x *x)
{
    while (x->p < x->end) {
        if (x->end - x->p >= 2 && x->p[0] == '\\' && x->p[1] == 'E') {
            x->p += 2;
            return 0;
        }
        unsigned char c = (unsigned char)*x->p;
        int r = (c < 0x80 && !is_word((char)c)) ? emit(x, "\\", 1) : 0;

        if (r < 0)
            return r;
        if ((r = emit(x, x->p++, 1)) < 0)
            return r;
        x->have_operand = true;
        x->after_repeat = false;
    }
    return 0;
}

/* "[:name:]" and "[:^name:]" inside a class; RE2 and PCRE2 share the names and their ASCII
 * meaning (PCRE2 rejects an unknown name, as RE2 does). */
static bool at_posix_class(const struct re2x *x, size_t *len)
{
    const char *q = x->p + 1;

    if (q >= x->end || *q != ':')
        return false;
    q++;
    if (q < x->end && *q == '^')
        q++;
    while (q < x->end && *q >= 'a' && *q <= 'z')
        q++;
    if (x->end - q < 2 || q[0] != ':' || q[1] != ']')
        return false;
    *len = (size_t)(q + 2 - x->p);
    return true;
}

/* One member of a class: an escape, a POSIX class, or a (possibly multi-byte) character. */
static int translate_class_item(struct re2x *x)
{
    bool is_char;
    size_t len;

    if (*x->p == '\\') {
        x->p++;
        return translate_escape(x, true, &is_char);
    }
    if (*x->p == '[') {
        if (at_posix_class(x, &len)) {
            int r = emit(x, x->p, len);

            x->p += len;
            return r;
        }
        x->p++;
        return emit(x, "\\[", 2);
    }
    x->p++;
    return emit(x, x->p - 1, 1);
}

/* class: '[' '^'? ']'? item* ']' — a leading ']' is a literal in both engines. */
static int translate_class(struct re2x *x)
{
    int r = emit(x, "[", 1);

    if (r >= 0 && x->p < x->end && *x->p == '^') {
        x->p++;
        r = emit(x, "^", 1);
    }
    if (r >= 0 && x->p < x->end && *x->p == ']') {
        x->p++;
        r = emit(x, "\\]", 2);
    }
    while (r >= 0 && x->p < x->end && *x->p != ']')
        r = translate_class_item(x);
    if (r < 0)
        return r;
    if (x->p >= x->end)
        return re2x_fail(x, "missing closing ]");
    x->p++;
    return emit(x, "]", 1);
}

/* (?flags) and (?flags:re): flags from imsU, an optional '-' followed by at least one more. */
static int translate_flags(struct re2x *x, bool *opens_group)
{
    const char *start = x->p;
    bool neg = false, flag_after_neg = false;

    while (x->p < x->end) {
        char c = *x->p++;

        if (c == 'i' || c == 'm' || c == 's' || c == 'U') {
            flag_after_neg = neg;
            continue;
        }
        if (c == '-' && !neg) {
            neg = true;
            continue;
        }
        if ((c == ')' || c == ':') && (!neg || flag_after_neg)) {
            *opens_group = c == ':';
            int r = emit(x, "(?", 2);

            return r < 0 ? r : emit(x, start, (size_t)(x->p - start));
        }
        break;
    }
    return re2x_fail(x, "invalid or unsupported Perl syntax: (?");
}

/* (?P<name> and (?<name>: a named capture; the name is word characters only. */
static int translate_named_group(struct re2x *x)
{
    const char *name;

    if (*x->p == 'P')
        x->p++;
    x->p++; /* '<' */
    name = x->p;
    while (x->p < x->end && is_word(*x->p))
        x->p++;
    if (x->p >= x->end || *x->p != '>' || x->p == name)
        return re2x_fail(x, "invalid named capture");
    x->p++;
    int r = emit(x, "(?<", 3);

    return r < 0 ? r : emit(x, name, (size_t)(x->p - name));
}

/* '(' already consumed: a group opener. Only plain, non-capturing, flag and named groups exist in
 * RE2; every other "(?" and "(*" form is PCRE-only. */
static int translate_group_open(struct re2x *x, bool *opens_group)
{
    *opens_group = true;
    if (x->p < x->end && *x->p == '*')
        return re2x_fail(x, "missing argument to repetition operator: *");
    if (x->p >= x->end || *x->p != '?')
        return emit(x, "(", 1);
    x->p++;
    if (x->p < x->end && *x->p == '=')
        return re2x_fail(x, "lookahead (?= is not supported");
    if (x->p < x->end && *x->p == '!')
        return re2x_fail(x, "negative lookahead (?! is not supported");
    if (x->end - x->p >= 2 && x->p[0] == '<' && (x->p[1] == '=' || x->p[1] == '!'))
        return re2x_fail(x, "lookbehind (?<= / (?<! is not supported");
    if (x->end - x->p >= 2 && ((x->p[0] == 'P' && x->p[1] == '<') || x->p[0] == '<'))
        return translate_named_group(x);
    if (x->p < x->end && *x->p == 'P')
        return re2x_fail(x, "backreferences and recursion (?P= (?P> are not supported");
    return translate_flags(x, opens_group);
}

/* {n}, {n,}, {n,m}: returns 1 and the length when p starts a repeat, 0 when the brace is a
 * literal, -EINVAL when the counts are out of RE2's range. */
static int parse_repeat(struct re2x *x, size_t *len)
{
    const char *q = x->p + 1;
    long lo = 0, hi = -1;

    if (q >= x->end || *q < '0' || *q > '9')
        return 0;
    while (q < x->end && *q >= '0' && *q <= '9' && lo <= RE2_MAX_REPEAT)
        lo = lo * 10 + (*q++ - '0');
    hi = lo;
    if (q < x->end && *q == ',') {
        q++;
        hi = -1;
        if (q < x->end && *q >= '0' && *q <= '9') {
            hi = 0;
            while (q < x->end && *q >= '0' && *q <= '9' && hi <= RE2_MAX_REPEAT)
                hi = hi * 10 + (*q++ - '0');
        }
    }
    if (q >= x->end || *q != '}')
        return 0;
    if (lo > RE2_MAX_REPEAT || hi > RE2_MAX_REPEAT || (hi >= 0 && hi < lo))
        return re2x_fail(x, "invalid repeat count");
    *len = (size_t)(q + 1 - x->p);
    return 1;
}

/* A quantifier of len bytes at p (plus a lazy '?'): needs an operand, may not be stacked. */
static int translate_repeat(struct re2x *x, size_t len)
{
    int r;

    if (!x->have_operand)
        return re2x_fail(x, "missing argument to repetition operator");
    if (x->after_repeat)
        return re2x_fail(x, "invalid nested repetition operator");
    r = emit(x, x->p, len);
    x->p += len;
    if (r >= 0 && x->p < x->end && *x->p == '?')
        r = emit(x, x->p++, 1);
    x->after_repeat = true;
    return r;
}

/* One top-level item: sets have_operand/after_repeat for the next quantifier check. */
static int translate_item(struct re2x *x)
{
    char c = *x->p;
    bool opens = false, is_char;
    size_t len = 0;
    int r;

    switch (c) {
    case '*':
    case '+':
    case '?':
        return translate_repeat(x, 1);
    case '{':
        r = parse_repeat(x, &len);
        if (r > 0)
            return translate_repeat(x, len);
        if (r < 0)
            return r;
        x->p++;
        r = emit(x, "\\{", 2);
        break;
    case '(':
        x->p++;
        if (++x->nest > RE2_MAX_NEST)
            return re2x_fail(x, "expression nests too deeply");
        r = translate_group_open(x, &opens);
        if (r >= 0 && !opens)
            x->nest--; /* (?i) opens no group */
        x->have_operand = false;
        x->after_repeat = false;
        return r;
    case ')':
        if (x->nest == 0)
            return re2x_fail(x, "unexpected )");
        x->nest--;
        x->p++;
        r = emit(x, ")", 1);
        break;
    case '|':
        x->p++;
        x->have_operand = false;
        x->after_repeat = false;
        return emit(x, "|", 1);
    case '[':
        x->p++;
        r = translate_class(x);
        break;
    case '\\':
        if (x->end - x->p >= 2 && x->p[1] == 'Q') {
            x->p += 2;
            return translate_quoted(x);
        }
        x->p++;
        r = translate_escape(x, false, &is_char);
        break;
    default:
        x->p++;
        r = emit(x, x->p - 1, 1);
        break;
    }
    x->have_operand = true;
    x->after_repeat = false;
    return r;
}

int cel_re2_translate(const char *pat, size_t n, struct strbuf *out, struct diag *d)
{
    struct re2x x = {.p = pat, .end = pat + n, .out = out, .d = d};
    int r = 0;

    strbuf_reset(out);
    while (r >= 0 && x.p < x.end)
        r = translate_item(&x);
    if (r < 0)
        return r;
    if (x.nest > 0)
        return re2x_fail(&x, "missing closing )");
    /* An empty pattern must still produce a (NUL-terminated) buffer. */
    return emit(&x, "", 0);
}
