/* Hugging Face PEFT LoRA adapter directories (doc/formats.md, "PEFT adapter
 * directory"): adapter_config.json + adapter_model.safetensors, what
 * peft.PeftModel.from_pretrained loads onto the base model and save_pretrained writes.
 *
 * Keys are "base_model.model." + the site's HF module path (ft_lora_site_hf_path) +
 * ".lora_A.weight" [rank, in] / ".lora_B.weight" [out, rank]. Tensors here are
 * ftmpi's adapter tensors (model/lora.h: ft_lora_layout_build's names and shapes); the
 * one difference in content is GPT-NeoX's fused query_key_value, whose B rows go head
 * by head (q, k, v rows of head 0, then of head 1, ...) in HF and q rows, k rows, v
 * rows in ftmpi: reading and writing permute them.
 *
 * Reading validates everything before any tensor is used: adapter_config.json (a
 * plain LoRA that ftmpi computes the same way: peft_type "LORA", r, lora_alpha,
 * target_modules known for the family, no rslora, DoRA, fan_in_fan_out, bias,
 * layers_to_transform, rank/alpha patterns or modules_to_save) and that the
 * safetensors file holds exactly the expected keys with their shapes in F32, BF16 or
 * F16. Each problem is one line naming the file, the key and what to do.
 *
 * The trainer seeds adapters from a directory (model.adapter) with
 * ft_peft_adapter_read_range, the same contract as ft_weights_read_range over the
 * adapter layout's units: every rank opens the directory (plain preads, no MPI) and
 * reads its own slice. */
#ifndef FT_IO_PEFT_ADAPTER_H
#define FT_IO_PEFT_ADAPTER_H

#include <stdbool.h>
#include <stddef.h>

#include "io/safetensors.h"
#include "model/layout.h"
#include "model/lora.h"
#include "util/error.h"

#define FT_PEFT_CONFIG_NAME "adapter_config.json"
#define FT_PEFT_WEIGHTS_NAME "adapter_model.safetensors"

/* An opened adapter directory. */
typedef struct ft_peft_adapter {
    char dir[4096];
    ft_lora_config lora;      /* r, lora_alpha, lora_dropout, the targeted sites */
    char base_model[1024];    /* base_model_name_or_path, "" when null or absent */
    ft_model_layout layout;   /* the adapter layout for the base config (owned) */
    ft_st_file st;            /* adapter_model.safetensors (owned) */
    const ft_st_tensor **src; /* per layout tensor (model-wide index): its key (owned array) */
} ft_peft_adapter;

/* Opens and validates dir for a base model of shape *base. On error nothing is left
 * open. */
int ft_peft_adapter_open(ft_peft_adapter *a, const char *dir, const ft_model_config *base,
                         ft_error *err);
void ft_peft_adapter_close(ft_peft_adapter *a);

/* dst[0 .. numel) = fp32 values of adapter tensor t (a tensor of a->layout), in
 * ftmpi's row order. */
int ft_peft_adapter_read_tensor(const ft_peft_adapter *a, const ft_tensor_info *t, float *dst,
                                ft_error *err);
/* dst[0 .. end-begin) = adapter unit u's flat elements [begin, end) in fp32 (u a unit
 * of a->layout or of an equal adapter layout), as ft_weights_read_range does for a
 * weights group. */
int ft_peft_adapter_read_range(const ft_peft_adapter *a, const ft_unit_layout *u, size_t begin,
                               size_t end, float *dst, ft_error *err);

/* Checks that the directory's adapters are the run's (rank, alpha and targets of
 * lora); the line names adapter_config.json and both values. */
int ft_peft_adapter_check_config(const ft_peft_adapter *a, const ft_lora_config *lora,
                                 ft_error *err);

/* Writes the adapters as a weights file at path (a new file: the caller names a
 * temporary): ftmpi_format "weights", /config the base's, /model the adapter layout's
 * tensors in fp32 (ftmpi's names and row order). What ft_engine_load(adapter engine,
 * f, "/model") reads, for a trainer that seeds its adapters from a directory without a
 * new engine entry point: one rank writes, every rank loads, the file is removed. */
int ft_peft_adapter_write_weights(const ft_peft_adapter *a, const char *path, ft_error *err);

/* Supplies the fp32 values of one adapter tensor (ftmpi order) to the writer. */
typedef int (*ft_peft_tensor_source)(void *ctx, const ft_tensor_info *t, float *dst,
                                     ft_error *err);

/* Writes dir/adapter_config.json and dir/adapter_model.safetensors (each through a
 * temporary file renamed when complete; dir must exist) for the adapter layout l
 * (ft_lora_layout_build of lora), tensors stored as dtype (FT_ST_F32 or FT_ST_BF16).
 * base_model: base_model_name_or_path ("" writes null). One tensor is in memory at a
 * time. */
int ft_peft_adapter_write(const char *dir, const ft_model_layout *l, const ft_lora_config *lora,
                          const char *base_model, ft_st_dtype dtype, ft_peft_tensor_source src,
                          void *ctx, ft_error *err);

/* GPT-NeoX's fused B (an adapter tensor named "...qkv_proj.lora_B.weight"): HF row r
 * (head by head: q, k, v rows of each head) is ftmpi row ft_peft_neox_row(c, r) (q
 * rows, k rows, v rows). */
bool ft_peft_is_fused_b(const char *name);
long long ft_peft_neox_row(const ft_model_config *c, long long hf_row);

/* The PEFT key of adapter tensor name (an ftmpi adapter tensor name,
 * "model.layers.N.<site path>.lora_{A,B}.weight") for a model of shape c, into key;
 * -1 when name is not one. */
int ft_peft_key(const ft_model_config *c, const char *name, char *key, size_t size);

#endif
