/*
 * test_listing.c - px_listing_parse(): a sample page of each server format
 * (nginx autoindex, Apache mod_autoindex as a table and as <pre>, lighttpd
 * mod_dirlisting, caddy file_server browse, rclone serve http; the nginx,
 * lighttpd and rclone pages as those servers wrote them for a tree with
 * spaces, '#', '+', '&', "%20" and non-ASCII in its names) gives the
 * expected entries: decoded names, absolute URLs, directories, exact sizes
 * only where the page states bytes; parent, sort, breadcrumb and foreign
 * links are not entries; relative, absolute-path and absolute hrefs;
 * entities; pages that are not listings are refused with one line.
 * Dates: each server's way of dating a row (nginx's "01-Dec-2026 06:15",
 * Apache's "2024-01-01 12:00", lighttpd's "2026-Dec-01 06:15:53", caddy's
 * and rclone's <time datetime>, zones applied), read to the second or the
 * minute the page gives; a day that does not exist, a clock past 23:59 or
 * a generic page's text give no date.
 *
 * Pages are copied into a heap buffer of exactly their length, without a
 * NUL, so that ASan catches any read past len.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "listing.h"

static enum px_status parse(const char *base, const char *page, struct px_listing **l,
			    char *err, size_t errlen)
{
	size_t len = strlen(page);
	char *copy = malloc(len ? len : 1);
	assert_non_null(copy);
	memcpy(copy, page, len);
	enum px_status st = px_listing_parse(base, copy, len, l, err, errlen);
	free(copy);
	return st;
}

static struct px_listing *parse_ok(const char *base, const char *page)
{
	char err[512] = "";
	struct px_listing *l = NULL;
	enum px_status st = parse(base, page, &l, err, sizeof(err));
	if (st != PX_OK)
		fail_msg("status %s, err \"%s\"", px_strerror(st), err);
	assert_non_null(l);
	return l;
}

/* entry i is name, url, dir, size */
static void entry(const struct px_listing *l, size_t i, const char *name, const char *url,
		  int is_dir, int64_t size)
{
	if (i >= l->n)
		fail_msg("entry %zu of %zu wanted (%s)", i, l->n, name);
	const struct px_listing_entry *e = &l->entries[i];
	if (strcmp(e->name, name) != 0)
		fail_msg("entry %zu: name \"%s\", want \"%s\"", i, e->name, name);
	if (strcmp(e->url, url) != 0)
		fail_msg("entry %zu: url \"%s\", want \"%s\"", i, e->url, url);
	if (e->is_dir != is_dir)
		fail_msg("entry %zu (%s): is_dir %d, want %d", i, name, e->is_dir, is_dir);
	if (e->size != size)
		fail_msg("entry %zu (%s): size %lld, want %lld", i, name, (long long)e->size,
			 (long long)size);
}

/* entry i is dated mtime (Unix seconds, -1: none) */
static void dated(const struct px_listing *l, size_t i, int64_t mtime)
{
	if (i >= l->n)
		fail_msg("entry %zu of %zu wanted", i, l->n);
	if (l->entries[i].mtime != mtime)
		fail_msg("entry %zu (%s): mtime %lld, want %lld", i, l->entries[i].name,
			 (long long)l->entries[i].mtime, (long long)mtime);
}

/* entry i's date that is none, as the page wrote it (NULL: none) */
static void bad_date(const struct px_listing *l, size_t i, const char *want)
{
	const char *got = l->entries[i].bad_date;
	if ((got == NULL) != (want == NULL) || (got && strcmp(got, want) != 0))
		fail_msg("entry %zu (%s): bad_date \"%s\", want \"%s\"", i, l->entries[i].name,
			 got ? got : "(none)", want ? want : "(none)");
}

/* ---------------------------------------------------------------- nginx */

static const char nginx_root[] =
	"<html>\r\n<head><title>Index of /</title></head>\r\n<body>\r\n"
	"<h1>Index of /</h1><hr><pre><a href=\"../\">../</a>\r\n"
	"<a href=\"Sub%20Dir/\">Sub Dir/</a>                                           "
	"01-Dec-2026 06:15                   -\r\n"
	"<a href=\"a%20file%20%231.mkv\">a file #1.mkv</a>                                      "
	"01-Dec-2026 06:15               12345\r\n"
	"<a href=\"x%2520y.avi\">x%20y.avi</a>                                          "
	"01-Dec-2026 06:15                   0\r\n"
	"</pre><hr></body>\r\n</html>\r\n";

static const char nginx_sub[] =
	"<html>\n<head><title>Index of /Sub Dir/</title></head>\n<body>\n"
	"<h1>Index of /Sub Dir/</h1><hr><pre><a href=\"../\">../</a>\n"
	"<a href=\"%C3%BCn%C3%AF%20%26%20co/\">\xc3\xbcn\xc3\xaf &amp; co/</a>"
	"                                        01-Dec-2026 06:15                   -\n"
	"<a href=\"big%2Bx.mp4\">big+x.mp4</a>                                          "
	"01-Dec-2026 06:15             2000000\n"
	"<a href=\"a-very-long-name-that-nginx-cuts-in-its-text-column-0123456789.mkv\">"
	"a-very-long-name-that-nginx-cuts-in-its-text-..&gt;</a> 01-Dec-2026 06:15 "
	"   7\n"
	"</pre><hr></body>\n</html>\n";

