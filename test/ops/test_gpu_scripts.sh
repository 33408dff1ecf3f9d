#!/bin/sh
# The GPU benchmark scripts, on a machine without a GPU (they run only where one is lent,
# for minutes at a time, so a script that breaks must break here first):
#  - every bench/*.sh parses (sh -n);
#  - gpu_step, gpu_attention, gpu_profile, gpu_timeline, gpu_attention_profile and
#    gpu_quick say "no GPU" and exit 77 where nvidia-smi lists no device;
#  - gpu_timeline.py's arithmetic on a timeline whose answer is known (steps cut at the
#    AdamW launches, busy time as the union of the operations, the gaps);
#  - ncu_sass_hot.py's sums on an ncu source-page CSV whose answer is known (samples per
#    instruction and per opcode, predicates and modifiers stripped, quoted numbers with
#    thousands separators, stall reasons), and one line and exit 1 for a CSV without
#    its columns; gpu_attention_profile.sh under a stand-in ncu: the report, its SASS
#    CSV and the summary per kernel, a failed summary not failing the run;
#  - gpu_step's, gpu_profile's and gpu_attention_profile's arguments: what they accept,
#    and one line and exit 2 for what they do not;
#  - gpu_quick's shared budget: with a GPU (a stand-in nvidia-smi) and a budget too
#    small for any step, each step says it was skipped, within the budget, and nothing
#    runs;
#  - gpu_quick on a Hopper stand-in says first whether the build has sm_90a code (the
#    wgmma kernels), and says nothing of it on another device;
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
steps="linkage attention_tc attention_cudnn gpu_tests gpu_step gpu_step_own overlap_off gpu_step_nockpt grads_zero_all head gpu_attention cuda_ops racecheck ckpt_half ckpt_keep_attention ckpt_keep_output lookup_ahead_off offload offload_serial attention_profile profile timeline"
# (gpu_step_own, the step on the own attention kernels, follows a gpu_step that did not pass)
for step in $steps; do
    echo "$out" | grep -qx "gpu_quick: $step: SKIPPED (the budget of 3s is spent)" ||
        { echo "$out"; fail "gpu_quick: no SKIPPED line for $step"; }
done
[ "$(echo "$out" | grep -c 'SKIPPED')" -eq 22 ] || { echo "$out"; fail "gpu_quick: expected 22 skipped steps"; }
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
out=$(PATH="$PWD/gpu:$PATH" GPU_QUICK_BUDGET=3 GPU_QUICK_STEPS="attention_profile_shared" \
    FTMPI_BUILD="$PWD/none" sh "$S/bench/gpu_quick.sh" "$PWD/logs" 2>&1)
[ "$(echo "$out" | grep -c 'SKIPPED')" -eq 1 ] &&
    echo "$out" | grep -q "attention_profile_shared: SKIPPED" ||
    { echo "$out"; fail "gpu_quick: GPU_QUICK_STEPS=attention_profile_shared did not reach that step alone"; }
out=$(PATH="$PWD/gpu:$PATH" GPU_QUICK_BUDGET=3 GPU_QUICK_STEPS="attention_profile_wgmma" \
    FTMPI_BUILD="$PWD/none" sh "$S/bench/gpu_quick.sh" "$PWD/logs" 2>&1)
[ "$(echo "$out" | grep -c 'SKIPPED')" -eq 1 ] &&
    echo "$out" | grep -q "attention_profile_wgmma: SKIPPED" ||
    { echo "$out"; fail "gpu_quick: GPU_QUICK_STEPS=attention_profile_wgmma did not reach that step alone"; }

# gpu_quick on a Hopper (compute capability 9.0): it says first whether the build has the
# sm_90a code the wgmma kernels need (the device code ftmpi --version names)
mkdir -p hopper b90 b90a
printf '#!/bin/sh\ncase "$*" in *compute_cap*) echo "9.0";; *query*) echo "H100 stand-in, 580";; *) echo "GPU 0: H100 stand-in";; esac\n' \
    > hopper/nvidia-smi
