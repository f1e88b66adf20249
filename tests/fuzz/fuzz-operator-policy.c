/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the ClusterPolicy model and the renderer: any document must give either a
 * policy or a diagnostic naming a field, never a crash or a leak; every policy that reads must
 * render (or fail with a diagnostic: an image that cannot be named), and every rendered object must
 * hash. The operator reads ClusterPolicies any user with the CRD's permissions can write.
 */
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "operator-render.h"

static const char *fuzz_getenv(const char *name)
{
    /* Every gpuplane component resolves; the driver and the toolkit only when the policy names
     * them, so both paths run. */
    return name[0] == 'G' ? "registry.local/gpuplane:1" : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    _cleanup_(op_policy_freep) struct op_policy *p = NULL;
    struct op_rendered r;
    struct diag d;
    char hash[24];

    if (doc_load_string("fuzz.yaml", (const char *)data, size, &d, &doc) < 0 || doc_count(doc) < 1)
        return 0;
    if (op_policy_from_json(doc_root(doc, 0), &p, &d) < 0)
        return 0;
    for (int gpu_nodes = 0; gpu_nodes < 2; gpu_nodes++) {
        struct op_render_env env = {.namespace_ = "gpu-operator",
                                    .getenv = fuzz_getenv,
                                    .gpu_nodes = gpu_nodes,
                                    .os_tag = "ubuntu22.04"};
        if (op_render(p, &env, doc_root(doc, 0), &r, &d) < 0)
            return 0;
        for (size_t i = 0; i < r.n; i++) {
            size_t k;
            json_t *obj;
            json_array_foreach(r.states[i].objects, k, obj) op_object_hash(obj, hash);
        }
        op_rendered_release(&r);
    }
    return 0;
}
