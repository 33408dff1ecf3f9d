/* Tests of the config reader (src/config/) and of the model shape checks.
 *
 * Fixtures live in test/config/ (good configs) and test/config/bad/ (one fault
 * each); they are found through $FT_SRCDIR, which the harness sets, so VPATH
 * builds and `make distcheck` work. Each bad case asserts the exact "file:line: "
 * prefix and a fragment of the message.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "config/config_internal.h"
#include "config/run_config.h"
#include "model/model_config.h"

static char fixture_buf[8][1024];
static int fixture_next;

/* $FT_SRCDIR/test/config/<name>; a few buffers so that two can be alive at once. */
static const char *fixture(const char *name)
{
    const char *src = getenv("FT_SRCDIR");
    char *buf = fixture_buf[fixture_next++ % 8];
    snprintf(buf, sizeof fixture_buf[0], "%s/test/config/%s", src ? src : ".", name);
    return buf;
}

static void load_ok(ft_run_config *cfg, const char *name, int n, char *const *ov)
{
    ft_error err;
    ft_error_clear(&err);
    int rc = ft_run_config_load(cfg, fixture(name), n, ov, &err);
    if (rc != 0)
        fail_msg("%s: unexpected error: %s", name, err.msg);
}

/* ------------------------------------------------------------------ good configs */

static void test_full_config(void **state)
{
    (void)state;
    ft_run_config c;
    load_ok(&c, "full.cfg", 0, NULL);
    assert_string_equal(c.path, fixture("full.cfg"));
    assert_string_equal(c.device, "cuda");
    assert_int_equal(c.max_steps, 200);
    assert_int_equal(c.seed, 4321);
    assert_int_equal(c.micro_batch_size, 4);
    assert_int_equal(c.global_batch_size, 16);
    assert_int_equal(c.zero_stage, 2);
    assert_true(c.activation_checkpointing);
    assert_true(c.grad_clip == 0.5);
    assert_int_equal(c.log_every, 5);
    assert_int_equal(c.eval_every, 50);
    assert_int_equal(c.eval_batches, 3);

    assert_null(c.model_weights);
    const ft_model_config *m = &c.model;
    assert_int_equal(m->vocab_size, 512);
    assert_int_equal(m->hidden_size, 256);
    assert_int_equal(m->intermediate_size, 688);
    assert_int_equal(m->num_hidden_layers, 4);
    assert_int_equal(m->num_attention_heads, 8);
    assert_int_equal(m->num_key_value_heads, 2);
    assert_int_equal(m->head_dim, 64);
    assert_int_equal(m->max_position_embeddings, 4096);
    assert_true(m->rms_norm_eps == 1e-6);
    assert_true(m->rope_theta == 500000.0);
    assert_true(m->tie_word_embeddings);
    assert_int_equal(m->rope_scaling.type, FT_ROPE_SCALING_LLAMA3);
    assert_true(m->rope_scaling.factor == 8.0);
    assert_true(m->rope_scaling.low_freq_factor == 1.0);
    assert_true(m->rope_scaling.high_freq_factor == 4.0);
    assert_int_equal(m->rope_scaling.original_max_position_embeddings, 8192);
    assert_int_equal(m->bos_token_id, 1);
    assert_int_equal(m->eos_token_id, 2);
    assert_int_equal(c.param_dtype, FT_DTYPE_BF16);
    assert_true(c.init_std == 0.01);

    assert_string_equal(c.train_data, "data.h5");
    assert_string_equal(c.eval_data, "eval.h5");

    const ft_optimizer_config *o = &c.optimizer;
    assert_int_equal(o->type, FT_OPT_SGD);
    assert_true(o->lr == 3e-4);
    assert_true(o->min_lr == 1e-5);
    assert_true(o->beta1 == 0.8);
    assert_true(o->beta2 == 0.99);
    assert_true(o->eps == 1e-6);
    assert_true(o->weight_decay == 0.1);
    assert_true(o->momentum == 0.5);
    assert_int_equal(o->schedule, FT_SCHED_LINEAR);
    assert_int_equal(o->warmup_steps, 10);

    /* no overrides: text is the file, verbatim */
    assert_non_null(strstr(c.text, "rope_theta = 500000.0;"));
    assert_null(strstr(c.text, "# override:"));
    ft_run_config_free(&c);
}

static void test_defaults(void **state)
{
    (void)state;
    ft_run_config c;
    load_ok(&c, "minimal.cfg", 0, NULL);
    assert_string_equal(c.device, "cpu");
    assert_int_equal(c.max_steps, 100);
    assert_int_equal(c.seed, 1234);
    assert_int_equal(c.zero_stage, 0);
    assert_false(c.activation_checkpointing);
    assert_true(c.grad_clip == 1.0);
    assert_int_equal(c.log_every, 1);
    assert_int_equal(c.eval_every, 0);
    assert_int_equal(c.eval_batches, 0);
    assert_null(c.model_weights);
    assert_null(c.eval_data);
    const ft_model_config *m = &c.model;
    assert_int_equal(m->num_key_value_heads, 8); /* = num_attention_heads */
    assert_int_equal(m->head_dim, 32);           /* = 256 / 8 */
    assert_int_equal(m->max_position_embeddings, 2048);
    assert_true(m->rms_norm_eps == 1e-5);
    assert_true(m->rope_theta == 10000.0);
    assert_false(m->tie_word_embeddings);
    assert_int_equal(m->rope_scaling.type, FT_ROPE_SCALING_NONE);
    assert_int_equal(m->bos_token_id, -1);
    assert_int_equal(m->eos_token_id, -1);
    assert_int_equal(c.param_dtype, FT_DTYPE_F32);
    assert_true(c.init_std == 0.02);
    const ft_optimizer_config *o = &c.optimizer;
    assert_int_equal(o->type, FT_OPT_ADAMW);
    assert_true(o->min_lr == 0.0);
    assert_true(o->beta1 == 0.9);
    assert_true(o->beta2 == 0.95);
    assert_true(o->eps == 1e-8);
    assert_true(o->weight_decay == 0.0);
    assert_true(o->momentum == 0.9);
    assert_int_equal(o->schedule, FT_SCHED_COSINE);
    assert_int_equal(o->warmup_steps, 0);
    ft_run_config_free(&c);
}

