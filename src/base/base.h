/* SPDX-License-Identifier: Apache-2.0 */
/* The base module: everything below the rest of gpuplane. Include this, or the one piece you
 * need. */
#pragma once

#include "base-diag.h"
#include "base-doc.h"
#include "base-file.h"
#include "base-log.h"
#include "base-macro.h"
#include "base-strbuf.h"
#include "base-vec.h"
#include "base-yaml.h"
