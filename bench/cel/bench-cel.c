/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CEL device-selector benchmark: how long a compiled selector takes per device, over 10,000
 * generated GPU devices built the way the allocator builds them (cel_dra_device_value() from an
 * in-memory description, values borrowed), and how long compiling each selector takes. Run on
 * demand (`build/bench/bench-cel [ROUNDS [DEVICES]]`), never as a test; results go to
 * docs/benchmarks.md.
 *
 * Each selector is evaluated over all devices ROUNDS times (default 20); the table shows the
 * fastest round and the median round in ns per device, the result counts of one round (true,
 * false, error), and the compile time (median of 200 compiles). Device building is timed too.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cel-dra.h"
#include "cel.h"

/* Devices per run: 10,000 unless the second argument says otherwise. */
static size_t ndevices = 10000;
#define DRIVER "gpu.nvidia.com"
#define COMPILES 200

static const char *const SELECTORS[] = {
    "device.driver == \"gpu.nvidia.com\"",
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('550.0.0'))",
    "cel.bind(g, device.attributes['gpu.nvidia.com'], "
    "g.productName.lowerAscii().matches('^.*h100.*$'))",
    "device.driver == \"gpu.nvidia.com\" && "
    "device.attributes[\"gpu.nvidia.com\"].productName.lowerAscii().matches(\"^.*h100.*$\")",
    "\"memory\" in device.capacity[\"gpu.nvidia.com\"] && "
    "device.capacity[\"gpu.nvidia.com\"].memory.isGreaterThan(quantity(\"40Gi\"))",
    "device.attributes['gpu.nvidia.com'].index < 4 && "
    "device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:15'",
    "'dra.example.com' in device.attributes || device.attributes['gpu.nvidia.com'].mig == false",
};

static const char *const PRODUCTS[] = {
    "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA L4",
    "NVIDIA H200",           "NVIDIA H100 NVL",
};
static const char *const MEMORY[] = {"80Gi", "40Gi", "80Gi", "24Gi", "141Gi", "94Gi"};
static const char *const VERSIONS[] = {"550.54.15", "535.161.7", "560.28.3", "545.23.6"};
static const char *const ROOTS[] = {"pci0000:15", "pci0000:9a"};

#define NATTRS 7

/* One generated device and the storage its value borrows. */
struct gen_device {
    struct cel_dra_attr attrs[NATTRS];
    struct cel_dra_capacity caps[1];
    struct cel_quantity_obj memory;
    struct cel_semver_obj version;
    struct cel_dra_device dev;
    struct cel_value value;
};

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static struct cel_dra_attr attr_str(const char *name, const char *s)
{
    return (struct cel_dra_attr){
        .name = name, .name_len = strlen(name), .kind = CEL_DRA_ATTR_STRING, .str = {s, strlen(s)}};
}

static struct cel_dra_attr attr_int(const char *name, int64_t i)
{
    return (struct cel_dra_attr){
        .name = name, .name_len = strlen(name), .kind = CEL_DRA_ATTR_INT, .i = i};
}

static int generate(struct gen_device *g, size_t i)
{
    size_t p = i % ARRAY_SIZE(PRODUCTS);
    const char *ver = VERSIONS[i % ARRAY_SIZE(VERSIONS)];
    struct cel_quantity q;
    struct diag d;
    int r;

    r = cel_quantity_parse(MEMORY[p], strlen(MEMORY[p]), &d, &q);
    if (r < 0)
        return r;
    cel_quantity_obj_init(&g->memory, &q);
    r = cel_dra_parse_version(ver, strlen(ver), &g->version, &d);
    if (r < 0)
        return r;
    g->attrs[0] = attr_str("type", i % 8 == 7 ? "mig" : "gpu");
    g->attrs[1] = attr_str("productName", PRODUCTS[p]);
    g->attrs[2] = attr_int("index", (int64_t)(i % 8));
    g->attrs[3] = (struct cel_dra_attr){
        .name = "mig", .name_len = 3, .kind = CEL_DRA_ATTR_BOOL, .b = i % 8 == 7};
    g->attrs[4] = (struct cel_dra_attr){.name = "driverVersion",
                                        .name_len = 13,
                                        .kind = CEL_DRA_ATTR_VERSION,
                                        .version = &g->version};
    g->attrs[5] = attr_str("resource.kubernetes.io/pcieRoot", ROOTS[(i / 4) % 2]);
    g->attrs[6] = attr_str("uuid", "GPU-6d4a1c2e-8f3b-4a5d-9e7f-0123456789ab");
    g->caps[0] = (struct cel_dra_capacity){.name = "memory", .name_len = 6, .value = &g->memory};
    g->dev = (struct cel_dra_device){.driver = DRIVER,
                                     .driver_len = strlen(DRIVER),
                                     .attrs = g->attrs,
                                     .n_attrs = NATTRS,
                                     .caps = g->caps,
                                     .n_caps = 1};
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return v[n / 2];
}