static void test_nginx(void **state)
{
	(void)state;
	struct px_listing *l = parse_ok("http://127.0.0.1:8081/", nginx_root);
	assert_int_equal(l->kind, PX_LISTING_NGINX);
	assert_int_equal(l->n, 3);
	entry(l, 0, "Sub Dir", "http://127.0.0.1:8081/Sub%20Dir/", 1, -1);
	entry(l, 1, "a file #1.mkv", "http://127.0.0.1:8081/a%20file%20%231.mkv", 0, 12345);
	entry(l, 2, "x%20y.avi", "http://127.0.0.1:8081/x%2520y.avi", 0, 0);
	px_listing_free(l);

	l = parse_ok("http://127.0.0.1:8081/Sub%20Dir/", nginx_sub);
	assert_int_equal(l->n, 3);
	entry(l, 0, "\xc3\xbcn\xc3\xaf & co", "http://127.0.0.1:8081/Sub%20Dir/%C3%BCn%C3%AF%20%26%20co/",
	      1, -1);
	entry(l, 1, "big+x.mp4", "http://127.0.0.1:8081/Sub%20Dir/big%2Bx.mp4", 0, 2000000);
	entry(l, 2, "a-very-long-name-that-nginx-cuts-in-its-text-column-0123456789.mkv",
	      "http://127.0.0.1:8081/Sub%20Dir/"
	      "a-very-long-name-that-nginx-cuts-in-its-text-column-0123456789.mkv", 0, 7);
	px_listing_free(l);
}

/* nginx with autoindex_exact_size off: "12K" is not a byte count */
static void test_nginx_inexact(void **state)
{
	(void)state;
	struct px_listing *l = parse_ok(
		"http://h/m/",
		"<html><head><title>Index of /m/</title></head><body><h1>Index of /m/</h1>"
		"<hr><pre><a href=\"../\">../</a>\n"
		"<a href=\"a.mkv\">a.mkv</a>   01-Dec-2026 06:15    12K\n"
		"<a href=\"b.mkv\">b.mkv</a>   01-Dec-2026 06:15   1.5M\n"
		"<a href=\"c.mkv\">c.mkv</a>   01-Dec-2026 06:15    512\n"
		"</pre><hr></body></html>");
	assert_int_equal(l->n, 3);
	entry(l, 0, "a.mkv", "http://h/m/a.mkv", 0, -1);
	entry(l, 1, "b.mkv", "http://h/m/b.mkv", 0, -1);
	entry(l, 2, "c.mkv", "http://h/m/c.mkv", 0, 512);
	px_listing_free(l);
}

/* --------------------------------------------------------------- Apache */

static const char apache_table[] =
	"<!DOCTYPE HTML PUBLIC \"-//W3C//DTD HTML 3.2 Final//EN\">\n<html>\n <head>\n"
	"  <title>Index of /media/Movies</title>\n </head>\n <body>\n"
	"<h1>Index of /media/Movies</h1>\n  <table>\n"
	"   <tr><th valign=\"top\"><img src=\"/icons/blank.gif\" alt=\"[ICO]\"></th>"
	"<th><a href=\"?C=N;O=D\">Name</a></th><th><a href=\"?C=M;O=A\">Last modified</a></th>"
	"<th><a href=\"?C=S;O=A\">Size</a></th><th><a href=\"?C=D;O=A\">Description</a></th></tr>\n"
	"   <tr><th colspan=\"5\"><hr></th></tr>\n"
	"<tr><td valign=\"top\"><img src=\"/icons/back.gif\" alt=\"[PARENTDIR]\"></td>"
	"<td><a href=\"/media/\">Parent Directory</a></td><td>&nbsp;</td>"
	"<td align=\"right\">  - </td><td>&nbsp;</td></tr>\n"
	"<tr><td valign=\"top\"><img src=\"/icons/folder.gif\" alt=\"[DIR]\"></td>"
	"<td><a href=\"Heat%20(1995)/\">Heat (1995)/</a></td>"
	"<td align=\"right\">2024-01-01 12:00  </td><td align=\"right\">  - </td><td>&nbsp;</td></tr>\n"
	"<tr><td valign=\"top\"><img src=\"/icons/movie.gif\" alt=\"[VID]\"></td>"
	"<td><a href=\"alien.mkv\">alien.mkv</a></td>"
	"<td align=\"right\">2024-01-01 12:00  </td><td align=\"right\">1.2G</td><td>&nbsp;</td></tr>\n"
	"<tr><td valign=\"top\"><img src=\"/icons/movie.gif\" alt=\"[VID]\"></td>"
	"<td><a href=\"tiny.mkv\">tiny.mkv</a></td>"
	"<td align=\"right\">2024-01-01 12:00  </td><td align=\"right\">123 </td><td>&nbsp;</td></tr>\n"
	"<tr><td valign=\"top\"><img src=\"/icons/movie.gif\" alt=\"[VID]\"></td>"
	"<td><a href=\"./caf%C3%A9:1.mkv\">caf\xc3\xa9:1.mkv</a></td>"
	"<td align=\"right\">2024-01-01 12:00  </td><td align=\"right\"> 12K</td><td>&nbsp;</td></tr>\n"
	"   <tr><th colspan=\"5\"><hr></th></tr>\n</table>\n"
	"<address>Apache/2.4.57 (Debian) Server at 127.0.0.1 Port 8080</address>\n</body></html>\n";

