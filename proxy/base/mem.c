/*
 * mem.c - memory helpers of the core (mem.h).
 */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mem.h"

void px_mem_prefault(void *p, size_t len)
{
#ifdef MADV_POPULATE_WRITE
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	/* madvise takes whole pages: the ones inside the range */
	uintptr_t from = ((uintptr_t)p + page - 1) & ~(uintptr_t)(page - 1);
	uintptr_t to = ((uintptr_t)p + len) & ~(uintptr_t)(page - 1);
	if (to > from)
		(void)madvise((void *)from, to - from, MADV_POPULATE_WRITE);
#else
	(void)p;
	(void)len;
#endif
}

size_t px_iov_len(const struct iovec *iov, int iovcnt)
{
	size_t n = 0;
	for (int i = 0; i < iovcnt; i++)
		n += iov[i].iov_len;
	return n;
}

size_t px_iov_copy(const struct iovec *iov, int iovcnt, size_t skip, size_t len, void *out)
{
	size_t n = 0;
	for (int i = 0; i < iovcnt && n < len; i++) {
		size_t l = iov[i].iov_len;
		if (skip >= l) {
			skip -= l;
			continue;
		}
		size_t take = l - skip < len - n ? l - skip : len - n;
		memcpy((unsigned char *)out + n, (const unsigned char *)iov[i].iov_base + skip, take);
		n += take;
		skip = 0;
	}
	return n;
}
