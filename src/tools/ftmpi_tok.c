/* ftmpi-tok: check tool for the tokenizer library (not installed).
 *   ftmpi-tok encode [--no-special] TOKENIZER.json   < {"text":...} lines  > {"ids":[...]} lines
 *   ftmpi-tok decode [--skip-special] TOKENIZER.json < {"ids":[...]} lines > {"text":...} lines
 *   ftmpi-tok info TOKENIZER.json
 * --no-special: special-token text such as "<|eot_id|>" is encoded as plain text.
 * --skip-special: special tokens are left out of decoded text. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "io/tok_fingerprint.h"
#include "tokenizer/tok_jsonl.h"
#include "tokenizer/tokenizer.h"

static int usage(void)
{
    fputs("usage: ftmpi-tok encode [--no-special] TOKENIZER.json  < {\"text\":...} lines\n"
          "       ftmpi-tok decode [--skip-special] TOKENIZER.json < {\"ids\":[...]} lines\n"
          "       ftmpi-tok info TOKENIZER.json\n",
          stderr);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return usage();
    const char *cmd = argv[1];
    const char *path = NULL;
    bool no_special = false, skip_special = false;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--no-special") == 0 && strcmp(cmd, "encode") == 0)
            no_special = true;
        else if (strcmp(argv[i], "--skip-special") == 0 && strcmp(cmd, "decode") == 0)
            skip_special = true;
        else if (argv[i][0] == '-' || path)
            return usage();
        else
            path = argv[i];
    }
    if (!path)
        return usage();

    ft_error err = {{0}, 0};
    ft_tokenizer *t;
    if (ft_tokenizer_load(path, &t, &err) < 0) {
        fprintf(stderr, "ftmpi-tok: %s\n", err.msg);
        return 1;
    }
    int rc;
    if (strcmp(cmd, "encode") == 0) {
        rc = ft_tok_jsonl_encode(t, stdin, "stdin", stdout, !no_special, &err);
    } else if (strcmp(cmd, "decode") == 0) {
        rc = ft_tok_jsonl_decode(t, stdin, "stdin", stdout, skip_special, &err);
    } else if (strcmp(cmd, "info") == 0) {
        char fp[FT_TOK_FINGERPRINT_LEN];
        rc = ft_tok_fingerprint_file(path, fp, &err);
        if (rc == 0)
            printf("{\"kind\":\"%s\",\"vocab_size\":%d,\"bos_id\":%" PRId32
                   ",\"eos_id\":%" PRId32 ",\"pad_id\":%" PRId32 ",\"hash\":\"%016" PRIx64
                   "\",\"fingerprint\":\"%s\"}\n",
                   ft_tokenizer_kind(t), ft_tokenizer_vocab_size(t), ft_tokenizer_bos_id(t),
                   ft_tokenizer_eos_id(t), ft_tokenizer_pad_id(t), ft_tokenizer_hash(t), fp);
    } else {
        ft_tokenizer_free(t);
        return usage();
    }
    if (rc == 0 && fflush(stdout) != 0)
        rc = -1, snprintf(err.msg, sizeof err.msg, "stdout: write error");
    if (rc < 0)
        fprintf(stderr, "ftmpi-tok: %s\n", err.msg);
    ft_tokenizer_free(t);
    return rc < 0 ? 1 : 0;
}
