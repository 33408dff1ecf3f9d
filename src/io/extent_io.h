/* Raw byte I/O on a file region, for the bulk data of contiguous HDF5 datasets.
 *
 * Why: parallel HDF5 over MPI-IO writes through the page cache, which on a single
 * node runs at the speed of buffered `dd` plus fsync (a third of the disk's direct
 * bandwidth on our machines). Each rank already knows the file offsets of the bytes
 * its shard covers (a contiguous dataset's address plus the element offset), so it
 * can move them itself:
 *
 *   [ head edge | block-aligned interior ......................... | tail edge ]
 *     page cache  O_DIRECT, from aligned staging buffers, pipelined   page cache
 *
 * The interior goes through O_DIRECT in chunks that a worker thread writes (or reads
 * ahead) while the caller fills (or drains) the next staging buffer. The edges,
 * shorter than one block, go through an ordinary descriptor: blocks that hold bytes of
 * two ranks or of HDF5 metadata are only ever touched through the page cache, which
 * merges writers; every block touched with O_DIRECT belongs to one range only.
 * Where the file system refuses O_DIRECT (tmpfs, some network mounts), everything goes
 * through the ordinary descriptor: correct, only slower.
 *
 * One ft_extent_io per process and file; not shared between threads.
 */
#ifndef FT_IO_EXTENT_IO_H
#define FT_IO_EXTENT_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

typedef struct ft_extent_io ft_extent_io;

/* Opens path for raw transfers: writing opens an existing file (HDF5 created it)
 * read-write, else read-only. direct = false never uses O_DIRECT. */
int ft_extent_open(ft_extent_io **x, const char *path, bool writing, bool direct, ft_error *err);

/* Queues a write of src[0, n) at offset. src may be reused when this returns (the
 * interior was copied into staging); write errors surface here or in flush/close. */
int ft_extent_write(ft_extent_io *x, uint64_t offset, const void *src, size_t n, ft_error *err);

/* Reads n bytes at offset into dst; a range past the end of the file is an error
 * that says the file is truncated. */
int ft_extent_read(ft_extent_io *x, uint64_t offset, void *dst, size_t n, ft_error *err);

/* Announces that the next reads will be of [off, off+n) (after the ranges announced
 * before it), so that they are read ahead into the staging buffers while the caller
 * works on earlier data. Reads elsewhere simply drop the read-ahead. Returns -1 (and
 * announces nothing) when too many ranges are pending. */
int ft_extent_will_read(ft_extent_io *x, uint64_t off, size_t n);

/* Waits until every queued write is on its way to the file system. */
int ft_extent_flush(ft_extent_io *x, ft_error *err);

/* Flushes, fsyncs when writing (so the data is durable before anyone renames the
 * file), closes and frees. x may be NULL. err may be NULL (errors then dropped). */
int ft_extent_close(ft_extent_io *x, ft_error *err);

/* Whether the interior goes through O_DIRECT (false after a fallback). */
bool ft_extent_is_direct(const ft_extent_io *x);

/* Bytes moved so far through O_DIRECT and through the page cache. */
void ft_extent_counts(const ft_extent_io *x, uint64_t *direct_bytes, uint64_t *buffered_bytes);

#endif
