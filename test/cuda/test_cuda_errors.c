/* The CUDA backend's edges and failure paths, each with its message: freeing a pointer it
 * did not allocate, unsupported attention shapes and decode arguments, device memory
 * exhausted for an allocation (NULL, not fatal) and for scratch (fatal, one line),
 * zero-byte allocations and transfers, the allocation table growing past its first size,
 * and creation without a device or with a device index that does not exist.
 *
 * The fatal cases must abort with the expected message. Each runs in a process of its own:
 * this program again (`--case N`), exec'd by a forked child, which creates its own backend.
 * A child forked after the parent initialised the CUDA runtime cannot use CUDA on a real
 * GPU (only exec is safe there), so no case runs in the forked copy itself. On a GPU build
 * the test needs a device (exit 77 otherwise). The no-device case hides every device from
 * its process: CUDA_VISIBLE_DEVICES="" on a GPU, CUDAEMU_DEVICES=0 under the CPU execution
 * harness. */
#define _POSIX_C_SOURCE 200809L
#include "backend/backend.h"
#include "comm/comm.h"
#include "config.h"
#include "../common/expect_abort.h"
#include "cuda_test_backends.h"

#include <cuda_runtime.h>
#ifdef FT_CUDA_EMULATION
#include "cudaemu.h"
#endif
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures, checks;
static ft_backend *gpu;


static void check(int ok, const char *what)
{
    checks++;
    failures += !ok;
    printf("%s %s\n", ok ? "ok  " : "FAIL", what);
}

/* Runs fatal case `i` (an index into fatal_cases) in a fresh process: this program again. */
static const char *self_path;
static void exec_case(int i)
{
    char arg[16];
    snprintf(arg, sizeof arg, "%d", i);
    execl("/proc/self/exe", self_path, "--case", arg, (char *)NULL); /* argv[0] may lack a path */
    execl(self_path, self_path, "--case", arg, (char *)NULL);
    _exit(4);
}

static void free_foreign(void)
{
    static float host[4];
    gpu->ops->free(gpu, host);
}

static void free_twice(void)
{
    void *p = gpu->ops->alloc(gpu, 64);
    gpu->ops->free(gpu, p);
    gpu->ops->free(gpu, p);
}

static void attention_bad_head_dim(void)
{
    ft_attn_shape s = {1, 4, 2, 2, 300, 0};
    float *x = gpu->ops->alloc(gpu, 4 * 2 * 300 * 4);
    gpu->ops->attention_fwd(gpu, FT_DTYPE_F32, x, x, x, x, x, NULL, s);
}

static void attention_bad_groups(void)
{
    ft_attn_shape s = {1, 4, 3, 2, 16, 0};
    float *x = gpu->ops->alloc(gpu, 4 * 3 * 16 * 4);
    gpu->ops->attention_bwd(gpu, FT_DTYPE_F32, x, x, x, x, x, x, x, x, x, NULL, s);
}

static void decode_bad_past(void)
{
    float *x = gpu->ops->alloc(gpu, 1024);
    gpu->ops->attention_decode(gpu, FT_DTYPE_F32, x, x, x, x, -1, 1, 2, 2, 16, 0);
}

/* rmsnorm_bwd's scratch for 2^30 rows of 32768 is 1 TiB: more than any device has (an
 * H200 has 141 GB, so 128 GiB would not do). The scratch is taken before any launch. */
static void scratch_exhausted(void)
{
    float *x = gpu->ops->alloc(gpu, 1024);
    gpu->ops->rmsnorm_bwd(gpu, FT_DTYPE_F32, FT_DTYPE_F32, x, x, x, x, x, x, x, 1 << 30, 1 << 15);
}

/* A machine without a device: the case's process sees none (set before exec, read by the
 * runtime when it starts in the new process). */
static void create_without_device(void)
{
    ft_backend *be = NULL;
    ft_error err;
    ft_error_clear(&err);
    if (ft_backend_cuda_create(&be, 0, &err) == 0)
        _exit(3);
    fprintf(stderr, "%s\n", err.msg);
    abort();
}

