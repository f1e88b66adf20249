/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pair score and the matrix the search reads. The weights are NVIDIA's (go-gpuallocator's
 * best-effort policy), so a node that moves from NVIDIA's plugin to gpuplane ranks GPU sets the
 * same way; only the search that finds the best set differs.
 */
#include <errno.h>
#include <string.h>

#include "topo.h"

/* Per NVLink, and the cap that keeps a hostile count from overflowing a pair score. */
#define NVLINK_WEIGHT 100u
#define NVLINK_MAX 64u

unsigned topo_link_score(unsigned nvlinks, enum topo_pcie pcie)
{
    /* NVML_TOPOLOGY_INTERNAL 60, SINGLE 50, MULTIPLE 40, HOSTBRIDGE 30, NODE 20, SYSTEM 10. */
    static const unsigned pcie_weight[] = {
        [TOPO_PCIE_BOARD] = 60, [TOPO_PCIE_PIX] = 50, [TOPO_PCIE_PXB] = 40,    [TOPO_PCIE_PHB] = 30,
        [TOPO_PCIE_NODE] = 20,  [TOPO_PCIE_SYS] = 10, [TOPO_PCIE_UNKNOWN] = 0,
    };
    unsigned links = nvlinks > NVLINK_MAX ? NVLINK_MAX : nvlinks;
    unsigned level = (unsigned)pcie < ARRAY_SIZE(pcie_weight) ? pcie_weight[pcie] : 0;

    return links * NVLINK_WEIGHT + level;
}

int topo_matrix_init(struct topo_matrix *m, unsigned n)
{
    if (n == 0 || n > TOPO_MAX_GPUS)
        return -EINVAL;
    memset(m, 0, sizeof(*m));
    m->n = n;
    for (unsigned i = 0; i < TOPO_MAX_GPUS; i++) {
        m->numa[i] = -1;
        m->group[i] = -1;
    }
    return 0;
}

int topo_matrix_set(struct topo_matrix *m, unsigned i, unsigned j, uint32_t score)
{
    if (i >= m->n || j >= m->n || i == j)
        return -EINVAL;
    m->score[i][j] = score;
    m->score[j][i] = score;
    return 0;
}
