/* cuDNN attention with packed documents and the segment hint (the vtable's segment_hint,
 * cuda/cuda_segment_hint.h): with the host copy of the ids handed over, attention calls
 * derive their document table without reading the ids back, so they neither copy from
 * the device nor wait for it; results are the same bit for bit as without the hint.
 *
 *  - ops: forward and backward with documents, without and with a hint: outputs, lse
 *    and gradients bitwise equal; the hinted calls make no device->host copy and no
 *    host wait (the harness counts both), the unhinted ones do (so the count can fail).
 *  - staleness: new ids uploaded into the same device buffer without a hint must not
 *    use the old table (the results equal those of the new ids in another buffer, and
 *    differ from the old ids'); a hint for the new ids makes the calls wait-free again;
 *    zeroing or freeing the buffer drops the hint too.
 *  - a training micro-batch (tiny Llama, bf16, packed documents, activation
 *    checkpointing): every attention call runs on cuDNN, the calls of the hinted run
 *    (forward, recompute but of the last layer, backward) make no copy back and no wait, a run
 *    with the hint withheld makes one per call, and loss and gradients are bitwise equal.
 *
 * Counting needs the CPU execution harness; on a GPU the bitwise checks still run (the
 * gradients only where two runs of cuDNN's backward give the same bits there). Exit 77
 * (SKIP) without a device or without cuDNN in the build. */
#include "config.h"

#include <cuda_runtime.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/test_env.h"
#include "util/bf16.h"

#ifdef FT_CUDA_EMULATION
#include "cudaemu.h"
#endif

#ifdef HAVE_CUDNN
static int failures, checks;
/* Whether two runs of the same backward give the same bits. The harness's do; a GPU's
 * cuDNN backward may sum dQ in a different order each run, and then only the forward
 * (out, lse, loss) is compared bitwise. */
static int backward_repeatable = 1;

static void report(int ok, const char *what, const char *detail)
{
    checks++;
    failures += !ok;
    printf("%s %s: %s\n", ok ? "ok  " : "FAIL", what, detail);
}

/* Host waits and device->host copies so far; -1 where they cannot be counted. */
static long traffic(void)
{
#ifdef FT_CUDA_EMULATION
    return cudaemu_host_waits() + cudaemu_device_to_host_copies();
#else
    return -1;
#endif
}

static long executions(void)
{
#ifdef FT_CUDA_EMULATION
    return cudaemu_cudnn_executions();
#else
    return -1;
#endif
}

static uint64_t rng = 0x2545f4914f6cdd1dull;

static float uniform(float lo, float hi)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 40) & 0xffffff) / 16777216.0f;
}

/* ---------------------------------------------------------------- ops */

typedef struct operands {
    ft_attn_shape s;
    size_t nq, nkv, nl, tokens;
    void *q, *k, *v, *dout, *out, *dq, *dk, *dv;
    float *lse;
} operands;

/* What one forward + backward wrote, as bits. */
typedef struct result {
    uint16_t *out, *dq, *dk, *dv;
    float *lse;
    long traffic; /* host waits + copies back during the two calls (-1: not counted) */
} result;

static void *random_bf16(ft_backend *be, size_t n, float amp)
{
    uint16_t *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++)
        h[i] = ft_f32_to_bf16(uniform(-amp, amp));
    void *p = be->ops->alloc(be, n * 2);
    be->ops->upload(be, p, h, n * 2);
    free(h);
    return p;
}

static void *download(ft_backend *be, const void *p, size_t bytes)
{
    void *h = malloc(bytes);
    be->ops->download(be, h, p, bytes);
    return h;
}

