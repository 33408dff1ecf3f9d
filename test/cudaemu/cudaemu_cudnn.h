/* The CPU execution harness's cuDNN: the backend (graph) API entry points the CUDA
 * backend uses, with the signatures of <cudnn_graph.h>, linked instead of libcudnn.
 * cudaemu_cudnn.c holds the descriptors, their attributes and every finalize, heuristic,
 * plan, variant-pack and execute check; cudaemu_cudnn_engine.c computes an operation graph
 * by its definition (matmuls, pointwise, reductions, reshapes on fp64 values), so a graph
 * that does not say attention does not compute attention. */
#ifndef FT_CUDAEMU_CUDNN_H
#define FT_CUDAEMU_CUDNN_H

#include <cudnn.h>
#include <stdint.h>

#define CD_MAX_ATTRS 24
#define CD_MAX_OPS 64

typedef struct cd_attr {
    int name, type;
    int64_t count;
    void *data;
} cd_attr;

typedef struct cd_desc cd_desc;
struct cd_desc {
    uint32_t magic;
    int type; /* cudnnBackendDescriptorType_t */
    int finalized;
    cd_attr attrs[CD_MAX_ATTRS];
    int n_attrs;
    /* tensors, after finalize */
    int dtype, is_virtual, by_value;
    int64_t dim[4], stride[4], uid, align;
    cd_desc *ragged;
    /* engine configs and engines: the graph they were offered for; plans: their
     * config, workspace */
    cd_desc *graph;
    int64_t workspace;
    /* engine configs and engines: the engine carries CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC */
    int nondeterministic;
};

#define CD_MAGIC 0xcd9a11u
#define CD_HANDLE_MAGIC 0xcd9a12u

struct cudnnContext {
    uint32_t magic;
    cudaStream_t stream;
};

/* The live descriptor or handle behind an opaque pointer, NULL if it is none. */
cd_desc *cd_desc_of(const void *p);
cudnnHandle_t cd_handle_of(cudnnHandle_t h);

/* cudaemu_cudnn_graph.c: finalize's checks (each failure a finding) */
const void *cd_need(const cd_desc *d, int name, int64_t count, const char *what);
int64_t cd_int_attr(const cd_desc *d, int name, int64_t dflt);
void cd_finalize_tensor(cd_desc *d);
void cd_finalize_op(cd_desc *d);
void cd_finalize_graph(cd_desc *g);
/* the tensors an operation reads (ragged offset tensors included) and the one it writes */
int cd_op_io(const cd_desc *op, cd_desc **in, cd_desc **out);
/* whether the harness's engine takes the graph (bf16 feature dims <= 128) */
int cd_graph_supported(const cd_desc *g);

/* An attribute's descriptor values (NULL if absent). */
cd_desc *cd_attr_desc(const cd_desc *d, int name, int index);
const cd_attr *cd_attr_find(const cd_desc *d, int name);
int64_t cd_elems(const cd_desc *t);
size_t cd_type_size(int dtype);

/* Computes the graph of plan `graph` with the bound pointers (uid -> pointer, by-value
 * tensors already copied into `values`). Called from stream work. */
typedef struct cd_binding {
    int64_t uid;
    void *ptr;
    double value; /* by-value tensors */
} cd_binding;
void cd_execute_graph(const cd_desc *graph, const cd_binding *b, int n);

#endif
