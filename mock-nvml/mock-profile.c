/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Node profiles: the YAML file (docs/mock-nvml.md) that says which GPUs the mock pretends to have,
 * loaded into a struct mock_node. Loading is strict, since a profile is test input written by hand:
 * an unknown key, a wrong type, a value out of range, an overlapping MIG placement or a duplicate
 * UUID fails the load with "file:line:col: message" pointing at the offending value.
 *
 * Per-GPU keys are looked up in the GPU's own mapping first and in `defaults` second, so a profile
 * states what all GPUs share once. All arrays of the node (GPUs, GPU instances, compute instances,
 * device handles) are sized before they are filled, so the pointers NVML hands out never move.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base-doc.h"
#include "mock-internal.h"

struct loader {
    const struct doc *doc;
    struct diag *d;
    struct mock_node *node;
    const json_t *defaults;              /* NULL when the profile has none */
    const json_t *nvlink[MOCK_MAX_GPUS]; /* each GPU's nvlink mapping, for later checks */
    size_t gi_next, ci_next;
};

static const char *const top_keys[] = {"driver",   "driverRoot", "events", "nvswitch",
                                       "topology", "defaults",   "gpus",   NULL};
static const char *const gpu_keys[] = {"busId",
                                       "uuid",
                                       "name",
                                       "memory",
                                       "memoryReserved",
                                       "memoryUsed",
                                       "multiprocessors",
                                       "computeCapability",
                                       "architecture",
                                       "brand",
                                       "pciDeviceId",
                                       "pciSubSystemId",
                                       "minor",
                                       "serial",
                                       "vbios",
                                       "numa",
                                       "pciSwitch",
                                       "persistenceMode",
                                       "ecc",
                                       "lost",
                                       "nvlink",
                                       "mig",
                                       NULL};

struct name_value {
    const char *name;
    unsigned value;
};

static const struct name_value architectures[] = {
    {"kepler", NVML_DEVICE_ARCH_KEPLER},
    {"maxwell", NVML_DEVICE_ARCH_MAXWELL},
    {"pascal", NVML_DEVICE_ARCH_PASCAL},
    {"volta", NVML_DEVICE_ARCH_VOLTA},
    {"turing", NVML_DEVICE_ARCH_TURING},
    {"ampere", NVML_DEVICE_ARCH_AMPERE},
    {"ada", NVML_DEVICE_ARCH_ADA},
    {"hopper", NVML_DEVICE_ARCH_HOPPER},
    {"blackwell", NVML_DEVICE_ARCH_BLACKWELL},
};

static const struct name_value brands[] = {
    {"unknown", NVML_BRAND_UNKNOWN},
    {"tesla", NVML_BRAND_TESLA},
    {"nvidia", NVML_BRAND_NVIDIA},
};

static const struct name_value levels[] = {
    {"internal", NVML_TOPOLOGY_INTERNAL}, {"single", NVML_TOPOLOGY_SINGLE},
    {"multiple", NVML_TOPOLOGY_MULTIPLE}, {"hostbridge", NVML_TOPOLOGY_HOSTBRIDGE},
    {"node", NVML_TOPOLOGY_NODE},         {"system", NVML_TOPOLOGY_SYSTEM},
};

static const struct name_value *find_name(const struct name_value *t, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(t[i].name, name) == 0)
            return &t[i];
    return NULL;
}

/* ---- node lifetime ---- */

struct mock_node *mock_node_free(struct mock_node *node)
{
    if (!node)
        return NULL;
    free(node->events_path);
    free(node->driver_root);
    free(node->gpus);
    free(node->handles);
    free(node->gis);
    free(node->cis);
    free(node->switches);
    free(node->overrides);
    free(node);
    return NULL;
}

struct nvmlDevice_st *mock_find_uuid(const struct mock_node *node, const char *uuid)
{
    for (size_t i = 0; i < node->n_gpus; i++)
        if (strcmp(node->gpus[i].uuid, uuid) == 0)
            return node->gpus[i].handle;
    for (size_t i = 0; i < node->n_cis; i++)
        if (node->cis[i].dev && strcmp(node->cis[i].uuid, uuid) == 0)
            return node->cis[i].dev;
    return NULL;
}

/* ---- small readers ---- */

/* The mapping a GPU key is read from: the GPU's own, else defaults, else the GPU's (absent). */
static const json_t *pick(const struct loader *L, const json_t *gpu, const char *key)
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

static int read_str(struct loader *L, const json_t *obj, const char *key, bool required,
                    const char *def, char *dst, size_t cap)
{
    const char *s;
    int r;

    r = doc_get_string(L->doc, obj, key, required, def, L->d, &s);
    if (r < 0)
        return r;
    return copy_str(L, obj, key, s, dst, cap);
}

