/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What `gpuplane allocate` and `gpuplane schedule` read the same way: the -f files (manifest
 * limits, '-' for stdin), --feature-gates and --budget, and how they print a document.
 *
 * Files are streamed (doc_load_file_each): each object goes to the command as soon as it is
 * parsed and nothing else is kept, so memory holds what the command keeps, once. No positions are
 * kept either; a message about an object gets its FILE:LINE:COL by reading that object again with
 * positions (doc_where_reload) and following the field path the message names
 * ("ResourceClaim default/c1: spec.devices.requests[0].exactly.count: must be >= 1").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base-file.h"
#include "cli.h"
#include "dalloccmd.h"

void dalloccmd_input_init(struct dalloccmd_input *in)
{
    *in = (struct dalloccmd_input){0};
    dalloc_gates_default(&in->gates);
}

void dalloccmd_input_release(struct dalloccmd_input *in)
{
    (void)in;
}

int dalloccmd_input_option(struct dalloccmd_input *in, const char *cmd, int c, const char *arg)
{
    struct diag d;
    char *end;

    switch (c) {
    case DALLOCCMD_OPT_GATES:
        diag_init(&d);
        if (dalloc_gates_parse(&in->gates, arg, &d) < 0)
            return cli_usage_error(cmd, "--feature-gates: %s", d.msg);
        return 1;
    case DALLOCCMD_OPT_BUDGET:
        errno = 0;
        in->budget = strtoull(arg, &end, 10);
        if (errno || *end || end == arg || in->budget == 0)
            return cli_usage_error(cmd, "--budget: not a positive number: %s", arg);
        return 1;
    case 'f':
        if (in->nfiles >= DALLOCCMD_MAX_FILES)
            return cli_usage_error(cmd, "more than %d files", DALLOCCMD_MAX_FILES);
        in->files[in->nfiles++] = arg;
        return 1;
    default:
        return 0;
    }
}

/* ---- which object and field a message is about ----------------------------------------------- */

#define LIST_DEPTH 5 /* Lists in Lists: the allocator takes 4 levels */

/* "Kind ns/name: field.path[0].x: text", "Kind name: ...", or "Kind: field ..." */
struct subject {
    char kind[64];
    char ns[256], name[256];
    bool named;
    const char *field; /* into the message; NULL when it names none */
    size_t field_len;
};

static bool parse_subject(const char *msg, struct subject *s)
{
    const char *p = msg, *slash, *name;
    size_t n;

    *s = (struct subject){.field = NULL};
    if (*p < 'A' || *p > 'Z')
        return false;
    while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z'))
        p++;
    n = (size_t)(p - msg);
    if (n >= sizeof(s->kind))
        return false;
    memcpy(s->kind, msg, n);
    if (*p == ' ') {
        name = ++p;
        while (*p && *p != ' ' && !(p[0] == ':' && p[1] == ' '))
            p++;
        if (p[0] != ':' || p == name)
            return false;
        slash = memchr(name, '/', (size_t)(p - name));
        if (slash) {
            if ((size_t)(slash - name) >= sizeof(s->ns))
                return false;
            memcpy(s->ns, name, (size_t)(slash - name));
            name = slash + 1;
        }
        if ((size_t)(p - name) >= sizeof(s->name) || p == name)
            return false;
        memcpy(s->name, name, (size_t)(p - name));
        s->named = true;
    }
    if (p[0] != ':' || p[1] != ' ')
        return false;
    p += 2;
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) {
        s->field = p;
        while (*p && *p != ' ' && *p != ':')
            p++;
        s->field_len = (size_t)(p - s->field);
    }
    return true;
}

static const char *str_at(const json_t *o, const char *a, const char *b)
{
    const json_t *v = json_object_get(o, a);

    return json_string_value(b ? json_object_get(v, b) : v);
}

static bool kind_is_list(const json_t *v)
{
    const char *kind = str_at(v, "kind", NULL);
    size_t n = kind ? strlen(kind) : 0;

    return n >= 4 && strcmp(kind + n - 4, "List") == 0;
}