static void test_weights_leave_model_zeroed(void **state)
{
    (void)state;
    ft_run_config c;
    load_ok(&c, "weights.cfg", 0, NULL);
    assert_string_equal(c.model_weights, "model.h5");
    ft_model_config zero;
    memset(&zero, 0, sizeof zero);
    assert_memory_equal(&c.model, &zero, sizeof zero);
    assert_int_equal(c.param_dtype, FT_DTYPE_BF16);
    ft_run_config_free(&c);
}

static void test_overrides(void **state)
{
    (void)state;
    char *ov[] = {
        "max_steps=10",
        "max_steps=20",                 /* in order: the last one wins */
        "optimizer.lr=1",               /* float key given an integer */
        "optimizer.warmup_steps=5",
        "model.rope_scaling.factor=16.0",
        "data.train=/scratch/d.h5",     /* bare string */
        "data.eval=\"quoted \\\"x\\\".h5\"", /* quoted, with libconfig escapes */
        "optimizer.type=adamw",         /* bare enum */
        "model.param_dtype=\"fp32\"",   /* quoted enum */
        "activation_checkpointing=false",
        "seed=5000000000L",
        "device=cpu",
    };
    int n = (int)(sizeof ov / sizeof ov[0]);
    ft_run_config c;
    load_ok(&c, "full.cfg", n, ov);
    assert_int_equal(c.max_steps, 20);
    assert_true(c.optimizer.lr == 1.0);
    assert_int_equal(c.optimizer.warmup_steps, 5);
    assert_true(c.model.rope_scaling.factor == 16.0);
    assert_string_equal(c.train_data, "/scratch/d.h5");
    assert_string_equal(c.eval_data, "quoted \"x\".h5");
    assert_int_equal(c.optimizer.type, FT_OPT_ADAMW);
    assert_int_equal(c.param_dtype, FT_DTYPE_F32);
    assert_false(c.activation_checkpointing);
    assert_int_equal(c.seed, 5000000000L);
    assert_string_equal(c.device, "cpu");
    /* untouched keys keep the file's values */
    assert_int_equal(c.micro_batch_size, 4);
    assert_true(c.optimizer.min_lr == 1e-5);

    /* text: the file, then one line per override, in order */
    const char *tail = strstr(c.text, "# override: max_steps=10\n# override: max_steps=20\n");
    assert_non_null(tail);
    assert_non_null(strstr(c.text, "# override: data.train=/scratch/d.h5\n"));
    assert_true(strncmp(c.text, "# Every key", 11) == 0);
    size_t len = strlen(c.text);
    assert_string_equal(c.text + len - strlen("# override: device=cpu\n"), "# override: device=cpu\n");
    ft_run_config_free(&c);
}

/* An override can supply what the file lacks, and satisfy a required key. */
static void test_override_fills_required(void **state)
{
    (void)state;
    char *ov[] = {"data.train=t.h5"};
    ft_run_config c;
    load_ok(&c, "bad/missing_required.cfg", 1, ov);
    assert_string_equal(c.train_data, "t.h5");
    ft_run_config_free(&c);
}

/* ------------------------------------------------------------------ bad configs */

typedef struct bad_case {
    const char *file;      /* fixture under test/config/ */
    const char *override;  /* NULL: none */
    int line;              /* > 0: expect "path:line: "; 0: "path: "; -1: "command line: " */
    const char *fragment;  /* must appear in the message */
} bad_case;

