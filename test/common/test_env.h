/* Helpers shared by the core tests: locating test data, a tiny model on the CPU. */
#ifndef FT_TEST_ENV_H
#define FT_TEST_ENV_H

#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "model/layout.h"
#include "model/model.h"
#include "shard/engine.h"

/* $FT_SRCDIR/rel (the harness sets FT_SRCDIR; falls back to "."). */
static inline void test_data_path(char *buf, size_t len, const char *rel)
{
    const char *src = getenv("FT_SRCDIR");
    snprintf(buf, len, "%s/%s", src ? src : ".", rel);
}

#define TEST_CHECK_OK(call, errp)                                                    \
    do {                                                                             \
        if ((call) != 0) {                                                           \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,    \
                    (errp)->msg);                                                    \
            fail();                                                                  \
        }                                                                            \
    } while (0)

/* The tiny shape the unit tests use: GQA, untied, theta != 10000. */
static inline ft_model_config test_tiny_config(void)
{
    ft_model_config c = { .vocab_size = 37, .hidden_size = 32, .intermediate_size = 48,
                          .num_hidden_layers = 2, .num_attention_heads = 4,
                          .num_key_value_heads = 2, .head_dim = 8,
                          .max_position_embeddings = 64, .rms_norm_eps = 1e-5,
                          .rope_theta = 30000.0, .bos_token_id = -1, .eos_token_id = -1 };
    return c;
}

#endif
