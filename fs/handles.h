/*
 * handles.h - open files' handles as ids a restarted worker can rebuild.
 *
 * The kernel keeps the fh of every open file and sends it with each read
 * and release. A pointer would mean nothing to a worker started after the
 * open (docs/restart.md), so fh is an id: the kind of handle in its low two
 * bits, the generation of the worker that made it above bit 40, a counter
 * between. A worker that meets an id it does not know (made by a worker
 * before it) rebuilds the handle from the inode and the kind on that first
 * request and keeps it under the same id.
 */
#ifndef SEAMFS_HANDLES_H
#define SEAMFS_HANDLES_H

#include <stdint.h>

enum fs_fh_kind { FS_FH_SESSION = 0, FS_FH_TRANSCODE = 1, FS_FH_BLOB = 2 };

struct fs_handles;

/* A table for the worker of generation gen (0: the first). NULL: out of
 * memory. */
struct fs_handles *fs_handles_new(unsigned gen);

/* Frees the table, not the handles (their owners free them). NULL: no-op. */
void fs_handles_free(struct fs_handles *t);

/* Keeps p under a new id of kind; returns the id, 0 out of memory. */
uint64_t fs_handles_put(struct fs_handles *t, enum fs_fh_kind kind, void *p);

/* The kind an id names. */
enum fs_fh_kind fs_handles_kind(uint64_t id);

/* The handle kept under id, NULL when this worker has none (an id of an
 * earlier worker, not rebuilt yet). */
void *fs_handles_get(struct fs_handles *t, uint64_t id);

/* Keeps p under an id an earlier worker made. Returns p; or the handle
 * another thread kept first under that id, or NULL out of memory: then
 * the caller frees its own p. */
void *fs_handles_adopt(struct fs_handles *t, uint64_t id, void *p);

/* Removes id; returns its handle (the caller frees it), NULL if none. */
void *fs_handles_take(struct fs_handles *t, uint64_t id);

#endif
