/*
 * tls.c - TLS to Redis with OpenSSL, under a hiredis (0.14) that has no
 * TLS of its own (tls.h).
 *
 * hiredis 0.14's blocking context reads and writes its file descriptor
 * with read(2) and write(2); nothing in its API lets a caller put a TLS
 * session in between (its I/O hooks came with 1.0). What it does offer is
 * redisConnectFd(): a context on a socket made by someone else. So the
 * TCP connection and the handshake are made here, non-blocking against a
 * deadline, and hiredis gets one end of an AF_UNIX socketpair; a pump
 * thread per connection moves bytes between the other end and
 * SSL_read/SSL_write on the TCP socket, both non-blocking, waiting in
 * poll(2) for whichever side can move. hiredis's timeouts (SO_RCVTIMEO on
 * its end) work as on TCP.
 *
 * The pump ends when hiredis closes its end (redisFree), when the server
 * closes or a TLS error happens (it then closes its end, and hiredis's
 * next read sees the connection lost: the store drops it and connects
 * again, as it does for TCP), or when px_tls_conn_free asks it to (a byte
 * on a pipe). Its cost: one thread and two extra copies of every byte per
 * store connection; the store's traffic is a few small commands a second.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "log.h"
#include "tls.h"

#define PUMP_BUF 16384

struct px_tls {
	SSL_CTX *ctx;
	char server_name[256];
};

struct px_tls_conn {
	pthread_t thread;
	SSL *ssl;
	int net;       /* the TCP socket */
	int pair;      /* the pump's end of the socketpair */
	int stop[2];   /* a byte on stop[1]: end now */
	char peer[300];
	char why[256]; /* OpenSSL's reason the pump ended, once has_why */
	atomic_int has_why;
};

/* ---- the URL's query */

static int hex_digit(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The value v (n bytes) into dst, its %XX escapes decoded: a path with a
 * comma (which -o would split at) or an '&' is written %2C or %26. */
static enum px_status query_value(const char *url, const char *key, const char *v, size_t n,
				  char *dst, size_t cap, int path, char *err, size_t errlen)
{
	size_t m = 0;
	const char *bad = NULL;
	for (size_t i = 0; i < n && m < cap; i++) {
		if (v[i] != '%') {
			dst[m++] = v[i];
			continue;
		}
		int a = i + 1 < n ? hex_digit(v[i + 1]) : -1;
		int b = i + 2 < n ? hex_digit(v[i + 2]) : -1;
		if (a < 0 || b < 0 || (a == 0 && b == 0)) {
			bad = v + i;
			break;
		}
		dst[m++] = (char)(a * 16 + b);
		i += 2;
	}
	if (bad) {
		snprintf(err, errlen, "store URL '%s': %s: a bad %%-escape at '%.3s' (write a "
			 "byte as %%XX, two hex digits: %%2C for a comma)", url, key, bad);
		return PX_EINVAL;
	}
	if (m == 0 || m >= cap || (path && dst[0] != '/')) {
		snprintf(err, errlen, "store URL '%s': %s: %s", url, key,
			 m == 0 ? "empty" : m >= cap ? "too long" : "an absolute path, please");
		return PX_EINVAL;
	}
	dst[m] = '\0';
	return PX_OK;
}

enum px_status px_tls_parse_query(const char *url, const char *q, size_t n,
				  struct px_tls_files *f, char *err, size_t errlen)
{
	static const char *const keys[] = { "tls_ca_file", "tls_cert_file", "tls_key_file",
					    "tls_server_name" };
	memset(f, 0, sizeof(*f));
	for (const char *p = q, *end = q + n; p < end;) {
		const char *amp = memchr(p, '&', (size_t)(end - p));
		size_t len = amp ? (size_t)(amp - p) : (size_t)(end - p);
		const char *eq = memchr(p, '=', len);
		size_t kl = eq ? (size_t)(eq - p) : len;
		size_t k = 0;
		while (k < 4 && (strlen(keys[k]) != kl || strncmp(p, keys[k], kl)))
			k++;
		if (k == 4 || !eq) {
			snprintf(err, errlen, "store URL '%s': unknown setting '%.*s' (the query "
				 "may give tls_ca_file=, tls_cert_file=, tls_key_file=, "
				 "tls_server_name=, joined by &)", url, (int)(kl > 60 ? 60 : kl), p);
			return PX_EINVAL;
		}
		char *dst = k == 0 ? f->ca : k == 1 ? f->cert : k == 2 ? f->key : f->server_name;
		size_t cap = k == 3 ? sizeof(f->server_name) : PX_TLS_PATH_MAX;
		enum px_status st = query_value(url, keys[k], eq + 1, len - kl - 1, dst, cap, k < 3,
						err, errlen);
		if (st != PX_OK)
			return st;
		p += len + (amp ? 1 : 0);
	}
	if (!f->cert[0] != !f->key[0]) {
		snprintf(err, errlen, "store URL '%s': tls_cert_file and tls_key_file go together "
			 "(a client certificate and its key)", url);
		return PX_EINVAL;
	}
	return PX_OK;
}

/* ---- the settings */

/* OpenSSL's last reason, and its queue emptied. */
static const char *ossl_reason(char *buf, size_t cap)
{
	unsigned long e = ERR_peek_last_error();
	if (e)
		ERR_error_string_n(e, buf, cap);
	else
		snprintf(buf, cap, "no reason given");
	ERR_clear_error();
	return buf;
}

/* A file the settings name must be readable; err says which and why. */
static enum px_status readable(const char *what, const char *path, int secret, char *err,
			       size_t errlen)
{
	struct stat sb;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "store %s %s: %s", what, path, strerror(errno));
		return PX_EIO;
	}
	if (secret && fstat(fd, &sb) == 0 && (sb.st_mode & 0077))
		px_warn("store", "%s %s is readable by others (mode %03o); chmod 600 it", what,
			path, (unsigned)(sb.st_mode & 0777));
	close(fd);
	return PX_OK;
}

