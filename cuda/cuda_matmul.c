/* Dense matmul through cuBLASLt with fp32 accumulation (CUBLAS_COMPUTE_32F: no
 * TF32). Operands are fp32 or bf16 each (ft_gemm_types): bf16 a and b run on the
 * tensor cores with fp32 accumulation, and c may be fp32 (a weight gradient that
 * accumulates, or logits) or bf16 (an activation, rounded once after alpha/beta).
 *
 * The vtable is row-major: c[m,n] = alpha * op(a) op(b) + beta * c, with a
 * stored [m,k] ([k,m] when trans_a) and b stored [k,n] ([n,k] when trans_b).
 * cuBLASLt is column-major, and a row-major matrix read as column-major is its
 * transpose. So the backend computes the transposed product
 *     c^T [n,m] = op(b)^T [n,k] * op(a)^T [k,m]
 * in column-major terms, with cuBLAS's first operand being our b and its
 * second our a:
 *   - b stored [k,n] row-major is [n,k] column-major (ld n) = op(b)^T: no
 *     transposition; stored [n,k] (trans_b) it is [k,n] column-major (ld k) and
 *     needs CUBLAS_OP_T;
 *   - a stored [m,k] row-major is [k,m] column-major (ld k) = op(a)^T: no
 *     transposition; stored [k,m] (trans_a) it is [m,k] column-major (ld m) and
 *     needs CUBLAS_OP_T;
 *   - c [m,n] row-major is [n,m] column-major with ld n.
 *
 * Descriptors and the heuristic's algorithm are cached per (m, n, k, trans_a,
 * trans_b, operand alignments): a training step repeats the same few shapes,
 * and the heuristic query costs tens of microseconds. The alignment is part of
 * the key because the heuristic may pick kernels that need 16-byte (or larger)
 * aligned operands, and callers pass pointers into the middle of buffers.
 * cuBLASLt's results are run-to-run reproducible for a fixed algorithm and
 * workspace on one stream (its split-K reductions are ordered), so the matmul
 * is deterministic. beta == 0 never reads c. matmul_add gives cuBLASLt a C distinct
 * from D (the residual stream read, the sum written elsewhere): with C and D aligned
 * alike, the same plan, so the same kernel and bits, as a copy of C into D followed by the
 * accumulating matmul.
 *
 * matmul_pair issues two GEMMs of one shape as a strided batch of two (cuBLASLt's
 * BATCH_COUNT and STRIDED_BATCH_OFFSET on every layout) when each operand's second
 * matrix lies a fixed non-negative number of elements after its first (0: a shared
 * input). A projection pair of one input (K and V: 4096 x 512 x 2048 at Llama-3.2-1B, 64
 * output tiles of 128 x 256 on 132 SMs) then fills the GPU in one launch instead of half
 * filling it twice. Plans for pairs are keyed like single ones plus which operands are
 * shared; the strides themselves are set on the plan's layouts at each call (they do not
 * change the problem the heuristic chose for). If cuBLASLt offers no algorithm for a
 * batched problem, the plan remembers it and the pair runs as two matmuls. */
#include "cuda_state.h"

#include <stdio.h>
#include <stdlib.h>

static void lt_check(cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS)
        return;
    fprintf(stderr, "ftmpi: CUDA backend: %s: %s\n", what, cublasLtGetStatusString(s));
    abort();
}

static unsigned ptr_align(const void *p)
{
    uintptr_t u = (uintptr_t)p;
    unsigned a = 256;
    while (a > 1 && (u & (a - 1)) != 0)
        a >>= 1;
    return a;
}

static unsigned min_align(const void *x, const void *y)
{
    return ptr_align(x) < ptr_align(y) ? ptr_align(x) : ptr_align(y);
}

