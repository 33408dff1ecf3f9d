/* bf16 attention through cuDNN's fused SDPA graphs (cuda_attention_cudnn_graph.c): the
 * switch, the plan cache, packed documents, and the execution of a plan.
 *
 * Documents. ftmpi marks packed documents by per-token segment ids; cuDNN's equivalent is
 * a ragged batch: each document becomes one batch element of its own length, placed by
 * element offsets into the same q/k/v/out buffers. Each row's runs of equal ids are its
 * documents, and the table that describes them is built on the host, so it needs the ids
 * there. The model hands over the host copy of the ids it uploads (the segment_hint op,
 * cuda_segment_hint.h): from it the table is derived once per micro-batch and shape and
 * uploaded once to a device buffer of its own, so the 2-3 attention calls per layer
 * (forward, the recompute under checkpointing, backward) neither copy back nor wait. A
 * call the hint does not cover (another pointer, another batch/seq_len, ids written since
 * without a hint) copies the ids back: a stream synchronisation per call (tens of
 * microseconds) and a per-call table in the scratch. Both give the same table, so the
 * results are the same bit for bit.
 *
 * A row whose id reappears after another id (not a contiguous document) is declined: the
 * own kernels mask such rows element by element. The document count and the longest
 * document are rounded up to powers of two so that a plan serves many batches (empty
 * documents pad the count). The per-document statistics are padded to the longest
 * document, so a batch of many short documents beside a long one is declined where that
 * padding would exceed 4x the tokens (the own kernels skip document tiles instead). The
 * statistics of a ragged graph are per document ([docs, heads, rows]);
 * cuda_attention_cudnn_stats.cu moves them to and from lse.
 *
 * Memory. The per-call buffers (document tables without a hint, statistics, the plan's
 * workspace, the backward's fp32 dQ accumulator and rowsum(dO*O)) are carved from the
 * backend's scratch, which is stream-ordered; nothing is allocated per call. The hinted
 * table's buffer (16 KiB, grown by doubling) is the one allocation outside the scratch. */
#include "config.h"
#include "cuda_attention_cudnn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_state.h"

#ifndef HAVE_CUDNN

int ft_cudnn_attention_fwd(ft_backend *be, void *out, float *lse, const void *q, const void *k,
                           const void *v, const int32_t *segment, ft_attn_shape s)
{
    (void)be, (void)out, (void)lse, (void)q, (void)k, (void)v, (void)segment, (void)s;
    return FT_CUDNN_DECLINED;
}

int ft_cudnn_attention_bwd(ft_backend *be, void *dq, void *dk, void *dv, const void *dout,
                           const void *out, const float *lse, const void *q, const void *k,
                           const void *v, const int32_t *segment, ft_attn_shape s)
{
    (void)be, (void)dq, (void)dk, (void)dv, (void)dout, (void)out, (void)lse, (void)q, (void)k;
    (void)v, (void)segment, (void)s;
    return FT_CUDNN_DECLINED;
}

void ft_cudnn_attention_release(ft_cudnn_attn *c) { (void)c; }

#else

#include <math.h>

#include "cuda_attention_cudnn_docs.h"
#include "cuda_attention_cudnn_graph.h"

#define PLAN_SLOTS 32

enum mode { MODE_AUTO, MODE_OFF, MODE_FORCE };

typedef struct plan_slot {
    ft_sdpa_geom geom;
    int used;
    int refused; /* cuDNN took no engine for this graph: decline at once next time */
    unsigned long last_use;
    ft_sdpa_graph graph;
} plan_slot;

struct ft_cudnn_attn {
    enum mode mode;
    int nondeterministic_ok; /* FTMPI_ATTENTION_NONDETERMINISTIC=1 */
    cudnnHandle_t handle;
    int handle_failed;
    plan_slot slots[PLAN_SLOTS];
    unsigned long clock;
    int32_t *seg_host; /* the segment ids, copied to the host (calls without a hint) */
    size_t seg_cap;
    ft_sdpa_docs docs;
    /* The documents of the last segment hint: derived once per hint and shape, the table
     * uploaded once to a device buffer of its own that calls bind as it is. */
    unsigned long docs_generation; /* the hint's generation docs was made of; 0: none */
    ft_attn_shape docs_shape;      /* the shape it was made for (offsets scale by heads) */
    int docs_status;               /* ft_sdpa_docs_from_ids's answer: 0 or 1 */
    int32_t *docs_device;          /* owned (cudaMalloc); the tables when docs_status is 0 */
    size_t docs_device_bytes;
};