static const bad_case bad_cases[] = {
    {"bad/unknown_top.cfg", NULL, 5, "unknown key 'max_step' (did you mean 'max_steps'?)"},
    {"bad/unknown_nested.cfg", NULL, 13, "unknown key 'optimizer.lrr' (did you mean 'optimizer.lr'?)"},
    {"bad/misplaced.cfg", NULL, 5, "unknown key 'lr' (did you mean 'optimizer.lr'?)"},
    {"bad/wrong_type.cfg", NULL, 2, "max_steps: expected an integer, got a string"},
    {"bad/out_of_range.cfg", NULL, 5, "zero_stage: 5 is out of range 0..3"},
    {"bad/float_range.cfg", NULL, 13, "optimizer.beta2: 1 is out of range (must be in [0, 1))"},
    {"bad/missing_required.cfg", NULL, 0, "data.train: required key is missing"},
    {"bad/no_run_length.cfg", NULL, 0, "max_steps: required key is missing (or give num_epochs)"},
    {"bad/missing_shape.cfg", NULL, 0, "model.hidden_size: required key is missing (or give model.weights)"},
    {"bad/syntax.cfg", NULL, 4, "syntax error"},
    {"bad/duplicate.cfg", NULL, 5, "duplicate setting name"},
    {"bad/truncated_int.cfg", NULL, 2, "max_steps: 5000000000 does not fit in 32 bits"},
    {"bad/group_for_scalar.cfg", NULL, 12, "data: expected a group { ... }, got a string"},
    {"bad/scalar_for_group.cfg", NULL, 7, "model.hidden_size: expected an integer, got a group"},
    {"bad/bad_enum.cfg", NULL, 13, "optimizer.type: \"adam\" is not one of \"adamw\", \"sgd\""},
    {"bad/weights_and_shape.cfg", NULL, 7, "model.vocab_size: not allowed together with model.weights"},
    {"bad/heads_not_dividing.cfg", NULL, 10, "model.num_attention_heads: 7 does not divide hidden_size (256)"},
    {"bad/kv_not_dividing.cfg", NULL, 11, "model.num_key_value_heads: 3 does not divide num_attention_heads (8)"},
    {"bad/odd_head_dim.cfg", NULL, 11, "model.head_dim: 33 must be even"},
    {"bad/window_not_mistral.cfg", NULL, 12, "model.sliding_window: 64 is set but qwen2 models have no sliding window"},
    {"bad/bad_family.cfg", NULL, 6, "model.family: \"falcon\" is not one of \"llama\", \"qwen2\", \"qwen3\", \"mistral\", \"gpt_neox\", \"gptj\""},
    {"bad/warmup.cfg", NULL, 13, "optimizer.warmup_steps: 300 is greater than max_steps (100)"},
    {"bad/min_lr.cfg", NULL, 13, "optimizer.min_lr: 0.001 is greater than optimizer.lr (0.0003)"},
    {"bad/rope_without_type.cfg", NULL, 11, "model.rope_scaling.factor: has no effect unless"},
    {"bad/eval_without_data.cfg", NULL, 5, "eval_every: periodic evaluation needs data.eval"},
    {"bad/keep_both.cfg", NULL, 7, "checkpoint_keep_attention_output: checkpoint_keep_attention = true keeps attention's output already; set one of the two"},
    {"bad/does_not_exist.cfg", NULL, 0, "cannot open: No such file or directory"},

    /* overrides (on a good file) */
    {"minimal.cfg", "lr", -1, "lr: expected key=value"},
    {"minimal.cfg", "=5", -1, "=5: expected key=value (the key is empty)"},
    {"minimal.cfg", "max_steps=", -1, "max_steps=: expected key=value (the value is empty)"},
    {"minimal.cfg", "optimizer.lrr=1e-4", -1, "optimizer.lrr=1e-4: unknown key 'optimizer.lrr' (did you mean 'optimizer.lr'?)"},
    {"minimal.cfg", "lr=1e-4", -1, "lr=1e-4: unknown key 'lr' (did you mean 'optimizer.lr'?)"},
    {"minimal.cfg", "bogus=1", -1, "bogus=1: unknown key 'bogus'"},
    {"minimal.cfg", "optimizer.lr=abc", -1, "optimizer.lr=abc: expected a number"},
    {"minimal.cfg", "max_steps=2.5", -1, "max_steps=2.5: expected an integer, got a float"},
    {"minimal.cfg", "max_steps=\"10\"", -1, "max_steps=\"10\": expected an integer, got a string"},
    {"minimal.cfg", "max_steps=1; seed=2", -1, "expected a single value"},
    {"minimal.cfg", "max_steps=5000000000", -1, "does not fit in 32 bits and libconfig would truncate it; write it with the L suffix: 5000000000L"},
    {"minimal.cfg", "zero_stage=4", -1, "zero_stage=4: 4 is out of range 0..3"},
    {"minimal.cfg", "optimizer.lr=0", -1, "optimizer.lr=0: 0 is out of range (must be > 0)"},
    {"minimal.cfg", "optimizer.lr=1e400", -1, "is not a finite number"},
    {"minimal.cfg", "activation_checkpointing=1", -1, "expected true or false, got an integer"},
    {"minimal.cfg", "optimizer.type=adam", -1, "\"adam\" is not one of \"adamw\", \"sgd\""},
    {"minimal.cfg", "data.train=", -1, "the value is empty"},
    {"minimal.cfg", "data.train=\"x.h5", -1, "expected a string"},
    {"minimal.cfg", "model=1", -1, "model=1: 'model' is a group"},
    {"minimal.cfg", "optimizer.warmup_steps=1000", -1, "optimizer.warmup_steps=1000: 1000 is greater than max_steps (100)"},
    {"minimal.cfg", "num_epochs=2", -1, "num_epochs=2: give max_steps or num_epochs, not both"},
    {"minimal.cfg", "keep_best=true", -1, "keep_best=true: needs checkpoint_dir"},
    {"minimal.cfg", "checkpoint_layers=4", -1, "checkpoint_layers=4: needs activation_checkpointing = true"},
    {"minimal.cfg", "checkpoint_layers=-1", -1, "checkpoint_layers=-1: -1 is out of range (must be >= 0)"},
    {"minimal.cfg", "checkpoint_keep_attention=true", -1, "checkpoint_keep_attention=true: needs activation_checkpointing = true"},
    {"minimal.cfg", "checkpoint_keep_attention_output=true", -1, "checkpoint_keep_attention_output=true: needs activation_checkpointing = true"},
    {"minimal.cfg", "eval_prompts=[\"a\", \"\"]", -1, "eval_prompts=[\"a\", \"\"]: element 2 is not a non-empty string"},
    {"minimal.cfg", "eval_prompts=(\"a\", 3)", -1, "element 2 is not a non-empty string"},
    {"minimal.cfg", "eval_prompts=\"a\"", -1, "expected a list of strings"},
    {"minimal.cfg", "eval_prompts=[\"a\"]", -1, "eval_prompts=[\"a\"]: needs eval_tokenizer"},
    {"minimal.cfg", "model.head_dim=31", -1, "model.head_dim=31: 31 must be even"},
    /* an override that conflicts with the file is reported at the file's line */
    {"minimal.cfg", "model.weights=w.h5", 6, "model.vocab_size: not allowed together with model.weights"},

    /* the lora group and model.adapter */
    {"bad/lora_adapter_without_lora.cfg", NULL, 11, "model.adapter: needs LoRA: add a lora group that matches the adapter"},
    {"bad/lora_empty_targets.cfg", NULL, 14, "lora.targets: an empty list trains nothing"},
    {"bad/lora_duplicate_target.cfg", NULL, 14, "lora.targets: \"q_proj\" is listed twice"},
    {"bad/lora_dropout.cfg", NULL, 14, "lora.dropout: 1 is out of range (must be in [0, 1))"},
    {"bad/lora_alpha.cfg", NULL, 14, "lora.alpha: 0 is out of range (must be > 0)"},
    {"bad/lora_rank.cfg", NULL, 14, "lora.rank: -4 is out of range (must be >= 0)"},
    {"bad/lora_scalar.cfg", NULL, 14, "lora: expected a group { ... }, got an integer"},
    {"bad/lora_unknown.cfg", NULL, 14, "unknown key 'lora.ranks' (did you mean 'lora.rank'?)"},
    {"bad/lora_targets_string.cfg", NULL, 14, "lora.targets: expected a list of strings"},
    {"minimal.cfg", "lora.rank=-1", -1, "lora.rank=-1: -1 is out of range (must be >= 0)"},
    {"minimal.cfg", "lora.dropout=1", -1, "lora.dropout=1: 1 is out of range (must be in [0, 1))"},
    {"minimal.cfg", "lora.alpha=-2", -1, "lora.alpha=-2: -2 is out of range (must be > 0)"},
    {"minimal.cfg", "lora.targets=[]", -1, "lora.targets=[]: an empty list trains nothing"},
    {"minimal.cfg", "lora.targets=q_proj", -1, "lora.targets=q_proj: expected a list of strings"},
    {"minimal.cfg", "lora.targets=[\"up_proj\", \"up_proj\"]", -1, "\"up_proj\" is listed twice"},
    {"minimal.cfg", "lora=1", -1, "lora=1: 'lora' is a group"},
    {"minimal.cfg", "model.adapter=dir", -1, "model.adapter=dir: needs LoRA: add a lora group"},
    /* the file's adapter against the override that turns LoRA off: the override is named */
    {"lora.cfg", "lora.rank=0", -1, "lora.rank=0: 0 turns LoRA off, but model.adapter needs it"},
};

