/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of topo_choose_replicas() on the DGX H100 shape with four replicas per GPU: the load rule
 * of each policy decides how many replicas each GPU gives, topology decides among tied GPUs,
 * must-include replicas are always taken, and impossible requests are refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "topo.h"

#define GPUS 8
#define PER_GPU 4

static void dgx_h100(struct topo_matrix *m)
{
    assert_int_equal(topo_matrix_init(m, GPUS), 0);
    for (unsigned i = 0; i < GPUS; i++) {
        m->numa[i] = (int)(i / 4);
        m->group[i] = (int)(i / 2);
        for (unsigned j = i + 1; j < GPUS; j++) {
            enum topo_pcie p = i / 2 == j / 2   ? TOPO_PCIE_PIX
                               : i / 4 == j / 4 ? TOPO_PCIE_NODE
                                                : TOPO_PCIE_SYS;
            assert_int_equal(topo_matrix_set(m, i, j, topo_link_score(18, p)), 0);
        }
    }
}

/* The replicas of a node where free[g] replicas of GPU g are available (GPU-major order), and
 * each GPU advertises PER_GPU. */
struct node {
    struct topo_matrix m;
    struct topo_replica avail[GPUS * PER_GPU];
    size_t n;
    unsigned total[GPUS];
};

static void node_init(struct node *nd, const unsigned free[GPUS])
{
    dgx_h100(&nd->m);
    nd->n = 0;
    for (unsigned g = 0; g < GPUS; g++) {
        nd->total[g] = PER_GPU;
        for (unsigned r = 0; r < free[g]; r++)
            nd->avail[nd->n++] = (struct topo_replica){.gpu = g};
    }
}

/* Picks k and returns how many replicas each GPU gave, as a number with one digit per GPU
 * (GPU 0 first), which reads well in assertions. */
static unsigned long per_gpu(struct node *nd, unsigned k, enum topo_replica_policy policy)
{
    size_t picked[GPUS * PER_GPU];
    unsigned count[GPUS] = {0};
    unsigned long digits = 0;

    assert_int_equal(topo_choose_replicas(&nd->m, nd->avail, nd->n, nd->total, k, policy, picked),
                     0);
    for (unsigned i = 0; i < k; i++) {
        if (i > 0)
            assert_true(picked[i] > picked[i - 1]);
        count[nd->avail[picked[i]].gpu]++;
    }
    for (unsigned g = 0; g < GPUS; g++)
        digits = digits * 10 + count[g];
    return digits;
}

static const unsigned all_free[GPUS] = {4, 4, 4, 4, 4, 4, 4, 4};

static void test_distributed_idle(void **state)
{
    struct node nd;

    node_init(&nd, all_free);
    /* Two replicas: two GPUs, the pair behind one switch. */
    assert_int_equal(per_gpu(&nd, 2, TOPO_REPLICAS_DISTRIBUTED), 11000000);
    /* Four: one NUMA node. */
    assert_int_equal(per_gpu(&nd, 4, TOPO_REPLICAS_DISTRIBUTED), 11110000);
    /* Ten: one each, then a second from the lowest GPUs (all already in the answer). */
    assert_int_equal(per_gpu(&nd, 10, TOPO_REPLICAS_DISTRIBUTED), 22111111);
    assert_int_equal(per_gpu(&nd, 32, TOPO_REPLICAS_DISTRIBUTED), 44444444);
}

static void test_distributed_load(void **state)
{
    const unsigned busy[GPUS] = {2, 2, 2, 2, 4, 4, 4, 3};
    struct node nd;

    node_init(&nd, busy);
    /* GPUs 4-6 are idle; of those, 4 and 5 share a switch. */
    assert_int_equal(per_gpu(&nd, 2, TOPO_REPLICAS_DISTRIBUTED), 1100);
    /* Three: 4, 5, 6 (the idle ones, no choice). Four: GPU 7 (load 1) joins. */
    assert_int_equal(per_gpu(&nd, 3, TOPO_REPLICAS_DISTRIBUTED), 1110);
    assert_int_equal(per_gpu(&nd, 4, TOPO_REPLICAS_DISTRIBUTED), 1111);
    /* Five: GPUs 4-7 now tie (load 1, one pick each) ahead of 0-3 (load 2); all four are in the
     * answer already, so the lowest index gives the fifth. */
    assert_int_equal(per_gpu(&nd, 5, TOPO_REPLICAS_DISTRIBUTED), 2111);
}

