/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small block-style YAML emitter for jansson values, for the commands that print YAML (CDI specs,
 * allocation results). Strings are written as JSON strings (valid YAML double-quoted scalars) so no
 * value can change type on the way back in; keys made of name characters are written plain. Nesting
 * is capped.
 */
#include <errno.h>
#include <stdbool.h>

#include "base-strbuf.h"
#include "base-yaml.h"

#define YAML_MAX_DEPTH 64

static int yaml_node(struct strbuf *sb, const json_t *v, int indent, int depth);

static int yaml_scalar(struct strbuf *sb, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_STRING:
        return strbuf_add_json_string(sb, json_string_value(v));
    case JSON_INTEGER:
        return strbuf_addf(sb, "%lld", (long long)json_integer_value(v));
    case JSON_REAL:
        return strbuf_addf(sb, "%.17g", json_real_value(v));
    case JSON_TRUE:
        return strbuf_addstr(sb, "true");
    case JSON_FALSE:
        return strbuf_addstr(sb, "false");
    case JSON_OBJECT:
        return strbuf_addstr(sb, "{}");
    case JSON_ARRAY:
        return strbuf_addstr(sb, "[]");
    default:
        return strbuf_addstr(sb, "null");
    }
}

static bool is_block(const json_t *v)
{
    return (json_is_object(v) && json_object_size(v) > 0) ||
           (json_is_array(v) && json_array_size(v) > 0);
}

/* Keys of letters and digits go out plain; anything else (dots, slashes: "example.com/k") is
 * quoted, so no YAML reader can take a key for something else. */
static bool plain_key(const char *k)
{
    if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z')))
        return false;
    for (const char *p = k; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            return false;
    return true;
}

static int yaml_child(struct strbuf *sb, const json_t *v, int indent, int depth)
{
    int r;

    if (!is_block(v)) {
        r = strbuf_addch(sb, ' ');
        if (r >= 0)
            r = yaml_scalar(sb, v);
        return r < 0 ? r : strbuf_addch(sb, '\n');
    }
    r = strbuf_addch(sb, '\n');
    return r < 0 ? r : yaml_node(sb, v, indent, depth + 1);
}

static int yaml_object(struct strbuf *sb, const json_t *obj, int indent, int depth)
{
    const char *key;
    json_t *v;
    int r = 0;

    json_object_foreach((json_t *)obj, key, v)
    {
        r = strbuf_addf(sb, "%*s", indent, "");
        if (r >= 0)
            r = plain_key(key) ? strbuf_addstr(sb, key) : strbuf_add_json_string(sb, key);
        if (r >= 0)
            r = strbuf_addch(sb, ':');
        if (r >= 0)
            r = yaml_child(sb, v, indent + 2, depth);
        if (r < 0)
            return r;
    }
    return 0;
}

/* One element of a block sequence at indent. */
static int yaml_item(struct strbuf *sb, const json_t *v, int indent, int depth)
{
    int r = strbuf_addf(sb, "%*s-", indent, "");

    if (r >= 0 && json_is_object(v) && json_object_size(v) > 0) {
        /* "- key: value" with the other keys aligned under the first */
        _cleanup_strbuf_ struct strbuf item = STRBUF_INIT;
        r = yaml_object(&item, v, indent + 2, depth + 1);
        if (r >= 0)
            r = strbuf_addf(sb, " %s", strbuf_str(&item) + indent + 2);
    } else if (r >= 0) {
        r = yaml_child(sb, v, indent + 2, depth);
    }
    return r;
}

static int yaml_array(struct strbuf *sb, const json_t *arr, int indent, int depth)
{
    size_t i;
    json_t *v;

    json_array_foreach(arr, i, v)
    {
        int r = yaml_item(sb, v, indent, depth);
        if (r < 0)
            return r;
    }
    return 0;
}

static int yaml_node(struct strbuf *sb, const json_t *v, int indent, int depth)
{
    int r;

    if (depth > YAML_MAX_DEPTH)
        return -ELOOP;
    if (json_is_object(v))
        return yaml_object(sb, v, indent, depth);
    if (json_is_array(v))
        return yaml_array(sb, v, indent, depth);
    r = yaml_scalar(sb, v);
    return r < 0 ? r : strbuf_addch(sb, '\n');
}

int yaml_emit(struct strbuf *sb, const json_t *v)
{
    return yaml_node(sb, v, 0, 0);
}

int yaml_emit_item(struct strbuf *sb, const json_t *v, int indent, int depth)
{
    if (depth > YAML_MAX_DEPTH)
        return -ELOOP;
    return yaml_item(sb, v, indent, depth);
}