static result run(ft_backend *be, operands *o, const int32_t *segment)
{
    result r;
    long t0 = traffic();
    be->ops->attention_fwd(be, FT_DTYPE_BF16, o->out, o->lse, o->q, o->k, o->v, segment, o->s);
    be->ops->attention_bwd(be, FT_DTYPE_BF16, o->dq, o->dk, o->dv, o->dout, o->out, o->lse, o->q,
                           o->k, o->v, segment, o->s);
    r.traffic = t0 < 0 ? -1 : traffic() - t0;
    r.out = download(be, o->out, o->nq * 2);
    r.dq = download(be, o->dq, o->nq * 2);
    r.dk = download(be, o->dk, o->nkv * 2);
    r.dv = download(be, o->dv, o->nkv * 2);
    r.lse = download(be, o->lse, o->nl * 4);
    return r;
}

static int same_forward(const result *a, const result *b, const operands *o)
{
    return memcmp(a->out, b->out, o->nq * 2) == 0 && memcmp(a->lse, b->lse, o->nl * 4) == 0;
}

static int same_backward(const result *a, const result *b, const operands *o)
{
    return memcmp(a->dq, b->dq, o->nq * 2) == 0 && memcmp(a->dk, b->dk, o->nkv * 2) == 0 &&
           memcmp(a->dv, b->dv, o->nkv * 2) == 0;
}

static int same(const result *a, const result *b, const operands *o)
{
    return same_forward(a, b, o) && (!backward_repeatable || same_backward(a, b, o));
}

static void drop(result *r)
{
    free(r->out), free(r->dq), free(r->dk), free(r->dv), free(r->lse);
}

/* Checks a run against the one it must equal, and its traffic: zero (hinted) or not. */
static void expect(const char *what, const result *got, const result *want, const operands *o,
                   int wait_free)
{
    char detail[160];
    snprintf(detail, sizeof detail, "bitwise %s", same(got, want, o) ? "equal" : "DIFFERENT");
    report(same(got, want, o), what, detail);
    if (got->traffic < 0)
        return;
    snprintf(detail, sizeof detail, "%ld host waits and copies back (want %s)", got->traffic,
             wait_free ? "0" : "> 0");
    report(wait_free ? got->traffic == 0 : got->traffic > 0, what, detail);
}