static const char apache_pre[] =
	"<!DOCTYPE HTML PUBLIC \"-//W3C//DTD HTML 3.2 Final//EN\">\n<html>\n <head>\n"
	"  <title>Index of /pub</title>\n </head>\n <body>\n<h1>Index of /pub</h1>\n"
	"<pre><img src=\"/icons/blank.gif\" alt=\"Icon \"> <a href=\"?C=N;O=D\">Name</a>"
	"                    <a href=\"?C=M;O=A\">Last modified</a>      <a href=\"?C=S;O=A\">Size</a>"
	"  <a href=\"?C=D;O=A\">Description</a><hr>"
	"<img src=\"/icons/back.gif\" alt=\"[PARENTDIR]\"> <a href=\"/\">Parent Directory</a>"
	"                             -   \n"
	"<img src=\"/icons/movie.gif\" alt=\"[VID]\"> <a href=\"a.mp4\">a.mp4</a>"
	"                   2024-01-01 12:00  900   \n"
	"<img src=\"/icons/movie.gif\" alt=\"[VID]\"> <a href=\"b.mp4\">b.mp4</a>"
	"                   2024-01-01 12:00  3.4M  \n"
	"<hr></pre>\n<address>Apache/2.4.57 (Debian) Server at 127.0.0.1 Port 8080</address>\n"
	"</body></html>\n";

static void test_apache(void **state)
{
	(void)state;
	struct px_listing *l = parse_ok("http://127.0.0.1:8080/media/Movies/", apache_table);
	assert_int_equal(l->kind, PX_LISTING_APACHE);
	assert_int_equal(l->n, 4);
	entry(l, 0, "Heat (1995)", "http://127.0.0.1:8080/media/Movies/Heat%20(1995)/", 1, -1);
	entry(l, 1, "alien.mkv", "http://127.0.0.1:8080/media/Movies/alien.mkv", 0, -1);
	entry(l, 2, "tiny.mkv", "http://127.0.0.1:8080/media/Movies/tiny.mkv", 0, 123);
	entry(l, 3, "caf\xc3\xa9:1.mkv", "http://127.0.0.1:8080/media/Movies/caf%C3%A9:1.mkv", 0, -1);
	px_listing_free(l);

	/* the footer's "Port 8080" is no file's size */
	l = parse_ok("http://127.0.0.1:8080/pub/", apache_pre);
	assert_int_equal(l->kind, PX_LISTING_APACHE);
	assert_int_equal(l->n, 2);
	entry(l, 0, "a.mp4", "http://127.0.0.1:8080/pub/a.mp4", 0, 900);
	entry(l, 1, "b.mp4", "http://127.0.0.1:8080/pub/b.mp4", 0, -1);
	px_listing_free(l);
}

/* ------------------------------------------------------------- lighttpd */

static const char lighttpd_sub[] =
	"<!DOCTYPE html>\n<html>\n<head>\n<title>Index of /Sub Dir/</title>\n"
	"<style type=\"text/css\">\na, a:active {text-decoration: none; color: blue;}\n"
	"</style>\n</head>\n<body>\n<h2>Index of /Sub Dir/</h2>\n<div class=\"list\">\n"
	"<table summary=\"Directory Listing\" cellpadding=\"0\" cellspacing=\"0\">\n"
	"<thead><tr><th class=\"n\">Name</th><th class=\"m\">Last Modified</th>"
	"<th class=\"s\">Size</th><th class=\"t\">Type</th></tr></thead>\n<tbody>\n"
	"<tr class=\"d\"><td class=\"n\"><a href=\"../\">..</a>/</td><td class=\"m\">&nbsp;</td>"
	"<td class=\"s\">- &nbsp;</td><td class=\"t\">Directory</td></tr>\n"
	"<tr class=\"d\"><td class=\"n\"><a href=\"%C3%BCn%C3%AF%20%26%20co/\">"
	"\xc3\xbcn\xc3\xaf &#x26; co</a>/</td><td class=\"m\">2026-Dec-01 06:15:53</td>"
	"<td class=\"s\">- &nbsp;</td><td class=\"t\">Directory</td></tr>\n"
	"<tr><td class=\"n\"><a href=\"big%2Bx.mp4\">big+x.mp4</a></td>"
	"<td class=\"m\">2026-Dec-01 06:15:53</td><td class=\"s\">1.9M</td>"
	"<td class=\"t\">application/octet-stream</td></tr>\n"
	"<tr><td class=\"n\"><a href=\"empty.mkv\">empty.mkv</a></td>"
	"<td class=\"m\">2026-Dec-01 06:15:53</td><td class=\"s\">0.0K</td>"
	"<td class=\"t\">application/octet-stream</td></tr>\n"
	"</tbody>\n</table>\n</div>\n<div class=\"foot\">lighttpd/1.4.69</div>\n\n"
	"<script type=\"text/javascript\">\n// <!--\n"
	"var x = '<a href=\"not-an-entry.mkv\">'; if (a < b) {}\n// -->\n</script>\n"
	"</body>\n</html>\n";

