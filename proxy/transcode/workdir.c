/*
 * workdir.c - the transcode work directory: job directory names, the
 * marker that tells seamfs's directories from anyone else's, and the
 * cleanup that removes only files seamfs made (at mount, before a fresh
 * plan, and of jobs no longer in the catalog).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "playlist.h"
#include "transcode_i.h"

void tc_escape_id(const char *id, char *buf, size_t cap)
{
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)id; *p && o + 4 < cap; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
		    (*p == '.' && p != (const unsigned char *)id))
			buf[o++] = (char)*p;
		else
			o += (size_t)snprintf(buf + o, cap - o, "%%%02X", *p);
	}
	buf[o] = '\0';
}

/* ------------------------------------------------------------ work files
 *
 * seamfs removes only what it made (issue 14): work_dir may be any path
 * the operator names, and the daemon often runs as root. Every directory
 * seamfs makes there (work_dir itself, leases/, each job directory)
 * carries the marker file WORK_MARKER; seamfs removes entries only inside
 * a marked directory, and only those whose names are ones it makes
 * (job_file_name, px_lease_files_own). A job directory is removed only
 * once nothing else is left in it. A work_dir that exists without the
 * marker is used only when it is empty or every entry in it is shaped
 * like an older seamfs's (then it is adopted: marked); else the mount is
 * refused (px_transcode_prepare_work).
 */

static int job_dir_name(const char *name)
{
	/* what escape_id makes: [A-Za-z0-9_.%-], no leading '.' */
	if (!name[0] || name[0] == '.')
		return 0;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.' ||
		      *p == '%'))
			return 0;
	return 1;
}

int tc_job_file_name(const char *name)
{
	static const char *const fixed[] = { WORK_MARKER, "plan.json", "plan.json.tmp",
					     "playlist", "playlist.tmp", NULL };
	for (size_t i = 0; fixed[i]; i++)
		if (strcmp(name, fixed[i]) == 0)
			return 1;
	if (px_write_atomic_tmp(name, "playlist") || px_write_atomic_tmp(name, "plan.json"))
		return 1; /* px_playlist_save's, write_plan_file's */
	/* an older seamfs's plan.json.PID.tmp */
	if (strncmp(name, "plan.json.", 10) == 0) {
		const char *p = name + 10;
		if (*p < '0' || *p > '9')
			return 0;
		while (*p >= '0' && *p <= '9')
			p++;
		return strcmp(p, ".tmp") == 0;
	}
	/* px_playlist_seg_file: seg-%06u.ts (fewer than a million), in
	 * cluster mode seg-%06u.gGEN.ts; the writer's new file NAME.XXXXXX.tmp
	 * (an older writer's NAME.tmp); a probe's before it is listed:
	 * .probe.tmp (PX_WRITER_PROBE_TMP) */
	uint32_t k;
	uint64_t gen;
	char tail[16];
	if (!px_playlist_seg_parse(name, &k, &gen, tail, sizeof(tail)))
		return 0;
	return strcmp(tail, "") == 0 || strcmp(tail, ".tmp") == 0 ||
	       px_write_atomic_tmp(tail, "") || strcmp(tail, ".probe.tmp") == 0;
}

