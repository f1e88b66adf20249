/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the CDI spec loader (cdi_spec_load_string), which reads what any process
 * with write access to /etc/cdi or /var/run/cdi put there: any bytes must give a spec that
 * validates and formats, or a diagnostic; never a crash or a leak.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "cdi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct diag d;
    _cleanup_(cdi_spec_freep) struct cdi_spec *spec = NULL;
    if (cdi_spec_load_string("fuzz.yaml", (const char *)data, size, &d, &spec) < 0)
        return 0;
    /* What loads has been validated, so it must serialise. */
    char *text = NULL;
    size_t len = 0;
    if (cdi_spec_format(spec, CDI_FORMAT_JSON, &d, &text, &len) < 0)
        abort();
    free(text);
    return 0;
}