static void test_lighttpd(void **state)
{
	(void)state;
	struct px_listing *l = parse_ok("http://127.0.0.1:8082/Sub%20Dir/", lighttpd_sub);
	assert_int_equal(l->kind, PX_LISTING_LIGHTTPD);
	assert_int_equal(l->n, 3);
	entry(l, 0, "\xc3\xbcn\xc3\xaf & co",
	      "http://127.0.0.1:8082/Sub%20Dir/%C3%BCn%C3%AF%20%26%20co/", 1, -1);
	/* lighttpd's sizes are rounded ("1.9M", "0.0K"): never exact */
	entry(l, 1, "big+x.mp4", "http://127.0.0.1:8082/Sub%20Dir/big%2Bx.mp4", 0, -1);
	entry(l, 2, "empty.mkv", "http://127.0.0.1:8082/Sub%20Dir/empty.mkv", 0, -1);
	px_listing_free(l);
}

/* ---------------------------------------------------------------- caddy */

static const char caddy_page[] =
	"<!DOCTYPE html>\n<html>\n\t<head>\n\t\t<title>/films/</title>\n</head>\n<body>\n"
	"<header><h1><a href=\"/\">/</a><a href=\"/films/\">films</a>/</h1></header>\n"
	"<table aria-describedby=\"summary\">\n<thead>\n<tr>\n<th></th>\n<th>\n"
	"<a href=\"?sort=namedirfirst&amp;order=desc\" class=\"icon\">x</a>\n"
	"<a href=\"?sort=name&amp;order=desc\">Name</a>\n</th>\n"
	"<th><a href=\"?sort=size&amp;order=asc\">Size</a></th>\n</tr>\n</thead>\n<tbody>\n"
	"<tr>\n<td></td>\n<td>\n<a href=\"..\">\n<span class=\"go-up\">Up</span>\n</a>\n"
	"</td>\n<td></td>\n</tr>\n"
	"<tr class=\"file\">\n<td></td>\n<td>\n<a href=\"./Old%20Films/\">\n"
	"<svg class=\"icon\"></svg>\n<span class=\"name\">Old Films</span>\n</a>\n</td>\n"
	"<td>&mdash;</td>\n<td class=\"timestamp hideable\">\n"
	"<time datetime=\"2024-01-01T12:00:00Z\">01/01/2024 12:00:00 PM +00:00</time>\n"
	"</td>\n<td class=\"hideable\"></td>\n</tr>\n"
	"<tr class=\"file\">\n<td></td>\n<td>\n<a href=\"./R%C3%A9sum%C3%A9%20&amp;%20co.mkv\">\n"
	"<span class=\"name\">R\xc3\xa9sum\xc3\xa9 &amp; co.mkv</span>\n</a>\n</td>\n"
	"<td class=\"size\" data-size=\"1234567890\">\n<div class=\"sizebar\">\n"
	"<div class=\"sizebar-text\">\n1.1 GiB\n</div>\n</div>\n</td>\n"
	"<td class=\"timestamp hideable\">\n<time datetime=\"2024-01-01T12:00:00Z\">"
	"01/01/2024 12:00:00 PM +00:00</time>\n</td>\n<td class=\"hideable\"></td>\n</tr>\n"
	"</tbody>\n</table>\n<footer>Served with <a rel=\"noopener noreferrer\" "
	"href=\"https://caddyserver.com\">Caddy</a></footer>\n</body>\n</html>\n";

static void test_caddy(void **state)
{
	(void)state;
	struct px_listing *l = parse_ok("https://media.example/films/", caddy_page);
	assert_int_equal(l->kind, PX_LISTING_CADDY);
	assert_int_equal(l->n, 2);
	entry(l, 0, "Old Films", "https://media.example/films/Old%20Films/", 1, -1);
	entry(l, 1, "R\xc3\xa9sum\xc3\xa9 & co.mkv",
	      "https://media.example/films/R%C3%A9sum%C3%A9%20&%20co.mkv", 0, 1234567890);
	px_listing_free(l);
}

/* --------------------------------------------------------------- rclone */

