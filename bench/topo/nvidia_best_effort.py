#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""NVIDIA's best-effort GetPreferredAllocation search (go-gpuallocator), reimplemented from
nvidia-compat.md §1.9 for timing against bench-topo: pad the available GPUs with empty slots to a
multiple of the size, enumerate every partition into groups of that size, keep the partition with
the highest total score of its padding-free groups, return its best padding-free group. (Where the
padding cannot fill whole groups, e.g. 8 GPUs in threes, a group holding padding scores 0; §1.9
leaves that case open.) Scores use
the same weights and the same DGX H100 shape as bench-topo's "dgx-h100" and "nvswitch-16" rows.
Go is faster than CPython, but the partition counts, not the language, are what explode.

Usage: nvidia_best_effort.py [max partitions per row] (default 3000000)."""
import math
import sys
import time

PCIE = {"PIX": 50, "NODE": 20, "SYS": 10}


def islands(n, island, links, per_numa):
    score = [[0] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            p = "PIX" if i // 2 == j // 2 else "NODE" if i // per_numa == j // per_numa else "SYS"
            score[i][j] = PCIE[p] + (100 * links if i // island == j // island else 0)
    return score


def group_score(score, group):
    return sum(score[a][b] for x, a in enumerate(group) for b in group[x + 1:])


def partitions(items, size):
    """Every partition of items into groups of `size` (first item anchors each group)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for others in _combinations(rest, size - 1):
        left = [x for x in rest if x not in others]
        for tail in partitions(left, size):
            yield [(first,) + others] + tail


def _combinations(items, r):
    if r == 0:
        yield ()
        return
    for i in range(len(items) - r + 1):
        for tail in _combinations(items[i + 1:], r - 1):
            yield (items[i],) + tail


def count_partitions(n, size):
    return math.factorial(n) // (math.factorial(size) ** (n // size) * math.factorial(n // size))


def best_effort(score, available, size):
    if size == 1:
        return [available[0]]
    padded = list(available) + [None] * ((-len(available)) % size)
    best, best_total = None, -1
    for part in partitions(padded, size):
        total = sum(group_score(score, g) for g in part if None not in g)
        if total > best_total:
            best, best_total = part, total
    groups = [g for g in best if None not in g]
    return list(max(groups, key=lambda g: group_score(score, g)))


def main():
    cap = int(sys.argv[1]) if len(sys.argv) > 1 else 3000000
    rows = [("dgx-h100", 8, k) for k in range(1, 9)]
    rows += [("nvswitch-16", 16, k) for k in (2, 4, 8)]
    print("| shape       |  n |  k | partitions | ms per call (CPython) |")
    print("|-------------|----|----|------------|-----------------------|")
    for shape, n, k in rows:
        score = islands(n, 8, 18, 4) if shape == "dgx-h100" else islands(n, 16, 6, 8)
        padded = n + (-n) % k
        parts = count_partitions(padded, k) if k > 1 else 0
        if parts > cap:
            print(f"| {shape:<11} | {n:2} | {k:2} | {parts:10} | skipped (> {cap}) |")
            continue
        calls = max(1, min(200, 200000 // max(parts, 1)))
        t0 = time.perf_counter()
        for _ in range(calls):
            best_effort(score, list(range(n)), k)
        ms = (time.perf_counter() - t0) * 1e3 / calls
        print(f"| {shape:<11} | {n:2} | {k:2} | {parts:10} | {ms:21.2f} |")


if __name__ == "__main__":
    main()
