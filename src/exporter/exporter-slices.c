/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NVIDIA's DRA devices from their ResourceSlices (exporter-slices.h). dcgm-exporter keeps two maps
 * keyed by pool/device that an update only ever adds to; here each slice owns its devices, so a
 * device dropped from a slice, or a slice deleted, goes at once, and two slices of one pool that
 * name the same device (a pool being republished with a new generation) cannot shadow each other by
 * the order of events: the higher generation answers.
 *
 * Two chained hash tables: the slices by name (to replace or forget what one slice said) and their
 * devices by pool and device name (to answer each claim's lookup in constant time, also for a
 * whole cluster's slices when NODE_NAME is not set). Both double when they hold as many entries as
 * buckets.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "exporter-internal.h"
#include "exporter-kube.h"
#include "exporter-slices.h"

#define BUCKETS_MIN 64u
#define SLICE_DEVICES_MAX 1024 /* the API allows 128; anything past this is not a slice of ours */

/* One device of one slice; the strings point into the slice's allocation. */
struct sdev {
    struct sdev *next; /* in its bucket of the device index */
    uint64_t hash;     /* of pool, device */
    struct slice *slice;
    const char *name;
    enum exporter_dra_kind kind;
    const char *uuid, *parent, *profile;
};

struct slice {
    struct slice *next; /* in its bucket of the slice table */
    uint64_t hash;      /* of the name */
    char *name;         /* the allocation holding every string of the slice */
    const char *pool;
    int64_t generation;
    struct sdev *devs;
    size_t n_devs;
};

struct table {
    void **buckets;
    size_t n_buckets, n;
};

struct exporter_slices {
    struct exporter_slices_options o;
    struct table slices; /* struct slice by name */
    struct table devs;   /* struct sdev by pool, device */
    size_t left_out;
    bool synced;
    struct kube_watch *watch;
};

/* FNV-1a of a, a NUL, b (b may be NULL). */
static uint64_t hash2(const char *a, const char *b)
{
    uint64_t h = UINT64_C(14695981039346656037);
    for (const char *p = a; *p; p++)
        h = (h ^ (unsigned char)*p) * UINT64_C(1099511628211);
    h *= UINT64_C(1099511628211);
    for (const char *p = b; p && *p; p++)
        h = (h ^ (unsigned char)*p) * UINT64_C(1099511628211);
    return h;
}

static int table_init(struct table *t)
{
    t->buckets = calloc(BUCKETS_MIN, sizeof(*t->buckets));
    t->n_buckets = BUCKETS_MIN;
    t->n = 0;
    return t->buckets ? 0 : -ENOMEM;
}

/* ---- the device index ---- */

static struct sdev **dev_bucket(const struct exporter_slices *s, uint64_t h)
{
    return (struct sdev **)&s->devs.buckets[h & (s->devs.n_buckets - 1)];
}

static void dev_unlink(struct exporter_slices *s, struct sdev *d)
{
    for (struct sdev **link = dev_bucket(s, d->hash); *link; link = &(*link)->next)
        if (*link == d) {
            *link = d->next;
            s->devs.n--;
            return;
        }
}

/* Doubles a table when it holds as many entries as buckets; a failure only keeps chains long.
 * next_of gives the link field of an entry, hash_of its hash. */
static void grow(struct table *t, void **(*next_of)(void *e), uint64_t (*hash_of)(const void *e))
{
    if (t->n < t->n_buckets)
        return;
    size_t nb = t->n_buckets * 2;
    void **b = calloc(nb, sizeof(*b));
    if (!b)
        return;
    for (size_t i = 0; i < t->n_buckets; i++)
        for (void *e = t->buckets[i], *next; e; e = next) {
            next = *next_of(e);
            *next_of(e) = b[hash_of(e) & (nb - 1)];
            b[hash_of(e) & (nb - 1)] = e;
        }
    free(t->buckets);
    t->buckets = b;
    t->n_buckets = nb;
}

static void **sdev_next(void *e)
{
    return (void **)&((struct sdev *)e)->next;
}

static uint64_t sdev_hash(const void *e)
{
    return ((const struct sdev *)e)->hash;
}

static void **slice_next(void *e)
{
    return (void **)&((struct slice *)e)->next;
}

static uint64_t slice_hash(const void *e)
{
    return ((const struct slice *)e)->hash;
}

/* ---- slices ---- */

static struct slice **slice_link(const struct exporter_slices *s, uint64_t h, const char *name)
{
    struct slice **link = (struct slice **)&s->slices.buckets[h & (s->slices.n_buckets - 1)];
    for (; *link; link = &(*link)->next)
        if ((*link)->hash == h && strcmp((*link)->name, name) == 0)
            return link;
    return link;
}

static void slice_free(struct slice *sl)
{
    if (!sl)
        return;
    free(sl->devs);
    free(sl->name);
    free(sl);
}

/* Takes the slice at *link out of both tables and frees it. */
static void slice_remove(struct exporter_slices *s, struct slice **link)
{
    struct slice *sl = *link;
    for (size_t i = 0; i < sl->n_devs; i++)
        dev_unlink(s, &sl->devs[i]);
    *link = sl->next;
    s->slices.n--;
    slice_free(sl);
}

/* A string attribute of a v1 device ({"string": "..."}) under its name, or under the name
 * qualified with the driver's domain; NULL when it has neither. */
static const char *attr_string(json_t *attrs, const char *name)
{
    char qualified[128];
    json_t *a = json_object_get(attrs, name);
    if (!a) {
        snprintf(qualified, sizeof(qualified), "%s/%s", EXPORTER_DRA_DRIVER, name);
        a = json_object_get(attrs, qualified);
    }
    return json_string_value(json_object_get(a, "string"));
}

/* What a device of the slice says, when it is one of ours: false for other types and for a GPU
 * without a uuid or a MIG device without a parent. */
static bool device_of(json_t *dev, struct sdev *ret)
{
    json_t *attrs = json_object_get(dev, "attributes");
    const char *name = json_string_value(json_object_get(dev, "name"));
    const char *type = attr_string(attrs, "type");
    const char *uuid = attr_string(attrs, "uuid");
    const char *parent = attr_string(attrs, "parentUUID");
    const char *profile = attr_string(attrs, "profile");

    if (!name || !*name || !type)
        return false;
    if (strcmp(type, "gpu") == 0 && uuid && *uuid)
        *ret = (struct sdev){.name = name, .kind = EXPORTER_DRA_GPU, .uuid = uuid};
    else if (strcmp(type, "mig") == 0 && parent && *parent)
        *ret = (struct sdev){.name = name,
                             .kind = EXPORTER_DRA_MIG,
                             .uuid = uuid ? uuid : "",
                             .parent = parent,
                             .profile = profile ? profile : ""};
    else
        return false;
    return true;
}

static size_t str_size(const char *s)
{
    return s ? strlen(s) + 1 : 0;
}

/* Copies src into the string area at *p; returns the copy. */
static const char *put(char **p, const char *src)
{
    if (!src)
        return "";
    size_t n = strlen(src) + 1;
    char *at = *p;
    memcpy(at, src, n);
    *p += n;
    return at;
}

/* A slice record of name, pool and the devices in devs (borrowed from the JSON, copied here). */
static int slice_new(const char *name, const char *pool, int64_t generation,
                     const struct sdev *devs, size_t n, struct slice **ret)
{
    size_t bytes = str_size(name) + str_size(pool);
    for (size_t i = 0; i < n; i++)
        bytes += str_size(devs[i].name) + str_size(devs[i].uuid) + str_size(devs[i].parent) +
                 str_size(devs[i].profile);
    struct slice *sl = calloc(1, sizeof(*sl));
    if (!sl || !(sl->name = malloc(bytes)) || !(sl->devs = calloc(n + 1, sizeof(*sl->devs)))) {
        slice_free(sl);
        return -ENOMEM;
    }
    char *p = sl->name;
    put(&p, name);
    sl->pool = put(&p, pool);
    sl->generation = generation;
    sl->hash = hash2(name, NULL);
    for (size_t i = 0; i < n; i++) {
        struct sdev *d = &sl->devs[i];
        *d = devs[i];
        d->slice = sl;
        d->name = put(&p, devs[i].name);
        d->uuid = put(&p, devs[i].uuid);
        d->parent = put(&p, devs[i].parent);
        d->profile = put(&p, devs[i].profile);
        d->hash = hash2(sl->pool, d->name);
    }
    sl->n_devs = n;
    *ret = sl;
    return 0;
}

/* Links a new slice and its devices into the tables. */
static void slice_insert(struct exporter_slices *s, struct slice **link, struct slice *sl)
{
    sl->next = NULL;
    *link = sl;
    s->slices.n++;
    for (size_t i = 0; i < sl->n_devs; i++) {
        struct sdev **b = dev_bucket(s, sl->devs[i].hash);
        sl->devs[i].next = *b;
        *b = &sl->devs[i];
        s->devs.n++;
    }
    grow(&s->slices, slice_next, slice_hash);
    grow(&s->devs, sdev_next, sdev_hash);
}

/* The devices of ours in spec.devices, borrowed from the JSON: *ret (free()) and *ret_n. */
static int devices_of(json_t *spec, struct sdev **ret, size_t *ret_n)
{
    json_t *devices = json_object_get(spec, "devices"), *dev;
    size_t n = json_array_size(devices), k = 0, i;
    if (n > SLICE_DEVICES_MAX)
        return -EINVAL;
    struct sdev *out = calloc(n + 1, sizeof(*out));
    if (!out)
        return -ENOMEM;
    json_array_foreach(devices, i, dev)
    {
        if (device_of(dev, &out[k]))
            k++;
    }
    *ret = out;
    *ret_n = k;
    return 0;
}

static int put_slice(struct exporter_slices *s, const char *name, json_t *slice)
{
    json_t *spec = json_object_get(slice, "spec");
    json_t *pool = json_object_get(spec, "pool");
    const char *pool_name = json_string_value(json_object_get(pool, "name"));
    const char *driver = json_string_value(json_object_get(spec, "driver"));
    json_int_t generation = json_integer_value(json_object_get(pool, "generation"));
    struct slice **link = slice_link(s, hash2(name, NULL), name), *sl = NULL;
    _cleanup_free_ struct sdev *devs = NULL;
    size_t n = 0;

    if (!pool_name || !*pool_name)
        return -EINVAL;
    bool ours = driver && strcmp(driver, EXPORTER_DRA_DRIVER) == 0;
    int r = ours ? devices_of(spec, &devs, &n) : 0;
    if (r < 0)
        return r;
    if (*link)
        slice_remove(s, link);
    if (!ours)
        return 0; /* not NVIDIA's GPUs: nothing to keep */
    if (s->devs.n + n > s->o.max_devices) {
        s->left_out += n;
        return -ENOSPC;
    }
    r = slice_new(name, pool_name, generation, devs, n, &sl);
    if (r < 0)
        return r;
    slice_insert(s, slice_link(s, sl->hash, name), sl);
    return 0;
}

/* ---- the cache ---- */

int exporter_slices_new(const struct exporter_slices_options *o, struct exporter_slices **ret)
{
    struct exporter_slices *s = calloc(1, sizeof(*s));
    if (!s || table_init(&s->slices) < 0 || table_init(&s->devs) < 0) {
        exporter_slices_free(s);
        return -ENOMEM;
    }
    s->o = *o;
    if (!s->o.max_devices)
        s->o.max_devices = EXPORTER_SLICES_MAX_DEVICES;
    *ret = s;
    return 0;
}

struct exporter_slices *exporter_slices_free(struct exporter_slices *s)
{
    if (!s)
        return NULL;
    s->watch = kube_watch_free(s->watch);
    for (size_t i = 0; s->slices.buckets && i < s->slices.n_buckets; i++)
        for (struct slice *sl = s->slices.buckets[i], *next; sl; sl = next) {
            next = sl->next;
            slice_free(sl);
        }
    free(s->slices.buckets);
    free(s->devs.buckets);
    free(s);
    return NULL;
}

int exporter_slices_apply(struct exporter_slices *s, enum kube_event ev, json_t *slice)
{
    if (ev == KUBE_SYNCED) {
        s->synced = true;
        if (s->o.synced) {
            const struct exporter_slices_status st = {
                .slices = s->slices.n, .devices = s->devs.n, .left_out = s->left_out};
            s->o.synced(&st, s->o.userdata);
        }
        return 0;
    }
    const char *name =
        json_string_value(json_object_get(json_object_get(slice, "metadata"), "name"));
    if (!name || !*name)
        return -EINVAL;
    if (ev != KUBE_DELETED)
        return put_slice(s, name, slice);
    struct slice **link = slice_link(s, hash2(name, NULL), name);
    if (*link)
        slice_remove(s, link);
    return 0;
}

bool exporter_slices_find(const struct exporter_slices *s, const char *pool, const char *device,
                          struct exporter_dra_device *ret)
{
    const struct sdev *best = NULL;
    if (!s || !pool || !device)
        return false;
    uint64_t h = hash2(pool, device);
    for (const struct sdev *d = *dev_bucket(s, h); d; d = d->next)
        if (d->hash == h && strcmp(d->name, device) == 0 && strcmp(d->slice->pool, pool) == 0 &&
            (!best || d->slice->generation > best->slice->generation))
            best = d;
    if (!best)
        return false;
    *ret = (struct exporter_dra_device){.kind = best->kind,
                                        .uuid = best->uuid,
                                        .parent_uuid = best->parent,
                                        .profile = best->profile};
    return true;
}

bool exporter_slices_synced(const struct exporter_slices *s)
{
    return s && s->synced;
}

size_t exporter_slices_count(const struct exporter_slices *s)
{
    return s ? s->devs.n : 0;
}

/* ---- the watch ---- */

#define SLICES "/apis/resource.k8s.io/v1/resourceslices"
#define SLICES_SELECTOR "spec.driver=" EXPORTER_DRA_DRIVER

int exporter_slices_path(const char *node_name, char *buf, size_t n)
{
    return exporter_watch_path(SLICES, SLICES_SELECTOR, node_name, buf, n);
}

static void on_slice_event(enum kube_event ev, json_t *obj, void *userdata)
{
    struct exporter_slices *s = userdata;
    int r = exporter_slices_apply(s, ev, obj);
    if (r < 0 && r != -ENOSPC)
        log_debug(2, "ResourceSlice event not applied", "error", strerror(-r));
}

int exporter_slices_watch(struct exporter_slices *s, struct kube_client *kube,
                          const char *node_name, struct diag *d)
{
    return exporter_watch_start(kube, SLICES, SLICES_SELECTOR, node_name, "ResourceSlices",
                                on_slice_event, s, &s->watch, d);
}
