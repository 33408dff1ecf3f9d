/* The compute backend: one vtable, two implementations (C/OpenMP/CBLAS in
 * src/backend/cpu, CUDA in cuda/). The model and the sharding engine call only
 * these operations, so they never know where a tensor lives.
 *
 * Conventions shared by every operation
 *  - Tensors are dense and row-major, in the backend's memory (host memory for the
 *    CPU backend, device memory for CUDA). Pointers passed to an op are backend
 *    pointers unless the parameter name ends in _host.
 *  - Storage types are explicit. A transformer op takes `dt`, the storage of its
 *    activations (inputs, outputs and their gradients) and of the parameters it
 *    reads (weights, biases, the embedding table); those arguments are `void *`.
 *    Everything else is fp32 (`float *`) whatever dt is: statistics kept for the
 *    backward (mean, rstd, lse), RoPE tables, loss weights, per-row losses and logits.
 *    Parameter gradients (dw, db, dtable; `void *`) are stored as `gt`: fp32, the
 *    accumulators that sum micro-batches, or bf16 when the sharding engine stages one
 *    micro-batch's gradient of a unit in bf16 for a bf16 reduction (FSDP's layout);
 *    an op sums its contributions in fp32 and rounds once into a bf16 gradient.
 *    matmul names each operand's storage (ft_gemm_types). Inside an op the
 *    arithmetic is fp32: bf16 values are widened on load and rounded to nearest
 *    even on store. The optimizer, norm and cast ops work on fp32 buffers.
 *  - Activations are [tokens, features] with tokens = B*T (batch-major).
 *    Attention inputs keep the projection layout: q is [tokens, n_heads*head_dim],
 *    head h of token t at q[t*n_heads*head_dim + h*head_dim]; k and v likewise with
 *    n_kv_heads. Grouped-query attention maps query head h to kv head
 *    h / (n_heads / n_kv_heads) by indexing, never by copying K/V.
 *  - "accumulate" outputs are added to (+=), "overwrite" outputs are assigned.
 *    Gradients of parameters always accumulate, so gradient accumulation over
 *    micro-batches and residual branches need no extra buffers.
 *  - Ops are asynchronous with respect to the host on CUDA; `sync` waits.
 */
#ifndef FT_BACKEND_BACKEND_H
#define FT_BACKEND_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/dropout_mask.h"
#include "util/dtype.h"
#include "util/error.h"

typedef struct ft_backend ft_backend;

/* Attention geometry: B sequences of T tokens, n_heads query heads and n_kv_heads
 * key/value heads of head_dim each. */
typedef struct ft_attn_shape {
    int batch;
    int seq_len;
    int n_heads;
    int n_kv_heads;
    int head_dim;
    /* Sliding window (Mistral): query i also needs j > i - window, i.e. it sees at
     * most `window` keys, itself included. 0: no window (plain causal). */
    int window;
} ft_attn_shape;

/* Storage of a GEMM's operands; the product is always accumulated in fp32. One
 * struct rather than three arguments so that scaled low-precision operands (fp8
 * with a per-tensor scale) can be added here without touching every call. */
typedef struct ft_gemm_types {
    ft_dtype a, b, c;
} ft_gemm_types;

#define FT_GEMM_F32 ((ft_gemm_types){ FT_DTYPE_F32, FT_DTYPE_F32, FT_DTYPE_F32 })

/* Rotary geometry of one head. The first rot_dim dimensions rotate, the other
 * head_dim - rot_dim pass through unchanged (GPT-NeoX's rotary_pct, GPT-J's rotary_dim;
 * Llama rotates the whole head, rot_dim = head_dim). rot_dim is even, <= head_dim.
 * Pairing of the rotated dimensions:
 *   half-split (interleaved = false; HF Llama/NeoX "rotate_half"): i with i + rot_dim/2,
 *   interleaved (interleaved = true; GPT-J "rotate_every_two"): 2i with 2i + 1.
 * Pair i (0 <= i < rot_dim/2) rotates by pos * inv_freq[i] in both styles. */
