/* Start-up checks (collective) of what a run needs later, so that a problem ends the
 * run before step 1 rather than after the work: the node's memory against the planner's
 * figures, data.eval, and where final_weights goes. Each returns 0 or -1 on every rank
 * alike, with a message shared by all (comm/agree.h). */
#ifndef FT_TRAIN_PREFLIGHT_H
#define FT_TRAIN_PREFLIGHT_H

#include "train/trainer.h"

/* CPU backend: bytes per rank (ft_plan_rank_bytes) x ranks on this node vs its memory. */
int ft_preflight_host_memory(ft_trainer *t, ft_error *err);
/* Rank 0 creates and removes final_weights' .tmp. */
int ft_preflight_final_weights(ft_trainer *t, ft_error *err);
/* data.eval opens, has data.train's seq_len and a vocabulary within the model's. */
int ft_preflight_eval_data(ft_trainer *t, ft_error *err);

#endif
