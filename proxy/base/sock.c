/*
 * sock.c - moving a whole buffer over a stream socket (px.h): the daemon's
 * feed of a writer's input and the writer's side of it speak fixed-size
 * records over a socketpair, each written and read whole.
 */
#include <errno.h>
#include <sys/socket.h>

#include "px.h"

int px_send_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int px_recv_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len) {
		ssize_t r = recv(fd, p, len, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		len -= (size_t)r;
	}
	return 0;
}
