/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading a spec file back into the model, as a runtime's CDI cache reads what it finds in
 * /etc/cdi and /var/run/cdi: one JSON or YAML document, decoded strictly (an unknown key is an
 * error, as in the reference library), every field type-checked, then the whole spec checked by
 * cdi_spec_validate. Errors carry the file position of the value at fault.
 *
 * The model has no room for intelRdt and netDevices (no GPU spec uses them), so a spec that sets
 * them is refused with a message that says so rather than loaded with its edits silently dropped.
 */
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "cdi-internal.h"

/* Spec files are written by tools, small, and read by privileged processes: 4 MiB is plenty for
 * the spec of a node with 64 GPUs split into MIG devices. */
#define CDI_LOAD_MAX_BYTES ((size_t)4 << 20)

struct loader {
    const struct doc *doc;
    struct diag *d;
};

static int fail(const struct loader *l, const json_t *at, int err, const char *fmt, ...)
    _printf_(4, 5);

static int fail(const struct loader *l, const json_t *at, int err, const char *fmt, ...)
{
    char msg[DIAG_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return doc_fail(l->doc, at, l->d, err, "%s", msg);
}

/* Puts the position of at (and what) in front of the reason a model call left in l->d. */
static int refail(const struct loader *l, const json_t *at, int err, const char *what)
{
    char why[DIAG_MSG_MAX];
    snprintf(why, sizeof(why), "%s", l->d ? l->d->msg : "");
    return doc_fail(l->doc, at, l->d, err, "%s: %s", what, why);
}

/* A string list: a sequence of strings, copied into a NULL-terminated array (none: empty). */
static int read_strv(const struct loader *l, const json_t *obj, const char *key, char ***ret)
{
    json_t *arr = NULL, *item;
    size_t i;
    int r = doc_get_array(l->doc, obj, key, false, l->d, &arr);
    if (r < 0)
        return r;
    size_t n = arr ? json_array_size(arr) : 0;
    if (n > CDI_LIST_MAX)
        return fail(l, arr, -E2BIG, "\"%s\": too many entries", key);
    char **list = calloc(n + 1, sizeof(char *));
    if (!list)
        return -ENOMEM;
    json_array_foreach(arr, i, item)
    {
        if (!json_is_string(item)) {
            cdi_strv_free(list);
            return fail(l, item, -EINVAL, "\"%s\": expected a list of strings", key);
        }
        list[i] = strdup(json_string_value(item));
        if (!list[i]) {
            cdi_strv_free(list);
            return -ENOMEM;
        }
    }
    *ret = list;
    return 0;
}

static int read_env(const struct loader *l, const json_t *edits, struct cdi_edits *e)
{
    json_t *arr = NULL, *item;
    size_t i;
    int r = doc_get_array(l->doc, edits, "env", false, l->d, &arr);
    json_array_foreach(arr, i, item)
    {
        if (r < 0)
            break;
        const char *s = json_string_value(item);
        const char *eq = s ? strchr(s, '=') : NULL;
        if (!eq || eq == s)
            return fail(l, item, -EINVAL, "env entry %s: expected \"NAME=value\"",
                        s ? s : doc_type_name(item));
        _cleanup_free_ char *name = strndup(s, (size_t)(eq - s));
        r = name ? cdi_edits_add_env(e, name, eq + 1) : -ENOMEM;
    }
    return r;
}

/* An optional integer member into *ret, marking bit in *set when present. */
static int read_number(const struct loader *l, const json_t *obj, const char *key, int64_t min,
                       int64_t max, unsigned bit, unsigned *set, int64_t *ret)
{
    if (!json_object_get(obj, key))
        return 0;
    int r = doc_get_int(l->doc, obj, key, true, 0, min, max, l->d, ret);
    if (r >= 0)
        *set |= bit;
    return r;
}

static int read_node(const struct loader *l, const json_t *o, struct cdi_edits *e)
{
    static const char *const keys[] = {"path",     "hostPath",    "type", "major", "minor",
                                       "fileMode", "permissions", "uid",  "gid",   NULL};
    struct cdi_device_node n = {0};
    int64_t mode = 0, uid = 0, gid = 0;
    int r = json_is_object(o) ? doc_check_keys(l->doc, o, keys, l->d)
                              : fail(l, o, -EINVAL, "%s: expected a mapping", "deviceNodes entry");
    if (r >= 0)
        r = doc_get_string(l->doc, o, "path", true, NULL, l->d, &n.path);
    if (r >= 0)
        r = doc_get_string(l->doc, o, "hostPath", false, NULL, l->d, &n.host_path);
    if (r >= 0)
        r = doc_get_string(l->doc, o, "type", false, NULL, l->d, &n.type);
    if (r >= 0)
        r = doc_get_string(l->doc, o, "permissions", false, NULL, l->d, &n.permissions);
    if (r >= 0)
        r = read_number(l, o, "major", INT64_MIN, INT64_MAX, CDI_NODE_MAJOR, &n.set, &n.major);
    if (r >= 0)
        r = read_number(l, o, "minor", INT64_MIN, INT64_MAX, CDI_NODE_MINOR, &n.set, &n.minor);
    if (r >= 0)
        r = read_number(l, o, "fileMode", 0, UINT32_MAX, CDI_NODE_FILE_MODE, &n.set, &mode);
    if (r >= 0)
        r = read_number(l, o, "uid", 0, UINT32_MAX, CDI_NODE_UID, &n.set, &uid);
    if (r >= 0)
        r = read_number(l, o, "gid", 0, UINT32_MAX, CDI_NODE_GID, &n.set, &gid);
    if (r < 0)
        return r;
    n.file_mode = (uint32_t)mode;
    n.uid = (uint32_t)uid;
    n.gid = (uint32_t)gid;
    r = cdi_edits_add_device_node(e, &n);
    if (r == -EEXIST)
        return fail(l, o, r, "device node %s: listed twice with different values", n.path);
    return r;
}

static int read_mount(const struct loader *l, const json_t *o, struct cdi_edits *e)
{
    static const char *const keys[] = {"hostPath", "containerPath", "options", "type", NULL};
    const char *host = NULL, *ctr = NULL, *type = NULL;
    char **options = NULL;
    int r = json_is_object(o) ? doc_check_keys(l->doc, o, keys, l->d)
                              : fail(l, o, -EINVAL, "%s: expected a mapping", "mounts entry");
    if (r >= 0)
        r = doc_get_string(l->doc, o, "hostPath", true, NULL, l->d, &host);
    if (r >= 0)
        r = doc_get_string(l->doc, o, "containerPath", true, NULL, l->d, &ctr);
    if (r >= 0)
        r = doc_get_string(l->doc, o, "type", false, NULL, l->d, &type);
    if (r >= 0)
        r = read_strv(l, o, "options", &options);
    if (r >= 0)
        r = cdi_edits_add_mount(e, host, ctr, type, (const char *const *)options);
    cdi_strv_free(options);
    if (r == -EEXIST)
        return fail(l, o, r, "mount at %s: listed twice with different values", ctr);
    return r;
}

static int read_hook(const struct loader *l, const json_t *o, struct cdi_edits *e)
{
    static const char *const keys[] = {"hookName", "path", "args", "env", "timeout", NULL};
    const char *name = NULL, *path = NULL;
    char **args = NULL, **env = NULL;
    int64_t timeout = 0;
    int r = json_is_object(o) ? doc_check_keys(l->doc, o, keys, l->d)
                              : fail(l, o, -EINVAL, "%s: expected a mapping", "hooks entry");
    if (r >= 0)
        r = doc_get_string(l->doc, o, "hookName", true, NULL, l->d, &name);
    if (r >= 0)
        r = doc_get_string(l->doc, o, "path", true, NULL, l->d, &path);
    if (r >= 0)
        r = doc_get_int(l->doc, o, "timeout", false, 0, 1, UINT32_MAX, l->d, &timeout);
    if (r >= 0)
        r = read_strv(l, o, "args", &args);
    if (r >= 0)
        r = read_strv(l, o, "env", &env);
    if (r >= 0)
        r = cdi_edits_add_hook(e, name, path, (const char *const *)args, (const char *const *)env,
                               (unsigned)timeout);
    cdi_strv_free(args);
    cdi_strv_free(env);
    return r;
}

typedef int (*read_item_fn)(const struct loader *l, const json_t *o, struct cdi_edits *e);

static int read_list(const struct loader *l, const json_t *edits, const char *key, read_item_fn fn,
                     struct cdi_edits *e)
{
    json_t *arr = NULL, *item;
    size_t i;
    int r = doc_get_array(l->doc, edits, key, false, l->d, &arr);
    json_array_foreach(arr, i, item)
    {
        if (r < 0)
            break;
        r = fn(l, item, e);
    }
    return r;
}

static int read_gids(const struct loader *l, const json_t *edits, struct cdi_edits *e)
{
    json_t *arr = NULL, *item;
    size_t i;
    int r = doc_get_array(l->doc, edits, "additionalGids", false, l->d, &arr);
    json_array_foreach(arr, i, item)
    {
        if (r < 0)
            break;
        json_int_t v = json_is_integer(item) ? json_integer_value(item) : -1;
        if (v < 0 || v > UINT32_MAX)
            return fail(l, item, -EINVAL, "%s: expected a group id (0 to 4294967295)",
                        "additionalGids");
        r = cdi_edits_add_gid(e, (uint32_t)v);
    }
    return r;
}

/* containerEdits = { env, deviceNodes, mounts, hooks, additionalGids } */
static int read_edits(const struct loader *l, const json_t *edits, struct cdi_edits *e)
{
    static const char *const keys[] = {
        "env", "deviceNodes", "mounts", "hooks", "additionalGids", "intelRdt", "netDevices", NULL};
    int r = doc_check_keys(l->doc, edits, keys, l->d);
    if (r < 0)
        return r;
    if (json_object_get(edits, "intelRdt"))
        return fail(l, json_object_get(edits, "intelRdt"), -EOPNOTSUPP,
                    "%s: not supported by gpuplane's CDI model", "intelRdt");
    if (json_object_get(edits, "netDevices"))
        return fail(l, json_object_get(edits, "netDevices"), -EOPNOTSUPP,
                    "%s: not supported by gpuplane's CDI model", "netDevices");
    r = read_env(l, edits, e);
    if (r >= 0)
        r = read_list(l, edits, "deviceNodes", read_node, e);
    if (r >= 0)
        r = read_list(l, edits, "mounts", read_mount, e);
    if (r >= 0)
        r = read_list(l, edits, "hooks", read_hook, e);
    if (r >= 0)
        r = read_gids(l, edits, e);
    return r;
}

typedef int (*set_annotation_fn)(void *target, const char *key, const char *value, struct diag *d);

static int read_annotations(const struct loader *l, const json_t *obj, set_annotation_fn set,
                            void *target)
{
    json_t *map = NULL, *value;
    const char *key;
    int r = doc_get_object(l->doc, obj, "annotations", false, l->d, &map);
    json_object_foreach(map, key, value)
    {
        if (r < 0)
            break;
        if (!json_is_string(value))
            return fail(l, value, -EINVAL, "annotation %s: expected a string value", key);
        r = set(target, key, json_string_value(value), l->d);
        if (r == -EINVAL)
            return refail(l, value, r, "annotations");
    }
    return r;
}

static int set_spec_annotation(void *target, const char *key, const char *value, struct diag *d)
{
    return cdi_spec_set_annotation(target, key, value, d);
}

static int set_device_annotation(void *target, const char *key, const char *value, struct diag *d)
{
    return cdi_device_set_annotation(target, key, value, d);
}

static int read_device(const struct loader *l, struct cdi_spec *spec, const json_t *o)
{
    static const char *const keys[] = {"name", "annotations", "containerEdits", NULL};
    const char *name = NULL;
    json_t *edits = NULL;
    struct cdi_device *dev = NULL;
    int r = json_is_object(o) ? doc_check_keys(l->doc, o, keys, l->d)
                              : fail(l, o, -EINVAL, "%s: expected a mapping", "devices entry");
    if (r >= 0)
        r = doc_get_string(l->doc, o, "name", true, NULL, l->d, &name);
    if (r >= 0)
        r = doc_get_object(l->doc, o, "containerEdits", true, l->d, &edits);
    if (r >= 0) {
        r = cdi_spec_add_device(spec, name, l->d, &dev);
        if (r == -EEXIST)
            return fail(l, json_object_get(o, "name"), r, "device %s: listed twice", name);
        if (r == -EINVAL)
            return refail(l, json_object_get(o, "name"), r, "device name");
    }
    if (r >= 0)
        r = read_annotations(l, o, set_device_annotation, dev);
    if (r >= 0)
        r = read_edits(l, edits, &dev->edits);
    return r;
}

/* spec = { cdiVersion, kind, annotations?, devices, containerEdits? } */
static int read_spec(const struct loader *l, const json_t *root, struct cdi_spec **ret)
{
    static const char *const keys[] = {"cdiVersion", "kind",           "annotations",
                                       "devices",    "containerEdits", NULL};
    _cleanup_(cdi_spec_freep) struct cdi_spec *spec = NULL;
    const char *version = NULL, *kind = NULL;
    json_t *devices = NULL, *edits = NULL, *item;
    size_t i;
    if (!json_is_object(root))
        return fail(l, root, -EINVAL, "a CDI spec is a mapping, not a %s", doc_type_name(root));
    int r = doc_check_keys(l->doc, root, keys, l->d);
    if (r >= 0)
        r = doc_get_string(l->doc, root, "cdiVersion", true, NULL, l->d, &version);
    if (r >= 0)
        r = doc_get_string(l->doc, root, "kind", true, NULL, l->d, &kind);
    if (r >= 0)
        r = doc_get_array(l->doc, root, "devices", true, l->d, &devices);
    if (r >= 0)
        r = doc_get_object(l->doc, root, "containerEdits", false, l->d, &edits);
    if (r < 0)
        return r;
    r = cdi_spec_new(kind, l->d, &spec);
    if (r == -EINVAL)
        return refail(l, json_object_get(root, "kind"), r, "kind");
    if (r >= 0) {
        r = cdi_spec_set_version(spec, version, l->d);
        if (r == -EINVAL)
            return refail(l, json_object_get(root, "cdiVersion"), r, "cdiVersion");
    }
    if (r >= 0)
        r = read_annotations(l, root, set_spec_annotation, spec);
    json_array_foreach(devices, i, item)
    {
        if (r < 0)
            break;
        r = read_device(l, spec, item);
    }
    if (r >= 0 && edits)
        r = read_edits(l, edits, &spec->edits);
    if (r < 0)
        return r;
    r = cdi_spec_validate(spec, l->d);
    if (r < 0) {
        char why[DIAG_MSG_MAX];
        snprintf(why, sizeof(why), "%s", l->d ? l->d->msg : "");
        return diag_fail(l->d, r, "%s: %s", doc_name(l->doc), why);
    }
    *ret = TAKE_PTR(spec);
    return 0;
}

static int load(struct doc *doc, struct diag *d, struct cdi_spec **ret)
{
    if (doc_count(doc) != 1)
        return diag_fail(d, -EINVAL, "%s: expected one document, found %zu", doc_name(doc),
                         doc_count(doc));
    const struct loader l = {.doc = doc, .d = d};
    return read_spec(&l, doc_root(doc, 0), ret);
}

int cdi_spec_load_file(const char *path, struct diag *d, struct cdi_spec **ret)
{
    const struct doc_limits limits = {.max_bytes = CDI_LOAD_MAX_BYTES};
    _cleanup_(doc_freep) struct doc *doc = NULL;
    int r = doc_load_file_limits(path, &limits, d, &doc);
    return r < 0 ? r : load(doc, d, ret);
}

int cdi_spec_load_string(const char *name, const char *text, size_t len, struct diag *d,
                         struct cdi_spec **ret)
{
    const struct doc_limits limits = {.max_bytes = CDI_LOAD_MAX_BYTES};
    _cleanup_(doc_freep) struct doc *doc = NULL;
    int r = doc_load_string_limits(name, text, len, &limits, d, &doc);
    return r < 0 ? r : load(doc, d, ret);
}
