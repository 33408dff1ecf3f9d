#include "generate/session.h"
#include "io/tok_fingerprint.h"

#include <stdlib.h>
#include <string.h>

struct ft_gen_session {
    ft_gen_session_options opt;
    ft_backend *be;
    ft_gen_params *params;
    ft_param_source src;
    ft_tokenizer *tok;
    ft_text_codec codec;
    bool has_codec;
    ft_sampler *sampler;
    ft_decoder *dec;              /* created on first use, regrown for longer requests */
    int32_t stops[FT_GEN_MAX_STOP + 2];
    int n_stop;
};

static void add_stop(ft_gen_session *s, int32_t id)
{
    if (id < 0 || s->n_stop >= FT_GEN_MAX_STOP + 2)
        return;
    for (int i = 0; i < s->n_stop; i++)
        if (s->stops[i] == id)
            return;
    s->stops[s->n_stop++] = id;
}

/* A tokenizer whose ids fit the model's vocabulary can still be another model's: the
 * answer would be nonsense (or nothing) with exit 0. The model file records the
 * fingerprint of the tokenizer it was imported or trained with (io/tok_fingerprint.h). */
static int check_tokenizer_identity(ft_gen_session *s, ft_error *err)
{
    const char *model_fp = s->params->tokenizer_fingerprint;
    char fp[FT_TOK_FINGERPRINT_LEN];
    if (!model_fp[0] || s->opt.allow_tokenizer_mismatch)
        return 0;
    if (ft_tok_fingerprint_file(s->opt.tokenizer_path, fp, err))
        return -1;
    if (!ft_tok_fingerprint_conflict(model_fp, fp))
        return 0;
    ft_fail(err, "--tokenizer %s is not the tokenizer of %s (tokenizer fingerprint %s, the "
            "model records %s); use the model's own tokenizer, or --allow-tokenizer-mismatch "
            "to go on anyway", s->opt.tokenizer_path, s->params->path, fp, model_fp);
    err->flags |= FT_ERR_CONFIG;
    return -1;
}

static int setup_codec(ft_gen_session *s, ft_error *err)
{
    const ft_model_config *c = &s->params->layout.config;
    if (s->opt.byte_tokens) {
        if (c->vocab_size < FT_BYTE_EOS + 1)
            return ft_fail(err, "--byte-tokens needs a model with ids 0..257 (bytes, BOS 256, "
                           "EOS 257); this model's vocab_size is %d", c->vocab_size);
        ft_text_codec_bytes(&s->codec);
        s->has_codec = true;
    } else if (s->opt.tokenizer_path) {
        if (ft_tokenizer_load(s->opt.tokenizer_path, &s->tok, err))
            return -1;
        if (ft_tokenizer_vocab_size(s->tok) > c->vocab_size)
            return ft_fail(err, "%s: the tokenizer has %d ids but the model's vocab_size is %d; "
                           "use the model's own tokenizer", s->opt.tokenizer_path,
                           ft_tokenizer_vocab_size(s->tok), c->vocab_size);
        if (check_tokenizer_identity(s, err))
            return -1;
        ft_text_codec_tokenizer(&s->codec, s->tok, c->bos_token_id, c->eos_token_id);
        s->has_codec = true;
    }
    if (s->has_codec)
        s->codec.add_bos = !s->opt.no_bos;
    return 0;
}

static void setup_stops(ft_gen_session *s)
{
    s->n_stop = 0;
    if (s->opt.ignore_eos)
        return;
    if (s->opt.n_eos_override >= 0) {
        for (int i = 0; i < s->opt.n_eos_override; i++)
            add_stop(s, s->opt.eos_override[i]);
        return;
    }
    if (s->has_codec) {
        int32_t ids[FT_GEN_MAX_STOP];
        int n = ft_prompt_stop_ids(&s->codec, s->opt.tmpl, ids, FT_GEN_MAX_STOP);
        for (int i = 0; i < n; i++)
            add_stop(s, ids[i]);
    }
    add_stop(s, s->params->layout.config.eos_token_id);
}

