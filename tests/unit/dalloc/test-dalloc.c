/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the DRA allocator (src/dalloc) through its public API, table-driven from small YAML
 * inputs: decode errors naming the object and field, pools and generations, node selectors against
 * a Node's labels, ExactCount and All, firstAvailable, matchAttribute/distinctAttribute, admin
 * access and its gate, the step budget and how few steps a pruned search takes, what selectors read
 * of allowMultipleAllocations under each allocator variant, binding-condition gates, pools
 * gathered per node. Each case states the exit (0 allocated, 1 no solution, negative errno) and
 * either the devices chosen ("claim:request=device ...") or a piece of the message.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base-doc.h"
#include "base-strbuf.h"
#include "dalloc.h"

#define CLASS_A                                                                                    \
    "kind: DeviceClass\nmetadata: {name: a}\n"                                                     \
    "spec: {selectors: [{cel: {expression: 'device.driver == \"a\"'}}]}\n---\n"
#define SLICE(name, pool, gen, count, node, devs)                                                  \
    "kind: ResourceSlice\nmetadata: {name: " name "}\n"                                            \
    "spec: {driver: a, pool: {name: " pool ", generation: " gen ", resourceSliceCount: " count     \
    "}, " node ", devices: " devs "}\n---\n"
#define CLAIM(name, reqs, extra)                                                                   \
    "kind: ResourceClaim\nmetadata: {name: " name ", namespace: default}\n"                        \
    "spec: {devices: {requests: " reqs extra "}}\n---\n"
#define ONE "[{name: r, exactly: {deviceClassName: a}}]"
#define MULTI_SLICE                                                                                \
    SLICE("s1", "p1", "1", "1", "nodeName: n1",                                                    \
          "[{name: plain}, {name: shared, allowMultipleAllocations: true}]")
#define MULTI_CLAIM(expr)                                                                          \
    CLAIM("c1",                                                                                    \
          "[{name: r, exactly: {deviceClassName: a, selectors: [{cel: {expression: '" expr         \
          "'}}]}}]",                                                                               \
          "")
#define LABEL_WHY                                                                                  \
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "   \
    "must start and end with an alphanumeric character"

struct tcase {
    const char *name;
    const char *yaml;
    const char *gates;
    uint64_t budget;
    int want;          /* 0, 1 or a negative errno */
    const char *picks; /* for 0: "c1:r=d1 c1:r=d2" in allocation order */
    const char *msg;   /* for errors and 1: a substring of the message */
};

/* Eight devices d<p>0..d<p>7, for the flow list of a slice. */
#define D8(p)                                                                                      \
    "{name: d" p "0}, {name: d" p "1}, {name: d" p "2}, {name: d" p "3}, {name: d" p "4}, "        \
    "{name: d" p "5}, {name: d" p "6}, {name: d" p "7}"

