/* The schema: every key of the config file, once.
 *
 * Adding a key is one line in ft_config_keys[] (plus the field in run_config.h):
 * the file reader, the command-line overrides, the unknown-key check, the
 * suggestions, ft_run_config_free and the reference (doc/config.md) all walk
 * this table.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"
#include "model/model_fields.h"

/* Enum fields are stored through an int; gcc gives these enums int size. */
_Static_assert(sizeof(ft_optimizer_type) == sizeof(int), "enum size");
_Static_assert(sizeof(ft_schedule_type) == sizeof(int), "enum size");
_Static_assert(sizeof(ft_dtype) == sizeof(int), "enum size");
_Static_assert(sizeof(ft_rope_scaling_type) == sizeof(int), "enum size");
_Static_assert(sizeof(ft_model_family) == sizeof(int), "enum size");

/* The order of names must follow the enum values: the stored value is the index. */
static const char *const device_names[] = {"cpu", "cuda", NULL};
static const char *const dtype_names[] = {"fp32", "bf16", NULL};
static const char *const rope_scaling_names[] = {"none", "llama3", NULL};
/* In ft_model_family order (model/family.h). */
static const char *const family_names[] = {FT_FAMILY_TABLE(FT_FAMILY_NAME_ROW) NULL};
_Static_assert(sizeof family_names / sizeof family_names[0] == FT_FAMILY_COUNT + 1,
               "one name per model family");
static const char *const optimizer_names[] = {"adamw", "sgd", NULL};
static const char *const schedule_names[] = {"cosine", "linear", "constant", NULL};

#define OFF(field) offsetof(ft_run_config, field)
#define INF HUGE_VAL

/* One macro per type keeps each table row on one line. */
#define INT(p, field, fl, lo, hi, def, d) \
    {.path = p, .type = FT_KEY_INT, .flags = fl, .offset = OFF(field), .imin = lo, .imax = hi, .idef = def, .doc = d}
#define INT64(p, field, fl, lo, hi, def, d) \
    {.path = p, .type = FT_KEY_INT64, .flags = fl, .offset = OFF(field), .imin = lo, .imax = hi, .idef = def, .doc = d}
#define FLOAT(p, field, fl, lo, hi, def, d) \
    {.path = p, .type = FT_KEY_FLOAT, .flags = fl, .offset = OFF(field), .fmin = lo, .fmax = hi, .fdef = def, .doc = d}
#define BOOL(p, field, fl, def, d) \
    {.path = p, .type = FT_KEY_BOOL, .flags = fl, .offset = OFF(field), .idef = def, .doc = d}
#define STRING(p, field, fl, def, ch, d) \
    {.path = p, .type = FT_KEY_STRING, .flags = fl, .offset = OFF(field), .sdef = def, .choices = ch, .doc = d}
#define ENUM(p, field, fl, def, ch, d) \
    {.path = p, .type = FT_KEY_ENUM, .flags = fl, .offset = OFF(field), .idef = def, .choices = ch, .doc = d}
/* An int whose default is computed from other keys in config_check.c. */
#define INT_DERIVED(p, field, fl, lo, hi, how, d) \
    {.path = p, .type = FT_KEY_INT, .flags = (fl) | FT_KEY_DERIVED, .offset = OFF(field), .imin = lo, .imax = hi, .default_doc = how, .doc = d}

/* A row of the model field table as a key "model.<field>": the row's config part is
 * the macro (INT, BOOL, ...) and its arguments after the path and the field. */
