/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The in-memory CDI spec: a kind, devices with their container edits, and spec-level edits. Every
 * add copies its arguments, so callers build specs from stack buffers. Duplicate device nodes and
 * mounts (same container path) are folded here rather than in each producer, because the "all"
 * device of a GPU spec is the union of devices that share nodes (a MIG device and its parent GPU
 * both need /dev/nvidia0) and a runtime would refuse to create the same node twice.
 */
#include <errno.h>
#include <string.h>

#include "cdi-internal.h"

int cdi_strv_copy(const char *const *list, char ***ret)
{
    size_t n = 0;
    while (list && list[n])
        n++;
    char **copy = calloc(n + 1, sizeof(char *));
    if (!copy)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        copy[i] = strdup(list[i]);
        if (!copy[i]) {
            cdi_strv_free(copy);
            return -ENOMEM;
        }
    }
    *ret = copy;
    return 0;
}

char **cdi_strv_free(char **list)
{
    for (size_t i = 0; list && list[i]; i++)
        free(list[i]);
    free(list);
    return NULL;
}

bool cdi_strv_equal(char *const *a, char *const *b)
{
    size_t i = 0;
    for (; a[i] && b[i]; i++)
        if (strcmp(a[i], b[i]) != 0)
            return false;
    return !a[i] && !b[i];
}

