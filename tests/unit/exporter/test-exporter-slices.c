/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the exporter's cache of NVIDIA's DRA devices (exporter-slices.h) without a network:
 * slices shaped as gpuplane's own DRA driver publishes them (src/draplugin/dra-slices.c: type,
 * uuid, parentUUID, profile on each v1 device) put, changed, deleted; devices that are not ours
 * left out; a pool republished under a new generation; attribute names qualified with the driver's
 * domain; refused slices; the cap; many slices; the watched path; a watch started on a client.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "exporter-slices.h"

#define GPU2 "GPU-8081facd-5d3c-49fb-8c78-80c20a9f564d"
#define GPU0 "GPU-59360ef0-80c3-4998-a34d-04782356ba66"
#define MIG0 "MIG-eea63077-a70f-460e-b318-14156cba9966"

static json_t *json(const char *text)
{
    json_error_t err;
    json_t *v = json_loads(text, 0, &err);
    if (!v)
        fail_msg("%s: %s", text, err.text);
    return v;
}

/* A v1 ResourceSlice of driver, pool and generation with the devices (a JSON array's text). */
static json_t *slice(const char *name, const char *driver, const char *pool, int generation,
                     const char *devices)
{
    char text[8192];
    snprintf(text, sizeof(text),
             "{\"apiVersion\": \"resource.k8s.io/v1\", \"kind\": \"ResourceSlice\","
             " \"metadata\": {\"name\": \"%s\"},"
             " \"spec\": {\"driver\": \"%s\", \"nodeName\": \"%s\","
             " \"pool\": {\"name\": \"%s\", \"generation\": %d, \"resourceSliceCount\": 1},"
             " \"devices\": %s}}",
             name, driver, pool, pool, generation, devices);
    return json(text);
}

#define GPU_DEV(name, uuid)                                                                        \
    "{\"name\": \"" name "\", \"attributes\": {\"type\": {\"string\": \"gpu\"}, \"uuid\": "        \
    "{\"string\": \"" uuid "\"}, \"index\": {\"int\": 2}, \"minor\": {\"int\": 2}}, "              \
    "\"capacity\": {\"memory\": {\"value\": \"40Gi\"}}}"
#define MIG_DEV(name, uuid, parent, profile)                                                       \
    "{\"name\": \"" name "\", \"attributes\": {\"type\": {\"string\": \"mig\"}, \"uuid\": "        \
    "{\"string\": \"" uuid "\"}, \"parentUUID\": {\"string\": \"" parent "\"}, \"profile\": "      \
    "{\"string\": \"" profile "\"}}}"

static void apply(struct exporter_slices *s, enum kube_event ev, json_t *obj, int want)
{
    assert_int_equal(exporter_slices_apply(s, ev, obj), want);
    json_decref(obj);
}

static void check(const struct exporter_slices *s, const char *pool, const char *device,
                  enum exporter_dra_kind kind, const char *uuid, const char *parent,
                  const char *profile)
{
    struct exporter_dra_device d;
    if (!exporter_slices_find(s, pool, device, &d))
        fail_msg("%s/%s: not found", pool, device);
    assert_int_equal(d.kind, kind);
    assert_string_equal(d.uuid, uuid);
    assert_string_equal(d.parent_uuid, parent);
    assert_string_equal(d.profile, profile);
}

static bool has(const struct exporter_slices *s, const char *pool, const char *device)
{
    struct exporter_dra_device d;
    return exporter_slices_find(s, pool, device, &d);
}

static struct exporter_slices *cache(size_t max)
{
    const struct exporter_slices_options o = {.max_devices = max};
    struct exporter_slices *s = NULL;
    assert_int_equal(exporter_slices_new(&o, &s), 0);
    return s;
}

