/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `--mock PROFILE`: every subcommand can run against mock-nvml's libnvidia-ml.so.1 and a node
 * profile instead of the driver. This file finds the profile (a path, or a bundled name looked up
 * beside the binary, in the install tree and in the source tree), checks its YAML syntax up front
 * so a typo is reported as file:line:col before NVML is even loaded, points the mock at it through
 * MOCK_NVML_PROFILE and finds the mock library itself.
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu-internal.h"

#ifndef GP_SOURCE_DIR
#define GP_SOURCE_DIR ""
#endif

#define MOCK_LIB_NAME "libnvidia-ml.so.1"

/* The directory of the running binary, or NULL when /proc is not there to say. */
static char *exe_dir(void)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    return strdup(dirname(buf));
}

static bool is_bundled_name(const char *s)
{
    for (const char *p = s; *p; p++)
        if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') || ('0' <= *p && *p <= '9') ||
              *p == '-' || *p == '_' || *p == '.'))
            return false;
    return s[0] && s[0] != '.';
}

/* path made absolute without resolving symlinks, so messages name the file as the user did. */
static int absolute(const char *path, char **ret)
{
    char cwd[PATH_MAX];
    char *p = NULL;

    if (access(path, F_OK) < 0)
        return negative_errno();
    if (path[0] == '/') {
        p = strdup(path);
    } else {
        if (!getcwd(cwd, sizeof(cwd)))
            return negative_errno();
        if (asprintf(&p, "%s/%s", cwd, path) < 0)
            p = NULL;
    }
    if (!p)
        return -ENOMEM;
    *ret = p;
    return 0;
}

/* <dir><sub>/<name>.yaml if it is readable. */
static int try_dir(const char *dir, const char *sub, const char *name, char **ret)
{
    char path[PATH_MAX];
    if (!dir || !dir[0])
        return -ENOENT;
    int n = snprintf(path, sizeof(path), "%s%s/%s.yaml", dir, sub, name);
    if (n < 0 || (size_t)n >= sizeof(path) || access(path, R_OK) < 0)
        return -ENOENT;
    return absolute(path, ret);
}

static int resolve_profile(const char *profile, const char *exe, struct diag *d, char **ret)
{
    if (!profile || !profile[0])
        return diag_fail(d, -EINVAL, "--mock needs a profile: a path or a bundled name");
    /* Anything that names an existing file, or looks like a path, is one. */
    if (access(profile, F_OK) == 0 || !is_bundled_name(profile)) {
        int r = absolute(profile, ret);
        if (r < 0)
            return diag_fail(d, r, "mock profile %s: %s", profile, strerror(-r));
        return 0;
    }
    if (try_dir(getenv("GPUPLANE_NODES_DIR"), "", profile, ret) == 0 ||
        try_dir(exe, "/../examples/nodes", profile, ret) == 0 ||
        try_dir(exe, "/../share/gpuplane/nodes", profile, ret) == 0 ||
        try_dir(GP_SOURCE_DIR, "/examples/nodes", profile, ret) == 0)
        return 0;
    return diag_fail(d, -ENOENT,
                     "unknown mock profile \"%s\": no such file, and no %s.yaml among the bundled "
                     "node profiles ($GPUPLANE_NODES_DIR, <gpuplane dir>/../examples/nodes, "
                     "<gpuplane dir>/../share/gpuplane/nodes)",
                     profile, profile);
}

static int try_lib(const char *dir, const char *sub, char **ret)
{
    char path[PATH_MAX];
    if (!dir)
        return -ENOENT;
    int n = snprintf(path, sizeof(path), "%s%s/" MOCK_LIB_NAME, dir, sub);
    if (n < 0 || (size_t)n >= sizeof(path) || access(path, R_OK) < 0)
        return -ENOENT;
    return absolute(path, ret);
}

static int find_mock_lib(const char *exe, struct diag *d, char **ret)
{
    const char *env = getenv("GPUPLANE_MOCK_LIB");
    if (env && env[0]) {
        int r = absolute(env, ret);
        if (r < 0)
            return diag_fail(d, r, "GPUPLANE_MOCK_LIB=%s: %s", env, strerror(-r));
        return 0;
    }
    if (try_lib(exe, "/mock-nvml", ret) == 0 || try_lib(exe, "/../lib/gpuplane", ret) == 0)
        return 0;
    return diag_fail(
        d, -ENOENT,
        "mock NVML library not found: looked for <gpuplane dir>/mock-nvml/" MOCK_LIB_NAME
        " and <gpuplane dir>/../lib/gpuplane/" MOCK_LIB_NAME
        " (gpuplane dir: %s); set GPUPLANE_MOCK_LIB to its path",
        exe ? exe : "unknown");
}

int gpu_mock_select(const char *profile, struct diag *d, char **ret_lib_path)
{
    _cleanup_free_ char *exe = exe_dir();
    _cleanup_free_ char *path = NULL;
    _cleanup_free_ char *lib = NULL;
    _cleanup_(doc_freep) struct doc *doc = NULL;
    int r;

    r = resolve_profile(profile, exe, d, &path);
    if (r < 0)
        return r;
    /* The mock would find a syntax error too, but only once NVML is loaded, and its message would
     * then travel through nvmlInit; saying it here is simpler and earlier. */
    r = doc_load_file(path, d, &doc);
    if (r < 0)
        return r;
    r = find_mock_lib(exe, d, &lib);
    if (r < 0)
        return r;
    if (setenv("MOCK_NVML_PROFILE", path, 1) < 0)
        return diag_fail(d, negative_errno(), "cannot set MOCK_NVML_PROFILE: %s", strerror(errno));
    log_debug(2, "using the mock NVML library", "library", lib, "profile", path);
    *ret_lib_path = TAKE_PTR(lib);
    return 0;
}
