/* Fuzzer: the checkpoint directory's `latest` pointer -> ft_checkpoint_resolve with
 * resume = "auto". Whatever the file holds, the result is an error or a path inside the
 * checkpoint directory. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "train/checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_write_file("latest", data, size);
    ft_run_config cfg;
    memset(&cfg, 0, sizeof cfg);
    char dir[1024], resume[] = "auto", cfg_path[] = "fuzz.cfg";
    snprintf(dir, sizeof dir, "%s", fuzz_tmpdir());
    cfg.checkpoint_dir = dir;
    cfg.resume = resume;
    cfg.path = cfg_path;
    char *path = NULL;
    ft_error err;
    if (ft_checkpoint_resolve(&cfg, &path, &err) == 0 && path) {
        size_t n = strlen(dir);
        if (strncmp(path, dir, n) != 0 || path[n] != '/' || strchr(path + n + 1, '/')) {
            fprintf(stderr, "latest resolved to '%s', outside %s\n", path, dir);
            abort();
        }
    }
    free(path);
    return 0;
}
