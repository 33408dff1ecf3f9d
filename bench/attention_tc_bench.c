/* Tensor-core attention throughput: ftmpi's bf16 flash attention forward and backward
 * (cuda/cuda_attention_tc*.cu) timed with CUDA events, causal, batch x heads chosen so
 * that every sequence length processes the same tokens; optionally with a sliding window
 * (Mistral) and/or packed documents of DOC_LEN tokens (segment ids t / DOC_LEN).
 *
 *   attention_tc_bench [--cudnn] HEAD_DIM SEQ [BATCH HEADS [WINDOW [DOC_LEN]]]
 * prints one line:
 *   tc_attention hd=.. seq=.. fwd_ms=.. fwd_tflops=.. bwd_ms=.. bwd_tflops=..
 * With --cudnn the same shapes go through ftmpi's cuDNN path (cuda_attention_cudnn.c, what
 * the backend runs by default in a build with cuDNN), on a CUDA backend and its stream,
 * timed on the host around a synchronised batch of calls: "cudnn_attention ..." or
 * "cudnn_attention declined" when cuDNN does not take the shape.
 *
 * FLOPs (FlashAttention's convention): forward 4 D per visible (query, key) pair per
 * (batch, head), backward 2.5x that; causal alone has T(T+1)/2 pairs, a window or
 * documents fewer, all counted exactly by ft_mask_visible_pairs (attention_mask.h,
 * the rule the kernels use), so the skipped tiles do not count as work.
 * Built and run by bench/gpu_attention.sh. */
#include "backend/attention_mask.h"
#include "backend/backend.h"
#include "cuda_attention_cudnn.h"
#include "cuda_internal.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *dev(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        fprintf(stderr, "attention_tc_bench: out of device memory (%zu bytes)\n", bytes);
        exit(1);
    }
    cudaMemset(p, 0, bytes); /* bf16 zeros; the timing does not depend on the values */
    return p;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* ms per forward and per backward call through the cuDNN path; -1 when declined */
static int time_cudnn(ft_attn_shape s, const int32_t *segment, void *out, float *lse,
                      const void *q, const void *k, const void *v, const void *dout, void *dq,
                      void *dk, void *dv, int reps, float *fwd_ms, float *bwd_ms)
{
    ft_error err;
    ft_backend *be = NULL;
    if (ft_backend_cuda_create(&be, 0, &err)) {
        fprintf(stderr, "attention_tc_bench: %s\n", err.msg);
        return -1;
    }
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) { /* pass 0 warms up (plans) */
        be->ops->sync(be);
        double t0 = now();
        for (int r = 0; r < reps && rc == 0; r++)
            rc = ft_cudnn_attention_fwd(be, out, lse, q, k, v, segment, s);
        be->ops->sync(be);
        double t1 = now();
        for (int r = 0; r < reps && rc == 0; r++)
            rc = ft_cudnn_attention_bwd(be, dq, dk, dv, dout, out, lse, q, k, v, segment, s);
        be->ops->sync(be);
        *fwd_ms = (float)(1e3 * (t1 - t0) / reps);
        *bwd_ms = (float)(1e3 * (now() - t1) / reps);
    }
    ft_backend_destroy(be);
    return rc == FT_CUDNN_DONE ? 0 : -1;
}