static enum mode mode_from_env(void)
{
    const char *e = getenv("FTMPI_CUDNN_ATTENTION");
    if (!e || !*e || strcmp(e, "auto") == 0)
        return MODE_AUTO;
    if (strcmp(e, "off") == 0 || strcmp(e, "0") == 0)
        return MODE_OFF;
    if (strcmp(e, "force") == 0 || strcmp(e, "1") == 0)
        return MODE_FORCE;
    fprintf(stderr,
            "ftmpi: FTMPI_CUDNN_ATTENTION=%s: unknown value (use auto, off or force); using "
            "auto\n",
            e);
    return MODE_AUTO;
}

static ft_cudnn_attn *context_of(ft_backend *be)
{
    ft_cuda_state *st = ft_cuda_state_of(be);
    if (!st->cudnn) {
        st->cudnn = calloc(1, sizeof *st->cudnn);
        if (!st->cudnn) {
            fprintf(stderr, "ftmpi: CUDA backend: out of host memory (cuDNN attention)\n");
            abort();
        }
        st->cudnn->mode = mode_from_env();
        const char *nd = getenv("FTMPI_ATTENTION_NONDETERMINISTIC");
        st->cudnn->nondeterministic_ok = nd && strcmp(nd, "1") == 0;
    }
    ft_cudnn_attn *c = st->cudnn;
    if (c->mode != MODE_OFF && !c->handle && !c->handle_failed) {
        cudnnStatus_t e = cudnnCreate(&c->handle);
        if (e == CUDNN_STATUS_SUCCESS)
            e = cudnnSetStream(c->handle, st->stream);
        if (e != CUDNN_STATUS_SUCCESS) {
            fprintf(stderr, "ftmpi: CUDA backend: cuDNN unavailable (%s); attention runs on the "
                    "own kernels\n", cudnnGetErrorString(e));
            c->handle = NULL;
            c->handle_failed = 1;
        }
    }
    return c;
}

void ft_cudnn_attention_release(ft_cudnn_attn *c)
{
    if (!c)
        return;
    for (int i = 0; i < PLAN_SLOTS; i++)
        if (c->slots[i].used)
            ft_sdpa_graph_release(&c->slots[i].graph);
    if (c->handle)
        (void)cudnnDestroy(c->handle);
    free(c->seg_host);
    ft_sdpa_docs_release(&c->docs);
    if (c->docs_device)
        (void)cudaFree(c->docs_device);
    free(c);
}

/* The plan of a geometry: cached, built on first use; NULL where cuDNN refuses it. */
static ft_sdpa_graph *plan_for(ft_cudnn_attn *c, const ft_sdpa_geom *geo)
{
    plan_slot *victim = &c->slots[0];
    c->clock++;
    for (int i = 0; i < PLAN_SLOTS; i++) {
        plan_slot *p = &c->slots[i];
        if (p->used && memcmp(&p->geom, geo, sizeof *geo) == 0) {
            p->last_use = c->clock;
            return p->refused ? NULL : &p->graph;
        }
        if (!p->used || (victim->used && p->last_use < victim->last_use))
            victim = p;
    }
    if (victim->used)
        ft_sdpa_graph_release(&victim->graph);
    memset(victim, 0, sizeof *victim);
    victim->used = 1;
    victim->geom = *geo;
    victim->last_use = c->clock;
    cudnnStatus_t e = ft_sdpa_graph_build(&victim->graph, c->handle, geo);
    if (e != CUDNN_STATUS_SUCCESS) {
        if (c->mode == MODE_FORCE || getenv("FTMPI_CUDNN_VERBOSE"))
            fprintf(stderr,
                    "ftmpi: cuDNN attention: %s graph b=%lld hq=%lld hkv=%lld s=%lld d=%lld "
                    "window=%d%s refused: %s at %s\n",
                    geo->backward ? "backward" : "forward", (long long)geo->b, (long long)geo->hq,
                    (long long)geo->hkv, (long long)geo->s, (long long)geo->d, geo->window,
                    geo->ragged ? " (documents)" : "", cudnnGetErrorString(e),
                    victim->graph.failed);
        ft_sdpa_graph_release(&victim->graph);
        victim->refused = 1;
        return NULL;
    }
    return &victim->graph;
}