typedef struct ft_rope_shape {
    int head_dim;
    int rot_dim;
    bool interleaved;
} ft_rope_shape;

/* The two GELUs of Hugging Face configs:
 *   FT_GELU_ERF  "gelu" (exact):  0.5 x (1 + erf(x / sqrt 2))
 *   FT_GELU_TANH "gelu_new", "gelu_pytorch_tanh", "gelu_fast":
 *                0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
typedef enum ft_gelu_kind { FT_GELU_ERF = 0, FT_GELU_TANH = 1 } ft_gelu_kind;

typedef struct ft_adamw_params {
    float lr;
    float beta1;
    float beta2;
    float eps;
    float weight_decay; /* decoupled: p -= lr * wd * p, applied before the Adam update */
    long step;          /* 1-based optimizer step, for bias correction */
    /* Optional: also write the updated parameters rounded to bf16 here ([n], round to
     * nearest even, as f32_to_bf16): the bf16 working copy in the same pass as the
     * update, instead of a second read of the fp32 parameters. NULL: none. */
    uint16_t *bf16_out;
    /* The gradient used is fl(g x grad_scale): gradient clipping's multiplier applied in
     * the update's own read of g, bitwise what scaling the buffer first would give,
     * without that extra pass over it (the buffer is left unscaled). 1: none. */
    float grad_scale;
    /* Elements at and past this index take no weight decay (a unit's norms and biases
     * follow its 2-D weights: one launch updates both); 0: none is exempt. */
    size_t no_decay_from;
    /* m and v hold +0 everywhere (their first update since they were allocated): the
     * update may take them as zeros without reading them, with the bits of reading
     * them. On the CPU, reading never-written memory maps the kernel's shared zero page,
     * and the write after it faults a second time and flushes every other core's TLB
     * (an interrupt each, per 4 KiB page): most of a first step's system time. A
     * backend may read them anyway. */
    bool moments_zero;
} ft_adamw_params;

typedef struct ft_sgd_params {
    float lr;
    float momentum;     /* 0 disables the momentum buffer */
    float weight_decay; /* decoupled, like AdamW */
    float grad_scale;   /* as ft_adamw_params.grad_scale */
    bool moments_zero;  /* as ft_adamw_params.moments_zero, of the momentum buffer */
} ft_sgd_params;

/* Where a step's time goes (profile_phases): spans of the backend's work, summed per
 * phase over the step's micro-batches (backend/phase_time.h has the helpers). */
typedef enum ft_phase {
    FT_PHASE_FORWARD,   /* the embedding and the blocks' forward */
    FT_PHASE_HEAD,      /* final norm, LM head and loss, forward and backward */
    FT_PHASE_RECOMPUTE, /* the checkpointed blocks' forward again */
    FT_PHASE_BACKWARD,  /* the blocks' and the embedding's backward (and ZeRO 2-3's
                           reduce-scatters started there) */
    FT_PHASE_REDUCE,    /* the gradient reduction at the end of the micro-batches */
    FT_PHASE_NORM,      /* the global gradient norm */
    FT_PHASE_OPTIMIZER, /* the update and publishing the working parameters */
    FT_PHASE_COUNT
} ft_phase;

