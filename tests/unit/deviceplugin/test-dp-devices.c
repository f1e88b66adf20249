/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Resources and device ids from the inventory and the config, on the mock A100 MIG node (GPUs 0
 * and 1 MIG-enabled, 2 and 3 not) and the DGX H100: the three MIG strategies, time-slicing
 * replicas, renameByDefault, a per-resource rename with per-GPU replica counts, `devices: N`,
 * resource patterns, the index form of ids, lookup by id, MIG capability minors, and comparing two
 * builds of a resource.
 */
#include "dp-test-gpu.h"

#define A100_GPU0 "GPU-59360ef0-80c3-4998-a34d-04782356ba66"
#define A100_GPU2 "GPU-8081facd-5d3c-49fb-8c78-80c20a9f564d"
#define A100_GPU3 "GPU-4b61c9a8-f9d3-4474-ae4d-e98fe236b3e3"
#define MIG_0_1 "MIG-eea63077-a70f-460e-b318-14156cba9966"

static void test_none_exposes_full_gpus(void **state)
{
    struct node *n = node_new("a100-mig", "flags:\n  migStrategy: none\n");
    assert_int_equal(n->res->n, 1);
    struct dp_resource *r = node_resource(n, "nvidia.com/gpu");
    assert_string_equal(r->endpoint, "nvidia-gpu.sock");
    assert_int_equal(r->n_devices, 4);
    assert_false(r->shared);
    for (size_t i = 0; i < 4; i++) {
        char index[8];
        snprintf(index, sizeof(index), "%zu", i);
        assert_string_equal(r->devices[i].id, n->inv->devices[i].uuid);
        assert_string_equal(r->devices[i].index_id, index);
        assert_int_equal(r->devices[i].mig, -1);
        assert_int_equal(r->devices[i].replica, -1);
        assert_int_equal(r->devices[i].numa, i < 2 ? 0 : 1);
        assert_true(r->devices[i].healthy);
    }
    assert_string_equal(r->devices[0].id, A100_GPU0);
    node_free(n);
}

static void test_single_refuses_mixed_node(void **state)
{
    struct node *n = calloc(1, sizeof(*n));
    struct diag d;
    diag_init(&d);
    node_open(n, "a100-mig", "flags:\n  migStrategy: single\n");
    assert_int_equal(dp_resources_build(&n->cfg, n->inv, NULL, &d, &n->res), -EINVAL);
    assert_null(n->res);
    assert_non_null(strstr(d.msg, "GPU 2 has MIG disabled"));
    node_free(n);
}

static void test_single_without_mig_is_full_gpus(void **state)
{
    struct node *n = node_new("dgx-h100", "flags:\n  migStrategy: single\n");
    assert_int_equal(n->res->n, 1);
    assert_int_equal(node_resource(n, "nvidia.com/gpu")->n_devices, 8);
    node_free(n);
}

static void test_mixed(void **state)
{
    struct node *n = node_new("a100-mig", "flags:\n  migStrategy: mixed\n");
    /* 1c.3g.20gb and 2c.3g.20gb (CI slices != GI slices) are not exposed, as in NVIDIA's. */
    assert_int_equal(n->res->n, 4);
    struct dp_resource *big = node_resource(n, "nvidia.com/mig-3g.20gb");
    struct dp_resource *mid = node_resource(n, "nvidia.com/mig-2g.10gb");
    struct dp_resource *small = node_resource(n, "nvidia.com/mig-1g.5gb");
    struct dp_resource *gpu = node_resource(n, "nvidia.com/gpu");
    assert_string_equal(small->endpoint, "nvidia-mig-1g.5gb.sock");
    assert_int_equal(big->n_devices, 2);
    assert_string_equal(big->devices[0].index_id, "0:0");
    assert_string_equal(big->devices[1].index_id, "1:0");
    assert_int_equal(mid->n_devices, 1);
    assert_string_equal(mid->devices[0].id, MIG_0_1);
    assert_string_equal(mid->devices[0].index_id, "0:1");
    assert_int_equal(mid->devices[0].gpu, 0);
    assert_int_equal(mid->devices[0].mig, 1);
    assert_int_equal(small->n_devices, 2);
    assert_string_equal(small->devices[1].index_id, "0:3");
    /* MIG-enabled GPUs are never full GPUs under mixed. */
    assert_int_equal(gpu->n_devices, 2);
    assert_string_equal(gpu->devices[0].id, A100_GPU2);
    assert_string_equal(gpu->devices[1].id, A100_GPU3);
    assert_int_equal(gpu->per_gpu[2], 1);
    assert_int_equal(gpu->per_gpu[0], 0);
    node_free(n);
}