printf '#!/bin/sh\necho "backends: cpu cuda (device code: sm_80 sm_90; cuDNN attention)"\n' > b90/ftmpi
printf '#!/bin/sh\necho "backends: cpu cuda (device code: sm_80 sm_90a; cuDNN attention)"\n' > b90a/ftmpi
chmod +x hopper/nvidia-smi b90/ftmpi b90a/ftmpi
out=$(PATH="$PWD/hopper:$PATH" GPU_QUICK_BUDGET=3 FTMPI_BUILD="$PWD/b90" sh "$S/bench/gpu_quick.sh" "$PWD/logs" 2>&1)
echo "$out" | grep -q "WARNING: the build in $PWD/b90 has no sm_90a code" ||
    { echo "$out"; fail "gpu_quick: no warning for a Hopper build without sm_90a code"; }
out=$(PATH="$PWD/hopper:$PATH" GPU_QUICK_BUDGET=3 FTMPI_BUILD="$PWD/b90a" sh "$S/bench/gpu_quick.sh" "$PWD/logs" 2>&1)
echo "$out" | grep -q "WARNING" && { echo "$out"; fail "gpu_quick: warned about a build with sm_90a code"; }
echo "$out" | grep -qx "gpu_quick: the build has sm_90a code: the wgmma kernels are in it" ||
    { echo "$out"; fail "gpu_quick: did not say that the build has sm_90a code"; }
out=$(PATH="$PWD/gpu:$PATH" GPU_QUICK_BUDGET=3 FTMPI_BUILD="$PWD/b90" sh "$S/bench/gpu_quick.sh" "$PWD/logs" 2>&1)
echo "$out" | grep -q "sm_90a" && { echo "$out"; fail "gpu_quick: spoke of sm_90a on a device that is not a Hopper"; }

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

# ncu_sass_hot.py: nine SASS rows as ncu's source page prints them (a "Kernel Name" row
# first, every cell quoted, thousands grouped), 9000 samples: by opcode HMMA 2500+800 =
# 3300 (36.7 %), BAR 3000 (33.3 %), LDSM 1200 (13.3 %), DEPBAR 1000 (11.1 %), MUFU 490
# (5.4 %), S2R 10 (0.1 %); LDGDEPBAR (not DEPBAR) and FFMA none; 6755 not issued (75.1 %).
cat > sass.csv <<'CSV'
"Kernel Name","attn_fwd_tc_kernel(const __nv_bfloat16 *, int)"
"#","Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)","stall_long_sb","stall_barrier","stall_long_sb (Not Issued)","Instructions Executed"
"1","0x7f3a00000000","S2R R0, SR_TID.X","10","5","0","0","0","128"
"2","0x7f3a00000010","@!P0 LDSM.16.M88.4 R4, [R2]","1,200","900","100","0","80","4,096"
"3","0x7f3a00000020","HMMA.16816.F32.BF16 R8, R4, R12, R8","2,500","1,500","0","0","0","8,192"
"4","0x7f3a00000030","HMMA.16816.F32.BF16 R16, R4, R14, R16","800","300","0","0","0","8,192"
"5","0x7f3a00000040","@P1 MUFU.EX2 R20, R20","490","200","49","98","40","2,048"
"6","0x7f3a00000050","BAR.SYNC.DEFER_BLOCKING 0x0","3,000","2,900","0","2,700","0","512"
"7","0x7f3a00000060","LDGDEPBAR","0","0","0","0","0","512"
"8","0x7f3a00000070","DEPBAR.LE SB0, 0x0","1,000","950","600","0","590","512"
"9","0x7f3a00000080","@!PT FFMA R1, R2, R3, R4","0","0","0","0","0","64"
CSV
out=$(python3 "$S/bench/ncu_sass_hot.py" sass.csv 2>&1) || { echo "$out"; fail "ncu_sass_hot.py failed"; }
echo "$out" | grep -qx "samples: 9,000 in 9 instructions (6,755 not issued, 75.1 %)" ||
    { echo "$out"; fail "ncu_sass_hot.py: wrong totals"; }
# the hottest first, with its reason's share of its own samples (2700 of 3000); two
# reasons where there are two (MUFU: barrier 98, long_sb 49 of 490); none without samples
echo "$out" | sed -n 3p | grep -q "^  0x7f3a00000050  33.3  BAR.SYNC.DEFER_BLOCKING 0x0  *barrier 90%$" ||
    { echo "$out"; fail "ncu_sass_hot.py: the top instruction"; }
