/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of topo_choose(): thousands of seeded random matrices (n <= 10, every k, random available
 * and must-include sets, score ranges narrow enough to force ties) checked set for set against an
 * exhaustive search that implements the objective independently; then node shapes whose answer a
 * person can check (DGX H100, a PCIe T4 box, the DGX-1 hybrid cube-mesh), exactness at 16 GPUs,
 * the budget fallback and the refused requests.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "topo.h"

/* A small deterministic generator (xorshift64*), so every run sees the same cases. */
static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1du;
}

static unsigned rnd_below(unsigned n)
{
    return (unsigned)(rnd() % n);
}

static unsigned bits(uint64_t x)
{
    return (unsigned)__builtin_popcountll(x);
}

/* The objective, written out plainly: score, NUMA nodes, groups, then lowest differing index. */
struct ref {
    uint64_t mask;
    uint64_t score;
    unsigned numa;
    unsigned groups;
};

static unsigned distinct(const int *ids, uint64_t mask)
{
    int seen[64];
    unsigned n = 0;

    for (unsigned i = 0; i < 64; i++) {
        bool dup = false;
        if (!(mask & (UINT64_C(1) << i)))
            continue;
        for (unsigned j = 0; j < n; j++)
            dup = dup || seen[j] == ids[i];
        if (!dup)
            seen[n++] = ids[i];
    }
    return n;
}

static struct ref evaluate(const struct topo_matrix *m, uint64_t mask)
{
    struct ref r = {.mask = mask};

    for (unsigned i = 0; i < m->n; i++)
        for (unsigned j = i + 1; j < m->n; j++)
            if ((mask >> i & 1) && (mask >> j & 1))
                r.score += m->score[i][j];
    r.numa = distinct(m->numa, mask);
    r.groups = distinct(m->group, mask);
    return r;
}

static bool better(const struct ref *a, const struct ref *b)
{
    if (a->score != b->score)
        return a->score > b->score;
    if (a->numa != b->numa)
        return a->numa < b->numa;
    if (a->groups != b->groups)
        return a->groups < b->groups;
    for (unsigned i = 0; i < 64; i++)
        if ((a->mask ^ b->mask) >> i & 1)
            return a->mask >> i & 1;
    return false;
}

static struct ref exhaustive(const struct topo_matrix *m, uint64_t avail, uint64_t must, unsigned k)
{
    struct ref best = {0};
    bool have = false;

    for (uint64_t mask = 0; mask < (UINT64_C(1) << m->n); mask++) {
        struct ref r;
        if ((mask & ~avail) || (mask & must) != must || bits(mask) != k)
            continue;
        r = evaluate(m, mask);
        if (!have || better(&r, &best)) {
            best = r;
            have = true;
        }
    }
    assert_true(have);
    return best;
}

/* Scores from a few shapes: tiny ranges (many ties), NVIDIA-like link scores, wide ranges. */
static uint32_t random_score(unsigned shape)
{
    switch (shape) {
    case 0:
        return rnd_below(3);
    case 1:
        return topo_link_score(rnd_below(3) * 6, (enum topo_pcie)(1 + rnd_below(5)));
    default:
        return rnd_below(100000);
    }
}

static void random_matrix(struct topo_matrix *m, unsigned n, unsigned shape)
{
    unsigned nodes = 1 + rnd_below(3), groups = 1 + rnd_below(4);

    assert_int_equal(topo_matrix_init(m, n), 0);
    for (unsigned i = 0; i < n; i++) {
        m->numa[i] = (int)rnd_below(nodes) - (rnd_below(8) == 0);
        m->group[i] = (int)rnd_below(groups);
        for (unsigned j = i + 1; j < n; j++)
            assert_int_equal(topo_matrix_set(m, i, j, random_score(shape)), 0);
    }
}