/* Returns false (after printing why) so that one run reports every failing case. */
static bool check_bad_case(const bad_case *bc)
{
    ft_run_config c;
    ft_error err;
    ft_error_clear(&err);
    char *ov[1] = {(char *)bc->override};
    const char *path = fixture(bc->file);
    int rc = ft_run_config_load(&c, path, bc->override ? 1 : 0, ov, &err);
    char prefix[1200];
    if (bc->line > 0)
        snprintf(prefix, sizeof prefix, "%s:%d: ", path, bc->line);
    else if (bc->line == 0)
        snprintf(prefix, sizeof prefix, "%s: ", path);
    else
        snprintf(prefix, sizeof prefix, "command line: ");
    bool ok = true;
    if (rc != -1) {
        print_error("%s %s: loaded, expected an error\n", bc->file, bc->override ? bc->override : "");
        ok = false;
    } else if (strncmp(err.msg, prefix, strlen(prefix)) != 0 || !strstr(err.msg, bc->fragment)) {
        print_error("%s %s:\n  got:      %s\n  expected: %s...%s\n", bc->file,
                    bc->override ? bc->override : "", err.msg, prefix, bc->fragment);
        ok = false;
    }
    /* a failed load leaves cfg freeable */
    ft_run_config_free(&c);
    return ok;
}

static void test_bad_configs(void **state)
{
    (void)state;
    size_t failed = 0;
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++)
        failed += !check_bad_case(&bad_cases[i]);
    if (failed)
        fail_msg("%zu of %zu bad-config cases failed", failed, sizeof bad_cases / sizeof bad_cases[0]);
}

/* Every fixture under bad/ is used by a case (a forgotten fixture is a test not run). */
static void test_bad_fixtures_all_used(void **state)
{
    (void)state;
    static const char *const files[] = {
        "unknown_top.cfg", "unknown_nested.cfg", "misplaced.cfg", "wrong_type.cfg",
        "out_of_range.cfg", "float_range.cfg", "missing_required.cfg", "missing_shape.cfg",
        "syntax.cfg", "duplicate.cfg", "truncated_int.cfg", "group_for_scalar.cfg",
        "scalar_for_group.cfg", "bad_enum.cfg", "weights_and_shape.cfg",
        "heads_not_dividing.cfg", "kv_not_dividing.cfg", "odd_head_dim.cfg", "warmup.cfg",
        "min_lr.cfg", "rope_without_type.cfg", "eval_without_data.cfg",
        "window_not_mistral.cfg", "bad_family.cfg", "lora_adapter_without_lora.cfg",
        "lora_empty_targets.cfg", "lora_duplicate_target.cfg", "lora_dropout.cfg",
        "lora_alpha.cfg", "lora_rank.cfg", "lora_scalar.cfg", "lora_unknown.cfg",
        "lora_targets_string.cfg",
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char name[128];
        snprintf(name, sizeof name, "bad/%s", files[i]);
        FILE *f = fopen(fixture(name), "r");
        if (!f)
            fail_msg("missing fixture %s", fixture(name));
        fclose(f);
        bool used = false;
        for (size_t j = 0; j < sizeof bad_cases / sizeof bad_cases[0]; j++)
            used = used || strcmp(bad_cases[j].file, name) == 0;
        if (!used)
            fail_msg("fixture %s has no case", name);
    }
}

/* ------------------------------------------------------------------ integer literals */

static const char minimal_head[] =
    "max_steps = 100; micro_batch_size = 2; global_batch_size = 8;\n"
    "model = { vocab_size = 512; hidden_size = 256; intermediate_size = 688;\n"
    "          num_hidden_layers = 4; num_attention_heads = 8; };\n"
    "optimizer = { lr = 3e-4; };\n";

/* Loads minimal_head + tail from a temporary file, then the overrides; returns rc,
 * message in err. */
static int load_text_overrides(ft_run_config *c, const char *tail, int n, char *const *ov,
                               ft_error *err)
{
    char path[] = "/tmp/ftmpi_config_test_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(minimal_head, f);
    fputs(tail, f);
    fclose(f);
    ft_error_clear(err);
    int rc = ft_run_config_load(c, path, n, ov, err);
    remove(path);
    return rc;
}

static int load_text(ft_run_config *c, const char *tail, ft_error *err)
{
    return load_text_overrides(c, tail, 0, NULL, err);
}

/* precision = "bf16" is the whole recipe: it implies bf16 parameters, and an explicit
 * fp32 param_dtype beside it is a conflict named at the override that made it. */
static void test_precision_recipe(void **state)
{
    (void)state;
    ft_run_config c;
    ft_error err;
    assert_int_equal(load_text(&c, "data = { train = \"t\"; }; precision = \"bf16\";\n", &err), 0);
    assert_int_equal(c.precision, FT_DTYPE_BF16);
    assert_int_equal(c.param_dtype, FT_DTYPE_BF16);
    ft_run_config_free(&c);

    assert_int_equal(load_text(&c, "data = { train = \"t\"; };\n", &err), 0);
    assert_int_equal(c.precision, FT_DTYPE_F32);
    assert_int_equal(c.param_dtype, FT_DTYPE_F32);
    ft_run_config_free(&c);

    char path[] = "/tmp/ftmpi_config_test_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(minimal_head, f);
    fputs("data = { train = \"t\"; };\nprecision = \"bf16\";\n", f);
    fclose(f);
    char *ovr[] = { "model.param_dtype=fp32" };
    ft_error_clear(&err);
    assert_int_equal(ft_run_config_load(&c, path, 1, ovr, &err), -1);
    remove(path);
    if (!strstr(err.msg, "model.param_dtype=fp32") || !strstr(err.msg, "precision = \"bf16\""))
        fail_msg("expected the override and the recipe named in: %s", err.msg);
    ft_run_config_free(&c);
}

