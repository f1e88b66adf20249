/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Regular expressions: matches() (the standard function) and Kubernetes' find()/findAll(), with
 * RE2 syntax on PCRE2. A pattern is first checked and rewritten by cel-lib-regex-syntax.c, then
 * compiled with PCRE2_UTF (code points, as Go's regexp) and without PCRE2_UCP (\d \w \b stay ASCII
 * as in RE2), JIT-compiled when the platform has it. PCRE2 backtracks where RE2 cannot blow up, so
 * every match runs under a match limit and a depth limit: a pattern that would take exponential
 * time fails the evaluation with an error instead of hanging it.
 *
 * Compiled patterns are cached per call site (cel_ctx_site_get): a selector's literal pattern is
 * compiled on the first evaluation and reused for the lifetime of the program. The per-match
 * scratch (match data) is per thread, allocated once and freed when the thread exits, so a cached
 * match allocates nothing.
 * PCRE2 is loaded at the first compile (base-dlib.h): only the commands that evaluate a pattern map
 * it. Errors: an invalid pattern is an evaluation error (CEL_ERR_INVALID_ARGUMENT); a literal one
 * is also reported at compile time by cel_regex_check().
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <pcre2.h>
#include <pthread.h>
#include <string.h>

#include "base-dlib.h"
#include "cel-ast.h"
#include "cel-lib-ext.h"
#include "cel-lib.h"

static struct {
    typeof(pcre2_code_free) *code_free;
    typeof(pcre2_compile) *compile;
    typeof(pcre2_get_error_message) *get_error_message;
    typeof(pcre2_get_ovector_pointer) *get_ovector_pointer;
    typeof(pcre2_jit_compile) *jit_compile;
    typeof(pcre2_match) *match;
    typeof(pcre2_match_context_create) *match_context_create;
    typeof(pcre2_match_data_create) *match_data_create;
    typeof(pcre2_match_data_free) *match_data_free;
    typeof(pcre2_set_depth_limit) *set_depth_limit;
    typeof(pcre2_set_match_limit) *set_match_limit;
} pcre;

static const struct dlib_sym pcre_syms[] = {
    DLIB_SYM(pcre.code_free, pcre2_code_free),
    DLIB_SYM(pcre.compile, pcre2_compile),
    DLIB_SYM(pcre.get_error_message, pcre2_get_error_message),
    DLIB_SYM(pcre.get_ovector_pointer, pcre2_get_ovector_pointer),
    DLIB_SYM(pcre.jit_compile, pcre2_jit_compile),
    DLIB_SYM(pcre.match, pcre2_match),
    DLIB_SYM(pcre.match_context_create, pcre2_match_context_create),
    DLIB_SYM(pcre.match_data_create, pcre2_match_data_create),
    DLIB_SYM(pcre.match_data_free, pcre2_match_data_free),
    DLIB_SYM(pcre.set_depth_limit, pcre2_set_depth_limit),
    DLIB_SYM(pcre.set_match_limit, pcre2_set_match_limit),
};

/* Loaded once and kept: compiled patterns live as long as the programs that cache them. */
static struct dlib pcre_lib = DLIB_INIT("libpcre2-8.so.0", "libpcre2-8-0", pcre_syms, false);

/* Backtracking budget per match: far above what a linear-time RE2 pattern needs on selector-sized
 * input, small enough that a catastrophic pattern fails within milliseconds. */
#define CEL_RE_MATCH_LIMIT 1000000u
#define CEL_RE_DEPTH_LIMIT 10000u
/* findAll() results are capped like every growable buffer fed by input. */
#define CEL_RE_MAX_MATCHES ((size_t)1 << 20)

struct cel_regex {
    pcre2_code *code;
    char *pattern; /* the CEL pattern text it was compiled from (cache key) */
    size_t len;
};

void cel_regex_free(struct cel_regex *re)
{
    if (!re)
        return;
    if (re->code)
        pcre.code_free(re->code);
    free(re->pattern);
    free(re);
}

static void regex_free_void(void *p)
{
    cel_regex_free(p);
}