static void device_out_of_range(void)
{
    ft_backend *be = NULL;
    ft_error err;
    ft_error_clear(&err);
    int count = 0;
    cudaGetDeviceCount(&count);
    if (ft_backend_cuda_create(&be, count, &err) == 0)
        _exit(3);
    fprintf(stderr, "%s\n", err.msg);
    abort();
}

/* The fatal cases; `backend`: the case needs the backend on device 0 created first. */
static const struct fatal_case {
    const char *what;
    void (*fn)(void);
    const char *expect;
    bool backend, hide_devices;
} fatal_cases[] = {
    {"free of a pointer the backend did not allocate", free_foreign,
     "not a live allocation of this backend", true, false},
    {"double free", free_twice, "not a live allocation of this backend", true, false},
    {"attention with head_dim 300", attention_bad_head_dim, "unsupported shape", true, false},
    {"attention with 3 heads over 2 kv heads", attention_bad_groups,
     "need n_heads a multiple of n_kv_heads", true, false},
    {"decode with a negative past", decode_bad_past, "unsupported past=-1", true, false},
    {"scratch larger than the device", scratch_exhausted, "out of device memory for", true, false},
    {"no device", create_without_device, "no usable CUDA device", false, true},
    {"device index past the last", device_out_of_range, "does not exist", false, false},
};
enum { N_FATAL = sizeof fatal_cases / sizeof fatal_cases[0] };

/* In the forked child, before exec: the no-device case's process must see no device. */
static void start_case(int i)
{
    if (fatal_cases[i].hide_devices) {
        setenv("CUDA_VISIBLE_DEVICES", "", 1);
        setenv("CUDAEMU_DEVICES", "0", 1);
    }
    exec_case(i);
}

/* `--case N` in its own process: set up, then the case, which must abort. */
static int run_case(const char *arg)
{
    expect_abort_prepare_child();
    int i = atoi(arg);
    if (i < 0 || i >= N_FATAL)
        return 2;
    ft_error err;
    ft_error_clear(&err);
    if (fatal_cases[i].backend && ft_backend_cuda_create(&gpu, 0, &err) != 0) {
        fprintf(stderr, "cuda backend: %s\n", err.msg);
        return 3;
    }
    fatal_cases[i].fn();
    return 3; /* did not abort */
}