/* The documents of the call's segment ids, copied to the host: a synchronisation. 0; 1
 * where they are not contiguous runs; -1 where host memory ran out. */
static int build_docs(ft_cudnn_attn *c, ft_backend *be, const int32_t *segment, ft_attn_shape s)
{
    size_t tokens = (size_t)s.batch * s.seq_len;
    if (c->seg_cap < tokens) {
        free(c->seg_host);
        c->seg_host = malloc(tokens * sizeof *c->seg_host);
        c->seg_cap = c->seg_host ? tokens : 0;
        if (!c->seg_host)
            return -1;
    }
    cudaStream_t st = ft_cuda_stream(be);
    ft_cuda_check(cudaMemcpyAsync(c->seg_host, segment, tokens * 4, cudaMemcpyDeviceToHost, st),
                  "attention (cuDNN documents)");
    ft_cuda_check(cudaStreamSynchronize(st), "attention (cuDNN documents)");
    return ft_sdpa_docs_from_ids(&c->docs, c->seg_host, s);
}

/* Copies c->docs's tables into c->docs_device (stream-ordered: calls of the previous
 * micro-batch that read the old table run first). Grown rarely: at least 16 KiB (a
 * thousand documents), doubled; the old buffer's cudaFree waits for its readers. */
static int upload_hinted_docs(ft_cudnn_attn *c, ft_backend *be)
{
    size_t bytes = ft_sdpa_docs_bytes(&c->docs);
    if (c->docs_device_bytes < bytes) {
        size_t want = bytes < ((size_t)16 << 10) ? (size_t)16 << 10 : 2 * bytes;
        if (c->docs_device)
            ft_cuda_check(cudaFree(c->docs_device), "attention (cuDNN document table)");
        c->docs_device = NULL;
        c->docs_device_bytes = 0;
        if (cudaMalloc((void **)&c->docs_device, want) != cudaSuccess) {
            (void)cudaGetLastError(); /* not sticky: out of memory only */
            c->docs_device = NULL;
            return -1;
        }
        c->docs_device_bytes = want;
    }
    ft_cuda_check(cudaMemcpyAsync(c->docs_device, c->docs.host, bytes, cudaMemcpyHostToDevice,
                                  ft_cuda_stream(be)),
                  "attention (cuDNN document table)");
    return 0;
}

static int same_geometry(ft_attn_shape a, ft_attn_shape b)
{
    return a.batch == b.batch && a.seq_len == b.seq_len && a.n_heads == b.n_heads &&
           a.n_kv_heads == b.n_kv_heads && a.head_dim == b.head_dim;
}

/* The documents of a call into c->docs. Where the model's segment hint covers the ids
 * (cuda_segment_hint.h) they come from its host copy, derived once per hint and shape,
 * and *table is their device copy: no copy back, no synchronisation, no upload per call.
 * Otherwise the ids are read back (build_docs) and *table is NULL: the caller uploads
 * c->docs into its scratch. Returns 0; 1 where the documents are not contiguous runs; -1
 * when memory ran out. */
static int docs_for(ft_cudnn_attn *c, ft_backend *be, const int32_t *segment, ft_attn_shape s,
                    int32_t **table)
{
    *table = NULL;
    unsigned long generation = 0;
    const int32_t *ids =
        ft_segment_hint_lookup(&ft_cuda_state_of(be)->segment_hint, segment, s, &generation);
    if (!ids) {
        c->docs_generation = 0; /* c->docs is about to hold other ids */
        return build_docs(c, be, segment, s);
    }
    if (c->docs_generation != generation || !same_geometry(c->docs_shape, s)) {
        c->docs_generation = 0;
        int status = ft_sdpa_docs_from_ids(&c->docs, ids, s);
        if (status < 0 || (status == 0 && upload_hinted_docs(c, be) != 0))
            return -1;
        c->docs_generation = generation;
        c->docs_shape = s;
        c->docs_status = status;
    }
    if (c->docs_status == 0)
        *table = c->docs_device;
    return c->docs_status;
}