static cudaDataType_t lt_type(ft_dtype t) { return t == FT_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

static int types_equal(ft_gemm_types x, ft_gemm_types y)
{
    return x.a == y.a && x.b == y.b && x.c == y.c;
}

static void plan_destroy(ft_cuda_mm_plan *p)
{
    if (!p->valid)
        return;
    cublasLtMatrixLayoutDestroy(p->la);
    cublasLtMatrixLayoutDestroy(p->lb);
    cublasLtMatrixLayoutDestroy(p->lc);
    cublasLtMatmulDescDestroy(p->desc);
    p->valid = 0;
}

void ft_cuda_matmul_release(ft_cuda_state *st)
{
    for (int i = 0; i < FT_CUDA_MM_PLANS; i++)
        plan_destroy(&st->plans[i]);
}

/* A pair's batch of two on the plan's layouts: la is our b, lb our a (see above). */
static void plan_set_strides(ft_cuda_mm_plan *p, int64_t stride_a, int64_t stride_b,
                             int64_t stride_c)
{
    const int32_t batch = p->batch;
    cublasLtMatrixLayout_t layouts[3] = { p->la, p->lb, p->lc };
    const int64_t strides[3] = { stride_b, stride_a, stride_c };
    for (int i = 0; i < 3; i++) {
        lt_check(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                  &batch, sizeof batch),
                 "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
        lt_check(cublasLtMatrixLayoutSetAttribute(layouts[i],
                                                  CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                  &strides[i], sizeof strides[i]),
                 "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
    }
    p->stride_a = stride_a;
    p->stride_b = stride_b;
    p->stride_c = stride_c;
}

static void plan_build(ft_cuda_state *st, ft_cuda_mm_plan *p)
{
    cublasOperation_t op_first = p->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N; /* our b */
    cublasOperation_t op_second = p->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N; /* our a */
    uint64_t b_rows = p->trans_b ? (uint64_t)p->k : (uint64_t)p->n;
    uint64_t b_cols = p->trans_b ? (uint64_t)p->n : (uint64_t)p->k;
    uint64_t a_rows = p->trans_a ? (uint64_t)p->m : (uint64_t)p->k;
    uint64_t a_cols = p->trans_a ? (uint64_t)p->k : (uint64_t)p->m;

    lt_check(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
             "cublasLtMatmulDescCreate");
    lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                            sizeof op_first),
             "cublasLtMatmulDescSetAttribute(TRANSA)");
    lt_check(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                            sizeof op_second),
             "cublasLtMatmulDescSetAttribute(TRANSB)");
    lt_check(cublasLtMatrixLayoutCreate(&p->la, lt_type(p->types.b), b_rows, b_cols, (int64_t)b_rows),
             "cublasLtMatrixLayoutCreate(b)");
    lt_check(cublasLtMatrixLayoutCreate(&p->lb, lt_type(p->types.a), a_rows, a_cols, (int64_t)a_rows),
             "cublasLtMatrixLayoutCreate(a)");
    lt_check(cublasLtMatrixLayoutCreate(&p->lc, lt_type(p->types.c), (uint64_t)p->n, (uint64_t)p->m,
                                        (int64_t)p->n),
             "cublasLtMatrixLayoutCreate(c)");
    if (p->batch > 1)
        plan_set_strides(p, p->stride_a, p->stride_b, p->stride_c);

    cublasLtMatmulPreference_t pref;
    lt_check(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    uint64_t ws = FT_CUDA_LT_WORKSPACE;
    uint32_t al_first = p->align_b, al_second = p->align_a, al_c = p->align_c;
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                  &ws, sizeof ws),
             "cublasLtMatmulPreferenceSetAttribute(workspace)");
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                  &al_first, sizeof al_first),
             "cublasLtMatmulPreferenceSetAttribute(align A)");
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                  &al_second, sizeof al_second),
             "cublasLtMatmulPreferenceSetAttribute(align B)");
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                  &al_c, sizeof al_c),
             "cublasLtMatmulPreferenceSetAttribute(align C)");
    lt_check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                  &al_c, sizeof al_c),
             "cublasLtMatmulPreferenceSetAttribute(align D)");

    cublasLtMatmulHeuristicResult_t result;
    int count = 0;
    cublasStatus_t found = cublasLtMatmulAlgoGetHeuristic(st->lt, p->desc, p->la, p->lb, p->lc,
                                                          p->lc, pref, 1, &result, &count);
    cublasLtMatmulPreferenceDestroy(pref);
    if (p->batch > 1 && (found != CUBLAS_STATUS_SUCCESS || count < 1)) {
        /* a batch this cuBLASLt does not take (NOT_SUPPORTED or no algorithm): matmul_pair
         * runs two matmuls, correct but slower; said once, for whoever reads a benchmark */
        if (!st->pair_fallback_told) {
            st->pair_fallback_told = 1;
            fprintf(stderr,
                    "ftmpi: CUDA backend: note: cuBLASLt took no strided batch for a GEMM "
                    "pair (m=%d n=%d k=%d, %s): such pairs run as two GEMMs\n",
                    p->m, p->n, p->k,
                    found != CUBLAS_STATUS_SUCCESS ? cublasLtGetStatusString(found)
                                                   : "no algorithm offered");
        }
        p->no_algo = 1;
        p->valid = 1;
        return;
    }
    lt_check(found, "cublasLtMatmulAlgoGetHeuristic");
    if (count < 1) {
        fprintf(stderr,
                "ftmpi: CUDA backend: cuBLASLt has no algorithm for matmul m=%d n=%d k=%d "
                "trans_a=%d trans_b=%d a/b/c %s/%s/%s (alignments %u/%u/%u bytes)\n",
                p->m, p->n, p->k, p->trans_a, p->trans_b, ft_dtype_name(p->types.a),
                ft_dtype_name(p->types.b), ft_dtype_name(p->types.c), p->align_a, p->align_b,
                p->align_c);
        abort();
    }
    p->algo = result.algo;
    p->valid = 1;
}

