/* ftmpi-generate's command line: the --help text, the options, and the checks of how
 * they combine. It runs before MPI_Init (and --prompt-ids never starts MPI), so a bad
 * command line costs no model load: one line on standard error ending "(try --help)". */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "tokenizer/chat_template.h"
#include "tools/ftmpi_generate.h"
#include "util/blas_core.h"
#include "util/output_file.h"

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
static int template_from_tokenizer(gen_cli *c)
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
int gen_cli_parse(int argc, char **argv, gen_cli *c)
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
