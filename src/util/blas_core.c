#include "util/blas_core.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define FT_BLAS_CORE_X86 1
#endif

/* Set (to the core OpenBLAS had chosen) by the re-exec: the next process must not
 * re-exec again, and its start-up line says who chose the kernel. */
#define GUARD "FTMPI_BLAS_CORE_FROM"

static const char *const isa_names[] = { "pre-AVX", "AVX", "AVX2", "AVX-512" };

/* OpenBLAS's x86 core names (driver/others/dynamic.c) by the widest instructions
 * their sgemm kernels use. Excavator has AVX2 but is kept at its own kernel. */
static const struct {
    const char *name;
    ft_blas_isa isa;
} core_table[] = {
    { "SkylakeX", FT_BLAS_ISA_AVX512 },   { "Cooperlake", FT_BLAS_ISA_AVX512 },
    { "SapphireRapids", FT_BLAS_ISA_AVX512 }, { "Haswell", FT_BLAS_ISA_AVX2 },
    { "Zen", FT_BLAS_ISA_AVX2 },          { "Excavator", FT_BLAS_ISA_AVX2 },
    { "Sandybridge", FT_BLAS_ISA_AVX },   { "Bulldozer", FT_BLAS_ISA_AVX },
    { "Piledriver", FT_BLAS_ISA_AVX },    { "Steamroller", FT_BLAS_ISA_AVX },
    { "Katmai", FT_BLAS_ISA_PRE_AVX },    { "Coppermine", FT_BLAS_ISA_PRE_AVX },
    { "Northwood", FT_BLAS_ISA_PRE_AVX }, { "Prescott", FT_BLAS_ISA_PRE_AVX },
    { "Banias", FT_BLAS_ISA_PRE_AVX },    { "Atom", FT_BLAS_ISA_PRE_AVX },
    { "Core2", FT_BLAS_ISA_PRE_AVX },     { "Penryn", FT_BLAS_ISA_PRE_AVX },
    { "Dunnington", FT_BLAS_ISA_PRE_AVX }, { "Nehalem", FT_BLAS_ISA_PRE_AVX },
    { "Athlon", FT_BLAS_ISA_PRE_AVX },    { "Opteron", FT_BLAS_ISA_PRE_AVX },
    { "Opteron_SSE3", FT_BLAS_ISA_PRE_AVX }, { "Barcelona", FT_BLAS_ISA_PRE_AVX },
    { "Nano", FT_BLAS_ISA_PRE_AVX },      { "Bobcat", FT_BLAS_ISA_PRE_AVX },
};

int ft_blas_core_isa(const char *core)
{
    for (size_t i = 0; core && i < sizeof core_table / sizeof core_table[0]; i++)
        if (!strcasecmp(core, core_table[i].name))
            return (int)core_table[i].isa;
    return -1;
}

const char *ft_blas_core_better(const char *chosen, ft_blas_isa cpu_isa, int amd,
                                int (*has_core)(const char *name, void *ctx), void *ctx)
{
    const int have = ft_blas_core_isa(chosen);
    if (have < 0 || have >= (int)cpu_isa)
        return NULL;
    /* Best first. For AVX-512 SkylakeX, not Cooperlake or SapphireRapids: those two
     * add bf16 (sbgemm) and AMX kernels and reuse SkylakeX's sgemm/dgemm, which is all
     * ftmpi calls; and 0.3.21 cannot even look "Cooperlake" up by name (its name loop
     * stops one entry short). SkylakeX on AMD too: on a Zen 5 EPYC its sgemm ran at
     * 1.9x the Zen kernel's (doc/benchmarks.md). For AVX2 the vendor's own tuning first. */
    const char *order[] = { "SkylakeX", amd ? "Zen" : "Haswell", amd ? "Haswell" : "Zen",
                            "Sandybridge" };
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const int isa = ft_blas_core_isa(order[i]);
        if (isa > have && isa <= (int)cpu_isa && has_core(order[i], ctx))
            return order[i];
    }
    return NULL;
}

