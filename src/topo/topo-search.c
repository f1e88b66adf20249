/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The search behind topo_choose(): a greedy start improved by swaps gives a good incumbent at
 * once, then a depth-first branch and bound over "take GPU b / leave GPU b" proves it optimal or
 * finds better. A subtree is cut when even its optimistic bound cannot beat the incumbent on the
 * whole objective (score, then NUMA nodes, then PCIe groups, then lowest indices). Each bound is
 * admissible, so the search is exact whenever it finishes; docs/internals/topo.md says why and how
 * fast.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "topo.h"

/* One set and its objective; "better" is defined by key_cmp(). */
struct key {
    uint64_t mask;
    uint64_t score;
    unsigned numa;
    unsigned groups;
};

struct search {
    const struct topo_matrix *m;
    unsigned n;
    unsigned k;
    uint64_t numa_bit[TOPO_MAX_GPUS];  /* each GPU's NUMA node as one bit of a dense numbering */
    uint64_t group_bit[TOPO_MAX_GPUS]; /* the same for PCIe groups */
    uint8_t by_score[TOPO_MAX_GPUS][TOPO_MAX_GPUS - 1]; /* the other GPUs, best link first */
    uint64_t gain[TOPO_MAX_GPUS]; /* per GPU, the sum of its scores to the current set */
    struct key best;
    uint64_t nodes;
    uint64_t budget;
    bool aborted;
};

static unsigned popcount(uint64_t x)
{
    return (unsigned)__builtin_popcountll(x);
}

static unsigned lowest(uint64_t x)
{
    return (unsigned)__builtin_ctzll(x);
}

static uint64_t w(const struct search *s, unsigned i, unsigned j)
{
    return s->m->score[i][j];
}

/* < 0 when a is better than b, 0 when they are the same set. */
static int key_cmp(const struct key *a, const struct key *b)
{
    if (a->score != b->score)
        return a->score > b->score ? -1 : 1;
    if (a->numa != b->numa)
        return a->numa < b->numa ? -1 : 1;
    if (a->groups != b->groups)
        return a->groups < b->groups ? -1 : 1;
    if (a->mask == b->mask)
        return 0;
    /* The set holding the lowest index the two disagree on comes first. */
    return (a->mask & (UINT64_C(1) << lowest(a->mask ^ b->mask))) ? -1 : 1;
}

static unsigned span(const uint64_t *bits, uint64_t mask)
{
    uint64_t used = 0;

    for (uint64_t x = mask; x; x &= x - 1)
        used |= bits[lowest(x)];
    return popcount(used);
}

static struct key make_key(const struct search *s, uint64_t mask, uint64_t score)
{
    return (struct key){
        .mask = mask,
        .score = score,
        .numa = span(s->numa_bit, mask),
        .groups = span(s->group_bit, mask),
    };
}

static uint64_t pair_sum(const struct search *s, uint64_t mask)
{
    uint64_t sum = 0;

    for (uint64_t x = mask; x; x &= x - 1)
        for (uint64_t y = x & (x - 1); y; y &= y - 1)
            sum += w(s, lowest(x), lowest(y));
    return sum;
}

static void consider(struct search *s, uint64_t mask, uint64_t score)
{
    struct key k = make_key(s, mask, score);

    if (key_cmp(&k, &s->best) < 0)
        s->best = k;
}

/* Dense numbering of arbitrary ids (NUMA nodes, groups): equal ids share a bit. */
static void densify(const int *ids, unsigned n, uint64_t *bits)
{
    unsigned next = 0;

    for (unsigned i = 0; i < n; i++) {
        bits[i] = 0;
        for (unsigned j = 0; j < i && !bits[i]; j++)
            if (ids[j] == ids[i])
                bits[i] = bits[j];
        if (!bits[i])
            bits[i] = UINT64_C(1) << next++;
    }
}

/* Insertion sort of GPU i's neighbours by falling score, ties by index: n <= 64, done once. */
static void sort_neighbours(struct search *s, unsigned i)
{
    unsigned len = 0;

    for (unsigned j = 0; j < s->n; j++) {
        if (j == i)
            continue;
        unsigned at = len++;
        while (at > 0 && w(s, i, s->by_score[i][at - 1]) < w(s, i, j)) {
            s->by_score[i][at] = s->by_score[i][at - 1];
            at--;
        }
        s->by_score[i][at] = (uint8_t)j;
    }
}

static void search_init(struct search *s, const struct topo_matrix *m, unsigned k, uint64_t budget)
{
    memset(s, 0, sizeof(*s));
    s->m = m;
    s->n = m->n;
    s->k = k;
    s->budget = budget;
    densify(m->numa, m->n, s->numa_bit);
    densify(m->group, m->n, s->group_bit);
    for (unsigned i = 0; i < m->n; i++)
        sort_neighbours(s, i);
}

