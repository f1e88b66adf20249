/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for CEL evaluation: any expression that compiles in the DRA environment must
 * evaluate to a value or an error value within the cost limit — never a crash, a leak, a hang or
 * unbounded memory — and its printed result must be printable. The input is "expression" or
 * "device-yaml\0expression": with a device part, `device` is bound from it, so the DRA lookups
 * (absent domains, missing ids, quantities, semvers) are exercised as well. Each expression is
 * evaluated twice on one evaluator, so reuse of the region and of per-site caches is covered too.
 * A lower cost limit than Kubernetes' keeps each run short.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cel-dra.h"
#include "cel.h"

#define FUZZ_COST_LIMIT 20000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void eval_twice(struct cel_env *env, const struct cel_activation *act, const char *expr,
                       size_t len)
{
    _cleanup_(cel_program_unrefp) struct cel_program *p = NULL;
    _cleanup_(cel_evaluator_freep) struct cel_evaluator *ev = NULL;
    const struct cel_eval_opts opts = {.cost_limit = FUZZ_COST_LIMIT};
    struct diag d;

    diag_init(&d);
    if (cel_compile(env, expr, len, &p, &d) < 0 || cel_evaluator_new(&ev) < 0)
        return;
    for (int i = 0; i < 2; i++) {
        _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
        struct cel_value v = cel_eval(ev, p, act, &opts);

        if (cel_value_print(&sb, v) < 0 && v.kind != CEL_ERROR)
            __builtin_trap(); /* only a too-deep value may fail to print; errors always print */
        if (cel_evaluator_cost(ev) > FUZZ_COST_LIMIT)
            __builtin_trap();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    _cleanup_(cel_env_freep) struct cel_env *env = NULL;
    _cleanup_(cel_activation_freep) struct cel_activation *act = NULL;
    const char *in = (const char *)data, *expr = in;
    const uint8_t *nul = memchr(data, '\0', size);
    struct cel_region r;
    struct cel_value device;
    size_t len = size;

    if (size > 4096)
        return 0;
    cel_region_init(&r, 1 << 20);
    if (cel_env_new_dra(&env) < 0 || cel_activation_new(env, &act) < 0)
        goto out;
    if (nul) {
        _cleanup_(doc_freep) struct doc *doc = NULL;
        struct diag d;

        expr = (const char *)nul + 1;
        len = size - (size_t)(nul - data) - 1;
        if (doc_load_string("device.yaml", in, (size_t)(nul - data), &d, &doc) == 0 &&
            doc_count(doc) == 1 &&
            cel_dra_device_load(&r, doc, doc_root(doc, 0), NULL, &d, &device) == 0)
            cel_activation_set(act, cel_env_var_index(env, "device"), device);
    }
    eval_twice(env, act, expr, len);
out:
    cel_region_release(&r);
    return 0;
}
