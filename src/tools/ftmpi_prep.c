/* ftmpi-prep: the data-preparation command (doc/prep.md). Parses the command line and hands
 * over to prep_run (src/prep/); encode/decode subcommands reuse the tokenizer's JSONL front
 * end. Exit status: 0 ok, 1 runtime or data error, 2 usage error. */
#include <errno.h>
#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "comm/mpi_io_env.h"
#include "prep/prep.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tok_jsonl.h"

static const char help_text[] =
    "NAME\n"
    "    ftmpi-prep - tokenize instruction, chat or text data into an ftmpi dataset file\n"
    "\n"
    "SYNOPSIS\n"
    "    [mpirun -np N] ftmpi-prep -t TOKENIZER.json [OPTIONS] INPUT... OUT.h5\n"
    "    [mpirun -np N] ftmpi-prep -t TOKENIZER.json -o OUT [OPTIONS] INPUT...\n"
    "    ftmpi-prep encode -t TOKENIZER.json [--allow-special]  < {\"text\":...} lines\n"
    "    ftmpi-prep decode -t TOKENIZER.json [--skip-special]   < {\"ids\":[...]} lines\n"
    "\n"
    "DESCRIPTION\n"
    "    Reads records (JSON Lines, a JSON array file, or raw text), renders each with a\n"
    "    prompt template, tokenizes prompt and response separately with the Hugging Face\n"
    "    tokenizer.json (dataset text never becomes special tokens), adds BOS and EOS, masks\n"
    "    the loss to the response and EOS, packs the examples into rows of SEQ_LEN+1 tokens\n"
    "    with document boundaries, and writes the dataset file that `ftmpi` trains on\n"
    "    (doc/formats.md). Under mpirun each rank reads a byte range of every input and\n"
    "    the ranks write one file together; the output is identical for any number of ranks.\n"
    "\n"
    "    The output is either -o OUT or the last argument, which then must end in .h5 (or\n"
    "    .hdf5): inputs are JSON or text, never dataset files, so a name ending in .h5 is\n"
    "    always the output and a forgotten output never overwrites the last input. An\n"
    "    argument ending in .h5 anywhere else, or together with -o, is a usage error.\n"
    "\n"
    "INPUT FORMATS (--format, default auto = from the first record that matches)\n"
    "    alpaca   {\"instruction\", \"input\" (optional), \"output\"}\n"
    "    dolly    {\"instruction\", \"context\" (optional), \"response\"}\n"
    "    samsum   {\"dialogue\", \"summary\"}  (instruction \"Summarize this dialogue.\")\n"
    "    chat     {\"messages\": [{\"role\": system|user|assistant, \"content\"}, ...]}, or\n"
    "             ShareGPT's {\"conversations\": [{\"from\": system|human|gpt, \"value\"}, ...]}\n"
    "             (--format sharegpt is the same as chat)\n"
    "    text     {\"text\"}, or raw text files with --text\n"
    "\n"
    "OPTIONS\n"
    "    -t, --tokenizer FILE     HF tokenizer.json (Llama 2/3, Qwen2/2.5/3, Mistral v0.3,\n"
    "                             GPT-NeoX, GPT-J). Required.\n"
    "    -o, --out FILE           output dataset file (any name). Required unless the last\n"
    "                             argument is the output OUT.h5.\n"
    "    --format FMT             auto|alpaca|dolly|samsum|chat|text (default auto)\n"
    "    --template NAME          alpaca (alpaca, dolly, samsum records), llama3-chat,\n"
    "                             llama3.1-chat, llama2-chat, chatml, qwen2-chat,\n"
    "                             qwen2.5-chat, qwen3-chat (<think> blocks), smollm2-chat,\n"
    "                             mistral-chat (Mistral v0.3) (chat records), text.\n"
    "                             Default: alpaca; for chat records the template named\n"
    "                             by tokenizer_config.json's chat_template when ftmpi knows\n"
    "                             it (an unknown one is an error: name the template here);\n"
    "                             without a chat_template: chatml when the tokenizer has\n"
    "                             <|im_start|> and <|im_end|> (no default system turn;\n"
    "                             qwen2-chat, qwen2.5-chat, smollm2-chat add their\n"
    "                             model's), else llama3-chat with a byte-level tokenizer,\n"
    "                             llama2-chat with a SentencePiece one.\n"
    "    --prompt-template FILE   alpaca-style prompt used when the input is non-empty: the\n"
    "                             file verbatim, {instruction} and {input} replaced; special\n"
    "                             tokens written in the file (e.g. <|eot_id|>) become ids.\n"
    "    --prompt-template-no-input FILE\n"
    "                             prompt for records with an empty input (default: the\n"
    "                             --prompt-template file with {input} empty).\n"
    "    --text                   inputs are raw UTF-8 text, one document per line.\n"
    "    --text-unit line|file    with --text: a document per line (default) or per file.\n"
    "    --eos TOKEN              token ending each example (default: <|eot_id|> for the\n"
    "                             Llama 3 chat templates, <|end_of_text|> when the tokenizer\n"
    "                             has it, else the tokenizer's EOS, </s> for Llama 2).\n"
    "    --pad TOKEN              padding token (default tokenizer_config.json's pad_token,\n"
    "                             else <|finetune_right_pad_id|> when present (Llama 3.1),\n"
    "                             else the EOS). Padding is never a target.\n"
    "    --seq-len N              row length minus one, as in the training config (2048).\n"
    "    --pack greedy|ffd|none   greedy: in order, a document that does not fit opens the\n"
    "                             next row (default); ffd: first-fit decreasing (least\n"
    "                             padding); none: one document per row.\n"
    "    --truncate response|drop examples longer than SEQ_LEN+1 tokens: keep the first\n"
    "                             SEQ_LEN+1 tokens if a response token remains (default),\n"
    "                             else drop; drop: always drop. Documents are never split.\n"
    "    --eval-fraction F        put round(F * examples) examples, drawn with the seed, in\n"
    "                             --eval-out (0 <= F < 1; default 0).\n"
    "    --eval-out FILE          the eval dataset file (required with --eval-fraction > 0).\n"
    "    --seed S                 seed of the eval draw and of --shuffle (default 1).\n"
    "    --shuffle                shuffle the training examples (by the seed) before packing.\n"
    "    --strict                 any bad record is an error: report them all, write nothing,\n"
    "                             exit 1. Default: report, skip and count them.\n"
    "    --max-reported N         bad records printed (default 50; the rest are counted).\n"
    "    --dump-examples FILE     also write every kept example, in input order, as JSON\n"
    "                             lines {\"ids\":[...],\"mask\":[...]} (debugging, tests).\n"
    "    -q, --quiet              no summary.\n"
    "    -h, --help               this help.\n"
    "\n"
    "    encode: each stdin line {\"text\": ...} -> {\"ids\":[...]} (no BOS/EOS; special-token\n"
    "    text is plain text unless --allow-special). decode: {\"ids\":[...]} -> {\"text\": ...}.\n"
    "\n"
    "OUTPUT\n"
    "    Bad records go to stderr as `FILE:LINE: problem` (`FILE: element N: problem` in a\n"
    "    JSON array file). The summary (stdout) gives records read, examples, skipped,\n"
    "    dropped and truncated counts, tokens and tokens/s, and per file the rows, target\n"
    "    tokens, masked fraction and padding.\n"
    "\n"
    "EXIT STATUS\n"
    "    0 success, 1 runtime or data error, 2 usage error.\n"
    "\n"
    "EXAMPLES\n"
    "    ftmpi-prep -t llama3/tokenizer.json --seq-len 2048 --eval-fraction 0.02 \\\n"
    "        --eval-out eval.h5 alpaca_data.json train.h5\n"
    "    mpirun -np 8 ftmpi-prep -t llama3/tokenizer.json --format chat --pack ffd \\\n"
    "        --shuffle -o chat.h5 conversations.jsonl\n";

