/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the pod-resources mapping: the device id forms (UUIDs, MIG UUIDs, NVIDIA's `::n`
 * replicas, GKE's `nvidia<N>/gi<M>/vgpu<K>` and `<id>/vgpu<K>`), which resources are mapped, and
 * DRA claim results, on List responses built in the test.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "exporter-pods.h"

static void test_parse_id(void **state)
{
    static const struct {
        const char *id, *device;
        int gi, vgpu, r;
    } cases[] = {
        {"GPU-15125529-e60f-498d-95ba-a8065d1c108c", "GPU-15125529-e60f-498d-95ba-a8065d1c108c", -1,
         -1, 0},
        {"GPU-aaaa::3", "GPU-aaaa", -1, 3, 0},
        {"MIG-eea63077-a70f-460e-b318-14156cba9966", "MIG-eea63077-a70f-460e-b318-14156cba9966", -1,
         -1, 0},
        {"MIG-bbbb::1", "MIG-bbbb", -1, 1, 0},
        {"nvidia0/gi2", "nvidia0", 2, -1, 0},
        {"nvidia1/gi3/vgpu4", "nvidia1", 3, 4, 0},
        {"nvidia2/vgpu1", "nvidia2", -1, 1, 0},
        {"GPU-cccc/vgpu0", "GPU-cccc", -1, 0, 0},
        {"3", "3", -1, -1, 0},
        {"nvidia0/giX", "nvidia0/giX", -1, -1, 0}, /* not a GKE partition: the id itself */
        {"::2", NULL, 0, 0, -EINVAL},
        {"", NULL, 0, 0, -EINVAL},
    };
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        char *device = NULL;
        int gi = 0, vgpu = 0;
        int r = exporter_pods_parse_id(cases[i].id, &device, &gi, &vgpu);
        assert_int_equal(r, cases[i].r);
        if (r < 0)
            continue;
        assert_string_equal(device, cases[i].device);
        assert_int_equal(gi, cases[i].gi);
        assert_int_equal(vgpu, cases[i].vgpu);
        free(device);
    }
}

static void test_resources(void **state)
{
    const char *const extra[] = {"example.com/gpu", NULL};
    assert_true(exporter_pods_resource_wanted("nvidia.com/gpu", NULL));
    assert_true(exporter_pods_resource_wanted("nvidia.com/mig-1g.5gb", NULL));
    assert_false(exporter_pods_resource_wanted("nvidia.com/gpu.shared", NULL));
    assert_false(exporter_pods_resource_wanted("example.com/gpu", NULL));
    assert_true(exporter_pods_resource_wanted("example.com/gpu", extra));
    assert_false(exporter_pods_resource_wanted(NULL, extra));
}

static void test_from_list(void **state)
{
    char *ids_a[] = {"GPU-aaaa::0", "GPU-bbbb::1"};
    char *ids_b[] = {"MIG-cccc"};
    char *ids_c[] = {"0000:00:1f.0"};
    V1__ContainerDevices gpus = V1__CONTAINER_DEVICES__INIT, migs = V1__CONTAINER_DEVICES__INIT,
                         nics = V1__CONTAINER_DEVICES__INIT;
    gpus.resource_name = "nvidia.com/gpu";
    gpus.n_device_ids = 2;
    gpus.device_ids = ids_a;
    migs.resource_name = "nvidia.com/mig-1g.5gb";
    migs.n_device_ids = 1;
    migs.device_ids = ids_b;
    nics.resource_name = "example.com/nic";
    nics.n_device_ids = 1;
    nics.device_ids = ids_c;
    V1__ContainerDevices *devs1[] = {&gpus, &nics};
    V1__ContainerDevices *devs2[] = {&migs};

    V1__CDIDevice cdi = V1__CDIDEVICE__INIT;
    cdi.name = "k8s.gpu.nvidia.com/claim=x-gpu-3";
    V1__CDIDevice *cdis[] = {&cdi};
    V1__ClaimResource cr = V1__CLAIM_RESOURCE__INIT;
    cr.driver_name = "gpu.nvidia.com";
    cr.pool_name = "node-1";
    cr.device_name = "gpu-3";
    cr.n_cdi_devices = 1;
    cr.cdi_devices = cdis;
    V1__ClaimResource *crs[] = {&cr};
    V1__DynamicResource dr = V1__DYNAMIC_RESOURCE__INIT;
    dr.claim_name = "train";
    dr.claim_namespace = "ml";
    dr.n_claim_resources = 1;
    dr.claim_resources = crs;
    V1__DynamicResource *drs[] = {&dr};

    V1__ContainerResources c1 = V1__CONTAINER_RESOURCES__INIT, c2 = V1__CONTAINER_RESOURCES__INIT;
    c1.name = "trainer";
    c1.n_devices = 2;
    c1.devices = devs1;
    c2.name = "sidecar";
    c2.n_devices = 1;
    c2.devices = devs2;
    c2.n_dynamic_resources = 1;
    c2.dynamic_resources = drs;
    V1__ContainerResources *cs[] = {&c1, &c2};
    V1__PodResources pod = V1__POD_RESOURCES__INIT;
    pod.name = "job-0";
    pod.namespace_ = "ml";
    pod.n_containers = 2;
    pod.containers = cs;
    V1__PodResources *pods[] = {&pod};
    V1__ListPodResourcesResponse resp = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
    resp.n_pod_resources = 1;
    resp.pod_resources = pods;

    struct exporter_pods p;
    const struct exporter_pods_options without_dra = {0};
    assert_int_equal(exporter_pods_from_list(&resp, &without_dra, &p), 0);
    assert_int_equal(p.n, 3); /* two GPU replicas and the MIG device; not the NIC */
    assert_string_equal(p.v[0].device, "GPU-aaaa");
    assert_int_equal(p.v[0].vgpu, 0);
    assert_string_equal(p.v[1].device, "GPU-bbbb");
    assert_int_equal(p.v[1].vgpu, 1);
    assert_string_equal(p.v[1].pod, "job-0");
    assert_string_equal(p.v[1].namespace_, "ml");
    assert_string_equal(p.v[1].container, "trainer");
    assert_string_equal(p.v[2].device, "MIG-cccc");
    assert_string_equal(p.v[2].container, "sidecar");
    exporter_pods_release(&p);

    const struct exporter_pods_options with_dra = {.dra = true};
    assert_int_equal(exporter_pods_from_list(&resp, &with_dra, &p), 0);
    assert_int_equal(p.n, 4);
    const struct exporter_pod_ref *claim = &p.v[3];
    assert_null(claim->device);
    assert_string_equal(claim->claim_name, "train");
    assert_string_equal(claim->driver, "gpu.nvidia.com");
    assert_string_equal(claim->pool, "node-1");
    assert_string_equal(claim->dra_device, "gpu-3");
    assert_string_equal(claim->container, "sidecar");
    exporter_pods_release(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_id),
        cmocka_unit_test(test_resources),
        cmocka_unit_test(test_from_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
