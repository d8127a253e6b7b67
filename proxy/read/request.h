/*
 * request.h - one read as the tiers of read/ see it, passed by pointer
 * from the session (session.c) to the tier that serves it (cache.c,
 * stream.c). Internal to read/.
 */
#ifndef SEAMFS_REQUEST_H
#define SEAMFS_REQUEST_H

#include <stddef.h>
#include <stdint.h>
#include "session.h"

struct px_read_req {
	int64_t off;          /* the first byte */
	size_t len;           /* bytes wanted, all within the asset */
	unsigned char *buf;   /* where bytes a tier copies go (len of room) */
	int64_t deadline;     /* the read's (ms, px_now_ms) */
	const char *who;      /* the session, for the log */
	struct px_zc *zc;     /* not NULL: the bytes may stay where a tier
			       * holds them (zero-copy), until px_handle_zc_done */
};

#endif
