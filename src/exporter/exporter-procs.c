/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The processes of a shared GPU and their pods (exporter-procs.h). The cgroup parsing follows
 * dcgm-exporter's pidmapper.go: the regular expression pod([a-f0-9_-]+), first match only, is
 * scanned here by hand (no regex library for one fixed pattern), and the file is read as
 * containerd's ParseCgroupFileUnified reads it, a malformed line failing the whole file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exporter-procs.h"

#define UID_MIN_CHARS 32 /* extractPodUID's length check */
#define MIB ((uint64_t)1 << 20)

/* ---- cgroup paths ---- */

static bool uid_char(char c)
{
    return (c >= 'a' && c <= 'f') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

bool exporter_cgroup_path_pod_uid(const char *path, size_t len, char ret[EXPORTER_POD_UID_MAX])
{
    for (size_t i = 0; i + 3 < len; i++) {
        if (memcmp(path + i, "pod", 3) != 0 || !uid_char(path[i + 3]))
            continue;
        /* The leftmost match, greedy: decided here, whatever its length. */
        size_t start = i + 3, n = 0;
        while (start + n < len && uid_char(path[start + n]))
            n++;
        if (n < UID_MIN_CHARS || n >= EXPORTER_POD_UID_MAX)
            return false;
        for (size_t k = 0; k < n; k++)
            ret[k] = path[start + k] == '_' ? '-' : path[start + k];
        ret[n] = '\0';
        return true;
    }
    return false;
}

/* One line "id:controllers:path" split; false when it has fewer than two colons. */
static bool split_line(const char *line, size_t len, const char **ctl, size_t *ctl_len,
                       const char **path, size_t *path_len)
{
    const char *c1 = memchr(line, ':', len);
    const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
    if (!c2)
        return false;
    *ctl = c1 + 1;
    *ctl_len = (size_t)(c2 - c1 - 1);
    *path = c2 + 1;
    *path_len = len - (size_t)(c2 + 1 - line);
    return true;
}

int exporter_cgroup_pod_uid(const char *text, size_t len, char ret[EXPORTER_POD_UID_MAX])
{
    const char *unified = NULL;
    size_t unified_len = 0;
    char uid[EXPORTER_POD_UID_MAX];
    bool found = false;

    for (size_t at = 0; at < len;) {
        const char *line = text + at, *nl = memchr(line, '\n', len - at);
        size_t n = nl ? (size_t)(nl - line) : len - at, ctl_len, path_len;
        const char *ctl, *path;
        at += n + 1;
        if (n == 0)
            continue; /* the newline ending the file */
        if (!split_line(line, n, &ctl, &ctl_len, &path, &path_len))
            return -EINVAL;
        if (ctl_len == 0 && n >= 2 && line[0] == '0' && line[1] == ':')
            unified = path, unified_len = path_len; /* the v2 hierarchy: looked at last */
        else if (ctl_len > 0 && !found)
            found = exporter_cgroup_path_pod_uid(path, path_len, uid);
    }
    if (!found && unified)
        found = exporter_cgroup_path_pod_uid(unified, unified_len, uid);
    if (found)
        memcpy(ret, uid, strlen(uid) + 1);
    return found ? 1 : 0;
}

int exporter_proc_pod_uid(const char *proc_root, uint32_t pid, char ret[EXPORTER_POD_UID_MAX])
{
    _cleanup_free_ char *text = NULL;
    char path[4096];
    size_t len = 0;
    const char *root = proc_root && strcmp(proc_root, "/") != 0 ? proc_root : "";
    int r = snprintf(path, sizeof(path), "%s/proc/%" PRIu32 "/cgroup", root, pid);
    if (r < 0 || (size_t)r >= sizeof(path))
        return -ENAMETOOLONG;
    r = file_read_all(path, EXPORTER_CGROUP_FILE_MAX, &text, &len);
    if (r < 0)
        return r;
    return exporter_cgroup_pod_uid(text, len, ret);
}

/* ---- the processes of a device ---- */

void exporter_procs_release(struct exporter_procs *p)
{
    free(p->v);
    *p = (struct exporter_procs){0};
}

/* The entry of pid, added (with its pod from proc_root) when new; NULL on -ENOMEM. */
static struct exporter_proc *entry(struct exporter_procs *p, size_t *alloc, uint32_t pid,
                                   const char *proc_root)
{
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].pid == pid)
            return &p->v[i];
    if (p->n == *alloc) {
        size_t na = *alloc ? *alloc * 2 : 16;
        struct exporter_proc *v = realloc(p->v, na * sizeof(*v));
        if (!v)
            return NULL;
        p->v = v;
        *alloc = na;
    }
    struct exporter_proc *e = &p->v[p->n++];
    *e = (struct exporter_proc){.pid = pid};
    int r = exporter_proc_pod_uid(proc_root, pid, e->uid);
    if (r < 0 && r != -ENOENT) /* gone is ordinary: it ended since NVML listed it */
        log_debug(3, "cannot read the cgroup of a process", "pid", LOG_INT(pid), "error",
                  strerror(-r));
    if (r <= 0)
        e->uid[0] = '\0';
    return e;
}

