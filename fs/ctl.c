/*
 * ctl.c - `seamfs ctl`, the control API's client.
 *
 * One HTTP/1.1 request per run over the daemon's Unix socket, written by
 * hand ("Connection: close", so the answer ends where the socket does):
 * the requests are four and fixed, and a socket plus a status line is
 * less to go wrong than a second HTTP stack. Every wait is bounded
 * (CTL_TIMEOUT_MS per step) and so is the answer (CTL_MAX_ANSWER).
 * Answers are JSON, turned into tables here unless --json.
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "redact.h"
#include "utf8.h"

#define EXIT_OK 0
#define EXIT_DAEMON 1
#define EXIT_USAGE 2
#define EXIT_CONNECT 3

#define CTL_TIMEOUT_MS 10000
#define CTL_MAX_ANSWER (64u << 20)

struct answer {
	int status;                /* HTTP status */
	char *body;                /* NUL-terminated */
	size_t len;
	int quiet;                 /* set by the caller: no message when it fails */
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: seamfs ctl [--socket PATH] [--json] SUBCOMMAND\n"
		"\n"
		"Talks to a running seamfs through its control socket (-o control_socket=PATH).\n"
		"\n"
		"subcommands:\n"
		"    status                 providers and sessions, as tables\n"
		"    metrics                the metrics, in the Prometheus text format\n"
		"    hosts                  cluster mode: the store and the cluster's hosts\n"
		"    drain NAME [--reason TEXT]\n"
		"                           the provider gets no new session; open ones go on\n"
		"    resume NAME            the provider takes new sessions again\n"
		"    add-source ID URL|PATH [--provider NAME]\n"
		"                           a new source of the asset: live sessions take it as\n"
		"                           a standby once verified\n"
		"    remove-source ID URL|PATH\n"
		"                           no new session or cutover goes to that source\n"
		"    reload                 read the catalog again (as SIGHUP does)\n"
		"    restart [--wait]       with a keeper: a new worker from the binary on disk\n"
		"                           takes the mount over (an upgrade without unmount;\n"
		"                           it reads the catalog again); --wait: return once it\n"
		"                           serves, 1 if that binary did not come up (with\n"
		"                           --json: the answer with new_worker_pid, upgraded)\n"
		"    copies                 copy jobs, storages and where each asset is\n"
		"    storage disable|enable|drain NAME\n"
		"                           the storage's copying role off or on; drain also\n"
		"                           moves the sessions off its copies\n"
		"\n"
		"options:\n"
		"    --socket PATH          the control socket (default: $SEAMFS_CONTROL_SOCKET)\n"
		"    --json                 print the daemon's JSON answer as it is\n"
		"    -h, --help             this help\n"
		"\n"
		"exit status: 0 done, 1 the daemon answered with an error, 2 bad command line,\n"
		"3 cannot connect to the socket.\n");
}

/* Waits (bounded) until fd is ready for events; 0, or -1 with errno. */
static int wait_fd(int fd, short events)
{
	struct pollfd p = { fd, events, 0 };
	int r;
	do
		r = poll(&p, 1, CTL_TIMEOUT_MS);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		errno = ETIMEDOUT;
	return r > 0 ? 0 : -1;
}

static int connect_to(const char *path, int quiet)
{
	struct sockaddr_un sa;
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "seamfs ctl: socket path too long: %s\n", path);
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return fd;
	int e = errno;
	close(fd);
	if (quiet)
		return -1;
	if (e == ENOENT)
		fprintf(stderr, "seamfs ctl: no control socket at %s (is seamfs running with "
			"-o control_socket=%s?)\n", path, path);
	else if (e == EACCES || e == EPERM)
		fprintf(stderr, "seamfs ctl: %s: permission denied (the socket is mode 0600: run "
			"as the user who mounted, or root)\n", path);
	else if (e == ECONNREFUSED)
		fprintf(stderr, "seamfs ctl: %s: nobody answers (the daemon is gone; a stale "
			"socket)\n", path);
	else
		fprintf(stderr, "seamfs ctl: %s: %s\n", path, strerror(e));
	return -1;
}

