/* The attention mask rule, once, for host and device code: which keys a query
 * sees and which key tiles a query tile must visit. Every attention
 * implementation (CPU tiles and decode, CUDA fp32, tensor-core and decode) and
 * the benchmarks' FLOP counts read it, so the rule cannot drift between them.
 *
 * Rule: query i (a position in its row) sees key j iff
 *   j <= i                          causal
 *   segment[j] == segment[i]        same document (packed rows; no segments: one)
 *   window == 0 || j > i - window   sliding window (Mistral): at most `window`
 *                                   keys, the query itself included
 * The document part needs the ids, which each implementation reads its own way
 * (global memory, shared memory, ranges of granules); this header holds the
 * positional part and the tile bounds that follow from it.
 *
 * Tiles. A query tile [q0, q0+qn) and a key tile [k0, k0+kn) meet only if some
 * pair is visible. Causality bounds the key tiles at the query tile's last row;
 * the window bounds them below: every key of a tile at or before q0 - window is
 * outside the window of the tile's first (furthest-reaching) query, hence of
 * all. Skipping such a tile changes no bit: it would add exact zeros. */
#ifndef FT_BACKEND_ATTENTION_MASK_H
#define FT_BACKEND_ATTENTION_MASK_H

#include <stdbool.h>

#ifdef __CUDACC__
#define FT_MASK_FN static inline __host__ __device__
#else
#define FT_MASK_FN static inline
#endif

/* Query i sees key j by position (causal and window; documents apart). */
FT_MASK_FN bool ft_mask_sees(int i, int j, int window)
{
    return j <= i && (window <= 0 || j > i - window);
}

/* The first key query i sees by position: max(0, i - window + 1), or 0. Its keys
 * are [ft_mask_first_key(i, W), i]. */
FT_MASK_FN int ft_mask_first_key(int i, int window)
{
    return window > 0 && i - window + 1 > 0 ? i - window + 1 : 0;
}

/* True when no key of [k0, k0+kn) is inside the window of any query >= q0. A walk
 * over query tiles after a key tile may stop at the first such query tile. */
FT_MASK_FN bool ft_mask_tile_before_window(int q0, int k0, int kn, int window)
{
    return window > 0 && k0 + kn - 1 <= q0 - window;
}

/* True when every key of [k0, k0+kn) is inside the window of every query of
 * [q0, q0+qn): the last query's lower edge is below the first key. */
FT_MASK_FN bool ft_mask_tile_inside_window(int q0, int qn, int k0, int window)
{
    return window <= 0 || k0 > q0 + qn - 1 - window;
}

/* True when every pair of the tiles is visible by position: the key tile ends
 * at or before the first query and lies inside every query's window. */
FT_MASK_FN bool ft_mask_tile_all_seen(int q0, int qn, int k0, int kn, int window)
{
    return k0 + kn - 1 <= q0 && ft_mask_tile_inside_window(q0, qn, k0, window);
}

/* The key tiles (of bk keys) query tile [q0, q0+qn) visits are
 * [ft_mask_first_key_tile, ft_mask_end_key_tile): from the one holding the first
 * query's first key to the one holding the diagonal of the last query. */
FT_MASK_FN int ft_mask_first_key_tile(int q0, int window, int bk)
{
    return ft_mask_first_key(q0, window) / bk;
}

FT_MASK_FN int ft_mask_end_key_tile(int q0, int qn, int bk)
{
    return (q0 + qn - 1) / bk + 1;
}

/* Visible (query, key) pairs of one row of seq tokens cut into documents of
 * doc_len (0: one document): the FLOP count's unit. Query i sees
 * min(i - start of its document + 1, window) keys. */
FT_MASK_FN double ft_mask_visible_pairs(int seq, int window, int doc_len)
{
    double n = 0.0;
    for (int i = 0; i < seq; i++) {
        int doc_start = doc_len > 0 ? i - i % doc_len : 0;
        int first = ft_mask_first_key(i, window);
        n += i - (first > doc_start ? first : doc_start) + 1;
    }
    return n;
}

#undef FT_MASK_FN

#endif
