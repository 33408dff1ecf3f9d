#include "generate/eval_samples.h"

#include <stdlib.h>
#include <string.h>

#include "generate/decoder.h"
#include "generate/generate.h"
#include "generate/prompt.h"
#include "generate/sampler.h"

enum { MAX_STOP = 16 };

struct ft_eval_samples {
    ft_tokenizer *tok;     /* NULL with byte tokens */
    ft_text_codec codec;
    ft_template tmpl;
    char *const *prompts;  /* the config's, NULL-terminated */
    int n_prompts;
    int32_t **ids;         /* [n_prompts] each prompt's encoded ids */
    int *n_ids;
    int longest;           /* ids of the longest prompt */
    int max_new_tokens;
    int32_t stops[MAX_STOP + 1];
    int n_stop;
    ft_dtype weights;      /* storage of the parameters the engine's source hands out */
};

void ft_eval_samples_free(ft_eval_samples *s)
{
    if (!s)
        return;
    for (int i = 0; s->ids && i < s->n_prompts; i++)
        free(s->ids[i]);
    free(s->ids);
    free(s->n_ids);
    ft_tokenizer_free(s->tok);
    free(s);
}

static int open_codec(ft_eval_samples *s, const ft_run_config *cfg, const ft_model_config *m,
                      ft_error *err)
{
    if (strcmp(cfg->eval_tokenizer, "bytes") == 0) {
        if (m->vocab_size < FT_BYTE_EOS + 1)
            return ft_fail(err, "eval_tokenizer \"bytes\" needs a model with ids 0..257 (bytes, "
                           "BOS 256, EOS 257); this model's vocab_size is %d", m->vocab_size);
        ft_text_codec_bytes(&s->codec);
        return 0;
    }
    if (ft_tokenizer_load(cfg->eval_tokenizer, &s->tok, err))
        return ft_fail_context(err, "eval_tokenizer");
    if (ft_tokenizer_vocab_size(s->tok) > m->vocab_size)
        return ft_fail(err, "eval_tokenizer %s has %d ids but the model's vocab_size is %d; give "
                       "the model's own tokenizer.json", cfg->eval_tokenizer,
                       ft_tokenizer_vocab_size(s->tok), m->vocab_size);
    ft_text_codec_tokenizer(&s->codec, s->tok, m->bos_token_id, m->eos_token_id);
    return 0;
}

static int encode_prompts(ft_eval_samples *s, const ft_model_config *m, ft_error *err)
{
    s->ids = calloc((size_t)s->n_prompts, sizeof *s->ids);
    s->n_ids = calloc((size_t)s->n_prompts, sizeof *s->n_ids);
    if (!s->ids || !s->n_ids)
        return ft_fail(err, "out of host memory");
    for (int i = 0; i < s->n_prompts; i++) {
        if (ft_prompt_encode(&s->codec, s->tmpl, NULL, s->prompts[i], NULL, &s->ids[i],
                             &s->n_ids[i], err))
            return ft_fail_context(err, "eval_prompts[%d]", i + 1);
        /* the prompt and at least one new token must fit the context */
        if (s->n_ids[i] >= m->max_position_embeddings)
            return ft_fail(err, "eval_prompts[%d] has %d tokens; the model's context "
                           "(max_position_embeddings) is %d: shorten it", i + 1, s->n_ids[i],
                           m->max_position_embeddings);
        if (s->n_ids[i] > s->longest)
            s->longest = s->n_ids[i];
    }
    return 0;
}

static void add_stop(ft_eval_samples *s, int32_t id)
{
    for (int i = 0; i < s->n_stop; i++)
        if (s->stops[i] == id)
            return;
    if (id >= 0 && s->n_stop <= MAX_STOP)
        s->stops[s->n_stop++] = id;
}

int ft_eval_samples_create(ft_eval_samples **out, const ft_run_config *cfg,
                           const ft_model_config *model, ft_error *err)
{
    *out = NULL;
    ft_eval_samples *s = calloc(1, sizeof *s);
    if (!s)
        return ft_fail(err, "out of host memory");
    s->prompts = cfg->eval_prompts;
    while (s->prompts[s->n_prompts])
        s->n_prompts++;
    s->max_new_tokens = cfg->eval_max_new_tokens;
    s->weights = cfg->numerics.weights;
    int rc = ft_template_parse(cfg->eval_template, &s->tmpl) < 0
                 ? ft_fail(err, "%s: \"%s\" is not a template ftmpi-generate knows (see "
                           "doc/generate.md)", ft_run_config_where(cfg, "eval_template"),
                           cfg->eval_template)
                 : 0;
    rc = rc || open_codec(s, cfg, model, err) || encode_prompts(s, model, err);
    if (rc) {
        ft_eval_samples_free(s);
        return -1;
    }
    int32_t ids[MAX_STOP];
    const int n = ft_prompt_stop_ids(&s->codec, s->tmpl, ids, MAX_STOP);
    for (int i = 0; i < n; i++)
        add_stop(s, ids[i]);
    add_stop(s, model->eos_token_id);
    *out = s;
    return 0;
}

int ft_eval_samples_run(ft_eval_samples *s, long step, const ft_model_layout *layout,
                        ft_backend *be, const ft_param_source *src,
                        const ft_lora_adapters *adapters, ft_sample_sink sink, void *sink_ctx,
                        ft_error *err)
{
    const ft_model_config *m = &layout->config;
    long cap = (long)s->longest + s->max_new_tokens;
    if (cap > m->max_position_embeddings)
        cap = m->max_position_embeddings;
    ft_sampler *sampler = NULL;
    ft_decoder *dec = NULL;
    const ft_sampler_config greedy = { .temperature = 0.0, .top_k = 0, .top_p = 1.0 };
    /* the decoder reads the units as the source stores them: fp32, or the bf16 recipe's
     * working bits (the master's rounding), decoded in bf16 like ftmpi-generate --params
     * model does with a checkpoint's /model */
    const ft_decoder_options dopt = { .capacity = (int)cap, .max_chunk = 0,
                                      .dtype = s->weights };
    /* no prefetch plan: the decoder acquires units in its own order (a sharded engine
     * gathers each on demand, on every rank alike) */
    if (src->plan)
        src->plan(src->ctx, NULL, 0);
    if (adapters && adapters->src.plan)
        adapters->src.plan(adapters->src.ctx, NULL, 0);
    int rc = ft_sampler_create(&sampler, &greedy, m->vocab_size, err) ||
             ft_decoder_create(&dec, layout, be, src, &dopt, err) ||
             (adapters && ft_decoder_set_adapters(dec, adapters, err));
    const ft_gen_options go = { .max_new_tokens = s->max_new_tokens, .stop_ids = s->stops,
                                .n_stop = s->n_stop };
    for (int i = 0; i < s->n_prompts && !rc; i++) {
        ft_gen_result r;
        char *text = NULL;
        size_t len = 0;
        rc = ft_generate(dec, sampler, s->ids[i], s->n_ids[i], &go, (uint64_t)i, &r, err);
        if (rc)
            break;
        rc = ft_completion_decode(&s->codec, r.ids, r.n, &text, &len, err);
        if (!rc && sink)
            sink(sink_ctx, step, i, s->n_prompts, s->prompts[i], text, len,
                 ft_stop_reason_name(r.stop));
        free(text);
        free(r.ids);
    }
    ft_decoder_free(dec);
    ft_sampler_free(sampler);
    return rc ? -1 : 0;
}