/* The plan's identity: shape, types, alignments, and for a pair which operands are
 * shared (stride 0); a pair's stride values are set per call. */
static int plan_matches(const ft_cuda_mm_plan *p, const ft_cuda_mm_plan *want)
{
    return p->valid && p->m == want->m && p->n == want->n && p->k == want->k &&
           p->trans_a == want->trans_a && p->trans_b == want->trans_b &&
           types_equal(p->types, want->types) && p->align_a == want->align_a &&
           p->align_b == want->align_b && p->align_c == want->align_c &&
           p->batch == want->batch && (p->stride_a == 0) == (want->stride_a == 0) &&
           (p->stride_b == 0) == (want->stride_b == 0);
}

static ft_cuda_mm_plan *plan_get(ft_cuda_state *st, const ft_cuda_mm_plan *want)
{
    ft_cuda_mm_plan *victim = &st->plans[0];
    st->mm_clock++;
    for (int i = 0; i < FT_CUDA_MM_PLANS; i++) {
        ft_cuda_mm_plan *p = &st->plans[i];
        if (plan_matches(p, want)) {
            p->last_use = st->mm_clock;
            if (p->batch > 1 && !p->no_algo &&
                (p->stride_a != want->stride_a || p->stride_b != want->stride_b ||
                 p->stride_c != want->stride_c))
                plan_set_strides(p, want->stride_a, want->stride_b, want->stride_c);
            return p;
        }
        /* Least recently used, empty slots first. */
        if (!p->valid ? victim->valid : (victim->valid && p->last_use < victim->last_use))
            victim = p;
    }
    plan_destroy(victim);
    *victim = *want;
    victim->valid = 0;
    victim->no_algo = 0;
    plan_build(st, victim);
    victim->last_use = st->mm_clock;
    return victim;
}

/* d = alpha op(a) op(b) + beta c: cuBLASLt's C and D (the same layout; the same buffer
 * for the vtable's matmul, distinct for matmul_add). The plan's C/D alignment is the
 * smaller of the two pointers'. */
