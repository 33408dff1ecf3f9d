/* Random initialisation of parameters, addressable by flat range. */
#ifndef FT_MODEL_INIT_H
#define FT_MODEL_INIT_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "model/layout.h"

/* dst[0 .. end-begin) = initial values of unit elements [begin, end): 2-D weights
 * N(0, std^2), norm weights 1, biases (names ending in .bias) 0 as Hugging Face
 * initialises them. Element i of a tensor depends only on (seed, the
 * tensor's name, i), so any sharding of the unit produces the same model. */
void ft_model_init_range(const ft_unit_layout *u, size_t begin, size_t end, uint64_t seed,
                         double std, float *dst);

/* The same values written into dst, memory of backend be: the 2-D weights by its
 * normal_fill (a device makes them itself), the rest made in host[0 .. host_n) and
 * uploaded a piece at a time. */
void ft_model_init_range_on(ft_backend *be, const ft_unit_layout *u, size_t begin, size_t end,
                            uint64_t seed, double std, float *dst, float *host, size_t host_n);

#endif
