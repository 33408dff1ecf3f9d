/* CPU backend: creation, the vtable, and memory.
 *
 * Memory is host memory. Every block carries a 64-byte header in front of the
 * pointer handed out, holding the requested size, so free() can subtract it from
 * bytes_in_use without a lookup table. The header is a full cache line so the
 * returned pointer keeps the 64-byte alignment (one AVX-512 vector, one line).
 * The accounting (bytes_in_use, peak_bytes) is not thread-safe: allocate from one
 * thread, as the rest of the program does.
 *
 * Blocks of CPU_MAP_BYTES and more are anonymous mappings: the kernel hands them out
 * zeroed, page by page at first touch, so allocating a model's gigabytes costs no
 * memset pass and start-up does not fault in what only the first step uses (a 384 M
 * model's 7 GiB of zeroing was 20-33 s of a 60-70 s start-up on the 2-core VM,
 * doc/benchmarks.md). No MADV_HUGEPAGE: on that VM (THP defrag "madvise") its faults
 * compacted memory and cost 3x the system time of 4 KiB ones. A page's first touch
 * should be a write: a read maps the kernel's shared zero page, and the write after it
 * faults again and flushes the other cores' TLBs (an interrupt each); the first
 * optimizer step therefore writes the moments without reading them
 * (ft_adamw_params.moments_zero). */
#include "backend/cpu/cpu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/rng_fill.h"

#define FT_CPU_ALIGN 64

typedef struct cpu_block_header {
    size_t bytes;
    uint64_t magic;
    unsigned char pad[FT_CPU_ALIGN - sizeof(size_t) - sizeof(uint64_t)];
} cpu_block_header;

_Static_assert(sizeof(cpu_block_header) == FT_CPU_ALIGN, "header must be one alignment unit");

#define CPU_BLOCK_MAGIC 0x66746d7069637075ull /* "ftmpicpu" */
#define CPU_BLOCK_MAGIC_MAPPED 0x66746d70696d6170ull /* "ftmpimap": from mmap */
#define CPU_MAP_BYTES ((size_t)1 << 21)

/* memset/memcpy of large buffers split over threads: one thread cannot saturate
 * the memory bandwidth of a many-core socket, and the first touch of a page by the
 * thread that will use it places it on that thread's NUMA node. */
#define CPU_PAR_BYTES ((size_t)1 << 22)
#define CPU_CHUNK_BYTES ((size_t)1 << 20)

static void cpu_fill_zero(void *p, size_t bytes)
{
    if (bytes < CPU_PAR_BYTES) {
        memset(p, 0, bytes);
        return;
    }
    long chunks = (long)((bytes + CPU_CHUNK_BYTES - 1) / CPU_CHUNK_BYTES);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; c++) {
        size_t off = (size_t)c * CPU_CHUNK_BYTES;
        size_t len = bytes - off < CPU_CHUNK_BYTES ? bytes - off : CPU_CHUNK_BYTES;
        memset((char *)p + off, 0, len);
    }
}

static void cpu_copy_bytes(void *dst, const void *src, size_t bytes)
{
    if (bytes < CPU_PAR_BYTES) {
        memmove(dst, src, bytes);
        return;
    }
    const char *s = src;
    char *d = dst;
    /* Overlapping ranges would race between chunks; memmove handles them serially. */
    if ((d < s && d + bytes > s) || (s < d && s + bytes > d)) {
        memmove(dst, src, bytes);
        return;
    }
    long chunks = (long)((bytes + CPU_CHUNK_BYTES - 1) / CPU_CHUNK_BYTES);
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; c++) {
        size_t off = (size_t)c * CPU_CHUNK_BYTES;
        size_t len = bytes - off < CPU_CHUNK_BYTES ? bytes - off : CPU_CHUNK_BYTES;
        memcpy(d + off, s + off, len);
    }
}

