/* The identity of a weights file's content, as a LoRA checkpoint records its base
 * (/lora attribute base_hash, doc/formats.md "LoRA checkpoint"): 16 lowercase hex
 * digits, the FNV-1a 64 of, for every tensor of the model's layout in layout order,
 * the tensor's name, a 0 byte and the 8 little-endian bytes of its content_hash
 * attribute (io/weights.h: the hash of the stored bits). So it names the exact
 * stored values (a bf16 and an fp32 copy differ) and is computed from the attributes
 * alone, without reading a tensor. */
#ifndef FT_IO_WEIGHTS_IDENTITY_H
#define FT_IO_WEIGHTS_IDENTITY_H

#include "io/h5file.h"
#include "model/layout.h"

#define FT_WEIGHTS_IDENTITY_LEN 17 /* 16 hex digits and the NUL */

/* Identity of group (e.g. "/model") of f for layout l into out. Fails, naming the
 * tensor, when a dataset is missing or has no content_hash (files ftmpi writes all
 * have one; re-import others with ftmpi-convert import). */
int ft_weights_identity(const ft_h5file *f, const char *group, const ft_model_layout *l,
                        char out[FT_WEIGHTS_IDENTITY_LEN], ft_error *err);

#endif
