/*
 * listing.h - the entries of an HTTP directory listing page.
 *
 * `seamfs catalog` (fs/mkcatalog.c) walks mirrors served as directory
 * listings: nginx's autoindex, Apache's mod_autoindex, lighttpd's
 * mod_dirlisting, caddy's file_server browse and `rclone serve http`.
 * px_listing_parse() turns one such page and the URL it was fetched from
 * into its entries: a pure function of its input (no I/O, no global
 * state), so that it can be fuzzed (tests/fuzz/fuzz_listing.c).
 *
 * An entry is a link (<a href>) whose target, resolved against the page's
 * URL as a browser would (relative, absolute-path and absolute hrefs,
 * entities such as &amp; decoded first), is a direct child of the page's
 * directory on the same origin, without a query: the parent link, the
 * sort links (?C=N;O=D, ?sort=name), breadcrumbs and links elsewhere are
 * not entries. Its name is the last path segment, percent-decoded; a
 * trailing '/' makes it a directory. A size is given only where the
 * server's format states it in bytes (nginx's default exact sizes,
 * caddy's data-size, rclone's data-order, a plain byte count in Apache's
 * or lighttpd's size column); "1.2M" and the like are not exact (-1).
 *
 * A file's date is read where the server writes one: the row's
 * "01-Dec-2026 06:15" (nginx), "2026-12-01 06:15" (Apache),
 * "2026-Dec-01 06:15:53" (lighttpd), taken as UTC (nginx writes UTC by
 * default; Apache and lighttpd write the server's local time and the page
 * does not say which zone: the date is then off by that zone, but the same
 * at every run), and the <time datetime="..."> attribute of caddy (RFC 3339)
 * and rclone (Go's "2006-01-02 15:04:05.999 -0700 MST"), zones applied.
 * Seconds are 0 where the page gives minutes only; fractions are dropped.
 * Dates are read strictly: a row word shaped like a day ("31-Feb-2026",
 * "2026-13-01") or a datetime attribute that is not a real date and time
 * gives no mtime, and the entry keeps the text it could not read
 * (bad_date), so that the caller can say which date it skipped.
 */
#ifndef SEAMFS_LISTING_H
#define SEAMFS_LISTING_H

#include <stddef.h>
#include <stdint.h>
#include "px.h"

#define PX_LISTING_MAX_ENTRIES 100000   /* entries of one page */

enum px_listing_kind {
	PX_LISTING_NGINX,
	PX_LISTING_APACHE,
	PX_LISTING_LIGHTTPD,
	PX_LISTING_CADDY,
	PX_LISTING_RCLONE,
	PX_LISTING_GENERIC,     /* an "Index of" page of another server: no sizes */
};

struct px_listing_entry {
	char *name;             /* one path component, percent-decoded bytes: not
				 * empty, no '/' or NUL, not "." or ".." */
	char *url;              /* absolute: the page URL's scheme and authority
				 * (userinfo kept) and the resolved path, bytes
				 * a URL may not hold percent-encoded; ends in '/'
				 * for a directory */
	int is_dir;
	int64_t size;           /* bytes, when the page states them exactly; else -1 */
	int64_t mtime;          /* Unix seconds, when the page dates the entry; else -1 */
	char *bad_date;         /* the date the page gives but that is none (a
				 * "31-Feb-2026 06:15", a clock "25:00"), as
				 * written; NULL when mtime is set or the page
				 * dates nothing */
};

struct px_listing {
	enum px_listing_kind kind;
	struct px_listing_entry *entries;  /* in page order, names unique */
	size_t n;
};

/*
 * Parses the page html[0, len) (need not be NUL-terminated) fetched from
 * base, an absolute http(s) URL: its directory is its path up to the last
 * '/' (fetch directories with a trailing '/'). On success *out holds the
 * entries (possibly none: an empty directory); free it with
 * px_listing_free(). PX_EINVAL with one line in err when base is not an
 * http(s) URL, when the page is not a directory listing (binary data, or
 * HTML with neither an "Index of"/"Directory listing" title nor a known
 * server's markup) or when it has more than PX_LISTING_MAX_ENTRIES
 * entries; PX_ENOMEM.
 */
enum px_status px_listing_parse(const char *base, const char *html, size_t len,
				struct px_listing **out, char *err, size_t errlen) PX_WUR;

void px_listing_free(struct px_listing *l);

/* "nginx", "Apache", "lighttpd", "caddy", "rclone" or "generic". */
const char *px_listing_kind_name(enum px_listing_kind kind);

/* Percent-encodes one path segment (a file or directory name) for a URL:
 * every byte but the unreserved ones (A-Z a-z 0-9 - . _ ~) and
 * !$&'()*+,;=:@ becomes %XX. malloc'd; NULL when out of memory. */
char *px_listing_encode(const char *name);

#endif
