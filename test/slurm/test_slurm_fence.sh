#!/bin/sh
# The emulated two-node cluster (.ci/slurm-setup.sh start two) must give PMIx fences
# without data across its nodes: no rank leaves such a fence before the last rank has
# entered it. Open MPI 4's MPI_Init ends with one and relies on it; with Slurm 22.05's
# default tree algorithm it held only the ranks of one node, so the ranks of fn2 left
# MPI_Init while rank 0 still waited in the modex fence, sent it their first message and
# crashed it (SIGSEGV at address 0, test_slurm_70b_emulated.sh in the CI under load).
# 4 ranks, 2 per node, srun --mpi=pmix: each node's rank in turn enters 2 s late.
# SKIP unless FTMPI_SLURM_TESTS=1, or where the PMIx probe was not built (no pmix.pc).
. "$(dirname "$0")/../train/lib.sh"
PROBE="$B/test/slurm/pmix_fence_probe"
[ -x "$PROBE" ] || skip "no $PROBE (configure found no PMIx development files)"
. "$S/test/slurm/lib.sh"
slurm_start two "${FTMPI_SLURM_PORT_FENCE:-16830}"

for slow in 0 2; do   # rank 0 on fn1, rank 2 on fn2
    srun --mpi=pmix --nodes=2 --ntasks-per-node=2 --cpus-per-task=1 --time=2 \
        "$PROBE" "$slow" 2 > fence-$slow.log 2>&1 || { cat fence-$slow.log; fail "srun of the probe (slow rank $slow)"; }
    [ "$(grep -c '^rank .* entered .* left ' fence-$slow.log)" -eq 4 ] ||
        { cat fence-$slow.log; fail "slow rank $slow: expected 4 ranks' lines"; }
    awk '/^rank / { if ($4 > last) last = $4; if (first == "" || $6 < first) { first = $6; who = $2 } }
         END { if (first < last) { printf "rank %s left at %.3f, before the last rank entered (%.3f)\n", who, first, last; exit 1 } }' \
        fence-$slow.log || { cat fence-$slow.log; fail "slow rank $slow: a PMIx fence without data is not a barrier across the emulated nodes (mpi.conf PMIxCollFence)"; }
done
echo "PMIx fences without data hold both emulated nodes (a late rank on fn1, then on fn2)"
