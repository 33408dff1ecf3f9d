/* Fuzzer: the JSON files of a Hugging Face model directory that ftmpi-convert reads:
 * config.json -> ft_hf_config_read (model shape, rope scaling, token ids) and
 * model.safetensors.index.json -> ft_st_index_read (weight map, shard names). The same
 * bytes go to both: each is a JSON object and the mutations of one are useful to the other. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "io/hf_config.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ft_error err;
    const char *path = fuzz_write_file("config.json", data, size);
    ft_model_config c;
    ft_hf_config_info info;
    (void)ft_hf_config_read(path, &c, &info, &err);

    path = fuzz_write_file("model.safetensors.index.json", data, size);
    ft_st_index idx;
    if (ft_st_index_read(&idx, path, &err) == 0) {
        for (int i = 0; i < idx.n; i++) {
            /* shard names must be plain file names: nothing that leaves the directory */
            if (strchr(idx.files[i], '/') || strcmp(idx.files[i], "..") == 0 ||
                strcmp(idx.files[i], ".") == 0 || idx.files[i][0] == '\0') {
                fprintf(stderr, "index accepted shard name '%s'\n", idx.files[i]);
                abort();
            }
            (void)ft_st_index_lookup(&idx, idx.names[i]);
        }
        ft_st_index_free(&idx);
    }
    return 0;
}