/* A random request: available is a random superset of k GPUs, must a random subset of it. */
static void random_request(unsigned n, unsigned k, uint64_t *ret_avail, uint64_t *ret_must)
{
    uint64_t avail = 0, must = 0;
    unsigned want = k + rnd_below(n - k + 1), must_n = rnd_below(k + 1);

    while (bits(avail) < want)
        avail |= UINT64_C(1) << rnd_below(n);
    while (bits(must) < must_n && rnd_below(3) != 0)
        must |= UINT64_C(1) << rnd_below(n);
    *ret_avail = avail;
    *ret_must = must & avail;
    while (bits(*ret_must) > k)
        *ret_must &= *ret_must - 1;
}

static void test_against_exhaustive(void **state)
{
    unsigned cases = 0;

    for (unsigned n = 1; n <= 10; n++)
        for (unsigned k = 1; k <= n; k++)
            for (unsigned trial = 0; trial < 45; trial++) {
                struct topo_matrix m;
                struct topo_choice c;
                uint64_t avail, must;
                struct ref want;

                random_matrix(&m, n, trial % 3);
                random_request(n, k, &avail, &must);
                want = exhaustive(&m, avail, must, k);
                assert_int_equal(topo_choose(&m, avail, must, k, NULL, &c), 0);
                assert_true(c.exact);
                assert_int_equal(c.mask, want.mask);
                assert_int_equal(c.score, want.score);
                assert_int_equal(c.numa, want.numa);
                assert_int_equal(c.groups, want.groups);
                cases++;
            }
    assert_int_equal(cases, 55 * 45);
}

/* 16 GPUs choosing 8, where the default budget guarantees exactness: checked against all 12870. */
static void test_sixteen_exact(void **state)
{
    for (unsigned trial = 0; trial < 6; trial++) {
        struct topo_matrix m;
        struct topo_choice c;
        struct ref want;

        random_matrix(&m, 16, trial % 3);
        want = exhaustive(&m, 0xffff, 0, 8);
        assert_int_equal(topo_choose(&m, 0xffff, 0, 8, NULL, &c), 0);
        assert_true(c.exact);
        assert_int_equal(c.mask, want.mask);
    }
}

/* A budget too small to finish still answers a valid set (k available GPUs including the
 * must-include ones, its score right) and says whether it finished. */
static void test_budget_fallback(void **state)
{
    struct topo_options opts = {.budget = 3};

    for (unsigned trial = 0; trial < 50; trial++) {
        struct topo_matrix m;
        struct topo_choice c;
        uint64_t avail, must;
        unsigned n = 20 + rnd_below(45), k = 1 + rnd_below(n);

        random_matrix(&m, n, trial % 3);
        random_request(n, k, &avail, &must);
        assert_int_equal(topo_choose(&m, avail, must, k, &opts, &c), 0);
        assert_int_equal(bits(c.mask), k);
        assert_int_equal(c.mask & must, must);
        assert_int_equal(c.mask & ~avail, 0);
        assert_int_equal(c.score, evaluate(&m, c.mask).score);
        assert_true(c.nodes <= 4);
        if (!c.exact)
            assert_int_equal(c.nodes, 4);
    }
}

/* 64 GPUs in 8 NVLink islands of 8: the search finds an island without exploring much. */
static void test_sixty_four(void **state)
{
    struct topo_matrix m;
    struct topo_choice c;

    assert_int_equal(topo_matrix_init(&m, 64), 0);
    for (unsigned i = 0; i < 64; i++) {
        m.numa[i] = (int)(i / 16);
        for (unsigned j = i + 1; j < 64; j++) {
            unsigned links = i / 8 == j / 8 ? 12 : 0;
            enum topo_pcie p = i / 16 == j / 16 ? TOPO_PCIE_NODE : TOPO_PCIE_SYS;
            assert_int_equal(topo_matrix_set(&m, i, j, topo_link_score(links, p)), 0);
        }
    }
    assert_int_equal(topo_choose(&m, UINT64_MAX, UINT64_C(1) << 40, 8, NULL, &c), 0);
    assert_true(c.exact);
    assert_int_equal(c.mask, UINT64_C(0xff) << 40);
}

/* The DGX H100 of examples/nodes/dgx-h100.yaml: NV18 everywhere, NUMA 0 and 1 halves, two GPUs per
 * PCIe switch (PIX), NODE within a half, SYS across. */