enum {
    OPT_FORMAT = 256, OPT_TEMPLATE, OPT_PROMPT, OPT_PROMPT_NO_INPUT, OPT_TEXT, OPT_TEXT_UNIT,
    OPT_EOS, OPT_PAD, OPT_SEQ_LEN, OPT_PACK, OPT_TRUNCATE, OPT_EVAL_FRACTION, OPT_EVAL_OUT,
    OPT_SEED, OPT_SHUFFLE, OPT_STRICT, OPT_MAX_REPORTED, OPT_DUMP,
};

static const struct option long_opts[] = {
    { "tokenizer", required_argument, NULL, 't' },
    { "out", required_argument, NULL, 'o' },
    { "format", required_argument, NULL, OPT_FORMAT },
    { "template", required_argument, NULL, OPT_TEMPLATE },
    { "prompt-template", required_argument, NULL, OPT_PROMPT },
    { "prompt-template-no-input", required_argument, NULL, OPT_PROMPT_NO_INPUT },
    { "text", no_argument, NULL, OPT_TEXT },
    { "text-unit", required_argument, NULL, OPT_TEXT_UNIT },
    { "eos", required_argument, NULL, OPT_EOS },
    { "pad", required_argument, NULL, OPT_PAD },
    { "seq-len", required_argument, NULL, OPT_SEQ_LEN },
    { "pack", required_argument, NULL, OPT_PACK },
    { "truncate", required_argument, NULL, OPT_TRUNCATE },
    { "eval-fraction", required_argument, NULL, OPT_EVAL_FRACTION },
    { "eval-out", required_argument, NULL, OPT_EVAL_OUT },
    { "seed", required_argument, NULL, OPT_SEED },
    { "shuffle", no_argument, NULL, OPT_SHUFFLE },
    { "strict", no_argument, NULL, OPT_STRICT },
    { "max-reported", required_argument, NULL, OPT_MAX_REPORTED },
    { "dump-examples", required_argument, NULL, OPT_DUMP },
    { "quiet", no_argument, NULL, 'q' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
};

static int parse_long(const char *s, long lo, long hi, long *v)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi)
        return -1;
    *v = x;
    return 0;
}

