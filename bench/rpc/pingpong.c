/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The floor under bench/rpc: a round trip of the byte counts of one unary gRPC call (127 octets
 * out, 118 back: what grpc-go sends and what gpuplane answers for a 64-byte Echo) between two
 * processes over a unix stream socket pair, with blocking reads and no gRPC at all. The child runs
 * on CPU 0, the parent on CPU 1 when there are two (both on CPU 0 with "same"). Prints one JSON
 * line like the peers' bench.
 *
 *   pingpong [CALLS] [WARMUP] [same]
 *
 * Built by bench/rpc/run.py with the system's cc; not part of the project build.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REQ 127
#define REPLY 118

static void pin(int cpu)
{
    cpu_set_t set;

    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)sched_setaffinity(0, sizeof(set), &set);
}

static int full(int fd, char *buf, size_t len, int writing)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = writing ? write(fd, buf + done, len - done) : read(fd, buf + done, len - done);

        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return 0;
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static double pct_us(const uint64_t *v, size_t n, double p)
{
    size_t i = (size_t)(p * (double)n + 0.999999);

    i = i == 0 ? 0 : i - 1;
    return (double)v[i < n ? i : n - 1] / 1e3;
}

int main(int argc, char **argv)
{
    size_t calls = argc > 1 ? strtoul(argv[1], NULL, 10) : 20000;
    size_t warmup = argc > 2 ? strtoul(argv[2], NULL, 10) : 1000;
    int two = sysconf(_SC_NPROCESSORS_ONLN) >= 2;
    int same = argc > 3 && strcmp(argv[3], "same") == 0;
    char buf[REQ] = {0};
    uint64_t *lat, start, sum = 0;
    int sv[2];
    pid_t pid;

    if (calls == 0 || !(lat = calloc(calls, sizeof(*lat))) ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return 1;
    pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        close(sv[0]);
        if (two || same)
            pin(0);
        while (full(sv[1], buf, REQ, 0) == 0 && full(sv[1], buf, REPLY, 1) == 0)
            ;
        _exit(0);
    }
    close(sv[1]);
    if (two || same)
        pin(same ? 0 : 1);
    for (size_t i = 0; i < warmup; i++)
        if (full(sv[0], buf, REQ, 1) < 0 || full(sv[0], buf, REPLY, 0) < 0)
            return 1;
    start = now_ns();
    for (size_t i = 0; i < calls; i++) {
        uint64_t t = now_ns();

        if (full(sv[0], buf, REQ, 1) < 0 || full(sv[0], buf, REPLY, 0) < 0)
            return 1;
        lat[i] = now_ns() - t;
        sum += lat[i];
    }
    start = now_ns() - start;
    close(sv[0]);
    waitpid(pid, NULL, 0);
    qsort(lat, calls, sizeof(*lat), cmp);
    printf("{\"client\": \"pingpong\", \"connections\": 1, \"calls\": %zu, \"errors\": 0, "
           "\"seconds\": %.6f, \"calls_per_s\": %.1f, \"p50_us\": %.3f, \"p99_us\": %.3f, "
           "\"p999_us\": %.3f, \"max_us\": %.3f, \"mean_us\": %.3f}\n",
           calls, (double)start / 1e9, (double)calls * 1e9 / (double)start, pct_us(lat, calls, 0.5),
           pct_us(lat, calls, 0.99), pct_us(lat, calls, 0.999), pct_us(lat, calls, 1),
           (double)sum / 1e3 / (double)calls);
    free(lat);
    return 0;
}