/* Median compile time of expr in µs. */
static int compile_time(const struct cel_env *env, const char *expr, double *ret_us)
{
    double t[COMPILES];
    struct diag d;

    for (size_t i = 0; i < COMPILES; i++) {
        struct cel_program *p = NULL;
        double t0 = now_ns();
        int r = cel_compile(env, expr, strlen(expr), &p, &d);
        t[i] = (now_ns() - t0) / 1e3;
        if (r < 0) {
            fprintf(stderr, "compile %s: %s\n", expr, d.msg);
            return r;
        }
        cel_program_unref(p);
    }
    *ret_us = median(t, COMPILES);
    return 0;
}

struct counts {
    size_t t, f, e;
};

/* One pass over all devices; returns ns per device. */
static double one_round(struct cel_evaluator *ev, const struct cel_program *p,
                        struct cel_activation *act, int slot, struct gen_device *devs,
                        struct counts *c)
{
    double t0 = now_ns();

    *c = (struct counts){0};
    for (size_t i = 0; i < ndevices; i++) {
        cel_activation_set(act, slot, devs[i].value);
        struct cel_value v = cel_eval(ev, p, act, NULL);
        if (v.kind == CEL_BOOL)
            *(v.b ? &c->t : &c->f) += 1;
        else
            c->e++;
    }
    return (now_ns() - t0) / (double)ndevices;
}

static int bench_selector(const struct cel_env *env, struct cel_evaluator *ev,
                          struct cel_activation *act, int slot, struct gen_device *devs,
                          size_t rounds, size_t idx)
{
    struct cel_program *p = NULL;
    double *ns = calloc(rounds, sizeof(*ns)), best, compile_us;
    struct counts c;
    struct diag d;
    int r = compile_time(env, SELECTORS[idx], &compile_us);

    if (r >= 0)
        r = cel_compile(env, SELECTORS[idx], strlen(SELECTORS[idx]), &p, &d);
    if (r < 0 || !ns) {
        free(ns);
        return r < 0 ? r : -ENOMEM;
    }
    (void)one_round(ev, p, act, slot, devs, &c); /* warm-up: site caches, arena blocks */
    for (size_t i = 0; i < rounds; i++)
        ns[i] = one_round(ev, p, act, slot, devs, &c);
    best = ns[0];
    for (size_t i = 1; i < rounds; i++)
        best = ns[i] < best ? ns[i] : best;
    printf("| S%zu | %8.1f | %8.1f | %5zu | %5zu | %5zu | %10.1f |\n", idx + 1, best,
           median(ns, rounds), c.t, c.f, c.e, compile_us);
    cel_program_unref(p);
    free(ns);
    return 0;
}

static int build_devices(struct cel_region *r, struct gen_device *devs)
{
    struct diag d;
    double t0;
    int err;

    for (size_t i = 0; i < ndevices; i++) {
        err = generate(&devs[i], i);
        if (err < 0)
            return err;
    }
    t0 = now_ns();
    for (size_t i = 0; i < ndevices; i++) {
        err = cel_dra_device_value(r, &devs[i].dev, &d, &devs[i].value);
        if (err < 0) {
            fprintf(stderr, "device %zu: %s\n", i, d.msg);
            return err;
        }
    }
    printf("device values: %zu devices (%d attributes, 1 capacity) built in %.0f ns each\n\n",
           ndevices, NATTRS, (now_ns() - t0) / (double)ndevices);
    return 0;
}

int main(int argc, char **argv)
{
    size_t rounds = argc > 1 ? strtoul(argv[1], NULL, 10) : 20;
    struct gen_device *devs;
    struct cel_env *env = NULL;
    struct cel_evaluator *ev = NULL;
    struct cel_activation *act = NULL;
    struct cel_region r;
    int slot, err = -ENOMEM;

    if (rounds == 0)
        rounds = 1;
    if (argc > 2 && strtoul(argv[2], NULL, 10) > 0)
        ndevices = strtoul(argv[2], NULL, 10);
    devs = calloc(ndevices, sizeof(*devs));
    cel_region_init(&r, (size_t)256 << 20);
    if (!devs || (err = build_devices(&r, devs)) < 0 || (err = cel_env_new_dra(&env)) < 0 ||
        (err = cel_evaluator_new(&ev)) < 0 || (err = cel_activation_new(env, &act)) < 0)
        goto out;
    slot = cel_env_var_index(env, "device");
    printf("| sel | best ns/device | median ns/device | true | false | error | compile µs |\n");
    printf("|-----|---------:|---------:|------:|------:|------:|-----------:|\n");
    for (size_t i = 0; i < ARRAY_SIZE(SELECTORS); i++) {
        err = bench_selector(env, ev, act, slot, devs, rounds, i);
        if (err < 0)
            goto out;
    }
    printf("\n");
    for (size_t i = 0; i < ARRAY_SIZE(SELECTORS); i++)
        printf("S%zu: %s\n", i + 1, SELECTORS[i]);
out:
    cel_activation_free(act);
    cel_evaluator_free(ev);
    cel_env_free(env);
    cel_region_release(&r);
    free(devs);
    if (err < 0)
        fprintf(stderr, "bench-cel: %s\n", strerror(-err));
    return err < 0 ? 1 : 0;
}