int cel_regex_compile(const char *pat, size_t n, struct cel_regex **ret, struct diag *d)
{
    _cleanup_strbuf_ struct strbuf tr = STRBUF_INIT;
    struct cel_regex *re;
    PCRE2_UCHAR msg[256];
    PCRE2_SIZE erroff;
    int r, err;

    r = cel_re2_translate(pat, n, &tr, d);
    if (r < 0)
        return r;
    r = dlib_pin(&pcre_lib, d);
    if (r < 0)
        return r;
    re = calloc(1, sizeof(*re));
    if (!re)
        return diag_fail(d, -ENOMEM, "out of memory");
    re->code = pcre.compile((PCRE2_SPTR)strbuf_str(&tr), tr.len,
                            PCRE2_UTF | PCRE2_NO_UTF_CHECK | PCRE2_DOLLAR_ENDONLY |
                                PCRE2_NEVER_BACKSLASH_C | PCRE2_NEVER_UCP,
                            &err, &erroff, NULL);
    re->pattern = malloc(n + 1);
    if (!re->code || !re->pattern) {
        if (re->code)
            err = PCRE2_ERROR_NOMEMORY;
        cel_regex_free(re);
        pcre.get_error_message(err, msg, sizeof(msg));
        return diag_fail(d, -EINVAL, "invalid RE2 pattern: %s", (const char *)msg);
    }
    memcpy(re->pattern, pat, n);
    re->pattern[n] = '\0';
    re->len = n;
    (void)pcre.jit_compile(re->code, PCRE2_JIT_COMPLETE); /* the interpreter is the fallback */
    *ret = re;
    return 0;
}

/* ---- per-thread match scratch ---- */

static pthread_once_t mctx_once = PTHREAD_ONCE_INIT;
static pcre2_match_context *mctx;
/* Each thread's match data, freed by the key's destructor when the thread exits. */
static pthread_key_t md_key;
static bool md_key_ok;

static void md_free(void *md)
{
    pcre.match_data_free(md);
}

static void mctx_init(void)
{
    md_key_ok = pthread_key_create(&md_key, md_free) == 0;
    mctx = pcre.match_context_create(NULL);
    if (mctx) {
        pcre.set_match_limit(mctx, CEL_RE_MATCH_LIMIT);
        pcre.set_depth_limit(mctx, CEL_RE_DEPTH_LIMIT);
    }
}

/* This thread's match data (one ovector pair: only the whole match is needed). */
static pcre2_match_data *thread_match_data(void)
{
    pcre2_match_data *md = pthread_getspecific(md_key);

    if (md)
        return md;
    md = pcre.match_data_create(1, NULL);
    if (md && pthread_setspecific(md_key, md) != 0) {
        pcre.match_data_free(md);
        md = NULL;
    }
    return md;
}

/*
 * Finds the leftmost match of re in s[0..n) at or after byte offset start. Returns 1 with the
 * match's byte range, 0 for none, or a negative PCRE2 error (match limit, memory).
 */
int cel_regex_search(const struct cel_regex *re, const char *s, size_t n, size_t start,
                     size_t *ret_begin, size_t *ret_end)
{
    pcre2_match_data *md;
    PCRE2_SIZE *ov;
    int rc;

    pthread_once(&mctx_once, mctx_init);
    if (!mctx || !md_key_ok || !(md = thread_match_data()))
        return PCRE2_ERROR_NOMEMORY;
    rc = pcre.match(re->code, (PCRE2_SPTR)s, n, start, PCRE2_NO_UTF_CHECK, md, mctx);
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    if (rc < 0)
        return rc;
    ov = pcre.get_ovector_pointer(md);
    *ret_begin = ov[0];
    *ret_end = ov[1];
    return 1;
}

/* ---- CEL functions ---- */

static struct cel_value match_error(struct cel_eval_ctx *ctx, int rc)
{
    PCRE2_UCHAR msg[256];

    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT ||
        rc == PCRE2_ERROR_JIT_STACKLIMIT)
        return cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT,
                             "regular expression match limit exceeded");
    pcre.get_error_message(rc, msg, sizeof(msg));
    return cel_ctx_error(ctx, CEL_ERR_GENERIC, "regular expression match failed: %s",
                         (const char *)msg);
}

/* The compiled pattern for this call site: the cached one when the pattern text is unchanged. On
 * failure *ret_err is the error value to return. */
static const struct cel_regex *site_regex(struct cel_eval_ctx *ctx, struct cel_value pat,
                                          struct cel_value *ret_err)
{
    struct cel_regex *re = cel_ctx_site_get(ctx);
    struct diag d;

    if (re && re->len == pat.n && memcmp(re->pattern, pat.s, pat.n) == 0)
        return re;
    diag_init(&d);
    if (cel_regex_compile(pat.s, pat.n, &re, &d) < 0) {
        *ret_err = cel_ctx_error(ctx, CEL_ERR_INVALID_ARGUMENT, "%s", d.msg);
        return NULL;
    }
    if (cel_ctx_site_set(ctx, re, regex_free_void) < 0) {
        *ret_err = cel_ctx_error(ctx, CEL_ERR_MEMORY, "out of memory");
        return NULL;
    }
    return re;
}

struct cel_value cel_regex_matches(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    struct cel_value err;
    const struct cel_regex *re = site_regex(ctx, args[1], &err);
    size_t b, e;
    int rc;

    if (!re)
        return err;
    rc = cel_regex_search(re, args[0].s, args[0].n, 0, &b, &e);
    return rc < 0 ? match_error(ctx, rc) : cel_bool(rc == 1);
}

