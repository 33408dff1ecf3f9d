/* The data loader's look at the next step's rows (src/train/loader.c, ft_loader_peek):
 * NULL until the background read of that tag has completed, never a wait; then the rows'
 * tokens, the very buffer the next take hands over, unchanged by the peek; NULL for
 * another tag, after the take, and without a background thread. */
#include <mpi.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "io/dataset.h"
#include "train/loader.h"

#define ROWS 6
#define SEQ 5
#define W (SEQ + 1)

static char path[64];

/* Token j of row r is 10 r + j: a row's tokens say which row they are. */
static void write_dataset(void)
{
    ft_dataset_info info = { .rows = ROWS, .seq_len = SEQ, .vocab_size = 100, .bos_token_id = 1,
                             .eos_token_id = 2, .pad_token_id = -1, .n_documents = ROWS,
                             .n_target_tokens = ROWS * SEQ, .tokenizer_hash = "abc",
                             .template_name = "t" };
    uint32_t tokens[ROWS * W];
    uint8_t mask[ROWS * W];
    int32_t segment[ROWS * W] = { 0 };
    for (int r = 0; r < ROWS; r++)
        for (int j = 0; j < W; j++) {
            tokens[r * W + j] = (uint32_t)(10 * r + j);
            mask[r * W + j] = j > 0;
        }
    ft_error err;
    if (ft_dataset_write(path, &info, tokens, mask, segment, &err))
        fail_msg("%s", err.msg);
}

static void assert_rows(const uint32_t *tokens, const int64_t *rows, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < W; j++)
            assert_int_equal(tokens[i * W + j], 10 * rows[i] + j);
}

/* Peeks at tag until the read is done (bounded: 10 s). */
static const uint32_t *peek_when_read(ft_loader *l, long tag)
{
    for (int i = 0; i < 10000; i++) {
        const uint32_t *t = ft_loader_peek(l, tag);
        if (t)
            return t;
        nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
    }
    return NULL;
}

static void test_peek_then_take(void **state)
{
    (void)state;
    ft_loader *l;
    ft_error err;
    assert_int_equal(ft_loader_create(&l, path, 2, W, 1, &err), 0);
    const int64_t first[2] = { 4, 1 }, second[2] = { 0, 5 };
    uint32_t *tokens;
    uint8_t *mask;
    int32_t *seg;
    ft_loader_request(l, 7, first, 2);
    const uint32_t *peeked = peek_when_read(l, 7);
    assert_non_null(peeked);
    assert_rows(peeked, first, 2);
    assert_null(ft_loader_peek(l, 8)); /* another step's: not read */
    assert_ptr_equal(ft_loader_peek(l, 7), peeked); /* peeking takes nothing */
    assert_int_equal(ft_loader_take(l, 7, first, 2, &tokens, &mask, &seg, &err), 0);
    assert_ptr_equal(tokens, peeked);
    assert_rows(tokens, first, 2);
    assert_null(ft_loader_peek(l, 7)); /* taken */
    /* the next step's, while the taken buffer stays the trainer's */
    ft_loader_request(l, 8, second, 2);
    peeked = peek_when_read(l, 8);
    assert_non_null(peeked);
    assert_true(peeked != tokens);
    assert_rows(peeked, second, 2);
    assert_rows(tokens, first, 2);
    assert_int_equal(ft_loader_take(l, 8, second, 2, &tokens, &mask, &seg, &err), 0);
    assert_ptr_equal(tokens, peeked);
    ft_loader_free(l);
}

static void test_no_thread_no_peek(void **state)
{
    (void)state;
    ft_loader *l;
    ft_error err;
    assert_int_equal(ft_loader_create(&l, path, 2, W, 0, &err), 0);
    const int64_t rows[2] = { 2, 3 };
    ft_loader_request(l, 1, rows, 2);
    assert_null(ft_loader_peek(l, 1));
    ft_loader_free(l);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv); /* ft_dataset_write writes on MPI_COMM_SELF */
    snprintf(path, sizeof path, "/tmp/ftmpi_loader_peek_%d.h5", (int)getpid());
    write_dataset();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peek_then_take),
        cmocka_unit_test(test_no_thread_no_peek),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(path);
    MPI_Finalize();
    return rc;
}