static void test_time_slicing_replicas(void **state)
{
    struct node *n = node_new("dgx-h100", "sharing:\n  timeSlicing:\n"
                                          "    failRequestsGreaterThanOne: true\n"
                                          "    resources:\n    - name: nvidia.com/gpu\n"
                                          "      replicas: 4\n");
    struct dp_resource *r = node_resource(n, "nvidia.com/gpu");
    char want[128];
    assert_int_equal(r->n_devices, 32);
    assert_true(r->shared);
    assert_false(r->mps);
    assert_true(r->fail_requests_greater_than_one);
    for (size_t i = 0; i < 32; i++) {
        snprintf(want, sizeof(want), "%s::%zu", n->inv->devices[i / 4].uuid, i % 4);
        assert_string_equal(r->devices[i].id, want);
        assert_string_equal(r->devices[i].uuid, n->inv->devices[i / 4].uuid);
        assert_int_equal(r->devices[i].replica, (int)(i % 4));
    }
    assert_int_equal(r->per_gpu[7], 4);
    assert_ptr_equal(dp_resource_find(r, want), &r->devices[31]);
    assert_null(dp_resource_find(r, n->inv->devices[0].uuid));
    node_free(n);
}

static void test_rename_by_default(void **state)
{
    struct node *n = node_new("pcie-t4", "sharing:\n  timeSlicing:\n    renameByDefault: true\n"
                                         "    resources:\n    - name: gpu\n      replicas: 2\n");
    assert_int_equal(n->res->n, 1);
    struct dp_resource *r = node_resource(n, "nvidia.com/gpu.shared");
    assert_string_equal(r->endpoint, "nvidia-gpu.shared.sock");
    assert_int_equal(r->n_devices, 8);
    node_free(n);
}

static void test_mps_resource(void **state)
{
    struct node *n = node_new("pcie-t4", "flags:\n  mpsRoot: /run/nvidia/mps\n"
                                         "sharing:\n  mps:\n    resources:\n"
                                         "    - name: gpu\n      replicas: 3\n");
    struct dp_resource *r = node_resource(n, "nvidia.com/gpu");
    assert_true(r->mps);
    assert_true(r->fail_requests_greater_than_one); /* MPS default */
    assert_int_equal(r->n_devices, 12);
    node_free(n);
}

/* gpuplane honours rename and per-GPU replicas; GPUs left out keep the plain resource. */
static void test_rename_and_per_gpu_replicas(void **state)
{
    struct node *n = node_new("dgx-h100", "sharing:\n  timeSlicing:\n    resources:\n"
                                          "    - name: gpu\n      rename: gpu-slice\n"
                                          "      replicas: 2\n      devices:\n      - 0\n"
                                          "      - device: 1\n        replicas: 4\n");
    assert_int_equal(n->res->n, 2);
    struct dp_resource *slice = node_resource(n, "nvidia.com/gpu-slice");
    struct dp_resource *whole = node_resource(n, "nvidia.com/gpu");
    assert_string_equal(slice->endpoint, "nvidia-gpu-slice.sock");
    assert_int_equal(slice->n_devices, 6);
    assert_int_equal(slice->per_gpu[0], 2);
    assert_int_equal(slice->per_gpu[1], 4);
    assert_int_equal(slice->devices[5].replica, 3);
    assert_int_equal(whole->n_devices, 6);
    assert_false(whole->shared);
    assert_string_equal(whole->devices[0].index_id, "2");
    node_free(n);
}

static void test_devices_count(void **state)
{
    struct node *n = node_new("pcie-t4", "sharing:\n  timeSlicing:\n    resources:\n"
                                         "    - name: gpu\n      replicas: 2\n      devices: 1\n");
    struct dp_resource *r = node_resource(n, "nvidia.com/gpu");
    /* the first GPU replicated, the other three whole, all under one name */
    assert_int_equal(r->n_devices, 5);
    assert_int_equal(r->devices[1].replica, 1);
    assert_int_equal(r->devices[2].replica, -1);
    node_free(n);
}