static const char rclone_page[] =
	"\n\n<!DOCTYPE html>\n<html>\n\t<head>\n\t\t<title>/Sub Dir</title>\n"
	"\t\t<meta charset=\"utf-8\">\n<style>\n* { padding: 0; margin: 0; }\n</style>\n"
	"\t</head>\n\t<body onload='filter();toggle(\"order\");changeSize()'>\n"
	"\t\t<header>\n\t\t\t<h1>\n\t\t\t\t<a href=\"../\">/</a><a href=\"\">Sub Dir</a>/\n"
	"\t\t\t</h1>\n\t\t</header>\n"
	"<table aria-describedby=\"summary\">\n<thead>\n<tr>\n<th></th>\n<th>\n"
	"<a href=\"?sort=namedirfirst&order=asc\" class=\"icon sort order\"><svg class=\"top\">"
	"<use xlink:href=\"#up-arrow\"></use></svg></a>\n"
	"<a href=\"?sort=name&order=asc\" class=\"order\">Name</a>\n</th>\n"
	"<th>\n<a href=\"?sort=size&order=asc\" class=\"order\">Size</a>\n</th>\n</tr>\n"
	"</thead>\n<tbody>\n"
	"<tr>\n<td></td>\n<td>\n<a href=\"..\">\n<span class=\"goup\">Go up</span>\n</a>\n"
	"</td>\n<td>&mdash;</td>\n<td class=\"hideable\">&mdash;</td>\n"
	"<td class=\"hideable\"></td>\n</tr>\n"
	"<tr class=\"file\">\n<td>\n</td>\n<td>\n"
	"<svg width=\"1.5em\" height=\"1em\" version=\"1.1\" viewBox=\"0 0 317 259\">"
	"<use xlink:href=\"#folder\"></use></svg>\n"
	"<span class=\"name\"><a href=\"%C3%BCn%C3%AF%20&amp;%20co/\">\xc3\xbcn\xc3\xaf &amp; co/</a>"
	"</span>\n</td>\n<td data-order=\"-1\">&mdash;</td>\n"
	"<td class=\"hideable\"><time datetime=\"2026-12-01 06:15:53.476041844 &#43;0000 UTC\">"
	"2026-12-01 06:15:53.476041844 &#43;0000 UTC</time></td>\n"
	"<td class=\"hideable\"></td>\n</tr>\n"
	"<tr class=\"file\">\n<td>\n</td>\n<td>\n"
	"<span class=\"name\"><a href=\"big+x.mp4\">big+x.mp4</a></span>\n</td>\n"
	"<td data-order=\"2000000\"><size>2000000</size></td>\n"
	"<td class=\"hideable\"><time datetime=\"2026-12-01 06:15:53 &#43;0000 UTC\">x</time></td>\n"
	"<td class=\"hideable\"></td>\n</tr>\n"
	"<tr class=\"file\">\n<td>\n</td>\n<td>\n"
	"<span class=\"name\"><a href=\"x%2520y.avi\">x%20y.avi</a></span>\n</td>\n"
	"<td data-order=\"0\"><size>0</size></td>\n</tr>\n"
	"</tbody>\n</table>\n<script>\nfunction changeSize() {\n"
	"var sizes = document.getElementsByTagName(\"size\");\n}\n</script>\n</body>\n</html>\n";

static void test_rclone(void **state)
{
	(void)state;
	struct px_listing *l = parse_ok("http://127.0.0.1:8083/Sub%20Dir/", rclone_page);
	assert_int_equal(l->kind, PX_LISTING_RCLONE);
	assert_int_equal(l->n, 3);
	entry(l, 0, "\xc3\xbcn\xc3\xaf & co",
	      "http://127.0.0.1:8083/Sub%20Dir/%C3%BCn%C3%AF%20&%20co/", 1, -1);
	entry(l, 1, "big+x.mp4", "http://127.0.0.1:8083/Sub%20Dir/big+x.mp4", 0, 2000000);
	entry(l, 2, "x%20y.avi", "http://127.0.0.1:8083/Sub%20Dir/x%2520y.avi", 0, 0);
	px_listing_free(l);
}

/* ---------------------------------------------------------------- dates */

#define T_2026_12_01_0615 1796105700    /* 2026-12-01 06:15:00 UTC */
#define T_2024_01_01_1200 1704110400    /* 2024-01-01 12:00:00 UTC */

static void test_dates(void **state)
{
	(void)state;
	struct px_listing *l = parse_ok("http://127.0.0.1:8081/", nginx_root);
	dated(l, 0, T_2026_12_01_0615);         /* a folder is dated too */
	dated(l, 1, T_2026_12_01_0615);
	dated(l, 2, T_2026_12_01_0615);
	px_listing_free(l);
	/* a name nginx cut ("..&gt;") and a date right after it */
	l = parse_ok("http://127.0.0.1:8081/Sub%20Dir/", nginx_sub);
	dated(l, 2, T_2026_12_01_0615);
	px_listing_free(l);

	l = parse_ok("http://127.0.0.1:8080/media/Movies/", apache_table);
	for (size_t i = 0; i < 4; i++)
		dated(l, i, T_2024_01_01_1200);
	px_listing_free(l);
	l = parse_ok("http://127.0.0.1:8080/pub/", apache_pre);
	dated(l, 0, T_2024_01_01_1200);
	dated(l, 1, T_2024_01_01_1200);
	px_listing_free(l);

	l = parse_ok("http://127.0.0.1:8082/Sub%20Dir/", lighttpd_sub);
	dated(l, 1, T_2026_12_01_0615 + 53);
	dated(l, 2, T_2026_12_01_0615 + 53);
	px_listing_free(l);

	l = parse_ok("https://media.example/films/", caddy_page);
	dated(l, 0, T_2024_01_01_1200);
	dated(l, 1, T_2024_01_01_1200);
	px_listing_free(l);

	/* rclone: a fraction dropped; a row without <time> has no date */
	l = parse_ok("http://127.0.0.1:8083/Sub%20Dir/", rclone_page);
	dated(l, 0, T_2026_12_01_0615 + 53);
	dated(l, 1, T_2026_12_01_0615 + 53);
	dated(l, 2, -1);
	px_listing_free(l);
}

