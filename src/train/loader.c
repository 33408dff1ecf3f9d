#include "train/loader.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "io/dataset.h"

typedef struct row_buffers {
    uint32_t *tokens;
    uint8_t *mask;
    int32_t *segment;
} row_buffers;

struct ft_loader {
    ft_dataset ds;         /* POSIX handle, used by one thread at a time */
    int rows_per_step, width, background;
    row_buffers buf[2];
    int front;             /* index handed to the trainer; 1 - front is filled */

    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int started, quit;
    int pending;           /* a request waits for the thread */
    int busy;              /* the thread is reading */
    int ready;             /* the back buffer holds `ready_tag` */
    long want_tag, ready_tag;
    int64_t *want_rows;
    int want_n;
    int failed;
    ft_error error;
    ft_loader_stats stats;
};

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int read_into(ft_loader *l, row_buffers *b, const int64_t *rows, int n, ft_error *err)
{
    const double t0 = mono_now();
    int rc = ft_dataset_read_rows(&l->ds, rows, n, b->tokens, b->mask, b->segment, err);
    l->stats.seconds_reading += mono_now() - t0;
    l->stats.rows_read += n;
    return rc;
}

static void *worker(void *arg)
{
    ft_loader *l = arg;
    pthread_mutex_lock(&l->lock);
    for (;;) {
        while (!l->pending && !l->quit)
            pthread_cond_wait(&l->cond, &l->lock);
        if (l->quit)
            break;
        l->pending = 0;
        l->busy = 1;
        const long tag = l->want_tag;
        const int n = l->want_n;
        row_buffers *b = &l->buf[1 - l->front];
        pthread_mutex_unlock(&l->lock);
        ft_error err;
        int rc = read_into(l, b, l->want_rows, n, &err);
        pthread_mutex_lock(&l->lock);
        l->busy = 0;
        if (rc) {
            l->failed = 1;
            l->error = err;
        } else {
            l->ready = 1;
            l->ready_tag = tag;
        }
        pthread_cond_broadcast(&l->cond);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

int ft_loader_create(ft_loader **out, const char *path, int rows_per_step, int width,
                     int background, ft_error *err)
{
    *out = NULL;
    ft_loader *l = calloc(1, sizeof *l);
    if (!l)
        return ft_fail(err, "out of host memory");
    l->rows_per_step = rows_per_step;
    l->width = width;
    l->background = background;
    const size_t n = (size_t)rows_per_step * (size_t)width;
    for (int i = 0; i < 2; i++) {
        l->buf[i].tokens = malloc(n * sizeof(uint32_t));
        l->buf[i].mask = malloc(n);
        l->buf[i].segment = malloc(n * sizeof(int32_t));
    }
    l->want_rows = malloc((size_t)rows_per_step * sizeof(int64_t));
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->cond, NULL);
    if (!l->buf[0].tokens || !l->buf[0].mask || !l->buf[0].segment || !l->buf[1].tokens ||
        !l->buf[1].mask || !l->buf[1].segment || !l->want_rows) {
        ft_loader_free(l);
        return ft_fail(err, "out of host memory for the data loader");
    }
    if (ft_dataset_open(&l->ds, path, MPI_COMM_NULL, err)) {
        ft_loader_free(l);
        return -1;
    }
    if (background) {
        if (pthread_create(&l->thread, NULL, worker, l)) {
            ft_loader_free(l);
            return ft_fail(err, "cannot start the data loader thread");
        }
        l->started = 1;
    }
    *out = l;
    return 0;
}

void ft_loader_free(ft_loader *l)
{
    if (!l)
        return;
    if (l->started) {
        pthread_mutex_lock(&l->lock);
        l->quit = 1;
        pthread_cond_broadcast(&l->cond);
        pthread_mutex_unlock(&l->lock);
        pthread_join(l->thread, NULL);
    }
    if (l->ds.tokens > 0 || l->ds.file.id > 0)
        ft_dataset_close(&l->ds);
    for (int i = 0; i < 2; i++) {
        free(l->buf[i].tokens);
        free(l->buf[i].mask);
        free(l->buf[i].segment);
    }
    free(l->want_rows);
    pthread_mutex_destroy(&l->lock);
    pthread_cond_destroy(&l->cond);
    free(l);
}

void ft_loader_request(ft_loader *l, long tag, const int64_t *rows, int n)
{
    if (!l->background || n > l->rows_per_step)
        return;
    pthread_mutex_lock(&l->lock);
    while (l->busy || l->pending) /* one request in flight */
        pthread_cond_wait(&l->cond, &l->lock);
    memcpy(l->want_rows, rows, (size_t)n * sizeof *rows);
    l->want_n = n;
    l->want_tag = tag;
    l->ready = 0;
    l->pending = 1;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
}

const uint32_t *ft_loader_peek(ft_loader *l, long tag)
{
    if (!l->background)
        return NULL;
    pthread_mutex_lock(&l->lock);
    const int have = l->ready && l->ready_tag == tag && !l->busy && !l->pending;
    pthread_mutex_unlock(&l->lock);
    /* the back buffer: the thread writes it only for a later request */
    return have ? l->buf[1 - l->front].tokens : NULL;
}

void ft_loader_quiesce(ft_loader *l)
{
    if (!l || !l->background)
        return;
    pthread_mutex_lock(&l->lock);
    while (l->busy || l->pending)
        pthread_cond_wait(&l->cond, &l->lock);
    pthread_mutex_unlock(&l->lock);
}

int ft_loader_take(ft_loader *l, long tag, const int64_t *rows, int n, uint32_t **tokens,
                   uint8_t **loss_mask, int32_t **segment, ft_error *err)
{
    if (n > l->rows_per_step)
        return ft_fail(err, "data loader: %d rows requested, sized for %d", n, l->rows_per_step);
    const double t0 = mono_now();
    int have = 0;
    if (l->background) {
        pthread_mutex_lock(&l->lock);
        while ((l->busy || l->pending) && l->want_tag == tag)
            pthread_cond_wait(&l->cond, &l->lock);
        if (l->failed) {
            l->failed = 0;
            pthread_mutex_unlock(&l->lock);
            *err = l->error;
            return -1;
        }
        have = l->ready && l->ready_tag == tag;
        if (have) {
            l->front = 1 - l->front;
            l->ready = 0;
        }
        pthread_mutex_unlock(&l->lock);
        if (!have)
            ft_loader_quiesce(l); /* a stale request must finish before this thread reads */
    }
    if (!have) { /* the thread is idle here: read in this thread */
        if (read_into(l, &l->buf[1 - l->front], rows, n, err))
            return -1;
        l->front = 1 - l->front;
        pthread_mutex_lock(&l->lock);
        l->ready = 0; /* whatever a stale request left behind is gone */
        pthread_mutex_unlock(&l->lock);
    }
    l->stats.seconds_waited += mono_now() - t0;
    *tokens = l->buf[l->front].tokens;
    *loss_mask = l->buf[l->front].mask;
    *segment = l->buf[l->front].segment;
    return 0;
}

ft_loader_stats ft_loader_get_stats(const ft_loader *l) { return l->stats; }