static void test_ops(ft_backend *be)
{
    operands o = { .s = { 2, 100, 4, 2, 64, 0 } };
    o.tokens = (size_t)o.s.batch * o.s.seq_len;
    o.nq = o.tokens * o.s.n_heads * o.s.head_dim;
    o.nkv = o.tokens * o.s.n_kv_heads * o.s.head_dim;
    o.nl = (size_t)o.s.batch * o.s.n_heads * o.s.seq_len;
    o.q = random_bf16(be, o.nq, 2), o.k = random_bf16(be, o.nkv, 2);
    o.v = random_bf16(be, o.nkv, 1), o.dout = random_bf16(be, o.nq, 1);
    o.out = be->ops->alloc(be, o.nq * 2), o.dq = be->ops->alloc(be, o.nq * 2);
    o.dk = be->ops->alloc(be, o.nkv * 2), o.dv = be->ops->alloc(be, o.nkv * 2);
    o.lse = be->ops->alloc(be, o.nl * 4);
    /* two batches of documents: runs of 23 tokens, and of 7 */
    int32_t *ids_a = malloc(o.tokens * 4), *ids_b = malloc(o.tokens * 4);
    for (size_t i = 0; i < o.tokens; i++) {
        ids_a[i] = (int32_t)(i % (size_t)o.s.seq_len / 23);
        ids_b[i] = 50 + (int32_t)(i % (size_t)o.s.seq_len / 7);
    }
    int32_t *seg = be->ops->alloc(be, o.tokens * 4), *other = be->ops->alloc(be, o.tokens * 4);

    long ran = executions();
    be->ops->upload(be, seg, ids_a, o.tokens * 4);
    result a_plain = run(be, &o, seg);
    report(a_plain.traffic != 0, "documents of 23, no hint",
           a_plain.traffic < 0 ? "(not counted on a GPU)" : "reads the ids back");
    result a_repeat = run(be, &o, seg);
    backward_repeatable = same_backward(&a_repeat, &a_plain, &o);
#ifdef FT_CUDA_EMULATION
    report(backward_repeatable, "documents of 23, no hint, twice", "the same gradient bits");
#else
    if (!backward_repeatable)
        printf("note: this device's cuDNN backward is not bitwise repeatable: gradients are "
               "not compared bitwise\n");
#endif
    be->ops->segment_hint(be, seg, ids_a, o.s);
    result a_hint = run(be, &o, seg);
    expect("documents of 23, hinted", &a_hint, &a_plain, &o, 1);
    result a_again = run(be, &o, seg); /* the table derived by the first hinted call */
    expect("documents of 23, hinted, again", &a_again, &a_plain, &o, 1);

    /* the reference for the second batch: another buffer, no hint */
    be->ops->upload(be, other, ids_b, o.tokens * 4);
    result b_plain = run(be, &o, other);
    report(!same(&b_plain, &a_plain, &o), "documents of 7 vs of 23",
           "the two batches give different results (a stale table would show)");
    /* stale: the new batch in the hinted buffer, without a hint */
    be->ops->upload(be, seg, ids_b, o.tokens * 4);
    result b_stale = run(be, &o, seg);
    expect("documents of 7 uploaded over the hinted buffer, no hint", &b_stale, &b_plain, &o, 0);
    /* a hint per batch, same buffer: the generation changes, so does the table */
    be->ops->upload(be, seg, ids_a, o.tokens * 4);
    be->ops->segment_hint(be, seg, ids_a, o.s);
    result a_gen = run(be, &o, seg);
    expect("documents of 23 again, hinted", &a_gen, &a_plain, &o, 1);
    be->ops->upload(be, seg, ids_b, o.tokens * 4);
    be->ops->segment_hint(be, seg, ids_b, o.s);
    result b_hint = run(be, &o, seg);
    expect("documents of 7, next hint, same buffer", &b_hint, &b_plain, &o, 1);
    /* a hint for another shape does not cover the call */
    ft_attn_shape half = o.s;
    half.batch = 1;
    be->ops->segment_hint(be, seg, ids_b, half);
    result b_shape = run(be, &o, seg);
    expect("documents of 7, hint for batch 1, call for batch 2", &b_shape, &b_plain, &o, 0);
    /* zeroing the buffer drops the hint: one document per row now */
    be->ops->segment_hint(be, seg, ids_b, o.s);
    be->ops->zero(be, seg, o.tokens * 4);
    memset(ids_a, 0, o.tokens * 4);
    be->ops->upload(be, other, ids_a, o.tokens * 4);
    result z_plain = run(be, &o, other);
    result z_stale = run(be, &o, seg);
    expect("hinted buffer zeroed, no hint", &z_stale, &z_plain, &o, 0);

    long want = 2 * 11, got = executions() - ran;
    if (ran >= 0) {
        char detail[96];
        snprintf(detail, sizeof detail, "%ld cuDNN executions, %ld expected", got, want);
        report(got == want, "every call on cuDNN", detail);
    }
    result *all[] = { &a_plain, &a_repeat, &a_hint, &a_again, &b_plain, &b_stale, &a_gen, &b_hint, &b_shape,
                      &z_plain, &z_stale };
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        drop(all[i]);
    void *g[] = { o.q, o.k, o.v, o.dout, o.out, o.dq, o.dk, o.dv, o.lse, seg, other };
    for (size_t i = 0; i < sizeof g / sizeof *g; i++)
        be->ops->free(be, g[i]);
    free(ids_a);
    free(ids_b);
}

/* ---------------------------------------------------------------- a training micro-batch */

/* The backend's vtable with the attention calls counted and the hint switchable. The
 * real ops are kept in the wrapper, reached from the backend through its ops pointer. */
typedef struct counting_ops {
    ft_backend_ops ops; /* first: the backend's ops pointer points here */
    const ft_backend_ops *real;
    int pass_hint;
    int calls, calls_with_docs, hints;
    long traffic; /* during attention calls */
} counting_ops;

static counting_ops *counting_of(ft_backend *be) { return (counting_ops *)(void *)be->ops; }

