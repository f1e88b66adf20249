/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One ResourceSlice device entry (resource.k8s.io/v1 Device) read from a YAML or JSON document into
 * the DRA `device` variable: what `gpuplane cel eval --device FILE` evaluates against. The entry is
 * checked the way the API server checks it (field names, DNS/C-identifier names, the 32-entry and
 * 64-character limits, one value per attribute, quantities) so a selector is never tried on a
 * device Kubernetes could not hold; errors point at the offending value ("file:line:col: ...").
 * Strings are copied into the caller's arena, so the document can go once the value is built.
 */
#include <errno.h>
#include <string.h>

#include "cel-dra.h"

/* Device fields of resource.k8s.io/v1 (1.36); only some matter to selectors. */
static const char *const DEVICE_KEYS[] = {
    "name",
    "attributes",
    "capacity",
    "consumesCounters",
    "nodeName",
    "nodeSelector",
    "allNodes",
    "taints",
    "bindsToNode",
    "bindingConditions",
    "bindingFailureConditions",
    "allowMultipleAllocations",
    "nodeAllocatableResourceMappings",
    "driver", /* not a Device field: gpuplane's way to name the driver in a --device file */
    NULL,
};
static const char *const ATTR_KEYS[] = {"int",   "bool",    "string",   "version", "ints",
                                        "bools", "strings", "versions", NULL};
static const char *const CAP_KEYS[] = {"value", "requestPolicy", NULL};

/* What the loader builds before handing it to cel_dra_device_value(). */
struct loader {
    struct cel_region *r;
    const struct doc *doc;
    struct diag *d;
    struct cel_dra_device dev;
    struct cel_dra_attr *attrs;
    struct cel_dra_capacity *caps;
    int deferred;    /* -EDOM to report once the whole entry is known to be valid */
    struct diag why; /* its message */
};

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* [a-z0-9]([-a-z0-9]*[a-z0-9])? */
static bool dns_label(const char *s, size_t n)
{
    if (n == 0 || n > 63 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!is_lower_alnum(s[i]) && s[i] != '-')
            return false;
    }
    return true;
}

/* DNS labels joined by '.', at most max characters. */
static bool dns_subdomain(const char *s, size_t n, size_t max)
{
    size_t start = 0;

    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.')
            continue;
        if (!dns_label(s + start, i - start))
            return false;
        start = i + 1;
    }
    return true;
}

