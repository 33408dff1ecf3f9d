/* The CPU execution harness for CUDA: the emulated devices. Each is an A100 80GB SXM
 * (sm_80) or, with CUDAEMU_DEVICE=h100, an H100 80GB SXM (sm_90), with the figures the
 * real parts report; CUDAEMU_DEVICES of them (default 8, so that node-local rank binding
 * works for up to 8 ranks per node). All devices of a process share one memory and one
 * set of streams: a rank uses one device, and the harness does not model peer copies.
 * Also here: the per-kernel dynamic shared memory opt-in (cudaFuncSetAttribute). */
#include "cudaemu_host.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_DEVICES 8
#define DEVICE_MEMORY ((size_t)80 << 30)

typedef struct model {
    const char *name;
    int major, minor;
    int sms;
    size_t smem_optin;  /* per block, with the opt-in */
    size_t smem_per_sm;
    int l2_bytes;
    int bus_width_bits;
    int cluster_launch;
} model;

static const model g_models[2] = {
    { "NVIDIA A100-SXM4-80GB (cudaemu)", 8, 0, 108, 166912, 167936, 40 << 20, 5120, 0 },
    { "NVIDIA H100 80GB HBM3 (cudaemu)", 9, 0, 132, 232448, 233472, 50 << 20, 5120, 1 },
};

static int g_current_device; /* cudaSetDevice's choice: process-wide, as in CUDA */

int cudaemu_device_model(void)
{
    static int which = -1;
    if (which < 0) {
        const char *e = getenv("CUDAEMU_DEVICE");
        if (!e || !*e || strcmp(e, "a100") == 0)
            which = 0;
        else if (strcmp(e, "h100") == 0)
            which = 1;
        else
            cudaemu_fail("CUDAEMU_DEVICE=%s: expected a100 or h100", e);
    }
    return which;
}

static const model *current_model(void) { return &g_models[cudaemu_device_model()]; }

size_t cudaemu_smem_optin_max(void) { return current_model()->smem_optin; }

static int device_count(void)
{
    static int n = -1;
    if (n < 0) {
        const char *e = getenv("CUDAEMU_DEVICES");
        n = e && *e ? atoi(e) : DEFAULT_DEVICES;
        if (n < 0)
            n = 0;
    }
    return n;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    if (!count)
        return cudaemu_error(cudaErrorInvalidValue);
    *count = device_count();
    return *count > 0 ? cudaSuccess : cudaemu_error(cudaErrorNoDevice);
}

static int valid_device(int device) { return device >= 0 && device < device_count(); }

