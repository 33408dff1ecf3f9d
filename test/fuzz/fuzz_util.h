/* Helpers shared by the libFuzzer fuzzers (doc/fuzzing.md).
 *
 * The parsers under test read files by name, so most fuzzers write their input to a file
 * in a private temporary directory (removed at exit) and give the parser that name.
 * fuzz_bytes is a cursor over the input for fuzzers that build structured inputs (HDF5
 * files, override lists) from it: reads past the end give zeros, never fail, so every
 * input decodes to something. */
#ifndef FT_FUZZ_UTIL_H
#define FT_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* The fuzzer's temporary directory (created on first use). */
const char *fuzz_tmpdir(void);

/* Writes n bytes to <tmpdir>/<name> and returns its path (one of 8 static buffers used in
 * turn: valid for the next 7 calls of fuzz_write_file or fuzz_path; copy it to keep it).
 * Aborts on an I/O error: that is the harness failing, not the parser. */
const char *fuzz_write_file(const char *name, const void *data, size_t n);

/* <tmpdir>/<name> (a static buffer, as above). */
const char *fuzz_path(const char *name);

typedef struct fuzz_bytes {
    const uint8_t *p;
    size_t n;
} fuzz_bytes;

uint8_t fuzz_u8(fuzz_bytes *b);
uint32_t fuzz_u32(fuzz_bytes *b);
uint64_t fuzz_u64(fuzz_bytes *b);
/* A value in [0, n) (0 when n == 0). */
uint32_t fuzz_pick(fuzz_bytes *b, uint32_t n);
/* Up to max bytes as a NUL-terminated string in out[max+1] (length byte, then bytes). */
size_t fuzz_str(fuzz_bytes *b, char *out, size_t max);

#endif