enum px_status px_tls_new(const struct px_tls_files *f, struct px_tls **out, char *err,
			  size_t errlen)
{
	char why[256];
	enum px_status st = PX_EINVAL;
	struct px_tls *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t || !(t->ctx = SSL_CTX_new(TLS_client_method()))) {
		snprintf(err, errlen, "store TLS: out of memory");
		st = PX_ENOMEM;
		goto fail;
	}
	snprintf(t->server_name, sizeof(t->server_name), "%s", f->server_name);
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
	if (f->ca[0]) {
		if ((st = readable("tls_ca_file", f->ca, 0, err, errlen)) != PX_OK)
			goto fail;
		if (SSL_CTX_load_verify_locations(t->ctx, f->ca, NULL) != 1) {
			snprintf(err, errlen, "store tls_ca_file %s: no CA certificate read from it "
				 "(%s)", f->ca, ossl_reason(why, sizeof(why)));
			st = PX_EINVAL;
			goto fail;
		}
	} else if (SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
		snprintf(err, errlen, "store TLS: the system's CA certificates: %s",
			 ossl_reason(why, sizeof(why)));
		goto fail;
	}
	if (f->cert[0]) {
		if ((st = readable("tls_cert_file", f->cert, 0, err, errlen)) != PX_OK ||
		    (st = readable("tls_key_file", f->key, 1, err, errlen)) != PX_OK)
			goto fail;
		st = PX_EINVAL;
		if (SSL_CTX_use_certificate_chain_file(t->ctx, f->cert) != 1) {
			snprintf(err, errlen, "store tls_cert_file %s: not a PEM certificate (%s)",
				 f->cert, ossl_reason(why, sizeof(why)));
			goto fail;
		}
		int used = SSL_CTX_use_PrivateKey_file(t->ctx, f->key, SSL_FILETYPE_PEM);
		unsigned long e = ERR_peek_last_error();
		if (used != 1 && (ERR_GET_LIB(e) != ERR_LIB_X509 ||
				  ERR_GET_REASON(e) != X509_R_KEY_VALUES_MISMATCH)) {
			snprintf(err, errlen, "store tls_key_file %s: not a PEM private key (%s)",
				 f->key, ossl_reason(why, sizeof(why)));
			goto fail;
		}
		if (used != 1 || SSL_CTX_check_private_key(t->ctx) != 1) {
			snprintf(err, errlen, "store tls_key_file %s is not the key of "
				 "tls_cert_file %s (%s)", f->key, f->cert,
				 ossl_reason(why, sizeof(why)));
			goto fail;
		}
	}
	*out = t;
	return PX_OK;