/* What a bad-value error says the option takes. */
static const char *expected_value(int opt)
{
    switch (opt) {
    case OPT_FORMAT: return "auto, alpaca, dolly, samsum, chat or text";
    case OPT_TEMPLATE: return "a template name (see --help)";
    case OPT_TEXT_UNIT: return "line or file";
    case OPT_SEQ_LEN: return "an integer from 1 to 16777216";
    case OPT_PACK: return "greedy, ffd or none";
    case OPT_TRUNCATE: return "response or drop";
    case OPT_EVAL_FRACTION: return "a number from 0 up to (not including) 1";
    case OPT_SEED: return "a non-negative integer";
    case OPT_MAX_REPORTED: return "an integer from 0 to 1000000";
    default: return "another value";
    }
}

/* Whether an argument names a dataset file rather than an input: inputs are JSON or text, so
 * the suffix tells the positional output (INPUT... OUT.h5) from the inputs. */
static bool is_dataset_name(const char *path)
{
    size_t n = strlen(path);
    return (n > 3 && strcasecmp(path + n - 3, ".h5") == 0) ||
           (n > 5 && strcasecmp(path + n - 5, ".hdf5") == 0);
}

/* Takes the output from the positionals when -o did not give it: the last one if it is a
 * dataset name. Every other positional is an input, and one with a dataset name means the
 * user gave a second output or put it in the wrong place: refused rather than guessed at.
 * Returns 0, or -1 with msg set (usage error). */
static int take_positional_output(prep_options *o, char *msg, size_t msg_len)
{
    const bool by_option = o->out != NULL;
    if (!by_option && o->n_inputs > 0 && is_dataset_name(o->inputs[o->n_inputs - 1]))
        o->out = o->inputs[--o->n_inputs];
    for (int i = 0; i < o->n_inputs; i++) {
        if (!is_dataset_name(o->inputs[i]))
            continue;
        if (by_option)
            snprintf(msg, msg_len, "two outputs: --out '%s' and '%s' (an argument ending in "
                     ".h5 is an output, inputs are JSON or text); give the output once",
                     o->out, o->inputs[i]);
        else if (o->out)
            snprintf(msg, msg_len, "two outputs: '%s' and '%s' (an argument ending in .h5 is "
                     "an output, inputs are JSON or text); give one output, last",
                     o->inputs[i], o->out);
        else
            snprintf(msg, msg_len, "'%s' ends in .h5 but is not the last argument; the "
                     "output goes last (INPUT... OUT.h5) or after -o", o->inputs[i]);
        return -1;
    }
    if (o->out)
        return 0;
    if (o->n_inputs > 0)
        snprintf(msg, msg_len, "no output file: give -o OUT, or name the output last with "
                 ".h5 at the end (INPUT... OUT.h5); '%s' is read as an input",
                 o->inputs[o->n_inputs - 1]);
    else
        snprintf(msg, msg_len, "no output file: give -o OUT, or name the output last "
                 "(INPUT... OUT.h5)");
    return -1;
}