int main(int argc, char **argv)
{
    const int cudnn = argc > 1 && strcmp(argv[1], "--cudnn") == 0;
    if (cudnn) {
        argv++;
        argc--;
    }
    if (argc < 3) {
        fprintf(stderr,
                "usage: attention_tc_bench HEAD_DIM SEQ [BATCH HEADS [WINDOW [DOC_LEN]]]\n");
        return 2;
    }
    int hd = atoi(argv[1]), seq = atoi(argv[2]);
    int heads = argc > 4 ? atoi(argv[4]) : 2048 / hd;
    int batch = argc > 3 ? atoi(argv[3]) : (16384 / seq > 0 ? 16384 / seq : 1);
    int window = argc > 5 ? atoi(argv[5]) : 0, doc_len = argc > 6 ? atoi(argv[6]) : 0;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("no GPU\n");
        return 77;
    }
    ft_attn_shape s = {batch, seq, heads, heads, hd, window};
    size_t n = (size_t)batch * seq * heads * hd, nl = (size_t)batch * heads * seq;
    int32_t *segment = NULL;
    if (doc_len > 0) {
        size_t tokens = (size_t)batch * seq;
        int32_t *h = malloc(tokens * sizeof *h);
        for (size_t i = 0; i < tokens; i++)
            h[i] = (int32_t)((i % (size_t)seq) / (size_t)doc_len);
        segment = dev(tokens * sizeof *h);
        cudaMemcpy(segment, h, tokens * sizeof *h, cudaMemcpyHostToDevice);
        free(h);
    }
    uint16_t *q = dev(n * 2), *k = dev(n * 2), *v = dev(n * 2), *dout = dev(n * 2);
    /* bf16 storage of out, dq, dk, dv: what precision = "bf16" runs */
    uint16_t *out = dev(n * 2), *dq = dev(n * 2), *dk = dev(n * 2), *dv = dev(n * 2);
    float *lse = dev(nl * 4);
    void *scratch = dev(ft_cuda_attention_bwd_bf16_scratch_bytes(s));
    void *fscratch = dev(ft_cuda_attention_fwd_bf16_scratch_bytes(s));
    const int reps = 10;
    float fwd_ms = 0, bwd_ms = 0;
    double flops = 4.0 * batch * heads * ft_mask_visible_pairs(seq, window, doc_len) * hd;
    if (cudnn) {
        cudaDeviceSynchronize(); /* the zeroing above ran on the default stream */
        if (time_cudnn(s, segment, out, lse, q, k, v, dout, dq, dk, dv, reps, &fwd_ms, &bwd_ms)) {
            printf("cudnn_attention hd=%d seq=%d declined\n", hd, seq);
            return 0;
        }
        printf("cudnn_attention hd=%d seq=%d batch=%d heads=%d window=%d doc_len=%d fwd_ms=%.3f "
               "fwd_tflops=%.1f bwd_ms=%.3f bwd_tflops=%.1f\n",
               hd, seq, batch, heads, window, doc_len, fwd_ms, flops / fwd_ms / 1e9, bwd_ms,
               2.5 * flops / bwd_ms / 1e9);
        return 0;
    }
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaError_t launched = cudaSuccess; /* the first failed launch's error */
    for (int pass = 0; pass < 2; pass++) { /* pass 0 warms up */
        cudaEventRecord(a, 0);
        for (int r = 0; r < reps; r++) {
            cudaError_t e = ft_cuda_launch_attention_fwd_bf16(FT_DTYPE_BF16, out, lse, q, k, v,
                                                              segment, s, fscratch, 0);
            launched = launched == cudaSuccess ? e : launched;
        }
        cudaEventRecord(b, 0);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&fwd_ms, a, b);
        cudaEventRecord(a, 0);
        for (int r = 0; r < reps; r++) {
            cudaError_t e = ft_cuda_launch_attention_bwd_bf16(FT_DTYPE_BF16, dq, dk, dv, dout, out,
                                                              lse, q, k, v, segment, s, scratch, 0);
            launched = launched == cudaSuccess ? e : launched;
        }
        cudaEventRecord(b, 0);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&bwd_ms, a, b);
    }
    if (launched == cudaSuccess)
        launched = cudaGetLastError();
    if (launched != cudaSuccess) {
        fprintf(stderr, "attention_tc_bench: a launch failed: %s\n", cudaGetErrorString(launched));
        return 1;
    }
    fwd_ms /= reps;
    bwd_ms /= reps;
    /* the forward's instructions and the dK/dV block the backward ran (the FTMPI_TC_*
     * switches, where the device and the build take them) */
    static const char *const layout[] = {"own", "wide", "shared"};
    printf("tc_attention hd=%d seq=%d batch=%d heads=%d window=%d doc_len=%d fwd_ms=%.3f "
           "fwd_tflops=%.1f bwd_ms=%.3f bwd_tflops=%.1f fwd_mma=%s bwd_mma=%s bwd_layout=%s\n",
           hd, seq, batch, heads, window, doc_len, fwd_ms, flops / fwd_ms / 1e9, bwd_ms,
           2.5 * flops / bwd_ms / 1e9, ft_cuda_attention_tc_fwd_wgmma(s) ? "wgmma" : "mma.sync",
           ft_cuda_attention_tc_bwd_wgmma(s) ? "wgmma" : "mma.sync",
           layout[ft_cuda_attention_tc_bwd_layout(s)]);
    return 0;
}
