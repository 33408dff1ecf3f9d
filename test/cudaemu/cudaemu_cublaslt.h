/* The CPU execution harness for CUDA: cuBLASLt's descriptors as the harness keeps them,
 * shared by cudaemu_cublaslt.c (creation, attributes, heuristic) and
 * cudaemu_cublaslt_matmul.c (the checked, queued matmul). Each handle type of
 * <cublasLt.h> is a pointer to an opaque type: the harness hands out pointers to these
 * structs instead, and checks a magic number on the way back in. */
#ifndef FT_CUDAEMU_CUBLASLT_H
#define FT_CUDAEMU_CUBLASLT_H

#include <cublasLt.h>
#include <stdint.h>

#define LT_HANDLE_MAGIC 0x4c54484eu
#define LT_DESC_MAGIC 0x4c544453u
#define LT_LAYOUT_MAGIC 0x4c544c59u
#define LT_PREF_MAGIC 0x4c545052u
#define LT_ALGO_MAGIC 0x4c54414cu

struct cublasLtContext {
    uint32_t magic;
};

typedef struct lt_desc {
    uint32_t magic;
    int32_t compute_type;   /* cublasComputeType_t: only CUBLAS_COMPUTE_32F is emulated */
    int32_t scale_type;     /* cudaDataType: CUDA_R_32F */
    int32_t pointer_mode;   /* only CUBLASLT_POINTER_MODE_HOST */
    int32_t trans_a, trans_b; /* cublasOperation_t */
    uint32_t epilogue;      /* CUBLASLT_EPILOGUE_DEFAULT or _BIAS */
    const void *bias;       /* device vector of rows(D) elements, for _BIAS */
    int32_t bias_type;      /* cudaDataType, or -1: the type of D */
} lt_desc;

typedef struct lt_layout {
    uint32_t magic;
    int32_t type;           /* cudaDataType: CUDA_R_32F or CUDA_R_16BF */
    int32_t order;          /* cublasLtOrder_t: only CUBLASLT_ORDER_COL */
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch_count;    /* >= 1, the same on A, B, C and D */
    int64_t batch_stride;   /* elements from one batch's matrix to the next: 0 shares one
                             * matrix among the batches; negative: not emulated (when
                             * batch_count > 1; ignored otherwise) */
} lt_layout;

typedef struct lt_pref {
    uint32_t magic;
    uint64_t max_workspace;
    uint32_t align[4];      /* the minimum alignments of A, B, C, D the caller promises */
} lt_pref;

/* What cublasLtMatmulAlgoGetHeuristic returns in cublasLtMatmulAlgo_t's data[8]: the
 * promises the algorithm was chosen under, for cublasLtMatmul to check. */
enum { ALGO_MAGIC, ALGO_ALIGN_A, ALGO_ALIGN_B, ALGO_ALIGN_C, ALGO_ALIGN_D, ALGO_WORKSPACE };

/* Validated views of the handles: NULL if h is not one of ours (or was destroyed). */
lt_desc *lt_desc_of(cublasLtMatmulDesc_t h);
lt_layout *lt_layout_of(cublasLtMatrixLayout_t h);
int lt_handle_ok(cublasLtHandle_t h);

/* Bytes of one element of a supported data type, 0 for others. */
size_t lt_type_size(int32_t type);

/* The shape check shared by the heuristic and the matmul: CUBLAS_STATUS_SUCCESS and
 * (m, n, k) when op(A) [m,k] * op(B) [k,n] -> C, D [m,n] fit, with supported types, and
 * in *batch (if not NULL) the batch count of the strided batch: the four layouts' common
 * BATCH_COUNT (CUBLAS_STATUS_INVALID_VALUE if one is < 1 or they differ;
 * CUBLAS_STATUS_NOT_SUPPORTED for a negative STRIDED_BATCH_OFFSET when it is > 1). */
cublasStatus_t lt_shape(const lt_desc *d, const lt_layout *a, const lt_layout *b,
                        const lt_layout *c, const lt_layout *dl, uint64_t *m, uint64_t *n,
                        uint64_t *k, int32_t *batch);

#endif
