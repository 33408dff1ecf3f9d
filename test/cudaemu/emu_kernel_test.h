/* Helpers of the kernel-side harness tests (test_emu_kernels.cu, test_emu_mma.cu): a
 * counting CHECK and a runner for code that must end in a finding. Header-only: each test
 * program includes it once. */
#ifndef FT_EMU_KERNEL_TEST_H
#define FT_EMU_KERNEL_TEST_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* Runs fn(arg) in a forked child (a finding aborts the process); it must abort and say
 * `expect` on stderr. Prints "ok   finding: NAME" or counts a failure. */
static void expect_finding(const char *name, void (*fn)(int), int arg, const char *expect)
{
    int pipefd[2];
    if (pipe(pipefd) != 0)
        exit(1);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        alarm(20); /* a hang is a failure too */
        fn(arg);
        _exit(0);
    }
    close(pipefd[1]);
    char buf[4096];
    size_t len = 0;
    ssize_t r;
    while ((r = read(pipefd[0], buf + len, sizeof buf - 1 - len)) > 0)
        len += (size_t)r;
    buf[len] = 0;
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    int ok = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(buf, expect);
    CHECK(ok, "%s: want an abort saying \"%s\"; stderr: %s", name, expect, buf);
    if (ok)
        printf("ok   finding: %s\n", name);
}

#endif