static void counted_fwd(ft_backend *be, ft_dtype dt, void *out, float *lse, const void *q,
                        const void *k, const void *v, const int32_t *segment, ft_attn_shape s)
{
    counting_ops *c = counting_of(be);
    long t0 = traffic();
    c->real->attention_fwd(be, dt, out, lse, q, k, v, segment, s);
    c->traffic += traffic() - t0;
    c->calls++;
    c->calls_with_docs += segment != NULL;
}

static void counted_bwd(ft_backend *be, ft_dtype dt, void *dq, void *dk, void *dv,
                        const void *dout, const void *out, const float *lse, const void *q,
                        const void *k, const void *v, const int32_t *segment, ft_attn_shape s)
{
    counting_ops *c = counting_of(be);
    long t0 = traffic();
    c->real->attention_bwd(be, dt, dq, dk, dv, dout, out, lse, q, k, v, segment, s);
    c->traffic += traffic() - t0;
    c->calls++;
    c->calls_with_docs += segment != NULL;
}

static void switchable_hint(ft_backend *be, const int32_t *segment, const int32_t *host,
                            ft_attn_shape s)
{
    counting_ops *c = counting_of(be);
    c->hints++;
    if (c->pass_hint)
        c->real->segment_hint(be, segment, host, s);
}

