/* ftmpi: fine-tune Llama-family models across MPI ranks. Command line and exit codes. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "comm/mpi_io_env.h"
#include "config/run_config.h"
#include "train/exit_record.h"
#include "train/plan.h"
#include "train/signals.h"
#include "train/watchdog.h"
#include "generate/eval_samples.h"
#include "io/tok_fingerprint.h"
#include "train/tok_check.h"
#include "train/run_length.h"
#include "train/trainer.h"
#include "util/blas_core.h"

enum { EXIT_OK = 0, EXIT_RUNTIME = 1, EXIT_USAGE = 2 };

static const char usage_text[] =
    "Usage: ftmpi [OPTIONS] CONFIG [KEY=VALUE ...]\n"
    "       mpirun -np N ftmpi [OPTIONS] CONFIG [KEY=VALUE ...]\n"
    "\n"
    "Fine-tune a Llama-architecture model. CONFIG is a libconfig file (see doc/config.md or\n"
    "`ftmpi --help-config`); each KEY=VALUE after it overrides one key of the file with the\n"
    "same validation, e.g.  max_steps=20 optimizer.lr=1e-4 data.train=/scratch/d.h5\n"
    "\n"
    "Options:\n"
    "  --eval-only    run no update: print the mean loss and perplexity over the rows of\n"
    "                 data.eval (or data.train when no eval set is configured)\n"
    "  --plan         allocate nothing: print the memory per rank of this config for every\n"
    "                 ZeRO stage, with and without offload_optimizer and activation\n"
    "                 checkpointing, and whether it fits the device, what the config's\n"
    "                 recompute adds to the step's FLOPs; last, the fastest checkpointing\n"
    "                 that fits at the config's stage (checkpoint_layers,\n"
    "                 checkpoint_keep_attention, checkpoint_keep_attention_output).\n"
    "                 Plan options (before or after CONFIG): -np N ranks (default 1),\n"
    "                 --device-memory GIB (default 80; leave room for the CUDA context\n"
    "                 and libraries), --seq-len T (default: data.train's)\n"
    "  --help-config  list every configuration key with its type, default and meaning\n"
    "  --exit-status DIR\n"
    "                 print the exit status that the launch named by $FTMPI_RUN_ID recorded\n"
    "                 in checkpoint_dir DIR on a stop signal (85) and exit 0; exit 1 with no\n"
    "                 output when it recorded none. For job scripts: Open MPI's mpirun\n"
    "                 exits 1 when it is sent SIGTERM, whatever its ranks returned\n"
    "                 (doc/slurm.md). Runs without MPI.\n"
    "  -h, --help     show this help and exit\n"
    "  -V, --version  print the version and build features and exit\n"
    "\n"
    "Output: one line per logged step (loss, lr, grad_norm, tokens/s, step time, elapsed,\n"
    "peak memory per rank = max over ranks) on rank 0's standard output; errors on\n"
    "standard error as one line naming the file, the place and the problem.\n"
    "\n"
    "Exit status: 0 success, 1 runtime error (I/O, numerical, out of memory, a full\n"
    "disk), 2 bad command line or configuration (also when found against the ranks, the\n"
    "build or the files it names at start-up: model.weights, data, the resume checkpoint,\n"
    "another tokenizer's data: one line, once), 85 stopped by SIGUSR1/SIGTERM after writing a\n"
    "checkpoint, or during start-up (requeue the job; resume = \"auto\" continues), 84\n"
    "stopped by a signal without checkpoint_dir (nothing saved), 86 a second signal\n"
    "stopped it at once, 87 no progress for comm_timeout seconds, from start-up on (a\n"
    "rank died or hangs), 88 the run collapsed (loss ln(vocab_size) with gradient norm 0\n"
    "for collapse_steps steps). With FTMPI_RUN_ID set and a checkpoint_dir, rank 0 also records\n"
    "85 in CHECKPOINT_DIR/.ftmpi-exit (see --exit-status).\n"
    "\n"
    "Environment: OMP_NUM_THREADS sets CPU threads per rank. OPENBLAS_CORETYPE, when set,\n"
    "is kept; otherwise, where OpenBLAS runs a weaker kernel than the CPU has, ftmpi\n"
    "restarts itself at once with it set (the start-up line 'ftmpi: blas' says so).\n";

static void print_version(void)
{
    printf("ftmpi %s\n", PACKAGE_VERSION);
#if defined(FT_CUDA_EMULATION)
    printf("backends: cpu cuda (on the CPU execution harness: a test build, no GPU used)\n");
#elif defined(FT_HAVE_CUDA)
    /* the device code's architectures: an H100 runs the wgmma attention kernels only
     * from sm_90a code */
    printf("backends: cpu cuda (device code: %s%s)\n", FT_CUDA_ARCHS,
#ifdef HAVE_CUDNN
           "; cuDNN attention"
#else
           ""
#endif
    );