static void test_put_change_delete(void **state)
{
    struct exporter_slices *s = cache(0);
    (void)state;
    apply(s, KUBE_ADDED,
          slice("node-a-gpu.nvidia.com-0", EXPORTER_DRA_DRIVER, "node-a", 1,
                "[" MIG_DEV("gpu-0-mig-2g10gb-14-0", MIG0, GPU0, "2g.10gb") "," GPU_DEV(
                    "gpu-2", GPU2) ","
                                   /* not ours: an unknown type, a GPU without uuid, a MIG
                                      device without parent, a device without a name */
                                   "{\"name\": \"vf-0\", \"attributes\": {\"type\": {\"string\": "
                                   "\"vfio\"}}},"
                                   "{\"name\": \"gpu-9\", \"attributes\": {\"type\": {\"string\": "
                                   "\"gpu\"}}},"
                                   "{\"name\": \"mig-9\", \"attributes\": {\"type\": {\"string\": "
                                   "\"mig\"}, \"uuid\": {\"string\": \"MIG-x\"}}},"
                                   "{\"attributes\": {\"type\": {\"string\": \"gpu\"}}}]"),
          0);
    check(s, "node-a", "gpu-2", EXPORTER_DRA_GPU, GPU2, "", "");
    check(s, "node-a", "gpu-0-mig-2g10gb-14-0", EXPORTER_DRA_MIG, MIG0, GPU0, "2g.10gb");
    assert_false(has(s, "node-a", "vf-0"));
    assert_false(has(s, "node-a", "gpu-9"));
    assert_false(has(s, "node-a", "mig-9"));
    assert_false(has(s, "node-b", "gpu-2")); /* the pool is part of the key */
    assert_int_equal(exporter_slices_count(s), 2);

    /* A change replaces the slice: a device it no longer lists goes. */
    apply(s, KUBE_MODIFIED,
          slice("node-a-gpu.nvidia.com-0", EXPORTER_DRA_DRIVER, "node-a", 2,
                "[" GPU_DEV("gpu-2", GPU2) "]"),
          0);
    assert_false(has(s, "node-a", "gpu-0-mig-2g10gb-14-0"));
    check(s, "node-a", "gpu-2", EXPORTER_DRA_GPU, GPU2, "", "");
    /* Another driver's slice is not kept, not even under a name we had. */
    apply(s, KUBE_MODIFIED,
          slice("node-a-gpu.nvidia.com-0", "compute-domain.nvidia.com", "node-a", 3,
                "[" GPU_DEV("gpu-2", GPU2) "]"),
          0);
    assert_false(has(s, "node-a", "gpu-2"));
    apply(s, KUBE_ADDED,
          slice("s2", EXPORTER_DRA_DRIVER, "node-a", 1, "[" GPU_DEV("gpu-2", GPU2) "]"), 0);
    apply(s, KUBE_DELETED, slice("s2", EXPORTER_DRA_DRIVER, "node-a", 1, "[]"), 0);
    assert_false(has(s, "node-a", "gpu-2"));
    assert_int_equal(exporter_slices_count(s), 0);
    exporter_slices_free(s);
}

static void test_generations(void **state)
{
    struct exporter_slices *s = cache(0);
    (void)state;
    /* A pool being republished: the new generation's slice says another UUID for gpu-2. */
    apply(s, KUBE_ADDED,
          slice("new", EXPORTER_DRA_DRIVER, "node-a", 5, "[" GPU_DEV("gpu-2", GPU0) "]"), 0);
    apply(s, KUBE_ADDED,
          slice("old", EXPORTER_DRA_DRIVER, "node-a", 4, "[" GPU_DEV("gpu-2", GPU2) "]"), 0);
    check(s, "node-a", "gpu-2", EXPORTER_DRA_GPU, GPU0, "", "");
    apply(s, KUBE_DELETED, slice("new", EXPORTER_DRA_DRIVER, "node-a", 5, "[]"), 0);
    check(s, "node-a", "gpu-2", EXPORTER_DRA_GPU, GPU2, "", "");
    exporter_slices_free(s);
}

static void test_qualified_names(void **state)
{
    struct exporter_slices *s = cache(0);
    (void)state;
    apply(s, KUBE_ADDED,
          slice("q", EXPORTER_DRA_DRIVER, "p", 1,
                "[{\"name\": \"m\", \"attributes\": {"
                "\"gpu.nvidia.com/type\": {\"string\": \"mig\"},"
                "\"gpu.nvidia.com/parentUUID\": {\"string\": \"" GPU0 "\"},"
                "\"other.example.com/uuid\": {\"string\": \"MIG-not-this\"}}}]"),
          0);
    check(s, "p", "m", EXPORTER_DRA_MIG, "", GPU0, "");
    exporter_slices_free(s);
}

static int synced_calls;
static struct exporter_slices_status last_status;

static void on_synced(const struct exporter_slices_status *st, void *userdata)
{
    (void)userdata;
    synced_calls++;
    last_status = *st;
}

