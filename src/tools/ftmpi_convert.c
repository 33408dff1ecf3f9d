/* ftmpi-convert: offline conversion between Hugging Face Llama-family checkpoints
 * (config.json + safetensors) and ftmpi's HDF5 weights/checkpoint files.
 *
 * One process, no GPU. MPI is initialised only because the HDF5 library here is the
 * parallel build (the files are opened on MPI_COMM_SELF). See doc/convert.md.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "comm/mpi_io_env.h"
#include "tools/ftmpi_convert.h"

const char cv_usage_main[] =
    "NAME\n"
    "    ftmpi-convert - convert Llama, Qwen2, Qwen3, Mistral, GPT-NeoX and GPT-J weights\n"
    "    between Hugging Face and ftmpi formats\n"
    "\n"
    "SYNOPSIS\n"
    "    ftmpi-convert import HF_DIR OUT.h5 [--dtype bf16|fp32|auto] [--allow-extra]\n"
    "    ftmpi-convert export WEIGHTS_OR_CKPT OUT_DIR [--dtype bf16|fp32|auto]\n"
    "                         [--max-shard-size 5GB] [--tokenizer DIR_OR_FILE] [--force]\n"
    "    ftmpi-convert export --adapter LORA_CKPT OUT_DIR [--base NAME_OR_PATH]\n"
    "    ftmpi-convert merge LORA_CKPT OUT_DIR [--base BASE.h5] [--dtype bf16|fp32|auto]\n"
    "    ftmpi-convert inspect FILE [--verify]\n"
    "    ftmpi-convert help [import|export|merge|inspect]\n"
    "\n"
    "DESCRIPTION\n"
    "    import   reads a Hugging Face LlamaForCausalLM, Qwen2ForCausalLM,\n"
    "             Qwen3ForCausalLM, MistralForCausalLM, GPTNeoXForCausalLM or\n"
    "             GPTJForCausalLM directory (config.json and\n"
    "             model.safetensors or model.safetensors.index.json + shards) and\n"
    "             writes an ftmpi weights file (HDF5, doc/formats.md).\n"
    "    export   writes a Hugging Face directory from an ftmpi weights file or\n"
    "             training checkpoint (only /config and /model are read); with\n"
    "             --adapter, a PEFT adapter directory from a LoRA checkpoint.\n"
    "    merge    writes a Hugging Face directory of a LoRA checkpoint's base model\n"
    "             with the adapters merged into its weights.\n"
    "    inspect  prints what an ftmpi HDF5 file or a .safetensors file holds.\n"
    "\n"
    "    Tensors stream through a fixed buffer (64 MiB by default), so memory use\n"
    "    does not grow with the model. Every input is validated before any output\n"
    "    is written; outputs are written under a temporary name and renamed.\n"
    "\n"
    "COMMON OPTIONS\n"
    "    --buffer-size SIZE   streaming buffer (default 64MiB)\n"
    "    --stats              print MB, seconds, MB/s and peak RSS on stderr\n"
    "    -q, --quiet          no summary line or notes\n"
    "    -h, --help           help (also: ftmpi-convert SUBCOMMAND --help)\n"
    "\n"
    "EXIT STATUS\n"
    "    0 success, 1 invalid input or I/O error (one line on stderr naming the file\n"
    "    and the tensor or field), 2 usage error.\n";

const char cv_usage_import[] =
    "NAME\n"
    "    ftmpi-convert import - Hugging Face model directory -> ftmpi weights file\n"
    "\n"
    "SYNOPSIS\n"
    "    ftmpi-convert import HF_DIR OUT.h5 [--dtype bf16|fp32|auto] [--allow-extra]\n"
    "                         [--buffer-size SIZE] [--stats] [--quiet]\n"
    "\n"
    "DESCRIPTION\n"
    "    Reads HF_DIR/config.json (model_type llama, qwen2, qwen3, mistral, gpt_neox or\n"
    "    gptj, with\n"
    "    the matching *ForCausalLM in architectures) and the\n"
    "    weights in HF_DIR/model.safetensors or in the shards listed by\n"
    "    HF_DIR/model.safetensors.index.json, and writes OUT.h5 with /config and one\n"
    "    /model/<name> dataset per parameter (each with a content_hash attribute).\n"
    "\n"
    "    Checked before writing: config.json fields (rope_scaling \"llama3\" or none,\n"
    "    also as transformers 5 \"rope_parameters\"; head_dim and num_key_value_heads\n"
    "    optional; an eos_token_id list keeps its first id, with a note); every\n"
    "    safetensors header (strict: offsets, sizes, dtypes); that every tensor the\n"
    "    config implies is present exactly once with its shape; that no other\n"
    "    tensor is present (rotary_emb.inv_freq buffers are ignored).\n"
    "\n"
    "OPTIONS\n"
    "    --dtype auto   (default) BF16 sources stay bf16, bit for bit; F32 and F16\n"
    "                   sources (or a mix) become fp32, exactly\n"
    "    --dtype bf16   store bf16 (F32/F16 rounded to nearest even)\n"
    "    --dtype fp32   store fp32 (exact for every source dtype)\n"
    "    --allow-extra  skip tensors that are not part of the model instead of failing\n"
    "    --buffer-size SIZE, --stats, --quiet   see ftmpi-convert --help\n"
    "\n"
    "EXAMPLE\n"
    "    ftmpi-convert import ~/hf/Llama-3.1-8B llama31-8b.h5 --stats\n";

const char cv_usage_export[] =
    "NAME\n"
    "    ftmpi-convert export - ftmpi weights or checkpoint -> Hugging Face directory\n"
    "\n"
    "SYNOPSIS\n"
    "    ftmpi-convert export WEIGHTS_OR_CKPT OUT_DIR [--dtype bf16|fp32|auto]\n"
    "                         [--max-shard-size SIZE] [--tokenizer DIR_OR_FILE] [--force]\n"
    "                         [--buffer-size SIZE] [--stats] [--quiet]\n"
    "    ftmpi-convert export --adapter LORA_CKPT OUT_DIR [--base NAME_OR_PATH]\n"
    "                         [--dtype bf16|fp32|auto] [--force] [--quiet]\n"
    "\n"
    "DESCRIPTION\n"
    "    Writes OUT_DIR/config.json (the family's *ForCausalLM, with rope_scaling and\n"
    "    torch_dtype) and the weights as OUT_DIR/model.safetensors when they fit in\n"
    "    one shard, else as model-0000K-of-0000N.safetensors shards plus\n"
    "    model.safetensors.index.json. Every shard carries the metadata\n"
    "    {\"format\": \"pt\"} that transformers requires. The input may be a weights\n"
    "    file or a training checkpoint (its /model tensors are exported); a checkpoint\n"
    "    directory stands for the checkpoint its `latest` file names.\n"
    "    OUT_DIR is created if needed; if it already holds model files the export\n"
    "    stops unless --force is given (which removes them first).\n"
    "\n"
    "OPTIONS\n"
    "    --dtype auto   (default) bf16 if every stored tensor is bf16, else fp32\n"
    "    --dtype bf16   bf16 (fp32 tensors rounded to nearest even)\n"
    "    --dtype fp32   fp32 (exact)\n"
    "    --max-shard-size SIZE   largest shard, e.g. 5GB (default; 10^9 bytes per GB),\n"
    "                   2GiB, 500MB. A tensor larger than SIZE gets a shard to itself.\n"
    "    --tokenizer DIR_OR_FILE  copy tokenizer.json, tokenizer_config.json,\n"
    "                   special_tokens_map.json, tokenizer.model (those present) from\n"
    "                   DIR, or the one FILE\n"
    "    --force        replace model files already in OUT_DIR\n"
    "    --buffer-size SIZE, --stats, --quiet   see ftmpi-convert --help\n"
    "\n"
    "LORA CHECKPOINTS\n"
    "    A LoRA checkpoint (one with a /lora group, doc/formats.md) holds adapters, not\n"
    "    a model: export refuses it without --adapter, and 'ftmpi-convert merge' makes\n"
    "    a full model of it.\n"
    "\n"
    "    --adapter      write OUT_DIR/adapter_config.json and\n"
    "                   OUT_DIR/adapter_model.safetensors, the directory that\n"
    "                   peft.PeftModel.from_pretrained(base_model, OUT_DIR) loads:\n"
    "                   r, lora_alpha, lora_dropout and target_modules (the family's\n"
    "                   Hugging Face module names) from /lora; keys\n"
    "                   base_model.model.<module>.lora_A.weight / .lora_B.weight\n"
    "                   (GPT-NeoX's query_key_value B rows in its per-head order).\n"
    "                   --dtype applies (auto: bf16 if the adapters are stored bf16);\n"
    "                   --force replaces an adapter already in OUT_DIR.\n"
    "    --base NAME_OR_PATH  base_model_name_or_path in adapter_config.json, e.g.\n"
    "                   meta-llama/Llama-3.1-8B (default: the checkpoint's\n"
    "                   base_weights, the ftmpi file the run started from)\n"
    "\n"
    "EXAMPLES\n"
    "    ftmpi-convert export ckpt/step-001000.h5 out/ --tokenizer ~/hf/Llama-3.1-8B\n"
    "    ftmpi-convert export --adapter lora-ckpt/ my-adapter/ --base meta-llama/Llama-3.1-8B\n";

const char cv_usage_merge[] =
    "NAME\n"
    "    ftmpi-convert merge - LoRA checkpoint + base -> Hugging Face model with the\n"
    "    adapters merged in\n"
    "\n"
    "SYNOPSIS\n"
    "    ftmpi-convert merge LORA_CKPT OUT_DIR [--base BASE.h5] [--dtype bf16|fp32|auto]\n"
    "                        [--max-shard-size SIZE] [--tokenizer DIR_OR_FILE] [--force]\n"
    "                        [--buffer-size SIZE] [--stats] [--quiet]\n"
    "\n"
    "DESCRIPTION\n"
    "    Reads the adapters of LORA_CKPT (a checkpoint with a /lora group, or a\n"
    "    checkpoint directory: the checkpoint its `latest` names) and the base model\n"
    "    they were trained on, adds (lora_alpha / r) B A to every adapted weight\n"
    "    (GPT-NeoX's fused B to q, k and v), and writes OUT_DIR as export does:\n"
    "    config.json, model.safetensors or shards with an index, the tokenizer files\n"
    "    with --tokenizer. The result loads with AutoModelForCausalLM and computes what\n"
    "    the base with the PEFT adapter computes.\n"
    "\n"
    "    The base is BASE.h5 (an ftmpi weights file or full checkpoint), else the\n"
    "    checkpoint's /lora base_weights (the path the training run was given,\n"
    "    relative to where it ran). It must have the shape and family of the\n"
    "    checkpoint's /config, and, when the checkpoint records a base_hash, that\n"
    "    content identity; otherwise merge stops with one line and writes nothing.\n"
    "\n"
    "    The model is merged block by block into a temporary file in OUT_DIR\n"
    "    (.ftmpi-merge.h5, removed at the end): memory holds one block and its\n"
    "    adapters, disk needs the merged model twice until the end.\n"
    "\n"
    "OPTIONS\n"
    "    --base BASE.h5 the base weights (default: /lora base_weights)\n"
    "    --dtype auto   (default) bf16 if every base tensor is stored bf16, else fp32;\n"
    "                   the sum is computed in fp32 and rounded once\n"
    "    --dtype bf16, --dtype fp32, --max-shard-size SIZE, --tokenizer DIR_OR_FILE,\n"
    "    --force        as for export\n"
    "    --buffer-size SIZE, --stats, --quiet   see ftmpi-convert --help\n"
    "\n"
    "EXAMPLE\n"
    "    ftmpi-convert merge lora-ckpt/ merged/ --base llama31-8b.h5 \\\n"
    "        --tokenizer ~/hf/Llama-3.1-8B\n";

const char cv_usage_inspect[] =
    "NAME\n"
    "    ftmpi-convert inspect - describe an ftmpi HDF5 file or a safetensors file\n"
    "\n"
    "SYNOPSIS\n"
    "    ftmpi-convert inspect FILE [--verify] [--buffer-size SIZE]\n"
    "\n"
    "DESCRIPTION\n"
    "    HDF5 (weights, checkpoint, dataset): ftmpi_format and format_version, the\n"
    "    /config, /meta and (LoRA checkpoints) /lora attributes, and every dataset\n"
    "    with dtype and shape.\n"
    "    safetensors: header size, __metadata__ and every tensor with dtype, shape\n"
    "    and byte range (the header is validated strictly).\n"
    "\n"
    "OPTIONS\n"
    "    --verify   recompute the content_hash of every dataset that has one and\n"
    "               compare (exit 1 on a mismatch); files without hashes pass with a\n"
    "               note\n";

static int dispatch(int argc, char **argv)
{
    if (argc < 2)
        return cv_usage_error(NULL, "missing subcommand (import, export, merge or inspect)");
    const char *sub = argv[1];
    if (strcmp(sub, "-h") == 0 || strcmp(sub, "--help") == 0) {
        fputs(cv_usage_main, stdout);
        return CV_EXIT_OK;
    }
    if (strcmp(sub, "help") == 0) {
        const char *t = argc > 2 ? argv[2] : "";
        fputs(strcmp(t, "import") == 0   ? cv_usage_import
              : strcmp(t, "export") == 0 ? cv_usage_export
              : strcmp(t, "inspect") == 0 ? cv_usage_inspect
              : strcmp(t, "merge") == 0   ? cv_usage_merge : cv_usage_main, stdout);
        return CV_EXIT_OK;
    }
    if (strcmp(sub, "import") == 0)
        return cv_import_main(argc - 1, argv + 1);
    if (strcmp(sub, "export") == 0)
        return cv_export_main(argc - 1, argv + 1);
    if (strcmp(sub, "inspect") == 0)
        return cv_inspect_main(argc - 1, argv + 1);
    if (strcmp(sub, "merge") == 0)
        return cv_merge_main(argc - 1, argv + 1);
    return cv_usage_error(NULL, "unknown subcommand '%s' (import, export, merge or inspect)", sub);
}

int main(int argc, char **argv)
{
    ft_mpi_io_env_defaults(); /* before MPI_Init: long paths (comm/mpi_io_env.h) */
    MPI_Init(&argc, &argv);
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rc;
    if (size > 1)
        rc = cv_usage_error(NULL, "runs as one process; start it without mpirun/srun");
    else
        rc = dispatch(argc, argv);
    fflush(stdout);
    MPI_Finalize();
    return rc;
}
