/* ftmpi-generate: sample text from a trained checkpoint or a weights file with a
 * KV-cached decoder (src/generate). Command line, exit codes and output; the work is
 * done by the session (single prompt) and the batch runner (JSON lines over ranks).
 * The command line is parsed in ftmpi_generate_cli.c, a LoRA MODEL merged in
 * ftmpi_generate_lora.c, and batch lines made session calls in ftmpi_generate_batch.c. */
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/mpi_io_env.h"
#include "tools/ftmpi_generate.h"
#include "util/blas_core.h"
#include "util/input_file.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

/* ---------------------------------------------------------------- single prompt */

/* "1,2, 3" -> ids (malloc'd). */
static int parse_ids(const char *s, int32_t **ids, int *n, ft_error *err)
{
    *ids = NULL;
    *n = 0;
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    int32_t *v = malloc(cap * sizeof *v);
    if (!v)
        return ft_fail(err, "out of host memory");
    const char *p = s;
    int k = 0;
    for (;;) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        while (*end == ' ')
            end++;
        if (errno || end == p || x < 0 || x > INT32_MAX || (*end && *end != ',')) {
            free(v);
            return ft_fail(err, "--ids: '%s' is not a comma-separated list of token ids", s);
        }
        v[k++] = (int32_t)x;
        if (!*end)
            break;
        p = end + 1;
    }
    *ids = v;
    *n = k;
    return 0;
}

/* The prompt from standard input, bounded (/dev/zero there ends with one line). */
static int read_stdin_prompt(char **text, ft_error *err)
{
    size_t len;
    if (ft_input_read_stream(stdin, "standard input", FT_INPUT_MAX_LINE, text, &len, err))
        return -1;
    if (strlen(*text) != len) {
        free(*text);
        *text = NULL;
        return ft_fail(err, "the prompt on standard input contains a NUL byte");
    }
    return 0;
}

static void print_ids(FILE *fp, const int32_t *ids, int n)
{
    for (int i = 0; i < n; i++)
        fprintf(fp, "%s%d", i ? "," : "", (int)ids[i]);
    fputc('\n', fp);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int run_single(const gen_cli *c, ft_gen_session *s, ft_error *err)
{
    char *stdin_text = NULL;
    const char *prompt = c->prompt;
    if (!prompt) {
        if (read_stdin_prompt(&stdin_text, err))
            return -1;
        prompt = stdin_text;
    }
    ft_gen_output out;
    const double t0 = now_s();
    int rc;
    if (c->ids_mode) {
        int32_t *ids = NULL;
        int n = 0;
        rc = parse_ids(prompt, &ids, &n, err);
        if (!rc) {
            rc = ft_gen_session_run_ids(s, ids, n, 0, &out, err);
            free(ids);
        }
    } else {
        rc = ft_gen_session_run(s, prompt, c->input, c->system, 0, &out, err);
    }
    const double dt = now_s() - t0;
    if (!rc) {
        if (c->ids_mode) {
            print_ids(stdout, out.ids, out.n);
        } else {
            if (c->echo)
                fputs(prompt, stdout);
            fwrite(out.text, 1, out.text_len, stdout);
        }
        fflush(stdout);
        if (c->verbose)
            fprintf(stderr, "ftmpi-generate: %d prompt tokens, %d generated, stop: %s, %.3f s "
                    "(%.1f tokens/s)\n", out.n_prompt, out.n, ft_stop_reason_name(out.stop), dt,
                    dt > 0 ? (double)(out.n_prompt + out.n) / dt : 0.0);
        ft_gen_output_free(&out);
    }
    free(stdin_text);
    return rc;
}

/* --prompt-ids: the framed prompt's ids, without a model (no MPI either). */
static int print_prompt_ids(const gen_cli *c)
{
    ft_error err;
    ft_error_clear(&err);
    ft_tokenizer *tok = NULL;
    char *stdin_text = NULL;
    const char *prompt = c->prompt;
    int32_t *ids = NULL;
    int n = 0, rc = ft_tokenizer_load(c->s.tokenizer_path, &tok, &err);
    if (!rc && !prompt) {
        rc = read_stdin_prompt(&stdin_text, &err);
        prompt = stdin_text;
    }
    if (!rc) {
        ft_text_codec codec;
        ft_text_codec_tokenizer(&codec, tok, -1, -1);
        codec.add_bos = !c->s.no_bos;
        rc = ft_prompt_encode(&codec, c->s.tmpl, c->system, prompt, c->input, &ids, &n, &err);
    }
    if (!rc)
        print_ids(stdout, ids, n);
    else
        fprintf(stderr, "ftmpi-generate: %s\n", err.msg);
    free(ids);
    free(stdin_text);
    ft_tokenizer_free(tok);
    return !rc ? EXIT_OK : err.flags & FT_ERR_CONFIG ? EXIT_USAGE : EXIT_RUNTIME;
}

/* ---------------------------------------------------------------- main */

static int local_rank(void)
{
    MPI_Comm node;
    int r = 0;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_rank(node, &r);
        MPI_Comm_free(&node);
    }
    return r;
}