static int read_uint(struct loader *L, const json_t *obj, const char *key, bool required,
                     int64_t def, int64_t max, unsigned *ret)
{
    int64_t v;
    int r;

    r = doc_get_int(L->doc, obj, key, required, def, 0, max, L->d, &v);
    if (r < 0)
        return r;
    *ret = (unsigned)v;
    return 0;
}

static int read_name(struct loader *L, const json_t *obj, const char *key, const char *def,
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
static int read_uuid(struct loader *L, const json_t *obj, const char *prefix, const char *seed,
                     char dst[MOCK_UUID_MAX])
{
    const json_t *v = json_object_get(obj, "uuid");
    char want[MOCK_UUID_MAX];
    int r;

    make_uuid(want, prefix, seed);
    r = read_str(L, obj, "uuid", false, want, want, sizeof(want));
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

/* ---- top-level sections ---- */

static int load_driver(struct loader *L, const json_t *root)
{
    static const char *const keys[] = {"version", "cuda", "nvml", NULL};
    struct mock_node *node = L->node;
    json_t *obj;
    int64_t cuda = 0;
    char def[MOCK_STR_MAX + 8];
    int r;

    r = doc_get_object(L->doc, root, "driver", false, L->d, &obj);
    if (r < 0)
        return r;
    if (!obj) {
        obj = json_object();
        if (!obj)
            return -ENOMEM;
    } else
        json_incref(obj);
    r = doc_check_keys(L->doc, obj, keys, L->d);
    if (r >= 0)
        r = read_str(L, obj, "version", false, "550.54.15", node->driver_version,
                     NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);
    snprintf(def, sizeof(def), "12.%s", node->driver_version);
    if (r >= 0)
        r = read_str(L, obj, "nvml", false, def, node->nvml_version,
                     NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE);
    if (r >= 0)
        r = doc_get_int(L->doc, obj, "cuda", false, 12040, 1000, 99990, L->d, &cuda);
    if (r >= 0)
        node->cuda_version = (int)cuda;
    json_decref(obj);
    return r;
}

/* A path relative to the profile's directory. */
static int load_path(struct loader *L, const json_t *root, const char *key, const char *dir,
                     char **ret)
{
    const char *s;
    char *p;
    int r;

    r = doc_get_string(L->doc, root, key, false, NULL, L->d, &s);
    if (r < 0 || !s)
        return r;
    if (!*s)
        return doc_fail(L->doc, json_object_get(root, key), L->d, -EINVAL, "\"%s\": empty path",
                        key);
    if (s[0] == '/' || !dir)
        p = strdup(s);
    else if (asprintf(&p, "%s/%s", dir, s) < 0)
        p = NULL;
    if (!p)
        return -ENOMEM;
    *ret = p;
    return 0;
}

static int parse_bus_id(struct loader *L, const json_t *v, struct mock_pci *ret)
{
    if (!json_is_string(v) || !mock_parse_bus_id(json_string_value(v), ret))
        return doc_fail(L->doc, v, L->d, -EINVAL,
                        "expected a PCI address such as \"0000:18:00.0\"");
    return 0;
}

static int load_switches(struct loader *L, const json_t *root)
{
    static const char *const keys[] = {"busIds", "pciDeviceId", NULL};
    struct mock_node *node = L->node;
    json_t *obj = NULL, *ids = NULL, *v;
    size_t i;
    int r;

    r = doc_get_object(L->doc, root, "nvswitch", false, L->d, &obj);
    if (r >= 0 && obj)
        r = doc_check_keys(L->doc, obj, keys, L->d);
    if (r >= 0 && obj)
        r = doc_get_array(L->doc, obj, "busIds", false, L->d, &ids);
    node->switch_device_id = 0x22A310DEu;
    if (r >= 0 && obj)
        r = read_uint(L, obj, "pciDeviceId", false, 0x22A310DE, 0xFFFFFFFFll,
                      &node->switch_device_id);
    if (r < 0)
        return r;
    if (ids && json_array_size(ids) == 0)
        return doc_fail(L->doc, ids, L->d, -EINVAL, "\"busIds\": at least one switch expected");
    node->n_switches = ids ? json_array_size(ids) : 1;
    node->switches = calloc(node->n_switches, sizeof(*node->switches));
    if (!node->switches)
        return -ENOMEM;
    json_array_foreach(ids, i, v)
    {
        r = parse_bus_id(L, v, &node->switches[i]);
        if (r < 0)
            return r;
    }
    return 0;
}

static int load_override(struct loader *L, const json_t *o, struct mock_topology_override *ret)
{
    static const char *const keys[] = {"gpus", "level", NULL};
    const size_t n = L->node->n_gpus;
    json_t *pair;
    unsigned level = 0;
    int r;

    r = doc_check_keys(L->doc, o, keys, L->d);
    if (r >= 0)
        r = doc_get_array(L->doc, o, "gpus", true, L->d, &pair);
    if (r >= 0)
        r = read_name(L, o, "level", NULL, levels, ARRAY_SIZE(levels), &level);
    if (r < 0)
        return r;
    if (json_array_size(pair) != 2 || !json_is_integer(json_array_get(pair, 0)) ||
        !json_is_integer(json_array_get(pair, 1)) ||
        json_integer_value(json_array_get(pair, 0)) < 0 ||
        json_integer_value(json_array_get(pair, 1)) < 0 ||
        (size_t)json_integer_value(json_array_get(pair, 0)) >= n ||
        (size_t)json_integer_value(json_array_get(pair, 1)) >= n)
        return doc_fail(L->doc, pair, L->d, -EINVAL, "\"gpus\": expected two GPU indices below %zu",
                        n);
    ret->a = (unsigned)json_integer_value(json_array_get(pair, 0));
    ret->b = (unsigned)json_integer_value(json_array_get(pair, 1));
    ret->level = (nvmlGpuTopologyLevel_t)level;
    return 0;
}

static int load_topology(struct loader *L, const json_t *root)
{
    struct mock_node *node = L->node;
    json_t *list, *o;
    size_t i;
    int r;

    r = doc_get_array(L->doc, root, "topology", false, L->d, &list);
    if (r < 0 || !list || json_array_size(list) == 0)
        return r;
    node->overrides = calloc(json_array_size(list), sizeof(*node->overrides));
    if (!node->overrides)
        return -ENOMEM;
    json_array_foreach(list, i, o)
    {
        r = load_override(L, o, &node->overrides[i]);
        if (r < 0)
            return r;
        node->n_overrides++;
    }
    return 0;
}

/* ---- one GPU: scalars ---- */

static int read_cc(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    const json_t *o = pick(L, g, "computeCapability");
    const json_t *v = json_object_get(o, "computeCapability");
    long major, minor;
    char *end;

    if (!v)
        return doc_fail(L->doc, o, L->d, -EINVAL, "missing required key \"computeCapability\"");
    if (json_is_real(v) || json_is_integer(v)) {
        double x = json_number_value(v);

        major = (long)x;
        minor = (long)((x - (double)major) * 10.0 + 0.5);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);

        major = strtol(s, &end, 10);
        minor = *end == '.' ? strtol(end + 1, &end, 10) : -1;
        if (*end || end == s)
            minor = -1;
    } else
        major = minor = -1;
    if (major < 1 || major > 99 || minor < 0 || minor > 9)
        return doc_fail(L->doc, v, L->d, -EINVAL,
                        "\"computeCapability\": expected \"MAJOR.MINOR\" such as \"9.0\"");
    gpu->cc_major = (int)major;
    gpu->cc_minor = (int)minor;
    return 0;
}

static int read_pci_switch(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    const json_t *v = json_object_get(pick(L, g, "pciSwitch"), "pciSwitch");

    if (!v)
        return 0;
    if (json_is_integer(v))
        snprintf(gpu->pci_switch, sizeof(gpu->pci_switch), "%lld",
                 (long long)json_integer_value(v));
    else if (json_is_string(v) && json_string_length(v) > 0 &&
             json_string_length(v) < sizeof(gpu->pci_switch))
        snprintf(gpu->pci_switch, sizeof(gpu->pci_switch), "%s", json_string_value(v));
    else
        return doc_fail(L->doc, v, L->d, -EINVAL,
                        "\"pciSwitch\": expected an integer or a short string");
    return 0;
}

static int read_bus(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    const json_t *o = pick(L, g, "busId");
    const char *s;
    int r;

    r = doc_get_string(L->doc, o, "busId", true, NULL, L->d, &s);
    if (r < 0)
        return r;
    r = parse_bus_id(L, json_object_get(o, "busId"), &gpu->pci);
    if (r < 0)
        return r;
    for (size_t i = 0; i < gpu->index; i++)
        if (memcmp(&L->node->gpus[i].pci, &gpu->pci, sizeof(gpu->pci)) == 0)
            return doc_fail(L->doc, json_object_get(o, "busId"), L->d, -EINVAL,
                            "duplicate busId \"%s\" (GPU %zu has it)", s, i);
    return 0;
}

static int read_identity(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    char seed[2 * MOCK_STR_MAX], serial[32];
    int r;

    r = read_bus(L, g, gpu);
    if (r >= 0)
        r = read_str(L, pick(L, g, "name"), "name", true, NULL, gpu->name, sizeof(gpu->name));
    if (r < 0)
        return r;
    snprintf(seed, sizeof(seed), "%s@%08X:%02X:%02X.%X", gpu->name, gpu->pci.domain, gpu->pci.bus,
             gpu->pci.device, gpu->pci.function);
    r = read_uuid(L, pick(L, g, "uuid"), "GPU-", seed, gpu->uuid);
    snprintf(serial, sizeof(serial), "1650000000%03u", gpu->index);
    if (r >= 0)
        r = read_str(L, pick(L, g, "serial"), "serial", false, serial, gpu->serial,
                     NVML_DEVICE_SERIAL_BUFFER_SIZE);
    if (r >= 0)
        r = read_str(L, pick(L, g, "vbios"), "vbios", false, "00.00.00.00.00", gpu->vbios,
                     NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE);
    return r;
}

static int read_minor(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    const json_t *o = pick(L, g, "minor");
    int r;

    r = read_uint(L, o, "minor", false, gpu->index, 253, &gpu->minor);
    if (r < 0)
        return r;
    for (size_t i = 0; i < gpu->index; i++)
        if (L->node->gpus[i].minor == gpu->minor)
            return doc_fail(L->doc, json_object_get(o, "minor") ? json_object_get(o, "minor") : g,
                            L->d, -EINVAL, "duplicate minor number %u (GPU %zu has it)", gpu->minor,
                            i);
    return 0;
}

static int read_memory(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    unsigned total = 0, reserved = 0, used = 0, sms = 0;
    int r;

    r = read_uint(L, pick(L, g, "memory"), "memory", true, 0, 1 << 24, &total);
    if (r >= 0)
        r = read_uint(L, pick(L, g, "memoryReserved"), "memoryReserved", false, 0, 1 << 24,
                      &reserved);
    if (r >= 0)
        r = read_uint(L, pick(L, g, "memoryUsed"), "memoryUsed", false, 0, 1 << 24, &used);
    if (r >= 0)
        r = read_uint(L, pick(L, g, "multiprocessors"), "multiprocessors", false, 0, 4096, &sms);
    if (r < 0)
        return r;
    if (total == 0 || (unsigned long long)reserved + used > total)
        return doc_fail(L->doc, json_object_get(pick(L, g, "memory"), "memory"), L->d, -EINVAL,
                        "\"memory\": must be positive and hold memoryReserved + memoryUsed");
    gpu->mem_mib = total;
    gpu->reserved_mib = reserved;
    gpu->used_mib = used;
    gpu->sms = sms;
    return 0;
}

static int read_misc(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    unsigned arch = 0, brand = 0;
    int64_t numa = -1;
    int r;

    r = read_name(L, pick(L, g, "architecture"), "architecture", NULL, architectures,
                  ARRAY_SIZE(architectures), &arch);
    if (r >= 0)
        r = read_name(L, pick(L, g, "brand"), "brand", "nvidia", brands, ARRAY_SIZE(brands),
                      &brand);
    if (r >= 0)
        r = read_uint(L, pick(L, g, "pciDeviceId"), "pciDeviceId", false, 0, 0xFFFFFFFFll,
                      &gpu->pci_device_id);
    if (r >= 0)
        r = read_uint(L, pick(L, g, "pciSubSystemId"), "pciSubSystemId", false, 0, 0xFFFFFFFFll,
                      &gpu->pci_subsystem_id);
    if (r >= 0)
        r = doc_get_int(L->doc, pick(L, g, "numa"), "numa", false, -1, -1, 1023, L->d, &numa);
    if (r >= 0)
        r = doc_get_bool(L->doc, pick(L, g, "persistenceMode"), "persistenceMode", false, true,
                         L->d, &gpu->persistence);
    if (r >= 0)
        r = doc_get_bool(L->doc, pick(L, g, "ecc"), "ecc", false, true, L->d, &gpu->ecc);
    if (r >= 0)
        r = doc_get_bool(L->doc, pick(L, g, "lost"), "lost", false, false, L->d,
                         &gpu->lost_at_start);
    if (r < 0)
        return r;
    gpu->arch = arch;
    gpu->brand = (nvmlBrandType_t)brand;
    gpu->numa = (int)numa;
    return 0;
}

/* ---- one GPU: NVLink ---- */

static int read_peers(struct loader *L, const json_t *peers, struct mock_gpu *gpu)
{
    const char *key;
    json_t *v;
    unsigned links[MOCK_MAX_GPUS] = {0}, n = 0;

    json_object_foreach((json_t *)peers, key, v)
    {
        char *end;
        unsigned long peer = strtoul(key, &end, 10);

        if (!*key || *end || peer >= L->node->n_gpus || peer == gpu->index)
            return doc_fail(L->doc, v, L->d, -EINVAL,
                            "\"peers\": key \"%s\" is not the index of another GPU", key);
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > NVML_NVLINK_MAX_LINKS)
            return doc_fail(L->doc, v, L->d, -EINVAL, "\"peers\": expected a link count 1..%d",
                            NVML_NVLINK_MAX_LINKS);
        links[peer] = (unsigned)json_integer_value(v);
        n += links[peer];
    }
    if (n > NVML_NVLINK_MAX_LINKS)
        return doc_fail(L->doc, peers, L->d, -EINVAL, "\"peers\": more than %d links in all",
                        NVML_NVLINK_MAX_LINKS);
    /* Links are numbered in ascending peer order. */
    for (unsigned p = 0; p < MOCK_MAX_GPUS; p++)
        for (unsigned k = 0; k < links[p]; k++)
            gpu->nvlink.peer[gpu->nvlink.n_links++] = (int)p;
    return 0;
}

