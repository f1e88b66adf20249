/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Benchmark of topo_choose(): how long one GetPreferredAllocation-sized choice takes on node shapes
 * (DGX H100, a 16-GPU NVSwitch box, four 8-GPU NVLink islands) and on random matrices, per (n, k).
 * Prints a Markdown table: p50/p99/max microseconds per call, the largest node count, and whether
 * every call was exact. Not a test: run on demand, results go to docs/benchmarks.md.
 *
 * Usage: bench-topo [calls per row] (default 2000).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "topo.h"

#define MAX_CALLS 100000

static uint64_t rng_state = 0x243f6a8885a308d3u;

static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1du;
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* NVSwitch islands of `island` GPUs with `links` NVLinks per pair (none between islands), NUMA
 * node per `per_numa` GPUs, two GPUs per PCIe switch. */
static void islands(struct topo_matrix *m, unsigned n, unsigned island, unsigned links,
                    unsigned per_numa)
{
    if (topo_matrix_init(m, n) < 0)
        abort();
    for (unsigned i = 0; i < n; i++) {
        m->numa[i] = (int)(i / per_numa);
        m->group[i] = (int)(i / 2);
        for (unsigned j = i + 1; j < n; j++) {
            enum topo_pcie p = i / 2 == j / 2                 ? TOPO_PCIE_PIX
                               : i / per_numa == j / per_numa ? TOPO_PCIE_NODE
                                                              : TOPO_PCIE_SYS;
            unsigned l = i / island == j / island ? links : 0;
            if (topo_matrix_set(m, i, j, topo_link_score(l, p)) < 0)
                abort();
        }
    }
}

/* Random NVLink counts 0..12 and PCIe levels: a worst case with few ties and no structure. */
static void random_matrix(struct topo_matrix *m, unsigned n)
{
    if (topo_matrix_init(m, n) < 0)
        abort();
    for (unsigned i = 0; i < n; i++) {
        m->numa[i] = (int)(rnd() % 2);
        for (unsigned j = i + 1; j < n; j++) {
            unsigned l = (unsigned)(rnd() % 13);
            enum topo_pcie p = (enum topo_pcie)(1 + rnd() % 5);
            if (topo_matrix_set(m, i, j, topo_link_score(l, p)) < 0)
                abort();
        }
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

struct row {
    const char *shape;
    unsigned n;
    unsigned k;
};

/* Random shapes get a new matrix every call; the others repeat one. The available set is all GPUs
 * for every second call and a random 3/4 (at least k) for the others. */
static void run(const struct row *r, unsigned calls, uint64_t *ns)
{
    struct topo_matrix m;
    uint64_t max_nodes = 0;
    unsigned exact = 0;
    uint64_t all = r->n == 64 ? UINT64_MAX : (UINT64_C(1) << r->n) - 1;

    if (strcmp(r->shape, "dgx-h100") == 0)
        islands(&m, r->n, 8, 18, 4);
    else if (strcmp(r->shape, "nvswitch-16") == 0)
        islands(&m, r->n, 16, 6, 8);
    else if (strcmp(r->shape, "4x8-islands") == 0)
        islands(&m, r->n, 8, 18, 16);
    for (unsigned c = 0; c < calls; c++) {
        struct topo_choice ch;
        uint64_t avail = all, t0;

        if (strcmp(r->shape, "random") == 0)
            random_matrix(&m, r->n);
        while (c % 2 && (unsigned)__builtin_popcountll(avail) > 3 * r->n / 4 &&
               (unsigned)__builtin_popcountll(avail) > r->k)
            avail &= ~(UINT64_C(1) << (rnd() % r->n));
        t0 = now_ns();
        if (topo_choose(&m, avail, 0, r->k, NULL, &ch) < 0)
            abort();
        ns[c] = now_ns() - t0;
        exact += ch.exact;
        if (ch.nodes > max_nodes)
            max_nodes = ch.nodes;
    }
    qsort(ns, calls, sizeof(*ns), cmp_u64);
    printf("| %-11s | %2u | %2u | %8.1f | %8.1f | %8.1f | %8llu | %u/%u |\n", r->shape, r->n, r->k,
           (double)ns[calls / 2] / 1e3, (double)ns[calls * 99 / 100] / 1e3,
           (double)ns[calls - 1] / 1e3, (unsigned long long)max_nodes, exact, calls);
}

int main(int argc, char **argv)
{
    static const struct row rows[] = {
        {"dgx-h100", 8, 1},      {"dgx-h100", 8, 2},     {"dgx-h100", 8, 3},
        {"dgx-h100", 8, 4},      {"dgx-h100", 8, 5},     {"dgx-h100", 8, 6},
        {"dgx-h100", 8, 7},      {"dgx-h100", 8, 8},     {"random", 8, 2},
        {"random", 8, 4},        {"random", 8, 6},       {"nvswitch-16", 16, 2},
        {"nvswitch-16", 16, 4},  {"nvswitch-16", 16, 8}, {"random", 16, 2},
        {"random", 16, 4},       {"random", 16, 8},      {"4x8-islands", 32, 8},
        {"4x8-islands", 32, 16}, {"random", 32, 4},      {"random", 32, 8},
    };
    unsigned calls = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 2000;
    uint64_t *ns;

    if (calls < 1 || calls > MAX_CALLS) {
        fprintf(stderr, "calls must be 1..%d\n", MAX_CALLS);
        return 2;
    }
    ns = calloc(calls, sizeof(*ns));
    if (!ns)
        return 1;
    printf("| shape       |  n |  k | p50 µs   | p99 µs   | max µs   | max nodes | exact |\n");
    printf("|-------------|----|----|----------|----------|----------|-----------|-------|\n");
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        run(&rows[i], calls, ns);
    free(ns);
    return 0;
}
