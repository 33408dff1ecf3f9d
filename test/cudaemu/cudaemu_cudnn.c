/* The CPU execution harness's cuDNN backend API: handles, descriptors, attributes,
 * finalize, heuristics and plans (cudaemu_cudnn.h); the checks of tensors, operations and
 * graphs are in cudaemu_cudnn_graph.c, execute in cudaemu_cudnn_execute.c.
 *
 * Every misuse a real cuDNN would answer with an error status (a wrong attribute type, a
 * descriptor that is not finalized, a virtual tensor nobody produces, a shape that does
 * not broadcast, a uid missing from the variant pack, a too-small workspace, a
 * misaligned or dead pointer) is a finding here (cudaemu_fail): the backend would fall
 * back to its own kernels in silence, so a defect in the graph it builds must stop the
 * test instead. Emulated support: bf16 data with feature dimensions up to 128 (the
 * stride-1 dim of every bf16 tensor the graph binds); anything else gets no engine from
 * the heuristics, as cuDNN answers, and the backend falls back. */
#include "cudaemu_cudnn.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cudaemu.h"

static long nondeterministic_plans; /* for tests: plans on a non-deterministic engine */

long cudaemu_cudnn_nondeterministic_plans(void) { return nondeterministic_plans; }

cd_desc *cd_desc_of(const void *p)
{
    cd_desc *d = (cd_desc *)p;
    return d && d->magic == CD_MAGIC ? d : NULL;
}

cudnnHandle_t cd_handle_of(cudnnHandle_t h) { return h && h->magic == CD_HANDLE_MAGIC ? h : NULL; }

size_t cd_type_size(int t)
{
    switch (t) {
    case CUDNN_DATA_FLOAT: case CUDNN_DATA_INT32: return 4;
    case CUDNN_DATA_BFLOAT16: case CUDNN_DATA_HALF: return 2;
    case CUDNN_DATA_INT64: case CUDNN_DATA_DOUBLE: return 8;
    case CUDNN_DATA_BOOLEAN: return 1;
    default: return 0;
    }
}

int64_t cd_elems(const cd_desc *t)
{
    return t->dim[0] * t->dim[1] * t->dim[2] * t->dim[3];
}

/* ---------------------------------------------------------------- handle */

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

const char *cudnnGetErrorString(cudnnStatus_t s)
{
    return s == CUDNN_STATUS_SUCCESS ? "CUDNN_STATUS_SUCCESS"
           : s == CUDNN_STATUS_NOT_SUPPORTED ? "CUDNN_STATUS_NOT_SUPPORTED"
           : s == CUDNN_STATUS_BAD_PARAM ? "CUDNN_STATUS_BAD_PARAM"
                                          : "CUDNN_STATUS_INTERNAL_ERROR";
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *h)
{
    if (!h)
        return CUDNN_STATUS_BAD_PARAM;
    *h = calloc(1, sizeof **h);
    if (!*h)
        return CUDNN_STATUS_ALLOC_FAILED;
    (*h)->magic = CD_HANDLE_MAGIC;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t h)
{
    if (!cd_handle_of(h))
        cudaemu_fail("cudnnDestroy: not a live handle");
    h->magic = 0;
    free(h);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t h, cudaStream_t s)
{
    if (!cd_handle_of(h))
        cudaemu_fail("cudnnSetStream: not a live handle");
    h->stream = s;
    return CUDNN_STATUS_SUCCESS;
}

/* ---------------------------------------------------------------- descriptors */

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                           cudnnBackendDescriptor_t *out)
{
    cd_desc *d = calloc(1, sizeof *d);
    if (!out || !d)
        cudaemu_fail("cudnnBackendCreateDescriptor: NULL output or out of host memory");
    d->magic = CD_MAGIC;
    d->type = (int)type;
    *out = (cudnnBackendDescriptor_t)d;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t p)
{
    cd_desc *d = cd_desc_of(p);
    if (!d)
        cudaemu_fail("cudnnBackendDestroyDescriptor: %p is not a live descriptor", (void *)p);
    for (int i = 0; i < d->n_attrs; i++)
        free(d->attrs[i].data);
    d->magic = 0;
    free(d);
    return CUDNN_STATUS_SUCCESS;
}

const cd_attr *cd_attr_find(const cd_desc *d, int name)
{
    for (int i = 0; i < d->n_attrs; i++)
        if (d->attrs[i].name == name)
            return &d->attrs[i];
    return NULL;
}

cd_desc *cd_attr_desc(const cd_desc *d, int name, int index)
{
    const cd_attr *a = cd_attr_find(d, name);
    if (!a || index >= a->count)
        return NULL;
    return cd_desc_of(((void **)a->data)[index]);
}

