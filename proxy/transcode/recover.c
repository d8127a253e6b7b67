/*
 * recover.c - recovery before each writer start and the lease it runs
 * under: the lease claimed by compare-and-set (a new generation fences
 * any older writer), the listed segments that still hold trusted, every
 * other file seamfs made removed, the playlist rewritten
 * (docs/transcode.md "Recovery").
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "playlist.h"
#include "kvstore.h"
#include "tcstore.h"
#include "transcode_i.h"

/* Whether the entry de of the directory dirfd is a symbolic link. */
static int link_at(int dirfd, const struct dirent *de)
{
	struct stat sb;
	if (de->d_type != DT_UNKNOWN)
		return de->d_type == DT_LNK;
	return fstatat(dirfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode);
}

int tc_probe_covers(const struct job *j, uint32_t k)
{
	for (int i = 0; i < PROBES_MAX; i++)
		if (j->probes[i].pid && k >= j->probes[i].from && k <= j->probes[i].until)
			return 1;
	return 0;
}

/* The entries of pl that the playlist rule and the files on disk let be
 * trusted and that have the plan's size, copied into keep (*t marks
 * them; *t and *seen are the caller's to free); how many. */
static size_t keep_trusted(struct px_transcode *tc, struct job *j, const struct px_playlist *pl,
			   struct px_playlist *keep, unsigned char **t,
			   struct px_seg_seen **seen, int *repaired)
{
	size_t ntrust = 0;
	*t = calloc(pl->n + 1, 1);
	*seen = tc_look(tc, j, pl);
	if (*t && *seen)
		ntrust = px_playlist_trust(pl, *seen, *t);
	for (size_t i = 0; *t && *seen && i < pl->n; i++) {
		if ((*t)[i] && pl->e[i].size != seg_size(j, pl->e[i].index)) {
			px_warn("transcode", "recovery: asset %s: segment %u has %lld bytes, "
				"the plan %lld", j->a->id, pl->e[i].index,
				(long long)pl->e[i].size,
				(long long)seg_size(j, pl->e[i].index));
			(*t)[i] = 0;
			ntrust--;
		}
		if (!(*t)[i]) {
			*repaired = 1;
			px_info("transcode", "recovery: asset %s: segment %u distrusted "
				"(changed on disk)", j->a->id, pl->e[i].index);
			continue;
		}
		if (px_playlist_add_gen(keep, pl->e[i].index, pl->e[i].size,
					pl->e[i].mtime_ns, pl->e[i].gen) != PX_OK)
			ntrust--;
	}
	return ntrust;
}

/* Removes the leftovers of j's directory: .tmp files, segments that keep
 * does not list (keep_segments: segment files of other generations
 * stay), never a running probe's files or a link someone planted. */
static void remove_leftovers(struct px_transcode *tc, struct job *j,
			     const struct px_playlist *keep, int keep_segments, int *repaired)
{
	DIR *d = opendir(j->dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		uint32_t k;
		uint64_t g;
		char tail[16];
		/* a link under a name seamfs makes: seamfs makes none, someone
		 * who can write here planted it; left alone, logged, counted */
		if (tc_job_file_name(de->d_name) && link_at(dirfd(d), de)) {
			px_warn("transcode", "recovery: asset %s: %s/%s is a link seamfs did not "
				"make: left alone", j->a->id, j->dir, de->d_name);
			j->work_links++;
			continue;
		}
		/* only names seamfs makes: a user's file here is left alone */
		if (!tc_job_file_name(de->d_name) ||
		    !px_playlist_seg_parse(de->d_name, &k, &g, tail, sizeof(tail))) {
			size_t len = strlen(de->d_name);
			if (!(tc_job_file_name(de->d_name) && len > 4 &&
			      strcmp(de->d_name + len - 4, ".tmp") == 0))
				continue;
			if (unlinkat(dirfd(d), de->d_name, 0) == 0)
				*repaired = 1;
			continue;
		}
		if (tc_probe_covers(j, k) && (!tc->store || g == j->lease.gen))
			continue; /* a running probe's: it lists them when it ends */
		if (keep_segments && tail[0] == '\0' && g != j->lease.gen)
			continue;
		long at = k < keep->nseg ? px_playlist_find(keep, k) : -1;
		int listed = at >= 0 && tail[0] == '\0' && keep->e[at].gen == g;
		if (!listed) {
			if (unlinkat(dirfd(d), de->d_name, 0) == 0) {
				*repaired = 1;
				px_debug("transcode", "recovery: asset %s: removed %s", j->a->id,
					 de->d_name);
			}
		}
	}
	if (d)
		closedir(d);
}