static void dgx_h100(struct topo_matrix *m, bool pcie_known)
{
    assert_int_equal(topo_matrix_init(m, 8), 0);
    for (unsigned i = 0; i < 8; i++) {
        m->numa[i] = (int)(i / 4);
        m->group[i] = pcie_known ? (int)(i / 2) : -1;
        for (unsigned j = i + 1; j < 8; j++) {
            enum topo_pcie p = i / 2 == j / 2   ? TOPO_PCIE_PIX
                               : i / 4 == j / 4 ? TOPO_PCIE_NODE
                                                : TOPO_PCIE_SYS;
            if (!pcie_known)
                p = TOPO_PCIE_UNKNOWN;
            assert_int_equal(topo_matrix_set(m, i, j, topo_link_score(18, p)), 0);
        }
    }
}

static uint64_t choose(const struct topo_matrix *m, uint64_t avail, uint64_t must, unsigned k)
{
    struct topo_choice c;

    assert_int_equal(topo_choose(m, avail, must, k, NULL, &c), 0);
    assert_true(c.exact);
    return c.mask;
}

static void test_dgx_h100(void **state)
{
    struct topo_matrix m;

    dgx_h100(&m, true);
    assert_int_equal(choose(&m, 0xff, 0, 4), 0x0f);
    assert_int_equal(choose(&m, 0xff, 0, 2), 0x03);
    assert_int_equal(choose(&m, 0xfc, 0, 4), 0xf0);
    assert_int_equal(choose(&m, 0xff, 0x80, 4), 0xf0);
    assert_int_equal(choose(&m, 0xff, 0x80, 2), 0xc0);
    assert_int_equal(choose(&m, 0xff, 0, 8), 0xff);
    /* Six on NUMA 0's side are impossible: the four there plus the best pair (one switch). */
    assert_int_equal(choose(&m, 0xff, 0, 6), 0x3f);
}

/* Pure NVSwitch view (every pair alike): only the tie-breaks decide, and 4 of 8 stay on one node.
 */
static void test_dgx_h100_all_equal(void **state)
{
    struct topo_matrix m;
    struct topo_choice c;

    dgx_h100(&m, false);
    assert_int_equal(topo_choose(&m, 0xff, 0, 4, NULL, &c), 0);
    assert_int_equal(c.mask, 0x0f);
    assert_int_equal(c.numa, 1);
    assert_int_equal(choose(&m, 0xe6, 0, 3), 0xe0);
    assert_int_equal(choose(&m, 0xe6, 0x02, 3), 0x26);
    assert_int_equal(choose(&m, 0x6f, 0, 5), 0x2f);
}

/* examples/nodes/pcie-t4.yaml: four T4s, two per NUMA node, no switch shared: NODE or SYS. */
static void test_pcie_t4(void **state)
{
    struct topo_matrix m;

    assert_int_equal(topo_matrix_init(&m, 4), 0);
    for (unsigned i = 0; i < 4; i++) {
        m.numa[i] = (int)(i / 2);
        for (unsigned j = i + 1; j < 4; j++) {
            enum topo_pcie p = i / 2 == j / 2 ? TOPO_PCIE_NODE : TOPO_PCIE_SYS;
            assert_int_equal(topo_matrix_set(&m, i, j, topo_link_score(0, p)), 0);
        }
    }
    assert_int_equal(choose(&m, 0xf, 0, 2), 0x3);
    assert_int_equal(choose(&m, 0xe, 0, 2), 0xc);
    assert_int_equal(choose(&m, 0xf, 0x4, 2), 0xc);
    assert_int_equal(choose(&m, 0xf, 0x1, 3), 0x7);
    assert_int_equal(choose(&m, 0xf, 0, 1), 0x1);
}

/* The DGX-1 (V100) hybrid cube-mesh: direct NVLinks, one or two per pair, some pairs none. */
static const unsigned cube_mesh[8][8] = {
    {0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0}, {1, 2, 0, 2, 0, 0, 1, 0},
    {2, 1, 2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1},
    {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0},
};

