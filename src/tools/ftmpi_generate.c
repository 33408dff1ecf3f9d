/* ftmpi-generate: sample text from a trained checkpoint or a weights file with a
 * KV-cached decoder (src/generate). Command line, exit codes and output; the work is
 * done by the session (single prompt) and the batch runner (JSON lines over ranks). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/mpi_io_env.h"
#include "config.h"
#include "generate/batch.h"
#include "generate/session.h"
#include "io/lora_ckpt.h"
#include "tokenizer/chat_template.h"
#include "train/ckpt_dir.h"
#include "util/blas_core.h"
#include "util/input_file.h"
#include "util/output_file.h"
#include "util/path_join.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

static const char usage_text[] =
    "Usage: ftmpi-generate [OPTIONS] MODEL [PROMPT]\n"
    "       ftmpi-generate --tokenizer FILE [--template NAME] --prompt-ids [PROMPT]\n"
    "       mpirun -np N ftmpi-generate [OPTIONS] MODEL --prompts IN.jsonl --out OUT.jsonl\n"
    "\n"
    "Generate a completion of PROMPT with the Llama model in MODEL: a weights file\n"
    "(ftmpi-convert import), a checkpoint file (CHECKPOINT_DIR/step-NNNNNN.h5) or a\n"
    "checkpoint directory (its `latest` checkpoint). A LoRA checkpoint (adapters only,\n"
    "doc/formats.md) runs on its base (/lora base_weights) with the adapters merged in,\n"
    "through a temporary merged weights file in $TMPDIR (default /tmp), removed once\n"
    "loaded; --params picks the adapters' group. Without PROMPT (and without\n"
    "--prompts) the prompt is read from standard input. The prompt is prefilled into a\n"
    "KV cache and the completion decoded one token at a time; the math is the trainer's\n"
    "forward pass (doc/generate.md).\n"
    "\n"
    "Text in and out (one of):\n"
    "  --tokenizer FILE     a Hugging Face tokenizer.json (the model's own: one whose\n"
    "                       fingerprint differs from the one MODEL records is refused)\n"
    "  --allow-tokenizer-mismatch\n"
    "                       use --tokenizer even when MODEL records another tokenizer\n"
    "  --byte-tokens        ftmpi-gendata's synthetic models: ids 0..255 are bytes,\n"
    "                       BOS 256, EOS 257 (e.g. PROMPT \"12+35=\")\n"
    "  --ids                PROMPT is token ids, comma-separated (\"256,49,50\"), used\n"
    "                       verbatim (no template, no BOS); prints the generated ids the\n"
    "                       same way\n"
    "\n"
    "Prompt:\n"
    "  --template NAME      how the prompt is framed, exactly as ftmpi-prep frames the\n"
    "                       training data: none: BOS + prompt; alpaca: the\n"
    "                       Stanford Alpaca prompt ending \"### Response:\\n\" (--input\n"
    "                       adds its \"### Input:\" block); llama3-chat, llama3.1-chat,\n"
    "                       llama2-chat: the Llama 3 / 3.1 / 2 chat formats; chatml,\n"
    "                       qwen2-chat, qwen2.5-chat: ChatML (<|im_start|>role ...\n"
    "                       <|im_end|>), the Qwen ones with Qwen's default system turn\n"
    "                       when --system is not given, stopping at <|im_end|>;\n"
    "                       mistral-chat: <s>[INST] [system\\n\\n]prompt[/INST] (v0.3);\n"
    "                       smollm2-chat: ChatML with SmolLM2-Instruct's default system\n"
    "                       turn; qwen3-chat: ChatML, the open turn as Qwen3 with thinking\n"
    "                       enabled; a chat template frames a user turn and the open\n"
    "                       assistant turn (needs --tokenizer). Without --template: the\n"
    "                       template that the tokenizer's tokenizer_config.json\n"
    "                       chat_template is, when there is one (an unknown one is an\n"
    "                       error: name the template), else none\n"
    "  --no-thinking        qwen3-chat: enable_thinking=False, the open turn holds an\n"
    "                       empty <think></think> block\n"
    "  --system TEXT        system message (chat templates)\n"
    "  --input TEXT         the input of an alpaca prompt\n"
    "  --no-bos             do not start templates none/alpaca with BOS\n"
    "  --allow-nonfinite    run a model whose parameters hold NaN or Inf (refused by\n"
    "                       default: its output is garbage or nothing)\n"
    "  --prompt-ids         print the framed prompt's token ids (comma-separated) and\n"
    "                       exit; no MODEL is read (to check a template)\n"
    "\n"
    "Sampling:\n"
    "  --max-new-tokens N   stop after N generated tokens (default 128)\n"
    "  --temperature T      0 (default): greedy, the most likely token each step;\n"
    "                       T > 0: sample from softmax(logits / T)\n"
    "  --top-k K            sample among the K most likely tokens only (default 0: all)\n"
    "  --top-p P            sample within the smallest set of most likely tokens whose\n"
    "                       probability reaches P (nucleus; default 1: all)\n"
    "  --seed S             random seed (default 0); a draw depends only on the seed, the\n"
    "                       prompt's index and the step, so results are reproducible\n"
    "  --eos-id ID          stop at token ID instead of the tokenizer's and model's EOS\n"
    "                       (repeatable, up to 16)\n"
    "  --ignore-eos         never stop before --max-new-tokens\n"
    "\n"
    "Batch mode:\n"
    "  --prompts IN.jsonl   one JSON object per line: {\"prompt\": \"...\"} (optional\n"
    "                       \"input\", \"system\"), or {\"ids\": [...]} with --ids\n"
    "  --out OUT.jsonl      each input object plus \"completion\" (text modes), \"ids\"\n"
    "                       (generated ids) and \"stop\" (\"eos\", \"length\" or\n"
    "                       \"context\"), in input order (\"-\": standard output). Under\n"
    "                       mpirun rank r takes prompts r, r+N, ...; rank 0 writes the\n"
    "                       file; the output does not depend on N\n"
    "\n"
    "Model and device:\n"
    "  --params WHICH       auto (default): a checkpoint's fp32 /optim/master when it has\n"
    "                       one, else /model; model: /model (the working parameters,\n"
    "                       bf16 values after bf16 training, decoded in bf16);\n"
    "                       master: /optim/master\n"
    "  --device cpu|cuda    backend (default cpu); with cuda, rank r of a node uses GPU r\n"
    "  --prefill-chunk N    prompt tokens per forward call (default 256)\n"
    "\n"
    "Output:\n"
    "  The completion is written to standard output exactly as generated (no newline is\n"
    "  added; EOS is not printed). --echo writes the prompt text first. --verbose adds a\n"
    "  line on standard error: tokens, stop reason and speed.\n"
    "  -h, --help           show this help and exit\n"
    "  -V, --version        print the version and exit\n"
    "\n"
    "Exit status: 0 success, 1 runtime error (unreadable or mismatched model, tokenizer or\n"
    "prompt file, prompt longer than the context, out of memory), 2 bad command line.\n"
    "\n"
    "Examples:\n"
    "  ftmpi-generate ck --byte-tokens \"3+4=\"\n"
    "  ftmpi-generate model.h5 --tokenizer tokenizer.json --template llama3-chat \\\n"
    "      --temperature 0.7 --top-p 0.9 --seed 1 \"Name three prime numbers.\"\n"
    "  mpirun -np 4 ftmpi-generate ck --tokenizer tokenizer.json --template alpaca \\\n"
    "      --prompts eval.jsonl --out completions.jsonl\n";

typedef struct cli {
    ft_gen_session_options s;
    const char *prompt;
    const char *system, *input;
    bool ids_mode, echo, verbose;
    bool template_given, no_thinking, prompt_ids;
    const char *prompts_path, *out_path;
    const char *device;
} cli;

/* ---------------------------------------------------------------- LoRA checkpoints */

