/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pure algorithms behind the extension libraries (strings, lists, regex): code point arithmetic
 * on UTF-8, the whitespace set trim() removes, strings.quote(), the number renderings format()
 * uses, and the translation of an RE2 pattern into an equivalent PCRE2 pattern. They know nothing
 * of CEL values, so the unit tests drive them directly and the library files stay thin adapters.
 * All inputs are byte ranges (CEL strings may hold NUL); strings are valid UTF-8 (the value layer
 * guarantees it), but every decoder here still stops safely on malformed bytes.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base-diag.h"
#include "base/base-macro.h"
#include "base/base-strbuf.h"
#include "cel-lib.h"

struct cel_node;

/* ---- UTF-8 code points (cel-lib-strings.c) ---- */

/* Decodes the code point at s[0..n) into *cp and returns its byte length (>= 1 when n > 0, 0 only
 * when n == 0). A malformed byte decodes as U+FFFD of length 1. */
size_t cel_utf8_next(const char *s, size_t n, uint32_t *cp);
/* The number of code points in s[0..n). */
size_t cel_utf8_count(const char *s, size_t n);
/* The byte offset of code point index cpi, or n when cpi is the count; SIZE_MAX when cpi is past
 * the end. */
size_t cel_utf8_offset(const char *s, size_t n, size_t cpi);
/* Appends the UTF-8 encoding of cp (a scalar value). */
_wur_ int cel_utf8_put(struct strbuf *sb, uint32_t cp);

/* Whitespace as trim() removes it: Unicode White_Space (the set Go's unicode.IsSpace reports). */
bool cel_is_unicode_space(uint32_t cp);

/* strings.quote(): s as a double-quoted CEL string literal with \a \b \f \n \r \t \v \\ \" escapes
 * and control characters as \u escapes; other characters verbatim. */
_wur_ int cel_quote_string(struct strbuf *sb, const char *s, size_t n);

/* Code point index searches used by indexOf/lastIndexOf: the code point index of the first match
 * of needle at or after code point from (-1 when none), and of the last match starting at or
 * before code point from. Offsets are code point indices already checked against the length. */
int64_t cel_str_index_of(const char *s, size_t n, const char *needle, size_t nn, size_t from);
int64_t cel_str_last_index_of(const char *s, size_t n, const char *needle, size_t nn, size_t from);

/* replace(old, new, limit) as Go's strings.Replace: limit < 0 replaces all; an empty old inserts
 * new before every code point and at the end. */
_wur_ int cel_str_replace(struct strbuf *sb, const char *s, size_t n, const char *old, size_t on,
                          const char *rep, size_t rn, int64_t limit);

/* ---- format() verbs (cel-lib-strings.c) ---- */

/* The clause kinds of a format string. */
enum cel_fmt_verb {
    CEL_FMT_S = 's',
    CEL_FMT_D = 'd',
    CEL_FMT_F = 'f',
    CEL_FMT_E = 'e',
    CEL_FMT_B = 'b',
    CEL_FMT_O = 'o',
    CEL_FMT_X = 'x',
    CEL_FMT_XU = 'X',
};

/* One step of walking a format string: the literal text before the next clause (with %% already
 * unescaped into the caller's buffer by cel_fmt_next) and the clause itself. */
struct cel_fmt_clause {
    enum cel_fmt_verb verb;
    int precision; /* -1 when the clause gave none */
};

/*
 * Parses the next clause of fmt starting at *pos, appending the literal text before it (with %%
 * turned into %) to lit (which may be NULL when only checking). Returns 1 and fills *clause when a
 * clause was found, 0 at the end of the string, -EINVAL with a message in d for a malformed or
 * unknown clause ("%a", "%.x", a trailing %).
 */
_wur_ int cel_fmt_next(const char *fmt, size_t n, size_t *pos, struct strbuf *lit,
                       struct cel_fmt_clause *clause, struct diag *d);

/* Compile-time check of a format() call: with a literal format string, every clause must parse;
 * with a list literal argument as well, there must be an element per clause and each element
 * whose type the tree decides must fit its verb (Kubernetes validates these calls when it compiles
 * the expression). */
_wur_ int cel_format_check(const struct cel_node *call, struct diag *d);

/* The number renderings: %d of an int or uint, %b/%o/%x/%X of an integer (negative values get a
 * leading '-', as Go prints them), %f and %e of a double with the given precision (-1 means 6), in
 * the en_US presentation Kubernetes' formatter uses (grouped integer digits for %f, "NaN", "∞",
 * and "d.dddddd × 10ⁿⁿ" for %e). */
_wur_ int cel_fmt_int(struct strbuf *sb, int64_t v, int base, bool upper);
_wur_ int cel_fmt_uint(struct strbuf *sb, uint64_t v, int base, bool upper);
_wur_ int cel_fmt_fixed(struct strbuf *sb, double v, int precision);
_wur_ int cel_fmt_sci(struct strbuf *sb, double v, int precision);
/* %x/%X of a string or bytes: two hex digits per byte. */
_wur_ int cel_fmt_hex_bytes(struct strbuf *sb, const void *p, size_t n, bool upper);
/* A double as %s prints it: the shortest text that reads back to the same value ("56.8", "1e+100",
 * "NaN", "+Inf"), as Go's strconv 'g' -1 does. */
_wur_ int cel_fmt_double_shortest(struct strbuf *sb, double v);

/* ---- RE2 syntax on PCRE2 (cel-lib-regex.c) ---- */

/* The most bytes a translated pattern may take (the translation at most ~20x expands \s in a
 * class; patterns come from CEL string values, bounded by the expression length or the data). */
#define CEL_RE_MAX_PATTERN ((size_t)1 << 20)

/*
 * Checks that pat[0..n) is valid RE2 syntax (as Go's regexp package accepts it) and writes to out
 * a PCRE2 pattern that matches exactly the same strings when compiled with PCRE2_UTF,
 * PCRE2_DOLLAR_ENDONLY and LF newlines and without PCRE2_UCP. Returns 0, or -EINVAL with a
 * message in d for syntax RE2 rejects: lookarounds, backreferences, atomic groups, possessive
 * quantifiers, recursion, conditionals, PCRE verbs, \C and every escape RE2 does not know, stacked
 * repetitions and repeat counts over 1000.
 */
_wur_ int cel_re2_translate(const char *pat, size_t n, struct strbuf *out, struct diag *d);

/* A compiled RE2 pattern (opaque). */
struct cel_regex;

/* Compiles pat[0..n) (RE2 syntax) into *ret, owned by the caller (cel_regex_free). -EINVAL with a
 * message in d for a pattern RE2 rejects, -ENOMEM. */
_wur_ int cel_regex_compile(const char *pat, size_t n, struct cel_regex **ret, struct diag *d);
/* Frees re; NULL allowed. */
void cel_regex_free(struct cel_regex *re);
DEFINE_POINTER_CLEANUP(struct cel_regex, cel_regex_free)
/* The leftmost match in s[0..n) at or after byte offset start (the text before start still counts
 * for \b and ^): 1 and the byte range, 0 for none, a negative PCRE2 error code (match limit). */
_wur_ int cel_regex_search(const struct cel_regex *re, const char *s, size_t n, size_t start,
                           size_t *ret_begin, size_t *ret_end);

/* matches(string, string) -> bool for the standard library: RE2 search semantics (the pattern may
 * match anywhere), the compiled pattern cached at the call site. */
struct cel_value cel_regex_matches(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                   size_t n);
/* Compile-time check of a call to matches/find/findAll: a literal pattern must be valid RE2. */
_wur_ int cel_regex_check(const struct cel_node *call, struct diag *d);
