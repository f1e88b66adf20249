/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The text the driver's nvmlErrorString gives each return code. The mock library answers with it,
 * and src/gpu falls back to it when a library lacks nvmlErrorString, so both speak the driver's
 * words.
 */
#pragma once

#include "gpu-nvml-abi.h"

static inline const char *nvml_error_text(int code)
{
    switch (code) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
        return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
        return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER:
        return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
        return "Timeout";
    case NVML_ERROR_IRQ_ISSUE:
        return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
        return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
        return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM:
        return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED:
        return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM:
        return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE:
        return "In use by another client";
    case NVML_ERROR_MEMORY:
        return "Insufficient Memory";
    case NVML_ERROR_NO_DATA:
        return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
        return "The requested vgpu operation is not available on target device, because ECC is "
               "enabled";
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
        return "Insufficient resources";
    case NVML_ERROR_FREQ_NOT_SUPPORTED:
        return "Frequency not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
        return "Argument version mismatch";
    case NVML_ERROR_DEPRECATED:
        return "Deprecated";
    case NVML_ERROR_NOT_READY:
        return "Not ready";
    case NVML_ERROR_GPU_NOT_FOUND:
        return "GPU not found";
    case NVML_ERROR_INVALID_STATE:
        return "Invalid state";
    case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED:
        return "Reset type not supported";
    default:
        return "Unknown Error";
    }
}
