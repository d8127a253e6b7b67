/*
 * state.h - what seamfs remembers between mounts, in the state directory.
 *
 * Today: the size and mtime discovered for each asset, so that a remount
 * lists every file at once, even while its sources are unreachable. One
 * JSON file per catalog (named after the catalog's absolute path), written
 * as tmp + fsync + rename so a crash leaves the old or the new file, never
 * half of one. Daemons of one catalog on several mountpoints share its
 * file: a save holds an exclusive flock on FILE.lock, reads the file again
 * and writes it with this daemon's new records over it, so two daemons
 * never write it at once and neither loses the other's records.
 *
 * Also here: the mount lock, which keeps one daemon per mountpoint (an
 * flock held for the daemon's life on a file in the state directory).
 * Not thread-safe: used at mount time by one thread.
 */
#ifndef SEAMFS_STATE_H
#define SEAMFS_STATE_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"

struct px_state;

/*
 * Opens (creating dir, mode 0700, if needed) the state of the catalog at
 * catalog_path. An unreadable or corrupt state file is logged and treated
 * as empty. PX_EIO with a message in err when dir cannot be made.
 */
enum px_status px_state_open(const char *dir, const char *catalog_path,
			     struct px_state **out, char *err, size_t errlen) PX_WUR;
void px_state_free(struct px_state *s);

/* Frees the records read from the file when nothing is left to save (after
 * the mount): a later get or put reads the file again. NULL: no-op. */
void px_state_release(struct px_state *s);

/* Returns 1 and fills size/mtime (mtime -1 if unknown) when remembered
 * for id with these sources: sources is a key of the asset's source list
 * (px_state_sources_key); a record made for other sources (the .strm now
 * points elsewhere), or by an older seamfs without the key, is not
 * returned, so that the size is found again. */
int px_state_get(const struct px_state *s, const char *id, const char *sources,
		 int64_t *size, int64_t *mtime);

enum px_status px_state_put(struct px_state *s, const char *id, const char *sources,
			    int64_t size, int64_t mtime) PX_WUR;

#define PX_STATE_KEY_LEN 17 /* 16 hex digits and the NUL */

/* The key of a source list (URLs or paths, in order) into key. */
void px_state_sources_key(const char *const *names, size_t n, char key[PX_STATE_KEY_LEN]);

/* Writes the file if anything changed, under its lock (waiting for it at
 * most 5 s), merged with what other daemons wrote since it was opened: the
 * records put here win. PX_EIO is logged by the caller. */
enum px_status px_state_save(struct px_state *s, char *err, size_t errlen) PX_WUR;

const char *px_state_file(const struct px_state *s);

/*
 * One daemon per mountpoint: opens (making dir, mode 0700, and the file if
 * needed) DIR/<last name of mountpoint>-<16 hex of its path>.mount.lock,
 * takes an exclusive flock on it without waiting and writes this
 * process's pid into it. mountpoint: absolute and canonical. On PX_OK *fd
 * holds the lock until px_state_unlock_mount (or the process ends): it is
 * close-on-exec, so writers do not inherit it; take it after any fork
 * that ends the parent. PX_EBUSY: another process holds it; *holder is
 * its pid (0 when it has not written one within half a second). PX_EIO
 * with err when the file cannot be made or locked. *fd is -1 unless PX_OK.
 */
enum px_status px_state_lock_mount(const char *dir, const char *mountpoint, int *fd,
				   long *holder, char *err, size_t errlen) PX_WUR;

/* Gives the mount lock up (closes fd). -1: no-op. */
void px_state_unlock_mount(int fd);

#endif