/* ------------------------------------------------------------------ this CPU */

static ft_blas_isa cpu_isa_level(void)
{
#ifdef FT_BLAS_CORE_X86
    /* libgcc's checks include the OS's consent (XGETBV): a kernel that does not save
     * the ZMM state reports no AVX-512 */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return FT_BLAS_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return FT_BLAS_ISA_AVX2;
    if (__builtin_cpu_supports("avx"))
        return FT_BLAS_ISA_AVX;
#endif
    return FT_BLAS_ISA_PRE_AVX;
}

/* The cpuid vendor string ("GenuineIntel", "AuthenticAMD", "HygonGenuine"...). */
static void cpu_vendor(char out[13])
{
    memset(out, 0, 13);
#ifdef FT_BLAS_CORE_X86
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d)) {
        memcpy(out, &b, 4);
        memcpy(out + 4, &d, 4);
        memcpy(out + 8, &c, 4);
    }
#endif
}

/* AMX-BF16: cpuid leaf 7, EDX bit 22, read directly (clang's __builtin_cpu_supports
 * does not know "amx-bf16" in every version). */
static int cpu_has_amx_bf16(void)
{
#ifdef FT_BLAS_CORE_X86
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 22 & 1u);
#else
    return 0;
#endif
}

static int cpu_is_amd(const char *vendor)
{
    return !strcmp(vendor, "AuthenticAMD") || !strcmp(vendor, "HygonGenuine");
}

/* ------------------------------------------------------------------ the library */

/* OpenBLAS's own entry points, looked up at run time: the build may link another
 * CBLAS (configure accepts any), which has none of them. */
typedef struct blas_lib {
    void *self;
    char *(*corename)(void);
    char *(*config)(void);
    int (*parallel)(void);
} blas_lib;

static int blas_lib_open(blas_lib *lib)
{
    memset(lib, 0, sizeof *lib);
    lib->self = dlopen(NULL, RTLD_LAZY); /* the program and the libraries it links */
    if (!lib->self)
        return 0;
    /* through a union: ISO C has no cast from void * to a function pointer */
    union { void *p; char *(*f)(void); } core = { dlsym(lib->self, "openblas_get_corename") },
        conf = { dlsym(lib->self, "openblas_get_config") };
    union { void *p; int (*f)(void); } par = { dlsym(lib->self, "openblas_get_parallel") };
    lib->corename = core.p ? core.f : NULL;
    lib->config = conf.p ? conf.f : NULL;
    lib->parallel = par.p ? par.f : NULL;
    if (lib->corename && lib->config)
        return 1;
    dlclose(lib->self);
    lib->self = NULL;
    return 0;
}

static void blas_lib_close(blas_lib *lib)
{
    if (lib->self)
        dlclose(lib->self);
}

/* A DYNAMIC_ARCH OpenBLAS exports one gotoblas_<CORE> table per core it was built with. */
static int lib_has_core(const char *name, void *ctx)
{
    char sym[64] = "gotoblas_";
    size_t k = strlen(sym);
    for (size_t i = 0; name[i] && k + 1 < sizeof sym; i++)
        sym[k++] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 'a' + 'A' : name[i]);
    sym[k] = '\0';
    return dlsym(((blas_lib *)ctx)->self, sym) != NULL;
}

/* ------------------------------------------------------------------ select, describe */

