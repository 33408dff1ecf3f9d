/* Runs code that must end the process with abort() (a finding of the CUDA harness, a fatal
 * error of the CUDA backend) in a forked child, and says whether it did, with the expected
 * text on stderr. Header-only: each test program includes it once. */
#ifndef FT_TEST_EXPECT_ABORT_H
#define FT_TEST_EXPECT_ABORT_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef FT_COVERAGE
/* test/cudaemu/coverage.sh builds with -DFT_COVERAGE: a child that aborts would die before
 * gcov writes its counters, so the lines that lead to each abort would count as never run. */
#ifdef __cplusplus
extern "C" void __gcov_dump(void);
#else
extern void __gcov_dump(void);
#endif
static void expect_abort_flush_coverage(int sig)
{
    __gcov_dump();
    signal(sig, SIG_DFL);
    raise(sig);
}
#endif

/* Call first in a process that is meant to abort (a child, or a program exec'd by one). */
static inline void expect_abort_prepare_child(void)
{
#ifdef FT_COVERAGE
    signal(SIGABRT, expect_abort_flush_coverage);
#endif
}

/* fn(arg) in a child (20 s at most: a hang fails too); 1 if it aborted and its stderr
 * contains `expect`. What it said is copied to said[n] for the failure message. */
static int child_aborts_saying(void (*fn)(int), int arg, const char *expect, char *said,
                               size_t n)
{
    int pipefd[2];
    if (pipe(pipefd) != 0)
        exit(1);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        alarm(20);
        expect_abort_prepare_child();
        fn(arg);
        _exit(0);
    }
    close(pipefd[1]);
    size_t len = 0;
    ssize_t r;
    while (len + 1 < n && (r = read(pipefd[0], said + len, n - 1 - len)) > 0)
        len += (size_t)r;
    said[len] = 0;
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(said, expect) != NULL;
}

#endif
