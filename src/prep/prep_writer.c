#include "prep/prep_writer.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/h5file.h"
#include "prep/prep_comm.h"

/* The rank owning `row` of R rows over P ranks: the largest r with floor(R*r/P) <= row. */
static int row_owner(int64_t row, int64_t R, int P) { return (int)(((row + 1) * P - 1) / R); }

static int64_t row_lo(int r, int64_t R, int P) { return R * r / P; }

/* Own rows [r0, r0+nr) of the three datasets, row-major. */
typedef struct row_block {
    int64_t r0, nr;
    uint32_t *tokens;
    uint8_t *mask;
    int32_t *seg;
} row_block;

static int write_block(ft_h5file *f, const char *name, hid_t ftype, hid_t mtype, int64_t rows,
                       int W, const row_block *b, const void *data, ft_error *err)
{
    hsize_t dims[2] = { (hsize_t)rows, (hsize_t)W };
    hid_t fs = H5Screate_simple(2, dims, NULL);
    hid_t d = H5Dcreate2(f->id, name, ftype, fs, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t mdim = b->nr > 0 ? (hsize_t)b->nr * (hsize_t)W : 1;
    hid_t ms = H5Screate_simple(1, &mdim, NULL);
    if (b->nr > 0) {
        hsize_t start[2] = { (hsize_t)b->r0, 0 }, count[2] = { (hsize_t)b->nr, (hsize_t)W };
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL);
    } else {
        H5Sselect_none(fs);
        H5Sselect_none(ms);
    }
    static const uint32_t dummy = 0; /* HDF5 wants a buffer even for an empty selection */
    herr_t rc = d < 0 ? -1 : H5Dwrite(d, mtype, ms, fs, f->dxpl, data ? data : &dummy);
    if (d >= 0)
        H5Dclose(d);
    H5Sclose(ms);
    H5Sclose(fs);
    return rc < 0 ? ft_fail(err, "%s: cannot write /%s", f->path, name) : 0;
}

/* Same attributes, types and datasets as ft_dataset_write, written collectively. */
static int write_collective(MPI_Comm comm, const char *path, const ft_dataset_info *in,
                            const row_block *b, ft_error *err)
{
    ft_h5file f;
    if (ft_h5_create(&f, path, comm, err))
        return -1;
    const int W = in->seq_len + 1;
    int rank;
    MPI_Comm_rank(comm, &rank);
    /* attributes, then the whole file's space (rank 0), agreed: a full disk is one line
     * on every rank before any collective write, none left waiting in H5Fclose */
    int rc = ft_dataset_write_attrs(&f, in, err);
    if (!rc && rank == 0)
        rc = ft_h5_reserve(&f, ft_dataset_reserve_bytes(in), err);
    rc = prep_agree(comm, rc, err);
    rc = rc ||
         write_block(&f, "tokens", H5T_STD_U32LE, H5T_NATIVE_UINT32, in->rows, W, b, b->tokens,
                     err) ||
         write_block(&f, "loss_mask", H5T_STD_U8LE, H5T_NATIVE_UINT8, in->rows, W, b, b->mask,
                     err) ||
         write_block(&f, "segment", H5T_STD_I32LE, H5T_NATIVE_INT32, in->rows, W, b, b->seg, err);
    if (ft_h5_close(&f, rc ? NULL : err))
        rc = 1;
    return rc ? -1 : 0;
}

/* Writes the set under PATH.tmp and renames it to path once every rank's rows are in
 * it (as checkpoints are): a killed or failed run leaves a previous file at path intact,
 * and a failed one removes its partial .tmp. Collective. */
static int write_and_commit(MPI_Comm comm, const char *path, const ft_dataset_info *info,
                            const row_block *b, ft_error *err)
{
    int rank, P;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &P);
    char tmp[PATH_MAX + 8];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return prep_agree(comm, ft_fail(err, "%s: path too long", path), err);
    int rc = P == 1 ? ft_dataset_write(tmp, info, b->tokens, b->mask, b->seg, err)
                    : write_collective(comm, tmp, info, b, err);
    if (prep_agree(comm, rc, err)) {
        if (rank == 0)
            unlink(tmp);
        return -1;
    }
    return prep_commit_tmp(comm, tmp, path, "written", err);
}

/* Sends each local example of the set to the owner of its row and places what arrives in
 * the local block. Collective (one Alltoall, one Alltoallv). */