int main(int argc, char **argv)
{
    ft_blas_core_select(argv); /* may re-execute: before any thread, BLAS or MPI call */
    gen_cli c;
    int p = gen_cli_parse(argc, argv, &c);
    if (p)
        return p > 0 ? EXIT_OK : p == -2 ? EXIT_RUNTIME : EXIT_USAGE; /* -1, -3 */
    if (c.prompt_ids)
        return print_prompt_ids(&c);
    ft_mpi_io_env_defaults(); /* before MPI_Init: long paths (comm/mpi_io_env.h) */
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int code = EXIT_OK;
    if (!c.prompts_path && size > 1) {
        if (rank == 0)
            fprintf(stderr, "ftmpi-generate: a single prompt runs on one rank; use --prompts "
                            "IN.jsonl --out OUT.jsonl to spread prompts over %d ranks\n", size);
        MPI_Finalize();
        return EXIT_USAGE;
    }
    if (c.prompts_path && size > 1 && strcmp(c.prompts_path, "-") == 0) {
        if (rank == 0)
            fprintf(stderr, "ftmpi-generate: --prompts - (standard input) needs a single rank; "
                            "give a file\n");
        MPI_Finalize();
        return EXIT_USAGE;
    }
    c.s.cuda_device = local_rank();

    ft_error err;
    ft_error_clear(&err);
    ft_gen_session *s = NULL;
    char merged[4200];
    int rc = gen_lora_merge_for_session(&c, rank, merged, sizeof merged, &err);
    if (rc) { /* rank 0's error, on every rank */
        if (rank == 0)
            fprintf(stderr, "ftmpi-generate: %s\n", err.msg);
        MPI_Finalize();
        return EXIT_RUNTIME;
    }
    rc = ft_gen_session_open(&s, &c.s, &err);
    if (merged[0]) { /* loaded (or failed) everywhere: the merged file has served */
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            unlink(merged);
    }
    /* every rank opens the same files: they fail alike, and agree on the outcome */
    int any = rc != 0, all = rc != 0;
    MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (any) {
        /* failing alike, rank 0 speaks for all; a rank failing alone names itself */
        if (rc && rank == 0)
            fprintf(stderr, "ftmpi-generate: %s\n", err.msg);
        else if (rc && !all)
            fprintf(stderr, "ftmpi-generate: rank %d: %s\n", rank, err.msg);
        /* a tokenizer that is not the model's is the command line's fault */
        code = all && (err.flags & FT_ERR_CONFIG) ? EXIT_USAGE : EXIT_RUNTIME;
    } else if (c.prompts_path) {
        long tokens = 0;
        bool report = false;
        const double t0 = now_s();
        if (gen_batch_run(&c, s, &tokens, &report, &err)) {
            if (report)
                fprintf(stderr, "ftmpi-generate: %s\n", err.msg);
            code = EXIT_RUNTIME;
        } else if (c.verbose) {
            MPI_Allreduce(MPI_IN_PLACE, &tokens, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
            if (rank == 0)
                fprintf(stderr, "ftmpi-generate: %ld tokens generated on %d rank%s in %.3f s\n",
                        tokens, size, size > 1 ? "s" : "", now_s() - t0);
        }
    } else if (run_single(&c, s, &err)) {
        fprintf(stderr, "ftmpi-generate: %s\n", err.msg);
        code = EXIT_RUNTIME;
    }
    ft_gen_session_close(s);
    MPI_Finalize();
    return code;
}
