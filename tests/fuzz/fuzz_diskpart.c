/*
 * fuzz_diskpart.c - libFuzzer target for the disk tier's load of a part
 * (px_disk_load in proxy/read/disk.c): the header's parse, the checks of
 * range, versions and source, the header-first read and the SHA-256.
 *
 * The input is a part file as cache_dir holds it, written as asset
 * "fuzz"'s head and as its index, then loaded with what the seed in
 * corpus/diskpart says (a 3000-byte asset, the head [0, 2000), the index
 * asked from 1024 to 2000). Whatever loads must be the file's own last
 * got->have bytes, within the range asked; nothing else may come back.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

#include "cache.h"
#include "disk.h"
#include "hash.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void no_persist(void *ctx, size_t asset, int which)
{
	(void)ctx, (void)asset, (void)which;
}

static int any_source(void *ctx, const struct px_disk_meta *got)
{
	(void)ctx;
	return strcmp(got->source, "http://origin/a.mkv") == 0;
}

static struct px_disk *disk;
static char dir[] = "/tmp/fuzz-diskpart-XXXXXX";

static void name_of(int which, char *out, size_t cap)
{
	unsigned char d[VF_HASH_LEN];
	char hex[2 * VF_HASH_LEN + 1];
	if (vf_hash_once("fuzz", 4, d) != PX_OK)
		abort();
	vf_hash_hex(d, 16, hex);
	snprintf(out, cap, "%s/%.32s.%s", dir, hex, which == PX_CACHE_HEAD ? "head" : "indx");
}

static void load(const uint8_t *data, size_t size, int which, int64_t start, int64_t len)
{
	char path[sizeof(dir) + 64];
	name_of(which, path, sizeof(path));
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size))
		abort();
	close(fd);
	struct px_disk_meta want = { .size = 3000, .asset_mtime = 1700000000, .start = start,
				     .len = len, .mtime = -1 };
	struct px_disk_meta got;
	unsigned char *buf = NULL;
	enum px_status st = px_disk_load(disk, "fuzz", which, &want, any_source, NULL, &buf, &got);
	if (st == PX_OK) {
		/* the bytes served are the file's last have bytes, in range */
		if (!buf || got.have <= 0 || got.have > got.len || (size_t)got.have > size ||
		    got.start > start || got.start + got.len != start + len ||
		    memcmp(buf, data + size - (size_t)got.have, (size_t)got.have))
			abort();
	} else if (st != PX_EDECLINED || buf) {
		abort();
	}
	free(buf);
	unlink(path);
}

/* The tier and its (empty) directory go at exit. */
static void done(void)
{
	px_disk_free(disk);
	rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!disk) {
		if (!mkdtemp(dir) ||
		    px_disk_open(dir, 1 << 30, no_persist, NULL, &disk) != PX_OK || !disk)
			abort();
		atexit(done);
	}
	load(data, size, PX_CACHE_HEAD, 0, 2000);
	load(data, size, PX_CACHE_INDEX, 1024, 976);
	return 0;
}