typedef struct ft_backend_ops {
    /* ---- memory ---- */
    void *(*alloc)(ft_backend *be, size_t bytes); /* zero-filled; NULL on failure */
    void (*free)(ft_backend *be, void *p);
    void (*upload)(ft_backend *be, void *dst, const void *src_host, size_t bytes);
    void (*download)(ft_backend *be, void *dst_host, const void *src, size_t bytes);
    void (*copy)(ft_backend *be, void *dst, const void *src, size_t bytes);
    void (*zero)(ft_backend *be, void *p, size_t bytes);
    void (*sync)(ft_backend *be);
    /* Optional (NULL where host memory is all alike, as on the CPU): page-locked host
     * memory, zero-filled, NULL on failure, freed with host_free; the copies below reach
     * it without a staging copy, at the bus's full speed. */
    void *(*host_alloc)(ft_backend *be, size_t bytes);
    void (*host_free)(ft_backend *be, void *p);
    /* Optional (NULL: upload and download, which return with the copy done): copies
     * queued in order with the backend's other work on the current lane, returning at
     * once. The host buffer (from host_alloc) must not be written (upload) or read
     * (download) before the next sync. */
    void (*upload_async)(ft_backend *be, void *dst, const void *src_host, size_t bytes);
    void (*download_async)(ft_backend *be, void *dst_host, const void *src, size_t bytes);

    /* ---- dense algebra ----
     * c[m,n] = alpha * op(a) * op(b) + beta * c, op(a) is [m,k], op(b) is [k,n].
     * trans_a: a is stored [k,m]; trans_b: b is stored [n,k]. t gives each operand's
     * storage; products and the beta term are summed in fp32, c is rounded once.
     * A linear layer y = x W^T with W [out,in] is
     * matmul(be, t, y, x, W, N, out, in, false, true, 1, 0). */
    void (*matmul)(ft_backend *be, ft_gemm_types t, void *c, const void *a, const void *b, int m,
                   int n, int k, bool trans_a, bool trans_b, float alpha, float beta);
    /* d = op(a) * op(b) + c: matmul with alpha = beta = 1 reading c and writing d (both
     * [m,n] of t.c; distinct buffers, or the same one). A residual connection's sum
     * happens in the GEMM's epilogue instead of a copy of the residual into d before an
     * accumulating matmul: bitwise that copy-and-accumulate, one pass over d and one
     * launch fewer. */
    void (*matmul_add)(ft_backend *be, ft_gemm_types t, void *d, const void *c, const void *a,
                       const void *b, int m, int n, int k, bool trans_a, bool trans_b);
    /* Two matmuls of one shape, types and transposes, c_i = alpha op(a_i) op(b_i) + beta
     * c_i for i = 0, 1 (c0 and c1 distinct, not overlapping; a0 == a1 or b0 == b1 for a
     * shared operand). A projection pair of one input (K and V, gate and up, or their
     * weight gradients) in one launch where the backend can: CUDA issues a strided batch
     * of two when each operand's second matrix sits at a fixed non-negative distance from
     * its first, else two matmuls. The CPU runs two matmuls, bitwise matmul's; on CUDA
     * the batched kernel may be another algorithm than the single ones, so its bits may
     * differ from two matmul calls as two algorithms' may (each deterministic). */
    void (*matmul_pair)(ft_backend *be, ft_gemm_types t, void *c0, void *c1, const void *a0,
                        const void *a1, const void *b0, const void *b1, int m, int n, int k,
                        bool trans_a, bool trans_b, float alpha, float beta);
    void (*add)(ft_backend *be, float *y, const float *x, size_t n);      /* y += x */
    void (*scale)(ft_backend *be, float *x, float s, size_t n);           /* x *= s */
    double (*sum_squares)(ft_backend *be, const float *x, size_t n);     /* sum x^2 in fp64 */
    /* *result = sum_squares(x, n), bitwise, with no host wait: queued on the current lane
     * (lane_fork, below), result a double in the backend's memory, read back with
     * download once the work is ordered before it (optional: NULL where a backend has
     * no lanes). */
    void (*sum_squares_start)(ft_backend *be, const float *x, size_t n, double *result);
    /* out[i] = sum_squares(x[i], n[i]) for i < count (out on the host), each bitwise what
     * sum_squares gives, with one wait for the device instead of one per buffer. */
    void (*sum_squares_each)(ft_backend *be, const float *const *x, const size_t *n, int count,
                             double *out);

    /* ---- transformer ops ---- */
    /* y = x * rstd * w with rstd = 1/sqrt(mean(x^2) + eps) per row; rstd saved [rows]. */
    void (*rmsnorm_fwd)(ft_backend *be, ft_dtype dt, void *y, float *rstd, const void *x,
                        const void *w, int rows, int dim, float eps);
    /* dx = dx_base + d/dx, dw += d/dw (dw stored as gt). dx_base is dx itself (dx
     * accumulates), another [rows, dim] buffer of dt (a residual's gradient, so that no
     * copy of it into dx comes first), or NULL (dx = d/dx). */
    void (*rmsnorm_bwd)(ft_backend *be, ft_dtype dt, ft_dtype gt, void *dx, const void *dx_base,
                        void *dw, const void *dy, const void *x, const void *w,
                        const float *rstd, int rows, int dim);

    /* LayerNorm with bias (GPT-NeoX, GPT-J), per row of dim values:
     *   mean = sum(x)/dim, var = sum((x - mean)^2)/dim (biased, as torch.nn.LayerNorm),
     *   rstd = 1/sqrt(var + eps), y = (x - mean) * rstd * w + b (y overwrite).
     * mean and rstd [rows] (fp32) are saved for the backward. */
    void (*layernorm_fwd)(ft_backend *be, ft_dtype dt, void *y, float *mean, float *rstd,
                          const void *x, const void *w, const void *b, int rows, int dim,
                          float eps);
    /* With xhat = (x - mean) * rstd and g = dy * w, per row:
     *   dx = dx_base + rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)),
     *   dw += sum over rows of dy * xhat,  db += sum over rows of dy.
     * dx_base as in rmsnorm_bwd; dw and db accumulate, stored as gt. Each column's sum over
     * the rows is added in an order fixed by rows and dim (the CPU: row order; CUDA:
     * fixed row chunks, then the chunks in order), so results do not depend on threads
     * or differ between runs. */
    void (*layernorm_bwd)(ft_backend *be, ft_dtype dt, ft_dtype gt, void *dx,
                          const void *dx_base, void *dw, void *db, const void *dy, const void *x,
                          const void *w, const float *mean, const float *rstd, int rows,
                          int dim);

    /* Rotary embedding in place on x [tokens, n_heads*r.head_dim]: in each head the
     * pairs of the first r.rot_dim dimensions (ft_rope_shape) rotate, pair i by
     * angle = pos[t] * inv_freq[i]:
     *   x'_a = x_a cos - x_b sin,  x'_b = x_a sin + x_b cos   (a, b the pair's dims).
     * cos_table/sin_table are [max_pos, r.rot_dim/2] (precomputed once, fp32 angles).
     * inverse = true rotates by -angle: the backward pass of the forward rotation. */
    void (*rope)(ft_backend *be, ft_dtype dt, void *x, const float *cos_table,
                 const float *sin_table, const int32_t *pos, int tokens, int n_heads,
                 ft_rope_shape r, bool inverse);
    /* rope of q [tokens, q_heads*r.head_dim] and k [tokens, k_heads*r.head_dim] at the
     * same positions: bitwise rope(q) then rope(k), in one launch on CUDA. */
    void (*rope_qk)(ft_backend *be, ft_dtype dt, void *q, int q_heads, void *k, int k_heads,
                    const float *cos_table, const float *sin_table, const int32_t *pos,
                    int tokens, ft_rope_shape r, bool inverse);

    /* Causal attention with document masking (flash attention: tiled, online softmax).
     * Query token i of a row attends key token j of the same row iff j <= i,
     * segment[j] == segment[i] and, when s.window > 0, j > i - s.window; segment ==
     * NULL means one document per row. Key tiles wholly outside the window are
     * skipped, so a window makes long sequences cost O(T x window).
     * out [tokens, n_heads*head_dim] overwrite; lse [batch, n_heads, seq_len] overwrite
     * (natural-log sum of exp of the scaled scores, kept for the backward).
     * Scale is 1/sqrt(head_dim). */
    void (*attention_fwd)(ft_backend *be, ft_dtype dt, void *out, float *lse, const void *q,
                          const void *k, const void *v, const int32_t *segment, ft_attn_shape s);
    /* Recomputes the probabilities from q, k, lse. dq, dk, dv overwrite. */
    void (*attention_bwd)(ft_backend *be, ft_dtype dt, void *dq, void *dk, void *dv,
                          const void *dout, const void *out, const float *lse, const void *q,
                          const void *k, const void *v, const int32_t *segment, ft_attn_shape s);

    /* The host copy of the segment ids just uploaded to `segment` ([s.batch * s.seq_len]
     * int32, read during the call only). A backend that needs the ids on the host (CUDA's
     * cuDNN attention derives a document table from them) takes them from here instead
     * of copying them back, with a stream synchronisation, at every attention call. It
     * holds for attention calls with this pointer and batch/seq_len until the next hint,
     * or until the buffer is written any other way (upload, copy, zero, free), after
     * which calls take the slow path again: never stale ids. No-op on the CPU. */
    void (*segment_hint)(ft_backend *be, const int32_t *segment, const int32_t *segment_host,
                         ft_attn_shape s);

    /* Attention of new tokens against a key/value cache (incremental decoding; forward
     * only). One sequence: q [n_new, n_heads*head_dim] holds the queries of positions
     * past .. past+n_new-1; k_cache and v_cache [>= past+n_new, n_kv_heads*head_dim]
     * hold the keys (after RoPE) and values of positions 0 .. past+n_new-1, the new
     * tokens' included. New token i attends keys j <= past + i (causal, one document)
     * and, when window > 0, j > past + i - window (the sliding window of attention_fwd).
     * out [n_new, n_heads*head_dim] overwrite. Scale 1/sqrt(head_dim); GQA by
     * indexing as in attention_fwd. Equals attention_fwd on the whole sequence, at
     * the new rows, up to rounding. */
    void (*attention_decode)(ft_backend *be, ft_dtype dt, void *out, const void *q,
                             const void *k_cache, const void *v_cache, int past, int n_new,
                             int n_heads, int n_kv_heads, int head_dim, int window);

    /* Bias of a linear layer (Qwen2's q/k/v projections, GPT-NeoX's and GPT-J's layers).
     * y[rows, dim] += b[dim], the same b added to every row. b is stored as dt, y as
     * yt: dt for activations, FT_DTYPE_F32 for a bias added to fp32 logits (GPT-J's
     * lm_head); the sum is fp32, rounded once into a bf16 y. */
    void (*bias_add)(ft_backend *be, ft_dtype dt, ft_dtype yt, void *y, const void *b, int rows,
                     int dim);
    /* Its gradient: db[dim] += sum over rows of dy[rows, dim] (accumulate; db stored
     * as gt), each column summed in row order, so the result does not depend on
     * threads. */
    void (*bias_grad)(ft_backend *be, ft_dtype dt, ft_dtype gt, void *db, const void *dy,
                      int rows, int dim);

    /* out = silu(gate) * up over n elements (overwrite). */
    void (*swiglu_fwd)(ft_backend *be, ft_dtype dt, void *out, const void *gate, const void *up,
                       size_t n);
    /* dgate, dup overwrite. out: NULL, or where the forward's output silu(gate) * up is
     * written too, bitwise swiglu_fwd's (a recompute that skipped the forward makes it
     * here, in the pass that reads gate and up anyway). out may be dout's buffer (each
     * element is read before it is written), as dgate and dup may be gate's and up's. */
    void (*swiglu_bwd)(ft_backend *be, ft_dtype dt, void *dgate, void *dup, const void *dout,
                       const void *gate, const void *up, size_t n, void *out);

    /* out = gelu(x) over n elements (overwrite); kind: ft_gelu_kind. */
    void (*gelu_fwd)(ft_backend *be, ft_dtype dt, ft_gelu_kind kind, void *out, const void *x,
                     size_t n);
    /* dx = gelu'(x) * dout (overwrite; dx may be the same buffer as dout). */
    void (*gelu_bwd)(ft_backend *be, ft_dtype dt, ft_gelu_kind kind, void *dx, const void *dout,
                     const void *x, size_t n);

    /* Inverted dropout with a recomputed mask (backend/dropout_mask.h) over x [rows, cols]:
     *   y[i,j] = keep(m, i, j) ? x[i,j] * m.scale : 0        (overwrite; y may be x)
     *   y[i,j] += that                                        (accumulate; y != x)
     * The product and the sum are each one fp32 rounding (then one rounding to bf16
     * storage), and the mask a function of (m.seed, m.row0 + i, j) alone, so the CUDA
     * backend gives the CPU's bits for any thread count and any split of the rows. */
    void (*dropout)(ft_backend *be, ft_dtype dt, void *y, const void *x, int rows, int cols,
                    ft_dropout_mask m, bool accumulate);
    /* out[t,:] = table[ids[t],:] (overwrite). */
    void (*embedding_fwd)(ft_backend *be, ft_dtype dt, void *out, const void *table,
                          const int32_t *ids, int tokens, int dim);
    /* dtable[ids[t],:] += dout[t,:], deterministic (same order every run); dtable
     * stored as gt (bf16: each row's contributions summed in fp32, rounded once). */
    void (*embedding_bwd)(ft_backend *be, ft_dtype dt, ft_dtype gt, void *dtable,
                          const void *dout, const int32_t *ids, int tokens, int dim);

    /* Cross-entropy on a chunk of rows, fused with its gradient.
     * In: logits [rows, vocab] stored as lt (fp32, or bf16: widened exactly, then the
     * fp32 arithmetic). Out: dlogits [rows, vocab] stored as dt =
     * weight[r] * grad_scale * (softmax - onehot(target)), each element rounded once
     * (bf16: the bits the f32_to_bf16 of the fp32 result would give, without that result
     * being stored), and row_loss[r] = weight[r] * (logsumexp - logit[target])
     * (overwrite). dlogits may be logits itself (in place) when lt == dt.
     * Rows with weight 0 produce zero gradient and zero loss; their target is not read. */
    void (*cross_entropy)(ft_backend *be, const void *logits, ft_dtype lt, void *dlogits,
                          ft_dtype dt, float *row_loss, const int32_t *targets,
                          const float *weight, int rows, int vocab, float grad_scale);

    /* ---- optimizers over flat fp32 buffers ---- */
    void (*adamw_step)(ft_backend *be, float *param, const float *grad, float *m, float *v,
                       size_t n, const ft_adamw_params *p);
    void (*sgd_step)(ft_backend *be, float *param, const float *grad, float *momentum_buf,
                     size_t n, const ft_sgd_params *p);
    /* Optional. The bf16 bits adamw_step(param, grad, m, v, n, p) would write to
     * p->bf16_out for rows[0..n_rows) of the [*, row_len] matrix those buffers start with,
     * and nothing else written: out[k * row_len + j] = the bits of element
     * rows[k] * row_len + j (out [n_rows, row_len], rows on the backend, p->bf16_out
     * unused). Lets the next forward's embedding lookup read its rows of the updated table
     * before the whole table's update has run (shard/engine_lookup.c). */
    void (*adamw_rows_bf16)(ft_backend *be, uint16_t *out, const float *param,
                            const float *grad, const float *m, const float *v,
                            const int32_t *rows, size_t n_rows, size_t row_len,
                            const ft_adamw_params *p);

    /* ---- casts (bf16 stored as raw uint16 bits, round to nearest even) ---- */
    void (*f32_to_bf16)(ft_backend *be, uint16_t *dst, const float *src, size_t n);
    void (*bf16_to_f32)(ft_backend *be, float *dst, const uint16_t *src, size_t n);

    /* ---- initial values ---- */
    /* dst[i] = (float)(std * ft_rng_normal(seed, stream, first + i)) for i < n, bitwise
     * (util/rng_fill.h): a device makes them in its own memory. */
    void (*normal_fill)(ft_backend *be, float *dst, size_t n, uint64_t seed, uint64_t stream,
                        uint64_t first, double std);

    /* ---- step-phase timing (optional: NULL when a backend has none) ---- */
    /* A span of phase p opens and closes at the point of the backend's work these calls
     * are made at (CUDA: events on its stream, so the device's time; CPU: the wall clock,
     * its ops being synchronous). phase_collect waits for the work, adds each phase's
     * spans since the last collect into ms[FT_PHASE_COUNT] (milliseconds; zeroed first)
     * and forgets them. Spans of one phase do not nest. */
    void (*phase_begin)(ft_backend *be, ft_phase p);
    void (*phase_end)(ft_backend *be, ft_phase p);
    void (*phase_collect)(ft_backend *be, double *ms);

    /* ---- a side lane of work (optional: NULL when a backend runs its ops in order) ----
     * What the optimizer's update needs to run beside the next step's forward (the CUDA
     * backend: a second stream, of lower priority than the main one). Ops run on the
     * main lane unless between lane_fork and lane_join.
     *   lane_fork:     the ops that follow go to the side lane, ordered after everything
     *                  queued on the main lane so far; with phases, the step phases open
     *                  at the fork (phase_begin) time the side lane's work from there to
     *                  their end instead (the optimizer's span);
     *   lane_mark(id): mark id (>= 0) completes with the side lane's work so far
     *                  (recording an id again moves it);
     *   lane_join:     the ops that follow go to the main lane again, which does not
     *                  wait for the side lane;
     *   lane_await(id): the main lane's next ops wait for mark id (-1: for all the work
     *                  queued on the side lane so far);
     *   lane_sync:     the host waits for the work queued on the side lane so far, not
     *                  for the main lane's (the offloaded optimizer's wait for a download
     *                  while an upload runs on).
     * The side lane is for ops on buffers nothing else touches until awaited (the
     * optimizer's, sum_squares_start): it must not allocate or free. Host waits (sync,
     * download, sum_squares) wait for the current lane only. */
    void (*lane_fork)(ft_backend *be, bool phases);
    void (*lane_mark)(ft_backend *be, int id);
    void (*lane_join)(ft_backend *be);
    void (*lane_await)(ft_backend *be, int id);
    void (*lane_sync)(ft_backend *be);

    void (*destroy)(ft_backend *be);
} ft_backend_ops;