/* The object of v (or of the Lists in it) that the subject names. */
static json_t *find_subject(json_t *v, const struct subject *s, unsigned depth)
{
    const char *kind = str_at(v, "kind", NULL), *ns;
    json_t *item, *found;
    size_t i;

    if (!kind)
        return NULL;
    if (kind_is_list(v) && depth < LIST_DEPTH) {
        json_array_foreach(json_object_get(v, "items"), i, item)
        {
            if ((found = find_subject(item, s, depth + 1)))
                return found;
        }
        return NULL;
    }
    if (!s->named || strcmp(kind, s->kind) != 0)
        return NULL;
    if (!str_at(v, "metadata", "name") || strcmp(str_at(v, "metadata", "name"), s->name) != 0)
        return NULL;
    ns = str_at(v, "metadata", "namespace");
    if (s->ns[0] && strcmp(ns ? ns : "default", s->ns) != 0)
        return NULL;
    return v;
}

/* The position of the deepest value of obj along the field path ("spec.devices[0].name"; keys
 * may hold dots, the longest that fits is taken): the value's own, or its key's for jansson's
 * null/true/false singletons, which have none. */
static bool field_position(const struct doc *doc, json_t *obj, const char *path, size_t n,
                           int *ret_line, int *ret_col)
{
    json_t *cur = obj;
    bool known = doc_position(doc, obj, ret_line, ret_col);
    size_t i = 0;

    while (path && i < n) {
        json_t *next = NULL, *v;
        const char *key, *best = NULL;
        size_t len = 0;

        if (path[i] == '[') {
            char *end;
            unsigned long long idx = strtoull(path + i + 1, &end, 10);

            if (end == path + i + 1 || *end != ']' || (size_t)(end - path) > n ||
                !(next = json_array_get(cur, (size_t)idx)))
                break;
            i = (size_t)(end - path) + 1;
        } else {
            json_object_foreach(cur, key, v)
            {
                size_t kl = strlen(key);

                if (kl > len && kl <= n - i && strncmp(path + i, key, kl) == 0 &&
                    (i + kl == n || path[i + kl] == '.' || path[i + kl] == '[')) {
                    best = key;
                    len = kl;
                }
            }
            if (!best)
                break;
            next = json_object_get(cur, best);
            i += len;
        }
        if (i < n && path[i] == '.')
            i++;
        if (doc_position(doc, next, ret_line, ret_col) ||
            (best && doc_member_position(doc, cur, best, ret_line, ret_col)))
            known = true;
        cur = next;
    }
    return known;
}

/* Where in its file the subject of msg is, in the value `where` names (v as loaded): the named
 * object inside it, else v itself. */
static bool position_in(const char *msg, json_t *v, const struct doc_where *where, int *ret_line,
                        int *ret_col)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    struct subject s;
    bool about = parse_subject(msg, &s);
    json_t *root, *obj;
    struct diag d;

    if (about && s.named && !find_subject(v, &s, 0))
        about = false; /* the message is about something else (a class the claim names) */
    if (doc_where_reload(where, &d, &doc) < 0)
        return false;
    root = doc_root(doc, 0);
    obj = about && s.named ? find_subject(root, &s, 0) : root;
    if (!obj)
        return false;
    return field_position(doc, obj, about ? s.field : NULL, about ? s.field_len : 0, ret_line,
                          ret_col);
}

/* ---- loading --------------------------------------------------------------------------------- */

struct loader {
    dalloccmd_add_fn add;
    void *target;
    /* add failed with this error and message, pointing at line:col (0: unknown); the load still
     * ends with a syntax error instead when the input has one */
    int refused;
    char msg[DIAG_MSG_MAX];
    int line, col;
};

static int on_value(void *arg, json_t *v, const struct doc_where *where, struct diag *d)
{
    struct loader *l = arg;
    _cleanup_json_ json_t *wrap = NULL;
    int r;

    if (where->item == DOC_WHOLE && json_is_null(v))
        return 0; /* an empty document */
    /* A List inside a List stays inside one, so that it nests exactly as deep as in the file. */
    if (where->item != DOC_WHOLE && kind_is_list(v)) {
        wrap = json_pack("{s:s, s:[O]}", "kind", "List", "items", v);
        if (!wrap)
            return -ENOMEM;
    }
    r = l->add(l->target, wrap ? wrap : v, d);
    if (r < 0) {
        l->refused = r;
        snprintf(l->msg, sizeof(l->msg), "%s", d->msg);
        if (!position_in(d->msg, v, where, &l->line, &l->col))
            l->line = l->col = 0;
    }
    return r;
}