static int read_down(struct loader *L, const json_t *obj, struct mock_gpu *gpu)
{
    json_t *down, *v;
    size_t i;
    int r;

    r = doc_get_array(L->doc, obj, "down", false, L->d, &down);
    if (r < 0)
        return r;
    json_array_foreach(down, i, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) >= gpu->nvlink.n_links)
            return doc_fail(L->doc, v, L->d, -EINVAL, "\"down\": expected a link number below %u",
                            gpu->nvlink.n_links);
        gpu->nvlink.down |= 1ULL << json_integer_value(v);
    }
    return 0;
}

static int read_nvlink(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    static const char *const keys[] = {"switch", "peers", "down", NULL};
    json_t *obj, *peers;
    unsigned links = 0;
    int r;

    r = doc_get_object(L->doc, pick(L, g, "nvlink"), "nvlink", false, L->d, &obj);
    if (r < 0 || !obj)
        return r;
    L->nvlink[gpu->index] = obj;
    r = doc_check_keys(L->doc, obj, keys, L->d);
    if (r >= 0)
        r = doc_get_object(L->doc, obj, "peers", false, L->d, &peers);
    if (r < 0)
        return r;
    if (!json_object_get(obj, "switch") == !peers)
        return doc_fail(L->doc, obj, L->d, -EINVAL,
                        "\"nvlink\": expected exactly one of \"switch\" and \"peers\"");
    if (peers)
        r = read_peers(L, peers, gpu);
    else {
        r = read_uint(L, obj, "switch", true, 0, NVML_NVLINK_MAX_LINKS, &links);
        if (r >= 0 && links == 0)
            r = doc_fail(L->doc, json_object_get(obj, "switch"), L->d, -EINVAL,
                         "\"switch\": expected a link count 1..%d", NVML_NVLINK_MAX_LINKS);
        gpu->nvlink.n_links = links;
        gpu->nvlink.to_switch = true;
    }
    return r < 0 ? r : read_down(L, obj, gpu);
}

