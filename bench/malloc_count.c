/* malloc_count.c - an LD_PRELOAD shim that counts a process's heap allocations,
 * for bench/allocs.sh when uprobes (perf probe) are not available.
 *
 *   cc -O2 -shared -fPIC -o malloc_count.so bench/malloc_count.c
 *   SEAMFS_MALLOC_COUNT=/path/counts SEAMFS_MALLOC_COUNT_EXE=/abs/path/seamfs \
 *       LD_PRELOAD=./malloc_count.so setsid /abs/path/seamfs ...
 *
 * Every call of malloc, calloc, realloc, posix_memalign, aligned_alloc, memalign
 * and valloc adds one to its counter (an atomic, relaxed). The counters live in
 * the file named by SEAMFS_MALLOC_COUNT, mapped shared: its first 8 × 8 bytes are
 * the counters as native unsigned 64-bit integers, in the order of
 * enum below, readable at any time from outside (no signal, no thread, nothing
 * the measured process notices). Calls made before the file is mapped (the
 * dynamic loader's, other libraries' constructors) are counted in a static array
 * that is copied into the file once it is mapped.
 *
 * Only the process whose /proc/self/exe is SEAMFS_MALLOC_COUNT_EXE (when set)
 * maps the file: a wrapper in front of it (setsid, timeout) does not. That
 * process then removes both variables and LD_PRELOAD from its environment, so
 * that the programs it runs neither count into the file nor reset it.
 *
 * The real allocator is glibc's __libc_* entry points, so no dlsym (which itself
 * allocates) is needed. free() is not wrapped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);

enum { C_MALLOC, C_CALLOC, C_REALLOC, C_POSIX_MEMALIGN, C_ALIGNED_ALLOC, C_MEMALIGN, C_VALLOC, C_N };
#define SLOTS 8

static _Atomic uint64_t early[SLOTS];
static _Atomic(_Atomic uint64_t *) counters = early;

static inline void count(int i)
{
	atomic_fetch_add_explicit(&atomic_load_explicit(&counters, memory_order_relaxed)[i], 1,
				  memory_order_relaxed);
}

__attribute__((constructor)) static void malloc_count_init(void)
{
	const char *path = getenv("SEAMFS_MALLOC_COUNT");
	int fd;
	void *p;

	const char *exe = getenv("SEAMFS_MALLOC_COUNT_EXE");
	char self[4096];
	ssize_t n;

	if (!path || !*path)
		return;
	if (exe && *exe) {
		n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n < 0)
			return;
		self[n] = 0;
		if (strcmp(self, exe) != 0)
			return;
	}
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (ftruncate(fd, 4096) != 0) {
		close(fd);
		return;
	}
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return;
	_Atomic uint64_t *c = p;
	for (int i = 0; i < SLOTS; i++)
		atomic_store(&c[i], atomic_load(&early[i]));
	atomic_store(&counters, c);
	/* Children (exec'd helpers) neither count into this file nor reset it. */
	unsetenv("SEAMFS_MALLOC_COUNT");
	unsetenv("SEAMFS_MALLOC_COUNT_EXE");
	unsetenv("LD_PRELOAD");
}

void *malloc(size_t n)
{
	count(C_MALLOC);
	return __libc_malloc(n);
}

void *calloc(size_t m, size_t n)
{
	count(C_CALLOC);
	return __libc_calloc(m, n);
}

void *realloc(void *p, size_t n)
{
	count(C_REALLOC);
	return __libc_realloc(p, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	void *p;

	count(C_POSIX_MEMALIGN);
	if (align < sizeof(void *) || (align & (align - 1)) != 0)
		return EINVAL;
	p = __libc_memalign(align, n);
	if (!p && n)
		return ENOMEM;
	*out = p;
	return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
	count(C_ALIGNED_ALLOC);
	return __libc_memalign(align, n);
}

void *memalign(size_t align, size_t n)
{
	count(C_MEMALIGN);
	return __libc_memalign(align, n);
}

void *valloc(size_t n)
{
	count(C_VALLOC);
	return __libc_valloc(n);
}