static bool str_equal(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* strdup that keeps NULL as NULL; -ENOMEM only for a failed copy. */
static int dup_opt(const char *s, char **ret)
{
    *ret = NULL;
    if (!s)
        return 0;
    *ret = strdup(s);
    return *ret ? 0 : -ENOMEM;
}

void cdi_edits_init(struct cdi_edits *e)
{
    vec_init(&e->env, sizeof(char *), CDI_LIST_MAX);
    vec_init(&e->device_nodes, sizeof(struct cdi_device_node), CDI_LIST_MAX);
    vec_init(&e->mounts, sizeof(struct cdi_mount), CDI_LIST_MAX);
    vec_init(&e->hooks, sizeof(struct cdi_hook), CDI_LIST_MAX);
    vec_init(&e->additional_gids, sizeof(uint32_t), CDI_LIST_MAX);
}

static void node_release(struct cdi_device_node *n)
{
    free((char *)n->path);
    free((char *)n->host_path);
    free((char *)n->type);
    free((char *)n->permissions);
}

static void mount_release(struct cdi_mount *m)
{
    free(m->host_path);
    free(m->container_path);
    free(m->type);
    cdi_strv_free(m->options);
}

static void hook_release(struct cdi_hook *h)
{
    free(h->hook_name);
    free(h->path);
    cdi_strv_free(h->args);
    cdi_strv_free(h->env);
}

void cdi_edits_release(struct cdi_edits *e)
{
    for (size_t i = 0; i < e->env.len; i++)
        free(*VEC_AT(&e->env, char *, i));
    for (size_t i = 0; i < e->device_nodes.len; i++)
        node_release(VEC_AT(&e->device_nodes, struct cdi_device_node, i));
    for (size_t i = 0; i < e->mounts.len; i++)
        mount_release(VEC_AT(&e->mounts, struct cdi_mount, i));
    for (size_t i = 0; i < e->hooks.len; i++)
        hook_release(VEC_AT(&e->hooks, struct cdi_hook, i));
    vec_release(&e->env);
    vec_release(&e->device_nodes);
    vec_release(&e->mounts);
    vec_release(&e->hooks);
    vec_release(&e->additional_gids);
}

bool cdi_edits_is_empty(const struct cdi_edits *e)
{
    return e->env.len == 0 && e->device_nodes.len == 0 && e->mounts.len == 0 && e->hooks.len == 0 &&
           e->additional_gids.len == 0;
}

static bool has_env(const struct cdi_edits *e, const char *entry)
{
    for (size_t i = 0; i < e->env.len; i++)
        if (strcmp(*VEC_AT(&e->env, char *, i), entry) == 0)
            return true;
    return false;
}

static int push_env(struct cdi_edits *e, char *entry)
{
    int r = vec_push(&e->env, &entry);
    if (r < 0)
        free(entry);
    return r;
}

int cdi_edits_add_env(struct cdi_edits *e, const char *name, const char *value)
{
    char *entry = NULL;
    if (!name || !name[0] || strchr(name, '=') || !value)
        return -EINVAL;
    if (asprintf(&entry, "%s=%s", name, value) < 0)
        return -ENOMEM;
    return push_env(e, entry);
}

static bool node_equal(const struct cdi_device_node *a, const struct cdi_device_node *b)
{
    return str_equal(a->path, b->path) && str_equal(a->host_path, b->host_path) &&
           str_equal(a->type, b->type) && str_equal(a->permissions, b->permissions) &&
           a->set == b->set && a->major == b->major && a->minor == b->minor &&
           a->file_mode == b->file_mode && a->uid == b->uid && a->gid == b->gid;
}

static const struct cdi_device_node *find_node(const struct cdi_edits *e, const char *path)
{
    for (size_t i = 0; i < e->device_nodes.len; i++) {
        const struct cdi_device_node *n = VEC_AT(&e->device_nodes, struct cdi_device_node, i);
        if (strcmp(n->path, path) == 0)
            return n;
    }
    return NULL;
}

int cdi_edits_add_device_node(struct cdi_edits *e, const struct cdi_device_node *node)
{
    struct cdi_device_node copy = *node;
    char *path = NULL, *host = NULL, *type = NULL, *perm = NULL;
    if (!node->path)
        return -EINVAL;
    const struct cdi_device_node *old = find_node(e, node->path);
    if (old)
        return node_equal(old, node) ? 0 : -EEXIST;
    int r = dup_opt(node->path, &path);
    if (r >= 0)
        r = dup_opt(node->host_path, &host);
    if (r >= 0)
        r = dup_opt(node->type, &type);
    if (r >= 0)
        r = dup_opt(node->permissions, &perm);
    copy.path = path;
    copy.host_path = host;
    copy.type = type;
    copy.permissions = perm;
    if (r >= 0)
        r = vec_push(&e->device_nodes, &copy);
    if (r < 0)
        node_release(&copy);
    return r;
}

static const struct cdi_mount *find_mount(const struct cdi_edits *e, const char *container_path)
{
    for (size_t i = 0; i < e->mounts.len; i++) {
        const struct cdi_mount *m = VEC_AT(&e->mounts, struct cdi_mount, i);
        if (strcmp(m->container_path, container_path) == 0)
            return m;
    }
    return NULL;
}

static bool mount_equal(const struct cdi_mount *m, const char *host_path, const char *type,
                        const char *const *options)
{
    char *const empty[] = {NULL};
    return strcmp(m->host_path, host_path) == 0 && str_equal(m->type, type) &&
           cdi_strv_equal(m->options, options ? (char *const *)options : empty);
}

int cdi_edits_add_mount(struct cdi_edits *e, const char *host_path, const char *container_path,
                        const char *type, const char *const *options)
{
    struct cdi_mount m = {0};
    if (!host_path || !container_path)
        return -EINVAL;
    const struct cdi_mount *old = find_mount(e, container_path);
    if (old)
        return mount_equal(old, host_path, type, options) ? 0 : -EEXIST;
    int r = dup_opt(host_path, &m.host_path);
    if (r >= 0)
        r = dup_opt(container_path, &m.container_path);
    if (r >= 0)
        r = dup_opt(type, &m.type);
    if (r >= 0)
        r = cdi_strv_copy(options, &m.options);
    if (r >= 0)
        r = vec_push(&e->mounts, &m);
    if (r < 0)
        mount_release(&m);
    return r;
}

static bool hook_equal(const struct cdi_hook *a, const struct cdi_hook *b)
{
    return strcmp(a->hook_name, b->hook_name) == 0 && strcmp(a->path, b->path) == 0 &&
           cdi_strv_equal(a->args, b->args) && cdi_strv_equal(a->env, b->env) &&
           a->timeout == b->timeout;
}

static bool has_hook(const struct cdi_edits *e, const struct cdi_hook *h)
{
    for (size_t i = 0; i < e->hooks.len; i++)
        if (hook_equal(VEC_AT(&e->hooks, struct cdi_hook, i), h))
            return true;
    return false;
}

int cdi_edits_add_hook(struct cdi_edits *e, const char *hook_name, const char *path,
                       const char *const *args, const char *const *env, unsigned timeout)
{
    struct cdi_hook h = {.timeout = timeout};
    if (!hook_name || !path)
        return -EINVAL;
    int r = dup_opt(hook_name, &h.hook_name);
    if (r >= 0)
        r = dup_opt(path, &h.path);
    if (r >= 0)
        r = cdi_strv_copy(args, &h.args);
    if (r >= 0)
        r = cdi_strv_copy(env, &h.env);
    if (r >= 0)
        r = vec_push(&e->hooks, &h);
    if (r < 0)
        hook_release(&h);
    return r;
}

static bool has_gid(const struct cdi_edits *e, uint32_t gid)
{
    for (size_t i = 0; i < e->additional_gids.len; i++)
        if (*VEC_AT(&e->additional_gids, uint32_t, i) == gid)
            return true;
    return false;
}

int cdi_edits_add_gid(struct cdi_edits *e, uint32_t gid)
{
    return vec_push(&e->additional_gids, &gid);
}

static int merge_env(struct cdi_edits *dst, const struct cdi_edits *src)
{
    for (size_t i = 0; i < src->env.len; i++) {
        const char *entry = *VEC_AT(&src->env, char *, i);
        if (has_env(dst, entry))
            continue;
        char *copy = strdup(entry);
        int r = copy ? push_env(dst, copy) : -ENOMEM;
        if (r < 0)
            return r;
    }
    return 0;
}

static int merge_nodes_mounts(struct cdi_edits *dst, const struct cdi_edits *src)
{
    int r = 0;
    for (size_t i = 0; i < src->device_nodes.len && r >= 0; i++)
        r = cdi_edits_add_device_node(dst, VEC_AT(&src->device_nodes, struct cdi_device_node, i));
    for (size_t i = 0; i < src->mounts.len && r >= 0; i++) {
        const struct cdi_mount *m = VEC_AT(&src->mounts, struct cdi_mount, i);
        r = cdi_edits_add_mount(dst, m->host_path, m->container_path, m->type,
                                (const char *const *)m->options);
    }
    return r;
}

static int merge_hooks_gids(struct cdi_edits *dst, const struct cdi_edits *src)
{
    int r = 0;
    for (size_t i = 0; i < src->hooks.len && r >= 0; i++) {
        const struct cdi_hook *h = VEC_AT(&src->hooks, struct cdi_hook, i);
        if (!has_hook(dst, h))
            r = cdi_edits_add_hook(dst, h->hook_name, h->path, (const char *const *)h->args,
                                   (const char *const *)h->env, h->timeout);
    }
    for (size_t i = 0; i < src->additional_gids.len && r >= 0; i++) {
        uint32_t gid = *VEC_AT(&src->additional_gids, uint32_t, i);
        if (!has_gid(dst, gid))
            r = cdi_edits_add_gid(dst, gid);
    }
    return r;
}

int cdi_edits_merge(struct cdi_edits *dst, const struct cdi_edits *src)
{
    int r = merge_env(dst, src);
    if (r >= 0)
        r = merge_nodes_mounts(dst, src);
    if (r >= 0)
        r = merge_hooks_gids(dst, src);
    return r;
}

static void annotations_release(struct vec *v)
{
    for (size_t i = 0; i < v->len; i++) {
        struct cdi_annotation *a = VEC_AT(v, struct cdi_annotation, i);
        free(a->key);
        free(a->value);
    }
    vec_release(v);
}

static int annotation_set(struct vec *v, const char *key, const char *value, struct diag *d)
{
    if (!cdi_valid_annotation_key(key) || !value)
        return diag_fail(d, -EINVAL, "invalid annotation key \"%s\"", key ? key : "");
    char *copy = strdup(value);
    if (!copy)
        return -ENOMEM;
    for (size_t i = 0; i < v->len; i++) {
        struct cdi_annotation *a = VEC_AT(v, struct cdi_annotation, i);
        if (strcmp(a->key, key) == 0) {
            free(a->value);
            a->value = copy;
            return 0;
        }
    }
    struct cdi_annotation a = {.key = strdup(key), .value = copy};
    int r = a.key ? vec_push(v, &a) : -ENOMEM;
    if (r < 0) {
        free(a.key);
        free(copy);
    }
    return r;
}

static struct cdi_device *device_free(struct cdi_device *dev)
{
    if (!dev)
        return NULL;
    free(dev->name);
    annotations_release(&dev->annotations);
    cdi_edits_release(&dev->edits);
    free(dev);
    return NULL;
}
DEFINE_POINTER_CLEANUP(struct cdi_device, device_free)

int cdi_spec_new(const char *kind, struct diag *d, struct cdi_spec **ret)
{
    _cleanup_(cdi_spec_freep) struct cdi_spec *spec = NULL;
    if (!cdi_valid_kind(kind))
        return diag_fail(d, -EINVAL, "invalid CDI kind \"%s\": want vendor/class, e.g. %s",
                         kind ? kind : "", "nvidia.com/gpu");
    spec = calloc(1, sizeof(*spec));
    if (!spec)
        return -ENOMEM;
    vec_init(&spec->annotations, sizeof(struct cdi_annotation), CDI_LIST_MAX);
    vec_init(&spec->devices, sizeof(struct cdi_device *), CDI_LIST_MAX);
    cdi_edits_init(&spec->edits);
    spec->kind = strdup(kind);
    if (!spec->kind || cdi_split_kind(kind, &spec->vendor, &spec->class) < 0)
        return -ENOMEM;
    *ret = TAKE_PTR(spec);
    return 0;
}

struct cdi_spec *cdi_spec_free(struct cdi_spec *spec)
{
    if (!spec)
        return NULL;
    for (size_t i = 0; i < spec->devices.len; i++)
        device_free(*VEC_AT(&spec->devices, struct cdi_device *, i));
    vec_release(&spec->devices);
    annotations_release(&spec->annotations);
    cdi_edits_release(&spec->edits);
    free(spec->version);
    free(spec->kind);
    free(spec->vendor);
    free(spec->class);
    free(spec);
    return NULL;
}

int cdi_spec_set_version(struct cdi_spec *spec, const char *version, struct diag *d)
{
    char *copy = NULL;
    if (version) {
        if (!cdi_valid_version(version))
            return diag_fail(d, -EINVAL, "unknown cdiVersion \"%s\" (known: 0.3.0 ... %s)", version,
                             CDI_VERSION_LATEST);
        /* The reference parser tolerates a leading 'v'; loaders of other producers may not. */
        copy = strdup(version[0] == 'v' ? version + 1 : version);
        if (!copy)
            return -ENOMEM;
    }
    free(spec->version);
    spec->version = copy;
    return 0;
}

int cdi_spec_set_annotation(struct cdi_spec *spec, const char *key, const char *value,
                            struct diag *d)
{
    return annotation_set(&spec->annotations, key, value, d);
}

int cdi_device_set_annotation(struct cdi_device *dev, const char *key, const char *value,
                              struct diag *d)
{
    return annotation_set(&dev->annotations, key, value, d);
}

struct cdi_device *cdi_spec_find_device(const struct cdi_spec *spec, const char *name)
{
    for (size_t i = 0; i < spec->devices.len; i++) {
        struct cdi_device *dev = *VEC_AT(&spec->devices, struct cdi_device *, i);
        if (strcmp(dev->name, name) == 0)
            return dev;
    }
    return NULL;
}

int cdi_spec_add_device(struct cdi_spec *spec, const char *name, struct diag *d,
                        struct cdi_device **ret)
{
    _cleanup_(device_freep) struct cdi_device *dev = NULL;
    if (!cdi_valid_device_name(name))
        return diag_fail(d, -EINVAL, "invalid CDI device name \"%s\"", name ? name : "");
    if (cdi_spec_find_device(spec, name))
        return diag_fail(d, -EEXIST, "CDI device \"%s\" defined twice in %s", name, spec->kind);
    dev = calloc(1, sizeof(*dev));
    if (!dev)
        return -ENOMEM;
    vec_init(&dev->annotations, sizeof(struct cdi_annotation), CDI_LIST_MAX);
    cdi_edits_init(&dev->edits);
    dev->name = strdup(name);
    if (!dev->name)
        return -ENOMEM;
    int r = vec_push(&spec->devices, &dev);
    if (r < 0)
        return diag_fail(d, r, "too many devices in CDI spec %s", spec->kind);
    if (ret)
        *ret = dev;
    TAKE_PTR(dev);
    return 0;
}
