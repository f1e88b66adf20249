/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JSON read straight into shared values (base-jread.h). A recursive descent over the text: a
 * container's elements are read (each one interned on the spot) onto a stack of parts, and when
 * the container closes, its parts are looked up in the table as one value and popped. Strings
 * without escapes are looked up where they stand in the text; the others are decoded into a
 * scratch buffer first.
 *
 * What jansson reads and how (its lexer and parser, with JSON_REJECT_DUPLICATES and without
 * JSON_ALLOW_NUL): whitespace is space, tab, CR, LF; strings hold no raw byte below 0x20 and only
 * valid UTF-8 (no overlong forms, no surrogates, nothing past U+10FFFF); escapes are \" \\ \/ \b
 * \f \n \r \t and \u with four hex digits, a high surrogate only followed by a low one, never
 * \u0000; numbers as JSON's grammar has them, an integer (no '.', no exponent) being a json_int_t
 * and refused when it does not fit, any other a double from strtod, refused when it overflows;
 * true, false, null (no letter after them: jansson reads a run of letters as one word); a mapping
 * with a key twice is refused.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base-internal.h"
#include "base-jread.h"

/* A container's element being read: its value (the table's, or NULL when not kept) and, in a
 * mapping, its key (in the text, or at an offset in the scratch buffer). */
struct jread_part {
    json_t *v;
    const char *key; /* NULL: at koff in buf */
    size_t koff, klen;
};

/* One call of jread_value. */
struct rd {
    struct jread *r;
    const char *p, *end;
    int err;
    const char *kind;                         /* the value read's "kind", when seen */
    struct jread_part path[JREAD_KEEP_DEPTH]; /* keys down to the member being read */
};

/* Stands for a value read through and not kept. */
#define SKIPPED ((json_t *)&skipped_mark)
static const char skipped_mark;

bool jread_key_is(const struct jread_key *k, const char *s)
{
    return strlen(s) == k->len && memcmp(k->s, s, k->len) == 0;
}

void jread_init(struct jread *r, struct jdedup *t)
{
    *r = (struct jread){.table = t};
}

void jread_release(struct jread *r)
{
    free(r->parts);
    free(r->buf);
    jread_init(r, NULL);
}

static json_t *fail(struct rd *c, int err)
{
    if (c->err == 0)
        c->err = err;
    return NULL;
}

static void skip_ws(struct rd *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t'))
        c->p++;
}

/* Room for n more bytes in the scratch buffer. */
static int buf_reserve(struct jread *r, size_t n)
{
    char *b;
    size_t a;

    /* allocated even for n 0: the buffer's address is offset and copied to before anything is
     * put in it */
    if (r->buf && r->abuf - r->nbuf >= n)
        return 0;
    a = r->abuf ? r->abuf : 256;
    while (a - r->nbuf < n)
        a *= 2;
    b = realloc(r->buf, a);
    if (!b)
        return -ENOMEM;
    r->buf = b;
    r->abuf = a;
    return 0;
}

static int part_push(struct jread *r, const struct jread_part *part)
{
    if (r->nparts == r->aparts) {
        size_t a = r->aparts ? r->aparts * 2 : 64;
        struct jread_part *n = realloc(r->parts, a * sizeof(*n));

        if (!n)
            return -ENOMEM;
        r->parts = n;
        r->aparts = a;
    }
    r->parts[r->nparts++] = *part;
    return 0;
}

static int hex4(const char *p, const char *end, unsigned *ret)
{
    unsigned v = 0;

    if (end - p < 4)
        return -EINVAL;
    for (int i = 0; i < 4; i++) {
        char ch = p[i];

        v <<= 4;
        if (ch >= '0' && ch <= '9')
            v |= (unsigned)(ch - '0');
        else if (ch >= 'a' && ch <= 'f')
            v |= (unsigned)(ch - 'a' + 10);
        else if (ch >= 'A' && ch <= 'F')
            v |= (unsigned)(ch - 'A' + 10);
        else
            return -EINVAL;
    }
    *ret = v;
    return 0;
}

