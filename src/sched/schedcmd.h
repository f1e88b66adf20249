/* SPDX-License-Identifier: Apache-2.0 */
/* `gpuplane schedule`: the DRA scheduling simulator (sched.h) from the command line. */
#pragma once

/* argv[0] is "schedule". Returns the exit code: 0 every pod scheduled, 1 some pod unschedulable,
 * 2 an error (bad usage, invalid input). */
int schedcmd_main(int argc, char **argv);
