/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Topology-aware choice of a GPU set: given how well each pair of GPUs is connected, which k of the
 * available GPUs (always including a must-include set) form the best-connected group. This is the
 * engine behind the device plugin's GetPreferredAllocation and the DRA driver's device choice.
 *
 * The module takes a plain score matrix, not the gpu module's structs, so both daemons (and tests
 * and benchmarks) can feed it: the caller scores each pair with topo_link_score() from its own link
 * description. The objective, in order of importance, is: the highest sum of pair scores inside the
 * set; then the fewest NUMA nodes; then the fewest PCIe groups (switches); then the lowest indices
 * (the set whose lowest differing index is smaller wins), so the answer is fully deterministic.
 *
 * The search is an exact branch and bound (docs/internals/topo.md); a node budget caps its work and
 * the result says whether it finished. Library code: no logging, no allocation.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base-macro.h"

#define TOPO_MAX_GPUS 64
/* The default node budget of the search (see topo_options). At the measured cost per node this is
 * a few milliseconds at most, and it is never reached for 16 or fewer candidate GPUs. */
#define TOPO_DEFAULT_BUDGET 200000u
/* The largest number of replicas topo_choose_replicas() takes (48 per GPU times 64 GPUs). */
#define TOPO_MAX_REPLICAS 3072

/* The PCIe path between two GPUs, closest first (nvidia-smi topo -m names; NVML's topology levels).
 */
enum topo_pcie {
    TOPO_PCIE_BOARD,   /* same board (NVML_TOPOLOGY_INTERNAL) */
    TOPO_PCIE_PIX,     /* one PCIe switch (NVML_TOPOLOGY_SINGLE) */
    TOPO_PCIE_PXB,     /* several PCIe switches (NVML_TOPOLOGY_MULTIPLE) */
    TOPO_PCIE_PHB,     /* a host bridge (NVML_TOPOLOGY_HOSTBRIDGE) */
    TOPO_PCIE_NODE,    /* host bridges within one NUMA node */
    TOPO_PCIE_SYS,     /* across NUMA nodes */
    TOPO_PCIE_UNKNOWN, /* not known: scores nothing */
};

/*
 * The score of the link between two GPUs, with NVIDIA's weights (go-gpuallocator, reference
 * nvidia-compat.md §1.9): 100 per NVLink, plus 60 BOARD, 50 PIX, 40 PXB, 30 PHB, 20 NODE, 10 SYS,
 * 0 UNKNOWN. One NVLink outweighs any PCIe difference; a pair's NVLink count dominates its score.
 * nvlinks above 64 count as 64 (no real pair has more than 18).
 */
unsigned topo_link_score(unsigned nvlinks, enum topo_pcie pcie);

/*
 * The input of a choice: n GPUs (indices 0..n-1, the caller's own numbering), the symmetric pair
 * scores (the diagonal is ignored), and per GPU its NUMA node and PCIe group (any int; -1 for
 * unknown, which counts as one more node or group). Embedded by value (about 17 KiB); fill it with
 * topo_matrix_init() and topo_matrix_set().
 */
struct topo_matrix {
    unsigned n;
    int numa[TOPO_MAX_GPUS];
    int group[TOPO_MAX_GPUS]; /* e.g. the PCIe switch; -1 when the caller has none */
    uint32_t score[TOPO_MAX_GPUS][TOPO_MAX_GPUS];
};

/* n GPUs, every score 0, NUMA node and group -1. -EINVAL when n is 0 or above TOPO_MAX_GPUS. */
_wur_ int topo_matrix_init(struct topo_matrix *m, unsigned n);
/* Sets the score of the pair (i, j) and (j, i). -EINVAL when i == j or either is out of range. */
_wur_ int topo_matrix_set(struct topo_matrix *m, unsigned i, unsigned j, uint32_t score);

struct topo_options {
    uint64_t budget; /* search nodes before giving up on exactness; 0: TOPO_DEFAULT_BUDGET,
                        UINT64_MAX: unlimited */
};

struct topo_choice {
    uint64_t mask;   /* the chosen GPUs, bit i for GPU i */
    uint64_t score;  /* the sum of pair scores inside the set */
    unsigned numa;   /* NUMA nodes the set spans */
    unsigned groups; /* PCIe groups the set spans */
    bool exact;      /* the set is optimal for the objective; false only when the budget ran out,
                        which never happens with 16 or fewer candidates and a budget >= 2^17 */
    uint64_t nodes;  /* search nodes explored (work done; for benchmarks) */
};

/*
 * Chooses k GPUs from `available` (a bit mask over the matrix's GPUs) that include every GPU of
 * `must`, maximising the objective described at the top of this file. opts may be NULL (defaults).
 * When the budget runs out the best set found so far is returned (a greedy start improved by swaps
 * and whatever the search found) with exact = false.
 * -EINVAL: k == 0, a bit of `available` at or above n, must not within available, more must-include
 * GPUs than k, or fewer available GPUs than k.
 */
_wur_ int topo_choose(const struct topo_matrix *m, uint64_t available, uint64_t must, unsigned k,
                      const struct topo_options *opts, struct topo_choice *ret);

/* How replicas of shared GPUs (time-slicing, MPS) are spread, as NVIDIA's
 * --shared-devices-allocation-policy. */
enum topo_replica_policy {
    TOPO_REPLICAS_DISTRIBUTED, /* least-loaded GPUs first, one replica per GPU per round */
    TOPO_REPLICAS_PACKED,      /* most-loaded GPUs first, filling a GPU before opening another */
};

/* One available replica: which GPU it belongs to, and whether the request must include it. */
struct topo_replica {
    unsigned gpu;
    bool must;
};

/*
 * Chooses k replicas among `avail` (n_avail entries, each an available replica of GPU `gpu`).
 * total[g] is the number of replicas GPU g advertises (m->n entries); total minus GPU g's
 * non-must available replicas is its load, as in NVIDIA's allocator. Must-include replicas are
 * always taken. The remaining picks follow the policy's load rule exactly as NVIDIA's does;
 * where that rule leaves GPUs tied, topology decides: in a distributed round the new GPUs form the
 * best set with the GPUs already in the answer (topo_choose), in packed mode the GPU opened next
 * is the best connected to the answer so far. Ties left after that go to the lowest index.
 * On success writes k indices into avail, ascending, to ret_picked (room for k entries).
 * -EINVAL: k == 0, more must replicas than k, fewer replicas than k, n_avail above
 * TOPO_MAX_REPLICAS, a gpu index out of range, or a GPU with more available replicas than total.
 */
_wur_ int topo_choose_replicas(const struct topo_matrix *m, const struct topo_replica *avail,
                               size_t n_avail, const unsigned *total, unsigned k,
                               enum topo_replica_policy policy, size_t *ret_picked);