/* Whether path (a file, or a checkpoint directory's `latest`) is a LoRA checkpoint, and
 * the file into file. Anything unreadable is "no": the session reports it. */
static bool is_lora_checkpoint(const char *path, char *file, size_t len)
{
    char name[512];
    ft_error err;
    snprintf(file, len, "%s", path);
    if (ft_ckpt_read_latest(path, name, sizeof name, &err) == 0)
        ft_path_join(file, len, path, name);
    if (ft_input_check(file, "an HDF5 file", &err) != 0)
        return false;
    /* a file that is not HDF5 is the session's to report, in one line: no error stack */
    H5E_auto2_t func;
    void *data;
    H5Eget_auto2(H5E_DEFAULT, &func, &data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const bool hdf5 = H5Fis_hdf5(file) > 0;
    H5Eset_auto2(H5E_DEFAULT, func, data);
    ft_h5file h;
    if (!hdf5 || ft_h5_open(&h, file, MPI_COMM_SELF, &err))
        return false;
    const bool lora = ft_lora_ckpt_is(&h);
    ft_h5_close(&h, &err);
    return lora;
}

/* Rank 0 merges a LoRA checkpoint's adapters into its base (io/lora_ckpt.h), into a new
 * weights file `merged` that the session then loads like any other (every rank reads
 * it; rank 0 removes it once all have). merged[0] stays 0 for other models. Every rank
 * returns rank 0's outcome. */
static int merge_lora_for_session(cli *c, int rank, char *merged, size_t len, ft_error *err)
{
    char file[4200];
    merged[0] = '\0';
    /* every rank takes the same (collective) path, whatever its own look at the file */
    int lora = is_lora_checkpoint(c->s.model_path, file, sizeof file);
    MPI_Allreduce(MPI_IN_PLACE, &lora, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!lora)
        return 0;
    const char *tmpdir = getenv("TMPDIR") && getenv("TMPDIR")[0] ? getenv("TMPDIR") : "/tmp";
    int pid = (int)getpid(), rc = 0;
    MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char name[64];
    snprintf(name, sizeof name, "ftmpi-generate-lora-%d.h5", pid);
    ft_path_join(merged, len, tmpdir, name);
    if (rank == 0) {
        ft_h5file h;
        bool master = false;
        if (c->s.params != FT_GEN_PARAMS_MODEL && ft_h5_open(&h, file, MPI_COMM_SELF, err) == 0) {
            master = H5Lexists(h.id, "/optim", H5P_DEFAULT) > 0 &&
                     H5Lexists(h.id, "/optim/master", H5P_DEFAULT) > 0;
            ft_h5_close(&h, err);
        }
        if (c->s.params == FT_GEN_PARAMS_MASTER && !master)
            rc = ft_fail(err, "%s has no /optim/master (--params master)", file);
        const ft_lora_merge_options o = { .group = master ? "/optim/master" : "/model",
                                          .dtype = -1, .buffer_bytes = (size_t)64 << 20 };
        ft_lora_merge_result r;
        unlink(merged);
        rc = rc || ft_lora_merge_to_weights(file, merged, &o, &r, err);
        if (rc)
            unlink(merged);
        else if (c->verbose)
            fprintf(stderr, "ftmpi-generate: %s: LoRA rank %d, alpha %g, targets %s (%s) merged "
                    "into %s\n", file, r.rank, r.alpha, r.targets, o.group, r.base);
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(err->msg, sizeof err->msg, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rc) {
        merged[0] = '\0';
        return -1;
    }
    c->s.model_path = merged;
    c->s.params = FT_GEN_PARAMS_MODEL; /* the merged file is a weights file */
    return 0;
}

/* ---------------------------------------------------------------- parsing */

static int usage_error(const char *fmt, const char *arg)
{
    fputs("ftmpi-generate: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs(" (try --help)\n", stderr);
    return -1;
}

static int parse_long(const char *opt, const char *s, long lo, long hi, long *v)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi) {
        fprintf(stderr, "ftmpi-generate: %s '%s': expected an integer in %ld..%ld (try --help)\n",
                opt, s, lo, hi);
        return -1;
    }
    *v = x;
    return 0;
}

static int parse_double(const char *opt, const char *s, double *v)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || end == s || *end) {
        fprintf(stderr, "ftmpi-generate: %s '%s': expected a number (try --help)\n", opt, s);
        return -1;
    }
    *v = x;
    return 0;
}

