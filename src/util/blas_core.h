/* Which OpenBLAS kernel ("core") the CPU GEMMs run, and correcting OpenBLAS's choice
 * where it fell back to a weaker kernel than the CPU runs.
 *
 * OpenBLAS built with DYNAMIC_ARCH (every distribution's) picks its kernels from the CPU
 * model in a constructor that runs before main(). A build older than the CPU model does
 * not recognise it and falls back: Debian 12's 0.3.21 runs its SSE3 "Prescott" kernel on
 * Emerald Rapids Xeons and its AVX2 "Haswell" kernel on AVX-512 Zen 5 EPYCs, 2-4x slower
 * sgemm. The choice is made once, from OPENBLAS_CORETYPE or from cpuid, before any code
 * of ours runs, so the only way to change it is to start the program again with that
 * variable set: ft_blas_core_select does so (doc/design.md, "The CPU's BLAS kernel").
 */
#ifndef FT_UTIL_BLAS_CORE_H
#define FT_UTIL_BLAS_CORE_H

#include <stddef.h>

/* The first thing main() does, before MPI_Init and before any BLAS call. Where the
 * linked BLAS is a DYNAMIC_ARCH OpenBLAS whose chosen core is weaker than the CPU's
 * instruction set, and neither the user (OPENBLAS_CORETYPE) nor an earlier pass of
 * this function (FTMPI_BLAS_CORE_FROM, the guard) chose one, it sets OPENBLAS_CORETYPE
 * to the best core that library has for this CPU and re-executes its own file
 * (/proc/self/exe, resolved) with the same argv and environment (the process keeps its
 * pid, so launchers do not notice). Returns when nothing is to be done, or when the exec failed (then it says so
 * on stderr and the run goes on with OpenBLAS's kernel). */
void ft_blas_core_select(char **argv);

/* One line (no newline) naming the BLAS, its kernel and who chose it, e.g.
 * "OpenBLAS 0.3.21 (openmp), core SkylakeX (AVX-512): set by ftmpi
 * (OPENBLAS_CORETYPE=SkylakeX): OpenBLAS chose Prescott on this GenuineIntel CPU with
 * AVX-512". */
void ft_blas_core_describe(char *buf, size_t n);

/* What the selection rests on, apart so that tests can feed any CPU. Instruction-set
 * levels of a CPU and of an OpenBLAS core, ordered. */
typedef enum {
    FT_BLAS_ISA_PRE_AVX = 0, /* SSE kernels: Prescott, Nehalem, Core2, Barcelona... */
    FT_BLAS_ISA_AVX = 1,     /* Sandybridge, Bulldozer, Piledriver, Steamroller */
    FT_BLAS_ISA_AVX2 = 2,    /* AVX2 + FMA: Haswell, Zen, Excavator */
    FT_BLAS_ISA_AVX512 = 3,  /* AVX-512 F/CD/BW/DQ/VL: SkylakeX, Cooperlake, SapphireRapids */
} ft_blas_isa;

/* The level of an OpenBLAS core name (openblas_get_corename()); -1 for a name this
 * table does not know (a newer OpenBLAS's), which is never second-guessed. */
int ft_blas_core_isa(const char *core);

/* The core to force for a CPU of level cpu_isa (amd: AMD or Hygon) when OpenBLAS chose
 * `chosen`, or NULL to keep it: the best core of level <= cpu_isa, above the chosen
 * one's, that the library has (has_core(name, ctx) != 0). */
const char *ft_blas_core_better(const char *chosen, ft_blas_isa cpu_isa, int amd,
                                int (*has_core)(const char *name, void *ctx), void *ctx);

#endif
