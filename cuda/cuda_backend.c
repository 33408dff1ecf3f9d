/* CUDA backend: creation, the vtable, memory, and the thin wrappers that hand
 * each op to its kernel launcher (cuda_<family>.cu).
 *
 * Execution model. Everything is enqueued on one non-blocking stream owned by
 * the backend (the main lane; between lane_fork and lane_join a second one: the side
 * lane, cuda_lanes.h), so ops execute in call order and no op synchronises the device:
 * the host returns as soon as the work is queued. Exceptions, documented:
 *  - download returns when the copy has completed, so the host buffer can be read at
 *    once (a small one through pinned memory: one wait, the synchronisation);
 *  - upload returns with the host buffer free to reuse: a small one (at most 1 MiB: a
 *    batch's ids, positions, documents) through a ring of pinned memory without a wait
 *    (cuda_upload_stage.h), a large one (weights) after its copy completed;
 *  - sum_squares returns a host double, so it waits for its own result (and
 *    sum_squares_each once for all of its results);
 *  - sync waits for everything.
 * A failed launch or an asynchronous device error is fatal (the vtable has no
 * error path): the message names the op and the CUDA error, then abort().
 *
 * Memory. alloc uses the stream-ordered allocator (cudaMallocAsync on the
 * backend's stream, from the device's default pool with its release threshold
 * raised so that freed blocks stay cached: a training step re-allocates the
 * same sizes without going back to the driver), zero-filled with
 * cudaMemsetAsync; a request that fails trims the pool and tries once more (dev_malloc).
 * Devices without memory pools fall back to cudaMalloc.
 * bytes_in_use/peak_bytes count the bytes requested through alloc (a host-side
 * table maps each pointer to its size); the backend's own scratch and the
 * cuBLASLt workspace are not counted. Like the CPU backend, the accounting is
 * not thread-safe: allocate from one thread.
 *
 * Scratch. Ops that need temporary device memory (reductions, attention's
 * segment ranges and D, the embedding sort) share one buffer per lane that grows
 * stream-ordered (free old, allocate new, both on the lane's stream) and is never
 * shrunk; the ops of one lane run in order on its stream, so one buffer a lane is
 * enough. */
#include "cuda_state.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALLOC_ROUND 256 /* allocations are rounded up to keep operands 256-byte aligned */

void ft_cuda_check(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return;
    fprintf(stderr, "ftmpi: CUDA backend: %s: %s (%s)\n", what, cudaGetErrorString(e),
            cudaGetErrorName(e));
    abort();
}

cudaStream_t ft_cuda_stream(const ft_backend *be)
{
    return ft_cuda_state_of(be)->stream;
}

/* ---------------------------------------------------------------- allocation table */

static size_t table_hash(uintptr_t key, size_t cap)
{
    uint64_t h = (uint64_t)key;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (size_t)h & (cap - 1);
}

static int table_init(ft_cuda_alloc_table *t, size_t cap)
{
    t->keys = calloc(cap, sizeof *t->keys);
    t->bytes = calloc(cap, sizeof *t->bytes);
    if (!t->keys || !t->bytes) {
        free(t->keys);
        free(t->bytes);
        t->keys = NULL;
        t->bytes = NULL;
        return -1;
    }
    t->cap = cap;
    t->used = 0;
    t->live = 0;
    return 0;
}

static void table_free(ft_cuda_alloc_table *t)
{
    free(t->keys);
    free(t->bytes);
    memset(t, 0, sizeof *t);
}

static void table_put_nogrow(ft_cuda_alloc_table *t, uintptr_t key, size_t bytes)
{
    size_t i = table_hash(key, t->cap);
    while (t->keys[i] > 1)
        i = (i + 1) & (t->cap - 1);
    if (t->keys[i] == 0)
        t->used++;
    t->keys[i] = key;
    t->bytes[i] = bytes;
    t->live++;
}

