/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tests of the optional functions: of/none/ofNonZeroValue (zero values of every kind), hasValue,
 * value on none failing, or/orValue choosing and not failing on an argument they do not need, and
 * the optMap/optFlatMap macros built on them.
 */
#include "cel-ext-test.h"

static void test_optional(void **state)
{
    static const struct eval_case cases[] = {
        {"optional.of(null).hasValue()", "true"},
        {"optional.none().hasValue()", "false"},
        {"optional.ofNonZeroValue(null).hasValue()", "false"},
        {"optional.ofNonZeroValue(0).hasValue()", "false"},
        {"optional.ofNonZeroValue(0u).hasValue()", "false"},
        {"optional.ofNonZeroValue(0.0).hasValue()", "false"},
        {"optional.ofNonZeroValue('').hasValue()", "false"},
        {"optional.ofNonZeroValue(b'').hasValue()", "false"},
        {"optional.ofNonZeroValue([]).hasValue()", "false"},
        {"optional.ofNonZeroValue({}).hasValue()", "false"},
        {"optional.ofNonZeroValue(false).hasValue()", "false"},
        {"optional.ofNonZeroValue(42).value()", "42"},
        {"optional.none().value()", EVAL_ERROR},
        {"optional.none().or(optional.none()).orValue(42)", "42"},
        {"optional.of(1).or(optional.of(2)).value()", "1"},
        {"optional.of(1).orValue(2)", "1"},
        {"optional.of(1).orValue([1][5])", "1"},
        {"optional.none().orValue([1][5])", EVAL_ERROR},
        {"optional.of(42).optMap(y, y + 1).value()", "43"},
        {"optional.none().optMap(y, y + 1).hasValue()", "false"},
        {"{'key': {'subkey': 'v'}}.?key.optFlatMap(k, k.?subkey).value()", "\"v\""},
        {"{'key': {}}.?key.optFlatMap(k, k.?subkey).hasValue()", "false"},
    };

    check_eval_cases(cases, ARRAY_SIZE(cases));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_optional),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