static size_t put_utf8(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* The escape after the backslash at c->p, decoded at the end of the scratch buffer. */
static int unescape(struct rd *c)
{
    struct jread *r = c->r;
    const char *p = c->p + 1;
    unsigned cp, lo;
    char ch;

    if (p == c->end || buf_reserve(r, 4) < 0)
        return p == c->end ? -EINVAL : -ENOMEM;
    switch (*p) {
    case '"':
    case '\\':
    case '/':
        ch = *p;
        break;
    case 'b':
        ch = '\b';
        break;
    case 'f':
        ch = '\f';
        break;
    case 'n':
        ch = '\n';
        break;
    case 'r':
        ch = '\r';
        break;
    case 't':
        ch = '\t';
        break;
    case 'u':
        if (hex4(p + 1, c->end, &cp) < 0 || cp == 0 || (cp >= 0xdc00 && cp <= 0xdfff))
            return -EINVAL;
        p += 5;
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (c->end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, c->end, &lo) < 0 ||
                lo < 0xdc00 || lo > 0xdfff)
                return -EINVAL;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            p += 6;
        }
        r->nbuf += put_utf8(r->buf + r->nbuf, cp);
        c->p = p;
        return 0;
    default:
        return -EINVAL;
    }
    r->buf[r->nbuf++] = ch;
    c->p = p + 1;
    return 0;
}

/*
 * The string whose opening quote is at c->p: *s and *len its bytes, in the text when it has no
 * escape (*off SIZE_MAX), else decoded at *off in the scratch buffer (*s valid until the buffer
 * grows). c->p is left past the closing quote.
 */
static int string(struct rd *c, const char **s, size_t *len, size_t *off)
{
    struct jread *r = c->r;
    const char *p = c->p + 1, *run = p;
    size_t start = r->nbuf;
    bool decoded = false;
    int e;

    for (;;) {
        unsigned char ch;

        while (p < c->end && (ch = (unsigned char)*p) >= 0x20 && ch < 0x80 && ch != '"' &&
               ch != '\\')
            p++;
        if (p == c->end)
            return -EINVAL;
        ch = (unsigned char)*p;
        if (ch == '"')
            break;
        if (ch < 0x20)
            return -EINVAL;
        if (ch >= 0x80) {
            size_t n = utf8_seq_len((const unsigned char *)p, (size_t)(c->end - p));

            if (n == 0)
                return -EINVAL;
            p += n;
            continue;
        }
        /* a backslash: what came before it goes to the buffer, then what it stands for */
        if (buf_reserve(r, (size_t)(p - run)) < 0)
            return -ENOMEM;
        memcpy(r->buf + r->nbuf, run, (size_t)(p - run));
        r->nbuf += (size_t)(p - run);
        c->p = p;
        e = unescape(c);
        if (e < 0)
            return e;
        p = run = c->p;
        decoded = true;
    }
    if (!decoded) {
        *s = run;
        *len = (size_t)(p - run);
        *off = SIZE_MAX;
    } else {
        if (buf_reserve(r, (size_t)(p - run)) < 0)
            return -ENOMEM;
        memcpy(r->buf + r->nbuf, run, (size_t)(p - run));
        r->nbuf += (size_t)(p - run);
        *off = start;
        *s = r->buf + start;
        *len = r->nbuf - start;
    }
    c->p = p + 1;
    return 0;
}

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* The number at c->p, as jansson's lexer reads it. */
static json_t *number(struct rd *c, bool keep)
{
    const char *p = c->p, *start = p;
    bool real = false;
    char text[64];
    long long i;
    double x;
    size_t n;

    if (p < c->end && *p == '-')
        p++;
    if (p == c->end || !is_digit(*p))
        return fail(c, -EINVAL);
    if (*p == '0') {
        p++;
        if (p < c->end && is_digit(*p))
            return fail(c, -EINVAL);
    } else {
        while (p < c->end && is_digit(*p))
            p++;
    }
    if (p < c->end && *p == '.') {
        real = true;
        if (++p == c->end || !is_digit(*p))
            return fail(c, -EINVAL);
        while (p < c->end && is_digit(*p))
            p++;
    }
    if (p < c->end && (*p == 'e' || *p == 'E')) {
        real = true;
        if (++p < c->end && (*p == '+' || *p == '-'))
            p++;
        if (p == c->end || !is_digit(*p))
            return fail(c, -EINVAL);
        while (p < c->end && is_digit(*p))
            p++;
    }
    c->p = p;
    n = (size_t)(p - start);
    if (n >= sizeof(text))
        return fail(c, -EINVAL); /* jansson takes these; refused here as too unusual to matter */
    memcpy(text, start, n);
    text[n] = '\0';
    errno = 0;
    if (real) {
        x = strtod(text, NULL);
        if (errno == ERANGE && isinf(x))
            return fail(c, -EINVAL);
        return keep ? jdedup_real(c->r->table, x) : SKIPPED;
    }
    i = strtoll(text, NULL, 10);
    if (errno == ERANGE)
        return fail(c, -EINVAL);
    return keep ? jdedup_integer(c->r->table, (json_int_t)i) : SKIPPED;
}

