/* The harness's cudnnBackendExecute: the variant pack against the plan's graph (every
 * non-virtual tensor bound once, live, of its extent, aligned; by-value scalars on the
 * host; the workspace), then the graph queued as stream work for the engine
 * (cudaemu_cudnn_engine.c). */
#include <stdlib.h>
#include <string.h>

#include "cudaemu.h"
#include "cudaemu_cudnn.h"

/* ---------------------------------------------------------------- execute */

static long executions; /* for tests: which path an attention call took */

long cudaemu_cudnn_executions(void) { return executions; }

typedef struct exec_work {
    const cd_desc *graph;
    cd_binding *b;
    int n;
    void *workspace;
    size_t workspace_bytes;
} exec_work;

/* The engine owns its workspace while it runs: poisoned first, so a workspace that the
 * caller made too small overwrites whatever follows it (as on a GPU) and shows. */
static void run_exec(void *ctx)
{
    exec_work *w = ctx;
    if (w->workspace)
        memset(w->workspace, 0xff, w->workspace_bytes);
    cd_execute_graph(w->graph, w->b, w->n);
}

static void free_exec(void *ctx)
{
    exec_work *w = ctx;
    free(w->b);
    free(w);
}

/* Bytes a non-ragged tensor spans from its pointer. */
static size_t extent(const cd_desc *t)
{
    int64_t last = 0;
    for (int i = 0; i < 4; i++)
        last += (t->dim[i] - 1) * t->stride[i];
    return (size_t)(last + 1) * cd_type_size(t->dtype);
}

/* Collects the graph's distinct non-virtual tensors. */
static int graph_tensors(const cd_desc *g, const cd_desc **list, int max)
{
    int n = 0;
    const cd_attr *ops = cd_attr_find(g, CUDNN_ATTR_OPERATIONGRAPH_OPS);
    for (int i = 0; i < ops->count; i++) {
        cd_desc *in[16], *out;
        int k = cd_op_io(cd_attr_desc(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, i), in, &out);
        in[k++] = out;
        for (int a = 0; a < k; a++) {
            int seen = in[a]->is_virtual;
            for (int j = 0; j < n && !seen; j++)
                seen = list[j]->uid == in[a]->uid;
            if (!seen) {
                if (n == max)
                    cudaemu_fail("cudnnBackendExecute: more than %d bound tensors", max);
                list[n++] = in[a];
            }
        }
    }
    return n;
}

static int is_output(const cd_desc *g, const cd_desc *t)
{
    const cd_attr *ops = cd_attr_find(g, CUDNN_ATTR_OPERATIONGRAPH_OPS);
    for (int i = 0; i < ops->count; i++) {
        cd_desc *in[16], *out;
        (void)cd_op_io(cd_attr_desc(g, CUDNN_ATTR_OPERATIONGRAPH_OPS, i), in, &out);
        if (out == t)
            return 1;
    }
    return 0;
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t h, cudnnBackendDescriptor_t plan_p,
                                  cudnnBackendDescriptor_t pack_p)
{
    const cd_desc *plan = cd_desc_of(plan_p), *pack = cd_desc_of(pack_p);
    if (!cd_handle_of(h))
        cudaemu_fail("cudnnBackendExecute: not a live handle");
    if (!plan || !plan->finalized || plan->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
        cudaemu_fail("cudnnBackendExecute: not a finalized execution plan");
    if (!pack || !pack->finalized || pack->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
        cudaemu_fail("cudnnBackendExecute: not a finalized variant pack");
    const cd_attr *ua = cd_attr_find(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
    const cd_attr *pa = cd_attr_find(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
    const int64_t *uids = ua->data;
    void *const *ptrs = pa->data;
    const cd_attr *wa = cd_attr_find(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE);
    void *ws = wa ? *(void **)wa->data : NULL;

    const cd_desc *list[64];
    int n = graph_tensors(plan->graph, list, 64);
    exec_work *w = calloc(1, sizeof *w);
    w->graph = plan->graph;
    w->b = calloc((size_t)n, sizeof *w->b);
    w->n = n;
    cudaemu_access acc[66];
    int n_acc = 0;
    for (int i = 0; i < n; i++) {
        const cd_desc *t = list[i];
        int hit = -1;
        for (int j = 0; j < ua->count; j++)
            if (uids[j] == t->uid) {
                if (hit >= 0)
                    cudaemu_fail("cudnnBackendExecute: uid %lld is bound twice in the variant "
                                 "pack", (long long)t->uid);
                hit = j;
            }
        if (hit < 0)
            cudaemu_fail("cudnnBackendExecute: the graph's tensor uid %lld is missing from the "
                         "variant pack", (long long)t->uid);
        void *p = ptrs[hit];
        w->b[i].uid = t->uid;
        w->b[i].ptr = p;
        if (!p)
            cudaemu_fail("cudnnBackendExecute: uid %lld is bound to NULL", (long long)t->uid);
        if (t->by_value) {
            void *base;
            size_t bytes;
            if (cudaemu_find_alloc(p, &base, &bytes) == 0)
                cudaemu_fail("cudnnBackendExecute: by-value uid %lld points to device memory "
                             "(its value is read on the host at execute)", (long long)t->uid);
            w->b[i].value = t->dtype == CUDNN_DATA_FLOAT ? *(const float *)p
                            : t->dtype == CUDNN_DATA_INT32 ? *(const int32_t *)p
                                                           : *(const double *)p;
            continue;
        }
        if ((uintptr_t)p % (uintptr_t)t->align)
            cudaemu_fail("cudnnBackendExecute: uid %lld = %p is not %lld-byte aligned as its "
                         "descriptor promises", (long long)t->uid, p, (long long)t->align);
        size_t bytes = extent(t);
        if (t->ragged) { /* the offsets are read when the work runs: the whole allocation */
            void *base;
            if (cudaemu_find_alloc(p, &base, &bytes) != 0)
                cudaemu_fail("cudnnBackendExecute: uid %lld = %p is not device memory",
                             (long long)t->uid, p);
            bytes -= (size_t)((char *)p - (char *)base);
        }
        cudaemu_check_device_range(p, bytes, "cudnnBackendExecute", "a bound tensor");
        acc[n_acc++] = (cudaemu_access){ p, bytes, is_output(plan->graph, t) };
    }
    for (int j = 0; j < ua->count; j++) {
        int known = 0;
        for (int i = 0; i < n && !known; i++)
            known = list[i]->uid == uids[j];
        if (!known)
            cudaemu_fail("cudnnBackendExecute: the variant pack binds uid %lld, which the graph "
                         "does not have", (long long)uids[j]);
    }
    if (plan->workspace > 0) {
        if (!ws)
            cudaemu_fail("cudnnBackendExecute: the plan needs %lld bytes of workspace, the "
                         "variant pack has none", (long long)plan->workspace);
        cudaemu_check_device_range(ws, (size_t)plan->workspace, "cudnnBackendExecute",
                                   "workspace (smaller than the plan's size?)");
        acc[n_acc++] = (cudaemu_access){ ws, (size_t)plan->workspace, 1 };
        w->workspace = ws;
        w->workspace_bytes = (size_t)plan->workspace;
    }
    executions++;
    cudaemu_enqueue(h->stream, "cudnnBackendExecute", run_exec, w, free_exec, acc, n_acc);
    return CUDNN_STATUS_SUCCESS;
}