static int table_put(ft_cuda_alloc_table *t, uintptr_t key, size_t bytes)
{
    if (2 * (t->used + 1) > t->cap) {
        ft_cuda_alloc_table bigger;
        size_t cap = t->cap;
        while (4 * (t->live + 1) > cap) /* keep the new load below 1/4 */
            cap *= 2;
        if (table_init(&bigger, cap) != 0)
            return -1;
        for (size_t i = 0; i < t->cap; i++)
            if (t->keys[i] > 1)
                table_put_nogrow(&bigger, t->keys[i], t->bytes[i]);
        table_free(t);
        *t = bigger;
    }
    table_put_nogrow(t, key, bytes);
    return 0;
}

/* Removes key; returns its size in *bytes, or -1 if it is not in the table. */
static int table_take(ft_cuda_alloc_table *t, uintptr_t key, size_t *bytes)
{
    size_t i = table_hash(key, t->cap);
    while (t->keys[i] != 0) {
        if (t->keys[i] == key) {
            *bytes = t->bytes[i];
            t->keys[i] = 1;
            t->live--;
            return 0;
        }
        i = (i + 1) & (t->cap - 1);
    }
    return -1;
}

/* ---------------------------------------------------------------- memory */

/* Out of memory: NULL. With the pool, a failed request first gives the blocks the pool
 * keeps cached back to the driver (once the frees queued on the stream have run) and tries
 * again: a large request can then be met from them, and a request that still fails leaves
 * nothing reserved, which other processes on the device need (a context of their own
 * cannot even be created on a device the pool has taken: seen on an H200). */
static void *dev_malloc(ft_cuda_state *st, size_t bytes)
{
    void *p = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        cudaError_t e = st->use_pool ? cudaMallocAsync(&p, bytes, st->stream) : cudaMalloc(&p, bytes);
        if (e == cudaSuccess)
            return p;
        (void)cudaGetLastError(); /* out of memory is not sticky: clear it */
        if (!st->use_pool)
            return NULL;
        ft_cuda_check(cudaStreamSynchronize(st->stream), "alloc (synchronize before trimming)");
        ft_cuda_check(cudaMemPoolTrimTo(st->pool, 0), "alloc (cudaMemPoolTrimTo)");
    }
    return NULL;
}

static void dev_free(ft_cuda_state *st, void *p)
{
    if (!p)
        return;
    ft_cuda_check(st->use_pool ? cudaFreeAsync(p, st->stream) : cudaFree(p), "free");
}

static void *cuda_alloc(ft_backend *be, size_t bytes)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    if (bytes > SIZE_MAX - ALLOC_ROUND)
        return NULL;
    size_t rounded = (bytes + ALLOC_ROUND - 1) / ALLOC_ROUND * ALLOC_ROUND;
    if (rounded == 0)
        rounded = ALLOC_ROUND; /* a distinct, freeable pointer even for 0 bytes */
    void *p = dev_malloc(st, rounded);
    if (!p)
        return NULL;
    if (cudaMemsetAsync(p, 0, rounded, st->stream) != cudaSuccess ||
        table_put(&st->table, (uintptr_t)p, bytes) != 0) {
        (void)cudaGetLastError();
        dev_free(st, p);
        return NULL;
    }
    be->bytes_in_use += bytes;
    if (be->bytes_in_use > be->peak_bytes)
        be->peak_bytes = be->bytes_in_use;
    return p;
}

static void cuda_free(ft_backend *be, void *p)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    if (!p)
        return;
    size_t bytes = 0;
    if (table_take(&st->table, (uintptr_t)p, &bytes) != 0) {
        /* Not from alloc, or freed twice: the accounting would silently drift. */
        fprintf(stderr, "ftmpi: CUDA backend: free(%p): not a live allocation of this backend\n",
                p);
        abort();
    }
    be->bytes_in_use -= bytes;
    ft_segment_hint_written(&st->segment_hint, p, bytes);
    dev_free(st, p);
}

static void cuda_upload(ft_backend *be, void *dst, const void *src_host, size_t bytes)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    if (bytes == 0)
        return;
    ft_segment_hint_written(&st->segment_hint, dst, bytes);
    /* small: through the pinned ring, no wait; large: the copy, then a wait for it (the
     * caller may reuse src_host on return) */
    const int staged = ft_upload_stage_copy(&st->upload_stage, dst, src_host, bytes, st->stream);
    if (staged < 0)
        ft_cuda_check((cudaError_t)-staged, "upload (staged)");
    if (staged)
        return;
    ft_cuda_check(cudaMemcpyAsync(dst, src_host, bytes, cudaMemcpyHostToDevice, st->stream),
                  "upload");
    ft_cuda_check(cudaStreamSynchronize(st->stream), "upload (synchronize)");
}