/* Sends len bytes of p (NULL when len is 0). 0, -1 (errno) on failure. */
static int send_all(int fd, const char *p, size_t len)
{
	for (size_t off = 0; off < len;) {
		if (wait_fd(fd, POLLOUT))
			return -1;
		ssize_t n = send(fd, p + off, len - off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

/* Reads until the other end closes, into *buf (NUL-terminated, the
 * caller frees). 0, -1 (errno) on failure, 1 over CTL_MAX_ANSWER. */
static int recv_all(int fd, char **buf, size_t *len)
{
	size_t cap = 0;
	for (;;) {
		if (*len + 4096 + 1 > cap) {
			size_t nc = cap ? cap * 2 : 65536;
			char *nb = nc <= CTL_MAX_ANSWER ? realloc(*buf, nc) : NULL;
			if (!nb)
				return 1;
			*buf = nb;
			cap = nc;
		}
		if (wait_fd(fd, POLLIN))
			return -1;
		ssize_t n = recv(fd, *buf + *len, cap - *len - 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		*len += (size_t)n;
	}
	(*buf)[*len] = '\0';
	return 0;
}

/*
 * Sends one request and reads the answer. Returns 0, or an exit status
 * (a message printed).
 */
static int request(const char *sock, const char *method, const char *target, const char *body,
		   struct answer *ans)
{
	char head[2048];
	char *buf = NULL;
	size_t len = 0;
	int fd, rc = EXIT_CONNECT;
	size_t blen = body ? strlen(body) : 0;
	int quiet = ans->quiet;

	memset(ans, 0, sizeof(*ans));
	fd = connect_to(sock, quiet);
	if (fd < 0)
		return EXIT_CONNECT;
	int hl = snprintf(head, sizeof(head),
			  "%s %s HTTP/1.1\r\nHost: seamfs\r\nConnection: close\r\n"
			  "Accept: application/json\r\n%sContent-Length: %zu\r\n\r\n",
			  method, target, body ? "Content-Type: application/json\r\n" : "", blen);
	if (hl < 0 || (size_t)hl >= sizeof(head)) {
		fprintf(stderr, "seamfs ctl: request too long\n");
		rc = EXIT_USAGE;
		goto out;
	}
	if (send_all(fd, head, (size_t)hl) || send_all(fd, body, blen))
		goto io;
	int r = recv_all(fd, &buf, &len);
	if (r < 0)
		goto io;
	if (r > 0) {
		fprintf(stderr, "seamfs ctl: the answer is too big\n");
		rc = EXIT_DAEMON;
		goto out;
	}
	/* "HTTP/1.1 200 OK\r\n" headers "\r\n\r\n" body */
	char *eoh = strstr(buf, "\r\n\r\n");
	if (strncmp(buf, "HTTP/1.", 7) != 0 || len < 12 || !eoh || !isdigit((unsigned char)buf[9]) ||
	    !isdigit((unsigned char)buf[10]) || !isdigit((unsigned char)buf[11])) {
		fprintf(stderr, "seamfs ctl: %s: not an HTTP answer\n", sock);
		rc = EXIT_DAEMON;
		goto out;
	}
	ans->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
	ans->len = len - (size_t)(eoh + 4 - buf);
	ans->body = malloc(ans->len + 1);
	if (!ans->body) {
		rc = EXIT_DAEMON;
		goto out;
	}
	memcpy(ans->body, eoh + 4, ans->len + 1);
	rc = 0;
	goto out;
io:
	if (!quiet)
		fprintf(stderr, "seamfs ctl: %s: %s\n", sock,
			errno == ETIMEDOUT ? "no answer within 10 s" : strerror(errno));
out:
	free(buf);
	close(fd);
	return rc;
}

/* An error answer: prints the daemon's error and field. Returns 1. */
static int daemon_error(const struct answer *ans)
{
	json_t *o = json_loadb(ans->body, ans->len, 0, NULL);
	const char *e = json_string_value(json_object_get(o, "error"));
	const char *f = json_string_value(json_object_get(o, "field"));
	if (e)
		fprintf(stderr, "seamfs ctl: the daemon refused (%d): %s%s%s%s\n", ans->status, e,
			f && f[0] ? " (field: " : "", f && f[0] ? f : "", f && f[0] ? ")" : "");
	else
		fprintf(stderr, "seamfs ctl: the daemon answered %d: %.300s\n", ans->status,
			ans->body);
	json_decref(o);
	return EXIT_DAEMON;
}

/* ---- tables */

#define MAXCOLS 9

struct table {
	int ncols;
	const char *head[MAXCOLS];
	int right[MAXCOLS];        /* numbers: right-aligned */
	char **cells;              /* nrows * ncols, owned */
	size_t nrows;
};

static void table_row(struct table *t, char *const *vals)
{
	char **n = realloc(t->cells, (t->nrows + 1) * (size_t)t->ncols * sizeof(*n));
	if (!n)
		return;
	t->cells = n;
	for (int c = 0; c < t->ncols; c++)
		n[t->nrows * (size_t)t->ncols + (size_t)c] = strdup(vals[c] ? vals[c] : "");
	t->nrows++;
}

static void table_print(struct table *t)
{
	int w[MAXCOLS];
	for (int c = 0; c < t->ncols; c++) {
		w[c] = (int)strlen(t->head[c]);
		for (size_t r = 0; r < t->nrows; r++) {
			const char *v = t->cells[r * (size_t)t->ncols + (size_t)c];
			if (v && (int)strlen(v) > w[c])
				w[c] = (int)strlen(v);
		}
	}
	for (size_t r = 0; r <= t->nrows; r++) {
		/* row 0 is the header */
		for (int c = 0; c < t->ncols; c++) {
			const char *v = r ? t->cells[(r - 1) * (size_t)t->ncols + (size_t)c]
					  : t->head[c];
			if (c + 1 == t->ncols && !t->right[c])
				printf("%s\n", v ? v : "");
			else
				printf(t->right[c] ? "%*s%s" : "%-*s%s", w[c], v ? v : "",
				       c + 1 < t->ncols ? "  " : "\n");
		}
	}
	for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
}

static char *num(json_t *v)
{
	char b[64];
	if (json_is_integer(v))
		snprintf(b, sizeof(b), "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		snprintf(b, sizeof(b), "%.1f", json_real_value(v));
	else
		snprintf(b, sizeof(b), "-");
	return strdup(b);
}

static const char *str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

static void mib(char *b, size_t n, json_t *v)
{
	snprintf(b, n, "%.1f MiB", (double)json_integer_value(v) / 1048576.0);
}

/* seamfs ctl copies: storages, jobs and locations as tables. */
static int print_copies(const struct answer *ans)
{
	json_error_t jerr;
	json_t *root = json_loadb(ans->body, ans->len, 0, &jerr), *v, *l;
	size_t i, j;

	if (!json_is_object(root)) {
		fprintf(stderr, "seamfs ctl: the answer is not a JSON object: %s\n", jerr.text);
		json_decref(root);
		return EXIT_DAEMON;
	}
	struct table sg = { 6, { "STORAGE", "COPYING", "REACHABLE", "FREE", "COPIES", "WHY" },
			    { 0, 0, 0, 1, 1, 0 }, NULL, 0 };
	json_array_foreach(json_object_get(root, "storages"), i, v) {
		char *cells[6] = { (char *)str(v, "name"),
				   json_is_true(json_object_get(v, "copying")) ? "on" : "off",
				   json_is_true(json_object_get(v, "reachable")) ? "yes" : "no",
				   num(json_object_get(v, "free_bytes")),
				   num(json_object_get(v, "copies")), (char *)str(v, "why") };
		table_row(&sg, cells);
		free(cells[3]);
		free(cells[4]);
	}
	table_print(&sg);
	printf("\n");
	json_t *jobs = json_object_get(root, "jobs");
	if (json_array_size(jobs) == 0) {
		printf("no copy jobs\n");
	} else {
		struct table jt = { 6, { "ASSET", "STATE", "REASON", "DONE", "TOTAL", "BYTES/S" },
				    { 0, 0, 0, 1, 1, 1 }, NULL, 0 };
		json_array_foreach(jobs, i, v) {
			char speed[32];
			snprintf(speed, sizeof(speed), "%.0f",
				 json_number_value(json_object_get(v, "speed_bytes_per_s")));
			char *cells[6] = { (char *)str(v, "asset"), (char *)str(v, "state"),
					   (char *)str(v, "reason"),
					   num(json_object_get(v, "bytes_done")),
					   num(json_object_get(v, "bytes_total")), speed };
			table_row(&jt, cells);
			free(cells[3]);
			free(cells[4]);
		}
		table_print(&jt);
	}
	printf("\n");
	struct table lt = { 5, { "ASSET", "KIND", "STORAGE", "VIEWERS", "WHERE" },
			    { 0, 0, 0, 1, 0 }, NULL, 0 };
	json_array_foreach(json_object_get(root, "assets"), i, v) {
		json_array_foreach(json_object_get(v, "locations"), j, l) {
			char *cells[5] = { (char *)str(v, "asset"), (char *)str(l, "kind"),
					   (char *)str(l, "storage"),
					   num(json_object_get(l, "viewers")), (char *)str(l, "where") };
			table_row(&lt, cells);
			free(cells[3]);
		}
	}
	table_print(&lt);
	json_decref(root);
	return 0;
}

static int print_status(const struct answer *ans)
{
	json_error_t jerr;
	json_t *root = json_loadb(ans->body, ans->len, 0, &jerr), *v;
	size_t i;

	if (!json_is_object(root)) {
		fprintf(stderr, "seamfs ctl: the status is not a JSON object: %s\n", jerr.text);
		json_decref(root);
		return EXIT_DAEMON;
	}
	struct table pt = { 7, { "PROVIDER", "STATE", "SESSIONS", "TRANSFERS", "LIMIT", "DRAINED",
				 "WHY" }, { 0, 0, 1, 1, 1, 0, 0 }, NULL, 0 };
	json_array_foreach(json_object_get(root, "providers"), i, v) {
		json_t *max = json_object_get(v, "max_connections");
		char *cells[7] = { (char *)str(v, "name"), (char *)str(v, "state"),
				   num(json_object_get(v, "sessions")),
				   num(json_object_get(v, "transfers")),
				   json_is_integer(max) ? num(max) : strdup("none"),
				   json_is_true(json_object_get(v, "drained")) ? "yes" : "no",
				   (char *)str(v, "why") };
		table_row(&pt, cells);
		free(cells[2]);
		free(cells[3]);
		free(cells[4]);
	}
	table_print(&pt);

	printf("\n");
	json_t *sess = json_object_get(root, "sessions");
	if (json_array_size(sess) == 0) {
		printf("no sessions\n");
	} else {
		struct table st = { 8, { "SESSION", "ASSET", "CLIENT", "PROVIDER", "OFFSET", "BYTES",
					 "STATE", "AGE_S" }, { 1, 0, 1, 0, 1, 1, 0, 1 }, NULL, 0 };
		json_array_foreach(sess, i, v) {
			char *cells[8] = { num(json_object_get(v, "id")), (char *)str(v, "asset"),
					   num(json_object_get(v, "client")),
					   (char *)str(v, "provider"),
					   num(json_object_get(v, "offset")),
					   num(json_object_get(v, "bytes_served")),
					   (char *)str(v, "state"),
					   num(json_object_get(v, "age_s")) };
			table_row(&st, cells);
			free(cells[0]);
			free(cells[2]);
			free(cells[4]);
			free(cells[5]);
			free(cells[7]);
		}
		table_print(&st);
	}
	json_t *mem = json_object_get(root, "memory");
	if (json_is_object(mem)) {
		char a[32], b[32], c[32], d[32];
		mib(a, sizeof(a), json_object_get(mem, "readahead_used"));
		mib(b, sizeof(b), json_object_get(mem, "readahead_budget"));
		mib(c, sizeof(c), json_object_get(mem, "cache_used"));
		mib(d, sizeof(d), json_object_get(mem, "cache_size"));
		printf("\nread-ahead memory %s of %s; head/tail cache %s of %s\n", a, b, c, d);
	}
	json_decref(root);
	return EXIT_OK;
}

/* The master in use (behind Sentinel: whose, and the last failover). */
static void print_master(json_t *store)
{
	json_t *name = json_object_get(store, "sentinel_master");
	json_t *fo = json_object_get(store, "last_failover");
	json_t *rep = json_object_get(store, "replicas");

	printf("master %s", str(store, "master")[0] ? str(store, "master") : "(none yet)");
	if (json_is_string(name))
		printf(" (sentinels' %s)", json_string_value(name));
	if (json_is_integer(rep))
		printf(", %lld replica(s)", (long long)json_integer_value(rep));
	printf("\n");
	if (json_is_object(fo)) {
		time_t at = (time_t)json_number_value(json_object_get(fo, "at"));
		char when[64];
		struct tm tm;
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime_r(&at, &tm));
		printf("last failover: %s, from %s to %s (%lld so far)%s\n", when, str(fo, "from"),
		       str(fo, "to"), (long long)json_integer_value(json_object_get(store,
										"failovers")),
		       json_is_true(json_object_get(fo, "announced"))
		       ? ", followed on the sentinels' announcement" : "");
	}
}

/* `seamfs ctl hosts`: the store's state, then one row per host. */
static int print_hosts(const struct answer *ans)
{
	json_error_t jerr;
	json_t *root = json_loadb(ans->body, ans->len, 0, &jerr), *v;
	size_t i;

	if (!json_is_object(root)) {
		fprintf(stderr, "seamfs ctl: the answer is not a JSON object: %s\n", jerr.text);
		json_decref(root);
		return EXIT_DAEMON;
	}
	json_t *store = json_object_get(root, "store");
	if (!json_is_object(store)) {
		printf("not in cluster mode (no store= option): this host is alone\n");
		json_decref(root);
		return EXIT_OK;
	}
	json_t *lat = json_object_get(store, "latency_ms");
	printf("store %s, cluster %s, this host %s: %s", str(store, "url"), str(store, "cluster"),
	       str(store, "host_id"),
	       json_is_true(json_object_get(store, "connected")) ? "connected" : "NOT CONNECTED");
	if (json_is_number(lat))
		printf(", round trip %.2f ms", json_number_value(lat));
	printf("\n");
	print_master(store);
	if (str(store, "last_error")[0])
		printf("last error: %s\n", str(store, "last_error"));
	printf("\n");
	/* WRITERS: running / max_writers (0: takes no placements); LOAD:
	 * placement's (docs/cluster.md "Where a transcode is written") */
	struct table t = { 8, { "HOST", "PID", "HEARTBEAT_AGE_S", "UP_S", "SESSIONS", "WRITERS",
				"LOAD", "VERSION" }, { 0, 1, 1, 1, 1, 1, 1, 0 }, NULL, 0 };
	json_array_foreach(json_object_get(root, "hosts"), i, v) {
		char id[80], age[32], up[32], wr[48], load[32];
		snprintf(id, sizeof(id), "%s%s", str(v, "host_id"),
			 json_is_true(json_object_get(v, "self")) ? " (this)" : "");
		snprintf(age, sizeof(age), "%.1f",
			 json_number_value(json_object_get(v, "heartbeat_age_s")));
		snprintf(up, sizeof(up), "%.0f", json_number_value(json_object_get(v, "up_s")));
		snprintf(wr, sizeof(wr), "%lld/%lld",
			 (long long)json_integer_value(json_object_get(v, "writers")),
			 (long long)json_integer_value(json_object_get(v, "max_writers")));
		snprintf(load, sizeof(load), "%.2f", json_number_value(
			 json_object_get(json_object_get(v, "load"), "total")));
		char *cells[8] = { id, num(json_object_get(v, "pid")), age, up,
				   num(json_object_get(v, "sessions")), wr, load,
				   (char *)str(v, "version") };
		table_row(&t, cells);
		free(cells[1]);
		free(cells[4]);
	}
	table_print(&t);
	json_decref(root);
	return EXIT_OK;
}

/* How long restart --wait waits for the next worker: it builds its core
 * again (sizes come from the state directory), as systemd's default start
 * and reload bound (90 s) allows. */
#define RESTART_WAIT_S 90

/*
 * restart --wait: polls the status (the socket is gone or refused until the
 * next worker serves) until a worker other than old serves, and says
 * whether it is the binary on disk: the keeper serves with its own code
 * again when that binary does not come up. 0, or 1 (said why on stderr).
 * With report (--json) the outcome goes into it ("new_worker_pid", null
 * when none served in time, and "upgraded") instead of a line on stdout.
 */
static int wait_restarted(const char *sock, long long old, json_t *report)
{
	struct answer st = { 0 };
	int rc = EXIT_DAEMON;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	time_t deadline = now.tv_sec + RESTART_WAIT_S;

	while (clock_gettime(CLOCK_MONOTONIC, &now) == 0 && now.tv_sec < deadline) {
		usleep(100000);
		free(st.body);
		st.body = NULL;
		st.quiet = 1;
		if (request(sock, "GET", "/v1/status", NULL, &st) != 0 || st.status != 200)
			continue;
		json_t *o = json_loadb(st.body, st.len, 0, NULL);
		long long pid = json_integer_value(json_object_get(o, "worker_pid"));
		const char *end = json_string_value(
			json_object_get(json_object_get(o, "keeper"), "last_end"));
		int upgraded = end && strcmp(end, "ended for an upgrade") == 0;
		if (pid > 0 && pid != old && report) {
			json_object_set_new(report, "new_worker_pid", json_integer(pid));
			json_object_set_new(report, "upgraded", json_boolean(upgraded));
		}
		if (pid > 0 && pid != old && upgraded) {
			if (!report)
				printf("restarted: worker pid %lld serves, started from the binary "
				       "on disk\n", pid);
			rc = EXIT_OK;
		} else if (pid > 0 && pid != old) {
			fprintf(stderr, "seamfs ctl: the binary on disk did not come up (%s): worker "
				"pid %lld serves with the running version's code\n",
				end ? end : "no cause", pid);
		}
		json_decref(o);
		if (pid > 0 && pid != old)
			goto out;
	}
	fprintf(stderr, "seamfs ctl: %s: no new worker served within %d s (see the log)\n", sock,
		RESTART_WAIT_S);
out:
	free(st.body);
	return rc;
}

/*
 * restart --json --wait: waits as --wait does, then prints the daemon's
 * answer with the outcome added (wait_restarted), one JSON document, so
 * that a script reads what happened from the object and the exit status.
 */
static int restart_json(const char *sock, const struct answer *ans)
{
	json_t *o = json_loadb(ans->body, ans->len, 0, NULL);
	char *text = NULL;
	int rc = EXIT_DAEMON;
	if (!json_is_object(o)) {
		fprintf(stderr, "seamfs ctl: %s: the restart's answer is not a JSON object\n", sock);
		goto out;
	}
	json_object_set_new(o, "new_worker_pid", json_null());
	json_object_set_new(o, "upgraded", json_false());
	rc = wait_restarted(sock, json_integer_value(json_object_get(o, "worker_pid")), o);
	text = json_dumps(o, JSON_SORT_KEYS);
	if (text)
		printf("%s\n", text);
out:
	free(text);
	json_decref(o);
	return rc;
}

/* NAME as one path segment: everything but unreserved characters escaped. */
static char *escape_segment(const char *s)
{
	char *out = malloc(strlen(s) * 3 + 1), *o = out;
	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~')
			*o++ = (char)c;
		else
			o += sprintf(o, "%%%02X", c);
	}
	*o = '\0';
	return out;
}

/* A command line of seamfs ctl. */
struct ctl_cmd {
	const char *sock, *reason, *provider;
	const char *args[4];
	int nargs, json, wait;
	int named, plain, storage, reload, src;     /* the subcommand's kind */
};

/* The options and arguments into cmd. 0, 1 --help (printed), -1 bad
 * (said; usage follows). */
static int parse_args(int argc, char **argv, struct ctl_cmd *cmd)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 1;
		} else if (strcmp(argv[i], "--json") == 0) {
			cmd->json = 1;
		} else if (strcmp(argv[i], "--wait") == 0) {
			cmd->wait = 1;
		} else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
			cmd->sock = argv[++i];
		} else if (strncmp(argv[i], "--socket=", 9) == 0) {
			cmd->sock = argv[i] + 9;
		} else if (strcmp(argv[i], "--reason") == 0 && i + 1 < argc) {
			cmd->reason = argv[++i];
		} else if (strcmp(argv[i], "--provider") == 0 && i + 1 < argc) {
			cmd->provider = argv[++i];
		} else if (argv[i][0] == '-' && argv[i][1] != '\0') {
			fprintf(stderr, "seamfs ctl: unknown option '%s'\n", argv[i]);
			return -1;
		} else if (cmd->nargs < 4) {
			cmd->args[cmd->nargs++] = argv[i];
		} else {
			fprintf(stderr, "seamfs ctl: unexpected argument '%s'\n", argv[i]);
			return -1;
		}
	}
	return 0;
}