#else
    printf("backends: cpu\n");
#endif
    unsigned maj, min, rel;
    H5get_libversion(&maj, &min, &rel);
    char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(mpi_version, &len);
    char *nl = strchr(mpi_version, '\n');
    if (nl)
        *nl = '\0';
    printf("hdf5 %u.%u.%u (parallel)\nmpi: %s\n", maj, min, rel, mpi_version);
    char blas[512];
    ft_blas_core_describe(blas, sizeof blas);
    printf("blas: %s\n", blas);
}

typedef struct cli {
    int eval_only;
    int plan;
    ft_plan_options plan_opt;
    const char *config;
    int n_overrides;
    char **overrides;
} cli;

/* Returns -1 to exit with `code` (after help/version), 0 to run. */
/* Plan options take a value; returns 1 if argv[*i] was one (consuming the value),
 * 0 if not a plan option, -1 on a bad value. */
static int parse_plan_option(int argc, char **argv, int *i, cli *c, int rank)
{
    const char *a = argv[*i];
    const char *names[] = { "-np", "--device-memory", "--seq-len" };
    int which = -1;
    for (int k = 0; k < 3; k++)
        if (!strcmp(a, names[k]))
            which = k;
    if (which < 0)
        return 0;
    char *end = NULL;
    double v = *i + 1 < argc ? strtod(argv[*i + 1], &end) : 0.0;
    if (*i + 1 >= argc || !end || *end || v <= 0 || (which != 1 && v != (int)v)) {
        if (rank == 0)
            fprintf(stderr, "ftmpi: %s needs a positive %s value (try ftmpi --help)\n", a,
                    which == 1 ? "numeric" : "integer");
        return -1;
    }
    if (which == 0)
        c->plan_opt.world_size = (int)v;
    else if (which == 1)
        c->plan_opt.device_gib = v;
    else
        c->plan_opt.seq_len = (int)v;
    (*i)++;
    return 1;
}

static int parse_cli(int argc, char **argv, cli *c, int rank, int *code)
{
    memset(c, 0, sizeof *c);
    c->plan_opt = (ft_plan_options){ .world_size = 1, .device_gib = 80.0 };
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
        const char *a = argv[i];
        int po = parse_plan_option(argc, argv, &i, c, rank);
        if (po < 0) {
            *code = EXIT_USAGE;
            return -1;
        }
        if (po > 0)
            continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            if (rank == 0)
                fputs(usage_text, stdout);
            *code = EXIT_OK;
            return -1;
        } else if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
            if (rank == 0)
                print_version();
            *code = EXIT_OK;
            return -1;
        } else if (!strcmp(a, "--help-config")) {
            if (rank == 0)
                ft_run_config_print_reference(stdout);
            *code = EXIT_OK;
            return -1;
        } else if (!strcmp(a, "--eval-only")) {
            c->eval_only = 1;
        } else if (!strcmp(a, "--plan")) {
            c->plan = 1;
        } else if (!strcmp(a, "--")) {
            i++;
            break;
        } else {
            if (rank == 0)
                fprintf(stderr, "ftmpi: unknown option '%s' (try ftmpi --help)\n", a);
            *code = EXIT_USAGE;
            return -1;
        }
    }
    if (i >= argc) {
        if (rank == 0)
            fprintf(stderr, "ftmpi: no config file given (usage: ftmpi [OPTIONS] CONFIG "
                            "[KEY=VALUE ...]; try ftmpi --help)\n");
        *code = EXIT_USAGE;
        return -1;
    }
    c->config = argv[i++];
    /* after CONFIG: KEY=VALUE overrides, and (with --plan) plan options */
    c->overrides = calloc((size_t)(argc - i + 1), sizeof *c->overrides);
    for (; i < argc; i++) {
        int po = c->plan ? parse_plan_option(argc, argv, &i, c, rank) : 0;
        if (po < 0) {
            *code = EXIT_USAGE;
            return -1;
        }
        if (po == 0)
            c->overrides[c->n_overrides++] = argv[i];
    }
    return 0;
}