echo "$out" | grep -q "^  0x7f3a00000010  13.3  @!P0 LDSM.16.M88.4 R4, \[R2\]  *long_sb 8%$" &&
    echo "$out" | grep -q "^  0x7f3a00000040   5.4  @P1 MUFU.EX2 R20, R20  *barrier 20%, long_sb 10%$" ||
    { echo "$out"; fail "ncu_sass_hot.py: the stall reasons of an instruction"; }
[ "$(echo "$out" | grep -c '^  0x')" -eq 7 ] || { echo "$out"; fail "ncu_sass_hot.py: 7 instructions with samples"; }
[ "$(python3 "$S/bench/ncu_sass_hot.py" sass.csv 2 | grep -c '^  0x')" -eq 2 ] || fail "ncu_sass_hot.py sass.csv 2"
echo "$out" | sed -n '/^samples by opcode:$/,$p' > opcodes.txt
cat > opcodes.want <<'TXT'
samples by opcode:
  HMMA        36.7 %  3,300
  BAR         33.3 %  3,000
  LDSM        13.3 %  1,200
  DEPBAR      11.1 %  1,000
  MUFU         5.4 %  490
  S2R          0.1 %  10
TXT
cmp -s opcodes.txt opcodes.want || { diff opcodes.want opcodes.txt; fail "ncu_sass_hot.py: samples by opcode"; }
# the same from columns named by their metrics (as other ncu versions name them)
printf '%s\n' '"Address","Source","smsp__pcsamp_sample_count","smsp__pcsamp_warps_issue_stalled_long_scoreboard","smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued"' \
    '"0x10","LDG.E.128 R4, [R2.64]","30","27","27"' '"0x20","EXIT","10","0","0"' > metrics.csv
out=$(python3 "$S/bench/ncu_sass_hot.py" metrics.csv 2>&1) && echo "$out" | grep -qx "samples: 40 in 2 instructions" &&
    echo "$out" | grep -q "^  0x10  *75.0  LDG.E.128 R4, \[R2.64\]  *long_scoreboard 90%$" &&
    echo "$out" | grep -qx "  LDG         75.0 %  30" || { echo "$out"; fail "ncu_sass_hot.py: metric-named columns"; }