static json_t *literal(struct rd *c, const char *word, json_t *v)
{
    size_t n = strlen(word);

    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return fail(c, -EINVAL);
    c->p += n;
    /* jansson reads a run of letters as one word: "truex" is not true followed by x */
    if (c->p < c->end && ((*c->p >= 'a' && *c->p <= 'z') || (*c->p >= 'A' && *c->p <= 'Z')))
        return fail(c, -EINVAL);
    return v;
}

static json_t *value(struct rd *c, size_t depth, size_t keep_depth, bool keep);

static struct jread_key key_of(const struct jread *r, const struct jread_part *part)
{
    return (struct jread_key){part->key ? part->key : r->buf + part->koff, part->klen};
}

static bool same_key(const struct jread_key *a, const struct jread_key *b)
{
    return a->len == b->len && memcmp(a->s, b->s, a->len) == 0;
}

static int key_cmp(const void *x, const void *y)
{
    const struct jread_key *a = x, *b = y;
    int d = memcmp(a->s, b->s, a->len < b->len ? a->len : b->len);

    return d ? d : (a->len > b->len) - (a->len < b->len);
}

/* Whether the mapping's parts from `first` on have a key twice: compared pairwise when they are
 * few (a manifest's mappings mostly are), sorted when they are many (a node's labels). */
static int duplicate_key(const struct jread *r, size_t first)
{
    size_t n = r->nparts - first;
    struct jread_key *keys;
    bool twice = false;

    if (n <= 16) {
        for (size_t i = first + 1; i < r->nparts; i++)
            for (size_t k = first; k < i; k++) {
                struct jread_key a = key_of(r, &r->parts[i]), b = key_of(r, &r->parts[k]);

                if (same_key(&a, &b))
                    return -EINVAL;
            }
        return 0;
    }
    keys = malloc(n * sizeof(*keys));
    if (!keys)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        keys[i] = key_of(r, &r->parts[first + i]);
    qsort(keys, n, sizeof(*keys), key_cmp);
    for (size_t i = 1; i < n && !twice; i++)
        twice = same_key(&keys[i - 1], &keys[i]);
    free(keys);
    return twice ? -EINVAL : 0;
}

/* The container's kept parts from `first` on (a mapping's with their keys), looked up as one
 * value. */
static json_t *close_parts(struct rd *c, size_t first, bool mapping)
{
    struct jread *r = c->r;
    size_t n = 0, cap = r->nparts - first;
    json_t *small_v[16], **v = small_v, *out;
    const char *small_k[16], **k = small_k;
    size_t small_l[16], *l = small_l;

    if (cap > 16) {
        v = malloc(cap * sizeof(*v));
        k = malloc(cap * sizeof(*k));
        l = malloc(cap * sizeof(*l));
    }
    if (!v || !k || !l) {
        out = fail(c, -ENOMEM);
        goto done;
    }
    for (size_t i = first; i < r->nparts; i++) {
        if (r->parts[i].v == SKIPPED)
            continue;
        v[n] = r->parts[i].v;
        if (mapping) {
            k[n] = key_of(r, &r->parts[i]).s;
            l[n] = r->parts[i].klen;
        }
        n++;
    }
    out = mapping ? jdedup_object(r->table, k, l, v, n) : jdedup_array(r->table, v, n);
    if (!out)
        fail(c, -ENOMEM);
done:
    if (v != small_v) {
        free(v);
        free(k);
        free(l);
    }
    return out;
}

/* Whether the member being read (its key at path[depth - 1]) is built. */
static bool keeps(struct rd *c, size_t keep_depth)
{
    struct jread_key path[JREAD_KEEP_DEPTH];

    if (!c->r->keep || keep_depth == 0 || keep_depth > JREAD_KEEP_DEPTH)
        return true;
    /* resolved only now: a decoded key's bytes move when the scratch buffer grows */
    for (size_t i = 0; i < keep_depth; i++)
        path[i] = key_of(c->r, &c->path[i]);
    return c->r->keep(c->r->keep_arg, c->kind, path, keep_depth);
}

/* One member: key, colon, value; pushed as a part. */
static int member(struct rd *c, size_t depth, size_t keep_depth, bool keep)
{
    struct jread *r = c->r;
    struct jread_part part = {NULL, NULL, 0, 0};
    const char *key;
    size_t off;
    bool kept;
    int e;

    if (c->p == c->end || *c->p != '"')
        return -EINVAL;
    e = string(c, &key, &part.klen, &off);
    if (e < 0)
        return e;
    part.key = off == SIZE_MAX ? key : NULL;
    part.koff = off;
    r->nodes++;
    skip_ws(c);
    if (c->p == c->end || *c->p != ':')
        return -EINVAL;
    c->p++;
    skip_ws(c);
    if (keep_depth > 0 && keep_depth <= JREAD_KEEP_DEPTH)
        c->path[keep_depth - 1] = part;
    kept = keep && keeps(c, keep_depth);
    /* below the depth asked about, and inside sequences, everything is kept */
    part.v =
        value(c, depth, keep_depth > 0 && keep_depth < JREAD_KEEP_DEPTH ? keep_depth + 1 : 0, kept);
    if (!part.v)
        return c->err;
    if (!kept)
        part.v = SKIPPED;
    if (keep_depth == 1 && kept && json_is_string(part.v)) {
        struct jread_key k = key_of(r, &part);

        if (jread_key_is(&k, "kind"))
            c->kind = json_string_value(part.v);
    }
    return part_push(r, &part);
}