/* The memory of the processes of one GPU or MIG device, added to p. */
static int add_memory(struct gpu_telemetry *t, size_t gpu, int mig, const char *proc_root,
                      struct exporter_procs *p, size_t *alloc)
{
    _cleanup_free_ struct gpu_process *list = NULL;
    size_t n = 0;
    int r = gpu_processes_read(t, gpu, mig, &list, &n);
    if (r < 0)
        return r == -ENOMEM ? r : 1;
    for (size_t i = 0; i < n; i++) {
        if (list[i].memory_bytes == GPU_PROCESS_MEMORY_UNKNOWN)
            continue;
        struct exporter_proc *e = entry(p, alloc, list[i].pid, proc_root);
        if (!e)
            return -ENOMEM;
        e->have_memory = true;
        e->memory_mib += list[i].memory_bytes / MIB;
    }
    return 0;
}

static int add_util(struct gpu_telemetry *t, size_t gpu, const char *proc_root,
                    struct exporter_procs *p, size_t *alloc)
{
    _cleanup_free_ struct gpu_process_util *list = NULL;
    size_t n = 0;
    int r = gpu_process_utilization_read(t, gpu, -1, 0, &list, &n);
    if (r < 0)
        return r == -ENOMEM ? r : 1;
    for (size_t i = 0; i < n; i++) {
        struct exporter_proc *e = entry(p, alloc, list[i].pid, proc_root);
        if (!e)
            return -ENOMEM;
        e->have_util = true;
        e->sm_util = list[i].sm_util;
    }
    return 0;
}

int exporter_procs_read(struct gpu_telemetry *t, const struct gpu_inventory *inv, size_t gpu,
                        int mig, const char *proc_root, bool memory, bool util,
                        struct exporter_procs *ret)
{
    struct exporter_procs p = {0};
    const struct gpu_device *g = &inv->devices[gpu];
    size_t alloc = 0;
    int r = 0;

    if (memory) {
        bool failed = false;
        for (size_t m = 0; mig >= 0 && m < g->n_migs && r >= 0; m++)
            if (g->migs[m].gi_id == g->migs[mig].gi_id) {
                r = add_memory(t, gpu, (int)m, proc_root, &p, &alloc);
                failed |= r > 0;
            }
        if (mig < 0) {
            r = add_memory(t, gpu, -1, proc_root, &p, &alloc);
            failed = r > 0;
        }
        p.memory_ok = r >= 0 && !failed;
    }
    if (r >= 0 && util && mig < 0) {
        r = add_util(t, gpu, proc_root, &p, &alloc);
        p.util_ok = r == 0;
    }
    if (r < 0) {
        exporter_procs_release(&p);
        return r;
    }
    *ret = p;
    return 0;
}

bool exporter_procs_pod_value(const struct exporter_procs *p, enum gpu_metric m, const char *uid,
                              double *ret)
{
    uint64_t sum = 0;
    bool memory = m == GPU_METRIC_FB_USED;
    if (!(memory ? p->memory_ok : m == GPU_METRIC_GPU_UTIL && p->util_ok) || !uid || !*uid)
        return false;
    for (size_t i = 0; i < p->n; i++) {
        const struct exporter_proc *e = &p->v[i];
        if (strcmp(e->uid, uid) != 0)
            continue;
        if (memory && e->have_memory)
            sum += e->memory_mib;
        else if (!memory && e->have_util)
            sum += e->sm_util;
    }
    *ret = (double)sum;
    return true;
}