void ft_blas_core_select(char **argv)
{
    blas_lib lib;
    if (getenv("OPENBLAS_CORETYPE") || getenv(GUARD) || !blas_lib_open(&lib))
        return;
    /* a build without DYNAMIC_ARCH has one kernel and ignores the variable */
    const char *config = lib.config();
    char vendor[13];
    cpu_vendor(vendor);
    /* Test hook: FTMPI_FAULT=blas:fallback pretends OpenBLAS fell back to its SSE3
     * kernel, as it does on CPUs newer than the library, so that the re-exec (and its
     * guard: the hook is inherited) is tested on any CPU with AVX */
    const char *fault = getenv("FTMPI_FAULT");
    const char *chosen = fault && !strcmp(fault, "blas:fallback") ? "Prescott" : lib.corename();
    const char *target = config && strstr(config, "DYNAMIC_ARCH")
                             ? ft_blas_core_better(chosen, cpu_isa_level(), cpu_is_amd(vendor),
                                                   lib_has_core, &lib)
                             : NULL;
    if (!target || setenv(GUARD, chosen, 1) || setenv("OPENBLAS_CORETYPE", target, 1)) {
        unsetenv(GUARD);
        blas_lib_close(&lib);
        return;
    }
    fflush(NULL);
    /* The program's own file, not argv[0]: that may be a bare name found on PATH, or
     * anything a launcher put there. Its resolved path rather than /proc/self/exe,
     * whose name would become the process's (ps, top and pgrep would show "exe"). The
     * pid, the environment (mpirun's and srun's included), the open descriptors, the CPU
     * affinity and the signal mask carry over; nothing of MPI has started yet. */
    char exe[4096];
    const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0 && (size_t)len < sizeof exe - 1) {
        exe[len] = '\0';
        execv(exe, argv);
    }
    execv("/proc/self/exe", argv); /* the file was renamed or deleted meanwhile */
    const int e = errno;
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(GUARD);
    fprintf(stderr,
            "%s: OpenBLAS runs its %s kernel on this %s CPU; re-executing with "
            "OPENBLAS_CORETYPE=%s failed (/proc/self/exe: %s): set that variable yourself "
            "for %s's faster GEMMs\n",
            argv[0], chosen, isa_names[cpu_isa_level()], target, strerror(e), target);
    blas_lib_close(&lib);
}

void ft_blas_core_describe(char *buf, size_t n)
{
    blas_lib lib;
    if (!blas_lib_open(&lib)) {
        snprintf(buf, n, "a CBLAS other than OpenBLAS (kernel not known to ftmpi)");
        return;
    }
    /* "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": the first two words */
    char name[64] = "OpenBLAS";
    const char *config = lib.config();
    if (config) {
        snprintf(name, sizeof name, "%s", config);
        char *sp = strchr(name, ' ');
        if (sp && (sp = strchr(sp + 1, ' ')))
            *sp = '\0';
    }
    const int par = lib.parallel ? lib.parallel() : -1;
    const char *threads = par == 0 ? "sequential" : par == 1 ? "pthreads"
                        : par == 2 ? "openmp" : "threads unknown";
    const char *core = lib.corename();
    const ft_blas_isa cpu = cpu_isa_level();
    char vendor[13];
    cpu_vendor(vendor);
    char cpu_text[96];
    snprintf(cpu_text, sizeof cpu_text, "%s CPU with %s%s%s", vendor[0] ? vendor : "this",
             isa_names[cpu],
#ifdef FT_BLAS_CORE_X86
             __builtin_cpu_supports("avx512bf16") ? ", AVX512-BF16" : "",
             cpu_has_amx_bf16() ? ", AMX-BF16" : ""
#else
             "", ""
#endif
    );
    const char *from = getenv(GUARD), *asked = getenv("OPENBLAS_CORETYPE");
    const int isa = ft_blas_core_isa(core);
    char who[256];
    if (from && asked)
        snprintf(who, sizeof who, "set by ftmpi (OPENBLAS_CORETYPE=%s%s): OpenBLAS chose %s on "
                 "this %s", asked, strcasecmp(asked, core) ? ", not taken" : "", from, cpu_text);
    else if (asked)
        snprintf(who, sizeof who, "set by the user (OPENBLAS_CORETYPE=%s), %s", asked, cpu_text);
    else
        snprintf(who, sizeof who, "OpenBLAS's choice on this %s%s", cpu_text,
                 isa >= 0 && isa < (int)cpu ? " (a weaker kernel than the CPU runs)" : "");
    snprintf(buf, n, "%s (%s), core %s (%s): %s", name, threads, core,
             isa >= 0 ? isa_names[isa] : "?", who);
    blas_lib_close(&lib);
}
