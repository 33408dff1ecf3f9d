/* Test helper: write_weights OUT.h5 VOCAB [bf16]: a weights file holding a random
 * tiny Llama model (the trainer's initialisation, std 0.2) with the given vocabulary,
 * BOS 1 and EOS 2, so that the command-line tests can pair a model with any
 * tokenizer. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/h5file.h"
#include "io/weights.h"
#include "model/init.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: write_weights OUT.h5 VOCAB [bf16]\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    ft_model_config c = { .vocab_size = atoi(argv[2]), .hidden_size = 32,
                          .intermediate_size = 48, .num_hidden_layers = 2,
                          .num_attention_heads = 4, .num_key_value_heads = 2, .head_dim = 8,
                          .max_position_embeddings = 512, .rms_norm_eps = 1e-5,
                          .rope_theta = 10000.0, .bos_token_id = 1, .eos_token_id = 2 };
    const ft_file_dtype dt = argc > 3 && strcmp(argv[3], "bf16") == 0 ? FT_FILE_BF16 : FT_FILE_F32;
    ft_model_layout l;
    ft_h5file f;
    ft_error err;
    int rc = ft_model_layout_build(&l, &c, &err) || ft_h5_create(&f, argv[1], MPI_COMM_SELF, &err);
    if (!rc) {
        rc = ft_h5_write_kind(&f, "weights", &err) || ft_weights_write_config(&f, &c, &err) ||
             ft_weights_create_tensors(&f, "/model", &l, dt, &err);
        for (int u = 0; u < l.n_units && !rc; u++) {
            float *buf = malloc(l.units[u].numel * sizeof(float));
            ft_model_init_range(&l.units[u], 0, l.units[u].numel, 1, 0.2, buf);
            rc = ft_weights_write_range(&f, "/model", &l.units[u], 0, l.units[u].numel, buf, &err);
            free(buf);
        }
        rc = ft_h5_close(&f, rc ? NULL : &err) || rc;
    }
    if (rc)
        fprintf(stderr, "write_weights: %s\n", err.msg);
    MPI_Finalize();
    return rc ? 1 : 0;
}
