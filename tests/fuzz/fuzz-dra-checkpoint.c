/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the DRA driver's checkpoint loader: any bytes must be refused with a
 * diagnostic or give a checkpoint, never a crash, a leak or unbounded memory. Nearly every mutated
 * input dies at the checksum, so each JSON object is tried a second time with its checksum made
 * right, which lets the fuzzer reach the field checks behind it, under the file's own boot ID
 * (entries kept) and another one (entries dropped). Whatever loads must serialize and load back to
 * the same claims: a checkpoint the driver can read is one it can write.
 */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dra-checkpoint.h"

#define OTHER_BOOT "fuzz-other-boot"

static void round_trip(const struct dra_checkpoint *cp)
{
    _cleanup_(dra_checkpoint_freep) struct dra_checkpoint *back = NULL;
    _cleanup_free_ char *text = NULL;
    size_t len;
    struct diag d;

    if (dra_checkpoint_serialize(cp, &text, &len) < 0)
        abort();
    if (dra_checkpoint_parse(text, len, "fuzz", cp->boot_id, &d, &back) < 0)
        abort();
    if (!json_equal(back->claims, cp->claims))
        abort();
}

static void try_parse(const char *data, size_t len, const char *boot_id)
{
    _cleanup_(dra_checkpoint_freep) struct dra_checkpoint *cp = NULL;
    struct diag d;

    diag_init(&d);
    if (dra_checkpoint_parse(data, len, "fuzz", boot_id, &d, &cp) < 0) {
        /* A refusal always says why. */
        if (!d.msg[0])
            abort();
        return;
    }
    round_trip(cp);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    /* The reboot line would flood the fuzzer's output. */
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

    if (fd >= 0)
        log_set_fd(fd);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    _cleanup_json_ json_t *doc = NULL;
    _cleanup_free_ char *text = NULL;
    const char *boot_id;
    uint32_t sum;

    try_parse((const char *)data, size, OTHER_BOOT);

    doc = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(doc) || dra_checkpoint_checksum(doc, &sum) < 0)
        return 0;
    if (json_object_set_new(doc, "checksum", json_integer(sum)) < 0)
        return 0;
    text = json_dumps(doc, JSON_COMPACT);
    if (!text)
        return 0;
    boot_id = json_string_value(json_object_get(doc, "nodeBootID"));
    try_parse(text, strlen(text), boot_id ? boot_id : OTHER_BOOT);
    try_parse(text, strlen(text), OTHER_BOOT);
    return 0;
}