/* A small download (a micro-batch's losses, the norm's sums) lands in pinned memory, so
 * that the copy is queued like any op and the one wait is the synchronisation; into the
 * caller's pageable buffer the copy itself would wait, and the driver stage it. */
static void cuda_download(ft_backend *be, void *dst_host, const void *src, size_t bytes)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    if (bytes == 0)
        return;
    const int bounce = st->download_stage && bytes <= FT_CUDA_DOWNLOAD_STAGE;
    ft_cuda_check(cudaMemcpyAsync(bounce ? st->download_stage : dst_host, src, bytes,
                                  cudaMemcpyDeviceToHost, st->stream),
                  "download");
    ft_cuda_check(cudaStreamSynchronize(st->stream), "download (synchronize)");
    if (bounce)
        memcpy(dst_host, st->download_stage, bytes);
}

static void cuda_copy(ft_backend *be, void *dst, const void *src, size_t bytes)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    if (bytes == 0 || dst == src)
        return;
    ft_segment_hint_written(&st->segment_hint, dst, bytes);
    ft_cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st->stream), "copy");
}

static void cuda_zero(ft_backend *be, void *p, size_t bytes)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    if (bytes == 0)
        return;
    ft_segment_hint_written(&st->segment_hint, p, bytes);
    ft_cuda_check(cudaMemsetAsync(p, 0, bytes, st->stream), "zero");
}

/* Keeps a host copy of the segment ids for cuDNN's document tables (cuda_segment_hint.h).
 * Out of host memory only costs speed: attention then reads the ids back. */
static void cuda_segment_hint(ft_backend *be, const int32_t *segment, const int32_t *segment_host,
                              ft_attn_shape s)
{
    (void)ft_segment_hint_set(&ft_cuda_state_of(be)->segment_hint, segment, segment_host, s);
}

static void cuda_sync(ft_backend *be)
{
    ft_cuda_check(cudaStreamSynchronize(ft_cuda_state_of(be)->stream), "sync");
}

/* Each lane has its own scratch, grown on its own stream: the side lane's work runs
 * beside the main lane's, so one buffer would be two writers at once. */
void *ft_cuda_scratch(ft_backend *be, size_t bytes)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    void **buf = st->lanes.on_side ? &st->lanes.scratch : &st->scratch;
    size_t *have = st->lanes.on_side ? &st->lanes.scratch_bytes : &st->scratch_bytes;
    if (bytes == 0)
        bytes = 1;
    if (bytes <= *have)
        return *buf;
    size_t want = bytes + bytes / 4; /* some headroom for the next, slightly larger call */
    dev_free(st, *buf);
    *buf = NULL;
    *have = 0;
    void *p = dev_malloc(st, want);
    if (!p) {
        fprintf(stderr, "ftmpi: CUDA backend: out of device memory for %zu bytes of scratch\n",
                want);
        abort();
    }
    *buf = p;
    *have = want;
    return p;
}

/* ---------------------------------------------------------------- op wrappers */


static void cuda_add(ft_backend *be, float *y, const float *x, size_t n)
{
    ft_cuda_check(ft_cuda_launch_add(y, x, n, ft_cuda_stream(be)), "add");
}

static void cuda_scale(ft_backend *be, float *x, float s, size_t n)
{
    ft_cuda_check(ft_cuda_launch_scale(x, s, n, ft_cuda_stream(be)), "scale");
}

/* Each buffer's two reduction kernels write its result into a device array after the
 * partials (which the next buffer's kernels reuse: one stream orders them); one copy
 * into pinned memory (grown here the first time a longer list comes) brings the array
 * back, one wait. An empty buffer's result is 0, set on the host. */
