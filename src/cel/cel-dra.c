/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DRA `device` variable from an in-memory device description (cel-dra.h): names split into
 * domain and id, one inner map per domain, outer maps whose absent domains read as an empty map.
 * Nothing here copies a string or an object; only the maps are allocated, in the caller's arena.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cel-dra.h"

/* Room for this many attributes (or capacities) without a heap allocation while building; the API
 * allows 32 per device. */
#define SCRATCH_MAX 32

/* What device.attributes["unknown.domain"] yields. */
static const struct cel_vmap empty_vmap = {.n = 0};
static const struct cel_value empty_map = {.kind = CEL_MAP, .map = &empty_vmap};

/* One named value of the description, split into domain and id. */
struct named {
    const char *domain, *id;
    size_t domain_len, id_len;
    struct cel_value value;
    bool grouped; /* in the inner map of its domain already (by_domain) */
};

/* Kubernetes splits at the first '/'; a name without one belongs to the driver. */
static void split_name(const struct cel_dra_device *dev, const char *name, size_t len,
                       struct named *ret)
{
    const char *slash = len ? memchr(name, '/', len) : NULL;

    ret->grouped = false;
    if (!slash) {
        ret->domain = dev->driver;
        ret->domain_len = dev->driver_len;
        ret->id = name;
        ret->id_len = len;
        return;
    }
    ret->domain = name;
    ret->domain_len = (size_t)(slash - name);
    ret->id = slash + 1;
    ret->id_len = len - ret->domain_len - 1;
}

static bool same(const char *a, size_t an, const char *b, size_t bn)
{
    return an == bn && (an == 0 || memcmp(a, b, an) == 0);
}

/*
 * The inner map of one domain: the entries of items[first..n) whose domain is items[first]'s, each
 * marked grouped. Nothing before first has that domain (by_domain visits domains in order of first
 * appearance), so no earlier item is looked at again.
 */
static int domain_map(struct cel_region *r, struct named *items, size_t n, size_t first,
                      struct cel_vmap_entry *scratch, const char *what, struct diag *d,
                      const struct cel_vmap **ret)
{
    const char *domain = items[first].domain;
    size_t domain_len = items[first].domain_len, k = 0;
    int err;

    for (size_t i = first; i < n; i++) {
        if (items[i].grouped || !same(items[i].domain, items[i].domain_len, domain, domain_len))
            continue;
        items[i].grouped = true;
        scratch[k].key = cel_string(items[i].id, items[i].id_len);
        scratch[k++].value = items[i].value;
    }
    err = cel_vmap_build(r, scratch, k, NULL, ret);
    if (err == -EEXIST)
        return diag_fail(d, err, "%s: two entries for one name in domain %.*s", what,
                         (int)domain_len, domain);
    if (err < 0)
        return diag_fail(d, err, "out of memory");
    return 0;
}

/*
 * domain -> (id -> value) with the empty map for absent domains. The scratch arrays stay off the
 * arena, so a device's maps sit close together (selectors over many devices are bound by memory
 * latency).
 *
 * An item whose domain was met before is skipped by its grouped mark, not by comparing it with
 * every earlier item: that rescan (a seen_domain(items, i) loop over j < i ahead of the grouping
 * loop over i..n) is miscompiled by clang 14 at -O2 — GVN's load PRE starts the j loop with
 * items[i] instead of items[0], so every item after the first looks seen and all domains but the
 * first are lost (test_domains_interleaved in tests/unit/cel/test-cel-dra.c).
 */
static int by_domain(struct cel_region *r, struct named *items, size_t n, const char *what,
                     struct diag *d, struct cel_value *ret)
{
    struct cel_vmap_entry stack[2 * SCRATCH_MAX], *outer = stack, *scratch = stack + SCRATCH_MAX;
    _cleanup_free_ struct cel_vmap_entry *heap = NULL;
    const struct cel_vmap *inner, *m;
    size_t k = 0;
    int err;

    if (n > SCRATCH_MAX) {
        heap = calloc(n, 2 * sizeof(*heap));
        if (!heap)
            return diag_fail(d, -ENOMEM, "out of memory");
        outer = heap;
        scratch = heap + n;
    }
    for (size_t i = 0; i < n; i++) {
        if (items[i].grouped)
            continue;
        err = domain_map(r, items, n, i, scratch, what, d, &inner);
        if (err < 0)
            return err;
        outer[k].key = cel_string(items[i].domain, items[i].domain_len);
        outer[k++].value = cel_map_value(inner);
    }
    err = cel_vmap_build(r, outer, k, &empty_map, &m);
    if (err < 0)
        return diag_fail(d, err, "out of memory");
    *ret = cel_map_value(m);
    return 0;
}

