/*
 * mkcatalog.h - `seamfs catalog`: a catalog built from mirrors of one
 * library, HTTP directory listings and local folders (mkcatalog.c,
 * docs/catalog.md "Making a catalog from mirrors", docs/import.md).
 */
#ifndef SEAMFS_FS_MKCATALOG_H
#define SEAMFS_FS_MKCATALOG_H

/* argv[0] is "catalog". Returns the process's exit status: 0 the catalog
 * was written, 1 a mirror could not be walked or the output not written
 * (nothing is written then), 2 bad command line, 3 bad --merge catalog.
 * Called from main() before anything else has started. */
int fs_catalog_main(int argc, char **argv);

#endif
