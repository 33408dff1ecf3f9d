/* Storage types of tensors. Compute is fp32 whatever the storage: a bf16 tensor is
 * widened on load and rounded (to nearest, ties to even) on store. */
#ifndef FT_UTIL_DTYPE_H
#define FT_UTIL_DTYPE_H

#include <stddef.h>

typedef enum ft_dtype { FT_DTYPE_F32 = 0, FT_DTYPE_BF16 = 1 } ft_dtype;

static inline size_t ft_dtype_size(ft_dtype t) { return t == FT_DTYPE_BF16 ? 2 : 4; }

static inline const char *ft_dtype_name(ft_dtype t) { return t == FT_DTYPE_BF16 ? "bf16" : "fp32"; }

#endif
