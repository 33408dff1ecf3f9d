#include "prep/prep.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/dataset.h"
#include "io/tok_fingerprint.h"
#include "tokenizer/chat_template.h"
#include "prep/prep_comm.h"
#include "prep/prep_writer.h"
#include "util/output_file.h"

void prep_options_default(prep_options *o)
{
    memset(o, 0, sizeof *o);
    o->seq_len = 2048;
    o->pack = PREP_PACK_GREEDY;
    o->truncate = PREP_TRUNCATE_RESPONSE;
    o->seed = 1;
    o->max_reported = 50;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A bad record, kept for reporting: fixed size so that ranks can gather them as bytes. */
typedef struct bad_record {
    int32_t file;
    int32_t kind; /* 0: line of a JSONL/text file, 1: element of a JSON array, 2: whole file */
    int64_t where;
    char msg[240];
} bad_record;

/* Per-rank state of the read/tokenize phase. */
typedef struct read_ctx {
    const prep_options *o;
    const prep_template *tpl;
    const ft_tokenizer *tok;
    ft_tok_scratch *scratch;
    prep_render render;
    prep_examples ex;
    int file;
    int where_kind;
    int64_t records, bad, dropped, truncated;
    bad_record *kept; /* the first o->max_reported bad records of this rank */
    int n_kept;
} read_ctx;

static int on_bad(void *vctx, int64_t where, const char *problem, ft_error *err)
{
    read_ctx *c = vctx;
    c->records++;
    c->bad++;
    if (c->n_kept < c->o->max_reported) {
        bad_record *b = &c->kept[c->n_kept++];
        b->file = c->file;
        b->kind = c->where_kind;
        b->where = where;
        snprintf(b->msg, sizeof b->msg, "%s", problem);
    }
    return 0;
}

static int on_record(void *vctx, json_t *obj, const char *text, size_t len, int64_t where,
                     ft_error *err)
{
    read_ctx *c = vctx;
    ft_error why = { { 0 }, 0 };
    int rc = obj ? prep_render_json(c->tpl, obj, &c->render, &why)
                 : prep_render_text(c->tpl, text, len, &c->render, &why);
    if (rc) {
        on_bad(c, where, why.msg, err);
        return 0;
    }
    c->records++;
    prep_outcome out;
    if (prep_examples_add(&c->ex, &c->render, c->tok, c->scratch, c->o->seq_len + 1,
                          c->o->truncate, &out, err))
        return -1;
    c->dropped += out == PREP_DROPPED;
    c->truncated += out == PREP_TRUNCATED;
    return 0;
}

static int by_place(const void *a, const void *b)
{
    const bad_record *x = a, *y = b;
    if (x->file != y->file)
        return x->file < y->file ? -1 : 1;
    return (x->where > y->where) - (x->where < y->where);
}

/* Rank 0 prints the first max_reported bad records in file order. */
static void report_bad(MPI_Comm comm, const prep_options *o, read_ctx *c, int64_t total_bad)
{
    int rank, P;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &P);
    int bytes = c->n_kept * (int)sizeof(bad_record);
    int *counts = rank == 0 ? malloc((size_t)P * 2 * sizeof *counts) : NULL;
    MPI_Gather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, 0, comm);
    bad_record *all = NULL;
    int total = 0;
    if (rank == 0) {
        for (int r = 0; r < P; r++)
            counts[P + r] = total, total += counts[r];
        all = malloc(total ? (size_t)total : 1);
    }
    MPI_Gatherv(c->kept, bytes, MPI_BYTE, all, counts, counts ? counts + P : NULL, MPI_BYTE, 0,
                comm);
    if (rank == 0) {
        int n = total / (int)sizeof(bad_record);
        qsort(all, (size_t)n, sizeof *all, by_place);
        for (int i = 0; i < n && i < o->max_reported; i++) {
            const bad_record *b = &all[i];
            const char *path = o->inputs[b->file];
            if (b->kind == 0)
                fprintf(stderr, "%s:%" PRId64 ": %s\n", path, b->where, b->msg);
            else if (b->kind == 1)
                fprintf(stderr, "%s: element %" PRId64 ": %s\n", path, b->where, b->msg);
            else
                fprintf(stderr, "%s: %s\n", path, b->msg);
        }
        if (total_bad > o->max_reported)
            fprintf(stderr, "ftmpi-prep: ... and %" PRId64 " more bad records\n",
                    total_bad - o->max_reported);
    }
    free(all);
    free(counts);
}