static void test_cube_mesh(void **state)
{
    struct topo_matrix m;

    assert_int_equal(topo_matrix_init(&m, 8), 0);
    for (unsigned i = 0; i < 8; i++) {
        m.numa[i] = (int)(i / 4);
        for (unsigned j = i + 1; j < 8; j++) {
            enum topo_pcie p = i / 4 == j / 4 ? TOPO_PCIE_NODE : TOPO_PCIE_SYS;
            assert_int_equal(topo_matrix_set(&m, i, j, topo_link_score(cube_mesh[i][j], p)), 0);
        }
    }
    /* A double-link pair on one node, lowest first: 0-3. */
    assert_int_equal(choose(&m, 0xff, 0, 2), 0x09);
    /* GPU 4's double links go to 0 (across sockets) and 7 (same socket): 7 wins on PCIe. */
    assert_int_equal(choose(&m, 0xff, 0x10, 2), 0x90);
    /* A quad: nine links inside each socket's quad, fewer in any other. */
    assert_int_equal(choose(&m, 0xff, 0, 4), 0x0f);
    assert_int_equal(choose(&m, 0xfe, 0, 4), 0xf0);
    /* Without 3, GPU 0 and its triangle 1-2 (four links, all on one node) beat 0-4-7 (four links,
     * two pairs across sockets): PCIe decides between equal NVLink counts. */
    assert_int_equal(choose(&m, 0xf7, 0x01, 3), 0x07);
}

static void test_refused(void **state)
{
    struct topo_matrix m;
    struct topo_choice c = {.mask = 42};

    dgx_h100(&m, true);
    assert_int_equal(topo_choose(&m, 0xff, 0, 0, NULL, &c), -EINVAL);
    assert_int_equal(topo_choose(&m, 0x0f, 0, 5, NULL, &c), -EINVAL);
    assert_int_equal(topo_choose(&m, 0x0f, 0x10, 2, NULL, &c), -EINVAL);
    assert_int_equal(topo_choose(&m, 0xff, 0x07, 2, NULL, &c), -EINVAL);
    assert_int_equal(topo_choose(&m, 0x1ff, 0, 2, NULL, &c), -EINVAL);
    assert_int_equal(c.mask, 42);
    assert_int_equal(topo_matrix_init(&m, 0), -EINVAL);
    assert_int_equal(topo_matrix_init(&m, 65), -EINVAL);
    assert_int_equal(topo_matrix_init(&m, 2), 0);
    assert_int_equal(topo_matrix_set(&m, 1, 1, 5), -EINVAL);
    assert_int_equal(topo_matrix_set(&m, 0, 2, 5), -EINVAL);
}

static void test_link_score(void **state)
{
    assert_int_equal(topo_link_score(0, TOPO_PCIE_SYS), 10);
    assert_int_equal(topo_link_score(0, TOPO_PCIE_NODE), 20);
    assert_int_equal(topo_link_score(0, TOPO_PCIE_PHB), 30);
    assert_int_equal(topo_link_score(0, TOPO_PCIE_PXB), 40);
    assert_int_equal(topo_link_score(0, TOPO_PCIE_PIX), 50);
    assert_int_equal(topo_link_score(0, TOPO_PCIE_BOARD), 60);
    assert_int_equal(topo_link_score(0, TOPO_PCIE_UNKNOWN), 0);
    assert_int_equal(topo_link_score(12, TOPO_PCIE_PIX), 1250);
    assert_int_equal(topo_link_score(1, TOPO_PCIE_SYS), 110);
    assert_true(topo_link_score(1, TOPO_PCIE_SYS) > topo_link_score(0, TOPO_PCIE_BOARD));
    assert_int_equal(topo_link_score(1000, TOPO_PCIE_SYS), 6410);
    assert_int_equal(topo_link_score(0, (enum topo_pcie)99), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_link_score),         cmocka_unit_test(test_against_exhaustive),
        cmocka_unit_test(test_sixteen_exact),      cmocka_unit_test(test_budget_fallback),
        cmocka_unit_test(test_sixty_four),         cmocka_unit_test(test_dgx_h100),
        cmocka_unit_test(test_dgx_h100_all_equal), cmocka_unit_test(test_pcie_t4),
        cmocka_unit_test(test_cube_mesh),          cmocka_unit_test(test_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
