/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for what the operator reads of API objects it does not control: a Node's
 * labels and annotation (the labelling rules; the first byte picks the operator's configuration),
 * a Lease's spec (and its MicroTimes), a DaemonSet's status (readiness), a ClusterPolicy's status
 * (the condition merge), and the text as a Go duration. Never a crash or a leak, and the labelling
 * rules reach a fixed point: a node with its patch applied needs no further patch.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "operator-ctl.h"
#include "operator-lease.h"
#include "operator-nodes.h"
#include "operator-options.h"
#include "test-merge-patch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void labels(json_t *obj, uint8_t bits)
{
    const struct op_label_config cfg = {
        .policy = (bits & 1) != 0,
        .dra_driver = (bits & 2) != 0,
        .sandbox = (bits & 4) != 0,
        .default_workload = (enum op_workload)((bits >> 3) % 3),
    };
    json_t *patch = NULL;
    if (op_node_label_patch(obj, &cfg, &patch) < 0 || !patch)
        return;
    json_t *node = json_deep_copy(obj);
    if (json_is_object(node) && json_is_object(json_object_get(node, "metadata"))) {
        test_merge_metadata(node, patch);
        json_t *again = NULL;
        if (op_node_label_patch(node, &cfg, &again) == 0 && again)
            __builtin_trap();
        json_decref(again);
    }
    json_decref(node);
    json_decref(patch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    json_t *obj = json_loadb(text, len, 0, NULL);
    if (obj) {
        labels(obj, data[0]);

        struct op_lease_record rec;
        if (op_lease_record_from_json(obj, &rec) == 0) {
            json_t *spec = op_lease_record_to_json(&rec);
            json_decref(spec);
        }
        char why[160];
        (void)op_daemonset_ready(obj, (data[0] & 1) != 0, why, sizeof(why));

        struct op_verdict v = {.state = (enum op_cp_state)(data[0] % 3),
                               .ready_reason = "Reconciled",
                               .error_reason = "OperandNotReady",
                               .message = "m"};
        json_t *st =
            op_status_build(json_object_get(obj, "status"), &v, "ns", 1, "2026-01-01T00:00:00Z");
        json_decref(st);
        json_decref(obj);
    }
    char buf[256];
    size_t n = len < sizeof(buf) - 1 ? len : sizeof(buf) - 1;
    memcpy(buf, text, n);
    buf[n] = '\0';
    int64_t us;
    uint64_t ms;
    (void)!op_microtime_parse(buf, &us);
    (void)!op_duration_parse(buf, &ms);
    return 0;
}
