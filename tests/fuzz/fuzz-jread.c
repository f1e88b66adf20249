/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the JSON reader into shared values (base-jread.h), checked against jansson
 * on every input: what it takes, jansson takes as the same value, and the text it says it read is
 * exactly that one value; what it refuses that jansson takes, it may refuse only for a reason its
 * header gives (a number of 64 characters or more, nesting or values past the caps), or for a NUL
 * byte jansson's lexer skips (see may_refuse). Reading the same text again into the same table
 * gives the very same value, and so does passing jansson's value through the table. A third read
 * drops members by key (and one by the value's "kind") and must give jansson's value with the same
 * members removed, asking about exactly the members a remover written here visits. Caps set to
 * just what the value needs take it; one short of that, they refuse it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base-jdedup.h"
#include "base-jread.h"
#include "base-strbuf.h"

#define MAX_DEPTH 64
#define MAX_NODES 100000

static const size_t LOAD_FLAGS = JSON_DECODE_ANY | JSON_REJECT_DUPLICATES;

/* Compared as text: a json_t holds no NUL in its keys here, as \u0000 is refused. */
static char *dump(const json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

    if (!text)
        abort();
    return text;
}

static void same_dump(const json_t *a, const json_t *b)
{
    char *x = dump(a), *y = dump(b);

    if (strcmp(x, y) != 0)
        abort();
    free(x);
    free(y);
}

/* Containers nested in v, itself included. */
static size_t depth_of(json_t *v)
{
    size_t d = 0, i;
    const char *key;
    json_t *x;

    if (json_is_array(v)) {
        json_array_foreach(v, i, x)
        {
            size_t k = depth_of(x);

            d = k > d ? k : d;
        }
        return d + 1;
    }
    if (json_is_object(v)) {
        json_object_foreach(v, key, x)
        {
            size_t k = depth_of(x);

            d = k > d ? k : d;
        }
        return d + 1;
    }
    return 0;
}

/* Values in v as the reader counts them: a mapping's keys too. */
static size_t nodes_of(json_t *v)
{
    size_t n = 1, i;
    const char *key;
    json_t *x;

    if (json_is_array(v)) {
        json_array_foreach(v, i, x) n += nodes_of(x);
    } else if (json_is_object(v)) {
        json_object_foreach(v, key, x) n += 1 + nodes_of(x);
    }
    return n;
}

/* The one reason besides the caps to refuse what jansson takes (checked crudely): a number of 64
 * characters or more. */
static bool long_number(const char *text, size_t size)
{
    size_t run = 0;

    for (size_t i = 0; i < size; i++) {
        char ch = text[i];

        if ((ch >= '0' && ch <= '9') || ch == 'e' || ch == 'E' || ch == '.' || ch == '+' ||
            ch == '-') {
            if (++run >= 64)
                return true;
        } else {
            run = 0;
        }
    }
    return false;
}

static bool is_alnum(char ch)
{
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

/*
 * Whether jread may refuse text that jansson read as j. Besides a long number: jansson's lexer
 * drops a NUL byte it reads as the character after a number or a word ("[1\0]" is [1] to it: its
 * unget leaves a NUL that then reads as an empty buffer), a quirk rather than JSON. Such text is
 * refused rightly when the same text with those NULs made spaces is read as jansson read it.
 */
static bool may_refuse(const char *text, size_t size, json_t *j)
{
    struct jdedup t;
    struct jread r;
    const char *next;
    json_t *v;
    char *copy;
    bool nul = false;
    int err;

    if (long_number(text, size))
        return true;
    copy = malloc(size ? size : 1);
    if (!copy)
        abort();
    memcpy(copy, text, size);
    for (size_t i = 1; i < size; i++)
        if (copy[i] == '\0' && is_alnum(copy[i - 1])) {
            copy[i] = ' ';
            nul = true;
        }
    if (!nul) {
        free(copy);
        return false;
    }
    jdedup_init(&t);
    jread_init(&r, &t);
    r.max_depth = MAX_DEPTH;
    r.max_nodes = MAX_NODES;
    v = jread_value(&r, copy, copy + size, &next, &err);
    if (v)
        same_dump(v, j);
    else if (err != -E2BIG || (depth_of(j) <= MAX_DEPTH && nodes_of(j) <= MAX_NODES))
        abort();
    jread_release(&r);
    jdedup_release(&t);
    free(copy);
    return true;
}

/* One question about a member, written down so that both sides' questions can be compared. */
static void record(struct strbuf *sb, const char *kind, const struct jread_key *path, size_t depth)
{
    if (strbuf_addf(sb, "%zu %s", depth, kind ? kind : "(none)") < 0)
        abort();
    for (size_t i = 0; i < depth; i++)
        if (strbuf_addf(sb, " %zu:", path[i].len) < 0 || strbuf_add(sb, path[i].s, path[i].len) < 0)
            abort();
    if (strbuf_addch(sb, '\n') < 0)
        abort();
}

static bool drops(const char *kind, const struct jread_key *path, size_t depth)
{
    const struct jread_key *k = &path[depth - 1];

    if (k->len > 0 && k->s[0] == 'x')
        return true;
    return depth == 1 && jread_key_is(k, "spec") && kind && strcmp(kind, "Pod") == 0;
}

static bool keep(void *arg, const char *kind, const struct jread_key *path, size_t depth)
{
    if (depth < 1 || depth > JREAD_KEEP_DEPTH)
        abort();
    record(arg, kind, path, depth);
    return !drops(kind, path, depth);
}

/* The remover, on jansson's value: the same rules, over the keys in text order. */
struct remover {
    struct strbuf asked;
    const char *kind;
    struct jread_key path[JREAD_KEEP_DEPTH];
};

/* v with its members at `depth` (and below, down to JREAD_KEEP_DEPTH) removed as the rules say: a
 * new reference. */
static json_t *removed(struct remover *rm, json_t *v, size_t depth)
{
    const char *key;
    json_t *x, *out;

    if (!json_is_object(v) || depth > JREAD_KEEP_DEPTH)
        return json_incref(v);
    out = json_object();
    if (!out)
        abort();
    json_object_foreach(v, key, x)
    {
        rm->path[depth - 1] = (struct jread_key){key, strlen(key)};
        record(&rm->asked, rm->kind, rm->path, depth);
        if (drops(rm->kind, rm->path, depth))
            continue;
        if (json_object_set_new(out, key, removed(rm, x, depth + 1)) < 0)
            abort();
        if (depth == 1 && strcmp(key, "kind") == 0 && json_is_string(x))
            rm->kind = json_string_value(x);
    }
    return out;
}

static json_t *read_with(struct jread *r, const char *text, size_t size, const char **next,
                         int *err)
{
    r->nodes = 0;
    return jread_value(r, text, text + size, next, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data, *next = NULL, *next2 = NULL, *next3 = NULL;
    struct strbuf asked = STRBUF_INIT;
    struct jdedup t;
    struct jread r;
    json_error_t e;
    json_t *v, *v2, *v3, *j;
    int err, err2, err3;

    jdedup_init(&t);
    jread_init(&r, &t);
    r.max_depth = MAX_DEPTH;
    r.max_nodes = MAX_NODES;
    r.level = 0;

    /* 1. against jansson */
    v = read_with(&r, text, size, &next, &err);
    j = json_loadb(text, size, LOAD_FLAGS | JSON_DISABLE_EOF_CHECK, &e);
    if (v) {
        json_t *exact, *shared;

        if (!j || r.nodes != nodes_of(j) || depth_of(j) > MAX_DEPTH || r.nodes > MAX_NODES ||
            next <= text || next > text + size)
            abort();
        same_dump(v, j);
        exact = json_loadb(text, (size_t)(next - text), LOAD_FLAGS, &e);
        if (!exact)
            abort();
        same_dump(v, exact);
        json_decref(exact);
        /* jansson's value through the table is the table's value read */
        shared = jdedup_value(&t, j);
        if (shared != v)
            abort();
        json_decref(shared);
    } else if (err == -EINVAL) {
        if (j && !may_refuse(text, size, j))
            abort();
    } else if (err == -E2BIG) {
        if (j && depth_of(j) <= MAX_DEPTH && nodes_of(j) <= MAX_NODES)
            abort();
    } else {
        abort();
    }

    /* 2. the same text again: the very same value */
    v2 = read_with(&r, text, size, &next2, &err2);
    if (v2 != v || (v && next2 != next) || (!v && err2 != err))
        abort();

    /* 3. members dropped as they are read */
    r.keep = keep;
    r.keep_arg = &asked;
    v3 = read_with(&r, text, size, &next3, &err3);
    if (!v3 != !v || (!v && err3 != err))
        abort();
    if (v3) {
        struct remover rm = {.asked = STRBUF_INIT, .kind = NULL};
        json_t *want = removed(&rm, j, 1);

        if (next3 != next || strcmp(strbuf_str(&asked), strbuf_str(&rm.asked)) != 0)
            abort();
        same_dump(v3, want);
        json_decref(want);
        strbuf_release(&rm.asked);
    }

    /* 4. the caps where the value read just fits them, and one short of that */
    if (v) {
        size_t d = depth_of(j), n = nodes_of(j);

        r.keep = NULL;
        r.level = 2;
        r.max_depth = d + 2;
        r.max_nodes = n;
        if (read_with(&r, text, size, &next2, &err2) != v)
            abort();
        if (d > 0) {
            r.max_depth = d + 1;
            if (read_with(&r, text, size, &next2, &err2) || err2 != -E2BIG)
                abort();
            r.max_depth = d + 2;
        }
        if (n > 1) {
            r.max_nodes = n - 1;
            if (read_with(&r, text, size, &next2, &err2) || err2 != -E2BIG)
                abort();
        }
    }

    json_decref(j);
    strbuf_release(&asked);
    jread_release(&r);
    jdedup_release(&t);
    return 0;
}