static int parse_u64(const char *opt, const char *s, uint64_t *v)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') {
        fprintf(stderr, "ftmpi-generate: %s '%s': expected a non-negative integer (try --help)\n",
                opt, s);
        return -1;
    }
    *v = x;
    return 0;
}

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

enum {
    OPT_TOKENIZER = 256, OPT_BYTES, OPT_IDS, OPT_TEMPLATE, OPT_SYSTEM, OPT_INPUT, OPT_NO_BOS,
    OPT_MAX_NEW, OPT_TEMP, OPT_TOPK, OPT_TOPP, OPT_SEED, OPT_EOS, OPT_IGNORE_EOS, OPT_PROMPTS,
    OPT_OUT, OPT_PARAMS, OPT_DEVICE, OPT_CHUNK, OPT_ECHO, OPT_VERBOSE, OPT_NO_THINKING,
    OPT_PROMPT_IDS, OPT_ALLOW_TOK_MISMATCH, OPT_ALLOW_NONFINITE
};

/* Without --template, the template of the tokenizer's directory (the recognition ftmpi-prep
 * uses). Returns 0, or -3 after printing the one-line error (a malformed or unknown template:
 * the input is at fault, exit 2). A chat model without any template is said in one line: its
 * answer to a bare prompt is often nothing at all. */
