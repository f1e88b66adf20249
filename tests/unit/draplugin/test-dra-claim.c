/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ResourceClaims as NodePrepareResources reads them: the checks the kubelet relies on (UID,
 * allocated, reserved), which results are this driver's on this node, request and sub-request
 * names, admin access and share IDs, and which opaque config each device gets (class configs
 * before claim configs, request scoping, the later one wins, request-less configs by device kind,
 * configs of other drivers ignored), plus every refusal with its message.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dra-claim.h"

#define UID "dab5ab50-d59a-42a6-af16-cfd4628c0f7a"
#define DRIVER "gpu.nvidia.com"
#define NODE "node-a"

#define META "\"metadata\": {\"name\": \"c1\", \"namespace\": \"ns1\", \"uid\": \"" UID "\"}"
#define RESERVED "\"reservedFor\": [{\"resource\": \"pods\", \"name\": \"p\", \"uid\": \"u1\"}]"
#define GPU_CFG(extra)                                                                             \
    "{\"apiVersion\": \"resource.nvidia.com/v1beta1\", \"kind\": \"GpuConfig\"" extra "}"
#define MIG_CFG(extra)                                                                             \
    "{\"apiVersion\": \"resource.nvidia.com/v1beta1\", \"kind\": \"MigDeviceConfig\"" extra "}"
#define MPS ", \"sharing\": {\"strategy\": \"MPS\"}"
#define LONG ", \"sharing\": {\"timeSlicingConfig\": {\"interval\": \"Long\"}}"
#define SHORT ", \"sharing\": {\"timeSlicingConfig\": {\"interval\": \"Short\"}}"
#define RES(req, dev)                                                                              \
    "{\"request\": \"" req "\", \"driver\": \"" DRIVER "\", \"pool\": \"" NODE                     \
    "\", \"device\": \"" dev "\"}"
#define CONFIG(source, requests, params)                                                           \
    "{\"source\": \"" source "\", \"requests\": [" requests "], \"opaque\": {\"driver\": "         \
    "\"" DRIVER "\", \"parameters\": " params "}}"
/* A claim allocated with results and configs (JSON array contents). */
#define CLAIM(results, configs)                                                                    \
    "{" META ", \"status\": {\"allocation\": {\"devices\": {\"results\": [" results                \
    "], \"config\": [" configs "]}}, " RESERVED "}}"

static json_t *parse(const char *text)
{
    json_error_t err;
    json_t *v = json_loads(text, 0, &err);
    if (!v)
        fail_msg("bad test JSON at %d: %s\n%s", err.position, err.text, text);
    return v;
}

static struct dra_claim *decode_ok(const char *text)
{
    _cleanup_json_ json_t *obj = parse(text);
    struct dra_claim *c = NULL;
    struct diag d;
    diag_init(&d);
    if (dra_claim_decode(obj, UID, DRIVER, NODE, &d, &c) < 0)
        fail_msg("dra_claim_decode: %s\n%s", d.msg, text);
    assert_non_null(c);
    return c;
}

static void decode_fails(const char *text, const char *uid, const char *want)
{
    _cleanup_json_ json_t *obj = parse(text);
    struct dra_claim *c = NULL;
    struct diag d;
    diag_init(&d);
    int r = dra_claim_decode(obj, uid, DRIVER, NODE, &d, &c);
    if (r != -EINVAL || strcmp(d.msg, want) != 0)
        fail_msg("got %d \"%s\", want \"%s\"\n%s", r, d.msg, want, text);
    assert_null(c);
}

static void test_allocated(void **state)
{
    _cleanup_(dra_claim_freep) struct dra_claim *c =
        decode_ok(CLAIM(RES("gpu", "gpu-0") "," RES("mig", "gpu-1-mig-1g5gb-19-0"), ""));
    assert_string_equal(c->uid, UID);
    assert_string_equal(c->ns, "ns1");
    assert_string_equal(c->name, "c1");
    assert_int_equal(c->n_devices, 2);
    assert_string_equal(c->devices[0].request, "gpu");
    assert_string_equal(c->devices[0].base_request, "gpu");
    assert_string_equal(c->devices[0].pool, NODE);
    assert_string_equal(c->devices[0].device, "gpu-0");
    assert_null(c->devices[0].share_id);
    assert_false(c->devices[0].admin_access);
    assert_int_equal(c->devices[0].config.sharing, DRA_SHARING_NONE);
    assert_int_equal(c->devices[0].config.mps_active_thread_percentage, -1);
    assert_string_equal(c->devices[1].device, "gpu-1-mig-1g5gb-19-0");
    assert_int_equal(c->devices[1].config.sharing, DRA_SHARING_NONE);
}

