/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checks a spec the way runtimes check what they load. One bad device makes a runtime drop the
 * whole file (and every device in it), so we refuse to write such a file at all and say which
 * entry is wrong instead.
 */
#include <errno.h>
#include <string.h>

#include "cdi-internal.h"

static const char *const HOOK_NAMES[] = {
    "prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop",
};

static bool valid_hook_name(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(HOOK_NAMES); i++)
        if (strcmp(name, HOOK_NAMES[i]) == 0)
            return true;
    return false;
}

static bool valid_permissions(const char *p)
{
    if (strcmp(p, "none") == 0)
        return true;
    return strspn(p, "rwm") == strlen(p);
}

static bool absolute(const char *path)
{
    return path && path[0] == '/';
}

static bool valid_env(char *const *env)
{
    for (size_t i = 0; env[i]; i++) {
        const char *eq = strchr(env[i], '=');
        if (!eq || eq == env[i])
            return false;
    }
    return true;
}

static int check_node(const struct cdi_device_node *n, const char *where, struct diag *d)
{
    if (!absolute(n->path))
        return diag_fail(d, -EINVAL, "%s: device node path \"%s\" is not absolute", where, n->path);
    if (n->host_path && !absolute(n->host_path))
        return diag_fail(d, -EINVAL, "%s: device node %s: hostPath \"%s\" is not absolute", where,
                         n->path, n->host_path);
    if (n->type && (strlen(n->type) != 1 || !strchr("bcup", n->type[0])))
        return diag_fail(d, -EINVAL, "%s: device node %s: invalid type \"%s\" (b, c, u or p)",
                         where, n->path, n->type);
    if (n->permissions && !valid_permissions(n->permissions))
        return diag_fail(d, -EINVAL, "%s: device node %s: invalid permissions \"%s\"", where,
                         n->path, n->permissions);
    return 0;
}

static int check_mount(const struct cdi_mount *m, const char *where, struct diag *d)
{
    if (!absolute(m->host_path) || !absolute(m->container_path))
        return diag_fail(d, -EINVAL, "%s: mount %s -> %s: both paths must be absolute", where,
                         m->host_path, m->container_path);
    return 0;
}

static int check_hook(const struct cdi_hook *h, const char *where, struct diag *d)
{
    if (!valid_hook_name(h->hook_name))
        return diag_fail(d, -EINVAL, "%s: unknown hook name \"%s\"", where, h->hook_name);
    if (!absolute(h->path))
        return diag_fail(d, -EINVAL, "%s: hook path \"%s\" is not absolute", where, h->path);
    if (!valid_env(h->env))
        return diag_fail(d, -EINVAL, "%s: hook %s: env entries must be NAME=value", where, h->path);
    return 0;
}

static int check_edits(const struct cdi_edits *e, const char *where, struct diag *d)
{
    int r = 0;
    for (size_t i = 0; i < e->env.len && r >= 0; i++) {
        char *const env[] = {*VEC_AT(&e->env, char *, i), NULL};
        if (!valid_env(env))
            r = diag_fail(d, -EINVAL, "%s: env entry \"%s\" is not NAME=value", where, env[0]);
    }
    for (size_t i = 0; i < e->device_nodes.len && r >= 0; i++)
        r = check_node(VEC_AT(&e->device_nodes, struct cdi_device_node, i), where, d);
    for (size_t i = 0; i < e->mounts.len && r >= 0; i++)
        r = check_mount(VEC_AT(&e->mounts, struct cdi_mount, i), where, d);
    for (size_t i = 0; i < e->hooks.len && r >= 0; i++)
        r = check_hook(VEC_AT(&e->hooks, struct cdi_hook, i), where, d);
    return r;
}

static int check_devices(const struct cdi_spec *spec, struct diag *d)
{
    char where[160];
    if (spec->devices.len == 0)
        return diag_fail(d, -EINVAL, "CDI spec %s: invalid spec, no devices", spec->kind);
    for (size_t i = 0; i < spec->devices.len; i++) {
        const struct cdi_device *dev = *VEC_AT(&spec->devices, struct cdi_device *, i);
        snprintf(where, sizeof(where), "CDI spec %s, device %s", spec->kind, dev->name);
        if (cdi_edits_is_empty(&dev->edits))
            return diag_fail(d, -EINVAL, "%s: invalid device, empty device edits", where);
        int r = check_edits(&dev->edits, where, d);
        if (r < 0)
            return r;
    }
    return 0;
}

int cdi_spec_validate(const struct cdi_spec *spec, struct diag *d)
{
    char where[160];
    const char *min = cdi_spec_min_version(spec);
    if (spec->version && cdi_version_compare(spec->version, min) < 0)
        return diag_fail(d, -EINVAL, "CDI spec %s: the spec version must be at least v%s, not %s",
                         spec->kind, min, spec->version);
    int r = check_devices(spec, d);
    if (r < 0)
        return r;
    snprintf(where, sizeof(where), "CDI spec %s", spec->kind);
    return check_edits(&spec->edits, where, d);
}
