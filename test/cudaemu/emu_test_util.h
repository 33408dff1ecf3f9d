/* Helpers for the tests of the CUDA harness's host side: running a piece of code that
 * must end in a finding (in a forked child: a finding aborts the process) and checking
 * the message. Header-only, static functions: each test program includes it once. */
#ifndef FT_EMU_TEST_UTIL_H
#define FT_EMU_TEST_UTIL_H

#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* What a child printed on stderr (owned by the caller) and how it ended. */
typedef struct child_result {
    char *err;
    int aborted; /* ended by SIGABRT */
    int exit_code; /* if it exited */
} child_result;

/* Runs fn(arg) in a forked child with stderr captured; the child exits 0 if fn returns. */
static child_result run_in_child(void (*fn)(void *), void *arg)
{
    int pipefd[2];
    child_result r = { NULL, 0, -1 };
    if (pipe(pipefd) != 0)
        fail_msg("pipe failed");
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        fail_msg("fork failed");
    if (pid == 0) {
        close(pipefd[0]);
        dup2(pipefd[1], 2);
        fn(arg);
        fflush(stderr);
        _exit(0);
    }
    close(pipefd[1]);
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (n + 1024 > cap)
            buf = realloc(buf, cap *= 2);
        ssize_t got = read(pipefd[0], buf + n, cap - n - 1);
        if (got <= 0)
            break;
        n += (size_t)got;
    }
    buf[n] = '\0';
    close(pipefd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    r.err = buf;
    r.aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

/* fn(arg) must abort with a finding whose message contains every string of the
 * NULL-terminated list. */
static void expect_finding(void (*fn)(void *), void *arg, ...)
{
    child_result r = run_in_child(fn, arg);
    if (!r.aborted) {
        fprintf(stderr, "expected a finding; the child ended with exit code %d and said:\n%s\n",
                r.exit_code, r.err);
        free(r.err);
        fail_msg("no finding");
    }
    if (strncmp(r.err, "cudaemu: ", 9) != 0 && !strstr(r.err, "\ncudaemu: ")) {
        fprintf(stderr, "the finding does not start with \"cudaemu: \":\n%s\n", r.err);
        free(r.err);
        fail_msg("badly formed finding");
    }
    va_list ap;
    va_start(ap, arg);
    for (const char *want = va_arg(ap, const char *); want; want = va_arg(ap, const char *))
        if (!strstr(r.err, want)) {
            fprintf(stderr, "the finding lacks \"%s\":\n%s\n", want, r.err);
            free(r.err);
            va_end(ap);
            fail_msg("wrong finding");
        }
    va_end(ap);
    if (getenv("EMU_TEST_VERBOSE")) /* to read the messages themselves */
        fprintf(stderr, "--- expected finding:\n%s", r.err);
    free(r.err);
}

#endif