/* Whether cmd is a subcommand with its arguments (sets its kind). 0, -1
 * bad (said; usage follows). */
static int check_cmd(struct ctl_cmd *cmd)
{
	const char **args = cmd->args;
	int nargs = cmd->nargs;
	if (!args[0]) {
		fprintf(stderr, "seamfs ctl: missing SUBCOMMAND\n");
		return -1;
	}
	if (!cmd->sock || !cmd->sock[0]) {
		fprintf(stderr, "seamfs ctl: no socket: give --socket PATH or set "
			"SEAMFS_CONTROL_SOCKET\n");
		return -1;
	}
	int named = cmd->named = strcmp(args[0], "drain") == 0 || strcmp(args[0], "resume") == 0;
	int plain = cmd->plain = strcmp(args[0], "status") == 0 ||
				 strcmp(args[0], "metrics") == 0 ||
				 strcmp(args[0], "hosts") == 0 || strcmp(args[0], "copies") == 0;
	int storage = cmd->storage = strcmp(args[0], "storage") == 0;
	if (storage && (nargs != 3 || !args[2][0] ||
			(strcmp(args[1], "disable") && strcmp(args[1], "enable") &&
			 strcmp(args[1], "drain")))) {
		fprintf(stderr, "seamfs ctl: storage takes disable, enable or drain and a NAME\n");
		return -1;
	}
	/* reload and restart: a POST without a body */
	int reload = cmd->reload = strcmp(args[0], "reload") == 0 ||
				   strcmp(args[0], "restart") == 0;
	int src = cmd->src = strcmp(args[0], "add-source") == 0 ||
			     strcmp(args[0], "remove-source") == 0;
	if (storage) {
		/* checked above */
	} else if ((!named && !plain && !src && !reload) ||
		   (named && (nargs != 2 || !args[1][0])) ||
	    (reload && nargs != 1) ||
	    (src && (nargs != 3 || !args[1][0] || !args[2][0])) ||
	    (plain && nargs != 1) || (cmd->reason && strcmp(args[0], "drain") != 0) ||
	    (cmd->provider && strcmp(args[0], "add-source") != 0) ||
	    (cmd->wait && strcmp(args[0], "restart") != 0)) {
		if (!named && !plain && !src && !reload)
			fprintf(stderr, "seamfs ctl: unknown subcommand '%s'\n", args[0]);
		else
			fprintf(stderr, "seamfs ctl: wrong arguments for '%s'\n", args[0]);
		return -1;
	}
	return 0;
}