/* Rank 0's completions go to its log and metrics file. */
static void report_sample(void *ctx, long step, int index, int count, const char *prompt,
                          const char *text, size_t len, const char *stop)
{
    const ft_trainer *t = ctx;
    ft_report_sample(t->out, t->metrics, step, index, count, prompt, text, len, stop);
}

/* The trainer's after-eval step: greedy completions of eval_prompts. */
static int run_eval_samples(void *ctx, ft_trainer *t, long step, ft_error *err)
{
    ft_watchdog_progress(t->watchdog, "generating the eval_prompts samples");
    ft_param_source src = ft_trainer_model_source(t);
    const ft_lora_adapters adapters = { &t->adapter_layout, &t->lora,
                                        ft_engine_param_source(t->engine) };
    const bool reports = t->out || t->metrics;
    return ft_eval_samples_run(ctx, step, &t->layout, t->be, &src, t->base ? &adapters : NULL,
                               reports ? report_sample : NULL, t, err);
}

/* eval_prompts: every rank encodes them alike (one message for all) and generates. */
static int setup_eval_samples(ft_trainer *t, ft_eval_samples **samples, bool eval_only,
                              ft_error *err)
{
    if (!t->cfg->eval_prompts || eval_only)
        return 0;
    /* the samples' tokenizer is the run's too (train/tok_check.h) */
    char fp[FT_TOK_FINGERPRINT_LEN] = "";
    const char *tok = t->cfg->eval_tokenizer;
    if (strcmp(tok, "bytes") != 0) {
        if (ft_tok_fingerprint_file(tok, fp, err)) {
            err->flags |= FT_ERR_SHARED | FT_ERR_CONFIG;
            return ft_fail_context(err, "eval_tokenizer");
        }
        if (ft_tok_identity_meet(&t->tok, t->cfg, "eval_tokenizer", tok, fp, err))
            return -1;
    }
    if (ft_eval_samples_create(samples, t->cfg, &t->layout.config, err)) {
        err->flags |= FT_ERR_SHARED | FT_ERR_CONFIG;
        return -1;
    }
    t->after_eval = run_eval_samples;
    t->after_eval_ctx = *samples;
    return 0;
}

