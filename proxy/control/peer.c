/*
 * peer.c - the peer endpoint (peer.h).
 *
 * Another host of the cluster reads the copy this host holds on its own
 * disk as it reads any HTTP source: range requests, one at a time per
 * transfer. Every request must carry the cluster's secret, compared in
 * constant time (px_secret_equal); the secret is never logged. What is
 * served comes from the copy's file, opened beneath its storage the way
 * a viewer's session opens it (px_copies_peer_open, px_source_open): a
 * link planted in its place or above it, or a file seamfs did not make,
 * is not opened, and the answer is 404. The origin is never asked: a
 * host that holds no serving copy answers 404.
 *
 * libmicrohttpd's internal thread polls; sending the bytes is
 * MHD_create_response_from_fd_at_offset64 (sendfile where it can).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cluster.h"
#include "context.h"
#include "control.h"
#include "copies.h"
#include "log.h"
#include "peer.h"

struct px_peer {
	struct px_core *core;
	struct MHD_Daemon *mhd;
};

int px_peer_parse_range(const char *hdr, int64_t size, int64_t *off, int64_t *len)
{
	char *end;
	int rc = -1;
	*off = 0;
	*len = size;
	if (!hdr)
		return 0;
	if (strncmp(hdr, "bytes=", 6) != 0 || strchr(hdr, ','))
		goto out;
	const char *p = hdr + 6;
	if (*p == '-') {
		errno = 0;
		long long n = strtoll(p + 1, &end, 10);
		if (errno || end == p + 1 || *end || n < 0)
			goto out;
		if (n == 0 || size == 0)
			return 1;
		*off = n < size ? size - n : 0;
		*len = size - *off;
		return 0;
	}
	errno = 0;
	long long a = strtoll(p, &end, 10);
	if (errno || end == p || *end != '-' || a < 0)
		goto out;
	p = end + 1;
	long long b = size - 1;
	if (*p) {
		b = strtoll(p, &end, 10);
		if (errno || end == p || *end || b < a)
			goto out;
	}
	if (a >= size)
		return 1;
	if (b >= size)
		b = size - 1;
	*off = a;
	*len = b - a + 1;
	return 0;
out:
	*off = 0;
	*len = size;
	return rc;
}

static enum MHD_Result reply_text(struct MHD_Connection *c, unsigned int status,
				  const char *text, const char *range)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text,
								 MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
	if (status == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	if (range)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, range);
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* Whether the request carries the secret. */
static int authorized(struct px_peer *p, struct MHD_Connection *c)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						    MHD_HTTP_HEADER_AUTHORIZATION);
	if (!h || strncmp(h, "Bearer ", 7) != 0)
		return 0;
	return px_secret_equal(px_cluster_secret(p->core), h + 7);
}

