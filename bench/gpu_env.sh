# shellcheck shell=sh
# Sourced by the GPU benchmark scripts (bench/gpu_*.sh, bench/head.sh cuda): the
# machine's own cuDNN ahead of any other copy in LD_LIBRARY_PATH. libcudnn.so.9 is a small
# front that loads its engine libraries beside itself by name; a front from another
# cuDNN release found first (a bundle that carries one, say) would meet engine libraries
# of a different release. Does nothing where ldconfig and the usual places know no
# libcudnn.so.9, or where FTMPI_KEEP_LD_LIBRARY_PATH=1. Also defines ft_gpu_build (below).
if [ "${FTMPI_KEEP_LD_LIBRARY_PATH:-0}" != 1 ]; then
    ft_cudnn_so=$(ldconfig -p 2>/dev/null | awk '$1 == "libcudnn.so.9" { print $NF; exit }')
    [ -n "$ft_cudnn_so" ] || ft_cudnn_so=$(find /usr/local/cuda/ /usr/lib/x86_64-linux-gnu /opt \
        -name libcudnn.so.9 ! -path '/opt/ft/*' 2>/dev/null | head -n 1)
    if [ -n "$ft_cudnn_so" ]; then
        LD_LIBRARY_PATH="$(dirname "$ft_cudnn_so")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        export LD_LIBRARY_PATH
    fi
    unset ft_cudnn_so
fi

# ft_gpu_build NAME: the real CUDA build the GPU scripts run ($FTMPI_BUILD, default build/
# under the checkout: $top) as an absolute path in $build; 1 with NAME's one-line refusal
# when the directory is missing or holds the CPU execution harness's build.
ft_gpu_build() {
    build=$(cd "${FTMPI_BUILD:-$top/build}" 2>/dev/null && pwd) ||
        { echo "$1: no build directory ${FTMPI_BUILD:-$top/build}" >&2; return 1; }
    ! grep -q "FT_CUDA_EMULATION 1" "$build/config.h" ||
        { echo "$1: $build is the CPU harness build"; return 1; }
}