/* Zones, leap days and dates that are not dates. */
static void test_dates_odd(void **state)
{
	(void)state;
	struct px_listing *l = parse_ok(
		"http://h/m/",
		"<html><head><title>Index of /m/</title></head><body><h1>Index of /m/</h1>"
		"<hr><pre><a href=\"../\">../</a>\n"
		"<a href=\"a.mkv\">a.mkv</a>   29-Feb-2024 23:59    12\n"
		"<a href=\"b.mkv\">b.mkv</a>   29-Feb-2023 23:59    12\n"
		"<a href=\"c.mkv\">c.mkv</a>   01-Dec-2026 24:15    12\n"
		"<a href=\"d.mkv\">d.mkv</a>   01-Foo-2026 06:15    12\n"
		"<a href=\"e.mkv\">e.mkv</a>   1-jan-1970 00:00    12\n"
		"<a href=\"f.mkv\">f.mkv</a>   01-Dec-2026    12\n"
		"<a href=\"g.mkv\">g.mkv</a>   01-Dec-2026 06:15x    12\n"
		"</pre><hr></body></html>");
	assert_int_equal(l->n, 7);
	dated(l, 0, 1709251140);                /* 2024-02-29 23:59 UTC */
	for (size_t i = 1; i < 7; i++)
		dated(l, i, i == 4 ? 0 : -1);
	/* each date that is none is kept as written, for the message */
	static const char *const bad[] = { NULL, "29-Feb-2023 23:59", "01-Dec-2026 24:15",
					   "01-Foo-2026 06:15", NULL, "01-Dec-2026 12",
					   "01-Dec-2026 06:15x" };
	for (size_t i = 0; i < 7; i++)
		bad_date(l, i, bad[i]);
	px_listing_free(l);

	/* no date at all (an Apache without its date column) is no bad date */
	l = parse_ok("http://h/m/",
		     "<html><head><title>Index of /m/</title></head><body><pre>"
		     "<a href=\"?C=N;O=D\">Name</a>\n<a href=\"a.mkv\">a.mkv</a>   12\n"
		     "</pre><address>Apache/2.4.62 Server</address></body></html>");
	assert_int_equal(l->kind, PX_LISTING_APACHE);
	dated(l, 0, -1);
	bad_date(l, 0, NULL);
	px_listing_free(l);

	/* caddy's RFC 3339 and rclone's Go format with zones other than UTC */
	l = parse_ok(
		"https://h/f/",
		"<table><tbody>"
		"<tr><td><a href=\"a.mkv\">a</a></td><td data-size=\"5\"></td>"
		"<td><time datetime=\"2024-01-01T13:30:00.5+01:30\">x</time></td></tr>"
		"<tr><td><a href=\"b.mkv\">b</a></td><td data-size=\"5\"></td>"
		"<td><time datetime=\"2024-01-01T05:00:00-07:00\">x</time></td></tr>"
		"<tr><td><a href=\"c.mkv\">c</a></td><td data-size=\"5\"></td>"
		"<td><time datetime=\"2024-01-01T12:00\">x</time></td></tr>"
		"<tr><td><a href=\"d.mkv\">d</a></td><td data-size=\"5\"></td>"
		"<td><time datetime=\"2024-13-01T12:00:00Z\">x</time></td></tr>"
		"<tr><td><a href=\"e.mkv\">e</a></td><td data-size=\"5\"></td>"
		"<td><time datetime=\"2024-01-01T12:00:00+2\">x</time></td></tr>"
		"<tr><td><a href=\"f.mkv\">f</a></td><td data-size=\"5\"></td>"
		"<td><time datetime=\"2024-01-01T12:00:00Zulu time\">x</time></td></tr>"
		"<tr><td><a href=\"g.mkv\">g</a></td><td data-size=\"5\"></td>"
		"<td><time datetime=\"2024-01-01T12:00:00Z\">x</time></td></tr>"
		"<tr><td><a href=\"h.mkv\">h</a></td><td data-size=\"5\"></td></tr>"
		"</tbody></table><footer><a href=\"https://caddyserver.com\">Caddy</a></footer>");
	assert_int_equal(l->kind, PX_LISTING_CADDY);
	assert_int_equal(l->n, 8);
	dated(l, 0, T_2024_01_01_1200);
	dated(l, 1, T_2024_01_01_1200);
	for (size_t i = 2; i < 6; i++)
		dated(l, i, -1);
	dated(l, 6, T_2024_01_01_1200);
	dated(l, 7, -1);
	bad_date(l, 0, NULL);
	bad_date(l, 2, "2024-01-01T12:00");
	bad_date(l, 3, "2024-13-01T12:00:00Z");
	bad_date(l, 4, "2024-01-01T12:00:00+2");
	bad_date(l, 5, "2024-01-01T12:00:00Zulu time");
	bad_date(l, 6, NULL);
	bad_date(l, 7, NULL);
	px_listing_free(l);

	l = parse_ok(
		"http://h/r/",
		"<table><tbody><tr><td><a href=\"a.mkv\">a</a></td>"
		"<td data-order=\"5\"><size>5</size></td>"
		"<td><time datetime=\"2024-01-01 04:00:00 &#45;0800 PST\">x</time></td></tr>"
		"</tbody></table>");
	assert_int_equal(l->kind, PX_LISTING_RCLONE);
	dated(l, 0, T_2024_01_01_1200);
	px_listing_free(l);

	/* a page of an unknown server: its text is not trusted for dates */
	l = parse_ok("http://h/g/",
		     "<title>Index of /g/</title><pre><a href=\"a.mkv\">a.mkv</a> "
		     "01-Dec-2026 06:15 12\n</pre>");
	assert_int_equal(l->kind, PX_LISTING_GENERIC);
	dated(l, 0, -1);
	px_listing_free(l);
}

