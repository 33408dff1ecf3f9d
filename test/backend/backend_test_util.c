#include "backend_test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bt_rng bt_rng_make(uint64_t seed)
{
    bt_rng r = {seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull};
    if (!r.state)
        r.state = 1;
    return r;
}

uint64_t bt_rng_u64(bt_rng *r)
{
    uint64_t x = r->state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->state = x;
    return x * 0x2545F4914F6CDD1Dull;
}

double bt_rng_uniform(bt_rng *r, double lo, double hi)
{
    double u = (double)(bt_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
    return lo + (hi - lo) * u;
}

int bt_rng_int(bt_rng *r, int n)
{
    return (int)(bt_rng_u64(r) % (uint64_t)n);
}

void bt_fill_uniform(float *x, size_t n, bt_rng *r, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)bt_rng_uniform(r, lo, hi);
}

static void *bt_xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "test: out of memory (%zu bytes)\n", bytes);
        abort();
    }
    return p;
}

double *bt_to_double(const float *x, size_t n)
{
    double *d = bt_xmalloc(n * sizeof *d);
    for (size_t i = 0; i < n; i++)
        d[i] = x[i];
    return d;
}

float *bt_copy_floats(const float *x, size_t n)
{
    float *f = bt_xmalloc(n * sizeof *f);
    memcpy(f, x, n * sizeof *f);
    return f;
}

ft_backend *bt_backend_create(void)
{
    ft_backend *be = NULL;
    ft_error err;
    if (ft_backend_cpu_create(&be, &err) != 0) {
        fprintf(stderr, "test: %s\n", err.msg);
        abort();
    }
    return be;
}

ft_backend *bt_backend_create_isa(const char *isa)
{
    setenv("FT_CPU_ISA", isa, 1);
    ft_backend *be = bt_backend_create();
    unsetenv("FT_CPU_ISA");
    return be;
}

float *bt_upload(ft_backend *be, const float *host, size_t n)
{
    float *d = be->ops->alloc(be, n * sizeof(float));
    if (!d)
        abort();
    if (host)
        be->ops->upload(be, d, host, n * sizeof(float));
    return d;
}

int32_t *bt_upload_i32(ft_backend *be, const int32_t *host, size_t n)
{
    int32_t *d = be->ops->alloc(be, n * sizeof(int32_t));
    if (!d)
        abort();
    if (host)
        be->ops->upload(be, d, host, n * sizeof(int32_t));
    return d;
}

void bt_download(ft_backend *be, float *host, const float *dev, size_t n)
{
    be->ops->download(be, host, dev, n * sizeof(float));
    be->ops->sync(be);
}

double bt_max_abs(const double *x, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

bool bt_close(const char *what, const float *got, const double *want, size_t n, double rel,
              double abs_tol)
{
    double scale = bt_max_abs(want, n);
    double worst = 0.0;
    size_t at = 0;
    bool finite = true;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!isfinite((double)got[i]) && got[i] != want[i])
            finite = false, e = INFINITY;
        if (e > worst || (i == 0 && e == 0.0))
            worst = e, at = i;
    }
    double tol = rel * scale + abs_tol;
    bool ok = finite && worst <= tol;
    if (!ok || getenv("FT_TEST_VERBOSE"))
        fprintf(stderr, "%s %s: max |err| %.3e (%.3e of max |ref| %.3e), tol %.3e, worst [%zu] got %.9g want %.9g\n",
                ok ? "  ok  " : "FAILED", what, worst, scale > 0 ? worst / scale : worst, scale,
                tol, at, n ? (double)got[at] : 0.0, n ? want[at] : 0.0);
    return ok;
}

bool bt_close_ff(const char *what, const float *got, const float *want, size_t n, double rel,
                 double abs_tol)
{
    double *w = bt_to_double(want, n);
    bool ok = bt_close(what, got, w, n, rel, abs_tol);
    free(w);
    return ok;
}

void bt_fd_gradient(double *grad, double *x, size_t n, double h, bt_objective_fn f, void *ctx)
{
    for (size_t i = 0; i < n; i++) {
        double saved = x[i];
        x[i] = saved + h;
        double up = f(ctx);
        x[i] = saved - h;
        double down = f(ctx);
        x[i] = saved;
        grad[i] = (up - down) / (2.0 * h);
    }
}

double bt_dot(const double *r, const double *y, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += r[i] * y[i];
    return s;
}