static void test_refused_and_full(void **state)
{
    const struct exporter_slices_options o = {.max_devices = 3, .synced = on_synced};
    struct exporter_slices *s = NULL;
    (void)state;
    assert_int_equal(exporter_slices_new(&o, &s), 0);
    apply(s, KUBE_ADDED, json("{\"metadata\": {}, \"spec\": {\"pool\": {\"name\": \"p\"}}}"),
          -EINVAL);
    apply(s, KUBE_ADDED,
          json("{\"metadata\": {\"name\": \"x\"}, \"spec\": {\"driver\": \"gpu.nvidia.com\"}}"),
          -EINVAL);
    apply(s, KUBE_ADDED,
          slice("a", EXPORTER_DRA_DRIVER, "p", 1,
                "[" GPU_DEV("gpu-0", GPU0) "," GPU_DEV("gpu-2", GPU2) "]"),
          0);
    apply(s, KUBE_ADDED,
          slice("b", EXPORTER_DRA_DRIVER, "q", 1,
                "[" GPU_DEV("gpu-0", GPU0) "," GPU_DEV("gpu-2", GPU2) "]"),
          -ENOSPC);
    assert_false(has(s, "q", "gpu-0"));
    assert_false(exporter_slices_synced(s));
    apply(s, KUBE_SYNCED, json("{\"items\": []}"), 0);
    assert_true(exporter_slices_synced(s));
    assert_int_equal(synced_calls, 1);
    assert_int_equal(last_status.slices, 1);
    assert_int_equal(last_status.devices, 2);
    assert_int_equal(last_status.left_out, 2);
    exporter_slices_free(s);
}

static void test_many(void **state)
{
    struct exporter_slices *s = cache(0);
    char name[64], devices[4096], uuid[64];
    (void)state;
    for (int i = 0; i < 1000; i++) {
        size_t len = 0;
        len += (size_t)snprintf(devices + len, sizeof(devices) - len, "[");
        for (int g = 0; g < 8; g++)
            len += (size_t)snprintf(
                devices + len, sizeof(devices) - len,
                "%s{\"name\": \"gpu-%d\", \"attributes\": {\"type\": {\"string\": \"gpu\"}, "
                "\"uuid\": {\"string\": \"GPU-%04d-%d\"}}}",
                g ? "," : "", g, i, g);
        snprintf(devices + len, sizeof(devices) - len, "]");
        snprintf(name, sizeof(name), "node-%d", i);
        apply(s, KUBE_ADDED, slice(name, EXPORTER_DRA_DRIVER, name, 1, devices), 0);
    }
    assert_int_equal(exporter_slices_count(s), 8000);
    for (int i = 0; i < 1000; i += 37) {
        snprintf(name, sizeof(name), "node-%d", i);
        snprintf(uuid, sizeof(uuid), "GPU-%04d-7", i);
        check(s, name, "gpu-7", EXPORTER_DRA_GPU, uuid, "", "");
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "node-%d", i);
        apply(s, KUBE_DELETED, slice(name, EXPORTER_DRA_DRIVER, name, 1, "[]"), 0);
    }
    assert_int_equal(exporter_slices_count(s), 0);
    exporter_slices_free(s);
}

static void test_path(void **state)
{
    char buf[256], small[20];
    (void)state;
    assert_int_equal(exporter_slices_path(NULL, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "/apis/resource.k8s.io/v1/resourceslices"
                             "?fieldSelector=spec.driver%3Dgpu.nvidia.com");
    assert_int_equal(exporter_slices_path("gpu-node-1", buf, sizeof(buf)), 0);
    assert_string_equal(buf,
                        "/apis/resource.k8s.io/v1/resourceslices"
                        "?fieldSelector=spec.driver%3Dgpu.nvidia.com%2Cspec.nodeName%3Dgpu-node-1");
    assert_int_equal(exporter_slices_path("a&b", buf, sizeof(buf)), 0);
    assert_non_null(strstr(buf, "spec.nodeName%3Da%26b"));
    assert_int_equal(exporter_slices_path("node", small, sizeof(small)), -ENAMETOOLONG);
}

static void test_watch_on_a_client(void **state)
{
    struct kube_config cfg = {.server = "http://127.0.0.1:1", .source = "test"};
    struct exporter_slices *s = cache(0);
    struct kube_client *kube = NULL;
    struct ev_loop *loop = NULL;
    struct diag d;
    (void)state;
    diag_init(&d);
    assert_int_equal(ev_loop_new(&loop), 0);
    assert_int_equal(kube_client_new(loop, &cfg, NULL, &kube), 0);
    assert_int_equal(exporter_slices_watch(s, kube, "node-1", &d), 0);
    assert_false(exporter_slices_synced(s));
    exporter_slices_free(s);
    kube_client_free(kube);
    ev_loop_free(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_change_delete),
        cmocka_unit_test(test_generations),
        cmocka_unit_test(test_qualified_names),
        cmocka_unit_test(test_refused_and_full),
        cmocka_unit_test(test_many),
        cmocka_unit_test(test_path),
        cmocka_unit_test(test_watch_on_a_client),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