static unsigned links_between(const struct mock_gpu *a, unsigned b)
{
    unsigned n = 0;

    for (unsigned l = 0; !a->nvlink.to_switch && l < a->nvlink.n_links; l++)
        n += a->nvlink.peer[l] == (int)b;
    return n;
}

/* Direct links must be described the same way from both ends. */
static int check_peers(struct loader *L)
{
    const struct mock_node *node = L->node;

    for (unsigned i = 0; i < node->n_gpus; i++)
        for (unsigned j = 0; j < node->n_gpus; j++) {
            unsigned ij = links_between(&node->gpus[i], j), ji = links_between(&node->gpus[j], i);

            if (ij != ji)
                return doc_fail(L->doc, L->nvlink[i], L->d, -EINVAL,
                                "\"nvlink\": GPU %u has %u links to GPU %u, which has %u back", i,
                                ij, j, ji);
        }
    return 0;
}

/* ---- one GPU: MIG ---- */

struct mig_build {
    struct mock_gpu *gpu;
    uint8_t used;      /* memory slices taken */
    unsigned count[7]; /* instances per profile of the table */
};

static int read_ci(struct loader *L, const json_t *o, struct nvmlGpuInstance_st *gi,
                   unsigned *free_slices)
{
    static const char *const keys[] = {"profile", "uuid", NULL};
    struct nvmlComputeInstance_st *ci = &L->node->cis[L->ci_next];
    const char *profile;
    char *end, seed[128];
    unsigned long c;
    unsigned index;
    int r;

    r = doc_check_keys(L->doc, o, keys, L->d);
    if (r >= 0)
        r = doc_get_string(L->doc, o, "profile", true, NULL, L->d, &profile);
    if (r < 0)
        return r;
    c = strtoul(profile, &end, 10);
    if (strcmp(end, "c") != 0 || c == 0 || c > 8 ||
        !mock_mig_ci_profile(gi->prof->slices, (unsigned)c, &index))
        return doc_fail(L->doc, json_object_get(o, "profile"), L->d, -EINVAL,
                        "\"profile\": \"%s\" is not a compute instance size of a %s GPU instance",
                        profile, gi->prof->name);
    if (c > *free_slices)
        return doc_fail(L->doc, o, L->d, -EINVAL,
                        "compute instances exceed the %u slices of GPU instance %s",
                        gi->prof->slices, gi->prof->name);
    ci->gi = gi;
    ci->id = (unsigned)gi->n_cis;
    ci->slices = (unsigned)c;
    ci->profile_index = index;
    ci->start = gi->prof->slices - *free_slices;
    *free_slices -= (unsigned)c;
    if (c == gi->prof->slices)
        snprintf(ci->profile_name, sizeof(ci->profile_name), "%s", gi->prof->name);
    else
        snprintf(ci->profile_name, sizeof(ci->profile_name), "%luc.%s", c, gi->prof->name);
    snprintf(seed, sizeof(seed), "%s/%u/%u", gi->gpu->uuid, gi->id, ci->id);
    r = read_uuid(L, o, "MIG-", seed, ci->uuid);
    if (r < 0)
        return r;
    L->ci_next++;
    gi->n_cis++;
    return 0;
}