/* Answers with the bytes of the copy of asset id. */
static enum MHD_Result serve(struct px_peer *p, struct MHD_Connection *c, const char *id)
{
	int64_t size = 0, off, len;
	char cr[96];
	int fd = px_copies_peer_open(p->core, id, &size);
	if (fd < 0)
		return reply_text(c, MHD_HTTP_NOT_FOUND, "no verified copy of that asset here\n",
				  NULL);
	const char *rh = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_RANGE);
	int pr = px_peer_parse_range(rh, size, &off, &len);
	if (pr == 1) {
		close(fd);
		snprintf(cr, sizeof(cr), "bytes */%" PRId64, size);
		return reply_text(c, MHD_HTTP_RANGE_NOT_SATISFIABLE, "range not satisfiable\n", cr);
	}
	/* the response owns fd from here */
	struct MHD_Response *r = MHD_create_response_from_fd_at_offset64((uint64_t)len, fd,
									 (uint64_t)off);
	if (!r) {
		close(fd);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
	MHD_add_response_header(r, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
	unsigned int status = MHD_HTTP_OK;
	if (pr == 0 && rh) {
		snprintf(cr, sizeof(cr), "bytes %" PRId64 "-%" PRId64 "/%" PRId64, off,
			 off + len - 1, size);
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
		status = MHD_HTTP_PARTIAL_CONTENT;
	}
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version,
				  const char *upload, size_t *upload_size, void **con_cls)
{
	struct px_peer *p = cls;
	static int first;
	(void)version, (void)upload;
	if (*con_cls != &first) {
		*con_cls = &first; /* headers seen; answer at the next call */
		return MHD_YES;
	}
	if (*upload_size) {
		*upload_size = 0; /* a body is never looked at */
		return MHD_YES;
	}
	if (!authorized(p, c)) {
		px_debug("peer", "%s %s: 401 (no or another secret)", method, url);
		return reply_text(c, MHD_HTTP_UNAUTHORIZED, "the cluster's secret is needed\n",
				  NULL);
	}
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET or HEAD\n", NULL);
	if (strncmp(url, PX_PEER_PATH, strlen(PX_PEER_PATH)) != 0 ||
	    !url[strlen(PX_PEER_PATH)])
		return reply_text(c, MHD_HTTP_NOT_FOUND, "no such path\n", NULL);
	return serve(p, c, url + strlen(PX_PEER_PATH));
}

/* A listening TCP socket on "ADDR:PORT" ("[v6]:PORT" too), or -1 (logged). */
static int listen_on(const char *where)
{
	char host[256];
	const char *colon = strrchr(where, ':');
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *ai = NULL;
	int fd = -1, one = 1, rc;
	size_t n = colon ? (size_t)(colon - where) : 0;
	if (n && where[0] == '[' && where[n - 1] == ']') {
		where++;
		n -= 2;
	}
	if (!colon || n == 0 || n >= sizeof(host)) {
		px_error("peer", "peer_listen %s: not ADDR:PORT", where);
		return -1;
	}
	memcpy(host, where, n);
	host[n] = '\0';
	if ((rc = getaddrinfo(host, colon + 1, &hints, &ai)) != 0) {
		px_error("peer", "peer_listen %s: %s", where, gai_strerror(rc));
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	/* a worker restarted by its keeper binds again at once */
	if (fd >= 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 64)) {
		px_error("peer", "peer_listen %s: %s", where, strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd;
}

enum px_status px_peer_start(struct px_core *core, const char *where, struct px_peer **out)
{
	struct px_peer *p = NULL;
	sigset_t all, old;
	enum px_status st = PX_EINVAL;
	int fd = -1;

	*out = NULL;
	if (!px_cluster_secret(core)) {
		px_error("peer", "peer_listen %s: no cluster_secret_file: refusing to serve copies "
			 "to anyone who asks", where);
		goto out;
	}
	st = PX_EIO;
	if ((fd = listen_on(where)) < 0)
		goto out;
	if (!(p = calloc(1, sizeof(*p)))) {
		st = PX_ENOMEM;
		goto out;
	}
	p->core = core;
	/* the server's thread inherits this mask: signals go to main's */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	p->mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL,
				  NULL, on_request, p,
				  MHD_OPTION_EXTERNAL_LOGGER, px_mhd_log, (void *)"peer",
				  MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
				  MHD_OPTION_CONNECTION_LIMIT, (unsigned int)256,
				  MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)60,
				  MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!p->mhd) {
		px_error("peer", "peer_listen %s: libmicrohttpd did not start", where);
		goto out;
	}
	fd = -1;
	px_info("peer", "serving this host's copies to the cluster on %s", where);
	*out = p;
	p = NULL;
	st = PX_OK;
out:
	if (fd >= 0)
		close(fd);
	free(p);
	return st;
}

void px_peer_stop(struct px_peer *p)
{
	if (!p)
		return;
	MHD_stop_daemon(p->mhd); /* closes the listening socket too */
	free(p);
}
