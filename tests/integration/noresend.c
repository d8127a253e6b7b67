/*
 * noresend.c - an LD_PRELOAD library for test_keeper.py: seamfs as on a
 * kernel before 6.9, which does not know FUSE_NOTIFY_RESEND. A write to
 * /dev/fuse of that notification alone (what fs/keeper.c's ask_resend
 * sends) fails with EINVAL, as fuse_notify() answers a code it does not
 * know; every other write goes through.
 */
#include <dlfcn.h>
#include <errno.h>
#include <linux/fuse.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define NOTIFY_RESEND 7 /* linux/fuse.h of 6.9; Debian 12's lacks it */

ssize_t write(int fd, const void *buf, size_t n)
{
	static ssize_t (*real)(int, const void *, size_t);
	const struct fuse_out_header *h = buf;
	struct stat st;

	/* POSIX's way to store dlsym's answer in a function pointer */
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "write");
	/* /dev/fuse is the character device 10:229 */
	if (n == sizeof(*h) && h->unique == 0 && h->error == NOTIFY_RESEND &&
	    fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 10 &&
	    minor(st.st_rdev) == 229) {
		errno = EINVAL;
		return -1;
	}
	return real(fd, buf, n);
}