static int read_cis(struct loader *L, const json_t *inst, struct nvmlGpuInstance_st *gi)
{
    unsigned free_slices = gi->prof->slices;
    json_t *list, *o, *whole;
    size_t i;
    int r;

    r = doc_get_array(L->doc, inst, "computeInstances", false, L->d, &list);
    if (r < 0)
        return r;
    gi->cis = &L->node->cis[L->ci_next];
    if (list) {
        if (json_object_get(inst, "uuid"))
            return doc_fail(L->doc, json_object_get(inst, "uuid"), L->d, -EINVAL,
                            "\"uuid\": give the UUIDs of the compute instances instead");
        json_array_foreach(list, i, o)
        {
            r = read_ci(L, o, gi, &free_slices);
            if (r < 0)
                return r;
        }
        return 0;
    }
    /* One compute instance spanning the GPU instance, named by the instance's own uuid key. */
    whole = json_object();
    if (!whole ||
        json_object_set_new(whole, "profile", json_sprintf("%uc", gi->prof->slices)) < 0 ||
        (json_object_get(inst, "uuid") &&
         json_object_set(whole, "uuid", json_object_get(inst, "uuid")) < 0)) {
        json_decref(whole);
        return -ENOMEM;
    }
    r = read_ci(L, whole, gi, &free_slices);
    json_decref(whole);
    return r;
}

