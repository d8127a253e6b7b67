/*
 * lease.c - the lease logic and its embedded file backend.
 *
 * The file backend keeps each generation of a key's lease in its own file,
 * DIR/KEY.lease.GEN. Claiming generation G+1 is link(tmp, KEY.lease.G+1):
 * link fails with EEXIST when another claimant made that file first, which
 * is the compare-and-set; the winner then removes the older generations.
 * The stored lease is the highest generation present. A holder renews by
 * writing its own generation file (tmp + rename) after checking that no
 * newer generation exists; a renewal racing a takeover is harmless because
 * readers only look at the highest generation.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "lease.h"
#include "log.h"

struct px_lease_store {
	const struct px_lease_ops *ops;
	void *impl;
	int64_t (*now_ms)(void *clk);
	void *clk;
};

struct files {
	char dir[4096];
};

static int64_t wall_ms(void *clk)
{
	struct timespec ts;
	(void)clk;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

enum px_status px_lease_store_new(const struct px_lease_ops *ops, void *impl,
				  int64_t (*now_ms)(void *clk), void *clk,
				  struct px_lease_store **out)
{
	struct px_lease_store *s = calloc(1, sizeof(*s));
	*out = NULL;
	if (!s) {
		ops->free(impl);
		return PX_ENOMEM;
	}
	s->ops = ops;
	s->impl = impl;
	s->now_ms = now_ms ? now_ms : wall_ms;
	s->clk = clk;
	*out = s;
	return PX_OK;
}

void px_lease_store_free(struct px_lease_store *s)
{
	if (!s)
		return;
	s->ops->free(s->impl);
	free(s);
}

int64_t px_lease_now(const struct px_lease_store *s)
{
	return s->now_ms(s->clk);
}

/* ---- file backend */

static void escape_key(const char *key, char *buf, size_t cap)
{
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)key; *p && o + 4 < cap; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
		    (*p == '.' && p != (const unsigned char *)key))
			buf[o++] = (char)*p;
		else
			o += (size_t)snprintf(buf + o, cap - o, "%%%02X", *p);
	}
	buf[o] = '\0';
}

static void gen_path(const struct files *f, const char *key, uint64_t gen, char *buf,
		     size_t cap)
{
	char ek[3 * PX_LEASE_KEY_MAX + 1];
	escape_key(key, ek, sizeof(ek));
	snprintf(buf, cap, "%s/%s.lease.%" PRIu64, f->dir, ek, gen);
}

/* Highest generation stored for key, 0 if none. */
static uint64_t max_gen(const struct files *f, const char *key)
{
	char ek[3 * PX_LEASE_KEY_MAX + 16];
	uint64_t best = 0;
	DIR *d = opendir(f->dir);
	struct dirent *de;
	if (!d)
		return 0;
	escape_key(key, ek, sizeof(ek) - 8);
	strcat(ek, ".lease.");
	size_t n = strlen(ek);
	while ((de = readdir(d))) {
		char *end;
		if (strncmp(de->d_name, ek, n) != 0 || !de->d_name[n])
			continue;
		errno = 0;
		unsigned long long g = strtoull(de->d_name + n, &end, 10);
		if (!errno && *end == '\0' && g > best)
			best = g;
	}
	closedir(d);
	return best;
}

static int format_lease(const struct px_lease *l, char *buf, size_t cap)
{
	return snprintf(buf, cap, "seamfs-lease 1\nkey %s\nsession %s\nowner %s\ngen %" PRIu64
			"\nheartbeat_ms %lld\nreleased %d\nwriter_pid %lld\n", l->key,
			l->session, l->owner, l->gen, (long long)l->heartbeat_ms, l->released,
			(long long)l->writer_pid);
}

static enum px_status read_lease(const char *path, struct px_lease *l)
{
	char buf[2048], key[PX_LEASE_KEY_MAX + 1] = "";
	long long hb, pid;
	unsigned long long gen;
	int rel;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	memset(l, 0, sizeof(*l));
	if (fd < 0)
		return errno == ENOENT ? PX_ENOTFOUND : PX_EIO;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n == 0 ? PX_EINVAL : PX_EIO;
	buf[n] = '\0';
	if (sscanf(buf, "seamfs-lease 1\nkey %200s\nsession %32s\nowner %127s\ngen %llu\n"
		   "heartbeat_ms %lld\nreleased %d\nwriter_pid %lld\n", key, l->session,
		   l->owner, &gen, &hb, &rel, &pid) != 7) {
		px_warn("lease", "%s: not a lease record; ignored", path);
		return PX_EINVAL;
	}
	snprintf(l->key, sizeof(l->key), "%s", key);
	l->gen = gen;
	l->heartbeat_ms = hb;
	l->released = rel;
	l->writer_pid = pid;
	return PX_OK;
}