static void cuda_sum_squares_each(ft_backend *be, const float *const *x, const size_t *n,
                                  int count, double *out)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    if (count <= 0)
        return;
    if (count > st->host_results) {
        const int want = (count + 63) / 64 * 64;
        double *grown = NULL;
        ft_cuda_check(cudaMallocHost((void **)&grown, (size_t)want * sizeof(double)),
                      "sum_squares_each (pinned results)");
        ft_cuda_check(cudaFreeHost(st->host_result), "sum_squares_each (pinned results)");
        st->host_result = grown;
        st->host_results = want;
    }
    size_t part = 0;
    for (int i = 0; i < count; i++) {
        size_t b = ft_cuda_sum_squares_scratch_bytes(n[i]);
        part = b > part ? b : part;
    }
    part = (part + 255) / 256 * 256;
    char *scratch = ft_cuda_scratch(be, part + (size_t)count * sizeof(double));
    double *results = (double *)(scratch + part);
    for (int i = 0; i < count; i++)
        if (n[i] > 0)
            ft_cuda_check(ft_cuda_launch_sum_squares(results + i, x[i], n[i], scratch, st->stream),
                          "sum_squares");
    ft_cuda_check(cudaMemcpyAsync(st->host_result, results, (size_t)count * sizeof(double),
                                  cudaMemcpyDeviceToHost, st->stream),
                  "sum_squares (copy)");
    ft_cuda_check(cudaStreamSynchronize(st->stream), "sum_squares (synchronize)");
    for (int i = 0; i < count; i++)
        out[i] = n[i] > 0 ? st->host_result[i] : 0.0;
}

static void cuda_sum_squares_start(ft_backend *be, const float *x, size_t n, double *result)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    if (n == 0) {
        ft_cuda_check(cudaMemsetAsync(result, 0, sizeof *result, st->stream), "sum_squares_start");
        return;
    }
    void *scratch = ft_cuda_scratch(be, ft_cuda_sum_squares_scratch_bytes(n));
    ft_cuda_check(ft_cuda_launch_sum_squares(result, x, n, scratch, st->stream),
                  "sum_squares_start");
}

static double cuda_sum_squares(ft_backend *be, const float *x, size_t n)
{
    if (n == 0)
        return 0.0;
    double sum;
    cuda_sum_squares_each(be, &x, &n, 1, &sum);
    return sum;
}

static void cuda_rmsnorm_fwd(ft_backend *be, ft_dtype dt, void *y, float *rstd, const void *x,
                             const void *w, int rows, int dim, float eps)
{
    ft_cuda_check(ft_cuda_launch_rmsnorm_fwd(dt, y, rstd, x, w, rows, dim, eps, ft_cuda_stream(be)),
                  "rmsnorm_fwd");
}

static void cuda_rmsnorm_bwd(ft_backend *be, ft_dtype dt, ft_dtype gt, void *dx,
                             const void *dx_base, void *dw, const void *dy, const void *x,
                             const void *w, const float *rstd, int rows, int dim)
{
    void *scratch = ft_cuda_scratch(be, ft_cuda_rmsnorm_bwd_scratch_bytes(rows, dim));
    ft_cuda_check(ft_cuda_launch_rmsnorm_bwd(dt, gt, dx, dx_base, dw, dy, x, w, rstd, rows, dim,
                                             scratch, ft_cuda_stream(be)),
                  "rmsnorm_bwd");
}

static void cuda_layernorm_fwd(ft_backend *be, ft_dtype dt, void *y, float *mean, float *rstd,
                               const void *x, const void *w, const void *b, int rows, int dim,
                               float eps)
{
    ft_cuda_check(ft_cuda_launch_layernorm_fwd(dt, y, mean, rstd, x, w, b, rows, dim, eps,
                                               ft_cuda_stream(be)),
                  "layernorm_fwd");
}

static void cuda_layernorm_bwd(ft_backend *be, ft_dtype dt, ft_dtype gt, void *dx,
                               const void *dx_base, void *dw, void *db, const void *dy,
                               const void *x, const void *w, const float *mean,
                               const float *rstd, int rows, int dim)
{
    void *scratch = ft_cuda_scratch(be, ft_cuda_layernorm_bwd_scratch_bytes(rows, dim));
    ft_cuda_check(ft_cuda_launch_layernorm_bwd(dt, gt, dx, dx_base, dw, db, dy, x, w, mean, rstd,
                                               rows, dim, scratch, ft_cuda_stream(be)),
                  "layernorm_bwd");
}