/* ------------------------------------------------------------------ lora */

static void assert_lora_off(const ft_run_config *c)
{
    assert_int_equal(c->lora_rank, 0);
    assert_true(c->lora_alpha == 0.0);
    assert_true(c->lora_dropout == 0.0);
    assert_null(c->lora_targets);
    assert_null(c->model_adapter);
}

/* Without a lora group nothing is LoRA; the group, even empty, turns it on with the
 * defaults: rank 16, alpha 2 x rank, no dropout, every projection (NULL). */
static void test_lora_defaults(void **state)
{
    (void)state;
    ft_run_config c;
    ft_error err;
    load_ok(&c, "minimal.cfg", 0, NULL);
    assert_lora_off(&c);
    ft_run_config_free(&c);

    assert_int_equal(load_text(&c, "data = { train = \"t\"; };\nlora = { };\n", &err), 0);
    assert_int_equal(c.lora_rank, 16);
    assert_true(c.lora_alpha == 32.0);
    assert_true(c.lora_dropout == 0.0);
    assert_null(c.lora_targets);
    assert_null(c.model_adapter);
    /* a default names the file only */
    const char *where = ft_run_config_where(&c, "lora.targets");
    assert_non_null(strstr(where, "/tmp/ftmpi_config_test_"));
    assert_non_null(strstr(where, ": lora.targets"));
    ft_run_config_free(&c);

    /* alpha follows a rank that is given */
    assert_int_equal(load_text(&c, "data = { train = \"t\"; };\nlora = { rank = 4; };\n", &err), 0);
    assert_int_equal(c.lora_rank, 4);
    assert_true(c.lora_alpha == 8.0);
    ft_run_config_free(&c);
}

static void test_lora_full(void **state)
{
    (void)state;
    ft_run_config c;
    load_ok(&c, "lora.cfg", 0, NULL);
    assert_int_equal(c.lora_rank, 8);
    assert_true(c.lora_alpha == 12.0);
    assert_true(c.lora_dropout == 0.05);
    assert_non_null(c.lora_targets);
    assert_string_equal(c.lora_targets[0], "q_proj");
    assert_string_equal(c.lora_targets[1], "v_proj");
    assert_string_equal(c.lora_targets[2], "down_proj");
    assert_null(c.lora_targets[3]);
    assert_string_equal(c.model_adapter, "adapters/run1");
    char want[1200];
    snprintf(want, sizeof want, "%s:20: lora.targets", fixture("lora.cfg"));
    assert_string_equal(ft_run_config_where(&c, "lora.targets"), want);
    snprintf(want, sizeof want, "%s:12: model.adapter", fixture("lora.cfg"));
    assert_string_equal(ft_run_config_where(&c, "model.adapter"), want);
    ft_run_config_free(&c);
}

static void test_lora_overrides(void **state)
{
    (void)state;
    ft_run_config c;
    ft_error err;
    /* a lora key on the command line turns LoRA on without a group in the file */
    char *rank[] = {"lora.rank=8"};
    load_ok(&c, "minimal.cfg", 1, rank);
    assert_int_equal(c.lora_rank, 8);
    assert_true(c.lora_alpha == 16.0);
    assert_true(c.lora_dropout == 0.0);
    assert_null(c.lora_targets);
    ft_run_config_free(&c);

    char *alpha[] = {"lora.alpha=8"};
    load_ok(&c, "minimal.cfg", 1, alpha);
    assert_int_equal(c.lora_rank, 16);
    assert_true(c.lora_alpha == 8.0);
    ft_run_config_free(&c);

    /* lists override like eval_prompts; the last one wins */
    char *targets[] = {"lora.targets=[\"k_proj\"]", "lora.targets=[\"o_proj\", \"gate_proj\"]",
                       "lora.dropout=0.1", "model.adapter=/scratch/peft dir"};
    load_ok(&c, "lora.cfg", 4, targets);
    assert_int_equal(c.lora_rank, 8);
    assert_true(c.lora_alpha == 12.0);
    assert_true(c.lora_dropout == 0.1);
    assert_string_equal(c.lora_targets[0], "o_proj");
    assert_string_equal(c.lora_targets[1], "gate_proj");
    assert_null(c.lora_targets[2]);
    assert_string_equal(c.model_adapter, "/scratch/peft dir");
    assert_string_equal(ft_run_config_where(&c, "lora.targets"),
                        "command line: lora.targets=[\"o_proj\", \"gate_proj\"]");
    ft_run_config_free(&c);

    /* lora.rank=0 switches a file's group off: every lora field back to zero */
    const char *group = "data = { train = \"t\"; };\n"
                        "lora = { rank = 8; alpha = 4.0; dropout = 0.5; targets = [\"q_proj\"]; };\n";
    char *off[] = {"lora.rank=0"};
    assert_int_equal(load_text_overrides(&c, group, 1, off, &err), 0);
    assert_lora_off(&c);
    ft_run_config_free(&c);

    /* both keys in conflict on the command line: the adapter is named */
    char *both[] = {"lora.rank=0", "model.adapter=a"};
    assert_int_equal(load_text_overrides(&c, group, 2, both, &err), -1);
    assert_string_equal(err.msg, "command line: model.adapter=a: needs LoRA, which lora.rank = 0 "
                                 "turns off");
    ft_run_config_free(&c);

    /* LoRA with SGD and with the bf16 recipe: allowed */
    char *recipe[] = {"optimizer.type=sgd", "precision=bf16", "model.param_dtype=bf16"};
    load_ok(&c, "lora.cfg", 3, recipe);
    assert_int_equal(c.lora_rank, 8);
    assert_int_equal(c.optimizer.type, FT_OPT_SGD);
    assert_int_equal(c.param_dtype, FT_DTYPE_BF16);
    ft_run_config_free(&c);

    /* with model.weights (the family from the file), the lora keys are still the config's */
    char *weights[] = {"lora.rank=2"};
    load_ok(&c, "weights.cfg", 1, weights);
    assert_int_equal(c.lora_rank, 2);
    assert_true(c.lora_alpha == 4.0);
    ft_run_config_free(&c);
}

