/* Opening a file that a user named as an input, for every reader of every tool.
 *
 * Why: a FIFO blocks open() and read() until someone writes to it (forever, in a batch
 * job), /dev/zero or a huge sparse file is read until memory runs out, a directory
 * gives pages of low-level errors. So an input is opened with O_NONBLOCK (a FIFO with
 * no writer then opens at once instead of blocking), the opened descriptor is checked
 * with fstat (no window for the name to change in between) to be a regular file of at
 * most max_bytes, and only then is O_NONBLOCK cleared for ordinary reads. Symbolic
 * links are followed (Hugging Face caches link model files into snapshots); what they
 * point at is what is checked. A refusal is one line naming the file, what it is and
 * what to do. */
#ifndef FT_UTIL_INPUT_FILE_H
#define FT_UTIL_INPUT_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/error.h"

/* Bounds for the kinds of text inputs (the largest real file of each kind is far below):
 * JSON descriptions (config.json, tokenizer_config.json, index files), tokenizer.json,
 * prompt templates and similar small texts. */
#define FT_INPUT_MAX_JSON (64ull << 20)
#define FT_INPUT_MAX_TOKENIZER (256ull << 20)
#define FT_INPUT_MAX_SMALL (16ull << 20)
/* No bound: large binary inputs (safetensors shards, datasets) read in bounded pieces. */
#define FT_INPUT_UNBOUNDED UINT64_MAX

/* Opens path read-only (O_CLOEXEC) after the checks above; *size gets its size (may be
 * NULL). `what` says what the file should be, with its article ("a tokenizer.json", "an
 * HDF5 file"). */
int ft_input_open(const char *path, const char *what, uint64_t max_bytes, int *fd,
                  uint64_t *size, ft_error *err);

/* The same as a stdio stream ("rb"). */
int ft_input_fopen(const char *path, const char *what, uint64_t max_bytes, FILE **fp,
                   ft_error *err);

/* Reads the whole file into a new buffer (the caller frees it), NUL-terminated; *len
 * (may be NULL) excludes the NUL. At most max_bytes are read even if the file grows. */
int ft_input_read(const char *path, const char *what, uint64_t max_bytes, char **data,
                  size_t *len, ft_error *err);

/* The checks alone, by stat(), for files a library opens itself (HDF5): a regular file
 * (a FIFO would block the library's open, on every rank). */
int ft_input_check(const char *path, const char *what, ft_error *err);

/* Reading a stream (stdin) whose length is not known: fails once more than max_bytes
 * have come, so /dev/zero on stdin ends with a line instead of exhausting memory. */
int ft_input_read_stream(FILE *fp, const char *name, uint64_t max_bytes, char **data,
                         size_t *len, ft_error *err);

/* The longest line a line-oriented input (JSONL, text lines, prompts) may have: a file of
 * zeros or binary garbage has no newline, and getline would take all of it at once. */
#define FT_INPUT_MAX_LINE (256ull << 20)

/* getline(3) with a bound: the line's length (with its newline), -1 at the end of the
 * file or on a read error (ferror tells), -2 when the line has more than max bytes
 * (the stream is then left inside that line), -3 when out of memory. */
long ft_input_getline(char **line, size_t *cap, FILE *fp, size_t max);

#endif
