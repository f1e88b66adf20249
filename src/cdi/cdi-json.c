/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A spec as JSON or YAML. Keys come in the order of the reference library's Go structs (and so of
 * NVIDIA's files), and optional fields are left out when unset, because runtimes decode strictly
 * and a diff between two generated files should show only what changed. The YAML form is written
 * from the same JSON document with every string double-quoted: JSON's escapes are a subset of
 * YAML's, so no string can change meaning (a device named "0" or a value "yes" stays a string).
 */
#include <errno.h>
#include <string.h>

#include "cdi-internal.h"

/* Sets key to value, taking the reference; a NULL value means the allocation failed. */
static int set_new(json_t *obj, const char *key, json_t *value)
{
    return value && json_object_set_new(obj, key, value) == 0 ? 0 : -ENOMEM;
}

static json_t *strv_json(char *const *list, size_t n_or_max)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n_or_max && list[i]; i++)
        if (json_array_append_new(arr, json_string(list[i])) < 0)
            return json_decref(arr), NULL;
    return arr;
}

static bool strv_empty(char *const *list)
{
    return !list || !list[0];
}

static json_t *node_json(const struct cdi_device_node *n)
{
    _cleanup_json_ json_t *o = json_object();
    int r = o ? set_new(o, "path", json_string(n->path)) : -ENOMEM;
    if (r >= 0 && n->host_path)
        r = set_new(o, "hostPath", json_string(n->host_path));
    if (r >= 0 && n->type)
        r = set_new(o, "type", json_string(n->type));
    if (r >= 0 && (n->set & CDI_NODE_MAJOR))
        r = set_new(o, "major", json_integer(n->major));
    if (r >= 0 && (n->set & CDI_NODE_MINOR))
        r = set_new(o, "minor", json_integer(n->minor));
    if (r >= 0 && (n->set & CDI_NODE_FILE_MODE))
        r = set_new(o, "fileMode", json_integer(n->file_mode));
    if (r >= 0 && n->permissions)
        r = set_new(o, "permissions", json_string(n->permissions));
    if (r >= 0 && (n->set & CDI_NODE_UID))
        r = set_new(o, "uid", json_integer(n->uid));
    if (r >= 0 && (n->set & CDI_NODE_GID))
        r = set_new(o, "gid", json_integer(n->gid));
    return r < 0 ? NULL : TAKE_PTR(o);
}

static json_t *hook_json(const struct cdi_hook *h)
{
    _cleanup_json_ json_t *o = json_object();
    int r = o ? set_new(o, "hookName", json_string(h->hook_name)) : -ENOMEM;
    if (r >= 0)
        r = set_new(o, "path", json_string(h->path));
    if (r >= 0 && !strv_empty(h->args))
        r = set_new(o, "args", strv_json(h->args, SIZE_MAX));
    if (r >= 0 && !strv_empty(h->env))
        r = set_new(o, "env", strv_json(h->env, SIZE_MAX));
    if (r >= 0 && h->timeout > 0)
        r = set_new(o, "timeout", json_integer(h->timeout));
    return r < 0 ? NULL : TAKE_PTR(o);
}

static json_t *mount_json(const struct cdi_mount *m)
{
    _cleanup_json_ json_t *o = json_object();
    int r = o ? set_new(o, "hostPath", json_string(m->host_path)) : -ENOMEM;
    if (r >= 0)
        r = set_new(o, "containerPath", json_string(m->container_path));
    if (r >= 0 && !strv_empty(m->options))
        r = set_new(o, "options", strv_json(m->options, SIZE_MAX));
    if (r >= 0 && m->type)
        r = set_new(o, "type", json_string(m->type));
    return r < 0 ? NULL : TAKE_PTR(o);
}

typedef json_t *(*item_json_fn)(const void *item);

static json_t *list_json(const struct vec *v, item_json_fn fn)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < v->len; i++)
        if (json_array_append_new(arr, fn(vec_at(v, i))) < 0)
            return json_decref(arr), NULL;
    return arr;
}

static json_t *node_item(const void *p)
{
    return node_json(p);
}

static json_t *hook_item(const void *p)
{
    return hook_json(p);
}

static json_t *mount_item(const void *p)
{
    return mount_json(p);
}

static json_t *gids_json(const struct vec *v)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < v->len; i++)
        if (json_array_append_new(arr, json_integer(*VEC_AT(v, uint32_t, i))) < 0)
            return json_decref(arr), NULL;
    return arr;
}