static int template_from_tokenizer(cli *c)
{
    const char *name = NULL;
    ft_error err;
    ft_error_clear(&err);
    int rc = ft_chat_template_detect(c->s.tokenizer_path, &name, &err);
    if (rc < 0) {
        fprintf(stderr, "ftmpi-generate: %s\n", err.msg);
        return err.flags & FT_ERR_CONFIG ? -3 : -2;
    }
    const char *turn_eos = rc == 0 ? ft_chat_template_turn_eos(c->s.tokenizer_path) : NULL;
    if (turn_eos)
        fprintf(stderr, "ftmpi-generate: note: %s is a chat model's tokenizer (eos_token %s) "
                        "but its directory has no chat template; the prompt is used as plain "
                        "text (name one with --template: " FT_CHAT_TEMPLATE_NAMES ")\n",
                c->s.tokenizer_path, turn_eos);
    if (rc > 0 && ft_template_parse(name, &c->s.tmpl)) {
        fprintf(stderr, "ftmpi-generate: internal: template %s has no prompt framing\n", name);
        return -2;
    }
    return 0;
}

static void print_version(void)
{
    char blas[512];
    ft_blas_core_describe(blas, sizeof blas);
    printf("ftmpi-generate %s\nblas: %s\n", PACKAGE_VERSION, blas);
}

/* Returns 0 to run, -1 on a usage error, -2 on a runtime error (message printed), 1 after
 * --help/--version. */