static void cuda_gelu_fwd(ft_backend *be, ft_dtype dt, ft_gelu_kind kind, void *out,
                          const void *x, size_t n)
{
    ft_cuda_check(ft_cuda_launch_gelu_fwd(dt, kind, out, x, n, ft_cuda_stream(be)), "gelu_fwd");
}

static void cuda_gelu_bwd(ft_backend *be, ft_dtype dt, ft_gelu_kind kind, void *dx,
                          const void *dout, const void *x, size_t n)
{
    ft_cuda_check(ft_cuda_launch_gelu_bwd(dt, kind, dx, dout, x, n, ft_cuda_stream(be)),
                  "gelu_bwd");
}

static void cuda_rope(ft_backend *be, ft_dtype dt, void *x, const float *cos_table,
                      const float *sin_table, const int32_t *pos, int tokens, int n_heads,
                      ft_rope_shape r, bool inverse)
{
    ft_cuda_check(ft_cuda_launch_rope(dt, x, cos_table, sin_table, pos, tokens, n_heads, r,
                                      inverse ? 1 : 0, ft_cuda_stream(be)),
                  "rope");
}

static void cuda_rope_qk(ft_backend *be, ft_dtype dt, void *q, int q_heads, void *k, int k_heads,
                         const float *cos_table, const float *sin_table, const int32_t *pos,
                         int tokens, ft_rope_shape r, bool inverse)
{
    ft_cuda_check(ft_cuda_launch_rope_qk(dt, q, q_heads, k, k_heads, cos_table, sin_table, pos,
                                         tokens, r, inverse ? 1 : 0, ft_cuda_stream(be)),
                  "rope_qk");
}

static void cuda_bias_add(ft_backend *be, ft_dtype dt, ft_dtype yt, void *y, const void *b,
                          int rows, int dim)
{
    ft_cuda_check(ft_cuda_launch_bias_add(dt, yt, y, b, rows, dim, ft_cuda_stream(be)),
                  "bias_add");
}

static void cuda_bias_grad(ft_backend *be, ft_dtype dt, ft_dtype gt, void *db, const void *dy,
                           int rows, int dim)
{
    ft_cuda_check(ft_cuda_launch_bias_grad(dt, gt, db, dy, rows, dim, ft_cuda_stream(be)),
                  "bias_grad");
}

static void cuda_swiglu_fwd(ft_backend *be, ft_dtype dt, void *out, const void *gate,
                            const void *up, size_t n)
{
    ft_cuda_check(ft_cuda_launch_swiglu_fwd(dt, out, gate, up, n, ft_cuda_stream(be)),
                  "swiglu_fwd");
}

static void cuda_swiglu_bwd(ft_backend *be, ft_dtype dt, void *dgate, void *dup,
                            const void *dout, const void *gate, const void *up, size_t n,
                            void *out)
{
    ft_cuda_check(ft_cuda_launch_swiglu_bwd(dt, dgate, dup, dout, gate, up, n, out,
                                            ft_cuda_stream(be)),
                  "swiglu_bwd");
}

static void cuda_dropout(ft_backend *be, ft_dtype dt, void *y, const void *x, int rows, int cols,
                         ft_dropout_mask m, bool accumulate)
{
    ft_cuda_check(ft_cuda_launch_dropout(dt, y, x, rows, cols, m, accumulate, ft_cuda_stream(be)),
                  "dropout");
}

static void cuda_embedding_fwd(ft_backend *be, ft_dtype dt, void *out, const void *table,
                               const int32_t *ids, int tokens, int dim)
{
    ft_cuda_check(ft_cuda_launch_embedding_fwd(dt, out, table, ids, tokens, dim, ft_cuda_stream(be)),
                  "embedding_fwd");
}