#define CALL_KEY(kind, ...) kind(__VA_ARGS__)
#define UNPAREN(...) __VA_ARGS__
#define MODEL_KEY(field, attr, type, req, omit, shape, absent, hf, kind, args) \
    CALL_KEY(kind, "model." #field, model.field, UNPAREN args),

enum {
    REQ = FT_KEY_REQUIRED,
    SHAPE = FT_KEY_SHAPE,
    SHAPE_REQ = FT_KEY_SHAPE | FT_KEY_SHAPE_REQUIRED,
    GT = FT_KEY_MIN_OPEN, /* (min, ... */
    LT = FT_KEY_MAX_OPEN, /* ..., max) */
    OPT = FT_KEY_OPTIONAL_GROUP,
};

/* clang-format off */
const ft_config_key ft_config_keys[] = {
    /* top level */
    STRING("device", device, 0, "cpu", device_names, "where the model runs"),
    {.path = "max_steps", .type = FT_KEY_INT64, .flags = FT_KEY_DERIVED, .offset = OFF(max_steps), .imin = 1, .imax = LONG_MAX, .default_doc = "from num_epochs", .doc = "number of optimizer steps; required unless num_epochs is given (not both)"},
    {.path = "num_epochs", .type = FT_KEY_FLOAT, .flags = GT | FT_KEY_DERIVED, .offset = OFF(num_epochs), .fmin = 0.0, .fmax = INF, .default_doc = "none", .doc = "train for this many passes over data.train instead of max_steps: max_steps = ceil(num_epochs x rows / global_batch_size), the epoch shown in the step line; give this or max_steps, not both"},
    INT64("seed", seed, 0, 0, LONG_MAX, 1234, "seed of the weight init and data order"),
    INT("micro_batch_size", micro_batch_size, REQ, 1, INT_MAX, 0, "sequences per rank per forward/backward"),
    INT("global_batch_size", global_batch_size, REQ, 1, INT_MAX, 0, "sequences per optimizer step over all ranks; a multiple of micro_batch_size x ranks"),
    INT("zero_stage", zero_stage, 0, 0, 3, 0, "ZeRO sharding: 0 none, 1 optimizer state, 2 + gradients, 3 + parameters"),
    BOOL("activation_checkpointing", activation_checkpointing, 0, 0, "recompute block activations in backward to save memory"),
    INT("checkpoint_layers", checkpoint_layers, 0, 0, INT_MAX, 0, "with activation_checkpointing: how many blocks, from the first, recompute their activations in the backward; the later ones keep theirs, faster by their recompute and larger by one block's activations each (`ftmpi --plan` shows the total); 0, or the layer count or more: every block"),
    BOOL("checkpoint_keep_attention", checkpoint_keep_attention, 0, 0, "with activation_checkpointing: the blocks that recompute keep their attention half's activations (q, k, v, attention's output and log-sum-exp, the residual after it), so only their MLP half is recomputed: about a third less recompute (Llama shapes, seq_len 4096) for about a fifth of a block's activations each (`ftmpi --plan` shows the total and names the fastest setting that fits)"),
    BOOL("checkpoint_keep_attention_output", checkpoint_keep_attention_output, 0, 0, "with activation_checkpointing: the blocks that recompute keep attention's output and log-sum-exp, so their recompute repeats the projections but not attention itself: about a sixth less recompute (Llama-3.2-1B shape, seq_len 4096; more of its time on a GPU, where attention runs slower per FLOP than the GEMMs) for about 6 % of a block's activations each; checkpoint_keep_attention keeps these too (`ftmpi --plan` shows the total and names the fastest setting that fits)"),
    INT("head_memory_mib", head_memory_mib, 0, 0, INT_MAX, 0, "MiB per rank for the LM head's logits and their gradient; when a micro-batch's fit, the head reads and writes its weight gradient once per micro-batch, else once per group of at least 2048 target rows (doc/design.md, \"The step\"); 0: 1/64 of the device's memory (host RAM on the CPU), at least 64 MiB"),
    ENUM("precision", precision, 0, 0, dtype_names, "numerics: \"bf16\" is mixed precision (bf16 working weights, activations and matmul operands; fp32 master weights, optimizer state, gradient accumulation, norms, softmax and loss; implies model.param_dtype = \"bf16\"); \"fp32\" everywhere is the reference"),
    ENUM("grad_reduce_dtype", grad_reduce_dtype, 0, 0, dtype_names, "type gradients are summed across ranks in: \"bf16\" halves the traffic, each partial sum rounded to bf16"),
    BOOL("offload_optimizer", offload_optimizer, 0, 0, "keep the fp32 master weights and optimizer moments in host memory and run the update on the CPU"),
    FLOAT("grad_clip", grad_clip, 0, 0.0, INF, 1.0, "clip the global gradient norm to this; 0 disables"),
    INT64("log_every", log_every, 0, 1, LONG_MAX, 1, "print loss and throughput every this many steps"),
    INT64("eval_every", eval_every, 0, 0, LONG_MAX, 0, "evaluate on data.eval every this many steps; 0 disables"),
    INT64("eval_batches", eval_batches, 0, 0, LONG_MAX, 0, "global batches per evaluation; 0 means the whole eval set"),
    {.path = "eval_prompts", .type = FT_KEY_STRINGS, .offset = OFF(eval_prompts), .doc = "prompts completed greedily at every evaluation with the current parameters, written to the log and the metrics file (\"sample\" records); needs eval_tokenizer; decoded in the precision's working parameters (with \"bf16\": the bf16 rounding of the master, as ftmpi-generate --params model)"},
    STRING("eval_tokenizer", eval_tokenizer, 0, NULL, NULL, "the model's tokenizer.json for eval_prompts, or \"bytes\" for ftmpi-gendata's byte-token models"),
    STRING("eval_template", eval_template, 0, "none", NULL, "prompt template of eval_prompts, as ftmpi-generate's --template (\"none\": BOS and the prompt; \"llama3-chat\", \"chatml\", ...)"),
    INT("eval_max_new_tokens", eval_max_new_tokens, 0, 1, INT_MAX, 32, "tokens generated at most per eval prompt (fewer when the model ends the answer)"),
    STRING("checkpoint_dir", checkpoint_dir, 0, NULL, NULL, "directory of sharded checkpoints (step-NNNNNN.h5 and the `latest` pointer); none: no checkpoints. One training job at a time: a job holds `.ftmpi-lock` there (an fcntl lock, released when it ends however it ends) and a second one is refused; `--eval-only` takes no lock"),
    INT64("save_every", save_every, 0, 0, LONG_MAX, 0, "write a checkpoint every this many steps (and always at the end); 0: only at the end"),
    INT("keep_last", keep_last, 0, 0, INT_MAX, 3, "checkpoints to keep in checkpoint_dir (the highest steps, and always the one `latest` names); 0 keeps all"),
    BOOL("keep_best", keep_best, 0, 0, "also keep the checkpoint with the lowest eval loss (recorded in checkpoint_dir/best, which resume reads); an evaluation that sets a new best writes a checkpoint when its step has none. Needs checkpoint_dir, data.eval and eval_every"),
    BOOL("direct_io", direct_io, 0, 1, "checkpoints and weights files: each rank moves its tensor bytes itself, block-aligned interiors with O_DIRECT (bypassing the page cache) and edges buffered; false: collective HDF5 transfers through MPI-IO"),
    STRING("resume", resume, 0, "none", NULL, "\"auto\": continue from checkpoint_dir/latest when it exists; a path: from that checkpoint; \"none\": start fresh"),
    FLOAT("comm_timeout", comm_timeout, 0, 0.0, INF, 600.0, "seconds without progress (a rank died or hangs) after which every rank aborts with a message; 0 disables"),
    INT("max_nan_skips", max_nan_skips, 0, 0, INT_MAX, 0, "steps with a non-finite loss or gradient that are skipped (no update) before the run aborts; 0 aborts at the first"),
    BOOL("allow_nonfinite", allow_nonfinite, 0, 0, "load a resume checkpoint, model.weights or a model.adapter directory that holds NaN or Inf (refused by default: training from it cannot work); for inspecting such a file"),
    INT64("collapse_steps", collapse_steps, 0, 0, LONG_MAX, 20, "stop with exit 88 after this many consecutive steps whose loss is ln(vocab_size) (uniform predictions) with a gradient norm of 0: the run has collapsed and learns nothing; the step that completes the count is not checkpointed; 0 never stops"),
    STRING("metrics_file", metrics_file, 0, NULL, NULL, "append one JSON line per step and per evaluation to this file (rank 0); none: no file. A regular file or a device (/dev/null), not a symlink or FIFO; a write error (full disk) drops the partial record, warns once, stops further records and makes the run exit 1"),
    FLOAT("peak_tflops", peak_tflops, 0, 0.0, INF, 0.0, "dense peak TFLOP/s of one rank's device for MFU, in the recipe's dtype (bf16, or fp32 without TF32); 0: the datasheet figure of a GPU in ftmpi's table (A100, H100 SXM/PCIe/NVL, H200, GH200, L40(S), B200, GB200); a CPU or another GPU shows no MFU unless this is set"),
    BOOL("progress", progress, 0, 1, "live progress on rank 0: a bar with loss, throughput and ETA on stderr when it (or mpirun's) is a terminal, else a progress line in the log every progress_every seconds without a step line"),
    FLOAT("progress_every", progress_every, 0, 0.0, INF, 30.0, "seconds between progress lines when the output is not a terminal (mpirun or Slurm writing a file); printed only when no step line came in that time; 0: no progress lines"),
    STRING("tensorboard_dir", tensorboard_dir, 0, NULL, NULL, "write TensorBoard event files (events.out.tfevents.<time>.<host>) into this directory (rank 0): loss, eval loss, lr, grad norm, tokens/s, MFU, peak memory per step; none: no event files"),
    BOOL("log_ranks", log_ranks, 0, 0, "print every rank's host, node-local rank and device at start-up"),
    BOOL("profile_phases", profile_phases, 0, 0, "after each step line, where rank 0's step went by phase (forward, head, recompute, backward, reduce, norm, optimizer, other), in ms of the device's time on a GPU (events on its stream: no host waits added) and of the wall clock on the CPU; also \"phases\" records in the metrics file. Where the optimizer runs beside the next step's forward (a GPU at `zero_stage = 0`), its time is the step before's, and the phases may add up to more than the step"),
    BOOL("allow_tokenizer_mismatch", allow_tokenizer_mismatch, 0, 0, "train or evaluate even when model.weights, data.train, data.eval or the resume checkpoint record different tokenizer fingerprints (doc/formats.md); false refuses such a run at start-up"),
    STRING("final_weights", final_weights, 0, NULL, NULL, "write the trained weights (fp32 master values) to this HDF5 weights file at the end; each rank writes its own slice into NAME.tmp (space reserved first), renamed when complete; refused at start-up when it is model.weights, data.train or data.eval"),

    /* model = { ... } */
    STRING("model.weights", model_weights, 0, NULL, NULL, "HDF5 weights to start from; the shape then comes from the file and the shape keys must be absent"),
    STRING("model.adapter", model_adapter, 0, NULL, NULL, "a PEFT adapter directory (adapter_config.json and adapter_model.safetensors) whose adapters the run starts from instead of fresh ones; needs the lora group, and its adapter_config.json must agree with lora.rank, lora.alpha and lora.targets (checked when the directory is read)"),
    /* the model's fields: one row each in model/model_fields.h */
    FT_MODEL_FIELD_TABLE(MODEL_KEY)
    ENUM("model.rope_scaling.type", model.rope_scaling.type, SHAPE, 0, rope_scaling_names, "RoPE frequency scaling; \"llama3\" is Llama 3.1's"),
    FLOAT("model.rope_scaling.factor", model.rope_scaling.factor, SHAPE, 1.0, INF, 8.0, "llama3 scaling: context extension factor"),
    FLOAT("model.rope_scaling.low_freq_factor", model.rope_scaling.low_freq_factor, SHAPE | GT, 0.0, INF, 1.0, "llama3 scaling: wavelengths above original/low are scaled fully"),
    FLOAT("model.rope_scaling.high_freq_factor", model.rope_scaling.high_freq_factor, SHAPE | GT, 0.0, INF, 4.0, "llama3 scaling: wavelengths below original/high are kept; must exceed low_freq_factor"),
    INT("model.rope_scaling.original_max_position_embeddings", model.rope_scaling.original_max_position_embeddings, SHAPE, 1, INT_MAX, 8192, "llama3 scaling: context length of the unscaled model"),
    ENUM("model.param_dtype", param_dtype, 0, 0, dtype_names, "storage type of the working parameters"),
    FLOAT("model.init_std", init_std, GT, 0.0, INF, 0.02, "standard deviation of the random init (without model.weights)"),

    /* data = { ... } */
    STRING("data.train", train_data, REQ, NULL, NULL, "training dataset (doc/formats.md)"),
    BOOL("data.prefetch", data_prefetch, 0, 1, "read the next step's rows in a background thread while the current step computes"),
    STRING("data.eval", eval_data, 0, NULL, NULL, "evaluation dataset; none: no evaluation"),

    /* optimizer = { ... } */
    ENUM("optimizer.type", optimizer.type, 0, 0, optimizer_names, "optimizer"),
    FLOAT("optimizer.lr", optimizer.lr, REQ | GT, 0.0, INF, 0.0, "peak learning rate"),
    FLOAT("optimizer.min_lr", optimizer.min_lr, 0, 0.0, INF, 0.0, "learning rate at the end of the decay; <= lr"),
    FLOAT("optimizer.beta1", optimizer.beta1, LT, 0.0, 1.0, 0.9, "AdamW first-moment decay"),
    FLOAT("optimizer.beta2", optimizer.beta2, LT, 0.0, 1.0, 0.95, "AdamW second-moment decay"),
    FLOAT("optimizer.eps", optimizer.eps, GT, 0.0, INF, 1e-8, "AdamW denominator epsilon"),
    FLOAT("optimizer.weight_decay", optimizer.weight_decay, 0, 0.0, INF, 0.0, "decoupled weight decay on 2-D weights (not norms)"),
    FLOAT("optimizer.momentum", optimizer.momentum, LT, 0.0, 1.0, 0.9, "SGD momentum"),
    ENUM("optimizer.schedule", optimizer.schedule, 0, 0, schedule_names, "decay from lr to min_lr after warmup"),
    INT64("optimizer.warmup_steps", optimizer.warmup_steps, 0, 0, LONG_MAX, 0, "linear warmup from 0 to lr; <= max_steps"),

    /* lora = { ... } (model/lora.h): an optional group, absent means no LoRA */
    INT("lora.rank", lora_rank, OPT, 0, INT_MAX, 16, "rank of the LoRA adapters: the model's weights are frozen and only adapters on lora.targets are trained (A [rank x in], B [out x rank]). The lora group turns LoRA on, even empty (`lora = { };` takes every default); without it every weight is trained, as with 0 (`lora.rank=0` on the command line switches a file's lora group off)"),
    {.path = "lora.alpha", .type = FT_KEY_FLOAT, .flags = OPT | GT | FT_KEY_DERIVED, .offset = OFF(lora_alpha), .fmin = 0.0, .fmax = INF, .default_doc = "2 x lora.rank", .doc = "the adapters' output is scaled by alpha / rank (PEFT's lora_alpha)"},
    FLOAT("lora.dropout", lora_dropout, OPT | LT, 0.0, 1.0, 0.0, "probability of zeroing an element of a target projection's input on its way into the adapter, in training only (PEFT's lora_dropout: kept values scaled by 1 / (1 - p); the frozen projection sees the input whole; the masks follow seed and sample, the same on any number of ranks and on resume); 0: none"),
    {.path = "lora.targets", .type = FT_KEY_STRINGS, .flags = OPT, .offset = OFF(lora_targets), .default_doc = "every projection of the family", .doc = "the projections that get adapters, by model.family's Hugging Face module names: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj (llama, qwen2, qwen3, mistral); query_key_value, dense, dense_h_to_4h, dense_4h_to_h (gpt_neox); q_proj, k_proj, v_proj, out_proj, fc_in, fc_out (gptj). Not empty, no name twice; a name the family lacks is refused at start-up"},
};
/* clang-format on */

const size_t ft_config_n_keys = sizeof ft_config_keys / sizeof ft_config_keys[0];

const ft_config_key *ft_config_find_key(const char *path)
{
    for (size_t i = 0; i < ft_config_n_keys; i++)
        if (strcmp(ft_config_keys[i].path, path) == 0)
            return &ft_config_keys[i];
    return NULL;
}

size_t ft_config_key_index(const ft_config_key *k)
{
    return (size_t)(k - ft_config_keys);
}

bool ft_config_is_group(const char *path)
{
    size_t n = strlen(path);
    for (size_t i = 0; i < ft_config_n_keys; i++) {
        const char *p = ft_config_keys[i].path;
        if (strncmp(p, path, n) == 0 && p[n] == '.')
            return true;
    }
    return false;
}

/* ------------------------------------------------------------------ suggestions */

static size_t edit_distance(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    if (na > 200 || nb > 200)
        return (size_t)-1; /* nobody mistypes that much; keeps the row on the stack */
    size_t row[201];
    for (size_t j = 0; j <= nb; j++)
        row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

static const char *last_component(const char *path)
{
    const char *dot = strrchr(path, '.');
    return dot ? dot + 1 : path;
}

/* path is p up to the end of a word of it: p continues with '_' or '.' after path. */
static bool is_word_prefix(const char *path, const char *p)
{
    size_t n = strlen(path);
    return n > 0 && strncmp(p, path, n) == 0 && (p[n] == '_' || p[n] == '.');
}

/* Candidates are the keys and the groups (every proper prefix of a key that ends
 * before a '.'). A key with the same last component in another group counts as
 * distance 1, so a misplaced `lr = ...` at top level suggests 'optimizer.lr'. */
bool ft_config_suggest(const char *path, char *out, size_t out_size)
{
    size_t best_d = (size_t)-1;
    if (out_size == 0)
        return false;
    out[0] = '\0';
    for (size_t i = 0; i < ft_config_n_keys; i++) {
        const char *p = ft_config_keys[i].path;
        size_t d = edit_distance(path, p);
        if (d > 1 && strcmp(last_component(p), last_component(path)) == 0)
            d = 1;
        /* a key cut short ('optimizer.warmup' for 'optimizer.warmup_steps') is one word
         * away from what was meant, however many letters are missing; plain edit
         * distance would rate the shorter 'optimizer.lr' as close */
        if (d > 1 && is_word_prefix(path, p))
            d = 1;
        /* on a tie the shorter path wins: 'type' suggests 'optimizer.type' */
        if (d < best_d || (d == best_d && strlen(p) < strlen(out))) {
            best_d = d;
            snprintf(out, out_size, "%s", p);
        }
        for (const char *dot = strchr(p, '.'); dot; dot = strchr(dot + 1, '.')) {
            char group[256];
            int len = (int)(dot - p);
            snprintf(group, sizeof group, "%.*s", len, p);
            d = edit_distance(path, group);
            if (d < best_d) {
                best_d = d;
                snprintf(out, out_size, "%s", group);
            }
        }
    }
    size_t n = strlen(path);
    size_t limit = n / 3 > 2 ? n / 3 : 2;
    return best_d <= limit;
}

/* ------------------------------------------------------------------ reference */

static const char *type_name(const ft_config_key *k)
{
    switch (k->type) {
    case FT_KEY_INT: return "integer";
    case FT_KEY_INT64: return "integer (64-bit)";
    case FT_KEY_FLOAT: return "float";
    case FT_KEY_BOOL: return "boolean";
    case FT_KEY_STRING: return "string";
    case FT_KEY_ENUM: return "string (one of)";
    case FT_KEY_STRINGS: return "list of strings";
    }
    return "?";
}

static void print_default(FILE *f, const ft_config_key *k)
{
    if (k->flags & FT_KEY_REQUIRED) {
        fputs("**required**", f);
    } else if (k->flags & FT_KEY_SHAPE_REQUIRED) {
        fputs("**required** without `model.weights`", f);
    } else if (k->default_doc) { /* derived, or no value meaning "not used" */
        fprintf(f, "`%s`", k->default_doc);
    } else {
        switch (k->type) {
        case FT_KEY_INT:
        case FT_KEY_INT64: fprintf(f, "`%lld`", k->idef); break;
        case FT_KEY_FLOAT:
            /* "1.0", not "1": the reader takes either, but the doc shows a float */
            if (fabs(k->fdef) < 1e15 && k->fdef == (double)(long long)k->fdef)
                fprintf(f, "`%.1f`", k->fdef);
            else
                fprintf(f, "`%g`", k->fdef);
            break;
        case FT_KEY_BOOL: fputs(k->idef ? "`true`" : "`false`", f); break;
        case FT_KEY_STRING:
            if (k->sdef)
                fprintf(f, "`\"%s\"`", k->sdef);
            else
                fputs("none", f);
            break;
        case FT_KEY_ENUM: fprintf(f, "`\"%s\"`", k->choices[k->idef]); break;
        case FT_KEY_STRINGS: fputs("none", f); break;
        }
    }
}

static void print_range(FILE *f, const ft_config_key *k)
{
    switch (k->type) {
    case FT_KEY_INT:
    case FT_KEY_INT64: {
        long long type_max = k->type == FT_KEY_INT ? INT_MAX : LONG_MAX;
        if (k->imax == type_max)
            fprintf(f, ">= %lld", k->imin);
        else
            fprintf(f, "%lld..%lld", k->imin, k->imax);
        break;
    }
    case FT_KEY_FLOAT:
        if (isinf(k->fmax))
            fprintf(f, "%s %g", (k->flags & FT_KEY_MIN_OPEN) ? ">" : ">=", k->fmin);
        else
            fprintf(f, "%c%g, %g%c", (k->flags & FT_KEY_MIN_OPEN) ? '(' : '[', k->fmin, k->fmax,
                    (k->flags & FT_KEY_MAX_OPEN) ? ')' : ']');
        break;
    case FT_KEY_BOOL: fputs("`true`, `false`", f); break;
    case FT_KEY_STRING:
    case FT_KEY_ENUM:
        if (!k->choices) {
            fputs("non-empty", f);
            break;
        }
        for (size_t i = 0; k->choices[i]; i++)
            fprintf(f, "%s`\"%s\"`", i ? ", " : "", k->choices[i]);
        break;
    case FT_KEY_STRINGS: fputs("non-empty strings", f); break;
    }
}

void ft_run_config_print_reference(void *file)
{
    FILE *f = file;
    fputs("| Key | Type | Default | Range | Meaning |\n", f);
    fputs("|-----|------|---------|-------|---------|\n", f);
    for (size_t i = 0; i < ft_config_n_keys; i++) {
        const ft_config_key *k = &ft_config_keys[i];
        fprintf(f, "| `%s` | %s | ", k->path, type_name(k));
        print_default(f, k);
        fputs(" | ", f);
        print_range(f, k);
        fprintf(f, " | %s |\n", k->doc);
    }
}