static void test_replicated_mig_profile(void **state)
{
    struct node *n = node_new("a100-mig", "flags:\n  migStrategy: mixed\n"
                                          "sharing:\n  timeSlicing:\n    resources:\n"
                                          "    - name: mig-1g.5gb\n      replicas: 3\n");
    struct dp_resource *r = node_resource(n, "nvidia.com/mig-1g.5gb");
    assert_int_equal(r->n_devices, 6);
    assert_int_equal(r->per_gpu[0], 6);
    assert_int_equal(strncmp(r->devices[0].id, "MIG-", 4), 0);
    assert_non_null(strstr(r->devices[0].id, "::0"));
    node_free(n);
}

static void test_patterns(void **state)
{
    struct node *n = node_new("dgx-h100", "resources:\n  gpus:\n  - pattern: \"*H100*\"\n"
                                          "    name: h100\n");
    assert_int_equal(n->res->n, 1);
    assert_int_equal(node_resource(n, "nvidia.com/h100")->n_devices, 8);
    node_free(n);

    struct diag d;
    diag_init(&d);
    n = calloc(1, sizeof(*n));
    node_open(n, "pcie-t4", "resources:\n  gpus:\n  - pattern: \"*H100*\"\n    name: h100\n");
    assert_int_equal(dp_resources_build(&n->cfg, n->inv, NULL, &d, &n->res), -EINVAL);
    assert_non_null(strstr(d.msg, "matches no pattern"));
    node_free(n);
}

static void test_mig_capability_minors(void **state)
{
    static const char minors[] = "config 1\nmonitor 2\ngpu0/gi3/access 30\n"
                                 "gpu0/gi3/ci0/access 31\ngpu0/gi2/access 21\n";
    struct node *n = calloc(1, sizeof(*n));
    node_open(n, "a100-mig", "flags:\n  migStrategy: mixed\n");
    node_build(n, minors);
    const struct dp_device *mid = &node_resource(n, "nvidia.com/mig-2g.10gb")->devices[0];
    assert_int_equal(mid->caps[0], 30);
    assert_int_equal(mid->caps[1], 31);
    const struct dp_device *big = &node_resource(n, "nvidia.com/mig-3g.20gb")->devices[0];
    assert_int_equal(big->caps[0], 21);
    assert_int_equal(big->caps[1], -1);
    node_free(n);
}

static void test_lost_gpu_not_advertised(void **state)
{
    struct node *n = node_new("lost-gpu", "");
    /* GPU 5 fell off the bus before NVML could read its UUID: it cannot be named. */
    assert_int_equal(node_resource(n, "nvidia.com/gpu")->n_devices, 7);
    node_free(n);
}

/* What decides whether a rebuilt resource needs a new ListAndWatch snapshot. */
static void test_same_devices(void **state)
{
    struct node *a = node_new("dgx-h100", "");
    struct node *b = node_new("dgx-h100", "");
    struct node *c = node_new("dgx-h100", "sharing:\n  timeSlicing:\n    resources:\n"
                                          "    - name: gpu\n      replicas: 2\n");
    struct dp_resource *ra = node_resource(a, "nvidia.com/gpu");
    struct dp_resource *rb = node_resource(b, "nvidia.com/gpu");
    assert_true(dp_resource_same_devices(ra, rb));
    rb->devices[3].healthy = false;
    assert_false(dp_resource_same_devices(ra, rb));
    rb->devices[3].healthy = true;
    rb->devices[3].numa = 7;
    assert_false(dp_resource_same_devices(ra, rb));
    rb->devices[3].numa = ra->devices[3].numa;
    rb->n_devices--;
    assert_false(dp_resource_same_devices(ra, rb));
    rb->n_devices++;
    assert_false(dp_resource_same_devices(ra, node_resource(c, "nvidia.com/gpu")));
    node_free(a);
    node_free(b);
    node_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none_exposes_full_gpus),
        cmocka_unit_test(test_single_refuses_mixed_node),
        cmocka_unit_test(test_single_without_mig_is_full_gpus),
        cmocka_unit_test(test_mixed),
        cmocka_unit_test(test_time_slicing_replicas),
        cmocka_unit_test(test_rename_by_default),
        cmocka_unit_test(test_mps_resource),
        cmocka_unit_test(test_rename_and_per_gpu_replicas),
        cmocka_unit_test(test_devices_count),
        cmocka_unit_test(test_replicated_mig_profile),
        cmocka_unit_test(test_patterns),
        cmocka_unit_test(test_mig_capability_minors),
        cmocka_unit_test(test_lost_gpu_not_advertised),
        cmocka_unit_test(test_same_devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
