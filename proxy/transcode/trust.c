/*
 * trust.c - which segments of a job may be served: its playlist (the
 * directory's, or the store's in cluster mode) checked against the files
 * on disk and applied to j->ok (the playlist rule: listed, and its file
 * still the one listed; px_playlist_trust).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "log.h"
#include "playlist.h"
#include "kvstore.h"
#include "tcstore.h"
#include "transcode_i.h"

struct px_seg_seen *tc_look(const struct px_transcode *tc, const struct job *j,
			    const struct px_playlist *pl)
{
	struct px_seg_seen *seen = calloc(pl->n + 1, sizeof(*seen));
	for (size_t i = 0; seen && i < pl->n; i++) {
		char name[64], path[PATH_MAX + 80];
		struct stat sb;
		px_playlist_seg_file(pl->e[i].index, pl->e[i].gen, name, sizeof(name));
		snprintf(path, sizeof(path), "%s/%s", j->dir, name);
		/* lstat: a link swapped in for a segment is no segment; on one
		 * host a file someone else owns is not ours either */
		if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) &&
		    (tc->store || sb.st_uid == j->uid)) {
			seen[i].exists = 1;
			seen[i].size = sb.st_size;
			seen[i].mtime_ns = tc->store ? pl->e[i].mtime_ns
					   : (int64_t)sb.st_mtim.tv_sec * 1000000000 +
					     sb.st_mtim.tv_nsec;
		}
	}
	return seen;
}

enum px_status tc_load_list(const struct px_transcode *tc, const struct job *j,
			    struct px_playlist *pl, uint64_t *ver, char *err, size_t errlen)
{
	if (ver)
		*ver = 0;
	if (!tc->store) {
		enum px_status st = px_playlist_load(j->pl_path, pl, err, errlen);
		return st == PX_EIO && (errno == ELOOP || errno == EINVAL) ? PX_EEXIST : st;
	}
	char *text = NULL, what[PATH_MAX];
	size_t len = 0;
	uint64_t v = 0;
	enum px_status st = px_tcstore_pl_get(tc->store, j->a->id, &text, &len, &v);
	px_playlist_init(pl, 0, 0);
	if (st != PX_OK) {
		snprintf(err, errlen, "store %s: the playlist of %s: %s", px_store_url(tc->store),
			 j->a->id, px_strerror(st));
		return st;
	}
	snprintf(what, sizeof(what), "store:%s", j->a->id);
	st = px_playlist_parse(what, text, len, pl, err, errlen);
	free(text);
	if (st == PX_OK && ver)
		*ver = v;
	return st;
}

void tc_list_in_way(struct job *j, const char *err)
{
	if (!j->pl_in_way) {
		j->pl_in_way = 1;
		j->work_links++;
		px_warn("transcode", "asset %s: %s; the segments this daemon trusts stand in "
			"for it", j->a->id, err);
	}
}

void tc_list_from_memory(const struct job *j, struct px_playlist *pl)
{
	px_playlist_init(pl, j->plan.seg_bytes, j->plan.nseg);
	for (uint32_t k = 0; k < j->plan.nseg; k++)
		if (j->ok[k] && px_playlist_add(pl, k, seg_size(j, k), j->okmt[k]) != PX_OK)
			break;
	pl->clean = pl->n > 0;
}

uint32_t tc_trusted(const struct job *j)
{
	uint32_t n = 0;
	for (uint32_t k = 0; j->ok && k < j->plan.nseg; k++)
		n += j->ok[k] != 0;
	return n;
}

/* What a refresh of j does with its load's outcome st (and pl, ver, err).
 * Under tc->lock. */
static void refreshed(struct px_transcode *tc, struct job *j, enum px_status st,
		      struct px_playlist *pl, uint64_t ver, const char *err, int check_files)
{
	int relist = j->relist;
	j->relist = 0;
	if (st == PX_ENOTFOUND)
		return;
	if (st == PX_EEXIST) {
		tc_list_in_way(j, err);
		return;
	}
	j->pl_in_way = 0;
	if (st != PX_OK) {
		if (!tc->store || st == PX_EINVAL)
			px_warn("transcode", "asset %s: %s", j->a->id, err);
		else /* a commit our writer made a moment ago stays unheard of
		      * until the store answers, however long the next one takes */
			j->relist = relist > 1 + check_files ? relist : 1 + check_files;
		return;
	}
	if (ver)
		j->plver = ver;
	tc_apply_list(tc, j, pl, check_files);
}

void tc_refresh(struct px_transcode *tc, struct job *j, int check_files)
{
	struct px_playlist pl;
	char err[512];
	uint64_t ver = 0;
	enum px_status st = tc_load_list(tc, j, &pl, &ver, err, sizeof(err));
	refreshed(tc, j, st, &pl, ver, err, check_files);
}

/* As tc_poll_remote, it lets tc->lock go around the store's calls: a
 * store that does not answer costs each of them its bounds, which reads
 * waiting on the lock must not wait out. */
void tc_relist(struct px_transcode *tc)
{
	for (size_t i = 0; i < tc->cat->nassets && !tc->stopping; i++) {
		struct job *j = &tc->jobs[i];
		struct px_playlist pl;
		char err[512];
		uint64_t ver = 0;
		int check = j->relist - 1;
		if (!j->a || !j->relist)
			continue;
		pthread_mutex_unlock(&tc->lock);
		enum px_status st = tc_load_list(tc, j, &pl, &ver, err, sizeof(err));
		pthread_mutex_lock(&tc->lock);
		refreshed(tc, j, st, &pl, ver, err, check);
	}
}

void tc_apply_list(struct px_transcode *tc, struct job *j, struct px_playlist *pl_in,
		       int check_files)
{
	struct px_playlist pl = *pl_in;
	if (pl.seg_bytes == j->plan.seg_bytes && pl.nseg == j->plan.nseg) {
		unsigned char *t = calloc(pl.n + 1, 1);
		struct px_seg_seen *seen = check_files ? tc_look(tc, j, &pl) : NULL;
		if (t && (!check_files || seen)) {
			px_playlist_trust(&pl, seen, t);
			for (size_t i = 0; i < pl.n; i++)
				if (t[i] && pl.e[i].size == seg_size(j, pl.e[i].index)) {
					j->ok[pl.e[i].index] = 1;
					j->okgen[pl.e[i].index] = pl.e[i].gen;
					j->okmt[pl.e[i].index] = pl.e[i].mtime_ns;
				}
		}
		free(t);
		free(seen);
	}
	px_playlist_release(&pl);
	pthread_cond_broadcast(&tc->cond);
}