/* [A-Za-z_][A-Za-z0-9_]*, at most 32 characters. */
static bool c_identifier(const char *s, size_t n)
{
    if (n == 0 || n > CEL_DRA_MAX_ID_LEN || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    return true;
}

/* A QualifiedName: "id" or "domain/id". */
static bool qualified_name(const char *s, size_t n)
{
    const char *slash = memchr(s, '/', n);

    if (!slash)
        return c_identifier(s, n);
    return dns_subdomain(s, (size_t)(slash - s), CEL_DRA_MAX_DOMAIN_LEN) &&
           c_identifier(slash + 1, n - (size_t)(slash - s) - 1);
}

static int fail(struct loader *l, const json_t *at, int err, const char *what, const char *name,
                const char *msg)
{
    return doc_fail(l->doc, at, l->d, err, "%s %s: %s", what, name, msg);
}

/* A copy of s in the arena (the document may be freed after loading). */
static const char *keep(struct loader *l, const char *s, size_t n)
{
    return cel_region_strndup(l->r, s, n);
}

/* Which of int/bool/string/version an attribute object sets; lists (1.36 alpha) count as none,
 * as for a Kubernetes without list attributes. */
static int attr_kind(struct loader *l, const char *name, const json_t *obj,
                     enum cel_dra_attr_kind *ret)
{
    static const char *const scalar[] = {"int", "bool", "string", "version"};
    unsigned set = 0;
    int r = doc_check_keys(l->doc, obj, ATTR_KEYS, l->d);

    if (r < 0)
        return r;
    *ret = CEL_DRA_ATTR_NONE;
    for (size_t i = 0; i < ARRAY_SIZE(scalar); i++) {
        if (json_object_get(obj, scalar[i])) {
            set++;
            *ret = (enum cel_dra_attr_kind)(CEL_DRA_ATTR_INT + i);
        }
    }
    if (set > 1)
        return fail(l, obj, -EINVAL, "attribute", name, "exactly one value must be specified");
    return 0;
}

static int attr_string(struct loader *l, const char *name, const json_t *obj, const char *key,
                       const char **ret, size_t *ret_len)
{
    const char *s;
    int r = doc_get_string(l->doc, obj, key, true, NULL, l->d, &s);
    size_t n;

    if (r < 0)
        return r;
    n = strlen(s);
    if (n > CEL_DRA_MAX_STRING_LEN)
        return fail(l, json_object_get(obj, key), -EINVAL, "attribute", name,
                    "must be no more than 64 bytes");
    *ret = keep(l, s, n);
    *ret_len = n;
    return *ret ? 0 : diag_fail(l->d, -ENOMEM, "out of memory");
}

/* A version attribute: invalid SemVer is remembered as the deferred -EDOM, as Kubernetes fails
 * the evaluation rather than the load. */
static int attr_version(struct loader *l, const char *name, const json_t *obj,
                        struct cel_dra_attr *a)
{
    struct cel_semver_obj *o = cel_region_alloc(l->r, sizeof(*o));
    int r = attr_string(l, name, obj, "version", &a->str.s, &a->str.len);
    struct diag why;

    if (r < 0)
        return r;
    if (!o)
        return diag_fail(l->d, -ENOMEM, "out of memory");
    diag_init(&why);
    r = cel_dra_parse_version(a->str.s, a->str.len, o, &why);
    if (r < 0) {
        if (!l->deferred)
            l->why = why;
        l->deferred = r;
        return 0;
    }
    a->version = o;
    return 0;
}

static int attr_value(struct loader *l, const char *name, const json_t *obj, struct cel_dra_attr *a)
{
    switch (a->kind) {
    case CEL_DRA_ATTR_INT:
        return doc_get_int(l->doc, obj, "int", true, 0, INT64_MIN, INT64_MAX, l->d, &a->i);
    case CEL_DRA_ATTR_BOOL:
        return doc_get_bool(l->doc, obj, "bool", true, false, l->d, &a->b);
    case CEL_DRA_ATTR_STRING:
        return attr_string(l, name, obj, "string", &a->str.s, &a->str.len);
    case CEL_DRA_ATTR_VERSION:
        return attr_version(l, name, obj, a);
    case CEL_DRA_ATTR_NONE:
        break;
    }
    return 0;
}

static int check_name(struct loader *l, const json_t *at, const char *what, const char *name,
                      const char **ret)
{
    size_t n = strlen(name);

    if (!qualified_name(name, n))
        return fail(l, at, -EINVAL, what, name,
                    "name must be a C identifier of at most 32 characters, optionally prefixed "
                    "with a DNS subdomain of at most 63 characters and '/'");
    *ret = keep(l, name, n);
    return *ret ? 0 : diag_fail(l->d, -ENOMEM, "out of memory");
}

static int load_attr(struct loader *l, const char *name, const json_t *obj)
{
    struct cel_dra_attr *a = &l->attrs[l->dev.n_attrs];
    int r;

    if (!json_is_object(obj))
        return fail(l, obj, -EINVAL, "attribute", name, "expected a mapping");
    r = check_name(l, obj, "attribute", name, &a->name);
    if (r < 0)
        return r;
    a->name_len = strlen(name);
    r = attr_kind(l, name, obj, &a->kind);
    if (r >= 0)
        r = attr_value(l, name, obj, a);
    if (r < 0)
        return r;
    l->dev.n_attrs++;
    return 0;
}

/* A capacity value: a quantity string, or a plain integer as JSON allows. */
static int load_cap_value(struct loader *l, const char *name, const json_t *v,
                          struct cel_quantity_obj *o)
{
    char num[32];
    const char *s = num;
    struct cel_quantity q;
    struct diag why;

    if (json_is_string(v))
        s = keep(l, json_string_value(v), json_string_length(v));
    else if (json_is_integer(v))
        (void)snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
    else
        return fail(l, v, -EINVAL, "capacity", name, "value: expected a quantity");
    if (!s)
        return diag_fail(l->d, -ENOMEM, "out of memory");
    diag_init(&why);
    if (cel_quantity_parse(s, strlen(s), &why, &q) < 0)
        return fail(l, v, -EINVAL, "capacity", name, why.msg);
    if (s == num)
        cel_quantity_drop_text(&q); /* num is on this stack */
    cel_quantity_obj_init(o, &q);
    return 0;
}

static int load_cap(struct loader *l, const char *name, const json_t *obj)
{
    struct cel_dra_capacity *c = &l->caps[l->dev.n_caps];
    struct cel_quantity_obj *o = cel_region_alloc(l->r, sizeof(*o));
    const json_t *v;
    int r;

    if (!o)
        return diag_fail(l->d, -ENOMEM, "out of memory");
    if (!json_is_object(obj))
        return fail(l, obj, -EINVAL, "capacity", name, "expected a mapping");
    r = check_name(l, obj, "capacity", name, &c->name);
    if (r >= 0)
        r = doc_check_keys(l->doc, obj, CAP_KEYS, l->d);
    if (r < 0)
        return r;
    c->name_len = strlen(name);
    v = json_object_get(obj, "value");
    if (!v)
        return fail(l, obj, -EINVAL, "capacity", name, "value: required");
    r = load_cap_value(l, name, v, o);
    if (r < 0)
        return r;
    c->value = o;
    l->dev.n_caps++;
    return 0;
}

/* Reads the attributes or capacity mapping of the entry with one loader per member. */
static int load_map(struct loader *l, const json_t *entry, const char *key,
                    int (*one)(struct loader *l, const char *name, const json_t *obj))
{
    json_t *m, *v;
    const char *name;
    int r = doc_get_object(l->doc, entry, key, false, l->d, &m);

    if (r < 0 || !m)
        return r;
    json_object_foreach(m, name, v)
    {
        r = one(l, name, v);
        if (r < 0)
            return r;
    }
    return 0;
}

/* The entry's name and the counts the API limits. */
static int check_entry(struct loader *l, const json_t *entry)
{
    const json_t *a = json_object_get(entry, "attributes"), *c = json_object_get(entry, "capacity");
    size_t n = (json_is_object(a) ? json_object_size(a) : 0) +
               (json_is_object(c) ? json_object_size(c) : 0);
    const char *name;
    int r;

    if (!json_is_object(entry))
        return doc_fail(l->doc, entry, l->d, -EINVAL, "device: expected a mapping");
    r = doc_check_keys(l->doc, entry, DEVICE_KEYS, l->d);
    if (r >= 0)
        r = doc_get_string(l->doc, entry, "name", true, NULL, l->d, &name);
    if (r < 0)
        return r;
    if (!dns_label(name, strlen(name)))
        return doc_fail(l->doc, json_object_get(entry, "name"), l->d, -EINVAL,
                        "name: must be a DNS label (lower-case letters, digits and '-', at most "
                        "63 characters)");
    if (n > CEL_DRA_MAX_ATTRIBUTES)
        return doc_fail(l->doc, entry, l->d, -EINVAL,
                        "attributes and capacity: at most %d entries in total, %zu given",
                        CEL_DRA_MAX_ATTRIBUTES, n);
    l->attrs = cel_region_alloc(l->r, sizeof(*l->attrs) * (n ? n : 1));
    l->caps = cel_region_alloc(l->r, sizeof(*l->caps) * (n ? n : 1));
    if (!l->attrs || !l->caps)
        return diag_fail(l->d, -ENOMEM, "out of memory");
    return 0;
}

/* The driver: the caller's, else the entry's own "driver" field, else "". */
static int load_driver(struct loader *l, const json_t *entry, const char *driver)
{
    int r = 0;

    if (!driver && json_is_object(entry))
        r = doc_get_string(l->doc, entry, "driver", false, "", l->d, &driver);
    if (r < 0)
        return r;
    if (!driver)
        driver = "";
    l->dev.driver = keep(l, driver, strlen(driver));
    l->dev.driver_len = strlen(driver);
    return l->dev.driver ? 0 : diag_fail(l->d, -ENOMEM, "out of memory");
}

int cel_dra_device_load(struct cel_region *r, const struct doc *doc, const json_t *entry,
                        const char *driver, struct diag *d, struct cel_value *ret)
{
    struct loader l = {.r = r, .doc = doc, .d = d};
    int err;

    diag_init(&l.why);
    err = check_entry(&l, entry);
    if (err >= 0)
        err = load_driver(&l, entry, driver);
    if (err >= 0)
        err = load_map(&l, entry, "attributes", load_attr);
    if (err >= 0)
        err = load_map(&l, entry, "capacity", load_cap);
    if (err >= 0)
        err = doc_get_bool(doc, entry, "allowMultipleAllocations", false, false, d,
                           &l.dev.allow_multiple_allocations);
    if (err < 0)
        return err;
    if (l.deferred) {
        if (d)
            *d = l.why;
        return l.deferred;
    }
    l.dev.attrs = l.attrs;
    l.dev.caps = l.caps;
    return cel_dra_device_value(r, &l.dev, d, ret);
}

int cel_dra_device_load_file(struct cel_region *r, const char *path, const char *driver,
                             struct diag *d, struct cel_value *ret)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    int err = doc_load_file(path, d, &doc);

    if (err < 0)
        return err;
    if (doc_count(doc) != 1)
        return diag_fail(d, -EINVAL, "%s: expected one document (a device entry), found %zu",
                         doc_name(doc), doc_count(doc));
    return cel_dra_device_load(r, doc, doc_root(doc, 0), driver, d, ret);
}