/* *shared: the error (if any) is one that every rank holds alike (FT_ERR_SHARED). */
static int run(const cli *c, ft_comm *comm, ft_watchdog *wd, ft_startup_timer *startup,
               int *code, int *shared)
{
    ft_error err = { { 0 }, 0 };
    ft_run_config cfg;
    memset(&cfg, 0, sizeof cfg);
    if (ft_run_config_load(&cfg, c->config, c->n_overrides, c->overrides, &err)) {
        /* Every rank parsed the same text: rank 0 speaks for all. */
        if (comm->rank == 0)
            fprintf(stderr, "ftmpi: %s\n", err.msg);
        ft_run_config_free(&cfg);
        *code = EXIT_USAGE;
        return -1;
    }
    ft_watchdog_configure(wd, c->plan ? 0.0 : cfg.comm_timeout, comm->rank);
    ft_startup_mark(startup, "config");
    if (!c->plan && ft_run_config_check_run(&cfg, comm->size, &err)) {
        if (comm->rank == 0)
            fprintf(stderr, "ftmpi: %s\n", err.msg);
        ft_run_config_free(&cfg);
        *code = EXIT_USAGE;
        return -1;
    }
    /* a plan for -np N ranks that could not run on N ranks says so, as the run would */
    if (c->plan && ft_run_config_check_batch(&cfg, c->plan_opt.world_size, &err)) {
        if (comm->rank == 0)
            fprintf(stderr, "ftmpi: %s\n", err.msg);
        ft_run_config_free(&cfg);
        *code = EXIT_USAGE;
        return -1;
    }
    if (c->plan) {
        int rc = comm->rank == 0 ? ft_plan_print(stdout, &cfg, &c->plan_opt, &err) : 0;
        if (rc)
            fprintf(stderr, "ftmpi: %s\n", err.msg);
        ft_run_config_free(&cfg);
        /* a config the run would refuse (lora.targets) is refused as the run would: 2 */
        *code = !rc ? EXIT_OK : (err.flags & FT_ERR_CONFIG) ? EXIT_USAGE : EXIT_RUNTIME;
        return rc;
    }
    if (ft_run_length_resolve(&cfg, c->eval_only, &err)) { /* num_epochs: rows -> steps */
        if (comm->rank == 0)
            fprintf(stderr, "ftmpi: %s\n", err.msg);
        ft_run_config_free(&cfg);
        *code = (err.flags & FT_ERR_CONFIG) ? EXIT_USAGE : EXIT_RUNTIME;
        return -1;
    }
    ft_trainer t;
    ft_eval_samples *samples = NULL;
    int rc = ft_trainer_setup(&t, &cfg, comm, stdout, c->eval_only, wd, startup, &err) ||
             setup_eval_samples(&t, &samples, c->eval_only, &err);
    if (!rc && comm->rank == 0) {
        char blas[512];
        ft_blas_core_describe(blas, sizeof blas);
        printf("ftmpi: blas %s\n", blas);
    }
    if (!rc && c->eval_only) {
        const char *path = cfg.eval_data ? cfg.eval_data : cfg.train_data;
        double loss;
        long n;
        rc = ft_trainer_evaluate(&t, path, cfg.eval_batches * cfg.global_batch_size, &loss, &n,
                                 &err);
        if (!rc && comm->rank == 0)
            printf("eval %s | loss %.6f | ppl %.4f | %ld target tokens\n", path, loss, exp(loss),
                   n);
    } else if (!rc) {
        rc = ft_trainer_run(&t, &err);
    }
    /* an error every rank holds alike is printed once; a rank's own error names it */
    *shared = rc && (err.flags & FT_ERR_SHARED);
    if (rc && *shared && comm->rank == 0)
        fprintf(stderr, "ftmpi: %s\n", err.msg);
    else if (rc && !*shared)
        fprintf(stderr, "ftmpi: rank %d: %s\n", comm->rank, err.msg);
    const int signalled = t.stopped_by_signal;
    ft_trainer_free(&t);
    ft_eval_samples_free(samples);
    ft_run_config_free(&cfg);
    *code = rc ? ((err.flags & FT_ERR_CONFIG) ? EXIT_USAGE : EXIT_RUNTIME)
               : signalled ? signalled : EXIT_OK;
    return rc;
}

/* comm_timeout as the command line and config give it, read before MPI_Init so that the
 * watchdog covers MPI_Init's own exchange, and the collectives up to the trainer's set-up,
 * with the user's timeout: a rank stopped in its first second otherwise left the others in
 * MPI_Init for the 600 s default. Nothing is printed here: a config that does not load
 * means the default now, and is reported after MPI_Init as usual. */
