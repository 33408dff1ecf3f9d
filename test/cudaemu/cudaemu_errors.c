/* The CPU execution harness for CUDA: findings, the last-error state, and the names and
 * descriptions of the error codes the harness can return.
 *
 * Last error, as CUDA has it: every failing runtime call records its error;
 * cudaGetLastError returns the latest and resets it, cudaPeekAtLastError returns it
 * without resetting. Errors that corrupt a CUDA context (an illegal address, a failed
 * launch, a device-side assert, ...) are sticky: once one happened, both calls keep
 * returning it and every runtime call fails with it, until the process ends. */
#include "cudaemu_host.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void cudaemu_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("cudaemu: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    const char *op = cudaemu_current_work();
    if (op)
        fprintf(stderr, "  while executing %s\n", op);
    fflush(stderr);
    abort();
}

/* Process-wide, as in CUDA (per thread there; the harness has one host thread). */
static cudaError_t g_last = cudaSuccess, g_sticky = cudaSuccess;

static int is_sticky(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchTimeout:
        return 1;
    default:
        return 0;
    }
}

cudaError_t cudaemu_error(cudaError_t e)
{
    if (e != cudaSuccess) {
        g_last = e;
        if (is_sticky(e) && g_sticky == cudaSuccess)
            g_sticky = e;
    }
    return e;
}

void cudaemu_set_last_error(cudaError_t e) { (void)cudaemu_error(e); }

cudaError_t cudaemu_sticky_error(void) { return g_sticky; }

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = g_sticky != cudaSuccess ? g_sticky : g_last;
    g_last = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return g_sticky != cudaSuccess ? g_sticky : g_last; }

/* ---------------------------------------------------------------- names */

typedef struct error_text {
    cudaError_t code;
    const char *name, *text;
} error_text;

#define E(code, text) { code, #code, text }
static const error_text g_errors[] = {
    E(cudaSuccess, "no error"),
    E(cudaErrorInvalidValue, "invalid argument"),
    E(cudaErrorMemoryAllocation, "out of memory"),
    E(cudaErrorInitializationError, "initialization error"),
    E(cudaErrorInvalidConfiguration, "invalid configuration argument"),
    E(cudaErrorInvalidDevicePointer, "invalid device pointer"),
    E(cudaErrorInvalidMemcpyDirection, "invalid copy direction for memcpy"),
    E(cudaErrorInvalidDeviceFunction, "invalid device function"),
    E(cudaErrorNoDevice, "no CUDA-capable device is detected"),
    E(cudaErrorInvalidDevice, "invalid device ordinal"),
    E(cudaErrorInvalidResourceHandle, "invalid resource handle"),
    E(cudaErrorNotReady, "device not ready"),
    E(cudaErrorIllegalAddress, "an illegal memory access was encountered"),
    E(cudaErrorLaunchOutOfResources, "too many resources requested for launch"),
    E(cudaErrorLaunchTimeout, "the launch timed out and was terminated"),
    E(cudaErrorAssert, "device-side assert triggered"),
    E(cudaErrorHardwareStackError, "hardware stack error"),
    E(cudaErrorIllegalInstruction, "an illegal instruction was encountered"),
    E(cudaErrorMisalignedAddress, "misaligned address"),
    E(cudaErrorInvalidAddressSpace, "operation not supported on global/shared address space"),
    E(cudaErrorInvalidPc, "invalid program counter"),
    E(cudaErrorLaunchFailure, "unspecified launch failure"),
    E(cudaErrorCooperativeLaunchTooLarge, "too many blocks in cooperative launch"),
    E(cudaErrorNotSupported, "operation not supported"),
    E(cudaErrorUnknown, "unknown error"),
};
#undef E

static const error_text *find_error(cudaError_t e)
{
    for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
        if (g_errors[i].code == e)
            return &g_errors[i];
    return NULL;
}

const char *cudaGetErrorName(cudaError_t error)
{
    const error_text *t = find_error(error);
    return t ? t->name : "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t error)
{
    const error_text *t = find_error(error);
    return t ? t->text : "unrecognized error code";
}
