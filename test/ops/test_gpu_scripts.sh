#!/bin/sh
# The GPU benchmark scripts, on a machine without a GPU (they run only where one is lent,
# for minutes at a time, so a script that breaks must break here first):
#  - every bench/*.sh parses (sh -n);
#  - gpu_step, gpu_attention, gpu_profile, gpu_timeline, gpu_attention_profile and
#    gpu_quick say "no GPU" and exit 77 where nvidia-smi lists no device;
#  - gpu_timeline.py's arithmetic on a timeline whose answer is known (steps cut at the
#    AdamW launches, busy time as the union of the operations, the gaps);
#  - gpu_step's, gpu_profile's and gpu_attention_profile's arguments: what they accept,
#    and one line and exit 2 for what they do not;
#  - gpu_quick's shared budget: with a GPU (a stand-in nvidia-smi) and a budget too
#    small for any step, each step says it was skipped, within the budget, and nothing
#    runs;
#  - gpu_env.sh puts a libcudnn.so.9's directory first in LD_LIBRARY_PATH, and leaves
#    it alone when asked.
. "$(dirname "$0")/../train/lib.sh"
for f in "$S"/bench/*.sh; do
    sh -n "$f" || fail "$f does not parse"
done

# nvidia-smi that lists no device (as on a machine with the driver's tools but no GPU)
mkdir -p nogpu gpu
printf '#!/bin/sh\necho "No devices were found" >&2\nexit 6\n' > nogpu/nvidia-smi
printf '#!/bin/sh\ncase "$*" in *query*) echo "Stand-in GPU, 580";; *) echo "GPU 0: Stand-in GPU";; esac\n' \
    > gpu/nvidia-smi
chmod +x nogpu/nvidia-smi gpu/nvidia-smi
for s in gpu_step gpu_attention gpu_profile gpu_timeline gpu_attention_profile gpu_quick; do
    out=$(PATH="$PWD/nogpu:$PATH" sh "$S/bench/$s.sh" 2>&1)
    rc=$?
    [ $rc -eq 77 ] && [ "$out" = "no GPU" ] || fail "$s.sh without a GPU: exit $rc, '$out' (want 77, 'no GPU')"
done

# gpu_step's arguments (GPU_STEP_PARSE_ONLY stops after parsing)
parse() { GPU_STEP_PARSE_ONLY=1 sh "$S/bench/gpu_step.sh" "$@" 2>&1; }
[ "$(parse)" = "shapes=1b 8b docs=0 checkpointing=true layers_8b=8 ftmpi_args=" ] ||
    fail "gpu_step defaults: $(parse)"
[ "$(LAYERS_8B=4 parse --shape 8b --docs 512 --no-checkpointing precision=fp32)" = \
  "shapes=8b docs=512 checkpointing=false layers_8b=4 ftmpi_args=precision=fp32" ] || fail "gpu_step arguments"
for bad in "--shape 3b" "--docs x" "--docs 1" "--fast" "--shape"; do
    # shellcheck disable=SC2086 # split the case into its words
    out=$(parse $bad); rc=$?
    [ $rc -eq 2 ] && [ -n "$out" ] || fail "gpu_step $bad: exit $rc, '$out' (want 2 and a message)"
done
out=$(GPU_STEP_PARSE_ONLY=1 LAYERS_8B=0 sh "$S/bench/gpu_step.sh" 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "LAYERS_8B=0" || fail "gpu_step LAYERS_8B=0: exit $rc, '$out'"
out=$(PATH="$PWD/gpu:$PATH" sh "$S/bench/gpu_profile.sh" two 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "LAYERS=two" || fail "gpu_profile two: exit $rc, '$out'"
out=$(PATH="$PWD/gpu:$PATH" sh "$S/bench/gpu_timeline.sh" 0 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "LAYERS=0" || fail "gpu_timeline 0: exit $rc, '$out'"
out=$(PATH="$PWD/gpu:$PATH" sh "$S/bench/gpu_attention_profile.sh" 64 x 2>&1); rc=$?
[ $rc -eq 2 ] && echo "$out" | grep -q "HEAD_DIM=x" || fail "gpu_attention_profile 64 x: exit $rc, '$out'"

# gpu_quick's budget: 3 s leaves less than the 5 s a step needs, so every step is skipped
out=$(PATH="$PWD/gpu:$PATH" GPU_QUICK_BUDGET=3 FTMPI_BUILD="$PWD/none" sh "$S/bench/gpu_quick.sh" "$PWD/logs" 2>&1)
steps="linkage attention_tc attention_cudnn gpu_tests gpu_step gpu_step_own overlap_off gpu_step_nockpt grads_zero_all head gpu_attention cuda_ops racecheck ckpt_half ckpt_keep_attention attention_profile profile timeline"
# (gpu_step_own, the step on the own attention kernels, follows a gpu_step that did not pass)
for step in $steps; do
    echo "$out" | grep -qx "gpu_quick: $step: SKIPPED (the budget of 3s is spent)" ||
        { echo "$out"; fail "gpu_quick: no SKIPPED line for $step"; }
done
[ "$(echo "$out" | grep -c 'SKIPPED')" -eq 18 ] || { echo "$out"; fail "gpu_quick: expected 18 skipped steps"; }
echo "$out" | grep -q "No such file" && { echo "$out"; fail "gpu_quick's summary reads logs no step wrote"; }
[ -z "$(ls logs)" ] || { ls logs; fail "gpu_quick ran a step past its budget"; }
# GPU_QUICK_STEPS: only the steps named get a line (here skipped for the budget)
out=$(PATH="$PWD/gpu:$PATH" GPU_QUICK_BUDGET=3 GPU_QUICK_STEPS="head profile" FTMPI_BUILD="$PWD/none" \
    sh "$S/bench/gpu_quick.sh" "$PWD/logs" 2>&1)
[ "$(echo "$out" | grep 'SKIPPED' | sed 's/: SKIPPED.*//' | tr '\n' ' ')" = "gpu_quick: head gpu_quick: profile " ] ||
    { echo "$out"; fail "gpu_quick: GPU_QUICK_STEPS=\"head profile\" did not run exactly those two"; }
