/*
 * mem.h - memory helpers of the core (mem.c).
 */
#ifndef SEAMFS_MEM_H
#define SEAMFS_MEM_H

#include <stddef.h>
#include <sys/uio.h>

/*
 * Maps the whole pages of [p, p + len) in one call before they are written
 * (MADV_POPULATE_WRITE), contents unchanged. A fresh buffer is otherwise
 * mapped by one page fault per 4 KiB as a transfer's bytes are copied in:
 * on the development machine's VM about 11 us a fault, 3 ms for a 1.1 MiB
 * part, against 0.13-0.23 ms for the call (the first copy into the pages
 * still costs 1.6-1.8 ms there, docs/read-path.md). Best effort: a kernel
 * before 5.14 leaves the faults to come. Safe while another thread writes
 * into the range.
 */
void px_mem_prefault(void *p, size_t len);

/* The bytes iov[0..iovcnt) hold in all. */
size_t px_iov_len(const struct iovec *iov, int iovcnt);

/*
 * Copies bytes [skip, skip + len) of the iovec's bytes, taken as one run,
 * into out; fewer when the iovec ends first. Returns how many it copied.
 */
size_t px_iov_copy(const struct iovec *iov, int iovcnt, size_t skip, size_t len, void *out);

#endif
