/*
 * tree.h - the mount's directory tree, built once from the catalog.
 *
 * Each asset is a file at its catalog path; the directories above it are
 * made implicitly. Inode numbers are derived from the asset id (files) or
 * the directory path, so they are the same across remounts. The tree is
 * immutable after px_tree_new(): any thread may read it without locks.
 */
#ifndef SEAMFS_TREE_H
#define SEAMFS_TREE_H

#include <stddef.h>
#include <stdint.h>
#include "catalog.h"
#include "px.h"

#define PX_TREE_ROOT 1

struct px_tree;

struct px_tree_node {
	uint64_t ino;
	uint64_t parent;   /* the root is its own parent */
	const char *name;  /* last component; "" for the root */
	long asset;        /* index in the catalog, -1 for directories */
};

/*
 * Builds the tree of the catalog's assets for which listed[i] is non-zero
 * (listed NULL: all). The catalog must have been validated and outlive the
 * tree. Returns PX_ENOMEM on failure.
 */
enum px_status px_tree_new(const struct px_catalog *cat, const unsigned char *listed,
			   struct px_tree **out) PX_WUR;
void px_tree_free(struct px_tree *t);

/* The node with this inode number, or NULL. */
const struct px_tree_node *px_tree_get(const struct px_tree *t, uint64_t ino);

/* The child of directory parent named name, or NULL. */
const struct px_tree_node *px_tree_lookup(const struct px_tree *t, uint64_t parent,
					  const char *name);

/* The children of a directory, sorted by name, in *out; returns how many
 * (0 for a file or an unknown inode). Borrowed until px_tree_free(). */
size_t px_tree_children(const struct px_tree *t, uint64_t dir,
			const struct px_tree_node *const **out);

/* The inode number an asset id gets (before collision handling). */
uint64_t px_tree_asset_ino(const char *id);

size_t px_tree_count(const struct px_tree *t);

#endif
