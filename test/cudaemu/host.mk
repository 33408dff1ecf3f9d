# The harness's host side (runtime, streams, cuBLASLt, NCCL) and its tests.
CUDAEMU_HOST_SOURCES = \
	test/cudaemu/cudaemu_host.h \
	test/cudaemu/cudaemu_alloc.c \
	test/cudaemu/cudaemu_device.c \
	test/cudaemu/cudaemu_errors.c \
	test/cudaemu/cudaemu_memory.c \
	test/cudaemu/cudaemu_runtime.c \
	test/cudaemu/cudaemu_stream.c
EXTRA_DIST += test/cudaemu/emu_test_util.h

if CUDA_EMULATION
if HAVE_CMOCKA
check_PROGRAMS += test/cudaemu/test_emu_runtime
TESTS += test/cudaemu/test_emu_runtime
test_cudaemu_test_emu_runtime_SOURCES = test/cudaemu/test_emu_runtime.c test/cudaemu/emu_test_util.h
test_cudaemu_test_emu_runtime_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
test_cudaemu_test_emu_runtime_LDADD = libftmpi.a $(FT_LIBS) $(CMOCKA_LIBS)
endif
endif
