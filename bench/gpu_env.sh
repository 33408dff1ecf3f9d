# shellcheck shell=sh
# Sourced by the GPU benchmark scripts (bench/gpu_*.sh, bench/head.sh cuda): the
# machine's own cuDNN ahead of any other copy in LD_LIBRARY_PATH. libcudnn.so.9 is a small
# front that loads its engine libraries beside itself by name; a front from another
# cuDNN release found first (a bundle that carries one, say) would meet engine libraries
# of a different release. Does nothing where ldconfig and the usual places know no
# libcudnn.so.9, or where FTMPI_KEEP_LD_LIBRARY_PATH=1.
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