/* What cuDNN is not asked to do: head dims its fused kernels do not take, empty calls,
 * offsets beyond int32. Head dims under 16 too, and with documents (a ragged graph) head
 * dims that are not a multiple of 16: on an H100 (cuDNN 9, 2026-11-28) the ragged
 * backward at head_dim 8 and 24 returned dQ 50x the bf16 tolerance off while dK, dV and
 * the forward were right (16, 64, 80 and 128 right, and 24 without documents); the own
 * kernels take those shapes. */
static int ragged_shape_ok(ft_attn_shape s) { return s.head_dim % 16 == 0; }

static int shape_ok(ft_attn_shape s)
{
    size_t q_elems = (size_t)s.batch * s.seq_len * s.n_heads * s.head_dim;
    return s.batch > 0 && s.seq_len > 0 && s.head_dim % 8 == 0 && s.head_dim >= 16 &&
           s.head_dim <= 128 &&
           q_elems < ((size_t)1 << 31);
}

static size_t align256(size_t n) { return (n + 255) / 256 * 256; }

/* Per-call buffers carved from the scratch, the plan's workspace first (so that under the
 * harness, which poisons it, a workspace shorter than the plan needs corrupts the tables
 * behind it and shows). */
typedef struct call_mem {
    int32_t *docs;  /* the doc table (ragged) */
    float *stats;   /* per-document statistics (ragged) */
    float *softmax_sum, *dq_accum; /* backward */
    void *workspace;
} call_mem;

static call_mem carve(ft_backend *be, const ft_sdpa_geom *g, const ft_sdpa_graph *plan,
                      const ft_sdpa_docs *d, int32_t *hinted_table, ft_attn_shape s)
{
    size_t rows = (size_t)g->b * g->hq * g->s; /* padded per-document rows (statistics) */
    size_t q_elems = (size_t)s.batch * s.seq_len * s.n_heads * s.head_dim;
    size_t docs_b = g->ragged && !hinted_table ? ft_sdpa_docs_bytes(d) : 0;
    size_t stats_b = g->ragged ? rows * 4 : 0;
    size_t sum_b = g->backward ? rows * 4 : 0, acc_b = g->backward ? q_elems * 4 : 0;
    size_t ws_b = (size_t)plan->workspace;
    char *p = ft_cuda_scratch(be, align256(docs_b) + align256(stats_b) + align256(sum_b) +
                                      align256(acc_b) + align256(ws_b));
    call_mem m;
    m.workspace = ws_b ? p : NULL;
    p += align256(ws_b);
    m.docs = docs_b ? (int32_t *)p : hinted_table;
    p += align256(docs_b);
    m.stats = stats_b ? (float *)p : NULL;
    p += align256(stats_b);
    m.softmax_sum = sum_b ? (float *)p : NULL;
    p += align256(sum_b);
    m.dq_accum = acc_b ? (float *)p : NULL;
    return m;
}

#define PACK_MAX 20

typedef struct pack {
    int64_t uid[PACK_MAX];
    void *ptr[PACK_MAX];
    int n;
} pack;

static void bind(pack *p, int64_t uid, const void *ptr)
{
    if (p->n == PACK_MAX) {
        fprintf(stderr, "ftmpi: CUDA backend: cuDNN attention binds more than %d tensors\n",
                PACK_MAX);
        abort();
    }
    p->uid[p->n] = uid;
    p->ptr[p->n] = (void *)ptr;
    p->n++;
}

static void execute(ft_cudnn_attn *c, const ft_sdpa_graph *plan, pack *p, void *workspace,
                    const char *what)
{
    cudnnBackendDescriptor_t vp = NULL;
    cudnnStatus_t e = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (e == CUDNN_STATUS_SUCCESS)
        e = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, p->n,
                                     p->uid);
    if (e == CUDNN_STATUS_SUCCESS)
        e = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                     CUDNN_TYPE_VOID_PTR, p->n, p->ptr);
    if (e == CUDNN_STATUS_SUCCESS)
        e = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
                                     &workspace);
    if (e == CUDNN_STATUS_SUCCESS)
        e = cudnnBackendFinalize(vp);
    if (e == CUDNN_STATUS_SUCCESS)
        e = cudnnBackendExecute(c->handle, plan->plan, vp);
    if (vp)
        (void)cudnnBackendDestroyDescriptor(vp);
    if (e != CUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "ftmpi: CUDA backend: %s (cuDNN): %s\n", what, cudnnGetErrorString(e));
        abort();
    }
}