static struct cel_value re_find(struct cel_eval_ctx *ctx, const struct cel_value *args, size_t n)
{
    struct cel_value err;
    const struct cel_regex *re = site_regex(ctx, args[1], &err);
    size_t b, e;
    int rc;

    if (!re)
        return err;
    rc = cel_regex_search(re, args[0].s, args[0].n, 0, &b, &e);
    if (rc < 0)
        return match_error(ctx, rc);
    if (rc == 0)
        return cel_string("", 0);
    return cel_string(args[0].s + b, e - b);
}

/* Where the next search starts after an empty match at pos: one code point further (Go's rule,
 * which also keeps a search from returning the same empty match forever). */
static size_t step_past(const char *s, size_t n, size_t pos)
{
    uint32_t cp;

    return pos >= n ? n + 1 : pos + cel_utf8_next(s + pos, n - pos, &cp);
}

/*
 * All successive non-overlapping matches, at most limit (< 0: no limit), as Go's FindAllString:
 * an empty match right where the previous match ended is skipped.
 */
static struct cel_value re_find_all(struct cel_eval_ctx *ctx, const struct cel_value *args,
                                    size_t n)
{
    struct cel_value err, *items = NULL;
    const struct cel_regex *re = site_regex(ctx, args[1], &err);
    const char *s = args[0].s;
    size_t len = args[0].n, pos = 0, count = 0, alloc = 0, prev_end = SIZE_MAX;
    int64_t limit = n > 2 ? args[2].i : -1;

    if (!re)
        return err;
    while (pos <= len && (limit < 0 || (int64_t)count < limit)) {
        size_t b, e;
        int rc = cel_regex_search(re, s, len, pos, &b, &e);

        if (rc < 0)
            return match_error(ctx, rc);
        if (rc == 0)
            break;
        bool accept = !(e == b && b == prev_end);

        pos = e == b ? step_past(s, len, e) : e;
        prev_end = e;
        if (!accept)
            continue;
        if (!cel_ctx_charge(ctx, 1))
            return cel_ctx_error(ctx, CEL_ERR_COST_LIMIT, "actual cost limit exceeded");
        if (count == alloc) {
            struct cel_value *grown;
            size_t want = alloc ? alloc * 2 : 8;

            if (want > CEL_RE_MAX_MATCHES)
                return cel_ctx_error(ctx, CEL_ERR_RANGE, "findAll: too many matches");
            grown = cel_region_alloc(cel_ctx_region(ctx), want * sizeof(*grown));
            if (!grown)
                return cel_ctx_error(ctx, CEL_ERR_MEMORY, "out of memory");
            if (count)
                memcpy(grown, items, count * sizeof(*grown));
            items = grown;
            alloc = want;
        }
        items[count++] = cel_string(s + b, e - b);
    }
    const struct cel_vlist *l = cel_vlist_new(cel_ctx_region(ctx), items, count);

    return l ? cel_list_value(l) : cel_ctx_error(ctx, CEL_ERR_MEMORY, "out of memory");
}

/* cel-go charges regex functions by the scanned length. */
static uint64_t cost_scan(const struct cel_value *args, size_t n, struct cel_value result)
{
    return ((uint64_t)args[0].n + 9) / 10;
}

int cel_regex_check(const struct cel_node *call, struct diag *d)
{
    const struct cel_node *pat;
    struct cel_regex *re;
    int r;

    if (call->kind != CEL_NODE_CALL)
        return 0;
    /* receiver style x.find(p): the pattern is args[0]; a global form would be args[1] */
    pat = call->u.call.target ? (call->u.call.nargs > 0 ? call->u.call.args[0] : NULL)
                              : (call->u.call.nargs > 1 ? call->u.call.args[1] : NULL);
    if (!pat || pat->kind != CEL_NODE_CONST || pat->u.lit.kind != CEL_CONST_STRING)
        return 0;
    r = cel_regex_compile(pat->u.lit.v.s.ptr, pat->u.lit.v.s.len, &re, d);
    if (r < 0)
        return r;
    cel_regex_free(re);
    return 0;
}

static const struct cel_overload OVERLOADS[] = {
    {.name = "find",
     .receiver = true,
     .sig = "(string, string) -> string",
     .fn = re_find,
     .cost_fn = cost_scan},
    {.name = "findAll",
     .receiver = true,
     .sig = "(string, string) -> list(string)",
     .fn = re_find_all,
     .cost_fn = cost_scan},
    {.name = "findAll",
     .receiver = true,
     .sig = "(string, string, int) -> list(string)",
     .fn = re_find_all,
     .cost_fn = cost_scan},
};

const struct cel_library cel_lib_regex = {"regex", OVERLOADS, ARRAY_SIZE(OVERLOADS)};