/* ---------------------------------------------------------------- hrefs */

static void test_hrefs(void **state)
{
	(void)state;
	/* absolute-path, absolute and scheme-relative hrefs to children count;
	 * other origins, deeper paths, mailto:, fragments-only, %2F and %00
	 * names do not; "./x" and "sub/../y" resolve; the base's userinfo
	 * is kept; unsafe bytes are encoded */
	struct px_listing *l = parse_ok(
		"http://user:pw@Host.Example:8080/lib/Show%20A/?C=N;O=D#top",
		"<title>Index of /lib/Show A/</title><pre>\n"
		"<a href=\"/lib/Show%20A/abs.mkv\">abs</a>\n"
		"<a href=\"/lib/Show A/raw space.mkv\">raw</a>\n"
		"<a href=\"http://host.example:8080/lib/Show%20A/full.mkv\">full</a>\n"
		"<a href=\"HTTP://HOST.EXAMPLE:8080/lib/Show%20a/case.mkv\">other dir (case)</a>\n"
		"<a href=\"//host.example:8080/lib/Show%20A/schemeless.mkv#frag\">sl</a>\n"
		"<a href=\"http://host.example:8081/lib/Show%20A/port.mkv\">port</a>\n"
		"<a href=\"https://host.example:8080/lib/Show%20A/tls.mkv\">scheme</a>\n"
		"<a href=\"http://elsewhere/lib/Show%20A/x.mkv\">host</a>\n"
		"<a href=\"./dot.mkv\">dot</a>\n"
		"<a href=\"sub/../back.mkv\">back</a>\n"
		"<a href=\"deep/er.mkv\">deep</a>\n"
		"<a href=\"../Show%20B/\">sibling</a>\n"
		"<a href=\"mailto:x@y\">mail</a>\n"
		"<a href=\"#x\">frag</a>\n"
		"<a href=\"a%2Fb.mkv\">slash</a>\n"
		"<a href=\"nul%00.mkv\">nul</a>\n"
		"<a href=\"%2E%2E/\">dots</a>\n"
		"<a href=\"q.mkv?download=1\">query</a>\n"
		"<a href='single.mkv'>single quotes</a>\n"
		"<a class=x href=unquoted.mkv>unquoted</a>\n"
		"<A HREF=\"upper.MKV\">upper</A>\n"
		"<a href=\" spaced.mkv \">blanks around</a>\n"
		"<a href=\"tab&#9;bed.mkv\">a tab inside is dropped</a>\n"
		"<a href=\"quote&quot;&lt;&gt;.mkv\">entities</a>\n"
		"<a href=\"abs.mkv\">the same entry again</a>\n"
		"<a href=\"%zz.mkv\">bad escape</a>\n"
		"</pre>");
	assert_int_equal(l->kind, PX_LISTING_GENERIC);
	const char *B = "http://user:pw@Host.Example:8080";
	char url[256];
	size_t i = 0;
#define E(name, path, dir) \
	(snprintf(url, sizeof(url), "%s%s", B, path), entry(l, i++, name, url, dir, -1))
	E("abs.mkv", "/lib/Show%20A/abs.mkv", 0);
	E("raw space.mkv", "/lib/Show%20A/raw%20space.mkv", 0);
	E("full.mkv", "/lib/Show%20A/full.mkv", 0);
	E("schemeless.mkv", "/lib/Show%20A/schemeless.mkv", 0);
	E("dot.mkv", "/lib/Show%20A/dot.mkv", 0);
	E("back.mkv", "/lib/Show%20A/back.mkv", 0);
	E("single.mkv", "/lib/Show%20A/single.mkv", 0);
	E("unquoted.mkv", "/lib/Show%20A/unquoted.mkv", 0);
	E("upper.MKV", "/lib/Show%20A/upper.MKV", 0);
	E("spaced.mkv", "/lib/Show%20A/spaced.mkv", 0);
	E("tabbed.mkv", "/lib/Show%20A/tabbed.mkv", 0);
	E("quote\"<>.mkv", "/lib/Show%20A/quote%22%3C%3E.mkv", 0);
	E("%zz.mkv", "/lib/Show%20A/%25zz.mkv", 0);
#undef E
	assert_int_equal(l->n, i);
	px_listing_free(l);

	/* a page fetched without its trailing '/' lists what a browser would
	 * resolve against it: its parent's children */
	l = parse_ok("http://h/a/b",
		     "<h1>Index of /a/b</h1><a href=\"x.mkv\">x</a> <a href=\"b/y.mkv\">y</a>");
	assert_int_equal(l->n, 1);
	entry(l, 0, "x.mkv", "http://h/a/x.mkv", 0, -1);
	px_listing_free(l);

	/* the root with no path */
	l = parse_ok("https://h", "<h1>Index of /</h1><a href=\"/x/\">x</a>");
	assert_int_equal(l->n, 1);
	entry(l, 0, "x", "https://h/x/", 1, -1);
	px_listing_free(l);
}