/* Writes l to a fresh temporary file; its name into tmp. */
static enum px_status write_tmp(const struct files *f, const struct px_lease *l, char *tmp,
				size_t cap)
{
	char buf[2048];
	unsigned r = 0;
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (unsigned)getpid();
	snprintf(tmp, cap, "%s/.lease-%d-%08x.tmp", f->dir, (int)getpid(), r);
	int n = format_lease(l, buf, sizeof(buf));
	int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return PX_EIO;
	if (write(fd, buf, (size_t)n) != n || fsync(fd)) {
		close(fd);
		unlink(tmp);
		return PX_EIO;
	}
	close(fd);
	return PX_OK;
}

static enum px_status files_get(void *impl, const char *key, struct px_lease *out)
{
	struct files *f = impl;
	char path[4600];
	uint64_t g = max_gen(f, key);
	if (!g)
		return PX_ENOTFOUND;
	gen_path(f, key, g, path, sizeof(path));
	enum px_status st = read_lease(path, out);
	out->gen = g;
	return st;
}

static enum px_status files_claim(void *impl, uint64_t expect_gen, struct px_lease *l)
{
	struct files *f = impl;
	char tmp[4300], path[4600];
	uint64_t cur = max_gen(f, l->key);
	enum px_status st;

	if (cur != expect_gen) {
		l->gen = cur;
		return PX_EFENCED;
	}
	l->gen = expect_gen + 1;
	if ((st = write_tmp(f, l, tmp, sizeof(tmp))) != PX_OK)
		return st;
	gen_path(f, l->key, l->gen, path, sizeof(path));
	int rc = link(tmp, path);
	int e = errno;
	unlink(tmp);
	if (rc) {
		l->gen = expect_gen;
		return e == EEXIST ? PX_EFENCED : PX_EIO;
	}
	for (uint64_t g = expect_gen; g >= 1 && g + 8 > expect_gen; g--) {
		gen_path(f, l->key, g, path, sizeof(path));
		unlink(path);
	}
	return PX_OK;
}

static enum px_status files_renew(void *impl, const struct px_lease *l)
{
	struct files *f = impl;
	char tmp[4300], path[4600];
	enum px_status st;

	gen_path(f, l->key, l->gen + 1, path, sizeof(path));
	if (access(path, F_OK) == 0)
		return PX_EFENCED;
	gen_path(f, l->key, l->gen, path, sizeof(path));
	if (access(path, F_OK) != 0)
		return PX_EFENCED;
	if ((st = write_tmp(f, l, tmp, sizeof(tmp))) != PX_OK)
		return st;
	if (rename(tmp, path)) {
		unlink(tmp);
		return PX_EIO;
	}
	return PX_OK;
}

static enum px_status files_drop(void *impl, const char *key)
{
	struct files *f = impl;
	char path[4600];
	uint64_t g;
	while ((g = max_gen(f, key)) != 0) {
		gen_path(f, key, g, path, sizeof(path));
		if (unlink(path) && errno != ENOENT)
			return PX_EIO;
	}
	return PX_OK;
}

static void files_free(void *impl)
{
	free(impl);
}

static const struct px_lease_ops files_ops = {
	.claim = files_claim, .renew = files_renew, .get = files_get,
	.drop = files_drop, .free = files_free,
};

enum px_status px_lease_files_new(const char *dir, int64_t (*now_ms)(void *clk), void *clk,
				  struct px_lease_store **out)
{
	struct files *f = calloc(1, sizeof(*f));
	*out = NULL;
	if (!f)
		return PX_ENOMEM;
	if (snprintf(f->dir, sizeof(f->dir), "%s", dir) >= (int)sizeof(f->dir) ||
	    (mkdir(dir, 0755) && errno != EEXIST)) {
		free(f);
		return PX_EIO;
	}
	return px_lease_store_new(&files_ops, f, now_ms, clk, out);
}

static int all_of(const char *s, size_t n, const char *set)
{
	for (size_t i = 0; i < n; i++)
		if (!s[i] || !strchr(set, s[i]))
			return 0;
	return n > 0;
}

#define DIGITS "0123456789"
#define KEYCHARS DIGITS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_.%"

int px_lease_files_own(const char *name)
{
	size_t len = strlen(name);
	/* write_tmp's ".lease-PID-RANDOM.tmp" */
	if (strncmp(name, ".lease-", 7) == 0 && len > 7 + 1 + 1 + 8 + 4 &&
	    strcmp(name + len - 4, ".tmp") == 0) {
		const char *dash = strchr(name + 7, '-');
		return dash && all_of(name + 7, (size_t)(dash - name - 7), DIGITS) &&
		       dash + 1 + 8 == name + len - 4 && all_of(dash + 1, 8, DIGITS "abcdef");
	}
	/* gen_path's "KEY.lease.GEN", KEY escaped (escape_key) */
	const char *gen = NULL;
	for (const char *p = strstr(name, ".lease."); p; p = strstr(p + 1, ".lease."))
		gen = p;
	return gen && name[0] != '.' && all_of(name, (size_t)(gen - name), KEYCHARS) &&
	       all_of(gen + 7, strlen(gen + 7), DIGITS);
}