fail:
	px_tls_free(t);
	return st;
}

void px_tls_free(struct px_tls *t)
{
	if (!t)
		return;
	SSL_CTX_free(t->ctx);
	free(t);
}

/* ---- connecting */

/* poll(2) for one descriptor until deadline (px_now_ms); 1 ready, 0 not
 * in time, -1 error. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - px_now_ms();
		if (left <= 0)
			return 0;
		struct pollfd p = { fd, events, 0 };
		int r = poll(&p, 1, (int)left);
		if (r > 0)
			return 1;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

/* A non-blocking TCP socket connected to host:port by deadline, or -1
 * with err. */
static int tcp_connect(const char *host, int port, const char *peer, int64_t timeout_ms,
		       int64_t deadline, enum px_status *st, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV }, *res = NULL;
	char sport[16];
	int fd = -1, e = 0;

	snprintf(sport, sizeof(sport), "%d", port);
	int g = getaddrinfo(host, sport, &hints, &res);
	*st = PX_ECONNECT;
	if (g) {
		snprintf(err, errlen, "cannot connect to %s: %s", peer, gai_strerror(g));
		return -1;
	}
	for (struct addrinfo *a = res; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    a->ai_protocol);
		if (fd < 0) {
			e = errno;
			continue;
		}
		int r = connect(fd, a->ai_addr, a->ai_addrlen);
		if (r < 0 && errno == EINPROGRESS) {
			socklen_t len = sizeof(e);
			r = wait_fd(fd, POLLOUT, deadline);
			if (r == 0) {
				e = ETIMEDOUT;
			} else if (r < 0) {
				e = errno;
			} else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) == 0 && !e) {
				break;
			}
		} else if (r == 0) {
			break;
		} else {
			e = errno;
		}
		close(fd);
		fd = -1;
		if (e == ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	if (fd < 0 && e == ETIMEDOUT) {
		*st = PX_ETIMEDOUT;
		snprintf(err, errlen, "no connection to %s within %lld ms", peer,
			 (long long)timeout_ms);
	} else if (fd < 0) {
		snprintf(err, errlen, "cannot connect to %s: %s", peer, strerror(e));
	}
	return fd;
}

/* The name or address the server's certificate must carry, and SNI. */
static int expect_name(SSL *ssl, const char *name)
{
	unsigned char addr[16];
	X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
	if (inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1)
		return X509_VERIFY_PARAM_set1_ip_asc(vp, name) == 1 ? 0 : -1;
	X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	return SSL_set_tlsext_host_name(ssl, name) == 1 && SSL_set1_host(ssl, name) == 1 ? 0
											   : -1;
}

/* The handshake on c->ssl by deadline. */
static enum px_status handshake(struct px_tls_conn *c, int64_t timeout_ms, int64_t deadline,
				char *err, size_t errlen)
{
	char why[256];
	for (;;) {
		ERR_clear_error();
		int r = SSL_connect(c->ssl);
		if (r == 1)
			return PX_OK;
		int e = SSL_get_error(c->ssl, r);
		if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
			int w = wait_fd(c->net, e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline);
			if (w > 0)
				continue;
			if (w == 0)
				snprintf(err, errlen, "TLS handshake with %s: not done within %lld ms",
					 c->peer, (long long)timeout_ms);
			else
				snprintf(err, errlen, "TLS handshake with %s: %s", c->peer,
					 strerror(errno));
			return w == 0 ? PX_ETIMEDOUT : PX_ECONNECT;
		}
		long v = SSL_get_verify_result(c->ssl);
		if (v != X509_V_OK) {
			snprintf(err, errlen, "TLS: the certificate of %s is refused: %s", c->peer,
				 X509_verify_cert_error_string(v));
			ERR_clear_error();
			return PX_EAUTH;
		}
		if (e == SSL_ERROR_SYSCALL && !ERR_peek_last_error())
			snprintf(err, errlen, "TLS handshake with %s: the server closed the "
				 "connection (is it a TLS port? does it want a client "
				 "certificate?)", c->peer);
		else
			snprintf(err, errlen, "TLS handshake with %s failed: %s (is it a TLS port?)",
				 c->peer, ossl_reason(why, sizeof(why)));
		return PX_ECONNECT;
	}
}