/* --format auto: rank 0 looks at the inputs in order and broadcasts what it found. */
static int resolve_format(MPI_Comm comm, const prep_options *o, prep_format *fmt, ft_error *err)
{
    *fmt = o->format;
    if (o->input_kind != PREP_INPUT_JSON)
        *fmt = PREP_FORMAT_TEXT;
    if (*fmt != PREP_FORMAT_AUTO)
        return 0;
    int rank, v = 0, rc = 0;
    MPI_Comm_rank(comm, &rank);
    if (rank == 0) {
        for (int i = 0; i < o->n_inputs && *fmt == PREP_FORMAT_AUTO && rc == 0; i++)
            rc = prep_detect_file_format(o->inputs[i], fmt, err);
        if (rc == 0 && *fmt == PREP_FORMAT_AUTO)
            rc = ft_fail(err, "%s: no record looks like alpaca, dolly, samsum, chat or text; "
                         "pass --format", o->inputs[0]);
        v = rc ? -1 : (int)*fmt;
    }
    MPI_Bcast(&v, 1, MPI_INT, 0, comm);
    if (v < 0) {
        if (rank != 0)
            ft_error_clear(err);
        return -1;
    }
    *fmt = (prep_format)v;
    return 0;
}

static int32_t pick_pad(const ft_tokenizer *tok, const prep_options *o, int32_t eos, ft_error *err)
{
    if (o->pad_token) {
        int32_t id = ft_tokenizer_token_id(tok, o->pad_token);
        if (id < 0)
            ft_fail(err, "--pad %s: no such token in the tokenizer", o->pad_token);
        return id;
    }
    /* transformers' pad_token where the tokenizer names one, then Llama 3.1's reserved pad */
    int32_t id = ft_tokenizer_pad_id(tok);
    if (id < 0)
        id = ft_tokenizer_token_id(tok, "<|finetune_right_pad_id|>");
    return id >= 0 ? id : eos;
}

/* The global view: lengths and owners of all examples in file order, from each rank's
 * per-file counts. Output arrays are malloc'd. */
static int gather_global(MPI_Comm comm, const read_ctx *c, const int64_t *local_count, int nf,
                         int64_t *n_out, int32_t **len_out, int32_t **owner_out,
                         int64_t **gidx_out, ft_error *err)
{
    int rank, P;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &P);
    int64_t *cnt = malloc((size_t)P * (size_t)nf * sizeof *cnt); /* [rank][file] */
    int *rc_n = malloc((size_t)P * 2 * sizeof *rc_n);
    if (!cnt || !rc_n) {
        free(cnt), free(rc_n);
        return ft_fail(err, "out of host memory");
    }
    MPI_Allgather(local_count, nf, MPI_INT64_T, cnt, nf, MPI_INT64_T, comm);
    int64_t n = 0;
    for (int i = 0; i < P * nf; i++)
        n += cnt[i];
    int rc = 0;
    for (int r = 0; r < P; r++) {
        int64_t s = 0;
        for (int f = 0; f < nf; f++)
            s += cnt[r * nf + f];
        if (s > 0x7fffffff)
            rc = 1;
        rc_n[r] = (int)s;
    }
    for (int r = 0, d = 0; r < P; r++)
        rc_n[P + r] = d, d += rc_n[r];
    size_t m = (size_t)(n > 0 ? n : 1);
    int32_t *by_rank = malloc(m * sizeof *by_rank), *len = malloc(m * sizeof *len);
    int32_t *owner = malloc(m * sizeof *owner);
    int64_t *gidx = malloc((size_t)(c->ex.n > 0 ? c->ex.n : 1) * sizeof *gidx);
    int32_t *mine = malloc((size_t)(c->ex.n > 0 ? c->ex.n : 1) * sizeof *mine);
    if (rc || !by_rank || !len || !owner || !gidx || !mine) {
        free(cnt), free(rc_n), free(by_rank), free(len), free(owner), free(gidx), free(mine);
        return ft_fail(err, rc ? "more than 2^31 examples on one rank" : "out of host memory");
    }
    for (int64_t i = 0; i < c->ex.n; i++)
        mine[i] = prep_example_len(&c->ex, i);
    MPI_Allgatherv(mine, (int)c->ex.n, MPI_INT32_T, by_rank, rc_n, rc_n + P, MPI_INT32_T, comm);
    /* Global order: file by file, and within a file rank by rank (byte ranges are in order). */
    int64_t e = 0;
    for (int f = 0; f < nf; f++)
        for (int r = 0; r < P; r++) {
            int64_t at = rc_n[P + r];
            for (int g = 0; g < f; g++)
                at += cnt[r * nf + g];
            int64_t k = cnt[r * nf + f];
            if (r == rank) {
                int64_t local = at - rc_n[P + r];
                for (int64_t i = 0; i < k; i++)
                    gidx[local + i] = e + i;
            }
            for (int64_t i = 0; i < k; i++) {
                len[e + i] = by_rank[at + i];
                owner[e + i] = r;
            }
            e += k;
        }
    free(cnt), free(rc_n), free(by_rank), free(mine);
    *n_out = n, *len_out = len, *owner_out = owner, *gidx_out = gidx;
    return 0;
}

