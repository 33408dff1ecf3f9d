/* Writing final_weights: the engine's fp32 master values as an ftmpi weights file. */
#ifndef FT_TRAIN_WEIGHTS_OUT_H
#define FT_TRAIN_WEIGHTS_OUT_H

#include <stdbool.h>

#include "model/layout.h"
#include "shard/engine.h"
#include "util/error.h"

/* Every rank writes the slice of every tensor that its shard covers, collectively, into
 * PATH.tmp (made new, util/output_file.h); rank 0 renames it to path when complete.
 * The file's space is reserved before any tensor byte and the ranks agree after every
 * phase, so a full disk is one shared line on every rank (the partial file removed),
 * never a rank left waiting in H5Fclose. tok_fp: the run's tokenizer fingerprint
 * (io/tok_fingerprint.h), recorded in the file. Collective over MPI_COMM_WORLD. */
int ft_weights_out_save(const char *path, const ft_model_layout *layout, const char *tok_fp,
                        ft_engine *e, bool direct_io, int rank, ft_error *err);

#endif
