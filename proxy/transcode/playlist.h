/*
 * playlist.h - the list of committed segments a writer keeps in its work
 * directory, and the rule that decides which of them can be trusted.
 *
 * Text, one item per line:
 *   #SEAMFS-PLAYLIST 1
 *   #SEGMENT-BYTES S        every segment file has exactly S bytes (0: the
 *                           sizes vary, as in a remux; each line says its own)
 *   #SEGMENTS N             the file has N segments, 0..N-1
 *   K SIZE MTIME_NS [GEN]   segment K committed (in commit order); GEN,
 *                           in cluster mode only: the lease generation whose
 *                           writer made it, which names its file
 *                           (px_playlist_seg_file)
 *   #CLEAN                  the writer stopped cleanly after the line above
 * A writer rewrites the whole list (tmp + fsync + rename) after each commit.
 * Several writers may work in one directory at once (the main writer and
 * short probe runs, docs/transcode.md "Seeks"): each update is then a
 * load, change and save of the list on disk under px_playlist_lock().
 * The structs are plain values owned by the caller; no thread-safety beyond
 * that.
 */
#ifndef SEAMFS_PLAYLIST_H
#define SEAMFS_PLAYLIST_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"

#define PX_PLAYLIST_MAX_BYTES (64 << 20)

struct px_playlist_entry {
	uint32_t index;
	int64_t size;
	int64_t mtime_ns;   /* of the segment file right after its rename */
	uint64_t gen;       /* cluster mode: the generation that wrote it; 0 */
};

struct px_playlist {
	int64_t seg_bytes;            /* 0: sizes vary (remux) */
	uint32_t nseg;
	struct px_playlist_entry *e;  /* commit order */
	size_t n, cap;
	int clean;                    /* #CLEAN after the last entry */
	/* a bit per index, set while it is listed: an add checks for a
	 * duplicate in O(1), so a list of n entries parses in O(n) (a 3 h
	 * film in 1 s segments: 10,800; a linear search took 56 ms a load).
	 * Made at the first add, for nseg then (NULL: none yet). */
	unsigned char *listed;
	uint32_t listed_nseg;
};

/* An empty playlist for nseg segments of seg_bytes. Free with
 * px_playlist_release(). */
void px_playlist_init(struct px_playlist *pl, int64_t seg_bytes, uint32_t nseg);
void px_playlist_release(struct px_playlist *pl);

/*
 * Parses text[0..len) (not NUL-terminated) into *pl (initialised here). On
 * PX_EINVAL writes "FILE:LINE: what is wrong" into err, FILE being `file`,
 * and *pl is empty. Rejects: a missing or unknown header, S not a
 * multiple of 188, N outside 1..PX_SEG_MAX_COUNT, an index >= N, a size
 * other than S, a repeated index, trailing garbage, a last line without
 * a newline (a torn write).
 */
enum px_status px_playlist_parse(const char *file, const char *text, size_t len,
				 struct px_playlist *pl, char *err, size_t errlen) PX_WUR;

/* Reads and parses path, WORK/ID/playlist, opened beneath WORK (the folder
 * two levels up) with px_open_beneath: a link at the playlist or at the
 * job directory is never followed, a FIFO never opened. A missing file:
 * PX_ENOTFOUND (err set); a link in the way: PX_EIO with errno ELOOP (and
 * EINVAL for a file that is not a regular one), err saying so; errno is 0
 * after any other outcome of an opened file. */
enum px_status px_playlist_load(const char *path, struct px_playlist *pl,
				char *err, size_t errlen) PX_WUR;

/* Writes the playlist to path atomically: path.tmp, fsync, rename, fsync
 * of the directory. PX_EIO on failure (err says which call). */
enum px_status px_playlist_save(const struct px_playlist *pl, const char *path,
				char *err, size_t errlen) PX_WUR;

/* The text px_playlist_save writes (malloc'd, *len its length); NULL when
 * out of memory. */
