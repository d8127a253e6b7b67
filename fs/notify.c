/*
 * notify.c - sd_notify(3)'s datagram protocol (see notify.h for why it is
 * not libsystemd's).
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "notify.h"

int fs_notify_open(struct fs_notify *n)
{
	const char *e = getenv("NOTIFY_SOCKET");
	size_t len = e ? strlen(e) : 0;

	memset(n, 0, sizeof(*n));
	n->fd = -1;
	if (!e)
		return 0;
	/* an absolute path or "@name"; anything else (vsock addresses of
	 * newer managers) is not ours to speak */
	if ((e[0] == '/' || e[0] == '@') && len >= 2 && len < sizeof(n->path)) {
		memcpy(n->path, e, len);
		n->abstract = e[0] == '@';
		if (n->abstract)
			n->path[0] = '\0';
		n->len = (int)len;
		n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	}
	unsetenv("NOTIFY_SOCKET");
	return n->fd >= 0;
}

int fs_notify_send_fds(const struct fs_notify *n, const char *msg, const int *fds, int nfds)
{
	struct sockaddr_un sa;
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = strlen(msg) };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int) * 4)];
	} ctl;
	struct msghdr mh = { .msg_name = &sa, .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t w;

	if (n->fd < 0 || nfds < 0 || nfds > 4) {
		errno = EINVAL;
		return -1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, n->path, (size_t)n->len);
	mh.msg_namelen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n->len +
				     (n->abstract ? 0 : 1));
	if (nfds > 0) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	do
		w = sendmsg(n->fd, &mh, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	return w < 0 ? -1 : 0;
}

void fs_notify_send(const struct fs_notify *n, const char *msg)
{
	if (n->fd >= 0)
		(void)fs_notify_send_fds(n, msg, NULL, 0);
}

void fs_notify_status(const struct fs_notify *n, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int k;

	if (n->fd < 0)
		return;
	k = snprintf(msg, sizeof(msg), "STATUS=");
	va_start(ap, fmt);
	vsnprintf(msg + k, sizeof(msg) - (size_t)k, fmt, ap);
	va_end(ap);
	/* one line: a newline would start another variable */
	for (char *c = msg; *c; c++)
		if (*c == '\n')
			*c = ' ';
	fs_notify_send(n, msg);
}

int fs_notify_export(const struct fs_notify *n)
{
	char env[sizeof(n->path) + 1];
	int rc = 0;

	if (n->fd >= 0) {
		memcpy(env, n->path, (size_t)n->len);
		env[n->len] = '\0';
		if (n->abstract)
			env[0] = '@';
		rc = setenv("NOTIFY_SOCKET", env, 1) == 0 ? 0 : -1;
	}
	return rc;
}

void fs_notify_close(struct fs_notify *n)
{
	if (n->fd >= 0)
		close(n->fd);
	n->fd = -1;
}
