/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The small readers every part of the profile loader uses: a GPU key from the GPU or from
 * `defaults`, strings copied into fixed buffers, bounded unsigned integers, names from a table, PCI
 * bus ids and UUIDs (checked for shape and uniqueness, derived from a seed when absent).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mock-profile-internal.h"

#include <strings.h>

static const struct name_value *find_name(const struct name_value *t, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(t[i].name, name) == 0)
            return &t[i];
    return NULL;
}

/* The mapping a GPU key is read from: the GPU's own, else defaults, else the GPU's (absent). */
const json_t *mock_pick(const struct loader *L, const json_t *gpu, const char *key)
{
    if (json_object_get(gpu, key) || !L->defaults || !json_object_get(L->defaults, key))
        return gpu;
    return L->defaults;
}

static int copy_str(struct loader *L, const json_t *obj, const char *key, const char *s, char *dst,
                    size_t cap)
{
    size_t n = s ? strlen(s) : 0;

    if (n >= cap)
        return doc_fail(L->doc, json_object_get(obj, key), L->d, -EINVAL,
                        "\"%s\": longer than %zu characters", key, cap - 1);
    memcpy(dst, s ? s : "", n + 1);
    return 0;
}

int mock_read_str(struct loader *L, const json_t *obj, const char *key, bool required,
                  const char *def, char *dst, size_t cap)
{
    const char *s;
    int r;

    r = doc_get_string(L->doc, obj, key, required, def, L->d, &s);
    if (r < 0)
        return r;
    return copy_str(L, obj, key, s, dst, cap);
}

int mock_read_uint(struct loader *L, const json_t *obj, const char *key, bool required, int64_t def,
                   int64_t max, unsigned *ret)
{
    int64_t v;
    int r;

    r = doc_get_int(L->doc, obj, key, required, def, 0, max, L->d, &v);
    if (r < 0)
        return r;
    *ret = (unsigned)v;
    return 0;
}

int mock_read_name(struct loader *L, const json_t *obj, const char *key, const char *def,
                   const struct name_value *t, size_t n, unsigned *ret)
{
    const struct name_value *nv;
    const char *s;
    int r;

    r = doc_get_string(L->doc, obj, key, def == NULL, def, L->d, &s);
    if (r < 0)
        return r;
    nv = find_name(t, n, s);
    if (!nv)
        return doc_fail(L->doc, json_object_get(obj, key), L->d, -EINVAL,
                        "\"%s\": unknown value \"%s\"", key, s);
    *ret = nv->value;
    return 0;
}

static bool is_hex_lower(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* "GPU-" or "MIG-" then 8-4-4-4-12 lower-case hex digits. */
static bool valid_uuid(const char *s, const char *prefix)
{
    static const char shape[] = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";

    if (strncmp(s, prefix, 4) != 0 || strlen(s) != 4 + sizeof(shape) - 1)
        return false;
    for (size_t i = 0; shape[i]; i++)
        if (shape[i] == '-' ? s[4 + i] != '-' : !is_hex_lower(s[4 + i]))
            return false;
    return true;
}

static uint64_t fnv1a(uint64_t h, const char *s)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* A stable, realistic-looking UUID derived from text. */
static void make_uuid(char buf[MOCK_UUID_MAX], const char *prefix, const char *text)
{
    uint64_t a = fnv1a(0xcbf29ce484222325ULL, text), b = fnv1a(0x84222325cbf29ce4ULL, text);

    snprintf(buf, MOCK_UUID_MAX, "%s%08x-%04x-%04x-%04x-%012llx", prefix, (unsigned)(a >> 32),
             (unsigned)(a >> 16) & 0xFFFFu, (unsigned)a & 0xFFFFu, (unsigned)(b >> 48),
             (unsigned long long)(b & 0xFFFFFFFFFFFFULL));
}

static bool uuid_taken(const struct loader *L, const char *uuid)
{
    for (size_t i = 0; i < L->node->n_gpus; i++)
        if (strcmp(L->node->gpus[i].uuid, uuid) == 0)
            return true;
    for (size_t i = 0; i < L->ci_next; i++)
        if (strcmp(L->node->cis[i].uuid, uuid) == 0)
            return true;
    return false;
}

/* An optional UUID member; *dst keeps its derived default when the key is absent. */
int mock_read_uuid(struct loader *L, const json_t *obj, const char *prefix, const char *seed,
                   char dst[MOCK_UUID_MAX])
{
    const json_t *v = json_object_get(obj, "uuid");
    char want[MOCK_UUID_MAX];
    int r;

    make_uuid(want, prefix, seed);
    r = mock_read_str(L, obj, "uuid", false, want, want, sizeof(want));
    if (r < 0)
        return r;
    if (!valid_uuid(want, prefix))
        return doc_fail(
            L->doc, v, L->d, -EINVAL,
            "\"uuid\": expected %sxxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (lower-case hex)", prefix);
    if (uuid_taken(L, want))
        return doc_fail(L->doc, v ? v : obj, L->d, -EINVAL, "duplicate UUID \"%s\"", want);
    memcpy(dst, want, MOCK_UUID_MAX);
    return 0;
}

int mock_read_bus_id(struct loader *L, const json_t *v, struct mock_pci *ret)
{
    if (!json_is_string(v) || !mock_parse_bus_id(json_string_value(v), ret))
        return doc_fail(L->doc, v, L->d, -EINVAL,
                        "expected a PCI address such as \"0000:18:00.0\"");
    return 0;
}
