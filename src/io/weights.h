/* The weights file (doc/formats.md): model config attributes and named full-shape
 * tensors. Reads and writes address a unit's flat element range, so that each rank
 * touches only the hyperslabs its shard covers; all ranks of the file's
 * communicator must call the range functions together (collective I/O), with
 * possibly empty ranges. */
#ifndef FT_IO_WEIGHTS_H
#define FT_IO_WEIGHTS_H

#include <stddef.h>

#include "io/h5file.h"
#include "model/layout.h"

typedef enum ft_file_dtype { FT_FILE_F32 = 0, FT_FILE_BF16 = 1 } ft_file_dtype;

int ft_weights_read_config(const ft_h5file *f, ft_model_config *c, ft_error *err);
int ft_weights_write_config(const ft_h5file *f, const ft_model_config *c, ft_error *err);

/* Creates group `group` (e.g. "/model") with one dataset per tensor of the layout. */
int ft_weights_create_tensors(const ft_h5file *f, const char *group, const ft_model_layout *l,
                              ft_file_dtype dtype, ft_error *err);

/* Checks that group holds every tensor of the layout with the right shape; names the
 * first missing or mis-shaped tensor. */
int ft_weights_check_tensors(const ft_h5file *f, const char *group, const ft_model_layout *l,
                             ft_error *err);

/* Content hash of a tensor as stored: the sum mod 2^64 over its elements of
 * mix(element index, stored bits). A sum is independent of how the tensor is split,
 * so each rank hashes the part it reads or writes and the parts add up (all-reduce)
 * to the same value whatever the world size. Reads and writes add their part into
 * hashes[t] for tensor t of the unit when hashes is not NULL. */
uint64_t ft_weights_hash_part(uint64_t first_index, const void *bits, size_t n, int bytes_per);

/* dst[0 .. end-begin) = unit's flat elements [begin, end), converted to fp32. */
int ft_weights_read_range(const ft_h5file *f, const char *group, const ft_unit_layout *u,
                          size_t begin, size_t end, float *dst, ft_error *err);
/* Writes src (fp32) to the unit's flat elements [begin, end), in the datasets' dtype. */
int ft_weights_write_range(const ft_h5file *f, const char *group, const ft_unit_layout *u,
                           size_t begin, size_t end, const float *src, ft_error *err);
/* The same, adding each tensor's partial content hash into hashes[0..n_tensors). */
int ft_weights_read_range_hashed(const ft_h5file *f, const char *group, const ft_unit_layout *u,
                                 size_t begin, size_t end, float *dst, uint64_t *hashes,
                                 ft_error *err);
int ft_weights_write_range_hashed(const ft_h5file *f, const char *group,
                                  const ft_unit_layout *u, size_t begin, size_t end,
                                  const float *src, uint64_t *hashes, ft_error *err);

/* Announces that the next reads will be of the unit range [begin, end) (after the
 * ranges announced before), so that raw access (ft_h5_attach_raw) reads them ahead
 * while earlier data is being processed; without raw access it does nothing. */
void ft_weights_will_read(const ft_h5file *f, const char *group, const ft_unit_layout *u,
                          size_t begin, size_t end);

#endif