cudaError_t cudaSetDevice(int device)
{
    STICKY_GUARD();
    if (!valid_device(device))
        return cudaemu_error(cudaErrorInvalidDevice);
    g_current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device)
{
    if (!device)
        return cudaemu_error(cudaErrorInvalidValue);
    *device = g_current_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (!prop)
        return cudaemu_error(cudaErrorInvalidValue);
    if (!valid_device(device))
        return cudaemu_error(cudaErrorInvalidDevice);
    const model *m = current_model();
    memset(prop, 0, sizeof *prop);
    strncpy(prop->name, m->name, sizeof prop->name - 1);
    prop->totalGlobalMem = DEVICE_MEMORY;
    prop->sharedMemPerBlock = CUDAEMU_SMEM_DEFAULT_MAX;
    prop->sharedMemPerBlockOptin = m->smem_optin;
    prop->sharedMemPerMultiprocessor = m->smem_per_sm;
    prop->reservedSharedMemPerBlock = 1024;
    prop->regsPerBlock = 65536;
    prop->regsPerMultiprocessor = 65536;
    prop->warpSize = 32;
    prop->memPitch = 2147483647;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = 1024;
    prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 2147483647;
    prop->maxGridSize[1] = 65535;
    prop->maxGridSize[2] = 65535;
    prop->totalConstMem = 65536;
    prop->major = m->major;
    prop->minor = m->minor;
    prop->textureAlignment = 512;
    prop->texturePitchAlignment = 32;
    prop->multiProcessorCount = m->sms;
    prop->maxThreadsPerMultiProcessor = 2048;
    prop->maxBlocksPerMultiProcessor = 32;
    prop->l2CacheSize = m->l2_bytes;
    prop->memoryBusWidth = m->bus_width_bits;
    prop->canMapHostMemory = 1;
    prop->concurrentKernels = 1;
    prop->ECCEnabled = 1;
    prop->pciBusID = device;
    prop->asyncEngineCount = 3;
    prop->unifiedAddressing = 1;
    prop->streamPrioritiesSupported = 1;
    prop->globalL1CacheSupported = 1;
    prop->localL1CacheSupported = 1;
    prop->managedMemory = 1;
    prop->cooperativeLaunch = 1;
    prop->memoryPoolsSupported = 1;
    prop->clusterLaunch = m->cluster_launch;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    if (!value)
        return cudaemu_error(cudaErrorInvalidValue);
    struct cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, device);
    if (e != cudaSuccess)
        return e;
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxBlockDimX: *value = p.maxThreadsDim[0]; break;
    case cudaDevAttrMaxBlockDimY: *value = p.maxThreadsDim[1]; break;
    case cudaDevAttrMaxBlockDimZ: *value = p.maxThreadsDim[2]; break;
    case cudaDevAttrMaxGridDimX: *value = p.maxGridSize[0]; break;
    case cudaDevAttrMaxGridDimY: *value = p.maxGridSize[1]; break;
    case cudaDevAttrMaxGridDimZ: *value = p.maxGridSize[2]; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = (int)p.sharedMemPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = (int)p.sharedMemPerBlockOptin; break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
        *value = (int)p.sharedMemPerMultiprocessor;
        break;
    case cudaDevAttrReservedSharedMemoryPerBlock: *value = (int)p.reservedSharedMemPerBlock; break;
    case cudaDevAttrTotalConstantMemory: *value = (int)p.totalConstMem; break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMaxRegistersPerBlock: *value = p.regsPerBlock; break;
    case cudaDevAttrMaxRegistersPerMultiprocessor: *value = p.regsPerMultiprocessor; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = p.maxThreadsPerMultiProcessor; break;
    case cudaDevAttrMaxBlocksPerMultiprocessor: *value = p.maxBlocksPerMultiProcessor; break;
    case cudaDevAttrL2CacheSize: *value = p.l2CacheSize; break;
    case cudaDevAttrGlobalMemoryBusWidth: *value = p.memoryBusWidth; break;
    case cudaDevAttrMemoryPoolsSupported: *value = p.memoryPoolsSupported; break;
    case cudaDevAttrConcurrentKernels: *value = p.concurrentKernels; break;
    case cudaDevAttrUnifiedAddressing: *value = p.unifiedAddressing; break;
    case cudaDevAttrManagedMemory: *value = p.managedMemory; break;
    case cudaDevAttrCooperativeLaunch: *value = p.cooperativeLaunch; break;
    case cudaDevAttrAsyncEngineCount: *value = p.asyncEngineCount; break;
    case cudaDevAttrEccEnabled: *value = p.ECCEnabled; break;
    case cudaDevAttrClusterLaunch: *value = p.clusterLaunch; break;
    default:
        return cudaemu_error(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

/* ---------------------------------------------------------------- per-kernel opt-in */

/* Kernel -> its MaxDynamicSharedMemorySize; a handful of kernels, so a linear list. */
static struct func_smem {
    const void *func;
    size_t limit;
} *g_func_smem;
static size_t g_func_smem_n;

size_t cudaemu_func_smem_limit(const void *func)
{
    for (size_t i = 0; i < g_func_smem_n; i++)
        if (g_func_smem[i].func == func)
            return g_func_smem[i].limit;
    return CUDAEMU_SMEM_DEFAULT_MAX;
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    STICKY_GUARD();
    if (!func)
        return cudaemu_error(cudaErrorInvalidDeviceFunction);
    if (attr == cudaFuncAttributePreferredSharedMemoryCarveout)
        return value >= -1 && value <= 100 ? cudaSuccess : cudaemu_error(cudaErrorInvalidValue);
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
        return cudaemu_error(cudaErrorInvalidValue);
    if (value < 0 || (size_t)value > cudaemu_smem_optin_max())
        return cudaemu_error(cudaErrorInvalidValue);
    for (size_t i = 0; i < g_func_smem_n; i++)
        if (g_func_smem[i].func == func) {
            g_func_smem[i].limit = (size_t)value;
            return cudaSuccess;
        }
    struct func_smem *v = realloc(g_func_smem, (g_func_smem_n + 1) * sizeof *v);
    if (!v)
        return cudaemu_error(cudaErrorMemoryAllocation);
    g_func_smem = v;
    g_func_smem[g_func_smem_n++] = (struct func_smem){ func, (size_t)value };
    return cudaSuccess;
}

size_t cudaemu_device_memory_total(void) { return DEVICE_MEMORY; }