static void test_refused_claims(void **state)
{
    decode_fails("{" META ", \"status\": {" RESERVED "}}", UID,
                 "ResourceClaim ns1/c1 is not allocated");
    decode_fails("{" META "}", UID, "ResourceClaim ns1/c1 is not allocated");
    decode_fails("{" META ", \"status\": {\"allocation\": null}}", UID,
                 "ResourceClaim ns1/c1 is not allocated");
    decode_fails("{" META ", \"status\": {\"allocation\": {}}}", UID,
                 "ResourceClaim ns1/c1 is not reserved for any pod");
    decode_fails("{" META ", \"status\": {\"allocation\": {}, \"reservedFor\": []}}", UID,
                 "ResourceClaim ns1/c1 is not reserved for any pod");
    decode_fails(CLAIM("", ""), "0d1c2a3b-0000-4000-8000-000000000000",
                 "UID mismatch: ResourceClaim ns1/c1 has UID " UID
                 ", the kubelet asked for 0d1c2a3b-0000-4000-8000-000000000000 (the claim was "
                 "replaced)");
    decode_fails("[]", UID, "the claim is not a JSON object");
    decode_fails("{}", UID, "claim.metadata: missing");
    decode_fails("{\"metadata\": {\"name\": \"c1\", \"namespace\": \"ns1\"}}", UID,
                 "metadata.uid: missing");
    decode_fails("{\"metadata\": {\"name\": 1, \"namespace\": \"ns1\", \"uid\": \"" UID "\"}}", UID,
                 "metadata.name: expected a string");
    decode_fails("{" META ", \"status\": {\"allocation\": []}}", UID,
                 "status.allocation: expected an object");
    decode_fails("{" META ", \"status\": {\"allocation\": {}, \"reservedFor\": {}}}", UID,
                 "status.reservedFor: expected an array");
}

static void test_refused_results(void **state)
{
    decode_fails(CLAIM("1", ""), UID, "result #1: expected an object");
    decode_fails(CLAIM(RES("gpu", "gpu-0") ", {\"driver\": \"" DRIVER "\"}", ""), UID,
                 "result #2.request: missing");
    decode_fails(
        CLAIM("{\"request\": \"gpu\", \"driver\": \"" DRIVER "\", \"device\": \"gpu-0\"}", ""), UID,
        "result #1.pool: missing");
    decode_fails(CLAIM(RES("gpu", "gpu-vfio-0"), ""), UID,
                 "result #1: device \"gpu-vfio-0\" is not a device gpuplane publishes");
    decode_fails(CLAIM(RES("gpu", "../../etc"), ""), UID,
                 "result #1: device \"../../etc\" is not a device gpuplane publishes");
    decode_fails(CLAIM(RES("gpu/", "gpu-0"), ""), UID,
                 "result #1.request: invalid request name \"gpu/\"");
    decode_fails(CLAIM("{\"request\": \"gpu\", \"driver\": \"" DRIVER "\", \"pool\": \"" NODE
                       "\", \"device\": \"gpu-0\", \"adminAccess\": \"yes\"}",
                       ""),
                 UID, "result #1.adminAccess: expected a boolean");
    decode_fails(CLAIM("{\"request\": \"gpu\", \"driver\": \"" DRIVER "\", \"pool\": \"" NODE
                       "\", \"device\": \"gpu-0\", \"shareID\": \"../x\"}",
                       ""),
                 UID, "result #1.shareID: invalid \"../x\"");
    decode_fails("{" META
                 ", \"status\": {\"allocation\": {\"devices\": {\"results\": {}}}, " RESERVED "}}",
                 UID, "allocation.devices.results: expected an array");
}

static void test_other_drivers_and_pools(void **state)
{
    /* Another driver's or another node's devices may have any name: they are not ours to check. */
    _cleanup_(dra_claim_freep) struct dra_claim *c = decode_ok(CLAIM(
        "{\"request\": \"nic\", \"driver\": \"nic.example.com\", \"pool\": \"" NODE
        "\", \"device\": \"eth0\"},"
        "{\"request\": \"gpu\", \"driver\": \"" DRIVER "\", \"pool\": \"node-b\", \"device\": "
        "\"gpu-0\"}," RES("gpu", "gpu-3"),
        "{\"source\": \"FromClaim\", \"opaque\": {\"driver\": \"nic.example.com\", "
        "\"parameters\": {\"anything\": true}}}"));
    assert_int_equal(c->n_devices, 1);
    assert_string_equal(c->devices[0].device, "gpu-3");
    _cleanup_(dra_claim_freep) struct dra_claim *none = decode_ok(CLAIM(
        "{\"request\": \"nic\", \"driver\": \"nic.example.com\", \"pool\": \"p\", \"device\": "
        "\"eth0\"}",
        ""));
    assert_int_equal(none->n_devices, 0);
    assert_null(none->devices);
    _cleanup_(dra_claim_freep) struct dra_claim *empty =
        decode_ok("{" META ", \"status\": {\"allocation\": {}, " RESERVED "}}");
    assert_int_equal(empty->n_devices, 0);
}

