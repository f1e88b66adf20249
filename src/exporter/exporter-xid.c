/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The err_msg label of DCGM_FI_DEV_XID_ERRORS: dcgm-exporter's text for each XID
 * (internal/pkg/collector/xid_errors.go, from NVIDIA's XID catalogue), kept as data in
 * src/exporter/xid-messages.csv and turned into exporter_xid_table at build time.
 */
#include "exporter-internal.h"

const char *exporter_xid_message(uint64_t xid)
{
    /* dcgm-exporter: an index inside its table gives the text, anything else "Unknown Error". */
    if (xid < exporter_xid_table_len && exporter_xid_table[xid])
        return exporter_xid_table[xid];
    return "Unknown Error";
}
