/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the DRA driver's ResourceClaim and opaque-config decoders: any bytes that
 * parse as JSON go through dra_claim_decode (with the UID the document itself carries, so the
 * decoder gets past its first check and into results and configs) and, the whole document and
 * every config's parameters, through dra_config_decode. Each must decode or refuse with a
 * message; never crash, leak or read past what it was given.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dra-claim.h"

static void config(const json_t *params)
{
    struct dra_config c, copy;
    struct diag d;
    diag_init(&d);
    if (dra_config_decode(params, &d, &c) < 0)
        return;
    if (dra_config_copy(&c, &copy) == 0)
        dra_config_release(&copy);
    dra_config_release(&c);
}

static void claim(json_t *obj)
{
    const char *uid = json_string_value(json_object_get(json_object_get(obj, "metadata"), "uid"));
    const json_t *configs = json_object_get(
        json_object_get(json_object_get(json_object_get(obj, "status"), "allocation"), "devices"),
        "config");
    struct dra_claim *c = NULL;
    struct diag d;
    size_t i;
    json_t *entry;
    diag_init(&d);
    if (dra_claim_decode(obj, uid ? uid : "", "gpu.nvidia.com", "node-a", &d, &c) == 0) {
        for (size_t k = 0; k < c->n_devices; k++) {
            enum dra_device_type t;
            if (dra_device_type(c->devices[k].device, &t) < 0 ||
                strlen(c->devices[k].base_request) > strlen(c->devices[k].request))
                __builtin_trap();
        }
        dra_claim_free(c);
    }
    json_array_foreach((json_t *)configs, i, entry)
    {
        config(json_object_get(json_object_get(entry, "opaque"), "parameters"));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t err;
    json_t *obj =
        json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &err);
    if (!obj)
        return 0;
    claim(obj);
    config(obj);
    json_decref(obj);
    return 0;
}