static bool placement_ok(const struct mig_build *b, const struct mock_gi_profile *p, unsigned start)
{
    bool valid = false;
    uint8_t mask;

    for (unsigned i = 0; i < p->n_starts; i++)
        valid |= p->starts[i] == start;
    mask = (uint8_t)(((1u << p->mem_slices) - 1) << start);
    return valid && (b->used & mask) == 0;
}

static int read_placement(struct loader *L, const json_t *inst, struct mig_build *b,
                          const struct mock_gi_profile *p, unsigned *ret)
{
    const json_t *v = json_object_get(inst, "placement");
    unsigned start = 0;
    int r;

    if (!v) {
        for (unsigned i = 0; i < p->n_starts; i++)
            if (placement_ok(b, p, p->starts[i])) {
                *ret = p->starts[i];
                return 0;
            }
        return doc_fail(L->doc, inst, L->d, -EINVAL, "no free placement left for %s", p->name);
    }
    r = read_uint(L, inst, "placement", false, 0, MOCK_MEM_SLICES - 1, &start);
    if (r < 0)
        return r;
    if (!placement_ok(b, p, start))
        return doc_fail(L->doc, v, L->d, -EINVAL,
                        "\"placement\": %u is not a valid free placement for %s", start, p->name);
    *ret = start;
    return 0;
}

static int read_gi_id(struct loader *L, const json_t *inst, struct mig_build *b,
                      const struct mock_gi_profile *p, unsigned start, unsigned *ret)
{
    unsigned id = 0;
    int r;

    r = read_uint(L, inst, "id", false, mock_mig_default_gi_id(p, start), 14, &id);
    if (r < 0)
        return r;
    for (size_t i = 0; i < b->gpu->n_gis; i++)
        if (b->gpu->gis[i].id == id)
            return doc_fail(L->doc,
                            json_object_get(inst, "id") ? json_object_get(inst, "id") : inst, L->d,
                            -EINVAL, "duplicate GPU instance id %u", id);
    *ret = id;
    return 0;
}