static int parse(int argc, char **argv, cli *c)
{
    memset(c, 0, sizeof *c);
    c->s.max_new_tokens = 128;
    c->s.sampler = (ft_sampler_config){ .temperature = 0.0, .top_k = 0, .top_p = 1.0, .seed = 0 };
    c->s.n_eos_override = -1;
    c->s.params = FT_GEN_PARAMS_AUTO;
    c->device = "cpu";
    static const struct option longopts[] = {
        { "tokenizer", required_argument, 0, OPT_TOKENIZER },
        { "byte-tokens", no_argument, 0, OPT_BYTES },
        { "ids", no_argument, 0, OPT_IDS },
        { "template", required_argument, 0, OPT_TEMPLATE },
        { "system", required_argument, 0, OPT_SYSTEM },
        { "input", required_argument, 0, OPT_INPUT },
        { "no-bos", no_argument, 0, OPT_NO_BOS },
        { "max-new-tokens", required_argument, 0, OPT_MAX_NEW },
        { "temperature", required_argument, 0, OPT_TEMP },
        { "top-k", required_argument, 0, OPT_TOPK },
        { "top-p", required_argument, 0, OPT_TOPP },
        { "seed", required_argument, 0, OPT_SEED },
        { "eos-id", required_argument, 0, OPT_EOS },
        { "ignore-eos", no_argument, 0, OPT_IGNORE_EOS },
        { "prompts", required_argument, 0, OPT_PROMPTS },
        { "out", required_argument, 0, OPT_OUT },
        { "params", required_argument, 0, OPT_PARAMS },
        { "device", required_argument, 0, OPT_DEVICE },
        { "prefill-chunk", required_argument, 0, OPT_CHUNK },
        { "echo", no_argument, 0, OPT_ECHO },
        { "verbose", no_argument, 0, OPT_VERBOSE },
        { "no-thinking", no_argument, 0, OPT_NO_THINKING },
        { "allow-tokenizer-mismatch", no_argument, 0, OPT_ALLOW_TOK_MISMATCH },
        { "prompt-ids", no_argument, 0, OPT_PROMPT_IDS },
        { "allow-nonfinite", no_argument, 0, OPT_ALLOW_NONFINITE },
        { "help", no_argument, 0, 'h' },
        { "version", no_argument, 0, 'V' },
        { 0, 0, 0, 0 },
    };
    int o;
    long v;
    opterr = 0;
    while ((o = getopt_long(argc, argv, ":hVv", longopts, NULL)) != -1) {
        switch (o) {
        case OPT_TOKENIZER: c->s.tokenizer_path = optarg; break;
        case OPT_BYTES: c->s.byte_tokens = true; break;
        case OPT_IDS: c->ids_mode = true; break;
        case OPT_TEMPLATE:
            if (ft_template_parse(optarg, &c->s.tmpl))
                return usage_error("--template '%s': expected none, alpaca, llama3-chat, "
                                   "llama3.1-chat, llama2-chat, chatml, qwen2-chat, "
                                   "qwen2.5-chat, qwen3-chat, smollm2-chat or mistral-chat",
                                   optarg);
            if (strcmp(optarg, "llama31-chat") == 0)
                fprintf(stderr, "ftmpi-generate: note: --template llama31-chat is spelt "
                                "llama3.1-chat\n");
            c->template_given = true;
            break;
        case OPT_NO_THINKING: c->no_thinking = true; break;
        case OPT_ALLOW_TOK_MISMATCH: c->s.allow_tokenizer_mismatch = true; break;
        case OPT_PROMPT_IDS: c->prompt_ids = true; break;
        case OPT_ALLOW_NONFINITE: c->s.allow_nonfinite = true; break;
        case OPT_SYSTEM: c->system = optarg; break;
        case OPT_INPUT: c->input = optarg; break;
        case OPT_NO_BOS: c->s.no_bos = true; break;
        case OPT_MAX_NEW:
            if (parse_long("--max-new-tokens", optarg, 0, INT_MAX / 2, &v))
                return -1;
            c->s.max_new_tokens = (int)v;
            break;
        case OPT_TEMP:
            if (parse_double("--temperature", optarg, &c->s.sampler.temperature))
                return -1;
            break;
        case OPT_TOPK:
            if (parse_long("--top-k", optarg, 0, INT_MAX, &v))
                return -1;
            c->s.sampler.top_k = (int)v;
            break;
        case OPT_TOPP:
            if (parse_double("--top-p", optarg, &c->s.sampler.top_p))
                return -1;
            break;
        case OPT_SEED:
            if (parse_u64("--seed", optarg, &c->s.sampler.seed))
                return -1;
            break;
        case OPT_EOS:
            if (parse_long("--eos-id", optarg, 0, INT32_MAX, &v))
                return -1;
            if (c->s.n_eos_override < 0)
                c->s.n_eos_override = 0;
            if (c->s.n_eos_override == FT_GEN_MAX_STOP)
                return usage_error("--eos-id '%s': at most 16 stop ids", optarg);
            c->s.eos_override[c->s.n_eos_override++] = (int32_t)v;
            break;
        case OPT_IGNORE_EOS: c->s.ignore_eos = true; break;
        case OPT_PROMPTS: c->prompts_path = optarg; break;
        case OPT_OUT: c->out_path = optarg; break;
        case OPT_PARAMS:
            if (strcmp(optarg, "auto") == 0)
                c->s.params = FT_GEN_PARAMS_AUTO;
            else if (strcmp(optarg, "model") == 0)
                c->s.params = FT_GEN_PARAMS_MODEL;
            else if (strcmp(optarg, "master") == 0)
                c->s.params = FT_GEN_PARAMS_MASTER;
            else
                return usage_error("--params '%s': expected auto, model or master", optarg);
            break;
        case OPT_DEVICE:
            if (strcmp(optarg, "cpu") != 0 && strcmp(optarg, "cuda") != 0)
                return usage_error("--device '%s': expected cpu or cuda", optarg);
            c->device = optarg;
            break;
        case OPT_CHUNK:
            if (parse_long("--prefill-chunk", optarg, 1, 1 << 20, &v))
                return -1;
            c->s.max_chunk = (int)v;
            break;
        case OPT_ECHO: c->echo = true; break;
        case 'v':
        case OPT_VERBOSE: c->verbose = true; break;
        case 'h': fputs(usage_text, stdout); return 1;
        case 'V': print_version(); return 1;
        case ':':
            return usage_error("%s needs a value", argv[optind - 1]);
        default:
            /* an unknown short option ("-1,5" reads as -1 -, -5): optopt names it, where
             * argv[optind - 1] may be another argument after getopt's permutation */
            if (optopt) {
                char opt[3] = { '-', (char)optopt, 0 };
                return usage_error("unknown option '%s' (a prompt or an --ids list that begins "
                                   "with '-' goes after '--', e.g. --ids -- -1,5)", opt);
            }
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    /* getopt has moved the operands (MODEL, PROMPT) to the end */
    const int npos = argc - optind, want = c->prompt_ids ? 1 : 2; /* --prompt-ids: no MODEL */
    if (npos == 0 && !c->prompt_ids)
        return usage_error("%s", "no MODEL given (a weights file, checkpoint or checkpoint "
                                 "directory)");
    if (npos > want)
        return usage_error("unexpected argument '%s' (quote a prompt with spaces; put -- "
                           "before a prompt that starts with '-')", argv[optind + want]);
    if (c->prompt_ids) {
        c->prompt = npos > 0 ? argv[optind] : NULL;
    } else {
        c->s.model_path = argv[optind];
        c->prompt = npos > 1 ? argv[optind + 1] : NULL;
    }
    c->s.use_cuda = strcmp(c->device, "cuda") == 0;

    /* combinations */
    if (c->s.byte_tokens && c->s.tokenizer_path)
        return usage_error("%s", "--byte-tokens and --tokenizer exclude each other");
    if (c->prompts_path && !c->out_path)
        return usage_error("%s", "--prompts needs --out OUT.jsonl");
    if (c->out_path && !c->prompts_path)
        return usage_error("%s", "--out is for batch mode (--prompts IN.jsonl)");
    if (c->prompts_path && c->prompt)
        return usage_error("%s", "give either PROMPT or --prompts, not both");
    ft_error same; /* --out renamed over one of the inputs would destroy it */
    if (c->out_path && (ft_output_not_input(c->out_path, "--out", c->prompts_path, "--prompts",
                                            &same) ||
                        ft_output_not_input(c->out_path, "--out", c->s.tokenizer_path,
                                            "--tokenizer", &same) ||
                        ft_output_not_input(c->out_path, "--out", c->s.model_path, "MODEL",
                                            &same)))
        return usage_error("%s", same.msg);
    if (!c->ids_mode && !c->s.byte_tokens && !c->s.tokenizer_path)
        return usage_error("%s", "text prompts need --tokenizer FILE or --byte-tokens (or "
                                 "give token ids with --ids)");
    if (c->prompt_ids && (!c->s.tokenizer_path || c->ids_mode || c->prompts_path))
        return usage_error("%s", "--prompt-ids needs --tokenizer and a text prompt (not --ids, "
                                 "--byte-tokens or --prompts)");
    int tpl_rc = !c->template_given && c->s.tokenizer_path && !c->ids_mode
                     ? template_from_tokenizer(c) : 0;
    if (tpl_rc)
        return tpl_rc;
    if (c->no_thinking && c->s.tmpl != FT_TEMPLATE_QWEN3_CHAT)
        return usage_error("--no-thinking is for --template qwen3-chat (the template is %s)",
                           ft_template_name(c->s.tmpl));
    if (c->no_thinking)
        c->s.tmpl = FT_TEMPLATE_QWEN3_CHAT_NO_THINKING;
    if (c->ids_mode && (c->s.tmpl != FT_TEMPLATE_NONE || c->system || c->input))
        return usage_error("%s", "--ids prompts are used verbatim: no --template, --system or "
                                 "--input");
    if (c->ids_mode && c->echo)
        return usage_error("%s", "--echo is for text prompts");
    if (c->input && c->s.tmpl != FT_TEMPLATE_ALPACA)
        return usage_error("%s", "--input is for --template alpaca");
    const bool chat = c->s.tmpl != FT_TEMPLATE_NONE && c->s.tmpl != FT_TEMPLATE_ALPACA;
    if (c->system && !chat)
        return usage_error("%s", "--system is for the chat templates (llama3-chat, "
                                 "llama3.1-chat, llama2-chat, chatml, qwen2-chat, "
                                 "qwen2.5-chat, qwen3-chat, smollm2-chat, mistral-chat)");
    if (!c->ids_mode && c->s.byte_tokens && chat)
        return usage_error("--template %s needs --tokenizer", ft_template_name(c->s.tmpl));
    if (c->s.ignore_eos && c->s.n_eos_override >= 0)
        return usage_error("%s", "--ignore-eos and --eos-id exclude each other");
    ft_error err;
    if (ft_sampler_config_check(&c->s.sampler, &err))
        return usage_error("%s", err.msg);
    return 0;
}

/* ---------------------------------------------------------------- single prompt */

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

static int run_single(const cli *c, ft_gen_session *s, ft_error *err)
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
static int print_prompt_ids(const cli *c)
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

/* ---------------------------------------------------------------- batch */

typedef struct batch_ctx {
    const cli *c;
    ft_gen_session *s;
    const char *path;
    long tokens;
} batch_ctx;

/* The helpers below name no file or line: batch_item adds "FILE:LINE: " once. */
static int optional_string(const json_t *in, const char *key, const char **v, ft_error *err)
{
    const json_t *x = json_object_get(in, key);
    *v = NULL;
    if (!x)
        return 0;
    if (!json_is_string(x))
        return ft_fail(err, "\"%s\" must be a string", key);
    *v = json_string_value(x);
    return 0;
}

static int ids_of(const json_t *in, int32_t **ids, int *n, ft_error *err)
{
    const json_t *arr = json_object_get(in, "ids");
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return ft_fail(err, "with --ids each line needs a non-empty \"ids\" array");
    size_t k = json_array_size(arr);
    if (k > INT_MAX)
        return ft_fail(err, "too many ids");
    *ids = malloc(k * sizeof **ids);
    if (!*ids)
        return ft_fail(err, "out of host memory");
    for (size_t i = 0; i < k; i++) {
        const json_t *x = json_array_get(arr, i);
        json_int_t v = json_is_integer(x) ? json_integer_value(x) : -1;
        if (v < 0 || v > INT32_MAX) {
            free(*ids);
            return ft_fail(err, "\"ids\"[%zu] is not a token id (an integer from 0 to the "
                           "vocabulary size - 1)", i);
        }
        (*ids)[i] = (int32_t)v;
    }
    *n = (int)k;
    return 0;
}

static int batch_item(void *vctx, const json_t *in, long index, long line, json_t **res,
                      ft_error *err)
{
    batch_ctx *b = vctx;
    const cli *c = b->c;
    ft_gen_output out;
    int rc;
    if (c->ids_mode) {
        int32_t *ids = NULL;
        int n = 0;
        rc = ids_of(in, &ids, &n, err);
        if (!rc) {
            rc = ft_gen_session_run_ids(b->s, ids, n, (uint64_t)index, &out, err);
            free(ids);
        }
    } else {
        const char *prompt, *input, *system;
        rc = optional_string(in, "prompt", &prompt, err) ||
             optional_string(in, "input", &input, err) ||
             optional_string(in, "system", &system, err);
        if (!rc && !prompt)
            rc = ft_fail(err, "no \"prompt\" string");
        if (!rc && input && c->s.tmpl != FT_TEMPLATE_ALPACA)
            rc = ft_fail(err, "\"input\" is for --template alpaca");
        if (!rc)
            rc = ft_gen_session_run(b->s, prompt, input ? input : c->input,
                                    system ? system : c->system, (uint64_t)index, &out, err);
    }
    if (rc) {
        ft_fail_context(err, "%s:%ld", b->path, line);
        return -1;
    }
    json_t *o = json_deep_copy(in);
    json_t *ids = json_array();
    int bad = !o || !ids;
    for (int i = 0; i < out.n && !bad; i++)
        bad = json_array_append_new(ids, json_integer(out.ids[i])) != 0;
    if (!bad && out.text) {
        char *clean = ft_utf8_sanitize(out.text, out.text_len);
        bad = !clean || json_object_set_new(o, "completion", json_string(clean)) != 0;
        free(clean);
    }
    bad = bad || json_object_set_new(o, "ids", ids) != 0;
    ids = NULL;
    bad = bad || json_object_set_new(o, "stop", json_string(ft_stop_reason_name(out.stop))) != 0;
    b->tokens += out.n;
    ft_gen_output_free(&out);
    json_decref(ids);
    if (bad) {
        json_decref(o);
        return ft_fail(err, "out of host memory building the output of line %ld", line);
    }
    *res = o;
    return 0;
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
    cli c;
    int p = parse(argc, argv, &c);
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
    int rc = merge_lora_for_session(&c, rank, merged, sizeof merged, &err);
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
        batch_ctx b = { .c = &c, .s = s, .path = c.prompts_path };
        bool report = false;
        const double t0 = now_s();
        if (ft_batch_run(MPI_COMM_WORLD, c.prompts_path, c.out_path, batch_item, &b, &report,
                         &err)) {
            if (report)
                fprintf(stderr, "ftmpi-generate: %s\n", err.msg);
            code = EXIT_RUNTIME;
        } else if (c.verbose) {
            long tokens = b.tokens;
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