static void cuda_embedding_bwd(ft_backend *be, ft_dtype dt, ft_dtype gt, void *dtable,
                               const void *dout, const int32_t *ids, int tokens, int dim)
{
    void *scratch = ft_cuda_scratch(be, ft_cuda_embedding_bwd_scratch_bytes(tokens));
    ft_cuda_check(ft_cuda_launch_embedding_bwd(dt, gt, dtable, dout, ids, tokens, dim, scratch,
                                               ft_cuda_stream(be)),
                  "embedding_bwd");
}

static void cuda_cross_entropy(ft_backend *be, const void *logits, ft_dtype lt, void *dlogits,
                               ft_dtype dt, float *row_loss, const int32_t *targets,
                               const float *weight, int rows, int vocab, float grad_scale)
{
    ft_cuda_check(ft_cuda_launch_cross_entropy(logits, lt, dlogits, dt, row_loss, targets, weight,
                                               rows, vocab, grad_scale, ft_cuda_stream(be)),
                  "cross_entropy");
}

/* The scalar coefficients are formed in double and rounded to fp32 where
 * PyTorch hands them to a float kernel, exactly as the CPU backend does. */
static ft_cuda_adamw_coef adamw_coef_of(const ft_adamw_params *p, size_t n)
{
    double lr = p->lr, b1 = p->beta1, b2 = p->beta2, t = (double)p->step;
    ft_cuda_adamw_coef c;
    c.decay = (float)(1.0 - lr * (double)p->weight_decay);
    c.w1 = (float)(1.0 - b1);
    c.beta2 = p->beta2;
    c.w2 = (float)(1.0 - b2);
    double bc1 = 1.0 - pow(b1, t);
    double bc2 = 1.0 - pow(b2, t);
    c.neg_step = (float)(-(lr / bc1));
    c.bc2_sqrt = (float)sqrt(bc2);
    c.eps = p->eps;
    c.grad_scale = p->grad_scale;
    c.decay_n = p->no_decay_from ? p->no_decay_from : n;
    return c;
}

static void cuda_adamw_step(ft_backend *be, float *param, const float *grad, float *m, float *v,
                            size_t n, const ft_adamw_params *p)
{
    ft_cuda_check(ft_cuda_launch_adamw(param, grad, m, v, p->bf16_out, n, adamw_coef_of(p, n),
                                       ft_cuda_stream(be)), "adamw_step");
}

static void cuda_adamw_rows_bf16(ft_backend *be, uint16_t *out, const float *param,
                                 const float *grad, const float *m, const float *v,
                                 const int32_t *rows, size_t n_rows, size_t row_len,
                                 const ft_adamw_params *p)
{
    ft_cuda_check(ft_cuda_launch_adamw_rows_bf16(out, param, grad, m, v, rows, n_rows, row_len,
                                                 adamw_coef_of(p, SIZE_MAX), p->moments_zero,
                                                 ft_cuda_stream(be)), "adamw_rows_bf16");
}

static void cuda_sgd_step(ft_backend *be, float *param, const float *grad, float *momentum_buf,
                          size_t n, const ft_sgd_params *p)
{
    float decay = (float)(1.0 - (double)p->lr * (double)p->weight_decay);
    ft_cuda_check(ft_cuda_launch_sgd(param, grad, momentum_buf, n, decay, p->lr, p->momentum,
                                     p->grad_scale, ft_cuda_stream(be)),
                  "sgd_step");
}

static void cuda_f32_to_bf16(ft_backend *be, uint16_t *dst, const float *src, size_t n)
{
    ft_cuda_check(ft_cuda_launch_f32_to_bf16(dst, src, n, ft_cuda_stream(be)), "f32_to_bf16");
}

static void cuda_bf16_to_f32(ft_backend *be, float *dst, const uint16_t *src, size_t n)
{
    ft_cuda_check(ft_cuda_launch_bf16_to_f32(dst, src, n, ft_cuda_stream(be)), "bf16_to_f32");
}

/* ---------------------------------------------------------------- lifetime */