char *px_playlist_format(const struct px_playlist *pl, size_t *len);

/* Appends an entry (clears clean). PX_EINVAL for an index out of range or
 * already listed. Its gen is 0: px_playlist_add_gen sets one. */
enum px_status px_playlist_add(struct px_playlist *pl, uint32_t index, int64_t size,
			       int64_t mtime_ns) PX_WUR;
enum px_status px_playlist_add_gen(struct px_playlist *pl, uint32_t index, int64_t size,
				   int64_t mtime_ns, uint64_t gen) PX_WUR;

/*
 * Appends an entry of a run that has ended (a probe's, written whole before
 * it is listed): when the list does not end #CLEAN its newest entry belongs
 * to a writer still running, and the new entry goes before that one, which
 * stays the newest; else at the end, and #CLEAN stays. Trust does not
 * depend on the order (px_playlist_trust). PX_EINVAL as px_playlist_add.
 */
enum px_status px_playlist_add_closed(struct px_playlist *pl, uint32_t index, int64_t size,
				      int64_t mtime_ns) PX_WUR;
enum px_status px_playlist_add_closed_gen(struct px_playlist *pl, uint32_t index,
					  int64_t size, int64_t mtime_ns, uint64_t gen) PX_WUR;

/*
 * The lock that makes a load, change and save of the list in directory dir
 * one step for every writer of it: an exclusive flock(2) on the directory's
 * marker file (PX_PLAYLIST_LOCK_FILE, which seamfs makes in every job
 * directory), waited for. Returns the descriptor for px_playlist_unlock(),
 * or -1 when dir has no marker (not a job directory seamfs made: a writer
 * run by hand, the only one there) or it cannot be locked (errno).
 */
#define PX_PLAYLIST_LOCK_FILE ".seamfs-work"
int px_playlist_lock(const char *dir);
/* Releases px_playlist_lock()'s lock; -1: no-op. */
void px_playlist_unlock(int fd);

/* Removes the entry of segment index written by generation gen (0 on one
 * host), keeping the others' order: 1, or 0 when there is no such entry. */
int px_playlist_drop(struct px_playlist *pl, uint32_t index, uint64_t gen);

/* Position of index in commit order, or -1. */
long px_playlist_find(const struct px_playlist *pl, uint32_t index);

/* What a look at segment file i shows now. */
struct px_seg_seen {
	int exists;
	int64_t size;
	int64_t mtime_ns;
};

/*
 * The trust rule (recovery and serving alike): entry i is trusted when its
 * file exists with size S (or for a remux the size it was listed with) and
 * the mtime it was listed with (stable since). The newest entry too: a
 * writer lists a segment only once it is fsynced and renamed into place
 * (docs/transcode.md "The playlist and the trust rule"). seen
 * NULL: files are assumed as listed (the daemon serving a live writer's
 * list). trusted[i] is set per entry; returns how many are trusted.
 */
size_t px_playlist_trust(const struct px_playlist *pl, const struct px_seg_seen *seen,
			 unsigned char *trusted);

/* The file name of segment k inside a work directory ("seg-000042.ts"). */
void px_playlist_seg_name(uint32_t k, char *buf, size_t cap);
/* The file of segment k written under lease generation gen: 0 (one host)
 * px_playlist_seg_name's; else "seg-000042.g7.ts" (cluster mode: a name
 * no writer of another generation makes, so that a fenced writer cannot
 * replace a committed segment; docs/cluster.md). */
void px_playlist_seg_file(uint32_t k, uint64_t gen, char *buf, size_t cap);
/* Parses a segment file name: 1 when name is seg-NNNNNN[.gGEN].ts
 * followed by tail ("" for the committed file, else ".tmp" or
 * ".probe.tmp" and the like, copied into tail up to tcap), with *k and
 * *gen (0 without .gGEN); 0 otherwise. */
int px_playlist_seg_parse(const char *name, uint32_t *k, uint64_t *gen, char *tail,
			  size_t tcap);

#endif