/* A POST of body (NULL: none) to target, both ours to free; out of memory
 * when either is missing (want_body: a body was to be made). */
static int post(const struct ctl_cmd *cmd, char *target, char *body, int want_body,
		struct answer *ans)
{
	int rc;
	if (!target || (want_body && !body)) {
		fprintf(stderr, "seamfs ctl: out of memory\n");
		rc = EXIT_DAEMON;
	} else {
		rc = request(cmd->sock, "POST", target, body, ans);
	}
	free(body);
	free(target);
	return rc;
}

/* The subcommand's request. 0, or an exit status (a message printed). */
static int send_cmd(const struct ctl_cmd *cmd, struct answer *ans)
{
	const char *const *args = cmd->args;
	char *body = NULL, *target = NULL;
	int rc;
	if (cmd->plain || cmd->reload) {
		char t[64];
		snprintf(t, sizeof(t), "/v1/%s", args[0]);
		return request(cmd->sock, cmd->plain ? "GET" : "POST", t, NULL, ans);
	}
	/* the storage's, the asset's or the provider's name */
	char *seg = escape_segment(args[cmd->storage ? 2 : 1]);
	if (cmd->storage) {
		if (seg && asprintf(&target, "/v1/storages/%s/%s", seg, args[1]) < 0)
			target = NULL;
		rc = post(cmd, target, NULL, 0, ans);
	} else if (cmd->src) {
		int add = strcmp(args[0], "add-source") == 0;
		int is_url = strstr(args[2], "://") != NULL;
		json_t *o = json_pack("{s:s}", is_url ? "url" : "path", args[2]);
		if (o && cmd->provider)
			json_object_set_new(o, "provider", json_string(cmd->provider));
		if (o)
			body = json_dumps(o, 0);
		json_decref(o);
		if (seg && asprintf(&target, "/v1/assets/%s/sources%s", seg,
				    add ? "" : "/remove") < 0)
			target = NULL;
		rc = post(cmd, target, body, 1, ans);
	} else {
		json_t *o = cmd->reason ? json_pack("{s:s}", "reason", cmd->reason) : NULL;
		if (o)
			body = json_dumps(o, 0);
		json_decref(o);
		if (seg && asprintf(&target, "/v1/providers/%s/%s", seg, args[0]) < 0)
			target = NULL;
		rc = post(cmd, target, body, cmd->reason != NULL, ans);
	}
	free(seg);
	return rc;
}