/* gain[i] = sum of GPU i's scores to the GPUs of set, for every GPU of `of`. */
static void compute_gains(struct search *s, uint64_t set, uint64_t of)
{
    for (uint64_t x = of; x; x &= x - 1) {
        unsigned i = lowest(x);
        uint64_t g = 0;

        for (uint64_t y = set & ~(UINT64_C(1) << i); y; y &= y - 1)
            g += w(s, i, lowest(y));
        s->gain[i] = g;
    }
}

/* The candidate that adds the most; ties go to one on a NUMA node the set already uses, then to the
 * lowest index. */
static unsigned greedy_pick(const struct search *s, uint64_t set, uint64_t cand)
{
    uint64_t used = 0;
    unsigned best = lowest(cand);
    bool best_near = false;

    for (uint64_t x = set; x; x &= x - 1)
        used |= s->numa_bit[lowest(x)];
    for (uint64_t x = cand; x; x &= x - 1) {
        unsigned c = lowest(x);
        bool near = (s->numa_bit[c] & used) != 0;

        if (s->gain[c] > s->gain[best] || (s->gain[c] == s->gain[best] && near && !best_near)) {
            best = c;
            best_near = near;
        }
    }
    return best;
}

/* The best single swap (one GPU out of the set, one in); false when none raises the score. */
static bool best_swap(const struct search *s, uint64_t set, uint64_t must, uint64_t avail,
                      unsigned *ret_out, unsigned *ret_in)
{
    uint64_t best_delta = 0;
    bool found = false;

    for (uint64_t x = set & ~must; x; x &= x - 1) {
        unsigned u = lowest(x);
        for (uint64_t y = avail & ~set; y; y &= y - 1) {
            unsigned v = lowest(y);
            /* Swapping u for v loses u's links to the set and gains v's, except the u-v link. */
            uint64_t plus = s->gain[v] - w(s, u, v);
            if (plus > s->gain[u] && plus - s->gain[u] > best_delta) {
                best_delta = plus - s->gain[u];
                *ret_out = u;
                *ret_in = v;
                found = true;
            }
        }
    }
    return found;
}

/* Greedy growth from the must-include set, then best-improvement swaps. Each swap raises the score,
 * so the loop ends; the cap only bounds the work on adversarial matrices. */
static void greedy_start(struct search *s, uint64_t avail, uint64_t must)
{
    uint64_t set = must;
    unsigned out = 0, in = 0;

    compute_gains(s, set, avail);
    while (popcount(set) < s->k) {
        unsigned c = greedy_pick(s, set, avail & ~set);

        set |= UINT64_C(1) << c;
        for (uint64_t x = avail & ~(UINT64_C(1) << c); x; x &= x - 1)
            s->gain[lowest(x)] += w(s, lowest(x), c);
    }
    for (unsigned pass = 0; pass < s->n * s->k && best_swap(s, set, must, avail, &out, &in);
         pass++) {
        set = (set & ~(UINT64_C(1) << out)) | (UINT64_C(1) << in);
        compute_gains(s, set, avail);
    }
    s->best = make_key(s, set, pair_sum(s, set));
}

/*
 * A lower bound on how many buckets (NUMA nodes or groups) any completion spans: the buckets the
 * set already uses, plus the fewest further buckets whose candidates can supply the r GPUs still
 * missing. Taking the fullest buckets first is optimal for that covering, so the bound is tight.
 */
static unsigned span_bound(const uint64_t *bits, uint64_t set, uint64_t cand, unsigned r)
{
    uint64_t used = 0;
    unsigned count[TOPO_MAX_GPUS] = {0};
    unsigned covered = 0, spans;

    for (uint64_t x = set; x; x &= x - 1)
        used |= bits[lowest(x)];
    spans = popcount(used);
    for (uint64_t x = cand; x; x &= x - 1) {
        uint64_t b = bits[lowest(x)];
        if (b & used)
            covered++;
        else
            count[lowest(b)]++;
    }
    while (covered < r) {
        unsigned top = 0;
        for (unsigned i = 1; i < TOPO_MAX_GPUS; i++)
            if (count[i] > count[top])
                top = i;
        covered += count[top];
        count[top] = 0;
        spans++;
    }
    return spans;
}

/* Sum of the r largest of v[0..len-1]; r <= len <= 64. */
static uint64_t top_sum(const uint64_t *v, unsigned len, unsigned r)
{
    uint64_t top[TOPO_MAX_GPUS];
    unsigned have = 0;
    uint64_t sum = 0;

    for (unsigned i = 0; i < len; i++) {
        unsigned at;

        if (have < r)
            at = have++;
        else if (v[i] > top[r - 1])
            at = r - 1;
        else
            continue;
        while (at > 0 && top[at - 1] < v[i]) {
            top[at] = top[at - 1];
            at--;
        }
        top[at] = v[i];
    }
    for (unsigned i = 0; i < r; i++)
        sum += top[i];
    return sum;
}