int main(int argc, char **argv)
{
    self_path = argv[0];
    if (argc > 2 && strcmp(argv[1], "--case") == 0)
        return run_case(argv[2]);
    if (!cuda_test_have_device())
        return 77;
    ft_error err;
    ft_error_clear(&err);
    if (ft_backend_cuda_create(&gpu, 0, &err) != 0) {
        fprintf(stderr, "cuda backend: %s\n", err.msg);
        return 1;
    }

    /* allocation edges, in this process */
    /* 1 GiB more than the device's memory, whichever device it is */
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    void *huge = gpu->ops->alloc(gpu, total + ((size_t)1 << 30));
    check(huge == NULL && gpu->bytes_in_use == 0,
          "alloc beyond the device's memory returns NULL and counts nothing");
#ifdef FT_CUDA_EMULATION
    /* the pool gives back what it cached, then again after the retry failed: the fatal
     * cases below each create a context in a process of their own on this device */
    check(cudaemu_pool_trims() == 2, "a failed alloc trims the pool before its retry and after");
#endif
    void *z1 = gpu->ops->alloc(gpu, 0), *z2 = gpu->ops->alloc(gpu, 0);
    check(z1 && z2 && z1 != z2, "zero-byte allocations are distinct, freeable pointers");
    gpu->ops->upload(gpu, z1, &err, 0);
    gpu->ops->download(gpu, &err, z1, 0);
    gpu->ops->copy(gpu, z2, z1, 0);
    gpu->ops->zero(gpu, z1, 0);
    gpu->ops->free(gpu, z1);
    gpu->ops->free(gpu, z2);
    gpu->ops->free(gpu, NULL);
    enum { MANY = 1500 };
    void **many = malloc(MANY * sizeof *many);
    int all = 1;
    for (int i = 0; i < MANY; i++) {
        many[i] = gpu->ops->alloc(gpu, 100 + (size_t)i);
        all = all && many[i];
    }
    size_t want = 0;
    for (int i = 0; i < MANY; i++)
        want += 100 + (size_t)i;
    check(all && gpu->bytes_in_use == want, "1500 live allocations (the table grows) counted exactly");
    for (int i = 0; i < MANY; i += 2)
        gpu->ops->free(gpu, many[i]);
    for (int i = 1; i < MANY; i += 2)
        gpu->ops->free(gpu, many[i]);
    check(gpu->bytes_in_use == 0 && gpu->peak_bytes >= want, "all freed; the peak stays");
    free(many);

    /* every op with nothing to do returns at once: no launch, no scratch, no error */
    float *one = gpu->ops->alloc(gpu, 64);
    int32_t *ids = gpu->ops->alloc(gpu, 64);
    ft_adamw_params ap = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, 1, NULL, 1.0f, 0, false};
    ft_sgd_params sp = {1e-3f, 0.9f, 0.0f, 1.0f, false};
    gpu->ops->add(gpu, one, one, 0);
    gpu->ops->scale(gpu, one, 2.0f, 0);
    double ss = gpu->ops->sum_squares(gpu, one, 0);
    gpu->ops->rmsnorm_fwd(gpu, FT_DTYPE_F32, one, one, one, one, 0, 16, 1e-5f);
    gpu->ops->rmsnorm_bwd(gpu, FT_DTYPE_F32, FT_DTYPE_F32, one, one, one, one, one, one, one, 0, 16);
    gpu->ops->layernorm_fwd(gpu, FT_DTYPE_F32, one, one, one, one, one, one, 0, 16, 1e-5f);
    gpu->ops->layernorm_bwd(gpu, FT_DTYPE_F32, FT_DTYPE_F32, one, one, one, one, one, one, one, one,
                            one, 0, 16);
    gpu->ops->rope(gpu, FT_DTYPE_F32, one, one, one, ids, 0, 2, (ft_rope_shape){ 8, 8, false }, false);
    gpu->ops->gelu_fwd(gpu, FT_DTYPE_F32, FT_GELU_ERF, one, one, 0);
    gpu->ops->gelu_bwd(gpu, FT_DTYPE_F32, FT_GELU_TANH, one, one, one, 0);
    gpu->ops->swiglu_fwd(gpu, FT_DTYPE_F32, one, one, one, 0);
    gpu->ops->swiglu_bwd(gpu, FT_DTYPE_F32, one, one, one, one, one, 0, NULL);
    gpu->ops->embedding_fwd(gpu, FT_DTYPE_F32, one, one, ids, 0, 8);
    gpu->ops->embedding_bwd(gpu, FT_DTYPE_F32, FT_DTYPE_F32, one, one, ids, 0, 8);
    gpu->ops->cross_entropy(gpu, one, FT_DTYPE_F32, one, FT_DTYPE_F32, one, ids, one, 0, 8, 1.0f);
    gpu->ops->adamw_step(gpu, one, one, one, one, 0, &ap);
    gpu->ops->sgd_step(gpu, one, one, one, 0, &sp);
    gpu->ops->f32_to_bf16(gpu, (uint16_t *)one, one, 0);
    gpu->ops->bf16_to_f32(gpu, one, (uint16_t *)one, 0);
    gpu->ops->matmul(gpu, FT_GEMM_F32, one, one, one, 0, 4, 4, false, false, 1.0f, 0.0f);
    gpu->ops->attention_decode(gpu, FT_DTYPE_F32, one, one, one, one, 3, 0, 2, 2, 8, 0);
    gpu->ops->sync(gpu);
    check(ss == 0.0, "empty ops: nothing launched, sum of squares of nothing is 0");
    gpu->ops->free(gpu, one);
    gpu->ops->free(gpu, ids);

    for (int i = 0; i < N_FATAL; i++) {
        char said[4096];
        int ok = child_aborts_saying(start_case, i, fatal_cases[i].expect, said, sizeof said);
        if (!ok)
            printf("  child said: %s\n", said);
        check(ok, fatal_cases[i].what);
    }

    ft_comm *c = NULL;
    ft_error_clear(&err);
    check(ft_comm_nccl_create(&c, NULL, &err) != 0 && strstr(err.msg, "needs the CUDA backend"),
          "NCCL without the CUDA backend is refused with a message");

    ft_backend_destroy(gpu);
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