static double now_s(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int load_one(struct dalloccmd_input *in, const char *cmd, size_t i,
                    const struct doc_prep *prep, dalloccmd_add_fn add, void *target)
{
    const char *path = strcmp(in->files[i], "-") == 0 ? "/dev/stdin" : in->files[i];
    const struct doc_limits *lim = &doc_limits_manifest;
    struct loader l = {.add = add, .target = target};
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    struct diag d;
    int r;

    diag_init(&d);
    r = file_read_all(path, lim->max_bytes, &text, &len);
    if (r == -EFBIG)
        diag_fail(&d, r, "%s: larger than %zu bytes", path, lim->max_bytes);
    else if (r < 0)
        diag_fail(&d, r, "%s: %s", path, strerror(-r));
    else
        r = doc_load_string_each_prep(path, text, len, lim, prep, on_value, &l, &d);
    in->bytes += len;
    if (r >= 0)
        return 0;
    if (!l.refused || r != l.refused || strcmp(d.msg, l.msg) != 0)
        fprintf(stderr, "gpuplane %s: %s\n", cmd, d.msg[0] ? d.msg : strerror(-r));
    else if (l.line > 0)
        fprintf(stderr, "gpuplane %s: %s:%d:%d: %s\n", cmd, path, l.line, l.col, d.msg);
    else
        fprintf(stderr, "gpuplane %s: %s: %s\n", cmd, path, d.msg);
    return r;
}

int dalloccmd_input_load(struct dalloccmd_input *in, const char *cmd, dalloccmd_add_fn add,
                         void *target)
{
    return dalloccmd_input_load_prep(in, cmd, NULL, add, target);
}

int dalloccmd_input_load_prep(struct dalloccmd_input *in, const char *cmd,
                              const struct doc_prep *prep, dalloccmd_add_fn add, void *target)
{
    double t0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    int r = 0;

    in->bytes = 0;
    for (size_t i = 0; i < in->nfiles && r >= 0; i++)
        r = load_one(in, cmd, i, prep, add, target);
    in->load_s = now_s(CLOCK_MONOTONIC) - t0;
    in->load_cpu_s = now_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    return r;
}

/* ---- locating an object after loading -------------------------------------------------------- */

struct locate {
    const struct subject *s;
    int line, col;
    bool found;
};

static int locate_value(void *arg, json_t *v, const struct doc_where *where, struct diag *d)
{
    struct locate *l = arg;
    _cleanup_(doc_freep) struct doc *doc = NULL;
    json_t *obj;

    if (!find_subject(v, l->s, 0))
        return 0;
    if (doc_where_reload(where, d, &doc) < 0)
        return 1;
    obj = find_subject(doc_root(doc, 0), l->s, 0);
    l->found = obj && field_position(doc, obj, l->s->field, l->s->field_len, &l->line, &l->col);
    return 1;
}

void dalloccmd_input_locate(const struct dalloccmd_input *in, struct diag *d)
{
    struct subject s;
    char msg[DIAG_MSG_MAX];

    if (!parse_subject(d->msg, &s) || !s.named)
        return;
    for (size_t i = 0; i < in->nfiles; i++) {
        struct locate l = {.s = &s};
        struct stat st;
        struct diag ignored;

        /* Only what can be read again as it was: not stdin, a pipe or a FIFO. */
        if (strcmp(in->files[i], "-") == 0 || stat(in->files[i], &st) < 0 || !S_ISREG(st.st_mode))
            continue;
        if (doc_load_file_each(in->files[i], &doc_limits_manifest, locate_value, &l, &ignored) <= 0)
            continue;
        if (!l.found)
            return;
        snprintf(msg, sizeof(msg), "%s", d->msg);
        diag_fail_at(d, -EINVAL, in->files[i], l.line, l.col, "%s", msg);
        return;
    }
}

/* ---- printing -------------------------------------------------------------------------------- */

int dalloccmd_print(json_t *doc, bool as_json)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    char *s;

    if (as_json) {
        s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        if (!s)
            return -ENOMEM;
        puts(s);
        free(s);
        return 0;
    }
    if (yaml_emit(&sb, doc) < 0)
        return -ENOMEM;
    fputs(strbuf_str(&sb), stdout);
    return 0;
}