/* --help-config (the reference) lists the lora keys with their defaults and ranges. */
static void test_lora_reference(void **state)
{
    (void)state;
    char *ref = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&ref, &len);
    assert_non_null(m);
    ft_run_config_print_reference(m);
    fclose(m);
    static const char *const rows[] = {
        "| `lora.rank` | integer | `16` | >= 0 | ",
        "| `lora.alpha` | float | `2 x lora.rank` | > 0 | ",
        "| `lora.dropout` | float | `0.0` | [0, 1) | ",
        "| `lora.targets` | list of strings | `every projection of the family` | non-empty strings | ",
        "| `model.adapter` | string | none | non-empty | ",
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (!strstr(ref, rows[i]))
            fail_msg("the reference lacks the row starting %s", rows[i]);
    free(ref);
}

/* @include relative to the main file's directory, and errors inside an included file naming
 * it (libconfig parses the text ftmpi read, so these must keep working). */
static void test_include(void **state)
{
    (void)state;
    ft_run_config c;
    ft_error err;
    char inc[] = "/tmp/ftmpi_config_inc_XXXXXX";
    int fd = mkstemp(inc);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("data = { train = \"from_include.h5\"; };\n", f);
    fclose(f);
    char line[128];
    snprintf(line, sizeof line, "@include \"%s\"\n", strrchr(inc, '/') + 1);
    assert_int_equal(load_text(&c, line, &err), 0);
    assert_string_equal(c.train_data, "from_include.h5");
    ft_run_config_free(&c);

    f = fopen(inc, "w");
    fputs("data = { train = \"t\"; };\nseed = \"x\";\n", f);
    fclose(f);
    assert_int_equal(load_text(&c, line, &err), -1);
    char want[64];
    snprintf(want, sizeof want, "%s:2: seed", strrchr(inc, '/') + 1); /* as written */
    if (!strstr(err.msg, want))
        fail_msg("expected '%s' in: %s", want, err.msg);
    ft_run_config_free(&c);

    /* a file that includes itself (8 times): refused at once, not followed 8^10 times */
    f = fopen(inc, "w");
    for (int i = 0; i < 8; i++)
        fprintf(f, "%s", line);
    fclose(f);
    assert_int_equal(load_text(&c, line, &err), -1);
    if (!strstr(err.msg, "includes itself (an @include cycle)") || !strstr(err.msg, inc))
        fail_msg("expected the cycle naming %s: %s", inc, err.msg);
    ft_run_config_free(&c);
    remove(inc);
}

/* libconfig's scanner is quadratic in a string's length (a 10 MB string took over 30 s):
 * files over FT_CONFIG_MAX_BYTES, their @includes and long overrides are refused at once,
 * with one line naming the file (issue #14, fuzzing). */
static void test_size_limit(void **state)
{
    (void)state;
    ft_run_config c;
    ft_error err;
    size_t n = FT_CONFIG_MAX_BYTES + 2;
    char *big = malloc(n + 32);
    assert_non_null(big);
    /* one string literal of FT_CONFIG_MAX_BYTES bytes, the pathological case */
    strcpy(big, "data = { train = \"");
    size_t at = strlen(big);
    memset(big + at, 'a', n - at);
    strcpy(big + n, "\"; };\n");
    double t0 = (double)clock() / CLOCKS_PER_SEC;
    assert_int_equal(load_text(&c, big, &err), -1);
    assert_true((double)clock() / CLOCKS_PER_SEC - t0 < 1.0);
    assert_non_null(strstr(err.msg, "/tmp/ftmpi_config_test_"));
    assert_non_null(strstr(err.msg, "larger than 1048576 bytes"));
    assert_null(strchr(err.msg, '\n'));
    ft_run_config_free(&c);

    /* the same through @include: the message names the including line and the big file */
    char inc[] = "/tmp/ftmpi_config_inc_XXXXXX";
    int fd = mkstemp(inc);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(big, f);
    fclose(f);
    char line[128];
    snprintf(line, sizeof line, "@include \"%s\"\n", inc);
    assert_int_equal(load_text(&c, line, &err), -1);
    assert_non_null(strstr(err.msg, ":5: @include: "));
    assert_non_null(strstr(err.msg, inc));
    assert_non_null(strstr(err.msg, "larger than"));
    ft_run_config_free(&c);
    remove(inc);

    /* an @include of something that is not a regular file would block or never end */
    assert_int_equal(load_text(&c, "@include \"/dev/zero\"\n", &err), -1);
    assert_non_null(strstr(err.msg, "/dev/zero: is a character device, not a regular file"));
    ft_run_config_free(&c);

    /* a file just under the limit still loads */
    memset(big, ' ', FT_CONFIG_MAX_BYTES - 2 * sizeof minimal_head);
    strcpy(big + FT_CONFIG_MAX_BYTES - 2 * sizeof minimal_head, "\ndata = { train = \"t\"; };\n");
    assert_int_equal(load_text(&c, big, &err), 0);
    ft_run_config_free(&c);

    /* an override value over FT_CONFIG_MAX_OVERRIDE */
    char *kv = malloc(FT_CONFIG_MAX_OVERRIDE + 32);
    assert_non_null(kv);
    strcpy(kv, "data.train=");
    memset(kv + 11, 'x', FT_CONFIG_MAX_OVERRIDE + 1);
    kv[11 + FT_CONFIG_MAX_OVERRIDE + 1] = '\0';
    char *ov[] = { kv };
    assert_int_equal(ft_run_config_load(&c, fixture("minimal.cfg"), 1, ov, &err), -1);
    assert_non_null(strstr(err.msg, "command line: data.train=xxx"));
    assert_non_null(strstr(err.msg, "value longer than 65536 bytes"));
    ft_run_config_free(&c);
    free(kv);
    free(big);
}