#define OK(call)                                                                                   \
    do {                                                                                           \
        if ((call) != 0) {                                                                         \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, err.msg);                \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

typedef struct step {
    double loss;
    float **grads;
    counting_ops counted;
    long executions;
} step;

static step train_once(ft_backend *be, ft_engine *engine, const ft_model_layout *layout,
                       int pass_hint)
{
    enum { B = 2, T = 48 };
    static uint32_t tokens[B * (T + 1)];
    static uint8_t mask[B * (T + 1)];
    static int32_t segment[B * (T + 1)];
    for (int i = 0; i < B * (T + 1); i++) {
        int col = i % (T + 1), row = i / (T + 1);
        tokens[i] = (uint32_t)((i * 7 + 3) % layout->config.vocab_size);
        mask[i] = col > 0;
        /* documents of 20, 5 and 24 tokens in row 0; 11 and 38 in row 1 */
        segment[i] = row == 0 ? (col < 20 ? 1 : col < 25 ? 2 : 3) : (col < 11 ? 4 : 5);
    }
    ft_error err;
    ft_error_clear(&err);
    ft_model_options mo = { .max_batch = B, .seq_len = T, .activation_checkpointing = true,
                            .dtype = FT_DTYPE_BF16 };
    ft_model *m;
    OK(ft_model_create(&m, layout, be, &mo, &err));
    step st = { .counted = { .ops = *be->ops, .real = be->ops, .pass_hint = pass_hint } };
    st.counted.ops.attention_fwd = counted_fwd;
    st.counted.ops.attention_bwd = counted_bwd;
    st.counted.ops.segment_hint = switchable_hint;
    be->ops = &st.counted.ops;
    ft_engine_zero_grads(engine);
    ft_param_source src = ft_engine_param_source(engine);
    ft_host_batch b = { .batch = B, .seq_len = T, .tokens = tokens, .loss_mask = mask,
                        .segment = segment };
    long n_targets, ran = executions();
    OK(ft_model_train_micro(m, &src, &b, 1.0f, &st.loss, &n_targets, &err));
    st.executions = ran < 0 ? -1 : executions() - ran;
    be->ops = st.counted.real;
    st.grads = calloc((size_t)layout->n_units, sizeof *st.grads);
    for (int u = 0; u < layout->n_units; u++) {
        st.grads[u] = malloc(layout->units[u].numel * sizeof(float));
        ft_engine_download_grads(engine, u, st.grads[u]);
    }
    ft_model_free(m);
    return st;
}

static void test_training(ft_backend *be)
{
    ft_error err;
    ft_error_clear(&err);
    ft_comm *mpi, *comm;
    ft_model_layout layout;
    ft_engine *engine;
    ft_model_config c = test_tiny_config();
    /* head_dim 16: cuDNN is not given the tiny shape's 8 (cuda_attention_cudnn.c) */
    c.hidden_size = 64;
    c.head_dim = 16;
    /* the engine's collectives move device buffers: NCCL, as the trainer has them (an MPI
     * without CUDA support faults on a GPU's pointers; the harness's are host memory) */
    OK(ft_comm_mpi_create(&mpi, &err));
    OK(ft_comm_nccl_create(&comm, be, &err));
    OK(ft_model_layout_build(&layout, &c, &err));
    ft_engine_options eo = {
        .precision = ft_precision_resolve(FT_DTYPE_BF16, FT_DTYPE_BF16, FT_DTYPE_F32),
        .optimizer = FT_OPT_ADAMW
    };
    OK(ft_engine_create(&engine, &layout, be, comm, &eo, &err));
    OK(ft_engine_init_random(engine, 11, 0.2, &err));

    step hinted = train_once(be, engine, &layout, 1);
    step withheld = train_once(be, engine, &layout, 0);
    char detail[200];
    const counting_ops *h = &hinted.counted, *w = &withheld.counted;
    /* forward and backward of each layer and the recompute of all but the last (whose
     * forward activations are still there), all with documents */
    const int want_calls = 3 * c.num_hidden_layers - 1;
    snprintf(detail, sizeof detail, "%d attention calls, %d with documents, %d hints (want %d, "
             "%d, 1)", h->calls, h->calls_with_docs, h->hints, want_calls, want_calls);
    report(h->calls == want_calls && h->calls_with_docs == want_calls && h->hints == 1,
           "training micro-batch", detail);
    if (hinted.executions >= 0) {
        snprintf(detail, sizeof detail, "%ld and %ld cuDNN executions (want %d each)",
                 hinted.executions, withheld.executions, want_calls);
        report(hinted.executions == want_calls && withheld.executions == want_calls,
               "training micro-batch, every attention call on cuDNN", detail);
        snprintf(detail, sizeof detail, "%ld host waits and copies back in attention (want 0)",
                 h->traffic);
        report(h->traffic == 0, "training micro-batch, hinted", detail);
        snprintf(detail, sizeof detail, "%ld host waits and copies back in attention (want >= %d)",
                 w->traffic, want_calls);
        report(w->traffic >= want_calls, "training micro-batch, hint withheld", detail);
    }
    int grads_equal = 1;
    for (int u = 0; u < layout.n_units; u++)
        grads_equal &= memcmp(hinted.grads[u], withheld.grads[u],
                              layout.units[u].numel * sizeof(float)) == 0;
    snprintf(detail, sizeof detail, "loss %.9g vs %.9g, gradients bitwise %s", hinted.loss,
             withheld.loss, grads_equal ? "equal" : "DIFFERENT");
    report(hinted.loss == withheld.loss && (grads_equal || !backward_repeatable),
           "training micro-batch, hinted vs withheld", detail);
    for (int u = 0; u < layout.n_units; u++)
        free(hinted.grads[u]), free(withheld.grads[u]);
    free(hinted.grads);
    free(withheld.grads);
    ft_engine_free(engine);
    ft_model_layout_free(&layout);
    ft_comm_destroy(comm);
    ft_comm_destroy(mpi);
}

int main(int argc, char **argv)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    MPI_Init(&argc, &argv);
    /* every call must take cuDNN: a decline would abort, not pass on the own kernels */
    setenv("FTMPI_CUDNN_ATTENTION", "force", 1);
    ft_backend *be = NULL;
    ft_error err;
    ft_error_clear(&err);
    OK(ft_backend_cuda_create(&be, 0, &err));
    test_ops(be);
    test_training(be);
    ft_backend_destroy(be);
    printf("%d checks, %d failed\n", checks, failures);
    MPI_Finalize();
    return failures ? 1 : 0;
}
#else
int main(void)
{
    printf("SKIP: built without cuDNN\n");
    return 77;
}
#endif