static const struct tcase CASES[] = {
    {"one device",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1", "[{name: d1}]") CLAIM("c1", ONE, ""), NULL,
     0, 0, "c1:r=d1", NULL},
    {"count must be >= 1",
     CLASS_A CLAIM("c1", "[{name: r, exactly: {deviceClassName: a, count: 0}}]", ""), NULL, 0,
     -EINVAL, NULL,
     "ResourceClaim default/c1: spec.devices.requests[0].exactly.count: must be >= 1"},
    {"exactly or firstAvailable", CLASS_A CLAIM("c1", "[{name: r}]", ""), NULL, 0, -EINVAL, NULL,
     "spec.devices.requests[0]: exactly one of `exactly` or `firstAvailable` is required"},
    {"All with count",
     CLASS_A CLAIM("c1",
                   "[{name: r, exactly: {deviceClassName: a, allocationMode: All, count: 2}}]", ""),
     NULL, 0, -EINVAL, NULL, "must not be specified when allocationMode is 'All'"},
    {"bad mode",
     CLASS_A CLAIM("c1", "[{name: r, exactly: {deviceClassName: a, allocationMode: Some}}]", ""),
     NULL, 0, -EINVAL, NULL, "supported values"},
    {"slice node one-of",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1, allNodes: true", "[{name: d1}]"), NULL, 0,
     -EINVAL, NULL, "ResourceSlice s1: spec: exactly one of"},
    {"bad version",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, attributes: {v: {version: v1.0}}}]"),
     NULL, 0, -EINVAL, NULL,
     "spec.devices[0].attributes[v]: must be a string compatible with semver"},
    {"constraint names unknown request",
     CLASS_A CLAIM("c1", ONE, ", constraints: [{matchAttribute: a/x, requests: [zz]}]"), NULL, 0,
     -EINVAL, NULL, "constraints[0]: requests[0]: must be the name of a request"},
    {"tainted device skipped",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, taints: [{key: k, effect: NoSchedule}]}, {name: d2}]")
         CLAIM("c1", ONE, ""),
     "DRADeviceTaints=true", 0, 0, "c1:r=d2", NULL},
    {"taint not tolerated",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, taints: [{key: k, value: v, effect: NoExecute}]}]")
         CLAIM("c1",
               "[{name: r, exactly: {deviceClassName: a, tolerations: [{key: k, value: w}]}}]", ""),
     "DRADeviceTaints=true", 0, 1, NULL, "claim default/c1, request r"},
    {"taint tolerated (Exists)",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, taints: [{key: k, value: v, effect: NoSchedule}]}]")
         CLAIM("c1",
               "[{name: r, exactly: {deviceClassName: a, tolerations: [{key: k, operator: "
               "Exists}]}}]",
               ""),
     "DRADeviceTaints=true", 0, 0, "c1:r=d1", NULL},
    {"taint effect None ignored",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, taints: [{key: k, effect: None}]}]") CLAIM("c1", ONE, ""),
     "DRADeviceTaints=true", 0, 0, "c1:r=d1", NULL},
    {"bad taint effect",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, taints: [{key: k, effect: Maybe}]}]"),
     "DRADeviceTaints=true", 0, -EINVAL, NULL,
     "ResourceSlice s1: spec.devices[0].taints[0]: effect"},
    {"All with an untolerated taint",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1}, {name: d2, taints: [{key: k, effect: NoSchedule}]}]")
         CLAIM("c1", "[{name: r, exactly: {deviceClassName: a, allocationMode: All}}]", ""),
     "DRADeviceTaints=true", 0, 1, NULL, "claim default/c1, request r"},
    {"taints ignored with the gate off",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, taints: [{key: k, effect: NoSchedule}]}]") CLAIM("c1", ONE, ""),
     NULL, 0, 0, "c1:r=d1", NULL},
    {"counters: never selected with the gate off",
     CLASS_A SLICE(
         "s1", "p1", "1", "1", "nodeName: n1",
         "[{name: d1, consumesCounters: [{counterSet: x, counters: {m: {value: 1}}}]}, {name: d2}]")
         CLAIM("c1", ONE, ""),
     NULL, 0, 0, "c1:r=d2", NULL},
    {"shared counters",
     CLASS_A
     "kind: ResourceSlice\nmetadata: {name: s0}\nspec: {driver: a, pool: {name: p1, generation: 1, "
     "resourceSliceCount: 2}, nodeName: n1, sharedCounters: [{name: mem, counters: {m: {value: "
     "8Gi}}}]}\n---\n" SLICE(
         "s1", "p1", "1", "2", "nodeName: n1",
         "[{name: d1, consumesCounters: [{counterSet: mem, counters: {m: {value: 4Gi}}}]},"
         " {name: d2, consumesCounters: [{counterSet: mem, counters: {m: {value: 6Gi}}}]},"
         " {name: d3, consumesCounters: [{counterSet: mem, counters: {m: {value: 4Gi}}}]}]")
         CLAIM("c1",
               "[{name: r0, exactly: {deviceClassName: a}}, {name: r1, exactly: {deviceClassName: "
               "a}}]",
               ""),
     "DRAPartitionableDevices=true", 0, 0, "c1:r0=d1 c1:r1=d3", NULL},
    {"unknown counter set: invalid pool",
     CLASS_A SLICE(
         "s1", "p1", "1", "1", "nodeName: n1",
         "[{name: d1, consumesCounters: [{counterSet: nope, counters: {m: {value: 1}}}]}]")
         CLAIM("c1", ONE, ""),
     "DRAPartitionableDevices=true", 0, 1, NULL, "invalid resource pools were encountered"},
    {"per-device node selection",
     CLASS_A SLICE("s1", "p1", "1", "1", "perDeviceNodeSelection: true",
                   "[{name: d1, nodeName: n2}, {name: d2, allNodes: true}]") CLAIM("c1", ONE, ""),
     "DRAPartitionableDevices=true", 0, 0, "c1:r=d2", NULL},
    {"per-device node selection, gate off: slice skipped",
     CLASS_A SLICE("s1", "p1", "1", "1", "perDeviceNodeSelection: true",
                   "[{name: d1, allNodes: true}]") CLAIM("c1", ONE, ""),
     NULL, 0, 1, NULL, "cannot allocate all claims"},
    {"device node without perDeviceNodeSelection",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1", "[{name: d1, nodeName: n1}]"), NULL, 0,
     -EINVAL, NULL, "only allowed with perDeviceNodeSelection"},
    {"binding-condition pools last",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, bindingConditions: [x], bindingFailureConditions: [y]}]")
         SLICE("s2", "p2", "1", "1", "nodeName: n1", "[{name: d2}]") CLAIM("c1", ONE, ""),
     "DRADeviceBindingConditions=true", 0, 0, "c1:r=d2", NULL},
    {"binding conditions: gate off, never selected",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, bindingConditions: [x], bindingFailureConditions: [y]}]")
         CLAIM("c1", ONE, ""),
     NULL, 0, 1, NULL, "cannot allocate all claims"},
    {"binding conditions with both gates",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, bindingConditions: [ok], bindingFailureConditions: [bad]}]")
         CLAIM("c1", ONE, ""),
     "DRADeviceBindingConditions=true", 0, 0, "c1:r=d1", NULL},
    {"binding conditions without DRAResourceClaimDeviceStatus",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, bindingConditions: [ok], bindingFailureConditions: [bad]}]")
         CLAIM("c1", ONE, ""),
     "DRADeviceBindingConditions=true,DRAResourceClaimDeviceStatus=false", 0, 1, NULL,
     "0 devices match"},
    {"consumable capacity: two shares of one device",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, allowMultipleAllocations: true, capacity: {bw: {value: 4, "
                   "requestPolicy: {default: 2, validRange: {min: 2, step: 2}}}}}]")
         CLAIM("c1", "[{name: r, exactly: {deviceClassName: a, capacity: {requests: {bw: 1}}}}]",
               "")
             CLAIM("c2",
                   "[{name: r, exactly: {deviceClassName: a, capacity: {requests: {bw: 1}}}}]", "")
                 CLAIM("c3",
                       "[{name: r, exactly: {deviceClassName: a, capacity: {requests: {bw: 1}}}}]",
                       ""),
     "DRAConsumableCapacity=true", 0, 1, NULL, "claim default/c3, request r"},
    {"consumable capacity: validValues rounding",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, allowMultipleAllocations: true, capacity: {bw: {value: 8, "
                   "requestPolicy: {default: 2, validValues: [2, 4, 8]}}}}]")
         CLAIM("c1", "[{name: r, exactly: {deviceClassName: a, capacity: {requests: {bw: 3}}}}]",
               "")
             CLAIM("c2",
                   "[{name: r, exactly: {deviceClassName: a, capacity: {requests: {bw: 3}}}}]", ""),
     "DRAConsumableCapacity=true", 0, 0, "c1:r=d1 c2:r=d1", NULL},
    {"consumable capacity: fractional shares fill the device exactly",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, allowMultipleAllocations: true, capacity: {bw: {value: 1500m}}}]")
         CLAIM("c1",
               "[{name: r, exactly: {deviceClassName: a, capacity: {requests: {bw: '0.5'}}}}]", "")
             CLAIM("c2",
                   "[{name: r, exactly: {deviceClassName: a, capacity: {requests: {bw: 500m}}}}]",
                   "") CLAIM("c3",
                             "[{name: r, exactly: {deviceClassName: a, capacity: {requests: {bw: "
                             "500000000n}}}}]",
                             ""),
     "DRAConsumableCapacity=true", 0, 0, "c1:r=d1 c2:r=d1 c3:r=d1", NULL},
    {"consumable capacity: 1n more than is left",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, allowMultipleAllocations: true, capacity: {bw: {value: 1500m}}}]")
         CLAIM("c1",
               "[{name: r, exactly: {deviceClassName: a, capacity: {requests: {bw: '1.5'}}}}]", "")
             CLAIM("c2",
                   "[{name: r, exactly: {deviceClassName: a, capacity: {requests: {bw: 1n}}}}]",
                   ""),
     "DRAConsumableCapacity=true", 0, 1, NULL, "claim default/c2, request r"},
    {"consumable capacity: a fractional step grid",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, allowMultipleAllocations: true, capacity: {mem: {value: 1Gi, "
                   "requestPolicy: {default: 256Mi, validRange: {min: 0.25Gi, step: 0.25Gi}}}}}]")
         CLAIM("c1",
               "[{name: r, exactly: {deviceClassName: a, capacity: {requests: {mem: 300Mi}}}}]", "")
             CLAIM("c2",
                   "[{name: r, exactly: {deviceClassName: a, capacity: {requests: {mem: "
                   "0.5Gi}}}}]",
                   "") CLAIM("c3", "[{name: r, exactly: {deviceClassName: a}}]", ""),
     "DRAConsumableCapacity=true", 0, 1, NULL, "claim default/c3, request r"},
    {"consumable capacity: values beyond 10^28 refused",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, allowMultipleAllocations: true, capacity: {bw: {value: '1e29'}}}]"),
     "DRAConsumableCapacity=true", 0, -ENOTSUP, NULL, "beyond 10^28"},
    {"capacity requests, gate off",
     CLASS_A CLAIM("c1",
                   "[{name: r, exactly: {deviceClassName: a, capacity: {requests: {bw: 3}}}}]", ""),
     NULL, 0, -EINVAL, NULL, "DRAConsumableCapacity feature is disabled"},
    {"request name not a DNS label",
     CLASS_A CLAIM("c1", "[{name: R0, exactly: {deviceClassName: a}}]", ""), NULL, 0, -EINVAL, NULL,
     "spec.devices.requests[0].name: Invalid value: \"R0\": a lowercase RFC 1123 label"},
    {"attribute name not qualified",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, attributes: {a/b/c: {int: 1}}}]"),
     NULL, 0, -EINVAL, NULL,
     "spec.devices[0].attributes[a/b/c]: Invalid value: \"a/b/c\": must be a C identifier, or a "
     "domain and a C identifier separated by one '/'"},
    {"driver not a DNS subdomain",
     "kind: ResourceSlice\nmetadata: {name: s1}\nspec: {driver: Bad_Driver, pool: {name: p1, "
     "generation: 1, "
     "resourceSliceCount: 1}, nodeName: n1}\n",
     NULL, 0, -EINVAL, NULL,
     "ResourceSlice s1: spec.driver: Invalid value: \"Bad_Driver\": a lowercase RFC 1123 "
     "subdomain"},
    {"matchAttribute without a domain",
     CLASS_A CLAIM("c1", ONE, ", constraints: [{matchAttribute: numa}]"), NULL, 0, -EINVAL, NULL,
     "constraints[0].matchAttribute: Invalid value: \"numa\": must include a domain"},
    {"device name not a DNS label",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1", "[{name: d1}, {name: dB}]"), NULL, 0,
     -EINVAL, NULL, "ResourceSlice s1: spec.devices[1].name: Invalid value: \"dB\": " LABEL_WHY},
    {"pool name segment empty", CLASS_A SLICE("s1", "a//b", "1", "1", "nodeName: n1", "[]"), NULL,
     0, -EINVAL, NULL, "spec.pool.name: Invalid value: \"a//b\": a lowercase RFC 1123 subdomain"},
    {"slice name not a DNS subdomain",
     CLASS_A SLICE("S_1", "p1", "1", "1", "nodeName: n1", "[{name: d1}]"), NULL, 0, -EINVAL, NULL,
     "ResourceSlice S_1: metadata.name: Invalid value: \"S_1\": a lowercase RFC 1123 subdomain"},
    {"namespace not a DNS label",
     CLASS_A "kind: ResourceClaim\nmetadata: {name: c1, namespace: a.b}\n"
             "spec: {devices: {requests: " ONE "}}\n",
     NULL, 0, -EINVAL, NULL,
     "ResourceClaim a.b/c1: metadata.namespace: Invalid value: \"a.b\": " LABEL_WHY},
    {"class name too long",
     "kind: DeviceClass\nmetadata: {name: "
     "a123456789012345678901234567890123456789012345678901234567890123456789012345678901234567"
     "890123456789012345678901234567890123456789012345678901234567890123456789012345678901234"
     "5678901234567890123456789012345678901234567890123456789012345678901234567890123456789}\n",
     NULL, 0, -EINVAL, NULL, "...\": must be no more than 253 characters"},
    {"sub-request name not a DNS label",
     CLASS_A CLAIM("c1", "[{name: r, firstAvailable: [{name: s_1, deviceClassName: a}]}]", ""),
     NULL, 0, -EINVAL, NULL,
     "spec.devices.requests[0].firstAvailable[0].name: Invalid value: \"s_1\": " LABEL_WHY},
    {"counter set and counter names",
     CLASS_A SLICE(
         "s1", "p1", "1", "2", "nodeName: n1",
         "[]") "kind: ResourceSlice\nmetadata: {name: s2}\nspec: {driver: a, pool: {name: p1, "
               "generation: 1, resourceSliceCount: 2}, nodeName: n1, sharedCounters: [{name: cs, "
               "counters: {memSlices: {value: 1}}}]}\n",
     "DRAPartitionableDevices=true", 0, -EINVAL, NULL,
     "ResourceSlice s2: spec.sharedCounters[0].counters[memSlices]: Invalid value"},
    {"consumed counter set name",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, consumesCounters: [{counterSet: Cs, counters: {m: {value: 1}}}]}]"),
     "DRAPartitionableDevices=true", 0, -EINVAL, NULL,
     "spec.devices[0].consumesCounters[0].counterSet: Invalid value: \"Cs\""},
    {"taint key",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, taints: [{key: 'a/b/c', effect: NoSchedule}]}]"),
     "DRADeviceTaints=true", 0, -EINVAL, NULL, "spec.devices[0].taints[0].key: Invalid value"},
    {"toleration key",
     CLASS_A CLAIM("c1",
                   "[{name: r, exactly: {deviceClassName: a, tolerations: [{key: '-k', "
                   "operator: Exists}]}}]",
                   ""),
     "DRADeviceTaints=true", 0, -EINVAL, NULL,
     "exactly.tolerations[0].key: Invalid value: \"-k\": name part must consist of"},
    {"capacity request name",
     CLASS_A CLAIM(
         "c1", "[{name: r, exactly: {deviceClassName: a, capacity: {requests: {1bw: 3}}}}]", ""),
     "DRAConsumableCapacity=true", 0, -EINVAL, NULL,
     "exactly.capacity.requests[1bw]: Invalid value: \"1bw\": a valid C identifier"},
    {"class config driver",
     "kind: DeviceClass\nmetadata: {name: a}\nspec: {config: [{opaque: {driver: A, "
     "parameters: {}}}]}\n",
     NULL, 0, -EINVAL, NULL,
     "DeviceClass a: spec.config[0].opaque.driver: Invalid value: \"A\": a lowercase RFC 1123"},
    {"claim config names unknown request",
     CLASS_A CLAIM("c1", ONE,
                   ", config: [{requests: [r, x], opaque: {driver: a, parameters: {}}}]"),
     NULL, 0, -EINVAL, NULL, "spec.devices.config[0]: requests[1]: must be the name of a request"},
    {"constraint names a request twice",
     CLASS_A CLAIM("c1", ONE, ", constraints: [{matchAttribute: a/x, requests: [r, r]}]"), NULL, 0,
     -EINVAL, NULL, "constraints[0]: requests[1]: Duplicate value: \"r\""},
    {"valid names accepted",
     CLASS_A SLICE("s1", "gpu.example.com/p-1", "1", "1", "nodeName: n1",
                   "[{name: gpu-0, attributes: {example.com/_Model2: {int: 1}, numa: {int: 0}}}]")
         CLAIM("c1", ONE, ", constraints: [{matchAttribute: example.com/_Model2, requests: [r]}]"),
     NULL, 0, 0, "c1:r=gpu-0", NULL},
    {"admin access outside an admin namespace",
     "kind: Namespace\nmetadata: {name: default}\n---\n" CLASS_A CLAIM(
         "c1", "[{name: r, exactly: {deviceClassName: a, adminAccess: true}}]", ""),
     NULL, 0, -EPERM, NULL, "requires the label resource.kubernetes.io/admin-access"},
    {"admin access in an admin namespace",
     "kind: Namespace\nmetadata: {name: default, labels: {resource.kubernetes.io/admin-access: "
     "'true'}}\n---\n" CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1", "[{name: d1}]")
         CLAIM("c1", "[{name: r, exactly: {deviceClassName: a, adminAccess: true}}]", ""),
     NULL, 0, 0, "c1:r=d1!", NULL},
    {"newest generation only",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1", "[{name: d1}]")
         SLICE("s2", "p1", "2", "1", "nodeName: n1", "[{name: d2}]") CLAIM("c1", ONE, ""),
     NULL, 0, 0, "c1:r=d2", NULL},
    {"newer generation on another node does not hide this node's",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1", "[{name: d1}]")
         SLICE("s2", "p1", "2", "1", "nodeName: n2", "[{name: d2}]") CLAIM("c1", ONE, ""),
     NULL, 0, 0, "c1:r=d1", NULL},
    {"newer generation elsewhere makes this node's short pool obsolete",
     CLASS_A SLICE("s1", "p1", "1", "2", "nodeName: n1", "[{name: d1}]")
         SLICE("s2", "p1", "2", "1", "nodeName: n2", "[{name: d2}]")
             CLAIM("c1", "[{name: r, exactly: {deviceClassName: a, allocationMode: All}}]", ""),
     NULL, 0, 1, NULL, "0 devices match"},
    {"newest generation incomplete",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1", "[{name: d1}]")
         SLICE("s2", "p1", "2", "2", "nodeName: n1", "[{name: d2}]") CLAIM("c1", ONE, ""),
     NULL, 0, 1, NULL, "claim default/c1, request r"},
    {"generation counted over all nodes",
     CLASS_A SLICE("s1", "p1", "1", "2", "nodeName: n1", "[{name: d1}]")
         SLICE("s2", "p1", "1", "2", "nodeName: n2", "[{name: d2}]") CLAIM("c1", ONE, ""),
     NULL, 0, 0, "c1:r=d1", NULL},
    {"invalid pool",
     CLASS_A SLICE("s1", "p1", "1", "2", "nodeName: n1", "[{name: d1}]")
         SLICE("s2", "p1", "1", "2", "nodeName: n1", "[{name: d1}]") CLAIM("c1", ONE, ""),
     NULL, 0, 1, NULL, "invalid resource pools were encountered"},
    {"node selector matchExpressions",
     "kind: Node\nmetadata: {name: n1, labels: {zone: z1}}\n---\n" CLASS_A SLICE(
         "s1", "p1", "1", "1",
         "nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: "
         "[z2]}]}]}",
         "[{name: d1}]") SLICE("s2", "p2", "1", "1",
                               "nodeSelector: {nodeSelectorTerms: [{matchExpressions: [{key: zone, "
                               "operator: In, values: [z1]}]}]}",
                               "[{name: d2}]") CLAIM("c1", ONE, ""),
     NULL, 0, 0, "c1:r=d2", NULL},
    {"node selector matchFields NotIn",
     CLASS_A SLICE("s1", "p1", "1", "1",
                   "nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, "
                   "operator: NotIn, values: [n1]}]}]}",
                   "[{name: d1}]") CLAIM("c1", ONE, ""),
     NULL, 0, 1, NULL, "cannot allocate all claims"},
    {"combinations in pool order",
     CLASS_A SLICE("s2", "p2", "1", "1", "allNodes: true", "[{name: d3}, {name: d2}]")
         SLICE("s1", "p1", "1", "1", "allNodes: true", "[{name: d1}]")
             CLAIM("c1", "[{name: r, exactly: {deviceClassName: a, count: 2}}]", ""),
     NULL, 0, 0, "c1:r=d1 c1:r=d3", NULL},
    {"All",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1", "[{name: d1}, {name: d2}]")
         CLAIM("c1", "[{name: r, exactly: {deviceClassName: a, allocationMode: All}}]", ""),
     NULL, 0, 0, "c1:r=d1 c1:r=d2", NULL},
    {"All but one in use by the next claim's order",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1", "[{name: d1}, {name: d2}]")
         CLAIM("c0", ONE, "")
             CLAIM("c1", "[{name: r, exactly: {deviceClassName: a, allocationMode: All}}]", ""),
     NULL, 0, 1, NULL, "claim default/c1, request r"},
    {"firstAvailable",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1", "[{name: d1}]") CLAIM(
         "c1",
         "[{name: r, firstAvailable: [{name: big, deviceClassName: a, count: 2}, {name: one, "
         "deviceClassName: a}]}]",
         ""),
     NULL, 0, 0, "c1:r/one=d1", NULL},
    {"firstAvailable gate off",
     CLASS_A CLAIM("c1", "[{name: r, firstAvailable: [{name: one, deviceClassName: a}]}]", ""),
     "DRAPrioritizedList=false", 0, -EINVAL, NULL, "DRAPrioritizedList feature is disabled"},
    {"matchAttribute",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, attributes: {numa: {int: 1}}}, {name: d2, attributes: {numa: {int: "
                   "2}}}, {name: d3, attributes: {numa: {int: 2}}}]")
         CLAIM("c1", "[{name: r, exactly: {deviceClassName: a, count: 2}}]",
               ", constraints: [{matchAttribute: a/numa}]"),
     NULL, 0, 0, "c1:r=d2 c1:r=d3", NULL},
    {"distinctAttribute per device",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, attributes: {numa: {int: 1}}}, {name: d2, attributes: {numa: {int: "
                   "1}}}, {name: d3, attributes: {numa: {int: 2}}}]")
         CLAIM("c1", "[{name: r, exactly: {deviceClassName: a, count: 2}}]",
               ", constraints: [{distinctAttribute: a/numa}]"),
     "DRAConsumableCapacity=true", 0, 0, "c1:r=d1 c1:r=d3", NULL},
    {"distinctAttribute gate off",
     CLASS_A CLAIM("c1", ONE, ", constraints: [{distinctAttribute: a/numa}]"), NULL, 0, -EINVAL,
     NULL, "distinctAttribute needs the DRAConsumableCapacity feature"},
    {"admin access ignores other claims",
     CLASS_A SLICE(
         "s1", "p1", "1", "1", "nodeName: n1",
         "[{name: d1}]") "kind: ResourceClaim\nmetadata: {name: c0}\nspec: {devices: "
                         "{requests: " ONE "}}\n"
                         "status: {allocation: {devices: {results: [{request: r, driver: a, pool: "
                         "p1, device: d1}]}}}\n---\n" CLAIM(
                             "c1", "[{name: r, exactly: {deviceClassName: a, adminAccess: true}}]",
                             ""),
     NULL, 0, 0, "c1:r=d1!", NULL},
    {"admin access gate off",
     CLASS_A CLAIM("c1", "[{name: r, exactly: {deviceClassName: a, adminAccess: true}}]", ""),
     "DRAAdminAccess=false", 0, -EINVAL, NULL,
     "admin access is requested, but the feature is disabled"},
    {"allocated elsewhere",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1}]") "kind: ResourceClaim\nmetadata: {name: c0}\nspec: {devices: "
                                   "{requests: " ONE "}}\n"
                                   "status: {allocation: {devices: {results: [{request: r, driver: "
                                   "a, pool: p1, device: d1}]}}}\n---\n" CLAIM("c1", ONE, ""),
     NULL, 0, 1, NULL,
     "claim default/c1, request r: needs 1 device on node n1; 1 device matches the selectors, 0 of "
     "them not allocated to other claims"},
    {"budget",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1, attributes: {n: {int: 1}}}, {name: d2, attributes: {n: {int: 2}}}, "
                   "{name: d3, attributes: {n: {int: 3}}}, {name: d4, attributes: {n: {int: 4}}}]")
         CLAIM("c1", "[{name: r, exactly: {deviceClassName: a, count: 2}}]",
               ", constraints: [{matchAttribute: a/n}]"),
     NULL, 5, -E2BIG, NULL, "search budget of 5 steps exhausted"},
    {"All is counted before the search: 40 devices exceed the claim limit",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[" D8("0") ", " D8("1") ", " D8("2") ", " D8("3") ", " D8("4") "]")
         CLAIM("c1", "[{name: r, exactly: {deviceClassName: a, allocationMode: All}}]", ""),
     NULL, 0, -EINVAL, NULL, "number of requested devices 40 exceeds the claim limit of 32"},
    {"All is checked before the search, also in a sub-request never reached",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                   "[{name: d1}]") SLICE("s2", "p2", "1", "2", "nodeName: n1", "[{name: d2}]")
         CLAIM("c1",
               "[{name: r, firstAvailable: [{name: one, deviceClassName: a}, {name: all, "
               "deviceClassName: a, allocationMode: All}]}]",
               ""),
     NULL, 0, -EINVAL, NULL, "resource pool a/p2 is currently being updated"},
    {"unknown class", CLASS_A CLAIM("c1", "[{name: r, exactly: {deviceClassName: zz}}]", ""), NULL,
     0, -ENOENT, NULL, "could not retrieve device class zz"},
    {"CEL compile error",
     CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1", "[{name: d1}]") CLAIM(
         "c1",
         "[{name: r, exactly: {deviceClassName: a, selectors: [{cel: {expression: "
         "'device.nope'}}]}}]",
         ""),
     NULL, 0, -EDOM, NULL, "claim default/c1: selector #0: CEL compile error"},
    {"allowMultipleAllocations read by selectors",
     CLASS_A MULTI_SLICE MULTI_CLAIM("device.allowMultipleAllocations"),
     "DRAConsumableCapacity=true", 0, 0, "c1:r=shared", NULL},
    {"allowMultipleAllocations false when unset",
     CLASS_A MULTI_SLICE MULTI_CLAIM("!device.allowMultipleAllocations"),
     "DRAConsumableCapacity=true", 0, 0, "c1:r=plain", NULL},
    {"allowMultipleAllocations with DeviceBindingAndStatus: the device's field",
     CLASS_A MULTI_SLICE MULTI_CLAIM("device.allowMultipleAllocations"),
     "DRADeviceBindingConditions=true", 0, 0, "c1:r=shared", NULL},
    {"allowMultipleAllocations in the stable variant: false",
     CLASS_A MULTI_SLICE MULTI_CLAIM("device.allowMultipleAllocations"), NULL, 0, 1, NULL,
     "0 devices match the selectors"},
};