/*
 * Twice an upper bound on the score of any completion of `set` by r of `cand`, and the candidate
 * with the most potential (the branching choice). A completion R scores
 * score(set) + sum_{c in R} gain[c] + score(R), and score(R) is half the sum over c in R of c's
 * links inside R, at most half of c's r-1 best links to other candidates. So each candidate is
 * worth at most gain[c] + half its r-1 best links, and R at most the r best such worths.
 */
static uint64_t bound2(const struct search *s, uint64_t cand, unsigned r, unsigned *ret_branch)
{
    uint64_t v[TOPO_MAX_GPUS];
    unsigned len = 0, branch = lowest(cand);
    uint64_t branch_v = 0;

    for (uint64_t x = cand; x; x &= x - 1) {
        unsigned c = lowest(x);
        uint64_t links = 0;
        unsigned got = 0;

        for (unsigned t = 0; t + 1 < s->n && got + 1 < r; t++) {
            unsigned j = s->by_score[c][t];
            if (cand & (UINT64_C(1) << j)) {
                links += w(s, c, j);
                got++;
            }
        }
        v[len] = 2 * s->gain[c] + links;
        if (len == 0 || v[len] > branch_v) {
            branch = c;
            branch_v = v[len];
        }
        len++;
    }
    *ret_branch = branch;
    return top_sum(v, len, r);
}

/* Whether a subtree whose optimistic score is ub2 / 2 may still hold a set better than the best. */
static bool promising(const struct search *s, uint64_t set, uint64_t cand, unsigned r, uint64_t ub2)
{
    uint64_t best2 = 2 * s->best.score;
    struct key hope;

    if (ub2 != best2)
        return ub2 > best2;
    /* The score can at best tie: the subtree must win on the later keys. Taking the r lowest
     * candidates gives the subtree's lowest-index set. */
    hope.score = s->best.score;
    hope.numa = span_bound(s->numa_bit, set, cand, r);
    hope.groups = span_bound(s->group_bit, set, cand, r);
    hope.mask = set;
    for (uint64_t x = cand; r > 0; x &= x - 1, r--)
        hope.mask |= UINT64_C(1) << lowest(x);
    return key_cmp(&hope, &s->best) < 0;
}

static void add_gains(struct search *s, uint64_t cand, unsigned b, bool add)
{
    for (uint64_t x = cand; x; x &= x - 1) {
        unsigned c = lowest(x);
        if (add)
            s->gain[c] += w(s, c, b);
        else
            s->gain[c] -= w(s, c, b);
    }
}

/* Depth-first over the candidates; every call removes one candidate, so depth <= 64. */
static void branch(struct search *s, uint64_t set, uint64_t cand, uint64_t score, unsigned depth)
{
    unsigned have = popcount(set), left = popcount(cand), r, b;
    uint64_t sum = score, bit;

    assert(depth <= TOPO_MAX_GPUS);
    if (++s->nodes > s->budget) {
        s->aborted = true;
        return;
    }
    r = s->k - have;
    if (r == 0 || left < r) {
        if (r == 0)
            consider(s, set, score);
        return;
    }
    if (left == r) {
        for (uint64_t x = cand; x; x &= x - 1)
            sum += s->gain[lowest(x)];
        consider(s, set | cand, sum + pair_sum(s, cand));
        return;
    }
    if (!promising(s, set, cand, r, 2 * score + bound2(s, cand, r, &b)))
        return;
    bit = UINT64_C(1) << b;
    add_gains(s, cand & ~bit, b, true);
    branch(s, set | bit, cand & ~bit, score + s->gain[b], depth + 1);
    add_gains(s, cand & ~bit, b, false);
    if (!s->aborted)
        branch(s, set, cand & ~bit, score, depth + 1);
}

static bool valid_request(const struct topo_matrix *m, uint64_t available, uint64_t must,
                          unsigned k)
{
    uint64_t all = m->n >= 64 ? UINT64_MAX : (UINT64_C(1) << m->n) - 1;

    if (m->n == 0 || m->n > TOPO_MAX_GPUS || k == 0)
        return false;
    if ((available & ~all) || (must & ~available))
        return false;
    return popcount(must) <= k && popcount(available) >= k;
}

int topo_choose(const struct topo_matrix *m, uint64_t available, uint64_t must, unsigned k,
                const struct topo_options *opts, struct topo_choice *ret)
{
    struct search s;
    uint64_t budget = opts && opts->budget ? opts->budget : TOPO_DEFAULT_BUDGET;

    if (!valid_request(m, available, must, k))
        return -EINVAL;
    search_init(&s, m, k, budget);
    greedy_start(&s, available, must);
    compute_gains(&s, must, available & ~must);
    branch(&s, must, available & ~must, pair_sum(&s, must), 0);
    *ret = (struct topo_choice){
        .mask = s.best.mask,
        .score = s.best.score,
        .numa = s.best.numa,
        .groups = s.best.groups,
        .exact = !s.aborted,
        .nodes = s.nodes,
    };
    return 0;
}
