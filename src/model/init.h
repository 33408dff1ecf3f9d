/* Random initialisation of parameters, addressable by flat range. */
#ifndef FT_MODEL_INIT_H
#define FT_MODEL_INIT_H

#include <stddef.h>
#include <stdint.h>

#include "model/layout.h"

/* dst[0 .. end-begin) = initial values of unit elements [begin, end): 2-D weights
 * N(0, std^2), norm weights 1, biases (names ending in .bias) 0 as Hugging Face
 * initialises them. Element i of a tensor depends only on (seed, the
 * tensor's name, i), so any sharding of the unit produces the same model. */
void ft_model_init_range(const ft_unit_layout *u, size_t begin, size_t end, uint64_t seed,
                         double std, float *dst);

#endif
