/* ftmpi-generate internals shared by its files: the command line
 * (ftmpi_generate_cli.c), a LoRA MODEL merged before the session opens
 * (ftmpi_generate_lora.c) and batch mode (ftmpi_generate_batch.c); ftmpi_generate.c
 * runs them. */
#ifndef FT_TOOLS_FTMPI_GENERATE_H
#define FT_TOOLS_FTMPI_GENERATE_H

#include <stdbool.h>
#include <stddef.h>

#include "generate/session.h"
#include "util/error.h"

/* The parsed command line: the session's options plus what the tool itself does with
 * the prompt and the output. Its strings are borrowed: from argv, except s.model_path
 * once gen_lora_merge_for_session points it at the caller's buffer. */
typedef struct gen_cli {
    ft_gen_session_options s;
    const char *prompt;
    const char *system, *input;
    bool ids_mode, echo, verbose;
    bool template_given, no_thinking, prompt_ids;
    const char *prompts_path, *out_path;
    const char *device;
} gen_cli;

/* Parses argv into *c: 0 to run, 1 after --help/--version, -1 or -3 on a usage error,
 * -2 on a runtime error (every message printed). */
int gen_cli_parse(int argc, char **argv, gen_cli *c);

/* Collective: when MODEL is a LoRA checkpoint, merges it into a temporary weights file
 * `merged` and points c at it (merged[0] stays 0 otherwise); rank 0's outcome. */
int gen_lora_merge_for_session(gen_cli *c, int rank, char *merged, size_t len,
                               ft_error *err);

/* Collective: batch mode (generate/batch.h) over MPI_COMM_WORLD with session s; *tokens
 * is this rank's count of generated tokens, *report as ft_batch_run's. */
int gen_batch_run(const gen_cli *c, ft_gen_session *s, long *tokens, bool *report,
                  ft_error *err);

#endif