static void test_integer_literals(void **state)
{
    (void)state;
    ft_run_config c;
    ft_error err;

    /* the name inside a string on the same line is not the setting */
    assert_int_equal(load_text(&c, "data = { train = \"a seed = 5.h5\"; }; seed = 7;\n", &err), 0);
    assert_int_equal(c.seed, 7);
    ft_run_config_free(&c);

    assert_int_equal(load_text(&c, "data = { train = \"t\"; }; seed = 5000000000L;\n", &err), 0);
    assert_int_equal(c.seed, 5000000000L);
    ft_run_config_free(&c);

    /* the value on the line after the name */
    assert_int_equal(load_text(&c, "data = { train = \"t\"; };\nseed =\n  5000000000;\n", &err), -1);
    assert_non_null(strstr(err.msg, ":6: seed: 5000000000 does not fit in 32 bits"));
    ft_run_config_free(&c);

    assert_int_equal(load_text(&c, "data = { train = \"t\"; }; seed = 0xFFFFFFFF;\n", &err), -1);
    assert_non_null(strstr(err.msg, "seed: 0xFFFFFFFF does not fit in 32 bits"));
    ft_run_config_free(&c);

    assert_int_equal(load_text(&c, "data = { train = \"t\"; }; seed = 99999999999999999999L;\n", &err), -1);
    assert_non_null(strstr(err.msg, "does not fit in a 64-bit integer"));
    ft_run_config_free(&c);

    /* 2^31 - 1 is the largest plain literal */
    assert_int_equal(load_text(&c, "data = { train = \"t\"; }; seed = 2147483647;\n", &err), 0);
    assert_int_equal(c.seed, 2147483647L);
    ft_run_config_free(&c);
}

/* ------------------------------------------------------------------ the schema */

static void test_schema_consistent(void **state)
{
    (void)state;
    for (size_t i = 0; i < ft_config_n_keys; i++) {
        const ft_config_key *k = &ft_config_keys[i];
        assert_non_null(k->path);
        if (!k->doc || !k->doc[0])
            fail_msg("%s: no doc", k->path);
        for (size_t j = 0; j < i; j++)
            if (strcmp(ft_config_keys[j].path, k->path) == 0)
                fail_msg("%s: listed twice", k->path);
        /* a key cannot also be a group */
        if (ft_config_is_group(k->path))
            fail_msg("%s: is both a key and a group", k->path);
        /* an optional group is all or nothing: one of its keys defaulted while the
         * others stay zero would be neither on nor off */
        if (k->flags & FT_KEY_OPTIONAL_GROUP) {
            const char *dot = strrchr(k->path, '.');
            if (!dot)
                fail_msg("%s: an optional-group key outside a group", k->path);
            for (size_t j = 0; j < ft_config_n_keys; j++)
                if (strncmp(ft_config_keys[j].path, k->path, (size_t)(dot - k->path) + 1) == 0 &&
                    !(ft_config_keys[j].flags & FT_KEY_OPTIONAL_GROUP))
                    fail_msg("%s: in %s's optional group without the flag", ft_config_keys[j].path,
                             k->path);
        }
        if (k->flags & (FT_KEY_REQUIRED | FT_KEY_SHAPE_REQUIRED | FT_KEY_DERIVED))
            continue;
        /* every default passes its own range check */
        char why[512];
        ft_config_value v = {.i = k->idef, .f = k->fdef, .s = k->sdef};
        switch (k->type) {
        case FT_KEY_INT:
        case FT_KEY_INT64:
            if (k->idef < k->imin || k->idef > k->imax)
                fail_msg("%s: default %lld out of range", k->path, k->idef);
            break;
        case FT_KEY_FLOAT: {
            bool lo = (k->flags & FT_KEY_MIN_OPEN) ? k->fdef > k->fmin : k->fdef >= k->fmin;
            bool hi = (k->flags & FT_KEY_MAX_OPEN) ? k->fdef < k->fmax : k->fdef <= k->fmax;
            if (!lo || !hi)
                fail_msg("%s: default %g out of range", k->path, k->fdef);
            break;
        }
        case FT_KEY_ENUM:
            assert_non_null(k->choices);
            assert_non_null(k->choices[k->idef]);
            break;
        case FT_KEY_STRING:
            if (k->sdef && ft_config_convert_string(k, k->sdef, &v, why, sizeof why) < 0)
                fail_msg("%s: default: %s", k->path, why);
            break;
        case FT_KEY_BOOL:
        case FT_KEY_STRINGS:
            break;
        }
    }
}

/* Reads $FT_SRCDIR/doc/config.md into a malloc'd string. */
static char *read_doc(void)
{
    const char *src = getenv("FT_SRCDIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/doc/config.md", src ? src : ".");
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot open %s", path);
    char *doc = calloc(1, 1 << 20);
    assert_non_null(doc);
    size_t n = fread(doc, 1, (1 << 20) - 1, f);
    fclose(f);
    doc[n] = '\0';
    return doc;
}

/* doc/config.md holds the output of ft_run_config_print_reference verbatim, so the
 * reference cannot drift from the table. */
static void test_doc_has_reference(void **state)
{
    (void)state;
    char *ref = NULL;
    size_t ref_len = 0;
    FILE *m = open_memstream(&ref, &ref_len);
    assert_non_null(m);
    ft_run_config_print_reference(m);
    fclose(m);

    char *doc = read_doc();
    if (!strstr(doc, ref))
        fail_msg("doc/config.md does not contain the current reference table; regenerate it "
                 "with ft_run_config_print_reference:\n%s",
                 ref);
    free(doc);
    free(ref);
}

/* The config examples of doc/config.md (the code blocks between "## Example" and
 * "## Syntax") load without error. */
static void test_doc_examples_load(void **state)
{
    (void)state;
    char *doc = read_doc();
    char *p = strstr(doc, "## Example");
    char *stop = strstr(doc, "## Syntax");
    assert_non_null(p);
    assert_non_null(stop);
    int blocks = 0;
    while ((p = strstr(p, "```\n")) && p < stop) {
        char *body = p + 4;
        char *end = strstr(body, "```\n");
        assert_non_null(end);
        char path[] = "/tmp/ftmpi_doc_example_XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        FILE *f = fdopen(fd, "w");
        fwrite(body, 1, (size_t)(end - body), f);
        fclose(f);
        ft_run_config c;
        ft_error err;
        ft_error_clear(&err);
        int rc = ft_run_config_load(&c, path, 0, NULL, &err);
        remove(path);
        if (rc != 0)
            fail_msg("example %d of doc/config.md: %s", blocks + 1, err.msg);
        ft_run_config_free(&c);
        blocks++;
        p = end + 4;
    }
    assert_int_equal(blocks, 4);
    free(doc);
}