/* ---- the pump */

/* Moves what can move without waiting: 0 on, -1 to end. The buffers and
 * what the TLS side waits for (POLLIN / POLLOUT) live in the caller. */
struct pump_state {
	unsigned char up[PUMP_BUF], down[PUMP_BUF]; /* to the server, from it */
	size_t up_n, up_off, down_n, down_off;
	short up_want, down_want;
};

static int ssl_wants(SSL *ssl, int r, short *want)
{
	int e = SSL_get_error(ssl, r);
	if (e == SSL_ERROR_WANT_READ)
		*want = POLLIN;
	else if (e == SSL_ERROR_WANT_WRITE)
		*want = POLLOUT;
	else
		return -1;
	return 0;
}

static int pump_step(struct px_tls_conn *c, struct pump_state *p, int *moved)
{
	ssize_t n;
	int r;

	if (!p->up_n) {
		n = recv(c->pair, p->up, sizeof(p->up), MSG_DONTWAIT);
		if (n == 0)
			return -1; /* hiredis closed its end */
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -1;
		if (n > 0) {
			p->up_n = (size_t)n;
			*moved = 1;
		}
	}
	if (p->up_n) {
		/* a retry passes the same buffer and length, as OpenSSL wants */
		ERR_clear_error();
		r = SSL_write(c->ssl, p->up, (int)p->up_n);
		if (r > 0) {
			p->up_n = 0;
			*moved = 1;
		} else if (ssl_wants(c->ssl, r, &p->up_want)) {
			return -1;
		}
	}
	if (!p->down_n) {
		ERR_clear_error();
		r = SSL_read(c->ssl, p->down, sizeof(p->down));
		if (r > 0) {
			p->down_n = (size_t)r;
			p->down_off = 0;
			*moved = 1;
		} else if (ssl_wants(c->ssl, r, &p->down_want)) {
			return -1;
		}
	}
	if (p->down_n) {
		n = send(c->pair, p->down + p->down_off, p->down_n - p->down_off,
			 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			return -1;
		if (n > 0) {
			p->down_off += (size_t)n;
			if (p->down_off == p->down_n)
				p->down_n = p->down_off = 0;
			*moved = 1;
		}
	}
	return 0;
}

static void *pump(void *arg)
{
	struct px_tls_conn *c = arg;
	struct pump_state *p = calloc(1, sizeof(*p));
	sigset_t all;
	char why[256];

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	int local_end = 0; /* ended by px_tls_conn_free or hiredis */
	for (int moved = 1; p;) {
		if (pump_step(c, p, &moved))
			break;
		if (moved) {
			moved = 0;
			continue;
		}
		struct pollfd fds[3] = {
			{ c->pair, (short)((p->up_n ? 0 : POLLIN) | (p->down_n ? POLLOUT : 0)), 0 },
			{ c->net, (short)((p->up_n ? p->up_want : 0) | (p->down_n ? 0 : p->down_want)),
			  0 },
			{ c->stop[0], POLLIN, 0 },
		};
		if (poll(fds, 3, -1) < 0 && errno != EINTR)
			break;
		/* stopped, or hiredis gone (POLLHUP comes even when not asked) */
		if (fds[2].revents || (fds[0].revents & (POLLHUP | POLLERR))) {
			local_end = 1;
			break;
		}
		moved = 1;
	}
	unsigned long e = ERR_peek_last_error();
	if (!e && !local_end) {
		/* a write that failed on a closed socket says nothing: the
		 * server may have sent its reason (an alert) before it closed */
		char b[256];
		ERR_clear_error();
		(void)SSL_read(c->ssl, b, sizeof(b));
		e = ERR_peek_last_error();
	}
	if (e) {
		px_warn("store", "TLS connection to %s: %s; closed", c->peer,
			ossl_reason(why, sizeof(why)));
		/* before hiredis sees the end: its caller asks for it then */
		snprintf(c->why, sizeof(c->why), "%s", why);
		atomic_store(&c->has_why, 1);
	}
	free(p);
	SSL_shutdown(c->ssl); /* best effort: the socket does not block */
	ERR_clear_error();
	shutdown(c->pair, SHUT_RDWR); /* hiredis's next read sees the end */
	return NULL;
}

static void conn_release(struct px_tls_conn *c)
{
	SSL_free(c->ssl);
	if (c->net >= 0)
		close(c->net);
	if (c->pair >= 0)
		close(c->pair);
	if (c->stop[0] >= 0)
		close(c->stop[0]);
	if (c->stop[1] >= 0)
		close(c->stop[1]);
	free(c);
}

void px_fd_cloexec(int fd)
{
	int fl = fd >= 0 ? fcntl(fd, F_GETFD) : -1;
	if (fl >= 0)
		(void)fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}

enum px_status px_tls_connect(struct px_tls *t, const char *host, int port, int64_t timeout_ms,
			      int *fd, struct px_tls_conn **out, char *err, size_t errlen)
{
	int64_t deadline = px_now_ms() + timeout_ms;
	const char *name = t->server_name[0] ? t->server_name : host;
	enum px_status st = PX_ENOMEM;
	int sv[2] = { -1, -1 };
	struct px_tls_conn *c = calloc(1, sizeof(*c));

	*fd = -1;
	*out = NULL;
	if (!c) {
		snprintf(err, errlen, "out of memory");
		return PX_ENOMEM;
	}
	c->net = c->pair = c->stop[0] = c->stop[1] = -1;
	if (strchr(host, ':'))
		snprintf(c->peer, sizeof(c->peer), "[%s]:%d", host, port);
	else
		snprintf(c->peer, sizeof(c->peer), "%s:%d", host, port);
	if ((c->net = tcp_connect(host, port, c->peer, timeout_ms, deadline, &st, err,
				  errlen)) < 0)
		goto fail;
	st = PX_ENOMEM;
	if (!(c->ssl = SSL_new(t->ctx)) || SSL_set_fd(c->ssl, c->net) != 1 ||
	    expect_name(c->ssl, name)) {
		snprintf(err, errlen, "TLS to %s: cannot set up the session", c->peer);
		ERR_clear_error();
		goto fail;
	}
	if ((st = handshake(c, timeout_ms, deadline, err, errlen)) != PX_OK)
		goto fail;
	st = PX_ECONNECT;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) ||
	    pipe2(c->stop, O_CLOEXEC)) {
		snprintf(err, errlen, "TLS to %s: %s", c->peer, strerror(errno));
		goto fail;
	}
	c->pair = sv[1];
	sv[1] = -1;
	if ((errno = pthread_create(&c->thread, NULL, pump, c))) {
		snprintf(err, errlen, "TLS to %s: no pump thread: %s", c->peer, strerror(errno));
		goto fail;
	}
	*fd = sv[0];
	*out = c;
	return PX_OK;
fail:
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	conn_release(c);
	return st;
}

const char *px_tls_conn_why(struct px_tls_conn *c)
{
	return c && atomic_load(&c->has_why) ? c->why : NULL;
}

void px_tls_conn_free(struct px_tls_conn *c)
{
	if (!c)
		return;
	ssize_t w;
	do
		w = write(c->stop[1], "x", 1);
	while (w < 0 && errno == EINTR);
	pthread_join(c->thread, NULL);
	conn_release(c);
}
