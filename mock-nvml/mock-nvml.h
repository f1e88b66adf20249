/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one entry point of the mock NVML library beyond NVML itself. Tests that dlopen the mock
 * resolve it with dlsym to see why a node profile was rejected; the real driver has no such symbol.
 */
#pragma once

/* The "file:line:col: message" text of the last failed profile load, or NULL when the last init
 * loaded its profile (or none was tried). Static storage, valid until the next nvmlInit_v2. */
const char *mock_nvml_profile_error(void);