static void test_free_is_safe(void **state)
{
    (void)state;
    ft_run_config c;
    memset(&c, 0, sizeof c);
    ft_run_config_free(&c);
    ft_run_config_free(&c);
    ft_run_config_free(NULL);
    load_ok(&c, "full.cfg", 0, NULL);
    ft_run_config_free(&c);
    ft_run_config_free(&c); /* free zeroes cfg, so twice is harmless */
}

static void test_suggest(void **state)
{
    (void)state;
    char s[128];
    assert_true(ft_config_suggest("optimzer", s, sizeof s));
    assert_string_equal(s, "optimizer");
    assert_true(ft_config_suggest("model.hiden_size", s, sizeof s));
    assert_string_equal(s, "model.hidden_size");
    assert_true(ft_config_suggest("weights", s, sizeof s));
    assert_string_equal(s, "model.weights");
    assert_true(ft_config_suggest("type", s, sizeof s));
    assert_string_equal(s, "optimizer.type");
    /* a key cut short: the key it begins, not a short key of a similar length */
    assert_true(ft_config_suggest("optimizer.warmup", s, sizeof s));
    assert_string_equal(s, "optimizer.warmup_steps");
    assert_false(ft_config_suggest("completely_unrelated_thing", s, sizeof s));
}

/* ------------------------------------------------------------------ model shape */

static ft_model_config llama(int V, int H, int I, int L, int nh, int nkv, bool tied)
{
    ft_model_config c;
    memset(&c, 0, sizeof c);
    c.vocab_size = V;
    c.hidden_size = H;
    c.intermediate_size = I;
    c.num_hidden_layers = L;
    c.num_attention_heads = nh;
    c.num_key_value_heads = nkv;
    c.head_dim = H / nh;
    c.max_position_embeddings = 8192;
    c.rms_norm_eps = 1e-5;
    c.rope_theta = 500000.0;
    c.tie_word_embeddings = tied;
    c.bos_token_id = -1;
    c.eos_token_id = -1;
    return c;
}

static void test_param_count(void **state)
{
    (void)state;
    ft_model_config l3_8b = llama(128256, 4096, 14336, 32, 32, 8, false);
    ft_model_config l2_7b = llama(32000, 4096, 11008, 32, 32, 32, false);
    ft_model_config l3_70b = llama(128256, 8192, 28672, 80, 64, 8, false);
    assert_true(ft_model_config_param_count(&l3_8b) == 8030261248LL);
    assert_true(ft_model_config_param_count(&l2_7b) == 6738415616LL);
    assert_true(ft_model_config_param_count(&l3_70b) == 70553706496LL);
    /* tying drops exactly one V x H matrix */
    ft_model_config tied = l3_8b;
    tied.tie_word_embeddings = true;
    assert_true(ft_model_config_param_count(&tied) == 8030261248LL - 128256LL * 4096);
    ft_error err;
    assert_int_equal(ft_model_config_validate(&l3_8b, &err), 0);
    assert_int_equal(ft_model_config_validate(&l2_7b, &err), 0);
    assert_int_equal(ft_model_config_validate(&l3_70b, &err), 0);
}

static void test_model_validate(void **state)
{
    (void)state;
    ft_error err;
    ft_model_config c = llama(512, 256, 688, 4, 8, 2, false);
    assert_int_equal(ft_model_config_validate(&c, &err), 0);

    ft_model_config b = c;
    b.vocab_size = 0;
    assert_int_equal(ft_model_config_validate(&b, &err), -1);
    assert_string_equal(err.msg, "vocab_size: 0 must be > 0");

    b = c;
    b.num_key_value_heads = 3;
    assert_int_equal(ft_model_config_validate(&b, &err), -1);
    assert_non_null(strstr(err.msg, "num_key_value_heads: 3 does not divide"));

    b = c;
    b.head_dim = 31;
    assert_int_equal(ft_model_config_validate(&b, &err), -1);
    assert_non_null(strstr(err.msg, "head_dim: 31 must be even"));

    b = c;
    b.rms_norm_eps = NAN;
    assert_int_equal(ft_model_config_validate(&b, &err), -1);
    assert_non_null(strstr(err.msg, "rms_norm_eps:"));

    b = c;
    b.rope_theta = 0;
    assert_int_equal(ft_model_config_validate(&b, &err), -1);
    assert_non_null(strstr(err.msg, "rope_theta:"));

    b = c;
    b.eos_token_id = 512;
    assert_int_equal(ft_model_config_validate(&b, &err), -1);
    assert_non_null(strstr(err.msg, "eos_token_id: 512 is not a token id"));

    b = c;
    b.rope_scaling = (ft_rope_scaling){FT_ROPE_SCALING_LLAMA3, 8.0, 1.0, 4.0, 8192};
    assert_int_equal(ft_model_config_validate(&b, &err), 0);
    b.rope_scaling.high_freq_factor = 1.0;
    assert_int_equal(ft_model_config_validate(&b, &err), -1);
    assert_non_null(strstr(err.msg, "rope_scaling.high_freq_factor:"));
    b.rope_scaling.high_freq_factor = 4.0;
    b.rope_scaling.factor = 0.5;
    assert_int_equal(ft_model_config_validate(&b, &err), -1);
    assert_non_null(strstr(err.msg, "rope_scaling.factor:"));
    b.rope_scaling.factor = 8.0;
    b.rope_scaling.original_max_position_embeddings = 0;
    assert_int_equal(ft_model_config_validate(&b, &err), -1);
    assert_non_null(strstr(err.msg, "rope_scaling.original_max_position_embeddings:"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_config),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_weights_leave_model_zeroed),
        cmocka_unit_test(test_overrides),
        cmocka_unit_test(test_override_fills_required),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_bad_fixtures_all_used),
        cmocka_unit_test(test_integer_literals),
        cmocka_unit_test(test_schema_consistent),
        cmocka_unit_test(test_doc_has_reference),
        cmocka_unit_test(test_doc_examples_load),
        cmocka_unit_test(test_free_is_safe),
        cmocka_unit_test(test_include),
        cmocka_unit_test(test_precision_recipe),
        cmocka_unit_test(test_lora_defaults),
        cmocka_unit_test(test_lora_full),
        cmocka_unit_test(test_lora_overrides),
        cmocka_unit_test(test_lora_reference),
        cmocka_unit_test(test_size_limit),
        cmocka_unit_test(test_suggest),
        cmocka_unit_test(test_param_count),
        cmocka_unit_test(test_model_validate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