/* "claim:request=device" for each result, '!' after admin results, space-separated. */
static void picks(json_t *list, struct strbuf *sb)
{
    size_t i, k;
    json_t *c, *r;

    json_array_foreach(list, i, c)
    {
        json_t *res = json_object_get(
            json_object_get(json_object_get(json_object_get(c, "status"), "allocation"), "devices"),
            "results");
        json_array_foreach(res, k, r)
        {
            assert_int_equal(
                strbuf_addf(
                    sb, "%s%s:%s=%s%s", sb->len ? " " : "",
                    json_string_value(json_object_get(json_object_get(c, "metadata"), "name")),
                    json_string_value(json_object_get(r, "request")),
                    json_string_value(json_object_get(r, "device")),
                    json_is_true(json_object_get(r, "adminAccess")) ? "!" : ""),
                0);
        }
    }
}

static int run_case(const struct tcase *t, struct diag *d, json_t **out, uint64_t *ret_steps)
{
    _cleanup_(doc_freep) struct doc *doc = NULL;
    _cleanup_(dalloc_freep) struct dalloc *a = NULL;
    struct dalloc_gates g;
    int r;

    dalloc_gates_default(&g);
    if (t->gates)
        assert_int_equal(dalloc_gates_parse(&g, t->gates, d), 0);
    assert_int_equal(doc_load_string(t->name, t->yaml, strlen(t->yaml), d, &doc), 0);
    assert_int_equal(dalloc_new("n1", &g, &a), 0);
    dalloc_set_budget(a, t->budget);
    for (size_t i = 0; i < doc_count(doc); i++) {
        if (json_is_null(doc_root(doc, i)))
            continue;
        if ((r = dalloc_add(a, doc_root(doc, i), d)) < 0)
            return r;
    }
    r = dalloc_run(a, d, out);
    *ret_steps = dalloc_steps(a);
    return r;
}

