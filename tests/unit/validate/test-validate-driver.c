/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of finding the driver: libnvidia-ml.so.1 under a root, with the root's absolute links
 * resolved inside the root (as the host or the driver container sees them) and never escaping it,
 * empty files and directories passed over; which root wins (the host's, then the driver
 * container's; an explicit library); and driver-ready's body for the host driver and the driver
 * container, with and without device nodes in the container's root (NVIDIA's rule).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-tmpdir.h"
#include "validate-internal.h"

struct fixture {
    char *dir;
    char host[512];
    char ctr[512];
    struct validate_options o;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    char *argv[] = {(char *)"validate", (char *)"driver", NULL};
    struct diag d;
    if (!f)
        return -1;
    f->dir = strdup("/tmp/test_validate_driver_XXXXXX");
    if (!f->dir || !mkdtemp(f->dir))
        return -1;
    snprintf(f->host, sizeof(f->host), "%s/host", f->dir);
    snprintf(f->ctr, sizeof(f->ctr), "%s/driver", f->dir);
    if (mkdir(f->host, 0755) < 0 || mkdir(f->ctr, 0755) < 0)
        return -1;
    unsetenv("GPUPLANE_NVML_LIB");
    validate_options_init(&f->o);
    if (validate_options_parse(2, argv, &f->o, &d) < 0)
        return -1;
    free(f->o.host_ctr);
    free(f->o.driver_ctr);
    f->o.host_ctr = strdup(f->host);
    f->o.driver_ctr = strdup(f->ctr);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    int r = test_tmpdir_remove(f->dir);
    validate_options_release(&f->o);
    free(f->dir);
    free(f);
    return r == 0 ? 0 : -1;
}

static void mkdirs(const char *root, const char *rel)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    assert_int_equal(file_mkdir_p(path, 0755), 0);
}

static void put(const char *root, const char *rel, const char *text)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void link_at(const char *root, const char *rel, const char *target)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    assert_int_equal(symlink(target, path), 0);
}

static void test_find(void **state)
{
    struct fixture *f = *state;
    char got[4096], want[1024];
    assert_int_equal(validate_find_nvml(f->host, got, sizeof(got)), -ENOENT);
    assert_int_equal(validate_find_nvml("/nonexistent-root", got, sizeof(got)), -ENOENT);
    /* An empty file in the first directory is passed over. */
    mkdirs(f->host, "usr/lib64");
    put(f->host, "usr/lib64/libnvidia-ml.so.1", "");
    /* An absolute link, as the distribution makes it: resolved inside the root. */
    mkdirs(f->host, "usr/lib/x86_64-linux-gnu");
    put(f->host, "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15", "ELF");
    link_at(f->host, "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
            "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15");
    assert_int_equal(validate_find_nvml(f->host, got, sizeof(got)), 0);
    snprintf(want, sizeof(want), "%s/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.550.54.15", f->host);
    assert_string_equal(got, want);
}

static void test_no_escape(void **state)
{
    struct fixture *f = *state;
    char got[4096], outside[1024];
    /* A library outside the root, reached by ../ and by an absolute path that exists here but
     * not inside the root: neither is this root's. */
    snprintf(outside, sizeof(outside), "%s/outside.so", f->dir);
    put(f->dir, "outside.so", "ELF");
    mkdirs(f->host, "lib64");
    link_at(f->host, "lib64/libnvidia-ml.so.1", "../../outside.so");
    mkdirs(f->host, "usr/lib");
    link_at(f->host, "usr/lib/libnvidia-ml.so.1", outside);
    assert_int_equal(validate_find_nvml(f->host, got, sizeof(got)), -ENOENT);
}

static void test_locate(void **state)
{
    struct fixture *f = *state;
    char lib[4096];
    bool host = false;
    struct diag d;
    diag_init(&d);
    assert_int_equal(validate_locate_driver(&f->o, &host, lib, sizeof(lib), &d),
                     VALIDATE_NOT_READY);
    assert_non_null(strstr(d.msg, "no NVIDIA driver found"));
    /* The driver container's root. */
    mkdirs(f->ctr, "usr/lib/aarch64-linux-gnu");
    put(f->ctr, "usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1", "ELF");
    assert_int_equal(validate_locate_driver(&f->o, &host, lib, sizeof(lib), &d), VALIDATE_READY);
    assert_false(host);
    /* The host's wins. */
    mkdirs(f->host, "lib/x86_64-linux-gnu");
    put(f->host, "lib/x86_64-linux-gnu/libnvidia-ml.so.1", "ELF");
    assert_int_equal(validate_locate_driver(&f->o, &host, lib, sizeof(lib), &d), VALIDATE_READY);
    assert_true(host);
    /* An explicit library: the driver container's when it lies under its root. */
    char explicit[1024];
    snprintf(explicit, sizeof(explicit), "%s/usr/lib/libnvidia-ml.so.1", f->ctr);
    f->o.common.nvml_lib = explicit;
    assert_int_equal(validate_locate_driver(&f->o, &host, lib, sizeof(lib), &d), VALIDATE_READY);
    assert_false(host);
    assert_string_equal(lib, explicit);
    f->o.common.nvml_lib = "/opt/lib/libnvidia-ml.so.1";
    assert_int_equal(validate_locate_driver(&f->o, &host, lib, sizeof(lib), &d), VALIDATE_READY);
    assert_true(host);
    f->o.common.nvml_lib = NULL;
}

static void test_body(void **state)
{
    struct fixture *f = *state;
    struct strbuf sb = STRBUF_INIT;
    free(f->o.driver_dir);
    f->o.driver_dir = strdup("/run/nvidia/driver");
    free(f->o.host_root);
    f->o.host_root = strdup("/");
    assert_int_equal(validate_driver_body(&f->o, true, &sb), 0);
    assert_string_equal(strbuf_str(&sb), "IS_HOST_DRIVER=true\n"
                                         "NVIDIA_DRIVER_ROOT=/\n"
                                         "DRIVER_ROOT_CTR_PATH=/host\n"
                                         "NVIDIA_DEV_ROOT=/\n"
                                         "DEV_ROOT_CTR_PATH=/host\n");
    strbuf_reset(&sb);
    /* The driver container without its own dev: the device nodes are the host's. */
    assert_int_equal(validate_driver_body(&f->o, false, &sb), 0);
    assert_string_equal(strbuf_str(&sb), "IS_HOST_DRIVER=false\n"
                                         "NVIDIA_DRIVER_ROOT=/run/nvidia/driver\n"
                                         "DRIVER_ROOT_CTR_PATH=/driver-root\n"
                                         "NVIDIA_DEV_ROOT=/\n"
                                         "DEV_ROOT_CTR_PATH=/host\n");
    strbuf_reset(&sb);
    mkdirs(f->ctr, "dev");
    assert_int_equal(validate_driver_body(&f->o, false, &sb), 0);
    assert_string_equal(strbuf_str(&sb), "IS_HOST_DRIVER=false\n"
                                         "NVIDIA_DRIVER_ROOT=/run/nvidia/driver\n"
                                         "DRIVER_ROOT_CTR_PATH=/driver-root\n"
                                         "NVIDIA_DEV_ROOT=/run/nvidia/driver\n"
                                         "DEV_ROOT_CTR_PATH=/driver-root\n");
    strbuf_release(&sb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_find, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_escape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_locate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_body, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