/* Fills o from argv; returns 0, 1 for --help, or -1 with msg set (usage error). */
static int parse_args(int argc, char **argv, prep_options *o, char *msg, size_t msg_len)
{
    prep_options_default(o);
    bool text = false, text_file = false;
    int c, li = -1;
    long v;
    opterr = 0;
    optind = 1;
    while ((li = -1, c = getopt_long(argc, argv, "t:o:qh", long_opts, &li)) != -1) {
        switch (c) {
        case 't': o->tokenizer = optarg; break;
        case 'o': o->out = optarg; break;
        case 'q': o->quiet = true; break;
        case 'h': return 1;
        case OPT_FORMAT:
            if (prep_format_parse(optarg, &o->format))
                goto bad_value;
            break;
        case OPT_TEMPLATE:
            if (prep_template_parse(optarg, &o->template_kind)) {
                snprintf(msg, msg_len, "--template '%s' is not a template name; use one of: "
                         "alpaca, text, %s", optarg, FT_CHAT_TEMPLATE_NAMES);
                return -1;
            }
            if (strcmp(optarg, "llama31-chat") == 0) /* generate's former spelling */
                fprintf(stderr, "ftmpi-prep: note: --template llama31-chat is spelt "
                                "llama3.1-chat\n");
            break;
        case OPT_PROMPT: o->prompt_template = optarg; break;
        case OPT_PROMPT_NO_INPUT: o->prompt_template_no_input = optarg; break;
        case OPT_TEXT: text = true; break;
        case OPT_TEXT_UNIT:
            if (strcmp(optarg, "line") && strcmp(optarg, "file"))
                goto bad_value;
            text_file = strcmp(optarg, "file") == 0;
            break;
        case OPT_EOS: o->eos_token = optarg; break;
        case OPT_PAD: o->pad_token = optarg; break;
        case OPT_SEQ_LEN:
            if (parse_long(optarg, 1, 1 << 24, &v))
                goto bad_value;
            o->seq_len = (int)v;
            break;
        case OPT_PACK:
            if (strcmp(optarg, "greedy") == 0)
                o->pack = PREP_PACK_GREEDY;
            else if (strcmp(optarg, "ffd") == 0)
                o->pack = PREP_PACK_FFD;
            else if (strcmp(optarg, "none") == 0)
                o->pack = PREP_PACK_NONE;
            else
                goto bad_value;
            break;
        case OPT_TRUNCATE:
            if (strcmp(optarg, "response") == 0)
                o->truncate = PREP_TRUNCATE_RESPONSE;
            else if (strcmp(optarg, "drop") == 0)
                o->truncate = PREP_TRUNCATE_DROP;
            else
                goto bad_value;
            break;
        case OPT_EVAL_FRACTION: {
            char *end;
            errno = 0;
            o->eval_fraction = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(o->eval_fraction >= 0) ||
                !(o->eval_fraction < 1))
                goto bad_value;
            break;
        }
        case OPT_EVAL_OUT: o->eval_out = optarg; break;
        case OPT_SEED: {
            char *end;
            errno = 0;
            o->seed = strtoull(optarg, &end, 0);
            if (errno || end == optarg || *end || optarg[0] == '-')
                goto bad_value;
            break;
        }
        case OPT_SHUFFLE: o->shuffle = true; break;
        case OPT_STRICT: o->strict = true; break;
        case OPT_MAX_REPORTED:
            if (parse_long(optarg, 0, 1000000, &v))
                goto bad_value;
            o->max_reported = (int)v;
            break;
        case OPT_DUMP: o->dump_examples = optarg; break;
        default:
            snprintf(msg, msg_len, "unknown option or missing value: %s", argv[optind - 1]);
            return -1;
        }
        continue;
    bad_value:
        /* the option's name whether its value was "--opt V" or "--opt=V" */
        snprintf(msg, msg_len, "bad value '%s' for --%s; expected %s", optarg,
                 li >= 0 ? long_opts[li].name : "?", expected_value(c));
        return -1;
    }
    o->inputs = (const char *const *)argv + optind;
    o->n_inputs = argc - optind;
    o->input_kind = !text ? PREP_INPUT_JSON : text_file ? PREP_INPUT_TEXT_FILE
                                                        : PREP_INPUT_TEXT_LINES;
    if (text && o->format != PREP_FORMAT_AUTO && o->format != PREP_FORMAT_TEXT)
        snprintf(msg, msg_len, "--text reads raw text; it cannot be combined with --format %s",
                 prep_format_name(o->format));
    else if (text_file && !text)
        snprintf(msg, msg_len, "--text-unit needs --text");
    else if (!o->tokenizer)
        snprintf(msg, msg_len, "--tokenizer is required");
    else if (take_positional_output(o, msg, msg_len) < 0)
        return -1;
    else if (o->n_inputs == 0)
        snprintf(msg, msg_len, "no input files");
    else if (o->eval_fraction > 0 && !o->eval_out)
        snprintf(msg, msg_len, "--eval-fraction needs --eval-out FILE");
    else if (o->eval_out && !(o->eval_fraction > 0))
        snprintf(msg, msg_len, "--eval-out needs --eval-fraction F > 0");
    else
        return 0;
    return -1;
}

