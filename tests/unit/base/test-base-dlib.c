/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of optional libraries loaded at first use: a library that is there (jansson, which every
 * build links anyway), one that is missing and one that lacks a symbol (clear errors naming the
 * package, nothing held), reference counting with unloading, and pinning. libfyaml is loaded for a
 * parse and unmapped after it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base-dlib.h"
#include "base-doc.h"

static struct {
    typeof(json_integer) *integer;
} js;

static void *missing_ptr;

static const struct dlib_sym js_syms[] = {DLIB_SYM(js.integer, json_integer)};
static const struct dlib_sym bad_syms[] = {DLIB_SYM(js.integer, json_integer),
                                           {"json_no_such_function", &missing_ptr}};
static const struct dlib_sym none_syms[] = {{"anything", &missing_ptr}};

static void test_load_and_unload(void **state)
{
    struct dlib lib = DLIB_INIT("libjansson.so.4", "libjansson4", js_syms, true);
    struct diag d;
    diag_init(&d);
    assert_false(dlib_loaded(&lib));
    assert_int_equal(dlib_acquire(&lib, &d), 0);
    assert_int_equal(dlib_acquire(&lib, &d), 0);
    assert_non_null(js.integer);
    json_t *v = js.integer(42);
    assert_int_equal(json_integer_value(v), 42);
    json_decref(v);
    dlib_release(&lib);
    assert_true(dlib_loaded(&lib));
    dlib_release(&lib);
    assert_false(dlib_loaded(&lib));
    assert_null(js.integer);
}

static void test_pin(void **state)
{
    struct dlib lib = DLIB_INIT("libjansson.so.4", "libjansson4", js_syms, true);
    struct diag d;
    diag_init(&d);
    assert_int_equal(dlib_pin(&lib, &d), 0);
    assert_int_equal(dlib_pin(&lib, &d), 0);
    assert_int_equal(lib.refs, 1);
    dlib_release(&lib); /* a stray release cannot drop a pinned library below its pin */
    assert_true(dlib_loaded(&lib));
    assert_int_equal(lib.refs, 1);
}

static void test_missing_library(void **state)
{
    struct dlib lib = DLIB_INIT("libgpuplane-absent.so.7", "gpuplane-absent", none_syms, false);
    struct diag d;
    diag_init(&d);
    assert_int_equal(dlib_acquire(&lib, &d), -ENOENT);
    assert_non_null(strstr(d.msg, "libgpuplane-absent.so.7 cannot be loaded (install the "
                                  "gpuplane-absent package)"));
    assert_false(dlib_loaded(&lib));
}

static void test_missing_symbol(void **state)
{
    struct dlib lib = DLIB_INIT("libjansson.so.4", "libjansson4", bad_syms, false);
    struct diag d;
    diag_init(&d);
    assert_int_equal(dlib_acquire(&lib, &d), -ENOENT);
    assert_non_null(strstr(d.msg, "has no symbol json_no_such_function"));
    assert_false(dlib_loaded(&lib));
    assert_null(js.integer); /* nothing half-resolved is left behind */
}

static void test_yaml_library_only_while_parsing(void **state)
{
    struct doc *doc = NULL;
    struct diag d;
    diag_init(&d);
    assert_int_equal(doc_load_string("t.yaml", "a: [1, 2]\n", 10, &d, &doc), 0);
    assert_int_equal(json_array_size(json_object_get(doc_root(doc, 0), "a")), 2);
    doc_free(doc);
    /* libfyaml is not linked: once the parse is over it is gone from the process. */
    assert_null(dlopen("libfyaml.so.0", RTLD_NOW | RTLD_NOLOAD));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_and_unload),
        cmocka_unit_test(test_pin),
        cmocka_unit_test(test_missing_library),
        cmocka_unit_test(test_missing_symbol),
        cmocka_unit_test(test_yaml_library_only_while_parsing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