out=$(PATH="$PWD/gpu:$PATH" GPU_QUICK_BUDGET=3 GPU_QUICK_STEPS="first_run" FTMPI_BUILD="$PWD/none" \
    sh "$S/bench/gpu_quick.sh" "$PWD/logs" 2>&1)
[ "$(echo "$out" | grep -c 'SKIPPED')" -eq 1 ] && echo "$out" | grep -q "first_run: SKIPPED" ||
    { echo "$out"; fail "gpu_quick: GPU_QUICK_STEPS=first_run did not reach the opt-in step alone"; }

# gpu_timeline.py: four steps of ten 100 us kernels 5 us apart (two of them overlapping on
# a second stream), a copy, a 50 us host wait, three AdamW launches 2 us apart; 20 us
# between steps. Steps 2-4: 14 operations, 1.28 ms, busy 1.15 ms, idle 0.13 ms.
awk 'BEGIN { t = 0; OFS = "\t"
    for (s = 0; s < 4; s++) {
        t += 20000
        for (k = 0; k < 10; k++) { print "K", t, t + 100000, 7, "_Z11some_kernelv"; t += 105000 }
        print "K", t - 60000, t - 50000, 9, "_Z8overlapv"   # inside the last kernel
        print "C", t, t + 3000, 7, "memcpy"; t += 53000
        for (k = 0; k < 3; k++) { print "K", t, t + 50000, 7, "_Z12adamw_kernelPf"; t += 52000 }
    } }' > timeline.tsv
out=$(python3 "$S/bench/gpu_timeline.py" timeline.tsv) || fail "gpu_timeline.py failed: $out"
echo "$out" | grep -q "^mean: 1.28 ms a step, 15 operations, idle 0.13 ms (9.9 %)$" ||
    { echo "$out"; fail "gpu_timeline.py: wrong step totals"; }
echo "$out" | grep -q "^ *50.0  memcpy -> adamw_kernel$" || { echo "$out"; fail "gpu_timeline.py: the host wait's gap"; }
[ "$(echo "$out" | grep -c '^ *[234] ')" -eq 3 ] || { echo "$out"; fail "gpu_timeline.py: steps 2-4 expected"; }
# and with the optimizer beside the next forward: each step's three AdamW launches (stream
# 9) have five forward kernels (stream 7) after each, then 40 more kernels: still four
# steps, each cut at its own updates (1.33 ms: 58 operations of 20 us, 3 us apart)
awk 'BEGIN { t = 0; OFS = "\t"
    for (s = 0; s < 4; s++) {
        for (k = 0; k < 3; k++) {
            print "K", t, t + 20000, 9, "_Z12adamw_kernelPf"; t += 23000
            for (f = 0; f < 5; f++) { print "K", t, t + 20000, 7, "_Z7forwardv"; t += 23000 }
        }
        for (k = 0; k < 40; k++) { print "K", t, t + 20000, 7, "_Z8backwardv"; t += 23000 }
    } }' > overlap.tsv
out=$(python3 "$S/bench/gpu_timeline.py" overlap.tsv) || fail "gpu_timeline.py (overlap) failed: $out"
echo "$out" | grep -q "^mean: 1.33 ms a step, 58 operations" &&
    [ "$(echo "$out" | grep -c '^ *[234] ')" -eq 3 ] ||
    { echo "$out"; fail "gpu_timeline.py: steps with the optimizer overlapped not cut at their updates"; }

# gpu_env.sh: a libcudnn.so.9 under /opt is found by the same search the scripts use
# only where ldconfig knows none; here a stand-in ldconfig names one
mkdir -p bin lib
printf '#!/bin/sh\necho "	libcudnn.so.9 (libc6,x86-64) => %s/lib/libcudnn.so.9"\n' "$PWD" > bin/ldconfig
chmod +x bin/ldconfig
got=$(PATH="$PWD/bin:$PATH" LD_LIBRARY_PATH=/x sh -c ". '$S/bench/gpu_env.sh'; echo \$LD_LIBRARY_PATH")
[ "$got" = "$PWD/lib:/x" ] || fail "gpu_env.sh: LD_LIBRARY_PATH=$got, want $PWD/lib:/x"
got=$(PATH="$PWD/bin:$PATH" LD_LIBRARY_PATH=/x FTMPI_KEEP_LD_LIBRARY_PATH=1 sh -c ". '$S/bench/gpu_env.sh'; echo \$LD_LIBRARY_PATH")
[ "$got" = "/x" ] || fail "gpu_env.sh with FTMPI_KEEP_LD_LIBRARY_PATH=1: $got"
echo "bench GPU scripts: parse, no GPU, arguments, budget, cuDNN path: ok"