/* encode / decode: JSONL through the tokenizer, no MPI. */
static int run_codec(int argc, char **argv)
{
    const bool enc = strcmp(argv[1], "encode") == 0;
    const char *path = NULL;
    bool flag = false;
    for (int i = 2; i < argc; i++) {
        if ((strcmp(argv[i], "-t") == 0 || strcmp(argv[i], "--tokenizer") == 0) && i + 1 < argc)
            path = argv[++i];
        else if (strncmp(argv[i], "--tokenizer=", 12) == 0)
            path = argv[i] + 12;
        else if (strcmp(argv[i], enc ? "--allow-special" : "--skip-special") == 0)
            flag = true;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(help_text, stdout);
            return 0;
        } else {
            fprintf(stderr, "ftmpi-prep %s: unknown argument '%s'; see ftmpi-prep --help\n",
                    argv[1], argv[i]);
            return 2;
        }
    }
    if (!path) {
        fprintf(stderr, "ftmpi-prep %s: --tokenizer is required\n", argv[1]);
        return 2;
    }
    ft_error err = { { 0 }, 0 };
    ft_tokenizer *t;
    if (ft_tokenizer_load(path, &t, &err) < 0) {
        fprintf(stderr, "ftmpi-prep: %s\n", err.msg);
        return err.flags & FT_ERR_CONFIG ? 2 : 1;
    }
    int rc = enc ? ft_tok_jsonl_encode(t, stdin, "stdin", stdout, flag, &err)
                 : ft_tok_jsonl_decode(t, stdin, "stdin", stdout, flag, &err);
    if (rc == 0 && fflush(stdout) != 0)
        rc = ft_fail(&err, "stdout: write error");
    if (rc < 0)
        fprintf(stderr, "ftmpi-prep: %s\n", err.msg);
    ft_tokenizer_free(t);
    return rc < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "encode") == 0 || strcmp(argv[1], "decode") == 0))
        return run_codec(argc, argv);
    prep_options o;
    char msg[512] = "";
    int parsed = parse_args(argc, argv, &o, msg, sizeof msg);
    ft_mpi_io_env_defaults(); /* before MPI_Init: long paths (comm/mpi_io_env.h) */
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int status = 0;
    if (parsed == 1) {
        if (rank == 0)
            fputs(help_text, stdout);
    } else if (parsed < 0) {
        if (rank == 0)
            fprintf(stderr, "ftmpi-prep: %s; see ftmpi-prep --help\n", msg);
        status = 2;
    } else {
        ft_error err = { { 0 }, 0 };
        if (prep_run(&o, MPI_COMM_WORLD, &err) < 0) {
            if (err.msg[0])
                fprintf(stderr, "ftmpi-prep: %s\n", err.msg);
            status = err.flags & FT_ERR_CONFIG ? 2 : 1; /* e.g. a malformed tokenizer_config.json */
        }
    }
    MPI_Finalize();
    return status;
}