static void cuda_state_release(ft_cuda_state *st)
{
    if (st->stream)
        (void)cudaStreamSynchronize(st->stream);
    ft_cudnn_attention_release(st->cudnn);
    st->cudnn = NULL;
    ft_segment_hint_release(&st->segment_hint);
    ft_cuda_phase_times_release(&st->phases);
    ft_upload_stage_release(&st->upload_stage);
    ft_cuda_matmul_release(st);
    /* Blocks still allocated are returned to the pool: nothing else can use
     * them once the backend is gone. */
    for (size_t i = 0; st->table.keys && i < st->table.cap; i++)
        if (st->table.keys[i] > 1)
            (void)(st->use_pool ? cudaFreeAsync((void *)st->table.keys[i], st->stream)
                                : cudaFree((void *)st->table.keys[i]));
    if (st->scratch)
        (void)(st->use_pool ? cudaFreeAsync(st->scratch, st->stream) : cudaFree(st->scratch));
    if (st->lanes.scratch) { /* after the side stream's last use of it */
        (void)cudaStreamSynchronize(st->lanes.side);
        (void)(st->use_pool ? cudaFreeAsync(st->lanes.scratch, st->stream)
                            : cudaFree(st->lanes.scratch));
        st->lanes.scratch = NULL;
    }
    if (st->stream)
        (void)cudaStreamSynchronize(st->stream);
    if (st->lt_workspace)
        (void)cudaFree(st->lt_workspace);
    if (st->lt)
        (void)cublasLtDestroy(st->lt);
    if (st->host_result)
        (void)cudaFreeHost(st->host_result);
    if (st->download_stage)
        (void)cudaFreeHost(st->download_stage);
    ft_cuda_lanes_release(&st->lanes);
    st->stream = NULL;
    table_free(&st->table);
    (void)cudaGetLastError();
}

static void cuda_destroy(ft_backend *be)
{
    if (!be)
        return;
    ft_cuda_state *st = ft_cuda_state_of(be);
    if (st) {
        (void)cudaSetDevice(be->device);
        cuda_state_release(st);
        free(st);
    }
    free(be);
}

static const ft_backend_ops cuda_ops = {
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .copy = cuda_copy,
    .zero = cuda_zero,
    .sync = cuda_sync,
    .host_alloc = ft_cuda_host_alloc,
    .host_free = ft_cuda_host_free,
    .upload_async = ft_cuda_upload_async,
    .download_async = ft_cuda_download_async,
    .matmul = ft_cuda_matmul,
    .matmul_add = ft_cuda_matmul_add,
    .matmul_pair = ft_cuda_matmul_pair,
    .add = cuda_add,
    .scale = cuda_scale,
    .sum_squares = cuda_sum_squares,
    .sum_squares_start = cuda_sum_squares_start,
    .sum_squares_each = cuda_sum_squares_each,
    .phase_begin = ft_cuda_phase_begin,
    .phase_end = ft_cuda_phase_end,
    .phase_collect = ft_cuda_phase_collect,
    .rmsnorm_fwd = cuda_rmsnorm_fwd,
    .rmsnorm_bwd = cuda_rmsnorm_bwd,
    .layernorm_fwd = cuda_layernorm_fwd,
    .layernorm_bwd = cuda_layernorm_bwd,
    .rope = cuda_rope,
    .rope_qk = cuda_rope_qk,
    .attention_fwd = ft_cuda_attention_fwd,
    .attention_bwd = ft_cuda_attention_bwd,
    .attention_decode = ft_cuda_attention_decode,
    .segment_hint = cuda_segment_hint,
    .bias_add = cuda_bias_add,
    .bias_grad = cuda_bias_grad,
    .swiglu_fwd = cuda_swiglu_fwd,
    .swiglu_bwd = cuda_swiglu_bwd,
    .gelu_fwd = cuda_gelu_fwd,
    .gelu_bwd = cuda_gelu_bwd,
    .dropout = cuda_dropout,
    .embedding_fwd = cuda_embedding_fwd,
    .embedding_bwd = cuda_embedding_bwd,
    .cross_entropy = cuda_cross_entropy,
    .adamw_step = cuda_adamw_step,
    .adamw_rows_bf16 = cuda_adamw_rows_bf16,
    .sgd_step = cuda_sgd_step,
    .f32_to_bf16 = cuda_f32_to_bf16,
    .bf16_to_f32 = cuda_bf16_to_f32,
    .normal_fill = ft_cuda_normal_fill,
    .lane_fork = ft_cuda_lane_fork,
    .lane_mark = ft_cuda_lane_mark,
    .lane_join = ft_cuda_lane_join,
    .lane_await = ft_cuda_lane_await,
    .lane_sync = ft_cuda_lane_sync,
    .destroy = cuda_destroy,
};

