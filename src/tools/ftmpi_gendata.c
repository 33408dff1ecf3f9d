/* ftmpi-gendata: writes a synthetic dataset file (doc/formats.md) so that the demo and
 * the tests have data without a tokenizer.
 *
 * Task "arith": documents are byte strings "a+b=c\n" (a, b random with up to
 * --digits digits) framed by BOS and EOS, tokenised as bytes (ids 0..255; BOS 256,
 * EOS 257, PAD 258; vocab 259). Only the answer "c\n" and EOS are training targets,
 * like the response of an instruction example, so the loss measures whether the
 * model has learned to add. Documents are packed whole into rows of seq_len+1
 * tokens with segment ids; the tail of a row that no document fits is padding.
 */
#include <errno.h>
#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/mpi_io_env.h"
#include "io/dataset.h"
#include "util/rng.h"

enum { TOK_BOS = 256, TOK_EOS = 257, TOK_PAD = 258, VOCAB = 259 };

static const char usage_text[] =
    "Usage: ftmpi-gendata [OPTIONS] OUT.h5\n"
    "Write a synthetic packed dataset (byte tokens, vocab 259) for demos and tests.\n"
    "\n"
    "  --rows N        rows to write (default 1024)\n"
    "  --seq-len T     tokens per row minus one (default 128)\n"
    "  --digits D      max digits of each addend, 1..9 (default 3)\n"
    "  --seed S        random seed (default 1)\n"
    "  --mask-all      make every real token a target (default: answers only)\n"
    "  -h, --help      this help\n";

typedef struct gen_options {
    long rows;
    int seq_len, digits, mask_all;
    unsigned long long seed;
    const char *out;
} gen_options;

/* One document's tokens and mask (mask[i] = 1 if token i is a target). */
static int make_document(const gen_options *o, uint64_t index, uint32_t *tok, uint8_t *mask)
{
    uint64_t limit = 1;
    for (int d = 0; d < o->digits; d++)
        limit *= 10;
    uint64_t a = ft_rng_u64(o->seed, 1, 2 * index) % limit;
    uint64_t b = ft_rng_u64(o->seed, 1, 2 * index + 1) % limit;
    char text[64];
    int prompt = snprintf(text, sizeof text, "%llu+%llu=", (unsigned long long)a,
                          (unsigned long long)b);
    int len = prompt + snprintf(text + prompt, sizeof text - (size_t)prompt, "%llu\n",
                                (unsigned long long)(a + b));
    int n = 0;
    tok[n] = TOK_BOS;
    mask[n++] = 0;
    for (int i = 0; i < len; i++) {
        tok[n] = (unsigned char)text[i];
        mask[n++] = o->mask_all || i >= prompt;
    }
    tok[n] = TOK_EOS;
    mask[n++] = 1;
    mask[0] = 0; /* the first token of a document is never a target */
    return n;
}

static int parse(int argc, char **argv, gen_options *o)
{
    *o = (gen_options){ .rows = 1024, .seq_len = 128, .digits = 3, .seed = 1 };
    static const struct option longopts[] = {
        { "rows", required_argument, 0, 'r' }, { "seq-len", required_argument, 0, 't' },
        { "digits", required_argument, 0, 'd' }, { "seed", required_argument, 0, 's' },
        { "mask-all", no_argument, 0, 'm' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        char *end = NULL;
        errno = 0;
        switch (c) {
        case 'r': o->rows = strtol(optarg, &end, 10); break;
        case 't': o->seq_len = (int)strtol(optarg, &end, 10); break;
        case 'd': o->digits = (int)strtol(optarg, &end, 10); break;
        case 's': o->seed = strtoull(optarg, &end, 10); break;
        case 'm': o->mask_all = 1; continue;
        case 'h': fputs(usage_text, stdout); exit(0);
        default: return -1;
        }
        if (errno || !end || *end) {
            fprintf(stderr, "ftmpi-gendata: '%s' is not a number\n", optarg);
            return -1;
        }
    }
    if (optind + 1 != argc) {
        fprintf(stderr, "ftmpi-gendata: expected one output file (try --help)\n");
        return -1;
    }
    o->out = argv[optind];
    if (o->rows < 1 || o->seq_len < 24 || o->digits < 1 || o->digits > 9) {
        fprintf(stderr, "ftmpi-gendata: need --rows >= 1, --seq-len >= 24, --digits 1..9\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    gen_options o;
    if (parse(argc, argv, &o))
        return 2;
    ft_mpi_io_env_defaults(); /* before MPI_Init: long paths (comm/mpi_io_env.h) */
    MPI_Init(&argc, &argv);
    const size_t W = (size_t)o.seq_len + 1, n = (size_t)o.rows * W;
    uint32_t *tokens = malloc(n * sizeof *tokens);
    uint8_t *mask = calloc(n, 1);
    int32_t *seg = malloc(n * sizeof *seg);
    int rc = 1;
    if (!tokens || !mask || !seg) {
        fprintf(stderr, "ftmpi-gendata: out of memory\n");
        goto done;
    }
    uint32_t dtok[64];
    uint8_t dmask[64];
    uint64_t doc = 0;
    long n_docs = 0, n_targets = 0;
    int dlen = make_document(&o, doc, dtok, dmask);
    for (long r = 0; r < o.rows; r++) {
        size_t col = 0;
        int32_t s = 0;
        uint32_t *rt = tokens + (size_t)r * W;
        uint8_t *rm = mask + (size_t)r * W;
        int32_t *rs = seg + (size_t)r * W;
        while (col + (size_t)dlen <= W) {
            memcpy(rt + col, dtok, (size_t)dlen * sizeof *dtok);
            memcpy(rm + col, dmask, (size_t)dlen);
            for (int i = 0; i < dlen; i++)
                rs[col + (size_t)i] = s;
            col += (size_t)dlen;
            s++;
            n_docs++;
            dlen = make_document(&o, ++doc, dtok, dmask);
        }
        for (; col < W; col++) { /* padding: its own segment, never a target */
            rt[col] = TOK_PAD;
            rm[col] = 0;
            rs[col] = s;
        }
        for (size_t j = 1; j < W; j++)
            n_targets += rm[j];
    }
    ft_dataset_info info = { .rows = o.rows, .seq_len = o.seq_len, .vocab_size = VOCAB,
                             .bos_token_id = TOK_BOS, .eos_token_id = TOK_EOS,
                             .pad_token_id = TOK_PAD, .n_documents = n_docs,
                             .n_target_tokens = n_targets };
    snprintf(info.template_name, sizeof info.template_name, "synthetic-arith");
    ft_error err;
    if (ft_dataset_write(o.out, &info, tokens, mask, seg, &err)) {
        fprintf(stderr, "ftmpi-gendata: %s\n", err.msg);
        goto done;
    }
    printf("ftmpi-gendata: %s: %ld rows x %d tokens, %ld documents, %ld target tokens\n", o.out,
           o.rows, o.seq_len + 1, n_docs, n_targets);
    rc = 0;
done:
    free(tokens);
    free(mask);
    free(seg);
    MPI_Finalize();
    return rc;
}