static int attr_value(const struct cel_dra_attr *a, struct diag *d, struct cel_value *ret)
{
    switch (a->kind) {
    case CEL_DRA_ATTR_INT:
        *ret = cel_int(a->i);
        return 0;
    case CEL_DRA_ATTR_BOOL:
        *ret = cel_bool(a->b);
        return 0;
    case CEL_DRA_ATTR_STRING:
        *ret = cel_string(a->str.s, a->str.len);
        return 0;
    case CEL_DRA_ATTR_VERSION:
        if (!a->version)
            break;
        *ret = cel_semver_value(a->version);
        return 0;
    case CEL_DRA_ATTR_NONE:
        break;
    }
    return diag_fail(d, -EDOM, "attribute %.*s: unsupported attribute value", (int)a->name_len,
                     a->name);
}

/* Scratch space for n named values: buf when it is large enough, else *heap. */
static struct named *named_array(struct named *buf, size_t n, struct named **heap)
{
    if (n <= SCRATCH_MAX)
        return buf;
    *heap = calloc(n, sizeof(**heap));
    return *heap;
}

static int attributes(struct cel_region *r, const struct cel_dra_device *dev, struct diag *d,
                      struct cel_value *ret)
{
    struct named buf[SCRATCH_MAX];
    _cleanup_free_ struct named *heap = NULL;
    struct named *items = named_array(buf, dev->n_attrs, &heap);
    int err;

    if (!items)
        return diag_fail(d, -ENOMEM, "out of memory");
    for (size_t i = 0; i < dev->n_attrs; i++) {
        split_name(dev, dev->attrs[i].name, dev->attrs[i].name_len, &items[i]);
        err = attr_value(&dev->attrs[i], d, &items[i].value);
        if (err < 0)
            return err;
    }
    return by_domain(r, items, dev->n_attrs, "attributes", d, ret);
}

static int capacity(struct cel_region *r, const struct cel_dra_device *dev, struct diag *d,
                    struct cel_value *ret)
{
    struct named buf[SCRATCH_MAX];
    _cleanup_free_ struct named *heap = NULL;
    struct named *items = named_array(buf, dev->n_caps, &heap);

    if (!items)
        return diag_fail(d, -ENOMEM, "out of memory");
    for (size_t i = 0; i < dev->n_caps; i++) {
        split_name(dev, dev->caps[i].name, dev->caps[i].name_len, &items[i]);
        if (!dev->caps[i].value)
            return diag_fail(d, -EINVAL, "capacity %.*s: no value", (int)dev->caps[i].name_len,
                             dev->caps[i].name);
        items[i].value = cel_quantity_value(dev->caps[i].value);
    }
    return by_domain(r, items, dev->n_caps, "capacity", d, ret);
}

int cel_dra_device_value(struct cel_region *r, const struct cel_dra_device *dev, struct diag *d,
                         struct cel_value *ret)
{
    struct cel_vmap_entry fields[4] = {
        {.key = cel_string("driver", 6), .value = cel_string(dev->driver, dev->driver_len)},
        {.key = cel_string("attributes", 10)},
        {.key = cel_string("capacity", 8)},
        {.key = cel_string("allowMultipleAllocations", 24),
         .value = cel_bool(dev->allow_multiple_allocations)},
    };
    const struct cel_vmap *m;
    int err;

    err = attributes(r, dev, d, &fields[1].value);
    if (err < 0)
        return err;
    err = capacity(r, dev, d, &fields[2].value);
    if (err < 0)
        return err;
    err = cel_vmap_build(r, fields, ARRAY_SIZE(fields), NULL, &m);
    if (err < 0)
        return diag_fail(d, err, "out of memory");
    *ret = cel_map_value(m);
    return 0;
}

int cel_dra_parse_version(const char *s, size_t len, struct cel_semver_obj *o, struct diag *d)
{
    struct cel_semver v;
    struct diag why;

    diag_init(&why);
    if (cel_semver_parse(s, len, false, &why, &v) < 0)
        return diag_fail(d, -EDOM, "parse semantic version: %s", why.msg);
    cel_semver_obj_init(o, &v);
    return 0;
}