static void matmul_run(ft_backend *be, ft_gemm_types t, void *d, const void *c, const void *a,
                       const void *b, int m, int n, int k, bool trans_a, bool trans_b,
                       float alpha, float beta)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    const ft_cuda_mm_plan want = { .m = m, .n = n, .k = k, .trans_a = trans_a ? 1 : 0,
                                   .trans_b = trans_b ? 1 : 0, .types = t,
                                   .align_a = ptr_align(a), .align_b = ptr_align(b),
                                   .align_c = min_align(d, c), .batch = 1 };
    ft_cuda_mm_plan *p = plan_get(st, &want);
    lt_check(cublasLtMatmul(st->lt, p->desc, &alpha, b, p->la, a, p->lb, &beta, c, p->lc, d,
                            p->lc, &p->algo, st->lt_workspace, FT_CUDA_LT_WORKSPACE, st->stream),
             "cublasLtMatmul");
}

void ft_cuda_matmul(ft_backend *be, ft_gemm_types t, void *c, const void *a, const void *b, int m,
                    int n, int k, bool trans_a, bool trans_b, float alpha, float beta)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) {
        /* Empty inner dimension: c = beta * c (exactly 0 when beta == 0). */
        ft_cuda_check(ft_cuda_launch_beta_scale(c, t.c, beta, (size_t)m * (size_t)n, st->stream),
                      "matmul (k = 0)");
        return;
    }
    matmul_run(be, t, c, c, a, b, m, n, k, trans_a, trans_b, alpha, beta);
}

void ft_cuda_matmul_add(ft_backend *be, ft_gemm_types t, void *d, const void *c, const void *a,
                        const void *b, int m, int n, int k, bool trans_a, bool trans_b)
{
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) { /* d = c: the backend's copy (nothing when d is c) */
        be->ops->copy(be, d, c, (size_t)m * (size_t)n * ft_dtype_size(t.c));
        return;
    }
    matmul_run(be, t, d, c, a, b, m, n, k, trans_a, trans_b, 1.0f, 1.0f);
}

/* The distance from x0 to x1 in elements of type t: 0 when they are one matrix, -1 when
 * x1 lies before x0 or not a whole number of elements after it (no strided batch). */
static int64_t batch_stride(const void *x0, const void *x1, ft_dtype t)
{
    const uintptr_t u0 = (uintptr_t)x0, u1 = (uintptr_t)x1, es = ft_dtype_size(t);
    if (u1 < u0 || (u1 - u0) % es != 0)
        return -1;
    return (int64_t)((u1 - u0) / es);
}

void ft_cuda_matmul_pair(ft_backend *be, ft_gemm_types t, void *c0, void *c1, const void *a0,
                         const void *a1, const void *b0, const void *b1, int m, int n, int k,
                         bool trans_a, bool trans_b, float alpha, float beta)
{
    if (m <= 0 || n <= 0)
        return;
    const int64_t sa = batch_stride(a0, a1, t.a), sb = batch_stride(b0, b1, t.b);
    const int64_t sc = batch_stride(c0, c1, t.c);
    /* the outputs must not overlap: D's batches are written concurrently */
    if (k > 0 && sa >= 0 && sb >= 0 && sc >= (int64_t)m * n) {
        ft_cuda_state *st = ft_cuda_state_of(be);
        const ft_cuda_mm_plan want = {
            .m = m, .n = n, .k = k, .trans_a = trans_a ? 1 : 0, .trans_b = trans_b ? 1 : 0,
            .types = t, .align_a = min_align(a0, a1), .align_b = min_align(b0, b1),
            .align_c = min_align(c0, c1), .batch = 2, .stride_a = sa, .stride_b = sb,
            .stride_c = sc
        };
        ft_cuda_mm_plan *p = plan_get(st, &want);
        if (!p->no_algo) {
            lt_check(cublasLtMatmul(st->lt, p->desc, &alpha, b0, p->la, a0, p->lb, &beta, c0,
                                    p->lc, c0, p->lc, &p->algo, st->lt_workspace,
                                    FT_CUDA_LT_WORKSPACE, st->stream),
                     "cublasLtMatmul (a pair as a batch of two)");
            return;
        }
    }
    ft_cuda_matmul(be, t, c0, a0, b0, m, n, k, trans_a, trans_b, alpha, beta);
    ft_cuda_matmul(be, t, c1, a1, b1, m, n, k, trans_a, trans_b, alpha, beta);
}