struct ft_backend {
    const ft_backend_ops *ops;
    const char *name;   /* "cpu" or "cuda": for messages; decide on the flags below */
    /* Tensors live in host memory, allocated from the process heap: the process's
     * resident high-water mark is the honest peak, and the model must fit in RAM. */
    bool host_memory;
    int device;         /* device ordinal for CUDA, -1 for CPU */
    char device_name[128]; /* as the driver reports it ("NVIDIA H100 80GB HBM3"), or the
                            * CPU's model name; what the MFU peak table is keyed by */
    size_t memory_total; /* the device's memory (host RAM for the CPU); 0 unknown */
    size_t bytes_in_use;
    size_t peak_bytes;  /* high-water mark of alloc()'d bytes */
    bool time_phases;   /* the model and the trainer mark phases (profile_phases) */
    void *impl;         /* implementation state, owned by the backend */
};

/* Creates the CPU backend (threads from OpenMP). */
int ft_backend_cpu_create(ft_backend **out, ft_error *err);

/* Creates the CUDA backend on the given device; fails with a clear message in a
 * build without CUDA or on a machine without a GPU. */
int ft_backend_cuda_create(ft_backend **out, int device, ft_error *err);

static inline void ft_backend_destroy(ft_backend *be)
{
    if (be)
        be->ops->destroy(be);
}

#endif