/* Puts keep into the store as j's list if j's generation and the list's
 * version ver still hold (px_tcstore_pl_put). */
static enum px_status save_kept(struct px_transcode *tc, struct job *j,
				const struct px_playlist *keep, uint64_t ver)
{
	size_t len;
	uint64_t nv = 0;
	char *text = px_playlist_format(keep, &len);
	enum px_status ps = text ? px_tcstore_pl_put(tc->store, j->a->id, j->lease.gen, ver,
						     text, len, &nv)
				 : PX_ENOMEM;
	free(text);
	if (ps == PX_OK)
		j->plver = nv;
	return ps;
}

/* The first segment >= from (0 when from is past the end) j does not
 * trust. */
static uint32_t first_untrusted(const struct job *j, uint32_t from)
{
	uint32_t first = from < j->plan.nseg ? from : 0;
	while (first < j->plan.nseg && j->ok[first])
		first++;
	return first;
}

uint32_t tc_recover(struct px_transcode *tc, struct job *j, uint32_t from, int *repaired)
{
	struct px_playlist pl, keep;
	char err[512];
	unsigned char *t = NULL;
	struct px_seg_seen *seen = NULL;
	size_t ntrust = 0;
	uint64_t ver = 0;
	/* one host: the directory's flock; cluster mode: the store's
	 * compare-and-set (a flock a stopped writer of another host held
	 * would stop everyone) */
	int lk = tc->store ? -1 : px_playlist_lock(j->dir);
	int tries = 0;
	enum px_status st;

again:
	st = tc_load_list(tc, j, &pl, &ver, err, sizeof(err));
	if (st == PX_EEXIST) {
		/* a link at the playlist: not read, not removed (the save below
		 * renames the cleaned list over it, never writing through) */
		tc_list_in_way(j, err);
		tc_list_from_memory(j, &pl);
		st = PX_OK;
	}
	*repaired = 0;
	ntrust = 0;
	px_playlist_init(&keep, j->plan.seg_bytes, j->plan.nseg);
	if (st == PX_OK && (pl.seg_bytes != j->plan.seg_bytes || pl.nseg != j->plan.nseg)) {
		snprintf(err, sizeof(err), "%s: lists %u x %lld bytes, the plan %u x %lld",
			 j->pl_path, pl.nseg, (long long)pl.seg_bytes, j->plan.nseg,
			 (long long)j->plan.seg_bytes);
		px_playlist_release(&pl);
		st = PX_EINVAL;
	}
	if (st == PX_OK) {
		ntrust = keep_trusted(tc, j, &pl, &keep, &t, &seen, repaired);
	} else if (st != PX_ENOTFOUND) {
		if (tc->store && st != PX_EINVAL) {
			/* the store does not answer: touch nothing (what it lists
			 * is not known); the writer lists what it makes later */
			px_warn("transcode", "recovery: asset %s: %s; leaving its files as they are",
				j->a->id, err);
			return first_untrusted(j, from);
		}
		px_warn("transcode", "recovery: asset %s: %s; starting afresh", j->a->id, err);
	}
	/* cluster mode, no list in the store (never written, or the store
	 * restarted empty): segment files there are kept, untrusted, since
	 * another host may still serve what it trusted before; the new
	 * writer's files carry its own generation */
	remove_leftovers(tc, j, &keep, tc->store && st == PX_ENOTFOUND, repaired);
	keep.clean = keep.n > 0;
	if (!tc->store) {
		if (px_playlist_save(&keep, j->pl_path, err, sizeof(err)) != PX_OK)
			px_error("transcode", "recovery: asset %s: %s", j->a->id, err);
	} else {
		enum px_status ps = save_kept(tc, j, &keep, ver);
		if (ps == PX_EEXIST && tries++ < 3) {
			/* changed meanwhile (by a probe of ours): once more */
			px_playlist_release(&keep);
			if (st == PX_OK)
				px_playlist_release(&pl);
			free(t);
			free(seen);
			t = NULL;
			seen = NULL;
			goto again;
		} else if (ps != PX_OK) {
			px_warn("transcode", "recovery: asset %s: the store did not take the cleaned "
				"list: %s", j->a->id, px_strerror(ps));
		}
	}
	px_playlist_unlock(lk);
	memset(j->ok, 0, j->plan.nseg);
	for (size_t i = 0; i < keep.n; i++) {
		j->ok[keep.e[i].index] = 1;
		j->okgen[keep.e[i].index] = keep.e[i].gen;
		j->okmt[keep.e[i].index] = keep.e[i].mtime_ns;
	}
	uint32_t first = first_untrusted(j, from);
	if (st == PX_OK)
		px_info("transcode", "recovery: asset %s: %zu of %zu listed segments trusted; "
			"first untrusted from %u is %u", j->a->id, ntrust, pl.n, from, first);
	px_playlist_release(&keep);
	if (st == PX_OK)
		px_playlist_release(&pl);
	free(t);
	free(seen);
	return first;
}

