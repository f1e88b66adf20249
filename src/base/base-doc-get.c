/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading a loaded document back: where a value came from, errors that point at it, and the typed
 * field readers configs are checked with. Each reader looks a key up in a mapping and checks the
 * type of what it finds; errors point at the value, else at its key, else at the mapping, since
 * jansson's null/true/false singletons have no position of their own.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base-doc-internal.h"

bool doc_position(const struct doc *doc, const json_t *value, int *ret_line, int *ret_col)
{
    const struct pos_entry *e;

    if (!value || doc_is_singleton(value))
        return false;
    e = doc_pos_find(&doc->pos, value, NULL);
    if (!e)
        return false;
    *ret_line = e->line;
    *ret_col = e->col;
    return true;
}

bool doc_member_position(const struct doc *doc, const json_t *obj, const char *key, int *ret_line,
                         int *ret_col)
{
    const struct pos_entry *e;

    if (!obj || !key)
        return false;
    e = doc_pos_find(&doc->pos, obj, key);
    if (!e)
        return false;
    *ret_line = e->line;
    *ret_col = e->col;
    return true;
}

static int vfail(const struct doc *doc, const struct pos_entry *at, struct diag *d, int err,
                 const char *fmt, va_list ap) _printf_(5, 0);
static int vfail(const struct doc *doc, const struct pos_entry *at, struct diag *d, int err,
                 const char *fmt, va_list ap)
{
    char msg[DIAG_MSG_MAX];

    if (!d)
        return err;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (at)
        return diag_fail_at(d, err, doc->name, at->line, at->col, "%s", msg);
    return diag_fail(d, err, "%s: %s", doc->name, msg);
}

int doc_fail(const struct doc *doc, const json_t *value, struct diag *d, int err, const char *fmt,
             ...)
{
    struct pos_entry at;
    va_list ap;
    bool known;

    known = doc_position(doc, value, &at.line, &at.col);
    va_start(ap, fmt);
    err = vfail(doc, known ? &at : NULL, d, err, fmt, ap);
    va_end(ap);
    return err;
}

/* Fails at the best position for obj's member key: the value's, else the key's, else obj's. */
static int fail_member(const struct doc *doc, const json_t *obj, const char *key,
                       const json_t *value, struct diag *d, const char *fmt, ...) _printf_(6, 7);
static int fail_member(const struct doc *doc, const json_t *obj, const char *key,
                       const json_t *value, struct diag *d, const char *fmt, ...)
{
    const struct pos_entry *e = NULL;
    va_list ap;
    int r;

    if (value && !doc_is_singleton(value))
        e = doc_pos_find(&doc->pos, value, NULL);
    if (!e)
        e = doc_pos_find(&doc->pos, obj, key);
    if (!e)
        e = doc_pos_find(&doc->pos, obj, NULL);
    va_start(ap, fmt);
    r = vfail(doc, e, d, -EINVAL, fmt, ap);
    va_end(ap);
    return r;
}

const char *doc_type_name(const json_t *v)
{
    if (!v)
        return "nothing";
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "mapping";
    case JSON_ARRAY:
        return "sequence";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    case JSON_NULL:
    default:
        return "null";
    }
}

/* Looks key up in obj and checks that its value is of the kind doc_type_name() calls want: the
 * value, NULL when absent and optional, or the error. */
static int get_member(const struct doc *doc, const json_t *obj, const char *key, bool required,
                      const char *want, struct diag *d, json_t **ret)
{
    json_t *v;

    if (!json_is_object(obj))
        return doc_fail(doc, obj, d, -EINVAL, "expected a mapping, got %s", doc_type_name(obj));
    v = json_object_get(obj, key);
    if (!v && required)
        return doc_fail(doc, obj, d, -EINVAL, "missing required key \"%s\"", key);
    if (v && strcmp(doc_type_name(v), want) != 0)
        return fail_member(doc, obj, key, v, d, "\"%s\": expected %s %s, got %s", key,
                           want[0] == 'i' ? "an" : "a", want, doc_type_name(v));
    *ret = v;
    return 0;
}

int doc_get_string(const struct doc *doc, const json_t *obj, const char *key, bool required,
                   const char *def, struct diag *d, const char **ret)
{
    json_t *v = NULL;
    int r;

    r = get_member(doc, obj, key, required, "string", d, &v);
    if (r < 0)
        return r;
    *ret = v ? json_string_value(v) : def;
    return 0;
}

int doc_get_int(const struct doc *doc, const json_t *obj, const char *key, bool required,
                int64_t def, int64_t min, int64_t max, struct diag *d, int64_t *ret)
{
    json_int_t i;
    json_t *v = NULL;
    int r;

    r = get_member(doc, obj, key, required, "integer", d, &v);
    if (r < 0)
        return r;
    if (!v) {
        *ret = def;
        return 0;
    }
    i = json_integer_value(v);
    if (i < min || i > max)
        return fail_member(doc, obj, key, v, d,
                           "\"%s\": %" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]", key,
                           (int64_t)i, min, max);
    *ret = (int64_t)i;
    return 0;
}

int doc_get_bool(const struct doc *doc, const json_t *obj, const char *key, bool required, bool def,
                 struct diag *d, bool *ret)
{
    json_t *v = NULL;
    int r;

    r = get_member(doc, obj, key, required, "boolean", d, &v);
    if (r < 0)
        return r;
    *ret = v ? json_is_true(v) : def;
    return 0;
}

int doc_get_array(const struct doc *doc, const json_t *obj, const char *key, bool required,
                  struct diag *d, json_t **ret)
{
    return get_member(doc, obj, key, required, "sequence", d, ret);
}

int doc_get_object(const struct doc *doc, const json_t *obj, const char *key, bool required,
                   struct diag *d, json_t **ret)
{
    return get_member(doc, obj, key, required, "mapping", d, ret);
}

int doc_check_keys(const struct doc *doc, const json_t *obj, const char *const *allowed,
                   struct diag *d)
{
    const char *key;
    json_t *v = NULL;

    if (!json_is_object(obj))
        return doc_fail(doc, obj, d, -EINVAL, "expected a mapping, got %s", doc_type_name(obj));
    json_object_foreach((json_t *)obj, key, v)
    {
        const struct pos_entry *e;
        size_t i;

        for (i = 0; allowed[i]; i++)
            if (strcmp(allowed[i], key) == 0)
                break;
        if (allowed[i])
            continue;
        e = doc_pos_find(&doc->pos, obj, key);
        if (e)
            return diag_fail_at(d, -EINVAL, doc->name, e->line, e->col, "unknown key \"%s\"", key);
        return fail_member(doc, obj, key, v, d, "unknown key \"%s\"", key);
    }
    return 0;
}