/* Opens the dump's temporary file for this rank's chunk: the first chunk creates it new
 * (util/output_file.h: never through a planted symlink), the later ones append to it, still
 * without following a symlink put in its place meanwhile. */
static int open_dump_chunk(const char *tmp, bool first_chunk, FILE **out, ft_error *err)
{
    if (first_chunk)
        return ft_output_fopen_tmp(tmp, out, err);
    int fd = open(tmp, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || !(*out = fdopen(fd, "a"))) {
        const int e = errno;
        if (fd >= 0)
            close(fd);
        return ft_fail(err, "%s: cannot append: %s", tmp, strerror(e));
    }
    return 0;
}

/* --dump-examples: every example in global order, chunk by chunk (file, then rank), written
 * to FILE.tmp and renamed to FILE once every chunk is in it, like the dataset files: a run
 * killed or failing half-way leaves a previous FILE intact and never a truncated one (a
 * failed run removes its .tmp). Collective. */
static int dump_examples(MPI_Comm comm, const prep_options *o, const read_ctx *c,
                         const int64_t *local_count, ft_error *err)
{
    int rank, P, rc = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &P);
    char tmp[PATH_MAX + 8];
    if (prep_agree(comm, ft_output_tmp_name(tmp, sizeof tmp, o->dump_examples, err), err))
        return -1;
    int64_t first = 0;
    for (int f = 0; f < o->n_inputs; f++) {
        for (int r = 0; r < P; r++) {
            if (r == rank && rc == 0) {
                FILE *out = NULL;
                rc = open_dump_chunk(tmp, f == 0 && r == 0, &out, err);
                if (rc == 0) {
                    rc = prep_examples_dump(&c->ex, first, first + local_count[f], out, err);
                    if (fclose(out) != 0 && rc == 0)
                        rc = ft_fail(err, "%s: write error", tmp);
                }
            }
            /* a failed chunk stops the rest: the chunks after it would append to a file
             * that is removed below, or that the first chunk never created */
            if (prep_agree(comm, rc, err))
                goto fail;
        }
        first += local_count[f];
    }
    return prep_commit_tmp(comm, tmp, o->dump_examples, "dumped", err);
fail:
    if (rank == 0)
        unlink(tmp);
    return -1;
}

static int write_one(MPI_Comm comm, const char *path, const read_ctx *c, const prep_global *g,
                     const int64_t *list, int64_t n_list, const prep_options *o,
                     const ft_dataset_info *info, prep_set_stats *st, ft_error *err)
{
    int32_t *len = malloc((size_t)(n_list > 0 ? n_list : 1) * sizeof *len);
    if (!len)
        return prep_agree(comm, ft_fail(err, "out of host memory"), err);
    for (int64_t k = 0; k < n_list; k++)
        len[k] = g->len[list[k]];
    prep_plan plan;
    int rc = prep_pack(len, n_list, o->seq_len + 1, o->pack, &plan, err);
    free(len);
    if (prep_agree(comm, rc, err))
        return -1;
    rc = prep_write_set(comm, path, &c->ex, g, list, n_list, &plan, info, st, err);
    prep_plan_free(&plan);
    return rc;
}

