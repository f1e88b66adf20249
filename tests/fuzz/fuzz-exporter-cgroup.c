/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the pod UID in a process' cgroups (exporter-procs.h): the input is read both
 * as a whole /proc/<pid>/cgroup file and as one path. A malformed file is refused, never a crash; a
 * UID found is at least 32 characters of [a-f0-9-] that the input spells after "pod" (with '_' for
 * '-' where systemd writes it so).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "exporter-procs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_uid(const char *text, size_t size, const char *uid)
{
    size_t n = strlen(uid);
    if (n < 32 || n >= EXPORTER_POD_UID_MAX)
        __builtin_trap();
    for (size_t i = 0; i < n; i++)
        if (!((uid[i] >= 'a' && uid[i] <= 'f') || (uid[i] >= '0' && uid[i] <= '9') ||
              uid[i] == '-'))
            __builtin_trap();
    /* It is in the input right after a "pod", '-' there possibly written '_'. */
    for (size_t at = 0; at + 3 + n <= size; at++) {
        if (memcmp(text + at, "pod", 3) != 0)
            continue;
        size_t k = 0;
        while (k < n && (text[at + 3 + k] == uid[k] || (uid[k] == '-' && text[at + 3 + k] == '_')))
            k++;
        if (k == n)
            return;
    }
    __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    char uid[EXPORTER_POD_UID_MAX];
    int r = exporter_cgroup_pod_uid(text, size, uid);
    if (r != 0 && r != 1 && r != -EINVAL)
        __builtin_trap();
    if (r == 1)
        check_uid(text, size, uid);
    if (exporter_cgroup_path_pod_uid(text, size, uid))
        check_uid(text, size, uid);
    return 0;
}
