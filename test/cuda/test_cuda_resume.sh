#!/bin/sh
# Checkpoints on device = "cuda": a job killed right after its step-4 checkpoint and
# resumed gives bitwise the losses and final weights of the uninterrupted job (1 rank,
# and 2 ranks at ZeRO stage 3 with bf16 parameters over NCCL, and with the whole bf16
# recipe and bf16 reduction); a device = "cuda"
# checkpoint resumes on device = "cpu" and a device = "cpu" checkpoint on device = "cuda",
# continuing like the uninterrupted run on the other device to the cross-device
# tolerance of test_cuda_train.sh (relative 1e-5 per step, weights 1e-4): the file holds
# the same state whichever backend wrote it.
. "$(dirname "$0")/../train/lib.sh"
. "$S/test/cuda/lib.sh" || exit 99
"$GENDATA" --rows 128 --seq-len 32 --digits 2 train.h5 >/dev/null || fail "gendata"
write_small_cfg s.cfg
require_cuda_device s.cfg
common="global_batch_size=8 micro_batch_size=2 optimizer.warmup_steps=2 optimizer.schedule=cosine max_steps=8"
straight() { # DEV N TAG EXTRA...
    dev=$1 n=$2 tag=$3; shift 3
    run_ranks $n s.cfg $common device=$dev "$@" final_weights=straight-$tag.h5 > straight-$tag.log 2>&1 ||
        { cat straight-$tag.log; fail "$tag: straight run"; }
}
interrupted() { # DEV N TAG EXTRA...: killed after the step-4 checkpoint, in ck-TAG
    dev=$1 n=$2 tag=$3; shift 3
    rm -rf ck-$tag
    FTMPI_FAULT=ckpt:saved run_ranks $n s.cfg $common device=$dev "$@" save_every=4 checkpoint_dir=ck-$tag > kill-$tag.log 2>&1 &&
        { cat kill-$tag.log; fail "$tag: the job was not killed after its checkpoint"; }
    [ "$(cat ck-$tag/latest)" = "step-000004.h5" ] || { cat kill-$tag.log; fail "$tag: latest is not step 4"; }
}
resume() { # DEV N CKTAG OUTTAG EXTRA...
    dev=$1 n=$2 ck=$3 out=$4; shift 4
    run_ranks $n s.cfg $common device=$dev "$@" checkpoint_dir=ck-$ck resume=auto final_weights=resumed-$out.h5 > resume-$out.log 2>&1 ||
        { cat resume-$out.log; fail "$out: resumed run"; }
    grep -q "resumed from ck-$ck/step-000004.h5 at step 4" resume-$out.log || { cat resume-$out.log; fail "$out: did not resume"; }
}
bitwise() { # TAG
    losses straight-$1.log | tail -n 4 > la; losses resume-$1.log > lb
    cmp -s la lb || { paste la lb; fail "$1: losses after resume differ"; }
    h5diff straight-$1.h5 resumed-$1.h5 /model /model > d.log 2>&1 || { head d.log; fail "$1: weights differ"; }
    echo "$1: bitwise identical after resume"
}

straight cuda 1 g1; interrupted cuda 1 g1; resume cuda 1 g1 g1; bitwise g1
if have_mpirun && enough_devices 2 "resume on 2 ranks (stage 3 bf16 parameters; the bf16 recipe)"; then
    x="zero_stage=3 model.param_dtype=bf16"
    straight cuda 2 g2 $x; interrupted cuda 2 g2 $x; resume cuda 2 g2 g2 $x; bitwise g2
    # the bf16 recipe: bits-only gathers made from the master, bf16 activations, and
    # with bf16 reduction the gradients staged in bf16
    x="zero_stage=3 precision=bf16 grad_reduce_dtype=bf16"
    straight cuda 2 b2 $x; interrupted cuda 2 b2 $x; resume cuda 2 b2 b2 $x; bitwise b2
fi

# across devices: the cuda checkpoint g1 continues on the cpu, and a cpu checkpoint on cuda
# (the resumed runs above went on to step 8 in their directories: interrupt afresh)
straight cpu 1 c1
interrupted cuda 1 g1
resume cpu 1 g1 g1-on-cpu
losses straight-c1.log | tail -n 4 > la; losses resume-g1-on-cpu.log > lb
same_losses lb la 1e-5 || fail "cuda checkpoint resumed on cpu: losses differ from the cpu run"
h5diff -d 1e-4 straight-c1.h5 resumed-g1-on-cpu.h5 /model /model > d.log 2>&1 || { head d.log; fail "cuda -> cpu: weights"; }
echo "cuda checkpoint resumed on cpu: ok"
interrupted cpu 1 c1
resume cuda 1 c1 c1-on-cuda
losses straight-g1.log | tail -n 4 > la; losses resume-c1-on-cuda.log > lb
same_losses lb la 1e-5 || fail "cpu checkpoint resumed on cuda: losses differ from the cuda run"
h5diff -d 1e-4 straight-g1.h5 resumed-c1-on-cuda.h5 /model /model > d.log 2>&1 || { head d.log; fail "cpu -> cuda: weights"; }
echo "cpu checkpoint resumed on cuda: ok"
