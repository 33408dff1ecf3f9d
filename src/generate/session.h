/* Everything one process needs to generate: backend, parameters, codec (tokenizer or
 * byte tokens), sampler and a decoder whose KV cache grows to the longest request.
 * The command line (src/tools/ftmpi_generate_cli.c) fills the options; batch mode and
 * single prompts both go through ft_gen_session_run.
 *
 * Ownership: the session owns all of it; ft_gen_session_close frees everything. */
#ifndef FT_GENERATE_SESSION_H
#define FT_GENERATE_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "generate/gen_params.h"
#include "generate/generate.h"
#include "generate/prompt.h"
#include "generate/sampler.h"

#define FT_GEN_MAX_STOP 16

typedef struct ft_gen_session_options {
    const char *model_path;       /* weights file, checkpoint file or checkpoint directory */
    ft_gen_param_group params;
    bool allow_nonfinite;         /* load parameters holding NaN/Inf (to inspect them) */
    const char *tokenizer_path;   /* NULL: byte tokens or ids */
    bool byte_tokens;
    ft_template tmpl;
    bool no_bos;
    int max_new_tokens;
    ft_sampler_config sampler;
    int n_eos_override;           /* -1: stop ids from tokenizer/config/template */
    int32_t eos_override[FT_GEN_MAX_STOP];
    bool ignore_eos;
    bool allow_tokenizer_mismatch; /* a tokenizer other than the one the model records */
    bool use_cuda;
    int cuda_device;
    int max_chunk;                /* prefill chunk (0: default) */
} ft_gen_session_options;

typedef struct ft_gen_session ft_gen_session;

/* A finished request: the prompt's ids, the completion's ids, its text, why it ended. */
typedef struct ft_gen_output {
    int32_t *prompt_ids;
    int n_prompt;
    int32_t *ids;
    int n;
    char *text;                   /* NULL when the session has no text codec */
    size_t text_len;
    ft_stop_reason stop;
} ft_gen_output;

int ft_gen_session_open(ft_gen_session **out, const ft_gen_session_options *o, ft_error *err);
void ft_gen_session_close(ft_gen_session *s);

/* Whether prompts can be text (a tokenizer or byte tokens). */
bool ft_gen_session_has_text(const ft_gen_session *s);
const ft_model_config *ft_gen_session_config(const ft_gen_session *s);
const char *ft_gen_session_model_file(const ft_gen_session *s);
const char *ft_gen_session_param_group(const ft_gen_session *s);

/* Text prompt through the template; input (alpaca) and system (chat) may be NULL. */
int ft_gen_session_run(ft_gen_session *s, const char *prompt, const char *input,
                       const char *system, uint64_t stream, ft_gen_output *out, ft_error *err);
/* Prompt given as ids, used verbatim (no template, no BOS). */
int ft_gen_session_run_ids(ft_gen_session *s, const int32_t *ids, int n, uint64_t stream,
                           ft_gen_output *out, ft_error *err);

void ft_gen_output_free(ft_gen_output *o);

#endif
