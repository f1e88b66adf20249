/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Why a pod did not fit, per node: the allocator's message with " on node NODE" removed and the
 * pod's claim names replaced by their positions, interned, so that one text stands for the same
 * failure on every node and for every pod of the same shape; counted per pod and written back
 * with that pod's claim names.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base-doc.h"
#include "sched-internal.h"
#include "sched-nodes.h"

/* Removes " on node NODE" from msg so that reasons count across nodes. */
static void strip_node(char *msg, const char *node)
{
    char pat[300];
    char *p;
    size_t n;

    if ((size_t)snprintf(pat, sizeof(pat), " on node %s", node) >= sizeof(pat))
        return;
    n = strlen(pat);
    while ((p = strstr(msg, pat)) && (p[n] == '\0' || p[n] == ';' || p[n] == ',' || p[n] == ' '))
        memmove(p, p + n, strlen(p + n) + 1);
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

/* Claim j's "namespace/name" in msg as "\1j\2", so that pods of one shape share the reason. */
static int names_to_tokens(const char *msg, json_t *mine, struct strbuf *out)
{
    size_t n = json_array_size(mine), j;
    _cleanup_free_ char(*keys)[512] = calloc(n ? n : 1, sizeof(*keys));
    int r = 0;

    if (!keys)
        return -ENOMEM;
    for (j = 0; j < n; j++)
        if (key_of(json_array_get(mine, j), keys[j], sizeof(keys[j])) < 0)
            keys[j][0] = '\0';
    while (*msg && r >= 0) {
        size_t len = 0;

        for (j = 0; j < n && !len; j++) {
            len = strlen(keys[j]);
            if (!len || strncmp(msg, keys[j], len) != 0 || name_char(msg[len]))
                len = 0;
        }
        r = len ? strbuf_addf(out, "\1%zu\2", j - 1) : strbuf_addch(out, *msg);
        msg += len ? len : 1;
    }
    return r;
}

/* The reverse of names_to_tokens for the claims of the pod being reported. */
static int tokens_to_names(const char *msg, json_t *mine, struct strbuf *out)
{
    char key[512];
    int r = 0;

    while (*msg && r >= 0) {
        const char *tok = strchr(msg, '\1');
        char *end;
        size_t j;

        if (!tok)
            return strbuf_addstr(out, msg);
        if ((r = strbuf_add(out, msg, (size_t)(tok - msg))) < 0)
            return r;
        j = strtoul(tok + 1, &end, 10);
        if (key_of(json_array_get(mine, j), key, sizeof(key)) < 0)
            snprintf(key, sizeof(key), "?");
        r = strbuf_addstr(out, key);
        msg = *end == '\2' ? end + 1 : end;
    }
    return r;
}

/* The id of a reason text, interned. */
static int intern(struct sched *s, const char *msg, size_t *ret)
{
    json_t *id = json_object_get(s->reason_ids, msg);

    if (!id) {
        id = json_integer((json_int_t)json_array_size(s->reasons));
        if (!id || json_object_set_new(s->reason_ids, msg, id) < 0 ||
            json_array_append_new(s->reasons, json_string(msg)) < 0)
            return -ENOMEM;
    }
    *ret = (size_t)json_integer_value(id);
    return 0;
}

int sched_tally_add(struct tally **t, size_t *n, size_t id)
{
    for (size_t i = 0; i < *n; i++)
        if ((*t)[i].id == id) {
            (*t)[i].n++;
            return 0;
        }
    struct tally *m = reallocarray(*t, *n + 1, sizeof(**t));
    if (!m)
        return -ENOMEM;
    *t = m;
    m[(*n)++] = (struct tally){id, 1};
    return 0;
}

/* {reason: node count} with the names of the pod's claims. */
json_t *sched_tally_json(struct sched *s, const struct tally *t, size_t n, json_t *mine)
{
    json_t *out = json_object();

    for (size_t i = 0; out && i < n; i++) {
        _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;

        if (tokens_to_names(json_string_value(json_array_get(s->reasons, t[i].id)), mine, &sb) <
                0 ||
            json_object_set_new(out, strbuf_str(&sb), json_integer((json_int_t)t[i].n)) < 0)
            out = (json_decref(out), NULL);
    }
    return out;
}

/* A node's reason in kube-scheduler's words: the DynamicResources plugin says only "cannot
 * allocate all claims" where the allocator says which claim and request failed, and "resourceclaim
 * not available on the node" for a node other than the one a claim was allocated for. */
static const char *scheduler_words(const char *text)
{
    size_t n = strlen(DALLOC_REASON_NO_FIT);

    if (strncmp(text, DALLOC_REASON_NO_FIT, n) == 0 && (text[n] == '\0' || text[n] == ':'))
        return DALLOC_REASON_NO_FIT;
    if (strcmp(text, SCHED_REASON_PINNED) == 0)
        return SCHED_REASON_CLAIM_NODE;
    return text;
}

static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

/* "0/N nodes are available: " and the "COUNT REASON" entries of counts, sorted, ", "-joined. */
static json_t *fit_error(json_t *counts, size_t n_nodes)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    _cleanup_free_ char **items = calloc(json_object_size(counts) + 1, sizeof(*items));
    const char *k;
    json_t *v, *out = NULL;
    size_t n = 0, i;

    if (!items)
        return NULL;
    json_object_foreach(counts, k, v)
    {
        _cleanup_strbuf_ struct strbuf one = STRBUF_INIT;
        if (strbuf_addf(&one, "%lld %s", (long long)json_integer_value(v), k) < 0)
            goto out;
        items[n] = strbuf_detach(&one, NULL);
        if (!items[n++])
            goto out;
    }
    qsort(items, n, sizeof(*items), cmp_str);
    if (strbuf_addf(&sb, "0/%zu nodes are available:", n_nodes) < 0)
        goto out;
    for (i = 0; i < n; i++)
        if (strbuf_addf(&sb, "%s%s", i ? ", " : " ", items[i]) < 0)
            goto out;
    if (strbuf_addch(&sb, '.') < 0)
        goto out;
    out = json_string(strbuf_str(&sb));
out:
    for (i = 0; i < n; i++)
        free(items[i]);
    return out;
}

json_t *sched_tally_message(struct sched *s, const struct tally *t, size_t n, json_t *mine,
                            size_t n_nodes)
{
    _cleanup_json_ json_t *counts = json_object();

    if (n_nodes == 0)
        return json_string("no nodes available to schedule pods");
    for (size_t i = 0; counts && i < n; i++) {
        _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
        const char *words;
        json_t *c;

        if (tokens_to_names(json_string_value(json_array_get(s->reasons, t[i].id)), mine, &sb) < 0)
            return NULL;
        words = scheduler_words(strbuf_str(&sb));
        c = json_object_get(counts, words);
        if (json_object_set_new(counts, words,
                                json_integer(json_integer_value(c) + (json_int_t)t[i].n)) < 0)
            return NULL;
    }
    return counts ? fit_error(counts, n_nodes) : NULL;
}

int sched_reason_fixed(struct sched *s, const char *text, size_t *ret)
{
    return intern(s, text, ret);
}

int sched_reason_id(struct sched *s, char *msg, const char *node, json_t *mine, size_t *ret)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    int r;

    strip_node(msg, node);
    if ((r = names_to_tokens(msg, mine, &sb)) < 0)
        return r;
    return intern(s, strbuf_str(&sb), ret);
}
