/* Fuzzer: the input file (libconfig) plus key=value overrides -> ft_run_config_load.
 *
 * Input: the config file's text, then optionally NUL-separated command-line overrides
 * ("...file...\0max_steps=3\0optimizer.lr=1e-4"), at most 8. The file is written to a
 * temporary directory, so relative @include names resolve there. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/run_config.h"
#include "fuzz_util.h"

#define MAX_OVERRIDES 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t file_len = nul ? (size_t)(nul - data) : size;
    const char *path = fuzz_write_file("input.cfg", data, file_len);

    /* the overrides, each its own NUL-terminated copy as argv would hold it */
    char *copy = NULL, *overrides[MAX_OVERRIDES];
    int n = 0;
    if (nul) {
        size_t rest = size - file_len - 1;
        copy = malloc(rest + 1);
        if (!copy)
            return 0;
        memcpy(copy, nul + 1, rest);
        copy[rest] = '\0';
        for (char *p = copy; n < MAX_OVERRIDES && p <= copy + rest; p += strlen(p) + 1)
            overrides[n++] = p;
    }

    ft_run_config cfg;
    ft_error err;
    ft_run_config_load(&cfg, path, n, overrides, &err);
    ft_run_config_free(&cfg);
    free(copy);
    return 0;
}
