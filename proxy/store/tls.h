/*
 * tls.h - TLS to Redis under hiredis 0.14, which has none (internal to
 * proxy/store: kvstore.c and sentinel.c are its users).
 *
 * A connection is made and its handshake done here, with OpenSSL; hiredis
 * is then given one end of a socketpair (redisConnectFd) and a pump thread
 * moves bytes between the other end and the TLS connection. When either
 * side closes or fails, the pump closes its end: hiredis sees a connection
 * lost, and the store's reconnect logic applies as for TCP.
 *
 * The TLS settings come from the store URL's query (rediss://...?...):
 *   tls_ca_file=PATH      the CA certificates (PEM) the server's chain must
 *                         end in (default: the system's store)
 *   tls_cert_file=PATH    a client certificate chain (PEM), for a Redis
 *   tls_key_file=PATH     that asks for one (tls-auth-clients); together
 *   tls_server_name=NAME  the name the certificate must carry, and SNI
 *                         (default: the host connected to; an IP address
 *                         is checked against the certificate's IP entries)
 * A value may carry %XX escapes: %2C for a comma, which -o splits at.
 */
#ifndef SEAMFS_TLS_H
#define SEAMFS_TLS_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"

#define PX_TLS_PATH_MAX 1024

struct px_tls_files {
	char ca[PX_TLS_PATH_MAX];     /* "": the system's store */
	char cert[PX_TLS_PATH_MAX];   /* "": no client certificate */
	char key[PX_TLS_PATH_MAX];
	char server_name[256];        /* "": the host connected to */
};

struct px_tls;       /* the settings, loaded (an SSL_CTX) */
struct px_tls_conn;  /* one connection: its TLS session and pump thread */

/*
 * Parses the query q (after the '?', n bytes) of a TLS store URL into *f.
 * PX_EINVAL with err naming the URL and the part: an unknown key, a path
 * that is not absolute, tls_cert_file without tls_key_file or the other
 * way round.
 */
enum px_status px_tls_parse_query(const char *url, const char *q, size_t n,
				  struct px_tls_files *f, char *err, size_t errlen) PX_WUR;

/*
 * Loads f: the CA file, the client certificate and key (checked to
 * match). On error err names the setting and its file, and why (the
 * system's or OpenSSL's reason): PX_EIO (unreadable), PX_EINVAL (not a
 * certificate, not a key, a key that does not match).
 */
enum px_status px_tls_new(const struct px_tls_files *f, struct px_tls **out, char *err,
			  size_t errlen) PX_WUR;
void px_tls_free(struct px_tls *t);

/*
 * Connects to host:port and does the TLS handshake, both within
 * timeout_ms; the server's certificate is verified against the CA and
 * the name (tls_server_name, else host). On PX_OK *fd is the socket to
 * give hiredis (redisConnectFd; hiredis closes it) and *conn the pump,
 * already running. Else PX_ECONNECT / PX_ETIMEDOUT / PX_EAUTH (the
 * server's certificate refused, or ours), with err naming host:port and
 * the reason. Blocking; any thread.
 */
enum px_status px_tls_connect(struct px_tls *t, const char *host, int port, int64_t timeout_ms,
			      int *fd, struct px_tls_conn **conn, char *err,
			      size_t errlen) PX_WUR;

/* Why the TLS connection ended (OpenSSL's reason: an alert the server
 * sent, say "tlsv13 alert certificate required"), once it has: hiredis
 * sees the end after it is set. NULL while it runs, or when it ended
 * without one (a plain close). Any thread. */
const char *px_tls_conn_why(struct px_tls_conn *c);

/*
 * Marks a plain connection's socket close-on-exec: hiredis 0.14 does not,
 * and the writers and probes the daemon spawns would each hold the
 * daemon's connection to Redis (posix_spawn closes nothing else), so that
 * a connection the daemon drops would stay open at Redis for as long as
 * they run. (A spawn between the connect and this call still inherits it:
 * microseconds.) The sockets px_tls_connect makes are close-on-exec from
 * the start. fd < 0: nothing.
 */
void px_fd_cloexec(int fd);

/* Ends the pump (at once, whether or not hiredis closed its end yet),
 * joins it and frees the session. NULL: nothing. */
void px_tls_conn_free(struct px_tls_conn *c);

#endif
