/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gpuplane operator`: the subcommand's entry. `render` prints what a ClusterPolicy renders to;
 * anything else is the reconciler (operator-daemon.c).
 */
#include <string.h>

#include "cli.h"
#include "operator.h"

int op_main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "render") == 0)
        return op_render_main(argc - 1, argv + 1);
#ifdef GP_OPERATOR_DAEMON
    return op_daemon_main(argc, argv);
#else
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs("Usage: gpuplane operator render -f FILE [-n NAMESPACE] [-o yaml|json]\n"
              "\n"
              "See 'gpuplane operator render --help'.\n",
              stdout);
        return CLI_EXIT_OK;
    }
    cli_usage_error("operator", "this build has only 'gpuplane operator render'");
    return CLI_EXIT_USAGE;
#endif
}
