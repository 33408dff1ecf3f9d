/* Helpers shared by the tokenizer tests: locating test data through FT_SRCDIR and FT_BUILDDIR
 * (set by the automake harness; the configure-time directories are the fallback when run by
 * hand), loading the bundled tokenizers, reading JSONL files. The real tokenizers' JSON is
 * committed compressed and read from the build tree, where make check unpacks it
 * (test/data/Makefile.inc); everything else is read from the source tree. */
#ifndef FT_TEST_TOK_TEST_UTIL_H
#define FT_TEST_TOK_TEST_UTIL_H

#include <jansson.h>
#include <stddef.h>

#include "tokenizer/tokenizer.h"

/* "$FT_SRCDIR/rel", malloc'd. */
char *tt_path(const char *rel);
/* "$FT_BUILDDIR/rel", malloc'd. */
char *tt_build_path(const char *rel);
/* Loads the real tokenizer test/data/tokenizers/<dir>/tokenizer.json of the build tree
 * (llama2, llama3, llama3.1, qwen3); fails the test on error. */
ft_tokenizer *tt_load(const char *dir);
/* Reads a whole file of the source tree (NUL-terminated, malloc'd); fails the test when it
 * cannot. */
char *tt_read(const char *rel, size_t *len);
/* The same for a file of the build tree (the real tokenizers' JSON). */
char *tt_read_built(const char *rel, size_t *len);
/* Parses each non-empty line of a JSONL file; returns an array of n objects (json_decref
 * each, free the array). */
json_t **tt_jsonl(const char *rel, size_t *n);
/* Reads an array of integers into a malloc'd int32 array. */
int32_t *tt_ids(json_t *arr, size_t *n);

#endif