static int read_instance(struct loader *L, const json_t *inst, struct mig_build *b)
{
    static const char *const keys[] = {"profile", "placement",        "id",
                                       "uuid",    "computeInstances", NULL};
    const struct mock_mig_table *t = b->gpu->mig_table;
    struct nvmlGpuInstance_st *gi = &L->node->gis[L->gi_next];
    const struct mock_gi_profile *p;
    const char *name;
    unsigned start = 0, id = 0;
    int r;

    r = doc_check_keys(L->doc, inst, keys, L->d);
    if (r >= 0)
        r = doc_get_string(L->doc, inst, "profile", true, NULL, L->d, &name);
    if (r < 0)
        return r;
    p = mock_mig_profile_by_name(t, name);
    if (!p)
        return doc_fail(L->doc, json_object_get(inst, "profile"), L->d, -EINVAL,
                        "\"profile\": no GPU instance profile \"%s\" in table %s", name, t->name);
    if (++b->count[p - t->p] > p->instances)
        return doc_fail(L->doc, inst, L->d, -EINVAL, "more than %u instances of %s", p->instances,
                        p->name);
    r = read_placement(L, inst, b, p, &start);
    if (r >= 0)
        r = read_gi_id(L, inst, b, p, start, &id);
    if (r < 0)
        return r;
    b->used |= (uint8_t)(((1u << p->mem_slices) - 1) << start);
    *gi = (struct nvmlGpuInstance_st){.gpu = b->gpu, .prof = p, .id = id, .start = start};
    L->gi_next++;
    b->gpu->n_gis++;
    return read_cis(L, inst, gi);
}

static int read_mig_table(struct loader *L, const json_t *mig, struct mock_gpu *gpu)
{
    const char *name;
    int r;

    r = doc_get_string(L->doc, mig, "table", false, NULL, L->d, &name);
    if (r < 0)
        return r;
    gpu->mig_table = name ? mock_mig_table_by_name(name) : mock_mig_table_for_gpu(gpu->name);
    if (name && !gpu->mig_table)
        return doc_fail(L->doc, json_object_get(mig, "table"), L->d, -EINVAL,
                        "\"table\": unknown MIG table \"%s\" (a100-40gb, h100-80gb)", name);
    if (!gpu->mig_table)
        return doc_fail(L->doc, mig, L->d, -EINVAL,
                        "no MIG profile table known for \"%s\": set \"table\"", gpu->name);
    return 0;
}

static int read_mig(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    static const char *const keys[] = {"capable", "enabled", "pending", "table", "instances", NULL};
    struct mig_build b = {.gpu = gpu};
    json_t *mig, *list, *inst;
    size_t i;
    int r;

    r = doc_get_object(L->doc, pick(L, g, "mig"), "mig", false, L->d, &mig);
    if (r < 0 || !mig)
        return r;
    r = doc_check_keys(L->doc, mig, keys, L->d);
    if (r >= 0)
        r = doc_get_bool(L->doc, mig, "capable", false, false, L->d, &gpu->mig_capable);
    if (r >= 0)
        r = doc_get_bool(L->doc, mig, "enabled", false, false, L->d, &gpu->mig_enabled);
    if (r >= 0)
        r = doc_get_bool(L->doc, mig, "pending", false, gpu->mig_enabled, L->d, &gpu->mig_pending);
    if (r >= 0)
        r = doc_get_array(L->doc, mig, "instances", false, L->d, &list);
    if (r < 0)
        return r;
    if (!gpu->mig_capable) {
        if (gpu->mig_enabled || gpu->mig_pending || list)
            return doc_fail(L->doc, mig, L->d, -EINVAL,
                            "MIG settings on a GPU that is not MIG capable (set capable: true)");
        return 0;
    }
    r = read_mig_table(L, mig, gpu);
    if (r < 0)
        return r;
    if (list && json_array_size(list) > 0 && !gpu->mig_enabled)
        return doc_fail(L->doc, list, L->d, -EINVAL, "\"instances\": MIG is not enabled");
    gpu->gis = &L->node->gis[L->gi_next];
    json_array_foreach(list, i, inst)
    {
        r = read_instance(L, inst, &b);
        if (r < 0)
            return r;
    }
    return 0;
}

/* ---- GPUs ---- */

static int load_gpu(struct loader *L, const json_t *g, struct mock_gpu *gpu)
{
    int r;

    r = doc_check_keys(L->doc, g, gpu_keys, L->d);
    if (r >= 0)
        r = read_identity(L, g, gpu);
    if (r >= 0)
        r = read_minor(L, g, gpu);
    if (r >= 0)
        r = read_memory(L, g, gpu);
    if (r >= 0)
        r = read_cc(L, g, gpu);
    if (r >= 0)
        r = read_misc(L, g, gpu);
    if (r >= 0)
        r = read_pci_switch(L, g, gpu);
    if (r >= 0)
        r = read_nvlink(L, g, gpu);
    if (r >= 0)
        r = read_mig(L, g, gpu);
    return r;
}

/* Upper bounds of the GPU and compute instances the profile can create, to size the arrays. */
static void count_instances(const struct loader *L, const json_t *gpus, size_t *n_gi, size_t *n_ci)
{
    const json_t *g, *inst;
    size_t i, j;

    *n_gi = *n_ci = 0;
    json_array_foreach((json_t *)gpus, i, g)
    {
        const json_t *mig = json_object_get(pick(L, g, "mig"), "mig");
        const json_t *list = json_object_get(mig, "instances");

        json_array_foreach((json_t *)list, j, inst)
        {
            const json_t *cis = json_object_get(inst, "computeInstances");

            (*n_gi)++;
            *n_ci += json_is_array(cis) ? json_array_size(cis) : 1;
        }
    }
}

