/* st_compare A B: checks that two Hugging Face model directories (or two
 * .safetensors files) hold the same tensors with the same dtype, shape and bytes,
 * whatever their sharding and tensor order. Exit 0 if identical, 1 with the first
 * difference, 2 on usage. Streams through small buffers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/safetensors.h"

typedef struct model_files {
    int n;
    ft_st_file *files;
} model_files;

static int open_model(model_files *m, const char *path, ft_error *err)
{
    struct stat st;
    memset(m, 0, sizeof *m);
    if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) {
        m->n = 1;
        m->files = calloc(1, sizeof *m->files);
        return ft_st_open(&m->files[0], path, FT_ST_ANY_DTYPE, err);
    }
    char p[4096];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", path);
    ft_st_index idx;
    if (stat(p, &st) != 0) {
        snprintf(p, sizeof p, "%s/model.safetensors", path);
        m->n = 1;
        m->files = calloc(1, sizeof *m->files);
        return ft_st_open(&m->files[0], p, FT_ST_ANY_DTYPE, err);
    }
    if (ft_st_index_read(&idx, p, err))
        return -1;
    m->files = calloc((size_t)idx.n_files, sizeof *m->files);
    int rc = 0;
    for (int i = 0; i < idx.n_files && !rc; i++) {
        snprintf(p, sizeof p, "%s/%s", path, idx.unique_files[i]);
        rc = ft_st_open(&m->files[i], p, FT_ST_ANY_DTYPE, err);
        m->n += !rc;
    }
    ft_st_index_free(&idx);
    return rc;
}

static const ft_st_tensor *find(const model_files *m, const char *name, const ft_st_file **f)
{
    for (int i = 0; i < m->n; i++) {
        const ft_st_tensor *t = ft_st_find(&m->files[i], name);
        if (t) {
            *f = &m->files[i];
            return t;
        }
    }
    return NULL;
}

static int count(const model_files *m)
{
    int n = 0;
    for (int i = 0; i < m->n; i++)
        n += m->files[i].n_tensors;
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: st_compare A B (HF directories or .safetensors files)\n");
        return 2;
    }
    model_files a, b;
    ft_error err;
    if (open_model(&a, argv[1], &err) || open_model(&b, argv[2], &err)) {
        fprintf(stderr, "st_compare: %s\n", err.msg);
        return 1;
    }
    if (count(&a) != count(&b)) {
        fprintf(stderr, "st_compare: %s has %d tensors, %s has %d\n", argv[1], count(&a),
                argv[2], count(&b));
        return 1;
    }
    enum { BUF = 1 << 20 };
    char *ba = malloc(BUF), *bb = malloc(BUF);
    uint64_t bytes = 0;
    for (int i = 0; i < a.n; i++)
        for (int k = 0; k < a.files[i].n_tensors; k++) {
            const ft_st_tensor *ta = &a.files[i].tensors[k];
            const ft_st_file *fb;
            const ft_st_tensor *tb = find(&b, ta->name, &fb);
            if (!tb) {
                fprintf(stderr, "st_compare: %s is missing from %s\n", ta->name, argv[2]);
                return 1;
            }
            if (ta->dtype != tb->dtype || ta->ndim != tb->ndim ||
                memcmp(ta->shape, tb->shape, sizeof ta->shape) != 0) {
                fprintf(stderr, "st_compare: %s: dtype/shape differ (%s vs %s)\n", ta->name,
                        ft_st_dtype_name(ta->dtype), ft_st_dtype_name(tb->dtype));
                return 1;
            }
            uint64_t n = ft_st_tensor_bytes(ta);
            for (uint64_t off = 0; off < n; off += BUF) {
                size_t m = n - off < BUF ? (size_t)(n - off) : BUF;
                if (ft_st_read(&a.files[i], ta, off, ba, m, &err) ||
                    ft_st_read(fb, tb, off, bb, m, &err)) {
                    fprintf(stderr, "st_compare: %s\n", err.msg);
                    return 1;
                }
                if (memcmp(ba, bb, m) != 0) {
                    size_t j = 0;
                    while (ba[j] == bb[j])
                        j++;
                    fprintf(stderr, "st_compare: %s: bytes differ at byte %llu\n", ta->name,
                            (unsigned long long)(off + j));
                    return 1;
                }
            }
            bytes += n;
        }
    printf("identical: %d tensors, %llu bytes\n", count(&a), (unsigned long long)bytes);
    free(ba);
    free(bb);
    for (int i = 0; i < a.n; i++)
        ft_st_close(&a.files[i]);
    for (int i = 0; i < b.n; i++)
        ft_st_close(&b.files[i]);
    free(a.files);
    free(b.files);
    return 0;
}
