/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GetPreferredAllocation: on the DGX H100 (NVSwitch: every pair alike, two NUMA nodes of four) the
 * best set stays on one NUMA node and follows must-include ids; on the T4 server (PCIe only) pairs
 * on one NUMA node win; replicas spread (distributed) or pack (packed); MIG devices; and what the
 * kubelet may send that makes no sense (unknown ids, a size above the candidates, size 0) never
 * fails the call.
 */
#include "dp-test-gpu.h"

/* Asks for size ids out of avail (comma list) with must (comma list); returns the answer joined
 * with ','. */
static char *prefer(struct node *n, const char *resource, const char *avail, const char *must,
                    int size)
{
    struct dp_topo *topo = malloc(sizeof(*topo));
    assert_non_null(topo);
    dp_topo_build(topo, n->inv);
    V1beta1__ContainerPreferredAllocationRequest creq =
        V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
    V1beta1__ContainerPreferredAllocationRequest *creqs[] = {&creq};
    V1beta1__PreferredAllocationRequest req = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
    char **a = test_split(avail, &creq.n_available_deviceids);
    char **m = test_split(must, &creq.n_must_include_deviceids);
    creq.available_deviceids = a;
    creq.must_include_deviceids = m;
    creq.allocation_size = size;
    req.n_container_requests = 1;
    req.container_requests = creqs;
    V1beta1__PreferredAllocationResponse *resp = NULL;
    assert_int_equal(dp_prefer(&n->cfg, node_resource(n, resource), topo, &req, &resp), 0);
    assert_int_equal(resp->n_container_responses, 1);
    char *got = test_join(resp->container_responses[0]->deviceids,
                          resp->container_responses[0]->n_deviceids);
    protobuf_c_message_free_unpacked(&resp->base, NULL);
    free(a);
    free(m);
    free(topo);
    return got;
}

static void assert_prefer(struct node *n, const char *resource, const char *avail, const char *must,
                          int size, const char *want)
{
    char *got = prefer(n, resource, avail, must, size);
    if (strcmp(got, want) != 0)
        fail_msg("got %s\nwant %s", got, want);
    free(got);
}

static void test_dgx_stays_on_one_numa_node(void **state)
{
    struct node *n = node_new("dgx-h100", "");
    struct dp_resource *r = node_resource(n, "nvidia.com/gpu");
    char *all = test_ids(r, 0, 7), *low = test_ids(r, 0, 3), *high = test_ids(r, 4, 7);
    assert_prefer(n, "nvidia.com/gpu", all, "", 4, low);
    /* GPU 6 must be in: the set moves to its NUMA node; must-include ids come first. */
    char want[512];
    snprintf(want, sizeof(want), "%s,%s,%s,%s", r->devices[6].id, r->devices[4].id,
             r->devices[5].id, r->devices[7].id);
    assert_prefer(n, "nvidia.com/gpu", all, r->devices[6].id, 4, want);
    assert_prefer(n, "nvidia.com/gpu", all, high, 4, high);
    free(all);
    free(low);
    free(high);
    node_free(n);
}

static void test_t4_pairs_by_numa(void **state)
{
    struct node *n = node_new("pcie-t4", "");
    struct dp_resource *r = node_resource(n, "nvidia.com/gpu");
    char avail[512], want[256];
    snprintf(avail, sizeof(avail), "%s,%s,%s", r->devices[0].id, r->devices[2].id,
             r->devices[3].id);
    snprintf(want, sizeof(want), "%s,%s", r->devices[2].id, r->devices[3].id);
    assert_prefer(n, "nvidia.com/gpu", avail, "", 2, want);
    node_free(n);
}

static void test_odd_requests_never_fail(void **state)
{
    struct node *n = node_new("pcie-t4", "");
    struct dp_resource *r = node_resource(n, "nvidia.com/gpu");
    char avail[512], want[512];
    /* More wanted than offered: everything offered, must first. */
    snprintf(avail, sizeof(avail), "%s,%s", r->devices[0].id, r->devices[1].id);
    snprintf(want, sizeof(want), "%s,%s", r->devices[1].id, r->devices[0].id);
    assert_prefer(n, "nvidia.com/gpu", avail, r->devices[1].id, 3, want);
    /* Unknown ids do not break the choice among the known ones. */
    snprintf(avail, sizeof(avail), "GPU-gone,%s,%s,%s", r->devices[0].id, r->devices[2].id,
             r->devices[3].id);
    snprintf(want, sizeof(want), "%s,%s", r->devices[2].id, r->devices[3].id);
    assert_prefer(n, "nvidia.com/gpu", avail, "", 2, want);
    assert_prefer(n, "nvidia.com/gpu", avail, "", 0, "");
    node_free(n);
}

static void test_lost_gpu_node(void **state)
{
    struct node *n = node_new("lost-gpu", "");
    struct dp_resource *r = node_resource(n, "nvidia.com/gpu");
    char *all = test_ids(r, 0, 6);
    char *got = prefer(n, "nvidia.com/gpu", all, "", 3);
    size_t count = 0;
    char **v = test_split(got, &count);
    assert_int_equal(count, 3);
    free(v);
    free(got);
    free(all);
    node_free(n);
}

static size_t distinct_gpus(struct node *n, const char *resource, const char *ids)
{
    size_t count = 0, distinct = 0;
    char **v = test_split(ids, &count);
    bool seen[TOPO_MAX_GPUS] = {0};
    for (size_t i = 0; i < count; i++) {
        const struct dp_device *d = dp_resource_find(node_resource(n, resource), v[i]);
        assert_non_null(d);
        distinct += !seen[d->gpu];
        seen[d->gpu] = true;
    }
    free(v);
    return distinct;
}

static void test_replicas_distributed_and_packed(void **state)
{
    static const char ts[] = "sharing:\n  timeSlicing:\n    resources:\n"
                             "    - name: gpu\n      replicas: 4\n";
    struct node *n = node_new("pcie-t4", ts);
    struct dp_resource *r = node_resource(n, "nvidia.com/gpu");
    char *all = test_ids(r, 0, 15);
    char *got = prefer(n, "nvidia.com/gpu", all, "", 2);
    assert_int_equal(distinct_gpus(n, "nvidia.com/gpu", got), 2);
    free(got);
    node_free(n);

    char cfg[256];
    snprintf(cfg, sizeof(cfg), "flags:\n  plugin:\n    sharedDevicesAllocationPolicy: packed\n%s",
             ts);
    n = node_new("pcie-t4", cfg);
    got = prefer(n, "nvidia.com/gpu", all, "", 3);
    assert_int_equal(distinct_gpus(n, "nvidia.com/gpu", got), 1);
    free(got);
    free(all);
    node_free(n);
}

static void test_mig_devices(void **state)
{
    struct node *n = node_new("a100-mig", "flags:\n  migStrategy: mixed\n");
    struct dp_resource *r = node_resource(n, "nvidia.com/mig-1g.5gb");
    char *all = test_ids(r, 0, 1);
    char *got = prefer(n, "nvidia.com/mig-1g.5gb", all, r->devices[1].id, 1);
    assert_string_equal(got, r->devices[1].id);
    free(got);
    free(all);
    node_free(n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dgx_stays_on_one_numa_node),
        cmocka_unit_test(test_t4_pairs_by_numa),
        cmocka_unit_test(test_odd_requests_never_fail),
        cmocka_unit_test(test_lost_gpu_node),
        cmocka_unit_test(test_replicas_distributed_and_packed),
        cmocka_unit_test(test_mig_devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