static void print_set(const char *path, const prep_set_stats *s, int W)
{
    double cells = (double)s->rows * W;
    printf("ftmpi-prep: %s: %" PRId64 " documents in %" PRId64 " rows of %d tokens; %" PRId64
           " tokens, %" PRId64 " targets (%.1f%% masked); padding %.1f%%\n",
           path, s->documents, s->rows, W, s->tokens, s->targets,
           s->tokens ? 100.0 * (double)(s->tokens - s->targets) / (double)s->tokens : 0.0,
           cells > 0 ? 100.0 * (double)s->padding / cells : 0.0);
}

/* An output renamed over one of the inputs (or over the other output) would destroy
 * it: refused before anything is read. */
static int check_outputs(const prep_options *o, ft_error *err)
{
    const char *outs[3] = { o->out, o->eval_out, o->dump_examples },
               *out_opt[3] = { "-o", "--eval-out", "--dump-examples" };
    for (int k = 0; k < 3; k++) {
        if (!outs[k])
            continue;
        for (int i = 0; i < o->n_inputs; i++)
            if (ft_output_not_input(outs[k], out_opt[k], o->inputs[i], "input", err))
                return -1;
        if (ft_output_not_input(outs[k], out_opt[k], o->tokenizer, "-t", err) ||
            ft_output_not_input(outs[k], out_opt[k], o->prompt_template, "--prompt-template",
                                err) ||
            ft_output_not_input(outs[k], out_opt[k], o->prompt_template_no_input,
                                "--prompt-template-no-input", err) ||
            (k >= 1 && ft_output_not_input(outs[k], out_opt[k], outs[0], out_opt[0], err)) ||
            (k == 2 && ft_output_not_input(outs[2], out_opt[2], outs[1], out_opt[1], err)))
            return -1;
    }
    return 0;
}