int ft_gen_session_open(ft_gen_session **out, const ft_gen_session_options *o, ft_error *err)
{
    *out = NULL;
    ft_gen_session *s = calloc(1, sizeof *s);
    if (!s)
        return ft_fail(err, "out of host memory");
    s->opt = *o;
    int rc = o->use_cuda ? ft_backend_cuda_create(&s->be, o->cuda_device, err)
                         : ft_backend_cpu_create(&s->be, err);
    rc = rc || ft_gen_params_load(&s->params, o->model_path, o->params, o->allow_nonfinite,
                                    s->be, err);
    if (!rc) {
        s->src = ft_gen_params_source(s->params);
        rc = setup_codec(s, err) ||
             ft_sampler_create(&s->sampler, &o->sampler, s->params->layout.config.vocab_size,
                               err);
    }
    if (rc) {
        ft_gen_session_close(s);
        return -1;
    }
    setup_stops(s);
    *out = s;
    return 0;
}

void ft_gen_session_close(ft_gen_session *s)
{
    if (!s)
        return;
    ft_decoder_free(s->dec);
    ft_sampler_free(s->sampler);
    ft_tokenizer_free(s->tok);
    ft_gen_params_free(s->params);
    ft_backend_destroy(s->be);
    free(s);
}

bool ft_gen_session_has_text(const ft_gen_session *s) { return s->has_codec; }
const ft_model_config *ft_gen_session_config(const ft_gen_session *s)
{
    return &s->params->layout.config;
}
const char *ft_gen_session_model_file(const ft_gen_session *s) { return s->params->path; }
const char *ft_gen_session_param_group(const ft_gen_session *s) { return s->params->group; }

void ft_gen_output_free(ft_gen_output *o)
{
    free(o->prompt_ids);
    free(o->ids);
    free(o->text);
    memset(o, 0, sizeof *o);
}

/* A decoder whose cache holds `need` positions (capped at the model's context); an
 * existing smaller one is replaced. */
static int ensure_decoder(ft_gen_session *s, int need, ft_error *err)
{
    const int max_pos = s->params->layout.config.max_position_embeddings;
    if (need > max_pos)
        need = max_pos;
    if (s->dec && ft_decoder_capacity(s->dec) >= need)
        return 0;
    ft_decoder_free(s->dec);
    s->dec = NULL;
    ft_decoder_options dopt = { .capacity = need, .max_chunk = s->opt.max_chunk,
                                .dtype = s->params->dtype };
    return ft_decoder_create(&s->dec, &s->params->layout, s->be, &s->src, &dopt, err);
}

int ft_gen_session_run_ids(ft_gen_session *s, const int32_t *ids, int n, uint64_t stream,
                           ft_gen_output *out, ft_error *err)
{
    memset(out, 0, sizeof *out);
    const int max_pos = s->params->layout.config.max_position_embeddings;
    if (n < 1)
        return ft_fail(err, "the prompt has no tokens");
    if (n > max_pos)
        return ft_fail(err, "the prompt has %d tokens; the model's context "
                       "(max_position_embeddings) is %d", n, max_pos);
    long need = (long)n + s->opt.max_new_tokens;
    if (ensure_decoder(s, need > max_pos ? max_pos : (int)need, err))
        return -1;
    out->prompt_ids = malloc((size_t)n * sizeof(int32_t));
    if (!out->prompt_ids)
        return ft_fail(err, "out of host memory");
    memcpy(out->prompt_ids, ids, (size_t)n * sizeof(int32_t));
    out->n_prompt = n;
    ft_gen_options go = { .max_new_tokens = s->opt.max_new_tokens, .stop_ids = s->stops,
                          .n_stop = s->n_stop };
    ft_gen_result r;
    int rc = ft_generate(s->dec, s->sampler, ids, n, &go, stream, &r, err);
    if (!rc) {
        out->ids = r.ids;
        out->n = r.n;
        out->stop = r.stop;
        if (s->has_codec)
            rc = ft_completion_decode(&s->codec, r.ids, r.n, &out->text, &out->text_len, err);
    }
    if (rc)
        ft_gen_output_free(out);
    return rc;
}

int ft_gen_session_run(ft_gen_session *s, const char *prompt, const char *input,
                       const char *system, uint64_t stream, ft_gen_output *out, ft_error *err)
{
    memset(out, 0, sizeof *out);
    if (!s->has_codec)
        return ft_fail(err, "text prompts need --tokenizer FILE or --byte-tokens (or give ids "
                       "with --ids)");
    int32_t *ids;
    int n;
    if (ft_prompt_encode(&s->codec, s->opt.tmpl, system, prompt, input, &ids, &n, err))
        return -1;
    int rc = ft_gen_session_run_ids(s, ids, n, stream, out, err);
    free(ids);
    return rc;
}
