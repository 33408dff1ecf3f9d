# The harness's host side: the CUDA runtime (memory, streams, events, device properties,
# errors), cuBLASLt on CBLAS and NCCL on MPI, linked in place of libcudart, libcublasLt
# and libnccl; and their tests. Included by test/cudaemu/Makefile.inc, which adds
# $(CUDAEMU_HOST_SOURCES) to libftmpi.a in the --with-cuda-emulation build.
CUDAEMU_HOST_SOURCES = \
	test/cudaemu/cudaemu_host.h \
	test/cudaemu/cudaemu_alloc.c \
	test/cudaemu/cudaemu_device.c \
	test/cudaemu/cudaemu_errors.c \
	test/cudaemu/cudaemu_memory.c \
	test/cudaemu/cudaemu_runtime.c \
	test/cudaemu/cudaemu_stream.c \
	test/cudaemu/cudaemu_cublaslt.h \
	test/cudaemu/cudaemu_cublaslt.c \
	test/cudaemu/cudaemu_cublaslt_matmul.c \
	test/cudaemu/cudaemu_nccl.h \
	test/cudaemu/cudaemu_nccl.c \
	test/cudaemu/cudaemu_nccl_types.c \
	test/cudaemu/cudaemu_cudnn.h \
	test/cudaemu/cudaemu_cudnn.c \
	test/cudaemu/cudaemu_cudnn_graph.c \
	test/cudaemu/cudaemu_cudnn_execute.c \
	test/cudaemu/cudaemu_cudnn_engine.c
EXTRA_DIST += test/cudaemu/emu_test_util.h test/cudaemu/test_emu_nccl.sh

if CUDA_EMULATION
if HAVE_CMOCKA
check_PROGRAMS += test/cudaemu/test_emu_runtime test/cudaemu/test_emu_cublaslt \
	test/cudaemu/test_emu_nccl
# test_emu_nccl runs under mpirun on 1 to 4 ranks through its script.
TESTS += test/cudaemu/test_emu_runtime test/cudaemu/test_emu_cublaslt \
	test/cudaemu/test_emu_nccl.sh
test_cudaemu_test_emu_runtime_SOURCES = test/cudaemu/test_emu_runtime.c test/cudaemu/emu_test_util.h
test_cudaemu_test_emu_runtime_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
test_cudaemu_test_emu_runtime_LDADD = libftmpi.a $(FT_LIBS) $(CMOCKA_LIBS)
test_cudaemu_test_emu_cublaslt_SOURCES = test/cudaemu/test_emu_cublaslt.c test/cudaemu/emu_test_util.h
test_cudaemu_test_emu_cublaslt_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
test_cudaemu_test_emu_cublaslt_LDADD = libftmpi.a $(FT_LIBS) $(CMOCKA_LIBS)
test_cudaemu_test_emu_nccl_SOURCES = test/cudaemu/test_emu_nccl.c test/cudaemu/emu_test_util.h
test_cudaemu_test_emu_nccl_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
test_cudaemu_test_emu_nccl_LDADD = libftmpi.a $(FT_LIBS) $(CMOCKA_LIBS)
endif
endif