/* The common part of both directions: context, shape, documents, plan. NULL: declined.
 * *hinted_table: the device copy of the document table when a segment hint gave it. */
static const ft_sdpa_graph *prepare(ft_backend *be, ft_cudnn_attn **cp, const int32_t *segment,
                                    ft_attn_shape s, int backward, ft_sdpa_geom *geo,
                                    int32_t **hinted_table)
{
    *hinted_table = NULL;
    ft_cudnn_attn *c = *cp = context_of(be);
    if (c->mode == MODE_OFF)
        return NULL;
    const char *why = NULL;
    int docs = 0, ragged = 0;
    if (!c->handle)
        why = "no cuDNN handle";
    else if (!shape_ok(s))
        why = "shape (head_dim must be a multiple of 8 from 16 to 128)";
    else if (segment && (docs = docs_for(c, be, segment, s, hinted_table)) != 0)
        why = docs > 0 ? "documents that are not contiguous runs of ids"
                       : "out of memory for the document table";
    /* Rows that are each one document (as many documents as rows: every row has at least
     * one) are plain causal rows: the padded graph, without the ragged batch's document
     * tables and statistics moves; the mask is the same. */
    else if ((ragged = segment && c->docs.count != s.batch) && !ragged_shape_ok(s))
        why = "documents with head_dim not a multiple of 16";
    else if (ragged && (size_t)c->docs.docs * c->docs.rows > 4 * (size_t)s.batch * s.seq_len)
        why = "documents too uneven for a padded batch (documents x longest > 4 x tokens)";
    const ft_sdpa_graph *plan = NULL;
    if (!why) {
        *geo = (ft_sdpa_geom){ .b = ragged ? c->docs.docs : s.batch,
                               .hq = s.n_heads,
                               .hkv = s.n_kv_heads,
                               .s = ragged ? c->docs.rows : s.seq_len,
                               .d = s.head_dim,
                               .window = s.window,
                               .ragged = ragged,
                               .backward = backward,
                               .nondeterministic_ok = c->nondeterministic_ok };
        plan = plan_for(c, geo);
        if (!plan)
            why = "cuDNN found no engine for the graph";
    }
    if (why && c->mode == MODE_FORCE) {
        fprintf(stderr,
                "ftmpi: CUDA backend: attention_%s: FTMPI_CUDNN_ATTENTION=force, but cuDNN does "
                "not take batch=%d seq_len=%d n_heads=%d n_kv_heads=%d head_dim=%d window=%d: %s; "
                "unset it to fall back to the own kernels\n",
                backward ? "bwd" : "fwd", s.batch, s.seq_len, s.n_heads, s.n_kv_heads,
                s.head_dim, s.window, why);
        abort();
    }
    return plan;
}

static void upload_docs(ft_backend *be, const ft_cudnn_attn *c, call_mem *m)
{
    size_t bytes = ft_sdpa_docs_bytes(&c->docs);
    ft_cuda_check(cudaMemcpyAsync(m->docs, c->docs.host, bytes, cudaMemcpyHostToDevice,
                                  ft_cuda_stream(be)),
                  "attention (cuDNN documents)");
}

/* Binds the tensors both directions share. */
static void bind_common(pack *p, const ft_sdpa_geom *g, const ft_cudnn_attn *c,
                        const call_mem *m, const float *scalars)
{
    bind(p, FT_SDPA_SCALE, &scalars[0]);
    bind(p, FT_SDPA_NEG_INF, &scalars[1]);
    if (g->window > 0)
        bind(p, FT_SDPA_WINDOW, &scalars[2]);
    if (g->ragged) {
        bind(p, FT_SDPA_RAGGED_Q, ft_sdpa_docs_table(&c->docs, m->docs, FT_SDPA_DOC_OFF_Q));
        bind(p, FT_SDPA_RAGGED_KV, ft_sdpa_docs_table(&c->docs, m->docs, FT_SDPA_DOC_OFF_KV));
        bind(p, FT_SDPA_SEQ_Q, ft_sdpa_docs_table(&c->docs, m->docs, FT_SDPA_DOC_LEN));
        bind(p, FT_SDPA_SEQ_KV, ft_sdpa_docs_table(&c->docs, m->docs, FT_SDPA_DOC_LEN));
    }
}

