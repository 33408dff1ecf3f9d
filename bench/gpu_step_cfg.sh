# shellcheck shell=sh
# Sourced by bench/gpu_profile.sh and bench/gpu_timeline.sh: ft_step_setup LAYERS STEPS
# writes, in the current directory, data.h5 (STEPS rows of 4096 random tokens over
# Llama 3's vocabulary, one document a row: bench/gpu_step_torch.py, needs h5py) and
# step.cfg, ftmpi's bf16 step of the Llama-3.2-1B shape with its layers cut to LAYERS
# (seq 4096, batch 1, activation checkpointing, AdamW): the step both scripts look into.
ft_step_setup() {
    python3 "$top/bench/gpu_step_torch.py" data data.h5 --rows "$2" --seq 4096 --vocab 128256 \
        --doc-len 0 > /dev/null || { echo "could not write the data file (h5py?)" >&2; return 1; }
    cat > step.cfg <<CFG
device = "cuda"; precision = "bf16"; max_steps = $2; seed = 1; micro_batch_size = 1; global_batch_size = 1;
activation_checkpointing = true; grad_clip = 1.0; log_every = 1;
model = { vocab_size = 128256; hidden_size = 2048; intermediate_size = 8192; num_hidden_layers = $1;
          num_attention_heads = 32; num_key_value_heads = 8; max_position_embeddings = 4096;
          rope_theta = 500000.0; tie_word_embeddings = true; };
data = { train = "data.h5"; };
optimizer = { type = "adamw"; lr = 1e-5; weight_decay = 0.1; warmup_steps = 0; };
CFG
}