int prep_run(const prep_options *o, MPI_Comm comm, ft_error *err)
{
    int rank, P;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &P);
    double t0 = now();
    ft_tokenizer *tok = NULL;
    prep_template tpl = { 0 };
    read_ctx c = { 0 };
    int64_t *local_count = calloc((size_t)o->n_inputs, sizeof *local_count);
    int32_t *glen = NULL, *gowner = NULL;
    int64_t *gidx = NULL, *train = NULL, *eval = NULL;
    int rc = local_count ? 0 : ft_fail(err, "out of host memory");
    if (rc == 0)
        rc = check_outputs(o, err);
    if (rc == 0)
        rc = ft_tokenizer_load(o->tokenizer, &tok, err);
    if (prep_agree(comm, rc, err))
        goto fail;
    prep_format fmt;
    if (resolve_format(comm, o, &fmt, err))
        goto fail;
    /* Chat records without --template: the tokenizer's own chat_template decides, when it is
     * one ftmpi knows; an unknown one is an error rather than a silent guess. */
    prep_template_kind kind = o->template_kind;
    rc = 0;
    const char *known = NULL;
    if (fmt == PREP_FORMAT_CHAT && kind == PREP_TPL_AUTO &&
        (rc = ft_chat_template_detect(o->tokenizer, &known, err)) > 0)
        rc = prep_template_parse(known, &kind) ? ft_fail(err, "internal: template %s", known) : 0;
    if (rc == 0)
        rc = prep_template_init(&tpl, fmt, kind, o->prompt_template,
                            o->prompt_template_no_input, tok, o->eos_token, err);
    int32_t pad = rc ? -1 : pick_pad(tok, o, tpl.eos, err);
    if (rc == 0 && pad < 0)
        rc = -1;
    c.o = o, c.tpl = &tpl, c.tok = tok;
    if (rc == 0) {
        c.scratch = ft_tok_scratch_new(tok);
        c.kept = malloc((size_t)(o->max_reported > 0 ? o->max_reported : 1) * sizeof *c.kept);
        rc = c.scratch && c.kept ? prep_examples_init(&c.ex, err) : ft_fail(err, "out of memory");
    }
    if (prep_agree(comm, rc, err))
        goto fail;

    /* Read and tokenize this rank's share of every input. */
    double t1 = now();
    prep_reader_cb cb = { on_record, on_bad, &c };
    for (int f = 0; f < o->n_inputs; f++) {
        prep_read_result res = { 0 };
        int64_t before = c.ex.n, lines_before = 0;
        int first_kept = c.n_kept;
        c.file = f;
        c.where_kind = o->input_kind == PREP_INPUT_TEXT_FILE ? 2 : 0;
        rc = prep_read_share(o->inputs[f], f, o->input_kind, rank, P, &cb, &res, err);
        if (res.array)
            for (int i = first_kept; i < c.n_kept; i++)
                c.kept[i].kind = 1;
        /* Line numbers from the file start: lines of the ranks before this one. */
        MPI_Exscan(&res.lines, &lines_before, 1, MPI_INT64_T, MPI_SUM, comm);
        if (rank == 0)
            lines_before = 0;
        if (!res.where_is_global)
            for (int i = first_kept; i < c.n_kept; i++)
                c.kept[i].where += lines_before;
        local_count[f] = c.ex.n - before;
        if (prep_agree(comm, rc, err))
            goto fail;
    }
    double t_tok = now() - t1;
    int64_t loc[5] = { c.records, c.bad, c.dropped, c.truncated, (int64_t)c.ex.ntok }, tot[5];
    MPI_Allreduce(loc, tot, 5, MPI_INT64_T, MPI_SUM, comm);
    report_bad(comm, o, &c, tot[1]);
    if (o->strict && tot[1] > 0) {
        if (rank == 0)
            ft_fail(err, "%" PRId64 " bad records (--strict): nothing written", tot[1]);
        else
            ft_error_clear(err);
        goto fail;
    }
    int64_t n = 0;
    rc = gather_global(comm, &c, local_count, o->n_inputs, &n, &glen, &gowner, &gidx, err);
    if (prep_agree(comm, rc, err))
        goto fail;
    if (o->dump_examples && dump_examples(comm, o, &c, local_count, err))
        goto fail;
    int64_t n_train = 0, n_eval = 0;
    rc = n == 0 ? ft_fail(err, "no usable examples in the input (%" PRId64 " bad, %" PRId64
                          " too long)", tot[1], tot[2])
                : prep_split(n, o->eval_fraction, o->seed, o->shuffle, &train, &n_train, &eval,
                             &n_eval, err);
    if (prep_agree(comm, rc, err))
        goto fail;

    ft_dataset_info info = { 0 };
    info.seq_len = o->seq_len;
    info.vocab_size = ft_tokenizer_vocab_size(tok);
    info.bos_token_id = tpl.bos;
    info.eos_token_id = tpl.eos;
    info.pad_token_id = pad;
    snprintf(info.tokenizer_hash, sizeof info.tokenizer_hash, "%016" PRIx64,
             ft_tokenizer_hash(tok));
    snprintf(info.template_name, sizeof info.template_name, "%s", tpl.name);
    /* what training and generation compare with the model's tokenizer */
    if (prep_agree(comm, ft_tok_fingerprint_file(o->tokenizer, info.tokenizer_fingerprint, err),
                   err))
        goto fail;
    prep_global g = { n, glen, gowner, gidx };
    prep_set_stats st_train = { 0 }, st_eval = { 0 };
    if (write_one(comm, o->out, &c, &g, train, n_train, o, &info, &st_train, err))
        goto fail;
    if (n_eval > 0 && o->eval_out &&
        write_one(comm, o->eval_out, &c, &g, eval, n_eval, o, &info, &st_eval, err))
        goto fail;
    if (rank == 0 && !o->quiet) {
        double t = now() - t0;
        printf("ftmpi-prep: %" PRId64 " records: %" PRId64 " examples, %" PRId64
               " skipped (bad), %" PRId64 " dropped (too long), %" PRId64 " truncated\n",
               tot[0], n, tot[1], tot[2], tot[3]);
        printf("ftmpi-prep: template %s, format %s, %d rank%s: %" PRId64
               " tokens in %.2f s (%.0f tokens/s), total %.2f s\n",
               tpl.name, prep_format_name(fmt), P, P > 1 ? "s" : "", tot[4], t_tok,
               t_tok > 0 ? (double)tot[4] / t_tok : 0.0, t);
        print_set(o->out, &st_train, o->seq_len + 1);
        if (n_eval > 0 && o->eval_out)
            print_set(o->eval_out, &st_eval, o->seq_len + 1);
        fflush(stdout);
    }
    rc = 0;
    goto out;
fail:
    rc = -1;
out:
    free(train), free(eval), free(glen), free(gowner), free(gidx), free(local_count), free(c.kept);
    prep_render_free(&c.render);
    prep_examples_free(&c.ex);
    if (c.scratch)
        ft_tok_scratch_free(c.scratch);
    prep_template_free(&tpl);
    if (tok)
        ft_tokenizer_free(tok);
    return rc ? -1 : 0;
}