static void stats_move(ft_backend *be, const ft_cudnn_attn *c, const call_mem *m, float *lse,
                       ft_attn_shape s, int to_lse)
{
    const int32_t *len = ft_sdpa_docs_table(&c->docs, m->docs, FT_SDPA_DOC_LEN);
    const int32_t *token = ft_sdpa_docs_table(&c->docs, m->docs, FT_SDPA_DOC_TOKEN);
    ft_cuda_check(ft_cuda_launch_sdpa_stats(lse, m->stats, token, len, c->docs.docs, s.n_heads,
                                            s.seq_len, c->docs.rows, to_lse, ft_cuda_stream(be)),
                  "attention (cuDNN statistics)");
}

int ft_cudnn_attention_fwd(ft_backend *be, void *out, float *lse, const void *q, const void *k,
                           const void *v, const int32_t *segment, ft_attn_shape s)
{
    ft_cudnn_attn *c;
    ft_sdpa_geom g;
    int32_t *hinted;
    const ft_sdpa_graph *plan = prepare(be, &c, segment, s, 0, &g, &hinted);
    if (!plan)
        return FT_CUDNN_DECLINED;
    call_mem m = carve(be, &g, plan, &c->docs, hinted, s);
    if (g.ragged && !hinted)
        upload_docs(be, c, &m);
    const float scalars[3] = { 1.0f / sqrtf((float)s.head_dim), -INFINITY, (float)s.window };
    pack p = { .n = 0 };
    bind(&p, FT_SDPA_Q, q);
    bind(&p, FT_SDPA_K, k);
    bind(&p, FT_SDPA_V, v);
    bind(&p, FT_SDPA_O, out);
    bind(&p, FT_SDPA_STATS, g.ragged ? m.stats : lse);
    bind_common(&p, &g, c, &m, scalars);
    execute(c, plan, &p, m.workspace, "attention_fwd");
    if (g.ragged)
        stats_move(be, c, &m, lse, s, 1);
    return FT_CUDNN_DONE;
}

int ft_cudnn_attention_bwd(ft_backend *be, void *dq, void *dk, void *dv, const void *dout,
                           const void *out, const float *lse, const void *q, const void *k,
                           const void *v, const int32_t *segment, ft_attn_shape s)
{
    ft_cudnn_attn *c;
    ft_sdpa_geom g;
    int32_t *hinted;
    const ft_sdpa_graph *plan = prepare(be, &c, segment, s, 1, &g, &hinted);
    if (!plan)
        return FT_CUDNN_DECLINED;
    call_mem m = carve(be, &g, plan, &c->docs, hinted, s);
    if (g.ragged) {
        if (!hinted)
            upload_docs(be, c, &m);
        stats_move(be, c, &m, (float *)lse, s, 0);
    }
    const float scalars[4] = { 1.0f / sqrtf((float)s.head_dim), -INFINITY, (float)s.window, 1.0f };
    pack p = { .n = 0 };
    bind(&p, FT_SDPA_Q, q);
    bind(&p, FT_SDPA_K, k);
    bind(&p, FT_SDPA_V, v);
    bind(&p, FT_SDPA_O, out);
    bind(&p, FT_SDPA_DO, dout);
    bind(&p, FT_SDPA_DQ, dq);
    bind(&p, FT_SDPA_DK, dk);
    bind(&p, FT_SDPA_DV, dv);
    bind(&p, FT_SDPA_STATS, g.ragged ? m.stats : lse);
    bind(&p, FT_SDPA_ONE, &scalars[3]);
    bind(&p, FT_SDPA_SOFTMAX_SUM, m.softmax_sum);
    bind(&p, FT_SDPA_DQ_ACCUM, m.dq_accum);
    bind_common(&p, &g, c, &m, scalars);
    execute(c, plan, &p, m.workspace, "attention_bwd");
    return FT_CUDNN_DONE;
}

#endif