static double startup_comm_timeout(int argc, char **argv)
{
    cli c;
    int code = 0;
    double timeout = FT_DEFAULT_COMM_TIMEOUT;
    if (parse_cli(argc, argv, &c, -1, &code) == 0 && !c.plan) {
        ft_run_config cfg;
        memset(&cfg, 0, sizeof cfg);
        ft_error err = { { 0 }, 0 };
        if (ft_run_config_load(&cfg, c.config, c.n_overrides, c.overrides, &err) == 0)
            timeout = cfg.comm_timeout;
        ft_run_config_free(&cfg);
    }
    free(c.overrides);
    return timeout;
}

/* This process's rank as the launcher tells it, before MPI_Init (-1: unknown). */
static int launcher_rank(void)
{
    const char *names[] = { "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (getenv(names[i]))
            return atoi(getenv(names[i]));
    return -1;
}

/* `ftmpi --exit-status DIR` (train/exit_record.h): before MPI_Init, so that a job script
 * can call it outside any launcher. */
static int exit_status_command(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "ftmpi: --exit-status takes one argument, the checkpoint_dir\n");
        return EXIT_USAGE;
    }
    int code = 0;
    if (ft_exit_record_read(argv[2], getenv("FTMPI_RUN_ID"), &code))
        return 1;
    printf("%d\n", code);
    return 0;
}

int main(int argc, char **argv)
{
    ft_blas_core_select(argv); /* may re-execute: before any thread, BLAS or MPI call */
    if (argc >= 2 && strcmp(argv[1], "--exit-status") == 0)
        return exit_status_command(argc, argv);
    ft_startup_timer startup;
    ft_startup_begin(&startup);
    /* Watched from the first moment: a rank that stops during MPI_Init, the config or
     * set-up leaves the others waiting in a collective; comm_timeout applies from here on
     * (its default where the config does not load). */
    ft_watchdog *wd = ft_watchdog_start(FT_DEFAULT_COMM_TIMEOUT, launcher_rank());
    ft_watchdog_progress(wd, "reading the config's comm_timeout"); /* a FIFO config: watched */
    const double startup_timeout = startup_comm_timeout(argc, argv);
    ft_watchdog_configure(wd, startup_timeout, launcher_rank());
    ft_watchdog_progress(wd, "starting MPI");
    /* from the first moment: SIGTERM or SIGUSR1 during start-up must end in a documented
     * code (85/84 after set-up), never the default 143/138 */
    ft_signals_install();
    ft_mpi_io_env_defaults(); /* paths of 245 bytes and more (comm/mpi_io_env.h) */
    int provided;
    /* MULTIPLE: the watchdog thread's roll call (train/rollcall.h); the rest of ftmpi
     * calls MPI from the main thread only */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ft_watchdog_configure(wd, startup_timeout, rank);
    ft_watchdog_attach_mpi(wd);
    ft_watchdog_progress(wd, "reading the command line and the config");

    cli c;
    int code = EXIT_OK;
    if (parse_cli(argc, argv, &c, rank, &code)) {
        free(c.overrides);
        MPI_Finalize();
        return code;
    }
    ft_error err;
    ft_comm *comm = NULL;
    if (ft_comm_mpi_create(&comm, &err)) {
        fprintf(stderr, "ftmpi: rank %d: %s\n", rank, err.msg);
        MPI_Abort(MPI_COMM_WORLD, EXIT_RUNTIME);
    }
    ft_startup_mark(&startup, "mpi");
    int shared = 0;
    int rc = run(&c, comm, wd, &startup, &code, &shared);
    free(c.overrides);
    /* A runtime failure may have hit only some ranks while others wait in a
     * collective: abort the job rather than hang. Config errors, and errors the ranks
     * agreed on, hit all alike: every rank ends by itself. */
    if (rc && code == EXIT_RUNTIME && size > 1 && !shared)
        MPI_Abort(MPI_COMM_WORLD, code);
    ft_watchdog_progress(wd, "finishing MPI");
    ft_comm_destroy(comm);
    MPI_Finalize();
    ft_watchdog_stop(wd);
    return code;
}