static void test_cases(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(CASES) / sizeof(CASES[0]); i++) {
        const struct tcase *t = &CASES[i];
        _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
        _cleanup_json_ json_t *out = NULL;
        struct diag d;
        uint64_t steps;
        int r;

        diag_init(&d);
        r = run_case(t, &d, &out, &steps);
        if (r != t->want || (t->msg && !strstr(d.msg, t->msg)))
            fail_msg("case \"%s\": got %d (%s), want %d (%s)", t->name, r, d.msg, t->want,
                     t->msg ? t->msg : "");
        if (t->picks) {
            picks(out, &sb);
            if (strcmp(strbuf_str(&sb), t->picks) != 0)
                fail_msg("case \"%s\": got \"%s\", want \"%s\"", t->name, strbuf_str(&sb),
                         t->picks);
        }
    }
}

/* The claim limit prunes: no 32-device sub-request fits next to the other request's 16, so both
 * are skipped before a device is tried: 16 picks, then the 16 devices in use skipped and 16 picks.
 * Searching the 32-device combinations instead would exhaust any budget. */
static void test_limit_prunes(void **state)
{
    static const struct tcase t = {
        "32-result limit skips sub-requests",
        CLASS_A SLICE("s1", "p1", "1", "1", "nodeName: n1",
                      "[" D8("0") ", " D8("1") ", " D8("2") ", " D8("3") ", " D8("4") ", " D8(
                          "5") ", " D8("6") ", " D8("7") "]")
            CLAIM("c1",
                  "[{name: r0, firstAvailable: [{name: big, deviceClassName: a, count: 32}, "
                  "{name: half, deviceClassName: a, count: 16}]}, {name: r1, firstAvailable: "
                  "[{name: big, deviceClassName: a, count: 32}, {name: half, deviceClassName: a, "
                  "count: 16}]}]",
                  ""),
        NULL,
        1000,
        0,
        NULL,
        NULL,
    };
    _cleanup_json_ json_t *out = NULL;
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    struct diag d;
    uint64_t steps;

    (void)state;
    diag_init(&d);
    assert_int_equal(run_case(&t, &d, &out, &steps), 0);
    assert_true(steps <= 48);
    picks(out, &sb);
    assert_non_null(strstr(strbuf_str(&sb), "c1:r0/half=d00 "));
    assert_non_null(strstr(strbuf_str(&sb), "c1:r0/half=d17 c1:r1/half=d20 "));
    assert_non_null(strstr(strbuf_str(&sb), "c1:r1/half=d37"));
    assert_null(strstr(strbuf_str(&sb), "big"));
}

static void test_gates(void **state)
{
    struct dalloc_gates g;
    struct diag d;

    (void)state;
    dalloc_gates_default(&g);
    assert_true(g.admin_access && g.prioritized_list && !g.device_taints && !g.consumable_capacity);
    assert_int_equal(dalloc_gates_parse(&g, "DRAAdminAccess=false,DRADeviceTaints=true", &d), 0);
    assert_true(!g.admin_access && g.device_taints);
    assert_int_equal(dalloc_gates_parse(&g, "DRAAdminAccess=true,Nope=true", &d), -EINVAL);
    assert_non_null(strstr(d.msg, "Nope"));
    assert_false(g.admin_access); /* unchanged on failure */
    assert_int_equal(dalloc_gates_parse(&g, "DRAAdminAccess=yes", &d), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases),
        cmocka_unit_test(test_limit_prunes),
        cmocka_unit_test(test_gates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
