/*
 * mem.c - memory helpers of the core (mem.h).
 */
#include <stdint.h>
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
