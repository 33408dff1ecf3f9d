/* Input readers: one rank's share of an input file, record by record.
 *
 * JSON Lines (and raw text, one document per line): the file is cut into nranks equal byte
 * ranges; a rank reads the lines that BEGIN inside its range (the line straddling the start
 * belongs to the previous rank), so every line is read exactly once, in file order, whatever
 * the number of ranks. Line numbers given to the callbacks are counted from the rank's first
 * line (1-based); the caller turns them into file line numbers with a prefix sum of
 * prep_read_result.lines over ranks.
 *
 * A file whose first non-blank byte is '[' is a JSON array of records (alpaca_data.json): every
 * rank parses it whole and takes elements [r*n/P, (r+1)*n/P); `where` is then the global
 * element number (1-based) and where_is_global is set.
 *
 * Raw text, one document per file: the file's only record goes to rank (file_index mod P).
 */
#ifndef FT_PREP_READER_H
#define FT_PREP_READER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "prep/prep_template.h"
#include "util/error.h"

typedef enum prep_input_kind {
    PREP_INPUT_JSON,       /* JSON Lines or a JSON array */
    PREP_INPUT_TEXT_LINES, /* raw UTF-8 text, one document per non-empty line */
    PREP_INPUT_TEXT_FILE,  /* raw UTF-8 text, the whole file is one document */
} prep_input_kind;

typedef struct prep_reader_cb {
    /* A well-formed record: obj (JSON) or text/len (raw). Returns -1 only for fatal errors
     * (out of memory); a bad record is reported through `bad`. */
    int (*record)(void *ctx, json_t *obj, const char *text, size_t len, int64_t where,
                  ft_error *err);
    /* A line that is not valid UTF-8, not JSON or not an object. */
    int (*bad)(void *ctx, int64_t where, const char *problem, ft_error *err);
    void *ctx;
} prep_reader_cb;

typedef struct prep_read_result {
    int64_t lines;        /* lines that begin in this rank's range (JSONL / text lines) */
    bool where_is_global; /* `where` already counts from the file start (array, text file) */
    bool array;           /* the file was a JSON array */
} prep_read_result;

/* file_index: position of the file on the command line (for text-file assignment). */
int prep_read_share(const char *path, int file_index, prep_input_kind kind, int rank, int nranks,
                    const prep_reader_cb *cb, prep_read_result *res, ft_error *err);

/* The format of the first record of the file that looks like one (rank 0 calls this and
 * broadcasts, so that `--format auto` gives the same answer on any number of ranks).
 * *fmt = PREP_FORMAT_AUTO when no record matches. */
int prep_detect_file_format(const char *path, prep_format *fmt, ft_error *err);

/* Offset of the first byte that is not valid UTF-8, or -1 when s[0..n) is valid. */
long prep_utf8_invalid_at(const char *s, size_t n);

#endif