static void test_subrequests_admin_share(void **state)
{
    _cleanup_(dra_claim_freep) struct dra_claim *c = decode_ok(
        CLAIM(RES("gpu/large", "gpu-0") ",{\"request\": \"mon\", \"driver\": \"" DRIVER
                                        "\", \"pool\": \"" NODE "\", \"device\": \"gpu-1\", "
                                        "\"adminAccess\": true},"
                                        "{\"request\": \"shared\", \"driver\": \"" DRIVER
                                        "\", \"pool\": \"" NODE "\", \"device\": \"gpu-2\", "
                                        "\"shareID\": \"0d1c2a3b-0000-4000-8000-000000000000\", "
                                        "\"adminAccess\": false}",
              ""));
    assert_int_equal(c->n_devices, 3);
    assert_string_equal(c->devices[0].request, "gpu/large");
    assert_string_equal(c->devices[0].base_request, "gpu");
    assert_true(c->devices[1].admin_access);
    assert_string_equal(c->devices[1].base_request, "mon");
    assert_false(c->devices[2].admin_access);
    assert_string_equal(c->devices[2].share_id, "0d1c2a3b-0000-4000-8000-000000000000");
}

static void test_config_precedence(void **state)
{
    /* Listed claim first, class second: the class config still comes first, so the claim's
     * (listed earlier) wins for gpu-0; request scoping keeps the MPS config on "b" only. */
    _cleanup_(dra_claim_freep) struct dra_claim *c = decode_ok(CLAIM(
        RES("a", "gpu-0") "," RES("b", "gpu-1") "," RES("c/x", "gpu-2") "," RES("d", "gpu-3"),
        CONFIG("FromClaim", "\"a\"", GPU_CFG(LONG)) "," CONFIG(
            "FromClass", "",
            GPU_CFG(SHORT)) "," CONFIG("FromClaim", "\"b\"",
                                       GPU_CFG(MPS)) "," CONFIG("FromClaim", "\"c\"",
                                                                GPU_CFG("")) "," CONFIG("FromClaim",
                                                                                        "\"c/y\"",
                                                                                        GPU_CFG(
                                                                                            MPS))));
    assert_int_equal(c->n_devices, 4);
    assert_int_equal(c->devices[0].config.sharing, DRA_SHARING_TIMESLICING);
    assert_int_equal(c->devices[0].config.interval, DRA_TIMESLICE_LONG);
    assert_int_equal(c->devices[1].config.sharing, DRA_SHARING_MPS);
    /* "c" names the sub-request c/x; "c/y" does not. */
    assert_int_equal(c->devices[2].config.sharing, DRA_SHARING_TIMESLICING);
    assert_int_equal(c->devices[2].config.interval, DRA_TIMESLICE_DEFAULT);
    /* Only the class-wide config reaches d. */
    assert_int_equal(c->devices[3].config.sharing, DRA_SHARING_TIMESLICING);
    assert_int_equal(c->devices[3].config.interval, DRA_TIMESLICE_SHORT);
}

static void test_config_later_wins(void **state)
{
    _cleanup_(dra_claim_freep) struct dra_claim *c =
        decode_ok(CLAIM(RES("a", "gpu-0"), CONFIG("FromClaim", "\"a\"", GPU_CFG(MPS)) "," CONFIG(
                                               "FromClaim", "", GPU_CFG(LONG))));
    assert_int_equal(c->devices[0].config.sharing, DRA_SHARING_TIMESLICING);
    assert_int_equal(c->devices[0].config.interval, DRA_TIMESLICE_LONG);
    _cleanup_(dra_claim_freep) struct dra_claim *c2 =
        decode_ok(CLAIM(RES("a", "gpu-0"), CONFIG("FromClaim", "", GPU_CFG(LONG)) "," CONFIG(
                                               "FromClaim", "\"a\"", GPU_CFG(MPS))));
    assert_int_equal(c2->devices[0].config.sharing, DRA_SHARING_MPS);
}