static json_t *edits_json(const struct cdi_edits *e)
{
    _cleanup_json_ json_t *o = json_object();
    int r = o ? 0 : -ENOMEM;
    if (r >= 0 && e->env.len)
        r = set_new(o, "env", strv_json(e->env.items, e->env.len));
    if (r >= 0 && e->device_nodes.len)
        r = set_new(o, "deviceNodes", list_json(&e->device_nodes, node_item));
    if (r >= 0 && e->hooks.len)
        r = set_new(o, "hooks", list_json(&e->hooks, hook_item));
    if (r >= 0 && e->mounts.len)
        r = set_new(o, "mounts", list_json(&e->mounts, mount_item));
    if (r >= 0 && e->additional_gids.len)
        r = set_new(o, "additionalGids", gids_json(&e->additional_gids));
    return r < 0 ? NULL : TAKE_PTR(o);
}

static json_t *annotations_json(const struct vec *v)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < v->len; i++) {
        const struct cdi_annotation *a = VEC_AT(v, struct cdi_annotation, i);
        if (set_new(o, a->key, json_string(a->value)) < 0)
            return json_decref(o), NULL;
    }
    return o;
}

static json_t *device_json(const struct cdi_device *dev)
{
    _cleanup_json_ json_t *o = json_object();
    int r = o ? set_new(o, "name", json_string(dev->name)) : -ENOMEM;
    if (r >= 0 && dev->annotations.len)
        r = set_new(o, "annotations", annotations_json(&dev->annotations));
    if (r >= 0)
        r = set_new(o, "containerEdits", edits_json(&dev->edits));
    return r < 0 ? NULL : TAKE_PTR(o);
}

static json_t *devices_json(const struct vec *v)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < v->len; i++)
        if (json_array_append_new(arr, device_json(*VEC_AT(v, struct cdi_device *, i))) < 0)
            return json_decref(arr), NULL;
    return arr;
}

int cdi_spec_to_json(const struct cdi_spec *spec, struct diag *d, json_t **ret)
{
    _cleanup_json_ json_t *o = NULL;
    int r = cdi_spec_validate(spec, d);
    if (r < 0)
        return r;
    o = json_object();
    r = o ? set_new(o, "cdiVersion", json_string(cdi_spec_version(spec))) : -ENOMEM;
    if (r >= 0)
        r = set_new(o, "kind", json_string(spec->kind));
    if (r >= 0 && spec->annotations.len)
        r = set_new(o, "annotations", annotations_json(&spec->annotations));
    if (r >= 0)
        r = set_new(o, "devices", devices_json(&spec->devices));
    if (r >= 0 && !cdi_edits_is_empty(&spec->edits))
        r = set_new(o, "containerEdits", edits_json(&spec->edits));
    /* json_string refuses text that is not UTF-8; paths come from outside, so say so. */
    if (r < 0)
        return diag_fail(d, r,
                         "CDI spec %s: cannot build the JSON document (out of memory, or "
                         "a string that is not UTF-8)",
                         spec->kind);
    *ret = TAKE_PTR(o);
    return 0;
}

static int dump_json(const json_t *doc, struct strbuf *sb)
{
    char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!text)
        return -ENOMEM;
    int r = strbuf_addstr(sb, text);
    free(text);
    return r < 0 ? r : strbuf_addch(sb, '\n');
}

int cdi_spec_format(const struct cdi_spec *spec, enum cdi_format format, struct diag *d, char **ret,
                    size_t *ret_len)
{
    _cleanup_json_ json_t *doc = NULL;
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    int r = cdi_spec_to_json(spec, d, &doc);
    if (r < 0)
        return r;
    if (format == CDI_FORMAT_YAML)
        r = strbuf_addstr(&sb, "---\n");
    if (r >= 0)
        r = format == CDI_FORMAT_YAML ? yaml_emit(&sb, doc) : dump_json(doc, &sb);
    if (r < 0)
        return diag_fail(d, r, "CDI spec %s: cannot format it: %s", spec->kind, strerror(-r));
    size_t len;
    char *text = strbuf_detach(&sb, &len);
    if (!text)
        return -ENOMEM;
    *ret = text;
    if (ret_len)
        *ret_len = len;
    return 0;
}

int cdi_format_parse(const char *s, enum cdi_format *ret)
{
    if (s && strcmp(s, "json") == 0)
        *ret = CDI_FORMAT_JSON;
    else if (s && (strcmp(s, "yaml") == 0 || strcmp(s, "yml") == 0))
        *ret = CDI_FORMAT_YAML;
    else
        return -EINVAL;
    return 0;
}

const char *cdi_format_extension(enum cdi_format format)
{
    return format == CDI_FORMAT_YAML ? "yaml" : "json";
}