#define CREATE_CHECK(call, what)                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            ft_fail(err, "CUDA backend on device %d: %s: %s", device, what,                        \
                    cudaGetErrorString(e_));                                                       \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

int ft_backend_cuda_create(ft_backend **out, int device, ft_error *err)
{
    *out = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        const char *why = e != cudaSuccess ? cudaGetErrorString(e) : "no device";
        (void)cudaGetLastError();
        return ft_fail(err,
                       "CUDA backend: no usable CUDA device (%s); run on a machine with an NVIDIA "
                       "GPU and driver, or use the CPU backend",
                       why);
    }
    if (device < 0 || device >= count)
        return ft_fail(err, "CUDA backend: device %d does not exist (this machine has %d: 0..%d)",
                       device, count, count - 1);

    ft_backend *be = calloc(1, sizeof *be);
    ft_cuda_state *st = calloc(1, sizeof *st);
    if (!be || !st) {
        free(be);
        free(st);
        return ft_fail(err, "CUDA backend: out of host memory");
    }
    if (table_init(&st->table, 1024) != 0) {
        ft_fail(err, "CUDA backend: out of host memory");
        goto fail;
    }
    CREATE_CHECK(cudaSetDevice(device), "cudaSetDevice");
    struct cudaDeviceProp prop;
    CREATE_CHECK(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    /* the MFU peak table is keyed by this name (train/mfu.c) */
    snprintf(be->device_name, sizeof be->device_name, "%.*s", (int)sizeof be->device_name - 1,
             prop.name);
    int pools = 0;
    CREATE_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device),
                 "cudaDeviceGetAttribute(MemoryPoolsSupported)");
    st->use_pool = pools != 0;
    if (st->use_pool) {
        uint64_t keep = UINT64_MAX;
        CREATE_CHECK(cudaDeviceGetDefaultMemPool(&st->pool, device), "cudaDeviceGetDefaultMemPool");
        CREATE_CHECK(cudaMemPoolSetAttribute(st->pool, cudaMemPoolAttrReleaseThreshold, &keep),
                     "cudaMemPoolSetAttribute(ReleaseThreshold)");
    }
    CREATE_CHECK(ft_cuda_lanes_init(&st->lanes), "streams (cudaStreamCreateWithPriority)");
    st->stream = st->lanes.main;
    CREATE_CHECK(cudaMallocHost((void **)&st->host_result, sizeof(double)), "cudaMallocHost");
    CREATE_CHECK(cudaMallocHost(&st->download_stage, FT_CUDA_DOWNLOAD_STAGE),
                 "cudaMallocHost (download staging)");
    st->host_results = 1;
    CREATE_CHECK(ft_upload_stage_init(&st->upload_stage), "upload staging (cudaMallocHost)");
    CREATE_CHECK(cudaMalloc(&st->lt_workspace, FT_CUDA_LT_WORKSPACE),
                 "cudaMalloc(cuBLASLt workspace)");
    cublasStatus_t bs = cublasLtCreate(&st->lt);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        st->lt = NULL;
        ft_fail(err, "CUDA backend on device %d: cublasLtCreate: %s", device,
                cublasLtGetStatusString(bs));
        goto fail;
    }

    size_t free_bytes = 0;
    CREATE_CHECK(cudaMemGetInfo(&free_bytes, &be->memory_total), "cudaMemGetInfo");
    be->ops = &cuda_ops;
    be->name = "cuda";
    be->host_memory = false;
    be->device = device;
    be->impl = st;
    *out = be;
    return 0;

fail:
    cuda_state_release(st);
    free(st);
    free(be);
    return -1;
}