# one line and exit 1, never a traceback, for a CSV without the columns, a binary file,
# no file
printf '"Kernel Name","k"\n"Address","Source","Instructions Executed"\n"0x0","EXIT","1"\n' > nosamples.csv
printf 'NCU\0\1\2report\n' > binary.csv
for f in nosamples.csv binary.csv missing.csv; do
    out=$(python3 "$S/bench/ncu_sass_hot.py" "$f" 2>&1); rc=$?
    [ $rc -eq 1 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && ! echo "$out" | grep -q Traceback ||
        { echo "$out"; fail "ncu_sass_hot.py $f: exit $rc (want 1 and one line)"; }
done
python3 "$S/bench/ncu_sass_hot.py" nosamples.csv | grep -q "columns: Address, Source, Instructions Executed$" ||
    fail "ncu_sass_hot.py: the columns it names"

# gpu_attention_profile.sh under a stand-in ncu (and a stand-in build): one profiling run
# a kernel writes the report named by --export, the details and the SASS source page are
# printed from it, the summary follows each kernel's headline rows; the dQ pass's source
# page has no sampling columns: its summary says so, and the run still passes
mkdir -p ncubin fakebuild/bench
: > fakebuild/config.h
printf '#!/bin/sh\nexit 0\n' > fakebuild/bench/attention_tc_bench
cat > ncubin/ncu <<'SH'
#!/bin/sh
echo "$*" >> "$NCU_CALLS"
if [ "$1" = --import ] && [ ! -f "$2" ]; then echo "==ERROR== cannot open $2" >&2; exit 1; fi
case "$*" in
*--list-sections*) printf 'Identifier  Display Name\nSpeedOfLight  GPU Speed Of Light\nWarpStateStats  Warp State\nSourceCounters  Source Counters\n' ;;
*"--page details"*) echo "    Duration                        msecond         1.40" ;;
*tc_bwd_dq*"--page source"*) cat "$NCU_NOSAMPLES" ;;
*"--page source"*) cat "$NCU_CSV" ;;
*) [ -n "${NCU_NO_REPORT:-}" ] && exit 0
   while [ $# -gt 1 ]; do [ "$1" = --export ] && : > "$2"; shift; done ;;
esac
SH
chmod +x ncubin/ncu fakebuild/bench/attention_tc_bench
out=$(PATH="$PWD/ncubin:$PWD/gpu:$PATH" NCU_CALLS="$PWD/calls" NCU_CSV="$PWD/sass.csv" \
    NCU_NOSAMPLES="$PWD/nosamples.csv" FTMPI_BUILD="$PWD/fakebuild" OUT="$PWD/prof" \
    sh "$S/bench/gpu_attention_profile.sh" 128 2>&1); rc=$?
[ $rc -eq 0 ] || { echo "$out"; fail "gpu_attention_profile.sh (stand-in ncu): exit $rc"; }
for k in attn_fwd_tc_kernel tc_bwd_dkdv_kernel tc_bwd_dq_kernel; do
    [ -f "prof/hd128-$k.ncu-rep" ] && [ -s "prof/hd128-$k-sass.csv" ] ||
        { ls prof; fail "gpu_attention_profile.sh: $k's report or CSV"; }
    grep -q -- "--section SourceCounters .*--export $PWD/prof/hd128-$k.ncu-rep" calls &&
        grep -q -- "--import $PWD/prof/hd128-$k.ncu-rep --page source --csv --print-source sass" calls ||
        { cat calls; fail "gpu_attention_profile.sh: $k's ncu command lines"; }
done
[ "$(echo "$out" | grep -c '^samples: 9,000 in 9 instructions')" -eq 2 ] &&
    [ "$(echo "$out" | grep -c '^  HMMA  *36.7 %')" -eq 2 ] &&
    echo "$out" | grep -q "^-- hd128-tc_bwd_dq_kernel: no per-instruction summary" &&
    ! echo "$out" | grep -q Traceback || { echo "$out"; fail "gpu_attention_profile.sh: the summaries"; }
# a profiling run that leaves no report fails the script
out=$(PATH="$PWD/ncubin:$PWD/gpu:$PATH" NCU_CALLS="$PWD/calls" NCU_NO_REPORT=1 FTMPI_BUILD="$PWD/fakebuild" \
    OUT="$PWD/prof2" sh "$S/bench/gpu_attention_profile.sh" 128 2>&1); rc=$?
[ $rc -eq 1 ] && echo "$out" | grep -q "^== hd128-attn_fwd_tc_kernel: no report" ||
    { echo "$out"; fail "gpu_attention_profile.sh without a report: exit $rc (want 1)"; }

# gpu_env.sh: a libcudnn.so.9 under /opt is found by the same search the scripts use
# only where ldconfig knows none; here a stand-in ldconfig names one
mkdir -p bin lib
printf '#!/bin/sh\necho "	libcudnn.so.9 (libc6,x86-64) => %s/lib/libcudnn.so.9"\n' "$PWD" > bin/ldconfig
chmod +x bin/ldconfig
got=$(PATH="$PWD/bin:$PATH" LD_LIBRARY_PATH=/x sh -c ". '$S/bench/gpu_env.sh'; echo \$LD_LIBRARY_PATH")
[ "$got" = "$PWD/lib:/x" ] || fail "gpu_env.sh: LD_LIBRARY_PATH=$got, want $PWD/lib:/x"
got=$(PATH="$PWD/bin:$PATH" LD_LIBRARY_PATH=/x FTMPI_KEEP_LD_LIBRARY_PATH=1 sh -c ". '$S/bench/gpu_env.sh'; echo \$LD_LIBRARY_PATH")
[ "$got" = "/x" ] || fail "gpu_env.sh with FTMPI_KEEP_LD_LIBRARY_PATH=1: $got"
echo "bench GPU scripts: parse, no GPU, arguments, budget, SASS summary, cuDNN path: ok"