static int exchange(MPI_Comm comm, const prep_examples *ex, const prep_global *g,
                    const int64_t *pos_of, const prep_plan *plan, int W, row_block *b,
                    ft_error *err)
{
    int rank, P;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &P);
    const int64_t R = plan->rows;
    int *cnt = calloc((size_t)P * 4, sizeof *cnt); /* sendcounts, sdispls, recvcounts, rdispls */
    int64_t *scount = calloc((size_t)P, sizeof *scount), *rcount = calloc((size_t)P, sizeof *rcount);
    int rc = cnt && scount && rcount ? 0 : ft_fail(err, "out of host memory");
    if (rc == 0) {
        for (int64_t i = 0; i < ex->n; i++) {
            int64_t p = pos_of[g->gidx[i]];
            if (p >= 0)
                scount[row_owner(plan->row[p], R, P)] += prep_example_len(ex, i);
        }
        for (int64_t e = 0; e < g->n; e++) {
            int64_t p = pos_of[e];
            if (p >= 0 && plan->row[p] >= b->r0 && plan->row[p] < b->r0 + b->nr)
                rcount[g->owner[e]] += g->len[e];
        }
        int64_t st = 0, rt = 0;
        for (int r = 0; r < P; r++)
            st += scount[r], rt += rcount[r];
        if (st > INT_MAX || rt > INT_MAX)
            rc = ft_fail(err, "more than 2^31 tokens to exchange on one rank; use more ranks");
    }
    if (prep_agree(comm, rc, err)) {
        free(cnt), free(scount), free(rcount);
        return -1;
    }
    int *sc = cnt, *sd = cnt + P, *rcv = cnt + 2 * P, *rd = cnt + 3 * P;
    for (int r = 0, s = 0, q = 0; r < P; r++) {
        sc[r] = (int)scount[r], sd[r] = s, s += sc[r];
        rcv[r] = (int)rcount[r], rd[r] = q, q += rcv[r];
    }
    size_t ns = (size_t)(sd[P - 1] + sc[P - 1]), nrecv = (size_t)(rd[P - 1] + rcv[P - 1]);
    uint32_t *sbuf = malloc((ns ? ns : 1) * sizeof *sbuf);
    uint32_t *rbuf = malloc((nrecv ? nrecv : 1) * sizeof *rbuf);
    int64_t *cur = malloc((size_t)P * sizeof *cur);
    rc = sbuf && rbuf && cur ? 0 : ft_fail(err, "out of host memory (token exchange)");
    if (rc == 0) {
        for (int r = 0; r < P; r++)
            cur[r] = sd[r];
        for (int64_t i = 0; i < ex->n; i++) {
            int64_t p = pos_of[g->gidx[i]];
            if (p < 0)
                continue;
            int d = row_owner(plan->row[p], R, P);
            int32_t L = prep_example_len(ex, i);
            memcpy(sbuf + cur[d], ex->tok + ex->off[i], (size_t)L * sizeof *sbuf);
            cur[d] += L;
        }
    }
    if (prep_agree(comm, rc, err) == 0) {
        MPI_Alltoallv(sbuf, sc, sd, MPI_UINT32_T, rbuf, rcv, rd, MPI_UINT32_T, comm);
        /* Senders packed by increasing global index, so walking e in order reads each
         * source's part sequentially. */
        for (int r = 0; r < P; r++)
            cur[r] = rd[r];
        for (int64_t e = 0; e < g->n; e++) {
            int64_t p = pos_of[e];
            if (p < 0 || plan->row[p] < b->r0 || plan->row[p] >= b->r0 + b->nr)
                continue;
            size_t at = (size_t)(plan->row[p] - b->r0) * (size_t)W + (size_t)plan->offset[p];
            const uint32_t *src = rbuf + cur[g->owner[e]];
            for (int32_t k = 0; k < g->len[e]; k++) {
                b->tokens[at + k] = (uint32_t)PREP_ID(src[k]);
                b->mask[at + k] = (src[k] & PREP_TARGET) ? 1 : 0;
                b->seg[at + k] = plan->seg[p];
            }
            cur[g->owner[e]] += g->len[e];
        }
    } else {
        rc = -1;
    }
    free(sbuf), free(rbuf), free(cur), free(cnt), free(scount), free(rcount);
    return rc;
}

int prep_write_set(MPI_Comm comm, const char *path, const prep_examples *ex, const prep_global *g,
                   const int64_t *list, int64_t n_list, const prep_plan *plan,
                   const ft_dataset_info *info_in, prep_set_stats *st, ft_error *err)
{
    int rank, P;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &P);
    const int W = info_in->seq_len + 1;
    const int64_t R = plan->rows;
    row_block b = { row_lo(rank, R, P), row_lo(rank + 1, R, P) - row_lo(rank, R, P), NULL, NULL,
                    NULL };
    size_t cells = (size_t)b.nr * (size_t)W;
    int64_t *pos_of = malloc((size_t)(g->n > 0 ? g->n : 1) * sizeof *pos_of);
    b.tokens = malloc((cells ? cells : 1) * sizeof *b.tokens);
    b.mask = malloc(cells ? cells : 1);
    b.seg = malloc((cells ? cells : 1) * sizeof *b.seg);
    int rc = pos_of && b.tokens && b.mask && b.seg
                 ? 0
                 : ft_fail(err, "out of host memory (%lld rows of %d tokens)", (long long)b.nr, W);
    if (rc == 0) {
        for (int64_t e = 0; e < g->n; e++)
            pos_of[e] = -1;
        for (int64_t p = 0; p < n_list; p++)
            pos_of[list[p]] = p;
        /* Padding everywhere first: pad id, mask 0, the row's padding segment. */
        for (int64_t r = 0; r < b.nr; r++)
            for (int c = 0; c < W; c++) {
                size_t at = (size_t)r * (size_t)W + (size_t)c;
                b.tokens[at] = (uint32_t)info_in->pad_token_id;
                b.mask[at] = 0;
                b.seg[at] = plan->row_docs[b.r0 + r];
            }
    }
    if (prep_agree(comm, rc, err) || exchange(comm, ex, g, pos_of, plan, W, &b, err)) {
        rc = -1;
        goto done;
    }
    /* Counts: targets from the rows themselves (what the trainer will see). */
    int64_t loc[2] = { 0, 0 }, glob[2];
    for (size_t i = 0; i < cells; i++)
        loc[0] += b.mask[i];
    for (int64_t r = 0; r < b.nr; r++)
        loc[1] += W - plan->row_used[b.r0 + r];
    MPI_Allreduce(loc, glob, 2, MPI_INT64_T, MPI_SUM, comm);
    ft_dataset_info info = *info_in;
    info.rows = R;
    info.n_documents = n_list;
    info.n_target_tokens = glob[0];
    st->rows = R;
    st->documents = n_list;
    st->targets = glob[0];
    st->padding = glob[1];
    st->tokens = R * W - glob[1];
    rc = write_and_commit(comm, path, &info, &b, err);
done:
    free(pos_of), free(b.tokens), free(b.mask), free(b.seg);
    return rc;
}