/* restart's answer, said; with --wait, until the new worker serves. */
static int print_restart(const struct ctl_cmd *cmd, const struct answer *ans)
{
	int rc = 0;
	json_t *o = json_loadb(ans->body, ans->len, 0, NULL);
	printf("restarting: keeper pid %lld ends worker pid %lld and starts the seamfs binary "
	       "on disk on the same mount; readers pause, open files stay open\n",
	       (long long)json_integer_value(json_object_get(o, "keeper_pid")),
	       (long long)json_integer_value(json_object_get(o, "worker_pid")));
	fflush(stdout);
	if (cmd->wait)
		rc = wait_restarted(cmd->sock, json_integer_value(json_object_get(o, "worker_pid")),
				    NULL);
	json_decref(o);
	return rc;
}

/* What a POST that changed something did, in words. */
static void print_done(const struct ctl_cmd *cmd, const struct answer *ans)
{
	const char *const *args = cmd->args;
	char shown[1024]; /* output may end up in a log: no credentials */
	if (cmd->storage) {
		printf("storage %s: %s\n", args[2],
		       strcmp(args[1], "enable") == 0 ? "copying role on: new copies may go there"
		       : strcmp(args[1], "drain") == 0 ? "copying role off and drained: no new copy "
			 "and no new session goes there; open ones move to another source"
		       : "copying role off: running copies finish, new ones go elsewhere; its "
			 "copies keep serving");
	} else if (cmd->reload) {
		json_t *o = json_loadb(ans->body, ans->len, 0, NULL);
		const char *notes = json_string_value(json_object_get(o, "notes"));
		printf("catalog reloaded%s%s\n", notes && notes[0] ? ": " : "", notes ? notes : "");
		json_decref(o);
	} else if (strcmp(args[0], "add-source") == 0) {
		px_redact_url(args[2], shown, sizeof(shown));
		printf("asset %s: %s added; live sessions take it as a standby once verified\n",
		       args[1], shown);
	} else if (strcmp(args[0], "remove-source") == 0) {
		px_redact_url(args[2], shown, sizeof(shown));
		printf("asset %s: %s removed; no new session or cutover goes there\n", args[1],
		       shown);
	} else if (strcmp(args[0], "drain") == 0) {
		printf("provider %s drained: it gets no new sessions; open ones go on\n", args[1]);
	} else {
		printf("provider %s resumed: it takes new sessions again\n", args[1]);
	}
}