static void *cpu_alloc(ft_backend *be, size_t bytes)
{
    if (bytes > SIZE_MAX - 2 * FT_CPU_ALIGN)
        return NULL;
    size_t rounded = (bytes + FT_CPU_ALIGN - 1) / FT_CPU_ALIGN * FT_CPU_ALIGN;
    void *raw = NULL;
    const bool mapped = rounded >= CPU_MAP_BYTES;
    if (mapped) {
        raw = mmap(NULL, sizeof(cpu_block_header) + rounded, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (raw == MAP_FAILED)
            return NULL;
    } else if (posix_memalign(&raw, FT_CPU_ALIGN, sizeof(cpu_block_header) + rounded) != 0) {
        return NULL;
    }
    cpu_block_header *h = raw;
    memset(h, 0, sizeof *h);
    h->bytes = bytes;
    h->magic = mapped ? CPU_BLOCK_MAGIC_MAPPED : CPU_BLOCK_MAGIC;
    void *p = (char *)raw + sizeof *h;
    if (!mapped) /* a mapping is zero already */
        cpu_fill_zero(p, rounded);
    be->bytes_in_use += bytes;
    if (be->bytes_in_use > be->peak_bytes)
        be->peak_bytes = be->bytes_in_use;
    return p;
}

static void cpu_free(ft_backend *be, void *p)
{
    if (!p)
        return;
    cpu_block_header *h = (cpu_block_header *)((char *)p - sizeof(cpu_block_header));
    /* A wrong pointer (not from alloc, or freed twice) would corrupt the accounting
     * silently; stop loudly instead. */
    if (h->magic != CPU_BLOCK_MAGIC && h->magic != CPU_BLOCK_MAGIC_MAPPED)
        abort();
    const bool mapped = h->magic == CPU_BLOCK_MAGIC_MAPPED;
    h->magic = 0;
    be->bytes_in_use -= h->bytes;
    if (mapped)
        munmap(h, sizeof *h + (h->bytes + FT_CPU_ALIGN - 1) / FT_CPU_ALIGN * FT_CPU_ALIGN);
    else
        free(h);
}

static void cpu_upload(ft_backend *be, void *dst, const void *src_host, size_t bytes)
{
    cpu_copy_bytes(dst, src_host, bytes);
}

static void cpu_download(ft_backend *be, void *dst_host, const void *src, size_t bytes)
{
    cpu_copy_bytes(dst_host, src, bytes);
}

static void cpu_copy(ft_backend *be, void *dst, const void *src, size_t bytes)
{
    cpu_copy_bytes(dst, src, bytes);
}

static void cpu_zero(ft_backend *be, void *p, size_t bytes)
{
    cpu_fill_zero(p, bytes);
}

static void cpu_sync(ft_backend *be)
{
    /* Every CPU op has finished when it returns. */
}

static void cpu_normal_fill(ft_backend *be, float *dst, size_t n, uint64_t seed, uint64_t stream,
                            uint64_t first, double std)
{
    (void)be;
    ft_rng_normal_fill_f32_threads(seed, stream, first, n, std, dst);
}

/* The attention kernels read the segment ids where they are (host memory): nothing to do. */
static void cpu_segment_hint(ft_backend *be, const int32_t *segment, const int32_t *segment_host,
                             ft_attn_shape s)
{
    (void)be, (void)segment, (void)segment_host, (void)s;
}

static void cpu_destroy(ft_backend *be)
{
    if (!be)
        return;
    free(be->impl);
    free(be);
}

static const ft_backend_ops cpu_ops = {
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_upload,
    .download = cpu_download,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .sync = cpu_sync,
    .matmul = ft_cpu_widen_matmul,
    .matmul_add = ft_cpu_widen_matmul_add,
    .matmul_pair = ft_cpu_widen_matmul_pair,
    .add = ft_cpu_add,
    .scale = ft_cpu_scale,
    .sum_squares = ft_cpu_sum_squares,
    .sum_squares_each = ft_cpu_sum_squares_each,
    .phase_begin = ft_cpu_phase_begin,
    .phase_end = ft_cpu_phase_end,
    .phase_collect = ft_cpu_phase_collect,
    .rmsnorm_fwd = ft_cpu_widen_rmsnorm_fwd,
    .rmsnorm_bwd = ft_cpu_widen_rmsnorm_bwd,
    .layernorm_fwd = ft_cpu_widen_layernorm_fwd,
    .layernorm_bwd = ft_cpu_widen_layernorm_bwd,
    .rope = ft_cpu_widen_rope,
    .rope_qk = ft_cpu_widen_rope_qk,
    .attention_fwd = ft_cpu_widen_attention_fwd,
    .attention_bwd = ft_cpu_widen_attention_bwd,
    .attention_decode = ft_cpu_widen_attention_decode,
    .segment_hint = cpu_segment_hint,
    .bias_add = ft_cpu_widen_bias_add,
    .bias_grad = ft_cpu_widen_bias_grad,
    .swiglu_fwd = ft_cpu_widen_swiglu_fwd,
    .swiglu_bwd = ft_cpu_widen_swiglu_bwd,
    .gelu_fwd = ft_cpu_widen_gelu_fwd,
    .gelu_bwd = ft_cpu_widen_gelu_bwd,
    .dropout = ft_cpu_dropout,
    .embedding_fwd = ft_cpu_widen_embedding_fwd,
    .embedding_bwd = ft_cpu_widen_embedding_bwd,
    .cross_entropy = ft_cpu_cross_entropy,
    .adamw_step = ft_cpu_adamw_step,
    .adamw_rows_bf16 = ft_cpu_adamw_rows_bf16,
    .sgd_step = ft_cpu_sgd_step,
    .f32_to_bf16 = ft_cpu_f32_to_bf16,
    .bf16_to_f32 = ft_cpu_bf16_to_f32,
    .normal_fill = cpu_normal_fill,
    .destroy = cpu_destroy,
};

static ft_cpu_isa cpu_detect_isa(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return FT_CPU_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return FT_CPU_ISA_AVX2;
#endif
    return FT_CPU_ISA_GENERIC;
}

static int cpu_choose_isa(ft_cpu_state *st, ft_error *err)
{
    ft_cpu_isa best = cpu_detect_isa();
    const char *want = getenv("FT_CPU_ISA");
    st->isa = best;
    st->bf16_gemm = ft_cpu_gemm_bf16_available();
    if (!want || !*want)
        return 0;
    ft_cpu_isa asked;
    bool bf16 = false;
    if (strcmp(want, "avx512bf16") == 0)
        asked = FT_CPU_ISA_AVX512, bf16 = true;
    else if (strcmp(want, "generic") == 0)
        asked = FT_CPU_ISA_GENERIC;
    else if (strcmp(want, "avx2") == 0)
        asked = FT_CPU_ISA_AVX2;
    else if (strcmp(want, "avx512") == 0)
        asked = FT_CPU_ISA_AVX512;
    else
        return ft_fail(err,
                       "FT_CPU_ISA=%s: unknown instruction set (use generic, avx2, avx512 or "
                       "avx512bf16)",
                       want);
    st->isa = asked < best ? asked : best;
    st->bf16_gemm = st->bf16_gemm && bf16;
    return 0;
}

/* The "model name" of /proc/cpuinfo, or "cpu" where there is none (not Linux, no x86). */
static void cpu_model_name(char *buf, size_t len)
{
    snprintf(buf, len, "cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon)
            continue;
        colon += colon[1] == ' ' ? 2 : 1;
        snprintf(buf, len, "%.*s", (int)strcspn(colon, "\n"), colon);
        break;
    }
    fclose(f);
}

int ft_backend_cpu_create(ft_backend **out, ft_error *err)
{
    *out = NULL;
    ft_backend *be = calloc(1, sizeof *be);
    ft_cpu_state *st = calloc(1, sizeof *st);
    if (!be || !st) {
        free(be);
        free(st);
        return ft_fail(err, "CPU backend: out of host memory");
    }
    if (cpu_choose_isa(st, err) != 0) {
        free(be);
        free(st);
        return ft_fail_context(err, "CPU backend");
    }
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    be->ops = &cpu_ops;
    be->name = "cpu";
    be->host_memory = true;
    be->device = -1;
    cpu_model_name(be->device_name, sizeof be->device_name);
    be->memory_total = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
    be->impl = st;
    *out = be;
    return 0;
}