/* ---- the lease logic, backend-neutral */

int px_lease_orphaned(const struct px_lease *l, int64_t now_ms, int64_t orphan_after_ms)
{
	return l->released || now_ms - l->heartbeat_ms > orphan_after_ms;
}

int px_lease_protects(const struct px_lease *l, int64_t now_ms, int64_t orphan_after_ms,
		      int64_t grace_ms)
{
	int64_t end = l->heartbeat_ms + (l->released ? 0 : orphan_after_ms);
	return now_ms <= end + grace_ms;
}

static void random_hex(char *buf, size_t nbytes)
{
	unsigned char r[32];
	if (nbytes > sizeof(r))
		nbytes = sizeof(r);
	if (getrandom(r, nbytes, 0) != (ssize_t)nbytes) {
		uint64_t x = (uint64_t)wall_ms(NULL) ^ ((uint64_t)getpid() << 32);
		for (size_t i = 0; i < nbytes; i++, x = x * 6364136223846793005ULL + 1)
			r[i] = (unsigned char)(x >> 56);
	}
	for (size_t i = 0; i < nbytes; i++)
		sprintf(buf + 2 * i, "%02x", r[i]);
}

void px_lease_make_owner(char *buf, size_t cap)
{
	px_lease_make_owner_host(buf, cap, NULL);
}

void px_lease_make_owner_host(char *buf, size_t cap, const char *given)
{
	char host[64] = "localhost", rnd[17];
	if (given)
		snprintf(host, sizeof(host), "%s", given);
	else if (gethostname(host, sizeof(host) - 1))
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	for (char *p = host; *p; p++)
		if (*p == ' ' || *p == '\n' || *p == ':')
			*p = '_';
	random_hex(rnd, 8);
	snprintf(buf, cap, "%s:%d:%s", host, (int)getpid(), rnd);
}

enum px_status px_lease_claim(struct px_lease_store *s, const char *key, const char *owner,
			      int64_t orphan_after_ms, struct px_lease *out)
{
	struct px_lease cur, l;
	uint64_t expect = 0;
	int64_t now = px_lease_now(s);
	enum px_status st = s->ops->get(s->impl, key, &cur);

	memset(&l, 0, sizeof(l));
	if (strlen(key) > PX_LEASE_KEY_MAX)
		return PX_EINVAL;
	if (st == PX_OK) {
		/* our own live lease may be claimed again: the new generation
		 * fences the writer that worked under the old one */
		if (!px_lease_orphaned(&cur, now, orphan_after_ms) &&
		    strcmp(cur.owner, owner) != 0) {
			*out = cur;
			return PX_EFENCED;
		}
		expect = cur.gen;
		snprintf(l.session, sizeof(l.session), "%s", cur.session);
	} else if (st == PX_ENOTFOUND || st == PX_EINVAL) {
		/* nothing stored, or an unreadable record (whose generation the
		 * backend still reports: it is the one to beat) */
		expect = st == PX_EINVAL ? cur.gen : 0;
		random_hex(l.session, 16);
	} else {
		return st;
	}
	snprintf(l.key, sizeof(l.key), "%s", key);
	snprintf(l.owner, sizeof(l.owner), "%s", owner);
	l.heartbeat_ms = now;
	st = s->ops->claim(s->impl, expect, &l);
	if (st == PX_EFENCED && s->ops->get(s->impl, key, out) == PX_OK)
		return PX_EFENCED;
	if (st == PX_OK)
		*out = l;
	return st;
}

enum px_status px_lease_cas(struct px_lease_store *s, uint64_t expect_gen,
			    struct px_lease *l)
{
	return s->ops->claim(s->impl, expect_gen, l);
}

enum px_status px_lease_heartbeat(struct px_lease_store *s, struct px_lease *l)
{
	int64_t prev = l->heartbeat_ms;
	l->heartbeat_ms = px_lease_now(s);
	enum px_status st = s->ops->renew(s->impl, l);
	if (st != PX_OK)
		l->heartbeat_ms = prev;
	return st;
}

enum px_status px_lease_release(struct px_lease_store *s, struct px_lease *l)
{
	l->released = 1;
	l->heartbeat_ms = px_lease_now(s);
	return s->ops->renew(s->impl, l);
}

enum px_status px_lease_get(struct px_lease_store *s, const char *key, struct px_lease *out)
{
	return s->ops->get(s->impl, key, out);
}

enum px_status px_lease_drop(struct px_lease_store *s, const char *key)
{
	return s->ops->drop(s->impl, key);
}