static void test_packed(void **state)
{
    const unsigned busy[GPUS] = {4, 4, 4, 4, 4, 1, 4, 4};
    struct node nd;

    node_init(&nd, all_free);
    /* Fill one GPU, then its switch partner. */
    assert_int_equal(per_gpu(&nd, 6, TOPO_REPLICAS_PACKED), 42000000);
    assert_int_equal(per_gpu(&nd, 3, TOPO_REPLICAS_PACKED), 30000000);
    node_init(&nd, busy);
    /* GPU 5 is the most loaded: its last replica first, then its switch partner 4 (filled). */
    assert_int_equal(per_gpu(&nd, 3, TOPO_REPLICAS_PACKED), 2100);
}

static void test_must_include(void **state)
{
    struct node nd;
    size_t picked[4];

    node_init(&nd, all_free);
    nd.avail[6 * PER_GPU + 2].must = true;
    /* The must replica's GPU is in the answer, so the other GPUs lead by load; the best partner of
     * GPU 6 is 7 (one switch). */
    assert_int_equal(per_gpu(&nd, 2, TOPO_REPLICAS_DISTRIBUTED), 11);
    assert_int_equal(
        topo_choose_replicas(&nd.m, nd.avail, nd.n, nd.total, 2, TOPO_REPLICAS_DISTRIBUTED, picked),
        0);
    assert_int_equal(picked[0], 6 * PER_GPU + 2);
    assert_int_equal(picked[1], 7 * PER_GPU);
    /* Packed: GPU 6 is now the most loaded, so the rest come from it. */
    assert_int_equal(per_gpu(&nd, 3, TOPO_REPLICAS_PACKED), 30);
    /* Only the must replica. */
    assert_int_equal(per_gpu(&nd, 1, TOPO_REPLICAS_PACKED), 10);
}

static void test_refused(void **state)
{
    struct node nd;
    size_t picked[GPUS * PER_GPU + 1] = {99};

    node_init(&nd, all_free);
    assert_int_equal(
        topo_choose_replicas(&nd.m, nd.avail, nd.n, nd.total, 0, TOPO_REPLICAS_DISTRIBUTED, picked),
        -EINVAL);
    assert_int_equal(topo_choose_replicas(&nd.m, nd.avail, nd.n, nd.total, 33,
                                          TOPO_REPLICAS_DISTRIBUTED, picked),
                     -EINVAL);
    nd.avail[0].must = nd.avail[1].must = true;
    assert_int_equal(
        topo_choose_replicas(&nd.m, nd.avail, nd.n, nd.total, 1, TOPO_REPLICAS_DISTRIBUTED, picked),
        -EINVAL);
    nd.avail[0].must = nd.avail[1].must = false;
    nd.avail[3].gpu = GPUS;
    assert_int_equal(
        topo_choose_replicas(&nd.m, nd.avail, nd.n, nd.total, 1, TOPO_REPLICAS_DISTRIBUTED, picked),
        -EINVAL);
    nd.avail[3].gpu = 0;
    nd.total[0] = 3;
    assert_int_equal(
        topo_choose_replicas(&nd.m, nd.avail, nd.n, nd.total, 1, TOPO_REPLICAS_PACKED, picked),
        -EINVAL);
    assert_int_equal(picked[0], 99);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distributed_idle), cmocka_unit_test(test_distributed_load),
        cmocka_unit_test(test_packed),           cmocka_unit_test(test_must_include),
        cmocka_unit_test(test_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