/* ------------------------------------------------------------ refusals */

static void refused(const char *base, const char *page, size_t len, const char *want)
{
	char err[512] = "";
	struct px_listing *l = NULL;
	char *copy = malloc(len ? len : 1);
	assert_non_null(copy);
	memcpy(copy, page, len);
	enum px_status st = px_listing_parse(base, copy, len, &l, err, sizeof(err));
	free(copy);
	if (st != PX_EINVAL)
		fail_msg("status %s for a page that must be refused (%s)", px_strerror(st), want);
	assert_null(l);
	if (!strstr(err, want))
		fail_msg("message \"%s\", want \"%s\"", err, want);
	assert_null(strchr(err, '\n'));
}

static void test_not_listing(void **state)
{
	(void)state;
	const char *site = "<!DOCTYPE html><html><head><title>Welcome</title></head><body>"
			   "<a href=\"about.html\">About</a><a href=\"/shop/\">Shop</a></body></html>";
	refused("http://h/", site, strlen(site), "not a directory listing");
	refused("http://h/", "just some text", 14, "not an HTML page");
	refused("http://h/", "{\"a\": 1}", 8, "not an HTML page");
	refused("http://h/", "<html>\0<title>Index of /</title>", 32, "binary data");
	refused("ftp://h/", "<title>Index of /</title>", 25, "not an http");
	refused("http:///", "<title>Index of /</title>", 25, "not an http");
	refused("http://h:99999/", "<title>Index of /</title>", 25, "not an http");
}

static void test_empty_and_hostile(void **state)
{
	(void)state;
	/* an empty directory: a listing with no entries */
	struct px_listing *l = parse_ok("http://h/e/",
					"<html><head><title>Index of /e/</title></head><body>"
					"<h1>Index of /e/</h1><hr><pre><a href=\"../\">../</a>\n"
					"</pre><hr></body></html>");
	assert_int_equal(l->n, 0);
	px_listing_free(l);

	/* cut anywhere: never a read past the end (ASan), never a crash */
	size_t n = strlen(nginx_sub);
	for (size_t cut = 0; cut <= n; cut++) {
		char *copy = malloc(cut ? cut : 1);
		assert_non_null(copy);
		memcpy(copy, nginx_sub, cut);
		char err[256];
		struct px_listing *x = NULL;
		if (px_listing_parse("http://h/Sub%20Dir/", copy, cut, &x, err, sizeof(err)) == PX_OK)
			px_listing_free(x);
		free(copy);
	}

	/* unterminated tags, quotes, comments and scripts end the page */
	const char *bad[] = {
		"<title>Index of /</title><a href=\"x.mkv",
		"<title>Index of /</title><a href='x.mkv'",
		"<title>Index of /</title><!-- <a href=\"x.mkv\">",
		"<title>Index of /</title><script><a href=\"x.mkv\">",
		"<title>Index of /</title><a href=x.mkv>x</a> 12",
		"<title>Index of /</title><a = = href>",
		"<title>Index of /</title><<<a href=\"&#xffffffff;&#0;&#55296;&#;&;&#x;.mkv\">",
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		char err[256];
		struct px_listing *x = NULL;
		assert_int_equal(parse("http://h/", bad[k], &x, err, sizeof(err)), PX_OK);
		px_listing_free(x);
	}

	/* more entries than the bound: refused with one line */
	size_t count = PX_LISTING_MAX_ENTRIES + 1;
	size_t cap = 64 + count * 32;
	char *big = malloc(cap), *o = big;
	assert_non_null(big);
	o += sprintf(o, "<title>Index of /</title><pre>\n");
	for (size_t k = 0; k < count; k++)
		o += sprintf(o, "<a href=\"f%zu.mkv\">f</a> 1\n", k);
	char err[256] = "";
	struct px_listing *x = NULL;
	assert_int_equal(px_listing_parse("http://h/", big, (size_t)(o - big), &x, err, sizeof(err)),
			 PX_EINVAL);
	assert_null(x);
	assert_non_null(strstr(err, "more than 100000 entries"));
	free(big);
}

static void test_encode(void **state)
{
	(void)state;
	char *e = px_listing_encode("Heat (1995) #1 & 50%/\xc3\xa9~.mkv");
	assert_non_null(e);
	assert_string_equal(e, "Heat%20(1995)%20%231%20&%2050%25%2F%C3%A9~.mkv");
	free(e);
	e = px_listing_encode("");
	assert_string_equal(e, "");
	free(e);
	assert_string_equal(px_listing_kind_name(PX_LISTING_LIGHTTPD), "lighttpd");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nginx),
		cmocka_unit_test(test_nginx_inexact),
		cmocka_unit_test(test_apache),
		cmocka_unit_test(test_lighttpd),
		cmocka_unit_test(test_caddy),
		cmocka_unit_test(test_rclone),
		cmocka_unit_test(test_dates),
		cmocka_unit_test(test_dates_odd),
		cmocka_unit_test(test_hrefs),
		cmocka_unit_test(test_not_listing),
		cmocka_unit_test(test_empty_and_hostile),
		cmocka_unit_test(test_encode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