/* Whether dir (not a symlink) is a directory carrying the marker. */
static int marked_dir(const char *dir)
{
	char path[PATH_MAX + 32];
	struct stat sb;
	if (lstat(dir, &sb) || !S_ISDIR(sb.st_mode))
		return 0;
	snprintf(path, sizeof(path), "%s/%s", dir, WORK_MARKER);
	return lstat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

int tc_mark_dir(const char *dir)
{
	static const char text[] =
		"seamfs made this directory (work_dir of its transcodes). It removes\n"
		"only the files it made here; anything else is left alone.\n";
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", dir, WORK_MARKER);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return errno == EEXIST ? 0 : -1;
	int ok = write(fd, text, sizeof(text) - 1) == (ssize_t)sizeof(text) - 1;
	int e = errno;
	close(fd);
	errno = e;
	return ok ? 0 : -1;
}

int tc_clear_job_dir(const char *dir, int rmdir_too)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char foreign[NAME_MAX + 1] = "";
	int rc = 0;
	if (!d)
		return errno == ENOENT ? 0 : -1;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    strcmp(de->d_name, WORK_MARKER) == 0)
			continue;
		/* a directory under one of our names is not ours: unlinkat fails */
		if (!tc_job_file_name(de->d_name) || unlinkat(dirfd(d), de->d_name, 0)) {
			snprintf(foreign, sizeof(foreign), "%s", de->d_name);
			rc = -1;
		}
	}
	if (rc == 0 && rmdir_too) {
		if (unlinkat(dirfd(d), WORK_MARKER, 0) && errno != ENOENT)
			rc = -1;
	}
	closedir(d);
	if (rc == 0 && rmdir_too && rmdir(dir))
		rc = -1;
	if (foreign[0])
		px_warn("transcode", "cleanup: %s holds %s, which seamfs did not make; leaving it%s",
			dir, foreign, rmdir_too ? " and the directory" : "");
	return rc;
}

/* An entry of a work_dir without the marker: one an older seamfs made (a
 * job directory holding only job files, or the leases directory holding
 * only lease files)? Empty job directories count only under the name of a
 * transcode of cat. Else its name (and the foreign name in it) into what. */
static int legacy_entry(const char *work, const char *name, const struct px_catalog *cat,
			char *what, size_t cap)
{
	char path[PATH_MAX * 2], esc[PATH_MAX];
	struct stat sb;
	int leases = strcmp(name, "leases") == 0, n = 0, ok = 1;
	snprintf(what, cap, "%s", name);
	snprintf(path, sizeof(path), "%s/%s", work, name);
	if ((!leases && !job_dir_name(name)) || lstat(path, &sb) || !S_ISDIR(sb.st_mode))
		return 0;
	DIR *d = opendir(path);
	struct dirent *de;
	while (d && ok && (de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		n++;
		ok = strcmp(de->d_name, WORK_MARKER) == 0 ||
		     (leases ? px_lease_files_own(de->d_name) : tc_job_file_name(de->d_name));
		if (!ok)
			snprintf(what, cap, "%s/%s", name, de->d_name);
	}
	if (!d)
		return 0;
	closedir(d);
	if (!ok || n || leases)
		return ok;
	for (size_t i = 0; i < cat->nassets; i++) {
		if (cat->assets[i].kind == PX_ASSET_PLAIN)
			continue;
		tc_escape_id(cat->assets[i].id, esc, sizeof(esc));
		if (strcmp(esc, name) == 0)
			return 1;
	}
	return 0;
}

void tc_work_path(const struct px_config *cfg, char *buf, size_t cap)
{
	if (cfg->work_dir)
		snprintf(buf, cap, "%s", cfg->work_dir);
	else
		snprintf(buf, cap, "%s/transcode", cfg->state_dir ? cfg->state_dir : "/tmp/seamfs");
}

enum px_status px_transcode_prepare_work(const struct px_config *cfg,
					 const struct px_catalog *cat, char *err, size_t errlen)
{
	char work[PATH_MAX], what[PATH_MAX * 2], path[PATH_MAX * 2];
	struct stat sb;
	size_t n = 0, i;
	DIR *d;
	struct dirent *de;

	for (i = 0; i < cat->nassets && cat->assets[i].kind == PX_ASSET_PLAIN; i++)
		;
	if (i == cat->nassets)
		return PX_OK; /* no transcode: work_dir is not used */
	tc_work_path(cfg, work, sizeof(work));
	if (stat(work, &sb)) {
		if (errno != ENOENT || px_mkdir_p(work, 0755) || tc_mark_dir(work))
			goto io;
		return PX_OK;
	}
	if (!S_ISDIR(sb.st_mode)) {
		snprintf(err, errlen, "work_dir %s: not a directory", work);
		return PX_EINVAL;
	}
	snprintf(path, sizeof(path), "%s/%s", work, WORK_MARKER);
	if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode))
		return PX_OK;
	/* no marker: empty, made by an older seamfs, or someone else's */
	if (!(d = opendir(work)))
		goto io;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		/* another host or daemon on this work_dir made it and marked
		 * it since the stat above (a cluster booting at once) */
		if (strcmp(de->d_name, WORK_MARKER) == 0) {
			closedir(d);
			return PX_OK;
		}
		n++;
		if (!legacy_entry(work, de->d_name, cat, what, sizeof(what))) {
			closedir(d);
			if (marked_dir(work))
				return PX_OK; /* marked while this loop read it */
			snprintf(err, errlen, "work_dir %s is not empty and seamfs did not make it "
				 "(no %s in it): it holds %s; not using it (name an empty or new "
				 "directory, or move its contents away)", work, WORK_MARKER, what);
			return PX_EINVAL;
		}
	}
	closedir(d);
	/* every entry is an older seamfs's: mark them, then work_dir itself */
	if ((d = opendir(work))) {
		while ((de = readdir(d))) {
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			snprintf(path, sizeof(path), "%s/%s", work, de->d_name);
			if (tc_mark_dir(path))
				px_warn("transcode", "work_dir: cannot mark %s: %s", path,
					strerror(errno));
		}
		closedir(d);
	}
	if (tc_mark_dir(work))
		goto io;
	if (n)
		px_info("transcode", "work_dir %s: made by an older seamfs (no %s): its %zu "
			"entries look like seamfs's; marked and kept", work, WORK_MARKER, n);
	return PX_OK;