static void test_config_by_kind(void **state)
{
    /* Request-less configs apply to the devices of their kind only. */
    _cleanup_(dra_claim_freep) struct dra_claim *c = decode_ok(
        CLAIM(RES("a", "gpu-0") "," RES("a", "gpu-1-mig-1g5gb-19-0"),
              CONFIG("FromClaim", "", MIG_CFG(MPS)) "," CONFIG("FromClaim", "", GPU_CFG(LONG))));
    assert_int_equal(c->devices[0].config.sharing, DRA_SHARING_TIMESLICING);
    assert_false(c->devices[0].config.mig);
    assert_int_equal(c->devices[1].config.sharing, DRA_SHARING_MPS);
    assert_true(c->devices[1].config.mig);
    /* Named outright, the wrong kind is an error, as in NVIDIA's driver. */
    decode_fails(CLAIM(RES("a", "gpu-0"), CONFIG("FromClaim", "\"a\"", MIG_CFG(""))), UID,
                 "config #1: a MigDeviceConfig cannot apply to the full GPU gpu-0 (request "
                 "\"a\")");
    decode_fails(CLAIM(RES("m/s", "gpu-0-mig-1g5gb-19-0"),
                       CONFIG("FromClass", "\"m\"", GPU_CFG("")) "," CONFIG("FromClaim", "\"x\"",
                                                                            GPU_CFG(""))),
                 UID,
                 "config #1: a GpuConfig cannot apply to the MIG device gpu-0-mig-1g5gb-19-0 "
                 "(request \"m/s\")");
}

static void test_config_refused(void **state)
{
    /* Unknown kinds and invalid configs are refused even when no device uses them. */
    decode_fails(CLAIM(RES("a", "gpu-0"),
                       CONFIG("FromClaim", "\"zzz\"",
                              "{\"apiVersion\": \"resource.nvidia.com/v1beta1\", \"kind\": "
                              "\"Foo\"}")),
                 UID,
                 "config #1: unsupported kind \"Foo\" (want GpuConfig or MigDeviceConfig of "
                 "resource.nvidia.com/v1beta1)");
    decode_fails(
        CLAIM(RES("a", "gpu-0"), CONFIG("FromClass", "", GPU_CFG("")) "," CONFIG(
                                     "FromClaim", "",
                                     "{\"apiVersion\": \"resource.nvidia.com/v1beta1\", \"kind\": "
                                     "\"VfioDeviceConfig\"}")),
        UID,
        "config #2: kind VfioDeviceConfig is not supported by gpuplane (only GpuConfig "
        "and MigDeviceConfig are)");
    decode_fails(CLAIM(RES("a", "gpu-0"),
                       CONFIG("FromClaim", "", GPU_CFG(", \"sharing\": {\"strategy\": \"X\"}"))),
                 UID,
                 "config #1: sharing.strategy: unknown strategy \"X\" (want TimeSlicing or MPS)");
    decode_fails(CLAIM(RES("a", "gpu-0"), CONFIG("FromClaim", "", GPU_CFG(", \"extra\": 1"))), UID,
                 "config #1: unknown field \"extra\"");
    decode_fails(CLAIM(RES("a", "gpu-0"), CONFIG("FromClaim", "", "null")), UID,
                 "config #1: parameters: expected an object, got null");
    decode_fails(CLAIM(RES("a", "gpu-0"), CONFIG("FromSomewhere", "", GPU_CFG(""))), UID,
                 "config #1: unknown source \"FromSomewhere\"");
    decode_fails(CLAIM(RES("a", "gpu-0"), CONFIG("FromClaim", "3", GPU_CFG(""))), UID,
                 "config #1: requests[0]: expected a request name");
    decode_fails(CLAIM(RES("a", "gpu-0"), "{\"source\": \"FromClaim\", \"opaque\": {}}"), UID,
                 "config #1: opaque.driver: missing");
    /* Other drivers' configs are theirs to judge; a config without opaque is not ours either. */
    _cleanup_(dra_claim_freep) struct dra_claim *c =
        decode_ok(CLAIM(RES("a", "gpu-0"),
                        "{\"source\": \"FromClaim\", \"opaque\": {\"driver\": \"x.example.com\", "
                        "\"parameters\": {\"kind\": \"Foo\"}}},"
                        "{\"source\": \"FromClass\"}"));
    assert_int_equal(c->devices[0].config.sharing, DRA_SHARING_NONE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allocated),
        cmocka_unit_test(test_refused_claims),
        cmocka_unit_test(test_refused_results),
        cmocka_unit_test(test_other_drivers_and_pools),
        cmocka_unit_test(test_subrequests_admin_share),
        cmocka_unit_test(test_config_precedence),
        cmocka_unit_test(test_config_later_wins),
        cmocka_unit_test(test_config_by_kind),
        cmocka_unit_test(test_config_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