static int alloc_arrays(struct loader *L, const json_t *gpus)
{
    struct mock_node *node = L->node;
    size_t n_gi, n_ci;

    count_instances(L, gpus, &n_gi, &n_ci);
    node->n_gpus = json_array_size(gpus);
    node->gpus = calloc(node->n_gpus + 1, sizeof(*node->gpus));
    node->gis = calloc(n_gi + 1, sizeof(*node->gis));
    node->cis = calloc(n_ci + 1, sizeof(*node->cis));
    node->handles = calloc(node->n_gpus + n_ci + 1, sizeof(*node->handles));
    if (!node->gpus || !node->gis || !node->cis || !node->handles)
        return -ENOMEM;
    for (size_t i = 0; i < node->n_gpus; i++) {
        node->gpus[i].index = (unsigned)i;
        node->gpus[i].handle = &node->handles[i];
        node->handles[i].gpu = &node->gpus[i];
    }
    return 0;
}

/* MIG device handles follow the full GPUs, in compute instance order (GPU by GPU). */
static void link_mig_devices(struct mock_node *node)
{
    node->n_gis = 0;
    node->n_handles = node->n_gpus;
    for (size_t i = 0; i < node->n_gpus; i++) {
        struct mock_gpu *gpu = &node->gpus[i];

        gpu->migs = &node->handles[node->n_handles];
        for (size_t g = 0; g < gpu->n_gis; g++)
            for (size_t c = 0; c < gpu->gis[g].n_cis; c++) {
                struct nvmlDevice_st *dev = &node->handles[node->n_handles++];

                dev->gpu = gpu;
                dev->ci = &gpu->gis[g].cis[c];
                dev->ci->dev = dev;
                gpu->n_migs++;
            }
        node->n_gis += gpu->n_gis;
    }
}

static int load_gpus(struct loader *L, const json_t *root)
{
    json_t *gpus, *g, *defaults;
    size_t i;
    int r;

    r = doc_get_object(L->doc, root, "defaults", false, L->d, &defaults);
    L->defaults = defaults;
    if (r >= 0 && L->defaults)
        r = doc_check_keys(L->doc, L->defaults, gpu_keys, L->d);
    if (r >= 0)
        r = doc_get_array(L->doc, root, "gpus", true, L->d, &gpus);
    if (r < 0)
        return r;
    if (json_array_size(gpus) > MOCK_MAX_GPUS)
        return doc_fail(L->doc, gpus, L->d, -EINVAL, "\"gpus\": more than %d GPUs", MOCK_MAX_GPUS);
    r = alloc_arrays(L, gpus);
    if (r < 0)
        return r;
    json_array_foreach(gpus, i, g)
    {
        r = load_gpu(L, g, &L->node->gpus[i]);
        if (r < 0)
            return r;
    }
    L->node->n_cis = L->ci_next;
    link_mig_devices(L->node);
    return check_peers(L);
}

static int load_root(struct loader *L, const json_t *root, const char *dir)
{
    int r;

    r = doc_check_keys(L->doc, root, top_keys, L->d);
    if (r >= 0)
        r = load_driver(L, root);
    if (r >= 0)
        r = load_path(L, root, "events", dir, &L->node->events_path);
    if (r >= 0)
        r = load_path(L, root, "driverRoot", dir, &L->node->driver_root);
    if (r >= 0)
        r = load_switches(L, root);
    if (r >= 0)
        r = load_gpus(L, root);
    if (r >= 0)
        r = load_topology(L, root);
    return r;
}

int mock_profile_load(const char *path, struct diag *d, struct mock_node **ret)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    _cleanup_(mock_node_freep) struct mock_node *node = NULL;
    _cleanup_free_ char *dir = NULL;
    struct loader L = {.d = d};
    const char *slash = strrchr(path, '/');
    int r;

    r = doc_load_file(path, d, &doc);
    if (r < 0)
        return r;
    if (doc_count(doc) != 1)
        return diag_fail(d, -EINVAL, "%s: expected exactly one YAML document", path);
    if (!json_is_object(doc_root(doc, 0)))
        return doc_fail(doc, doc_root(doc, 0), d, -EINVAL, "a profile is a mapping");
    node = calloc(1, sizeof(*node));
    if (slash)
        dir = strndup(path, slash == path ? 1 : (size_t)(slash - path));
    if (!node || (slash && !dir))
        return -ENOMEM;
    L.doc = doc;
    L.node = node;
    r = load_root(&L, doc_root(doc, 0), dir);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(node);
    return 0;
}
