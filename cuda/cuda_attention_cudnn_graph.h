/* cuDNN operation graphs of scaled-dot-product attention, forward and backward, built on
 * the backend API (cudnn_graph.h) as ftmpi's own C. See cuda_attention_cudnn_graph.c for
 * the graph and doc/design.md for why it has this shape. */
#ifndef FT_CUDA_ATTENTION_CUDNN_GRAPH_H
#define FT_CUDA_ATTENTION_CUDNN_GRAPH_H

#include <cudnn.h>
#include <stdint.h>

/* Unique ids of the tensors the caller binds in the variant pack. */
enum ft_sdpa_uid {
    FT_SDPA_Q = 1,
    FT_SDPA_K,
    FT_SDPA_V,
    FT_SDPA_O,
    FT_SDPA_STATS,      /* [b, hq, s, 1] fp32: log-sum-exp of the scaled scores */
    FT_SDPA_DO,
    FT_SDPA_DQ,
    FT_SDPA_DK,
    FT_SDPA_DV,
    FT_SDPA_SCALE,      /* by value: 1/sqrt(d) */
    FT_SDPA_NEG_INF,    /* by value: the masked score */
    FT_SDPA_WINDOW,     /* by value: the sliding window, as a float */
    FT_SDPA_ONE,        /* by value: 1 (the backward's softmax_sum scale) */
    FT_SDPA_SEQ_Q,      /* [b] int32: rows of each batch element (documents only) */
    FT_SDPA_SEQ_KV,
    FT_SDPA_RAGGED_Q,   /* [b+1] int32: element offsets of each document in Q, O, dO, dQ */
    FT_SDPA_RAGGED_KV,  /* ... in K, V, dK, dV */
    FT_SDPA_SOFTMAX_SUM,/* backward workspace: [b, hq, s, 1] fp32, rowsum(dO * O) */
    FT_SDPA_DQ_ACCUM,   /* backward workspace: fp32, dQ's layout (ragged with it) */
    FT_SDPA_FIRST_VIRTUAL = 100
};

/* The geometry of one graph. b is the batch (one document per row) or the number of
 * documents (ragged); s the rows of every batch element (the longest document). */
typedef struct ft_sdpa_geom {
    int64_t b, hq, hkv, s, d;
    int window;  /* 0: none */
    int ragged;  /* documents: ragged offsets and a padding mask by SEQ_Q/SEQ_KV */
    int backward;
    int nondeterministic_ok; /* 1: engines cuDNN notes as non-deterministic may be used */
} ft_sdpa_geom;

#define FT_SDPA_MAX_DESCS 160
#define FT_SDPA_MAX_OPS 48

/* The descriptors of one graph, kept alive as long as its plan. */
typedef struct ft_sdpa_graph {
    cudnnBackendDescriptor_t descs[FT_SDPA_MAX_DESCS];
    int n_descs;
    cudnnBackendDescriptor_t ops[FT_SDPA_MAX_OPS];
    int n_ops;
    cudnnBackendDescriptor_t opgraph, plan;
    int64_t next_uid;
    int64_t workspace; /* bytes the plan needs */
    cudnnStatus_t status;
    char failed[160]; /* the first call that failed */
} ft_sdpa_graph;

/* Builds the operation graph of g->geom and an execution plan from the heuristics' first
 * engine configuration that finalizes, skipping engines that carry cuDNN's
 * non-deterministic numerical note (atomics: results differ between runs, which would
 * break bitwise resume) unless geo->nondeterministic_ok. Returns CUDNN_STATUS_SUCCESS, or the first error
 * (g->failed names the call; CUDNN_STATUS_NOT_SUPPORTED where no engine takes it).
 * ft_sdpa_graph_release destroys every descriptor either way. */
cudnnStatus_t ft_sdpa_graph_build(ft_sdpa_graph *g, cudnnHandle_t h, const ft_sdpa_geom *geo);
void ft_sdpa_graph_release(ft_sdpa_graph *g);

#endif