/* Past what follows a container's element: 0 after a comma (another element follows), 1 after
 * `close` (the container ends), -EINVAL for anything else. */
static int separator(struct rd *c, char close)
{
    skip_ws(c);
    if (c->p == c->end || (*c->p != ',' && *c->p != close))
        return -EINVAL;
    if (*c->p++ == close)
        return 1;
    skip_ws(c);
    return 0;
}

/* The mapping whose '{' is at c->p, `depth` containers deep (itself included). */
static json_t *object(struct rd *c, size_t depth, size_t keep_depth, bool keep)
{
    struct jread *r = c->r;
    size_t first = r->nparts, mark = r->nbuf;
    json_t *out = SKIPPED;
    int e;

    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return keep ? jdedup_object(r->table, NULL, NULL, NULL, 0) : SKIPPED;
    }
    do {
        e = member(c, depth, keep_depth, keep);
        if (e < 0 || (e = separator(c, '}')) < 0)
            return fail(c, e);
    } while (e == 0);
    e = duplicate_key(r, first);
    if (e < 0)
        return fail(c, e);
    if (keep)
        out = close_parts(c, first, true);
    r->nparts = first;
    r->nbuf = mark;
    return out;
}

/* The sequence whose '[' is at c->p. */
static json_t *array(struct rd *c, size_t depth, bool keep)
{
    struct jread *r = c->r;
    size_t first = r->nparts;
    json_t *out = SKIPPED;
    int e;

    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == ']') {
        c->p++;
        return keep ? jdedup_array(r->table, NULL, 0) : SKIPPED;
    }
    do {
        struct jread_part part = {value(c, depth, 0, keep), NULL, 0, 0};

        if (!part.v)
            return NULL;
        if (part_push(r, &part) < 0)
            return fail(c, -ENOMEM);
        if ((e = separator(c, ']')) < 0)
            return fail(c, e);
    } while (e == 0);
    if (keep)
        out = close_parts(c, first, false);
    r->nparts = first;
    return out;
}

/*
 * The value at c->p (whitespace skipped before), inside `depth` containers; keep_depth: the depth
 * its members are asked about (0: not asked). keep false: read through, SKIPPED on success.
 */
static json_t *value(struct rd *c, size_t depth, size_t keep_depth, bool keep)
{
    struct jread *r = c->r;
    const char *s;
    size_t len, off;
    json_t *v;
    int e;

    if (++r->nodes > r->max_nodes && r->max_nodes)
        return fail(c, -E2BIG);
    if (c->p == c->end)
        return fail(c, -EINVAL);
    switch (*c->p) {
    case '{':
    case '[':
        if (r->max_depth && r->level + depth + 1 > r->max_depth)
            return fail(c, -E2BIG);
        return *c->p == '{' ? object(c, depth + 1, keep_depth, keep) : array(c, depth + 1, keep);
    case '"':
        e = string(c, &s, &len, &off);
        if (e < 0)
            return fail(c, e);
        v = keep ? jdedup_string(r->table, s, len) : SKIPPED;
        if (off != SIZE_MAX)
            r->nbuf = off;
        return v ? v : fail(c, -ENOMEM);
    case 't':
        return literal(c, "true", json_true());
    case 'f':
        return literal(c, "false", json_false());
    case 'n':
        return literal(c, "null", json_null());
    default:
        v = number(c, keep);
        return v || c->err ? v : fail(c, -ENOMEM);
    }
}

json_t *jread_value(struct jread *r, const char *p, const char *end, const char **next, int *err)
{
    struct rd c = {.r = r, .p = p, .end = end};
    json_t *v;

    r->nparts = r->nbuf = 0;
    skip_ws(&c);
    v = value(&c, 0, 1, true);
    if (r->max_nodes && r->nodes > r->max_nodes && v)
        v = fail(&c, -E2BIG);
    *err = v ? 0 : (c.err ? c.err : -ENOMEM);
    *next = v ? c.p : p;
    return v;
}