/* The answer, as the subcommand shows it. Returns the exit status. */
static int print_answer(const struct ctl_cmd *cmd, struct answer *ans)
{
	const char *sub = cmd->args[0];
	if (ans->status >= 300)
		return daemon_error(ans);
	if (cmd->wait && cmd->json)
		return restart_json(cmd->sock, ans);
	if (cmd->json || strcmp(sub, "metrics") == 0) {
		fwrite(ans->body, 1, ans->len, stdout);
		return 0;
	}
	if (strcmp(sub, "status") == 0)
		return print_status(ans);
	if (strcmp(sub, "copies") == 0)
		return print_copies(ans);
	if (strcmp(sub, "hosts") == 0)
		return print_hosts(ans);
	if (strcmp(sub, "restart") == 0)
		return print_restart(cmd, ans);
	print_done(cmd, ans);
	return 0;
}

int fs_ctl_main(int argc, char **argv)
{
	struct ctl_cmd cmd = { .sock = getenv("SEAMFS_CONTROL_SOCKET") };
	struct answer ans = { 0 };
	int rc = parse_args(argc, argv, &cmd);
	if (rc > 0)
		return EXIT_OK;
	if (rc < 0 || check_cmd(&cmd))
		goto usage;
	/* requests are JSON and name catalog entries: UTF-8 only */
	const char *texts[] = { cmd.args[1], cmd.args[2], cmd.reason, cmd.provider };
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		if (texts[i] && !px_utf8_valid(texts[i])) {
			fprintf(stderr, "seamfs ctl: '%s' is not valid UTF-8\n", texts[i]);
			return EXIT_USAGE;
		}
	}
	rc = send_cmd(&cmd, &ans);
	if (rc == 0)
		rc = print_answer(&cmd, &ans);
	free(ans.body);
	return rc;
usage:
	fprintf(stderr, "usage: seamfs ctl [--socket PATH] [--json] status|metrics|hosts|drain NAME|"
		"resume NAME|add-source ID URL|remove-source ID URL|reload|restart|copies|"
		"storage disable|enable|drain NAME; see seamfs ctl --help\n");
	return EXIT_USAGE;
}