io:
	snprintf(err, errlen, "work_dir %s: %s", work, strerror(errno));
	return PX_EIO;
}

int tc_marked_soon(const char *dir)
{
	for (int i = 0; i < 20; i++) {
		if (marked_dir(dir))
			return 1;
		struct timespec ts = { 0, 50 * 1000000 };
		nanosleep(&ts, NULL);
	}
	return marked_dir(dir);
}

void tc_cleanup_orphans(struct px_transcode *tc)
{
	DIR *d = opendir(tc->work);
	struct dirent *de;
	int64_t now = px_lease_now(tc->leases);
	while (d && (de = readdir(d))) {
		char path[PATH_MAX * 2], esc[PATH_MAX];
		int known = 0;
		if (de->d_name[0] == '.' || strcmp(de->d_name, "leases") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", tc->work, de->d_name);
		if (!job_dir_name(de->d_name) || !marked_dir(path)) {
			px_info("transcode", "cleanup: leaving %s alone: seamfs did not make it (no %s)",
				path, WORK_MARKER);
			continue;
		}
		for (size_t i = 0; i < tc->cat->nassets && !known; i++) {
			if (tc->cat->assets[i].kind == PX_ASSET_PLAIN)
				continue;
			tc_escape_id(tc->cat->assets[i].id, esc, sizeof(esc));
			known = strcmp(esc, de->d_name) == 0;
		}
		if (known)
			continue;
		/* a lease is keyed by the asset id, which the name escapes */
		char id[PATH_MAX];
		size_t o = 0;
		for (const char *p = de->d_name; *p && o + 1 < sizeof(id); p++) {
			unsigned v;
			if (p[0] == '%' && sscanf(p + 1, "%2x", &v) == 1) {
				id[o++] = (char)v;
				p += 2;
			} else {
				id[o++] = *p;
			}
		}
		id[o] = '\0';
		struct px_lease l;
		if (px_lease_get(tc->leases, id, &l) == PX_OK &&
		    px_lease_protects(&l, now, tc->orphan_ms, tc->orphan_ms)) {
			px_info("transcode", "cleanup: keeping %s/%s: its lease (%s) is live or "
				"recently expired", tc->work, de->d_name, l.owner);
			continue;
		}
		px_info("transcode", "cleanup: removing %s (no asset, no lease)", path);
		(void)tc_clear_job_dir(path, 1);
		if (px_lease_drop(tc->leases, id) != PX_OK)
			px_warn("transcode", "cleanup: lease of %s not dropped", id);
	}
	if (d)
		closedir(d);
}