long tc_local_owner_pid(const struct px_transcode *tc, const char *owner)
{
	size_t hl = strlen(tc->host);
	if (strncmp(owner, tc->host, hl) != 0 || owner[hl] != ':')
		return -1;
	long pid = strtol(owner + hl + 1, NULL, 10);
	return pid > 0 ? pid : 0;
}

int tc_store_settled(const struct px_transcode *tc)
{
	int64_t back = tc->store ? px_store_back_ms(tc->store) : 0;
	return !back || px_now_ms() - back >= tc->orphan_ms;
}

enum px_status tc_hold_lease(struct px_transcode *tc, struct job *j)
{
	struct px_lease cur;
	int64_t orphan = tc->orphan_ms;
	int had = 0, other_host = 0;
	enum px_status gst = px_lease_get(tc->leases, j->a->id, &cur);
	if (tc->store && gst != PX_OK && gst != PX_ENOTFOUND && gst != PX_EINVAL) {
		/* no claim while the store does not answer: the holder may be
		 * alive on another host, which only the store can tell */
		if (!j->remote)
			px_warn("transcode", "lease: asset %s: store %s: %s; no writer starts until it "
				"answers", j->a->id, px_store_url(tc->store), px_strerror(gst));
		return gst;
	}
	/* a holder on this host whose daemon and writer are gone is orphaned
	 * now, not after orphan_after */
	if (gst == PX_OK && !cur.released) {
		long opid = tc_local_owner_pid(tc, cur.owner);
		had = 1;
		other_host = opid < 0;
		if (opid > 0 && px_pid_gone((pid_t)opid) &&
		    (cur.writer_pid <= 0 || px_pid_gone((pid_t)cur.writer_pid)))
			orphan = -1;
	}
	if (orphan >= 0 && other_host && !tc_store_settled(tc))
		orphan = INT64_MAX / 4; /* only a released (or no) lease now */
	enum px_status st = px_lease_claim(tc->leases, j->a->id, tc->owner, orphan, &j->lease);
	if (st == PX_OK) {
		j->have_lease = 1;
		j->remote = 0;
		px_info("transcode", "lease: asset %s session %s generation %" PRIu64 " claimed by %s",
			j->a->id, j->lease.session, j->lease.gen, tc->owner);
		if (tc->store && had && other_host) {
			j->takeovers++;
			px_warn("transcode", "takeover: asset %s from %s (generation %" PRIu64 ", no "
				"heartbeat for %lld ms); writing it here from its last trusted "
				"segment", j->a->id, cur.owner, cur.gen,
				(long long)(px_lease_now(tc->leases) - cur.heartbeat_ms));
		}
	} else if (st == PX_EFENCED) {
		if (tc->store) {
			/* another host's live writer: follow its commits */
			if (!j->remote || strcmp(j->remote_owner, j->lease.owner))
				px_info("transcode", "lease: asset %s is written by %s (generation %"
					PRIu64 "); serving its segments as they are committed",
					j->a->id, j->lease.owner, j->lease.gen);
			snprintf(j->remote_owner, sizeof(j->remote_owner), "%s", j->lease.owner);
		} else {
			px_warn("transcode", "lease: asset %s is held by %s (generation %" PRIu64 ")",
				j->a->id, j->lease.owner, j->lease.gen);
		}
	} else {
		px_error("transcode", "lease: asset %s: %s", j->a->id, px_strerror(st));
	}
	return st;
}

void tc_drop_lease(struct px_transcode *tc, struct job *j)
{
	if (j->pid || j->nprobes || j->retry_at || j->queued)
		return;
	if (j->have_lease && px_lease_release(tc->leases, &j->lease) != PX_OK)
		px_warn("transcode", "lease: asset %s: could not release", j->a->id);
	j->have_lease = 0;
}
