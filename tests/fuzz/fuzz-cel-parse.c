/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the CEL front end: any bytes must give either a tree or a positioned
 * "line:col: message" diagnostic, never a crash, a leak, unbounded recursion or memory. Trees that
 * parse are walked by the dump (every node, every payload) and by the checker twice: in the DRA
 * environment with a few declared variables (overload resolution over every library), and with no
 * environment at all (every name undeclared).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cel-check.h"
#include "cel-parse-internal.h"
#include "cel.h"

/* Built once and kept: libFuzzer runs every input in one process. */
static struct cel_env *fuzz_env(void)
{
    static struct cel_env *env;
    if (!env) {
        if (cel_env_new_dra(&env) < 0 || cel_env_declare(env, "x", "dyn") < 0 ||
            cel_env_declare(env, "l", "list(int)") < 0 ||
            cel_env_declare(env, "m", "map(string, dyn)") < 0)
            abort();
    }
    return env;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    _cleanup_(cel_ast_freep) struct cel_ast *ast = NULL;
    static char buf[1 << 16];
    char type[128];
    struct diag d;

    diag_init(&d);
    if (cel_parse((const char *)data, size, &ast, &d) < 0) {
        /* every failure is positioned */
        if (d.line < 1 || d.col < 1 || !strchr(d.msg, ':'))
            abort();
        return 0;
    }
    if (ast->max_depth > CEL_AST_MAX_DEPTH || ast->nnodes == 0)
        abort();
    (void)cel_ast_dump(ast->root, buf, sizeof(buf));
    (void)cel_check(ast, fuzz_env(), NULL, type, sizeof(type), &d);
    (void)cel_check(ast, NULL, NULL, type, sizeof(type), &d);
    return 0;
}