static size_t attr_type_size(int t)
{
    switch (t) {
    case CUDNN_TYPE_INT64: return 8;
    case CUDNN_TYPE_DOUBLE: return 8;
    case CUDNN_TYPE_FLOAT: return 4;
    case CUDNN_TYPE_BOOLEAN: return sizeof(bool);
    case CUDNN_TYPE_HANDLE: case CUDNN_TYPE_VOID_PTR: case CUDNN_TYPE_BACKEND_DESCRIPTOR:
        return sizeof(void *);
    default: return 4; /* the enums */
    }
}

/* The attribute type each (descriptor, attribute) takes; -1 if the harness does not know the
 * attribute (a finding: the stand-in must validate everything the backend sets). */
static int expected_type(int desc, int name)
{
    switch (name) {
    case CUDNN_ATTR_TENSOR_DATA_TYPE: case CUDNN_ATTR_POINTWISE_MATH_PREC:
    case CUDNN_ATTR_MATMUL_COMP_TYPE: case CUDNN_ATTR_REDUCTION_COMP_TYPE:
        return CUDNN_TYPE_DATA_TYPE;
    case CUDNN_ATTR_TENSOR_DIMENSIONS: case CUDNN_ATTR_TENSOR_STRIDES:
    case CUDNN_ATTR_TENSOR_UNIQUE_ID: case CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT:
    case CUDNN_ATTR_POINTWISE_AXIS: case CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS:
        return CUDNN_TYPE_INT64;
    case CUDNN_ATTR_TENSOR_IS_VIRTUAL: case CUDNN_ATTR_TENSOR_IS_BY_VALUE: return CUDNN_TYPE_BOOLEAN;
    case CUDNN_ATTR_POINTWISE_MODE: return CUDNN_TYPE_POINTWISE_MODE;
    case CUDNN_ATTR_MATMUL_PADDING_VALUE: return CUDNN_TYPE_DOUBLE;
    case CUDNN_ATTR_REDUCTION_OPERATOR: return CUDNN_TYPE_REDUCTION_OPERATOR_TYPE;
    case CUDNN_ATTR_ENGINEHEUR_MODE: return CUDNN_TYPE_HEUR_MODE;
    case CUDNN_ATTR_OPERATIONGRAPH_HANDLE: case CUDNN_ATTR_EXECUTION_PLAN_HANDLE:
        return CUDNN_TYPE_HANDLE;
    case CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS: case CUDNN_ATTR_VARIANT_PACK_WORKSPACE:
        return CUDNN_TYPE_VOID_PTR;
    case CUDNN_ATTR_TENSOR_RAGGED_OFFSET_DESC:
    case CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR: case CUDNN_ATTR_OPERATION_POINTWISE_XDESC:
    case CUDNN_ATTR_OPERATION_POINTWISE_BDESC: case CUDNN_ATTR_OPERATION_POINTWISE_YDESC:
    case CUDNN_ATTR_OPERATION_POINTWISE_TDESC:
    case CUDNN_ATTR_OPERATION_MATMUL_ADESC: case CUDNN_ATTR_OPERATION_MATMUL_BDESC:
    case CUDNN_ATTR_OPERATION_MATMUL_CDESC: case CUDNN_ATTR_OPERATION_MATMUL_DESC:
    case CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC:
    case CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC:
    case CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC:
    case CUDNN_ATTR_OPERATION_REDUCTION_XDESC: case CUDNN_ATTR_OPERATION_REDUCTION_YDESC:
    case CUDNN_ATTR_OPERATION_REDUCTION_DESC:
    case CUDNN_ATTR_OPERATION_RESHAPE_XDESC: case CUDNN_ATTR_OPERATION_RESHAPE_YDESC:
    case CUDNN_ATTR_OPERATIONGRAPH_OPS: case CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH:
    case CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG:
        return CUDNN_TYPE_BACKEND_DESCRIPTOR;
    default: (void)desc; return -1;
    }
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t p, cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t count,
                                       const void *value)
{
    cd_desc *d = cd_desc_of(p);
    if (!d)
        cudaemu_fail("cudnnBackendSetAttribute(%d): not a live descriptor", (int)name);
    if (d->finalized)
        cudaemu_fail("cudnnBackendSetAttribute(%d): descriptor (type %d) already finalized",
                     (int)name, d->type);
    int want = expected_type(d->type, (int)name);
    if (want < 0)
        cudaemu_fail("cudnnBackendSetAttribute: attribute %d on descriptor type %d is not one the "
                     "harness validates", (int)name, d->type);
    if ((int)type != want)
        cudaemu_fail("cudnnBackendSetAttribute(%d): attribute type %d, cuDNN takes %d", (int)name,
                     (int)type, want);
    if (count <= 0 || !value)
        cudaemu_fail("cudnnBackendSetAttribute(%d): %lld elements at %p", (int)name,
                     (long long)count, value);
    if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR)
        for (int64_t i = 0; i < count; i++) {
            cd_desc *v = cd_desc_of(((void *const *)value)[i]);
            if (!v || !v->finalized)
                cudaemu_fail("cudnnBackendSetAttribute(%d): element %lld is not a finalized "
                             "descriptor", (int)name, (long long)i);
        }
    cd_attr *a = (cd_attr *)cd_attr_find(d, (int)name);
    if (!a) {
        if (d->n_attrs == CD_MAX_ATTRS)
            cudaemu_fail("cudnnBackendSetAttribute: too many attributes");
        a = &d->attrs[d->n_attrs++];
    } else {
        free(a->data);
    }
    size_t bytes = attr_type_size(type) * (size_t)count;
    a->name = (int)name;
    a->type = (int)type;
    a->count = count;
    a->data = malloc(bytes);
    memcpy(a->data, value, bytes);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t p)
{
    cd_desc *d = cd_desc_of(p);
    if (!d || d->finalized)
        cudaemu_fail("cudnnBackendFinalize: not a live descriptor, or finalized twice");
    switch (d->type) {
    case CUDNN_BACKEND_TENSOR_DESCRIPTOR: cd_finalize_tensor(d); break;
    case CUDNN_BACKEND_POINTWISE_DESCRIPTOR:
        cd_need(d, CUDNN_ATTR_POINTWISE_MODE, 1, "pointwise");
        cd_need(d, CUDNN_ATTR_POINTWISE_MATH_PREC, 1, "pointwise");
        break;
    case CUDNN_BACKEND_MATMUL_DESCRIPTOR: cd_need(d, CUDNN_ATTR_MATMUL_COMP_TYPE, 1, "matmul"); break;
    case CUDNN_BACKEND_REDUCTION_DESCRIPTOR:
        cd_need(d, CUDNN_ATTR_REDUCTION_OPERATOR, 1, "reduction");
        cd_need(d, CUDNN_ATTR_REDUCTION_COMP_TYPE, 1, "reduction");
        break;
    case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR: cd_finalize_graph(d); break;
    case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR:
        cd_need(d, CUDNN_ATTR_ENGINEHEUR_MODE, 1, "heuristics");
        d->graph = cd_attr_desc(d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, 0);
        if (!d->graph)
            cudaemu_fail("cudnnBackendFinalize(heuristics): no operation graph");
        break;
    case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: {
        const cd_desc *cfg = cd_attr_desc(d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, 0);
        if (!cfg || !cfg->graph || !cd_attr_find(d, CUDNN_ATTR_EXECUTION_PLAN_HANDLE))
            cudaemu_fail("cudnnBackendFinalize(plan): needs a handle and an engine config from "
                         "the heuristics");
        d->graph = cfg->graph;
        nondeterministic_plans += cfg->nondeterministic;
        /* a workspace the caller must provide: 1 KiB per operation */
        d->workspace = 1024 * cd_attr_find(d->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS)->count;
        break;
    }
    case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: {
        const cd_attr *u = cd_attr_find(d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
        const cd_attr *ptr = cd_attr_find(d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
        if (!u || !ptr || u->count != ptr->count)
            cudaemu_fail("variant pack: uids and data pointers missing or of different counts");
        break;
    }
    default: cd_finalize_op(d); break;
    }
    d->finalized = 1;
    return CUDNN_STATUS_SUCCESS;
}

/* What the heuristics offer a supported graph (CUDAEMU_CUDNN_ENGINES, cudaemu.h). */
enum engines_offer { OFFER_DETERMINISTIC, OFFER_NONDETERMINISTIC_FIRST, OFFER_NONDETERMINISTIC_ONLY };

static enum engines_offer engines_offer(void)
{
    const char *e = getenv("CUDAEMU_CUDNN_ENGINES");
    if (!e || !*e || strcmp(e, "deterministic") == 0)
        return OFFER_DETERMINISTIC;
    if (strcmp(e, "nondeterministic-first") == 0)
        return OFFER_NONDETERMINISTIC_FIRST;
    if (strcmp(e, "nondeterministic-only") == 0)
        return OFFER_NONDETERMINISTIC_ONLY;
    cudaemu_fail("CUDAEMU_CUDNN_ENGINES=%s: use deterministic, nondeterministic-first or "
                 "nondeterministic-only", e);
}

/* CUDNN_ATTR_ENGINECFG_ENGINE (into an engine descriptor the caller created) and
 * CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, as cuDNN answers them: 1 when handled. */
static int engine_attribute(cd_desc *d, int name, int type, int64_t requested, int64_t *count,
                            void *out)
{
    if (d->type == CUDNN_BACKEND_ENGINECFG_DESCRIPTOR && name == CUDNN_ATTR_ENGINECFG_ENGINE) {
        if (type != CUDNN_TYPE_BACKEND_DESCRIPTOR || requested != 1 || !out)
            cudaemu_fail("cudnnBackendGetAttribute(ENGINECFG_ENGINE): one descriptor, of type "
                         "CUDNN_TYPE_BACKEND_DESCRIPTOR");
        cd_desc *eng = cd_desc_of(*(void **)out);
        if (!eng || eng->type != CUDNN_BACKEND_ENGINE_DESCRIPTOR)
            cudaemu_fail("cudnnBackendGetAttribute(ENGINECFG_ENGINE): the output is not an "
                         "engine descriptor");
        eng->graph = d->graph;
        eng->nondeterministic = d->nondeterministic;
        eng->finalized = 1;
        if (count)
            *count = 1;
        return 1;
    }
    if (d->type == CUDNN_BACKEND_ENGINE_DESCRIPTOR && name == CUDNN_ATTR_ENGINE_NUMERICAL_NOTE) {
        if (type != CUDNN_TYPE_NUMERICAL_NOTE)
            cudaemu_fail("cudnnBackendGetAttribute(ENGINE_NUMERICAL_NOTE): type %d, not "
                         "CUDNN_TYPE_NUMERICAL_NOTE", type);
        /* every engine uses tensor cores; one may also be non-deterministic */
        cudnnBackendNumericalNote_t notes[2] = {CUDNN_NUMERICAL_NOTE_TENSOR_CORE,
                                                CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC};
        int64_t n = d->nondeterministic ? 2 : 1;
        if (requested > 0 && !out)
            cudaemu_fail("cudnnBackendGetAttribute(ENGINE_NUMERICAL_NOTE): NULL output");
        for (int64_t i = 0; i < n && i < requested; i++)
            ((cudnnBackendNumericalNote_t *)out)[i] = notes[i];
        if (count)
            *count = requested == 0 || requested > n ? n : requested;
        return 1;
    }
    return 0;
}

cudnnStatus_t cudnnBackendGetAttribute(cudnnBackendDescriptor_t const p,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type, int64_t requested,
                                       int64_t *count, void *out)
{
    cd_desc *d = cd_desc_of(p);
    if (!d || !d->finalized)
        cudaemu_fail("cudnnBackendGetAttribute(%d): not a finalized descriptor", (int)name);
    if (d->type == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR && name == CUDNN_ATTR_ENGINEHEUR_RESULTS &&
        type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        const enum engines_offer offer = engines_offer();
        int64_t offered = !cd_graph_supported(d->graph) ? 0
                          : offer == OFFER_NONDETERMINISTIC_FIRST ? 2 : 1;
        /* as the library does: the total only when no array is given; with an array, the
         * elements written (none for a request of 0) */
        if (count)
            *count = !out ? offered : requested < offered ? requested : offered;
        for (int64_t i = 0; out && i < requested && i < offered; i++) {
            cd_desc *cfg = cd_desc_of(((void **)out)[i]);
            if (!cfg || cfg->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
                cudaemu_fail("heuristics results: element %lld is not an engine config "
                             "descriptor", (long long)i);
            cfg->graph = d->graph;
            cfg->nondeterministic = offer == OFFER_NONDETERMINISTIC_ONLY ||
                                    (offer == OFFER_NONDETERMINISTIC_FIRST && i == 0);
            cfg->finalized = 1;
        }
        return CUDNN_STATUS_SUCCESS;
    }
    if (engine_attribute(d, (int)name, (int)type, requested, count, out))
        return CUDNN_STATUS_SUCCESS;
    if (d->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR &&
        name == CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE && type == CUDNN_TYPE_INT64 &&
        requested >= 1) {
        *(int64_t *)out = d->workspace;
        if (count)
            *count = 1;
        return CUDNN_STATUS_SUCCESS;
    }
    cudaemu_fail("cudnnBackendGetAttribute(%d, type %d) on descriptor type %d is not emulated",
                 (int)name, (int)type, d->type);
}

