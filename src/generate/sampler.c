#include "generate/sampler.h"

#include <math.h>
#include <stdlib.h>

#include "util/rng.h"

/* RNG stream family of the sampler (streams are per prompt; mixed with this tag so
 * that they never coincide with other users of the seed). */
#define SAMPLER_STREAM_TAG 0x73616d706c6572ull /* "sampler" */

typedef struct cand {
    float logit;
    int32_t id;
} cand;

struct ft_sampler {
    ft_sampler_config cfg;
    int vocab;
    cand *c;       /* [vocab] candidates, best first after ranking */
    double *p;     /* [vocab] their probabilities */
};

int ft_sampler_config_check(const ft_sampler_config *c, ft_error *err)
{
    if (!(c->temperature >= 0.0) || !isfinite(c->temperature))
        return ft_fail(err, "--temperature must be a finite number >= 0 (0 = greedy)");
    if (c->top_k < 0)
        return ft_fail(err, "--top-k must be >= 0 (0 = no limit)");
    if (!(c->top_p > 0.0 && c->top_p <= 1.0))
        return ft_fail(err, "--top-p must be in (0, 1] (1 = no limit)");
    return 0;
}

int ft_sampler_create(ft_sampler **out, const ft_sampler_config *c, int vocab, ft_error *err)
{
    *out = NULL;
    if (ft_sampler_config_check(c, err))
        return -1;
    if (vocab < 1)
        return ft_fail(err, "sampler: empty vocabulary");
    ft_sampler *s = calloc(1, sizeof *s);
    if (s) {
        s->c = malloc((size_t)vocab * sizeof *s->c);
        s->p = malloc((size_t)vocab * sizeof *s->p);
    }
    if (!s || !s->c || !s->p) {
        ft_sampler_free(s);
        return ft_fail(err, "out of host memory");
    }
    s->cfg = *c;
    s->vocab = vocab;
    *out = s;
    return 0;
}

void ft_sampler_free(ft_sampler *s)
{
    if (!s)
        return;
    free(s->c);
    free(s->p);
    free(s);
}

/* a ranks before b: larger logit, then lower id. NaN ranks last. */
static int better(const cand *a, const cand *b)
{
    const int an = isnan(a->logit), bn = isnan(b->logit);
    if (an != bn)
        return bn;
    if (!an && a->logit != b->logit)
        return a->logit > b->logit;
    return a->id < b->id;
}

static int cmp_cand(const void *x, const void *y)
{
    const cand *a = x, *b = y;
    return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

int32_t ft_argmax(const float *logits, int vocab)
{
    int32_t best = 0;
    for (int32_t i = 1; i < vocab; i++)
        if (isnan(logits[best]) ? !isnan(logits[i]) : logits[i] > logits[best])
            best = i;
    return best;
}

/* Moves the k best candidates to c[0..k) (in no order): a quickselect on the ranking. */
static void select_top(cand *c, int n, int k)
{
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        cand pivot = c[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (better(&c[i], &pivot))
                i++;
            while (better(&pivot, &c[j]))
                j--;
            if (i <= j) {
                cand t = c[i];
                c[i++] = c[j];
                c[j--] = t;
            }
        }
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            break;
    }
}

int32_t ft_sampler_pick(ft_sampler *s, const float *logits, uint64_t stream, uint64_t step)
{
    const ft_sampler_config *cfg = &s->cfg;
    const int V = s->vocab;
    if (cfg->temperature == 0.0 || cfg->top_k == 1)
        return ft_argmax(logits, V);

    /* candidates; only the top k need ranking, and only the nucleus needs an order */
    int n = V;
    for (int i = 0; i < V; i++)
        s->c[i] = (cand){ logits[i], i };
    if (cfg->top_k > 0 && cfg->top_k < V) {
        select_top(s->c, V, cfg->top_k);
        n = cfg->top_k;
    }
    if (cfg->top_p < 1.0)
        qsort(s->c, (size_t)n, sizeof *s->c, cmp_cand);
    int best = 0;
    for (int i = 1; i < n; i++)
        if (better(&s->c[i], &s->c[best]))
            best = i;
    if (!isfinite(s->c[best].logit))
        return s->c[best].id; /* nothing finite to draw from */

    /* p_i = exp((l_i - l_max) / T) / z over the candidates, in double; -inf and NaN
     * logits get probability 0 */
    const double inv_t = 1.0 / cfg->temperature, top = s->c[best].logit;
    double z = 0.0;
    for (int i = 0; i < n; i++) {
        const float l = s->c[i].logit;
        s->p[i] = isfinite(l) ? exp(((double)l - top) * inv_t) : 0.0;
        z += s->p[i];
    }
    /* nucleus: the shortest prefix with mass >= top_p */
    if (cfg->top_p < 1.0) {
        double mass = 0.0;
        int keep = 0;
        while (keep < n && mass < cfg->top_p * z)
            mass += s->p[keep++];
        n = keep > 0 ? keep : 1;
        z = mass;
    }
    /* inverse CDF at u in (0, 1) */
    const double u = ft_rng_uniform(cfg->seed, ft_mix64(SAMPLER_STREAM_TAG ^ stream), step) * z;
    double acc = 0.0;
    for (int i = 0; i < n; i++) {
        acc += s->p[i];
        if (u < acc)
            return s->c[i].id;
    }
    /* u rounded up to the total: the last candidate with nonzero probability */
    while (n > 1 && s->p[n - 1] == 0.0)
        n--;
    return s->c[n - 1].id;
}
