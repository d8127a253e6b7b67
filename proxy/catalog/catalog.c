/*
 * catalog.c - loading and validating the JSON catalog.
 *
 * jansson parses the text (rejecting duplicate keys, keeping \u0000 so that
 * we can name it), then one walk checks every object against the fields it
 * may have and builds the px_catalog. The first problem stops the walk and
 * becomes the one message the user sees; its line and column come from
 * jsonpos, which looks the offending value up in the text only then.
 *
 * Sources that name no provider get an implicit one named after the URL's
 * host and port ("local" for paths), so every source has a provider that
 * later limits and balancing can count on.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "catalog.h"
#include "catalog_i.h"
#include "config.h"
#include "jsonpos.h"
#include "redact.h"
#include "strmap.h"

#define CATALOG_MAX_BYTES (256L << 20)

struct ctx {
	const char *file, *text;
	size_t len;
	char *err;
	size_t errlen;
	struct px_catalog *cat;
	struct px_catalog_providers ps;  /* ps.names: provider name → index */
	json_t *settings_obj;      /* borrowed from the root */
};

void px_catalog_escape(char *dst, size_t cap, const char *src)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)src; *p && n + 5 < cap; p++) {
		if (*p >= 0x20 && *p != 0x7f)
			dst[n++] = (char)*p;
		else if (*p == '\n')
			n += (size_t)snprintf(dst + n, cap - n, "\\n");
		else if (*p == '\t')
			n += (size_t)snprintf(dst + n, cap - n, "\\t");
		else
			n += (size_t)snprintf(dst + n, cap - n, "\\x%02x", *p);
	}
	dst[n] = '\0';
}

PX_PRINTF(3, 4)
static enum px_status fail(struct ctx *c, const char *field, const char *fmt, ...)
{
	int line = 1, col = 1;
	char msg[512];
	va_list ap;

	/* a missing member points at its enclosing object: walk up until found */
	char path[512];
	snprintf(path, sizeof(path), "%s", field);
	while (px_jsonpos_find(c->text, c->len, path, &line, &col) != 0 && path[0]) {
		char *cut = strrchr(path, '.');
		char *br = strrchr(path, '[');
		if (br > cut)
			cut = br;
		if (cut)
			*cut = '\0';
		else
			path[0] = '\0';
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	char efield[512], emsg[1024];
	px_catalog_escape(efield, sizeof(efield), field[0] ? field : "(top)");
	px_catalog_escape(emsg, sizeof(emsg), msg);
	snprintf(c->err, c->errlen, "%s:%d:%d: %s: %s", c->file, line, col, efield, emsg);
	return PX_EINVAL;
}

static enum px_status oom(struct ctx *c)
{
	snprintf(c->err, c->errlen, "%s: out of memory", c->file);
	return PX_ENOMEM;
}

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_STRING: return "a string";
	case JSON_INTEGER: return "an integer";
	case JSON_REAL: return "a non-integer number";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	case JSON_NULL: return "null";
	}
	return "a value";
}

/* Every member of obj must be one of the NULL-terminated names. */
static enum px_status check_keys(struct ctx *c, const char *at, json_t *obj,
				 const char *const *allowed, const char *what)
{
	const char *key;
	json_t *v;
	json_object_foreach(obj, key, v) {
		int ok = 0;
		for (const char *const *a = allowed; *a; a++)
			if (strcmp(*a, key) == 0)
				ok = 1;
		if (!ok) {
			char field[512], list[256] = "";
			snprintf(field, sizeof(field), "%s%s%s", at, at[0] ? "." : "", key);
			for (const char *const *a = allowed; *a; a++)
				snprintf(list + strlen(list), sizeof(list) - strlen(list),
					 "%s%s", a == allowed ? "" : ", ", *a);
			return fail(c, field, "unknown key \"%s\" in %s (allowed: %s)",
				    key, what, list);
		}
	}
	return PX_OK;
}

/* A string member; NULL with an error when missing (if required) or mistyped. */
static enum px_status get_string(struct ctx *c, const char *at, json_t *obj,
				 const char *key, int required, const char **out)
{
	char field[512];
	json_t *v = json_object_get(obj, key);
	snprintf(field, sizeof(field), "%s.%s", at, key);
	*out = NULL;
	if (!v) {
		if (required)
			return fail(c, field, "missing required field \"%s\"", key);
		return PX_OK;
	}
	if (!json_is_string(v))
		return fail(c, field, "must be a string, not %s", type_name(v));
	if (strlen(json_string_value(v)) != json_string_length(v))
		return fail(c, field, "contains a NUL character");
	if (json_string_length(v) == 0)
		return fail(c, field, "must not be empty");
	*out = json_string_value(v);
	return PX_OK;
}

/* A non-negative integer member; -1 when absent. */
static enum px_status get_count(struct ctx *c, const char *at, json_t *obj,
				const char *key, int64_t min, int64_t max, int64_t *out)
{
	char field[512];
	json_t *v = json_object_get(obj, key);
	snprintf(field, sizeof(field), "%s.%s", at, key);
	*out = -1;
	if (!v)
		return PX_OK;
	if (!json_is_integer(v))
		return fail(c, field, "must be a whole number, not %s", type_name(v));
	json_int_t n = json_integer_value(v);
	if (n < min || n > max)
		return fail(c, field, "%lld is out of range (%lld to %lld)",
			    (long long)n, (long long)min, (long long)max);
	*out = n;
	return PX_OK;
}

/* A boolean member; 0 when absent. */
static enum px_status get_flag(struct ctx *c, const char *at, json_t *obj,
			       const char *key, int *out)
{
	char field[512];
	json_t *v = json_object_get(obj, key);
	snprintf(field, sizeof(field), "%s.%s", at, key);
	*out = 0;
	if (!v)
		return PX_OK;
	if (!json_is_boolean(v))
		return fail(c, field, "must be true or false, not %s", type_name(v));
	*out = json_is_true(v);
	return PX_OK;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

const char *px_catalog_bad_path(const char *p)
{
	size_t ncomp = 1;
	if (p[0] == '/')
		return "must be relative (no leading '/')";
	for (const unsigned char *q = (const unsigned char *)p; *q; q++) {
		if (*q < 0x20 || *q == 0x7f)
			return "contains a control character";
		ncomp += *q == '/';
		/* the tree and the kernel work per component and per byte:
		 * bound both before anything is built from it */
		if (q - (const unsigned char *)p >= PX_CATALOG_MAX_PATH)
			return "is longer than 4096 bytes";
	}
	if (ncomp > PX_CATALOG_MAX_DEPTH)
		return "has more than 64 components";
	const char *comp = p;
	for (;;) {
		size_t n = strcspn(comp, "/");
		if (n == 0)
			return "has an empty component ('//' or a trailing '/')";
		if ((n == 1 && comp[0] == '.') || (n == 2 && comp[0] == '.' && comp[1] == '.'))
			return "has a '.' or '..' component";
		if (n > 255)
			return "has a component longer than 255 bytes";
		if (comp[n] == '\0')
			break;
		comp += n + 1;
	}
	if (strncmp(p, ".seamfs", 7) == 0 && (p[7] == '\0' || p[7] == '/'))
		return "is inside .seamfs/, which seamfs reserves for its status";
	return NULL;
}

const char *px_catalog_bad_url(const char *url, char *hostport, size_t cap)
{
	size_t skip;
	int port = 0;
	if (strncasecmp(url, "http://", 7) == 0) {
		skip = 7;
		port = 80;
	} else if (strncasecmp(url, "https://", 8) == 0) {
		skip = 8;
		port = 443;
	} else {
		return "unsupported URL scheme (only http:// and https://)";
	}
	for (const unsigned char *q = (const unsigned char *)url; *q; q++)
		if (*q <= 0x20 || *q == 0x7f)
			return "contains a space or control character (percent-encode it)";
	const char *auth = url + skip;
	size_t alen = strcspn(auth, "/?#");
	const char *at = memchr(auth, '@', alen);
	if (at) {
		alen -= (size_t)(at + 1 - auth);
		auth = at + 1;
	}
	if (alen == 0)
		return "has no host";
	const char *hend = auth + alen;
	const char *colon = NULL;
	if (auth[0] == '[') {
		const char *rb = memchr(auth, ']', alen);
		if (!rb)
			return "has an unterminated IPv6 address";
		if (rb + 1 < hend) {
			if (rb[1] != ':')
				return "has a malformed host";
			colon = rb + 1;
		}
	} else {
		colon = memchr(auth, ':', alen);
	}
	size_t hlen = colon ? (size_t)(colon - auth) : alen;
	if (hlen == 0)
		return "has no host";
	if (colon) {
		const char *ps = colon + 1;
		if (ps == hend)
			return "has an empty port";
		port = 0;
		for (const char *q = ps; q < hend; q++) {
			if (!isdigit((unsigned char)*q))
				return "has a malformed port";
			port = port * 10 + (*q - '0');
			if (port > 65535)
				return "has a port above 65535";
		}
		if (port == 0)
			return "has port 0";
	}
	if (hlen + 8 > cap)
		return "has a host name that is too long";
	for (size_t i = 0; i < hlen; i++)
		hostport[i] = (char)tolower((unsigned char)auth[i]);
	snprintf(hostport + hlen, cap - hlen, ":%d", port);
	return NULL;
}

const char *px_catalog_bad_local(const char *path)
{
	if (path[0] != '/')
		return "must be an absolute path";
	for (const unsigned char *q = (const unsigned char *)path; *q; q++)
		if (*q < 0x20 || *q == 0x7f)
			return "contains a control character";
	return NULL;
}

enum px_status px_catalog_source_names(struct px_source *s)
{
	char *name = s->url ? s->url : s->path;
	s->shown = px_redact_url_dup(name);
	s->key = px_redact_key(name);
	if (!s->shown || !s->key)
		return PX_ENOMEM;
	/* most sources carry no secret: they are shown and kept by their own
	 * name, not a copy of it (a library of 100 000 files) */
	if (strcmp(s->shown, name) == 0) {
		free(s->shown);
		s->shown = name;
	}
	if (strcmp(s->key, name) == 0) {
		free(s->key);
		s->key = name;
	}
	return PX_OK;
}

static enum px_status add_header_host(struct px_provider *p, const char *host)
{
	for (size_t i = 0; i < p->nheader_hosts; i++)
		if (strcmp(p->header_hosts[i], host) == 0)
			return PX_OK;
	char **n = realloc(p->header_hosts, (p->nheader_hosts + 1) * sizeof(*n));
	if (!n)
		return PX_ENOMEM;
	p->header_hosts = n;
	if (!(n[p->nheader_hosts] = strdup(host)))
		return PX_ENOMEM;
	p->nheader_hosts++;
	return PX_OK;
}

enum px_status px_catalog_add_header_host(struct px_provider *p, const char *url)
{
	char origin[600];
	/* only headers need to know where they may go */
	if (!p->nheaders || px_redact_origin(url, origin, sizeof(origin)))
		return PX_OK;
	return add_header_host(p, origin);
}

enum px_status px_catalog_add_provider(struct px_catalog_providers *ps, const char *name,
				       int implicit, size_t *index)
{
	struct px_catalog *cat = ps->cat;
	if (cat->nproviders == ps->cap) {
		size_t ncap = ps->cap ? ps->cap * 2 : 8;
		struct px_provider *np = realloc(cat->providers, ncap * sizeof(*np));
		if (!np)
			return PX_ENOMEM;
		cat->providers = np;
		ps->cap = ncap;
	}
	struct px_provider *p = &cat->providers[cat->nproviders];
	memset(p, 0, sizeof(*p));
	p->name = strdup(name);
	if (!p->name)
		return PX_ENOMEM;
	p->implicit = implicit;
	*index = cat->nproviders++;
	/* names' keys point into providers[].name: no rebuild is needed on
	 * realloc because the strings themselves do not move. */
	if (px_strmap_put(ps->names, p->name, *index, NULL) == PX_ENOMEM)
		return PX_ENOMEM;
	return PX_OK;
}

enum px_status px_catalog_implicit_provider(struct px_catalog_providers *ps,
					    const char *hostport, size_t *index)
{
	if (px_strmap_get(ps->names, hostport, index))
		return PX_OK;
	return px_catalog_add_provider(ps, hostport, 1, index);
}

static enum px_status add_provider(struct ctx *c, const char *name, int implicit,
				   size_t *index)
{
	if (px_catalog_add_provider(&c->ps, name, implicit, index) != PX_OK)
		return oom(c);
	return PX_OK;
}

static int header_name_ok(const char *s, size_t n)
{
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (!(isalnum(ch) || strchr("!#$%&'*+-.^_`|~", ch)))
			return 0;
	}
	return 1;
}

/* "trust_redirects": hosts (or host:port) a provider's redirects may take
 * its headers to, besides its own URLs' origins. */
static enum px_status parse_trust(struct ctx *c, const char *at, json_t *arr,
				  struct px_provider *p)
{
	char field[512], host[300];
	size_t i;
	json_t *v;

	if (!arr)
		return PX_OK;
	snprintf(field, sizeof(field), "%s.trust_redirects", at);
	if (!json_is_array(arr))
		return fail(c, field, "must be an array of host names (\"cdn.example.com\" or "
			    "\"cdn.example.com:8443\"), not %s", type_name(arr));
	json_array_foreach(arr, i, v) {
		snprintf(field, sizeof(field), "%s.trust_redirects[%zu]", at, i);
		if (!json_is_string(v))
			return fail(c, field, "must be a string, not %s", type_name(v));
		const char *why = strlen(json_string_value(v)) != json_string_length(v)
					  ? "contains a NUL"
					  : px_redact_bad_host(json_string_value(v), host,
							       sizeof(host));
		if (why && strchr(json_string_value(v), '@'))
			return fail(c, field, "%s", why); /* userinfo: not quoted */
		if (why)
			return fail(c, field, "\"%.200s\" %s", json_string_value(v), why);
		if (add_header_host(p, host) != PX_OK)
			return oom(c);
	}
	return PX_OK;
}

static enum px_status parse_providers(struct ctx *c, json_t *arr)
{
	static const char *const keys[] = { "name", "max_connections", "headers", "drained",
					    "trust_redirects", NULL };
	size_t i;
	json_t *pv;
	enum px_status st;

	if (!json_is_array(arr))
		return fail(c, "providers", "must be an array, not %s", type_name(arr));
	json_array_foreach(arr, i, pv) {
		char at[256];
		const char *name;
		int64_t maxc;
		size_t idx, old;
		snprintf(at, sizeof(at), "providers[%zu]", i);
		if (!json_is_object(pv))
			return fail(c, at, "must be an object, not %s", type_name(pv));
		if ((st = check_keys(c, at, pv, keys, "a provider")))
			return st;
		if ((st = get_string(c, at, pv, "name", 1, &name)))
			return st;
		if (px_strmap_get(c->ps.names, name, &old)) {
			char field[512];
			snprintf(field, sizeof(field), "%s.name", at);
			return fail(c, field, "duplicate provider name \"%s\" (also providers[%zu])",
				    name, old);
		}
		int drained;
		if ((st = get_count(c, at, pv, "max_connections", 1, 100000, &maxc)))
			return st;
		if ((st = get_flag(c, at, pv, "drained", &drained)))
			return st;
		if ((st = add_provider(c, name, 0, &idx)))
			return st;
		struct px_provider *p = &c->cat->providers[idx];
		p->max_connections = maxc < 0 ? 0 : (int)maxc;
		p->drained = drained;
		if ((st = parse_trust(c, at, json_object_get(pv, "trust_redirects"), p)))
			return st;

		json_t *hdrs = json_object_get(pv, "headers");
		if (!hdrs)
			continue;
		char hat[256];
		snprintf(hat, sizeof(hat), "%s.headers", at);
		if (!json_is_object(hdrs))
			return fail(c, hat, "must be an object of strings, not %s", type_name(hdrs));
		p->headers = calloc(json_object_size(hdrs) + 1, sizeof(char *));
		if (!p->headers)
			return oom(c);
		const char *hk;
		json_t *hv;
		json_object_foreach(hdrs, hk, hv) {
			char field[512];
			snprintf(field, sizeof(field), "%s.%s", hat, hk);
			if (!header_name_ok(hk, strlen(hk)))
				return fail(c, field, "\"%s\" is not a valid HTTP header name", hk);
			if (!json_is_string(hv))
				return fail(c, field, "must be a string, not %s", type_name(hv));
			const char *val = json_string_value(hv);
			if (strlen(val) != json_string_length(hv) || strpbrk(val, "\r\n"))
				return fail(c, field, "must not contain NUL, CR or LF");
			if (!strcasecmp(hk, "Range") || !strcasecmp(hk, "Host") ||
			    !strcasecmp(hk, "Content-Length") || !strcasecmp(hk, "Connection"))
				return fail(c, field, "seamfs sets the %s header itself", hk);
			size_t n = strlen(hk) + strlen(val) + 3;
			char *line = malloc(n);
			if (!line)
				return oom(c);
			snprintf(line, n, "%s: %s", hk, val);
			p->headers[p->nheaders++] = line;
		}
	}
	return PX_OK;
}

static enum px_status parse_source(struct ctx *c, const char *at, json_t *sv,
				   struct px_source *src)
{
	static const char *const keys[] = { "url", "path", "provider", NULL };
	const char *url, *path, *prov;
	enum px_status st;
	char field[512], hostport[300];
	size_t idx;

	if (!json_is_object(sv))
		return fail(c, at, "must be an object, not %s", type_name(sv));
	if ((st = check_keys(c, at, sv, keys, "a source")))
		return st;
	if ((st = get_string(c, at, sv, "url", 0, &url)) ||
	    (st = get_string(c, at, sv, "path", 0, &path)) ||
	    (st = get_string(c, at, sv, "provider", 0, &prov)))
		return st;
	if (url && path) {
		snprintf(field, sizeof(field), "%s.path", at);
		return fail(c, field, "a source has either \"url\" or \"path\", not both");
	}
	if (!url && !path)
		return fail(c, at, "missing required field \"url\" or \"path\"");
	if (url) {
		const char *why = px_catalog_bad_url(url, hostport, sizeof(hostport));
		if (why) {
			char shown[300];
			px_redact_url(url, shown, sizeof(shown)); /* errors reach logs */
			snprintf(field, sizeof(field), "%s.url", at);
			return fail(c, field, "\"%s\" %s", shown, why);
		}
	} else {
		const char *why = px_catalog_bad_local(path);
		snprintf(field, sizeof(field), "%s.path", at);
		if (why && path[0] != '/')
			return fail(c, field, "\"%s\" %s", path, why);
		if (why)
			return fail(c, field, "%s", why);
		snprintf(hostport, sizeof(hostport), "local");
	}
	if (prov) {
		if (!px_strmap_get(c->ps.names, prov, &idx) ||
		    c->cat->providers[idx].implicit) {
			snprintf(field, sizeof(field), "%s.provider", at);
			return fail(c, field, "unknown provider \"%s\" (not in \"providers\")", prov);
		}
	} else if (px_catalog_implicit_provider(&c->ps, hostport, &idx) != PX_OK) {
		return oom(c);
	}
	src->provider = idx;
	src->url = dup_or_null(url);
	src->path = dup_or_null(path);
	if ((url && !src->url) || (path && !src->path) ||
	    px_catalog_source_names(src) != PX_OK ||
	    (url && px_catalog_add_header_host(&c->cat->providers[idx], url) != PX_OK))
		return oom(c);
	return PX_OK;
}

static enum px_status parse_derived(struct ctx *c, const char *at, json_t *av,
				    struct px_asset *a)
{
	static const char *const tkeys[] = { "of", "height", "video_bitrate",
		"audio_bitrate", "segment_seconds", NULL };
	static const char *const rkeys[] = { "of", NULL };
	json_t *t = json_object_get(av, "transcode");
	const char *key = t ? "transcode" : "remux";
	char field[512];
	enum px_status st;
	const char *of;

	if (!t)
		t = json_object_get(av, "remux");
	snprintf(field, sizeof(field), "%s.%s", at, key);
	if (!json_is_object(t))
		return fail(c, field, "must be an object, not %s", type_name(t));
	if ((st = check_keys(c, field, t, t == json_object_get(av, "transcode") ? tkeys : rkeys,
			     key[0] == 't' ? "a transcode profile" : "a remux profile")))
		return st;
	if ((st = get_string(c, field, t, "of", 1, &of)))
		return st;
	if (key[0] == 't') {
		int64_t h, sec;
		if ((st = get_count(c, field, t, "height", 144, 4320, &h)) ||
		    (st = get_count(c, field, t, "video_bitrate", 100000, 200000000,
				    &a->video_bitrate)) ||
		    (st = get_count(c, field, t, "audio_bitrate", 16000, 1536000,
				    &a->audio_bitrate)) ||
		    (st = get_count(c, field, t, "segment_seconds", 1, 6, &sec)))
			return st;
		if (h >= 0 && h % 2) {
			snprintf(field, sizeof(field), "%s.transcode.height", at);
			return fail(c, field, "%lld must be even (4:2:0 video)", (long long)h);
		}
		a->height = h < 0 ? 0 : (int)h;
		if (a->video_bitrate < 0)
			a->video_bitrate = 1000000;
		if (a->audio_bitrate < 0)
			a->audio_bitrate = 128000;
		a->segment_seconds = sec < 0 ? 1 : (int)sec;
		a->segment_seconds_default = sec < 0;
	}
	a->kind = key[0] == 't' ? PX_ASSET_TRANSCODE : PX_ASSET_REMUX;
	a->of = strdup(of);
	return a->of ? PX_OK : oom(c);
}

/* An asset's "sha256" (at: "assets[N]"): 64 hex digits, kept lowercase. */
static enum px_status parse_sha256(struct ctx *c, const char *at, const char *sha,
				   struct px_asset *a)
{
	char field[128];
	size_t n = strlen(sha);
	int hex = n == 64;
	for (size_t k = 0; hex && k < n; k++)
		hex = isxdigit((unsigned char)sha[k]);
	if (!hex) {
		snprintf(field, sizeof(field), "%s.sha256", at);
		return fail(c, field, "must be 64 hexadecimal digits");
	}
	if (!(a->sha256 = malloc(65)))
		return oom(c);
	for (size_t k = 0; k < 64; k++)
		a->sha256[k] = (char)tolower((unsigned char)sha[k]);
	a->sha256[64] = '\0';
	return PX_OK;
}

/* A plain asset's "sources" (srcs, NULL when missing): at least one. */
static enum px_status parse_sources(struct ctx *c, const char *at, json_t *srcs,
				    struct px_asset *a)
{
	char field[128];
	enum px_status st;
	snprintf(field, sizeof(field), "%s.sources", at);
	if (!srcs)
		return fail(c, field, "missing required field \"sources\"");
	if (!json_is_array(srcs))
		return fail(c, field, "must be an array, not %s", type_name(srcs));
	if (json_array_size(srcs) == 0)
		return fail(c, field, "must list at least one source");
	a->sources = calloc(json_array_size(srcs), sizeof(*a->sources));
	if (!a->sources)
		return oom(c);
	size_t k;
	json_t *sv;
	json_array_foreach(srcs, k, sv) {
		char sat[256];
		snprintf(sat, sizeof(sat), "%s.sources[%zu]", at, k);
		if ((st = parse_source(c, sat, sv, &a->sources[k])))
			return st;
		a->nsources++;
	}
	return PX_OK;
}

static enum px_status parse_asset(struct ctx *c, size_t i, json_t *av)
{
	static const char *const keys[] = { "id", "path", "size", "sha256", "mtime",
		"sources", "transcode", "remux", "copies", NULL };
	struct px_asset *a = &c->cat->assets[i];
	char at[256], field[128];
	const char *id, *path, *sha;
	enum px_status st;

	a->size = a->mtime = -1;
	a->copies = -1;
	snprintf(at, sizeof(at), "assets[%zu]", i);
	if (!json_is_object(av))
		return fail(c, at, "must be an object, not %s", type_name(av));
	if ((st = check_keys(c, at, av, keys, "an asset")))
		return st;
	if ((st = get_string(c, at, av, "id", 1, &id)) ||
	    (st = get_string(c, at, av, "path", 1, &path)))
		return st;
	for (const unsigned char *q = (const unsigned char *)id; *q; q++) {
		if (*q < 0x20 || *q == 0x7f) {
			snprintf(field, sizeof(field), "%s.id", at);
			return fail(c, field, "contains a control character");
		}
	}
	const char *why = px_catalog_bad_path(path);
	if (why) {
		snprintf(field, sizeof(field), "%s.path", at);
		/* a long path is quoted in part: the reason must show */
		return fail(c, field, "\"%.120s%s\" %s", path, strlen(path) > 120 ? "..." : "",
			    why);
	}
	if ((st = get_count(c, at, av, "size", 0, PX_CATALOG_MAX_SIZE, &a->size)) ||
	    (st = get_count(c, at, av, "mtime", 0, INT64_MAX, &a->mtime)) ||
	    (st = get_string(c, at, av, "sha256", 0, &sha)))
		return st;
	int64_t ncopies;
	if ((st = get_count(c, at, av, "copies", 0, PX_CATALOG_MAX_COPIES, &ncopies)))
		return st;
	a->copies = (int)ncopies;
	if (sha && (st = parse_sha256(c, at, sha, a)))
		return st;
	a->id = strdup(id);
	a->path = strdup(path);
	if (!a->id || !a->path)
		return oom(c);

	json_t *srcs = json_object_get(av, "sources");
	int derived = json_object_get(av, "transcode") != NULL;
	derived += json_object_get(av, "remux") != NULL;
	if (derived + (srcs != NULL) > 1) {
		snprintf(field, sizeof(field), "%s.%s", at, srcs ? "sources" : "remux");
		return fail(c, field, "an asset has one of \"sources\", \"transcode\" or \"remux\"");
	}
	if (derived && a->copies >= 0) {
		snprintf(field, sizeof(field), "%s.copies", at);
		return fail(c, field, "a transcode or remux has no copies (only assets with "
			    "\"sources\")");
	}
	if (derived)
		return parse_derived(c, at, av, a);
	return parse_sources(c, at, srcs, a);
}

/* Ids and paths unique; no path is a directory of another; derived assets
 * name an existing plain asset. */
static enum px_status check_assets(struct ctx *c)
{
	struct px_catalog *cat = c->cat;
	struct px_strmap *ids = px_strmap_new(cat->nassets);
	struct px_strmap *paths = px_strmap_new(cat->nassets);
	enum px_status st = PX_OK;
	char field[512];
	size_t old;

	if (!ids || !paths) {
		st = oom(c);
		goto out;
	}
	for (size_t i = 0; i < cat->nassets; i++) {
		const struct px_asset *a = &cat->assets[i];
		enum px_status r = px_strmap_put(ids, a->id, i, &old);
		if (r == PX_EINVAL) {
			snprintf(field, sizeof(field), "assets[%zu].id", i);
			st = fail(c, field, "duplicate id \"%s\" (also assets[%zu])", a->id, old);
			goto out;
		}
		if (r == PX_OK)
			r = px_strmap_put(paths, a->path, i, &old);
		if (r == PX_EINVAL) {
			snprintf(field, sizeof(field), "assets[%zu].path", i);
			st = fail(c, field, "duplicate path \"%s\" (also assets[%zu])", a->path, old);
			goto out;
		}
		if (r != PX_OK) {
			st = oom(c);
			goto out;
		}
	}
	for (size_t i = 0; i < cat->nassets; i++) {
		const struct px_asset *a = &cat->assets[i];
		char *p = strdup(a->path);
		if (!p) {
			st = oom(c);
			goto out;
		}
		for (char *slash = strchr(p, '/'); slash; slash = strchr(slash + 1, '/')) {
			*slash = '\0';
			int clash = px_strmap_get(paths, p, &old);
			*slash = '/';
			if (clash) {
				/* name the later of the two entries */
				*slash = '\0';
				if (i > old) {
					snprintf(field, sizeof(field), "assets[%zu].path", i);
					st = fail(c, field, "\"%s\" needs a directory \"%s\" where assets[%zu] is a file",
						  a->path, p, old);
				} else {
					snprintf(field, sizeof(field), "assets[%zu].path", old);
					st = fail(c, field, "\"%s\" is a file where assets[%zu] needs a directory",
						  p, i);
				}
				free(p);
				goto out;
			}
		}
		free(p);
		if (a->kind != PX_ASSET_PLAIN) {
			const char *key = a->kind == PX_ASSET_TRANSCODE ? "transcode" : "remux";
			snprintf(field, sizeof(field), "assets[%zu].%s.of", i, key);
			if (!px_strmap_get(ids, a->of, &old))
				st = fail(c, field, "no asset has id \"%s\"", a->of);
			else if (cat->assets[old].kind != PX_ASSET_PLAIN)
				st = fail(c, field, "\"%s\" is itself derived; name an asset with sources",
					  a->of);
			if (st)
				goto out;
		}
	}
out:
	px_strmap_free(ids);
	px_strmap_free(paths);
	return st;
}

/* "storages": where copies go. Names unique; paths absolute, distinct. */
static enum px_status parse_storages(struct ctx *c, json_t *arr)
{
	static const char *const keys[] = { "name", "path", "host", "min_free_bytes",
					    "copying", NULL };
	struct px_catalog *cat = c->cat;
	char at[64], field[128];
	size_t i;
	json_t *sv;
	enum px_status st;

	if (!json_is_array(arr))
		return fail(c, "storages", "must be an array, not %s", type_name(arr));
	cat->storages = calloc(json_array_size(arr) + 1, sizeof(*cat->storages));
	if (!cat->storages)
		return oom(c);
	json_array_foreach(arr, i, sv) {
		const char *name, *path, *host;
		int64_t min_free;
		snprintf(at, sizeof(at), "storages[%zu]", i);
		if (!json_is_object(sv))
			return fail(c, at, "must be an object, not %s", type_name(sv));
		if ((st = check_keys(c, at, sv, keys, "a storage")) ||
		    (st = get_string(c, at, sv, "name", 1, &name)) ||
		    (st = get_string(c, at, sv, "path", 1, &path)) ||
		    (st = get_string(c, at, sv, "host", 0, &host)) ||
		    (st = get_count(c, at, sv, "min_free_bytes", 0, PX_CATALOG_MAX_SIZE, &min_free)))
			return st;
		for (const unsigned char *q = (const unsigned char *)name; *q; q++) {
			if (*q < 0x20 || *q == 0x7f || *q == '/') {
				snprintf(field, sizeof(field), "%s.name", at);
				return fail(c, field, "must not contain '/' or control characters");
			}
		}
		const char *why = px_catalog_bad_local(path);
		if (why) {
			snprintf(field, sizeof(field), "%s.path", at);
			return fail(c, field, "\"%s\" %s", path, why);
		}
		json_t *role = json_object_get(sv, "copying");
		if (role && !json_is_boolean(role)) {
			snprintf(field, sizeof(field), "%s.copying", at);
			return fail(c, field, "must be true or false, not %s", type_name(role));
		}
		for (size_t k = 0; k < cat->nstorages; k++) {
			const char *dup = strcmp(cat->storages[k].name, name) == 0 ? "name"
					  : strcmp(cat->storages[k].path, path) == 0 ? "path" : NULL;
			if (dup) {
				snprintf(field, sizeof(field), "%s.%s", at, dup);
				return fail(c, field, "duplicate storage %s \"%s\" (also storages[%zu])",
					    dup, dup[0] == 'n' ? name : path, k);
			}
		}
		struct px_storage *s = &cat->storages[cat->nstorages++];
		s->name = strdup(name);
		s->path = strdup(path);
		s->host = dup_or_null(host);
		s->min_free_bytes = min_free < 0 ? PX_STORAGE_MIN_FREE_DEFAULT : min_free;
		s->copying = role ? json_is_true(role) : 1;
		if (!s->name || !s->path || (host && !s->host))
			return oom(c);
	}
	return PX_OK;
}

static enum px_status parse_settings(struct ctx *c, json_t *obj)
{
	struct px_catalog *cat = c->cat;
	const char *key;
	json_t *v;
	char field[512];

	if (!json_is_object(obj))
		return fail(c, "settings", "must be an object, not %s", type_name(obj));
	size_t n = json_object_size(obj);
	cat->setting_names = calloc(n + 1, sizeof(char *));
	cat->setting_values = calloc(n + 1, sizeof(char *));
	if (!cat->setting_names || !cat->setting_values)
		return oom(c);
	json_object_foreach(obj, key, v) {
		char buf[64];
		const char *val = NULL;
		snprintf(field, sizeof(field), "settings.%s", key);
		if (json_is_string(v)) {
			if (strlen(json_string_value(v)) != json_string_length(v))
				return fail(c, field, "contains a NUL character");
			val = json_string_value(v);
		} else if (json_is_integer(v)) {
			snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
			val = buf;
		} else if (json_is_real(v)) {
			snprintf(buf, sizeof(buf), "%.17g", json_real_value(v));
			val = buf;
		} else if (json_is_boolean(v)) {
			val = json_is_true(v) ? "true" : "false";
		} else {
			return fail(c, field, "must be a string, number or boolean, not %s",
				    type_name(v));
		}
		/* validated now, against a scratch config, so that a bad value is
		 * reported with its place in the file */
		char why[256];
		struct px_config scratch;
		px_config_init(&scratch);
		enum px_status st = px_config_set(&scratch, key,
						  json_is_true(v) ? NULL : val, why, sizeof(why));
		px_config_release(&scratch);
		if (st == PX_EINVAL && !px_config_known(key))
			return fail(c, field, "unknown setting \"%s\"", key);
		if (st == PX_EINVAL)
			return fail(c, field, "%s", why);
		if (st == PX_ENOMEM)
			return oom(c);
		cat->setting_names[cat->nsettings] = strdup(key);
		cat->setting_values[cat->nsettings] = json_is_true(v) ? NULL : strdup(val);
		if (!cat->setting_names[cat->nsettings] ||
		    (!json_is_true(v) && !cat->setting_values[cat->nsettings]))
			return oom(c);
		cat->nsettings++;
	}
	return PX_OK;
}

/* ---- a catalog's assets, one at a time
 *
 * jansson builds a tree of the whole document, about 1 KB for each asset
 * of a library: a catalog of 100 000 files held that beside its own text
 * and the catalog being built from it (a peak of 200-300 MiB). So the
 * document is parsed with its "assets" array blanked out (the same bytes,
 * spaces inside the brackets: every position stays), and each element of
 * the array is parsed on its own, used and freed. Anything unusual (no
 * such array, an escaped key, an element that does not parse) falls back
 * to the whole-document parse, whose messages are then the same as ever.
 */

/* Moves *p past the string that starts there; -1 when it never ends. */
static int skip_string(const char *t, size_t len, size_t *p)
{
	for ((*p)++; *p < len; (*p)++) {
		if (t[*p] == '\\')
			(*p)++;
		else if (t[*p] == '"')
			return (*p)++, 0;
	}
	return -1;
}

static void skip_space(const char *t, size_t len, size_t *p)
{
	while (*p < len && (t[*p] == ' ' || t[*p] == '\t' || t[*p] == '\r' || t[*p] == '\n'))
		(*p)++;
}

/* Moves *p past the value that starts there (not checked: jansson does). */
static int skip_value(const char *t, size_t len, size_t *p)
{
	if (*p >= len)
		return -1;
	if (t[*p] == '"')
		return skip_string(t, len, p);
	if (t[*p] != '{' && t[*p] != '[') {
		while (*p < len && !strchr(",}] \t\r\n", t[*p]) && t[*p])
			(*p)++;
		return 0;
	}
	int depth = 0;
	while (*p < len) {
		char ch = t[*p];
		if (ch == '"') {
			if (skip_string(t, len, p))
				return -1;
			continue;
		}
		if (ch == '{' || ch == '[')
			depth++;
		else if ((ch == '}' || ch == ']') && --depth == 0)
			return (*p)++, 0;
		(*p)++;
	}
	return -1;
}

/* Where the top-level member "assets" holds an array: [*a0, *a1) spans it,
 * brackets included. 0 when there is none to stream (then the document is
 * parsed whole). */
static int find_assets(const char *t, size_t len, size_t *a0, size_t *a1)
{
	size_t p = 0;
	int found = 0;
	skip_space(t, len, &p);
	if (p >= len || t[p++] != '{')
		return 0;
	for (;;) {
		skip_space(t, len, &p);
		if (p < len && t[p] == '}')
			return found;
		size_t k0 = p;
		if (p >= len || t[p] != '"' || skip_string(t, len, &p))
			return 0;
		size_t k1 = p;
		skip_space(t, len, &p);
		if (p >= len || t[p++] != ':')
			return 0;
		skip_space(t, len, &p);
		size_t v0 = p;
		if (skip_value(t, len, &p))
			return 0;
		if (k1 - k0 == 8 && memcmp(t + k0, "\"assets\"", 8) == 0 && t[v0] == '[') {
			if (found)
				return 0; /* twice: the whole parse says so */
			found = 1;
			*a0 = v0;
			*a1 = p;
		}
		skip_space(t, len, &p);
		if (p < len && t[p] == ',')
			p++;
		else
			return p < len && t[p] == '}' ? found : 0;
	}
}

/* The elements of the array at [a0, a1): their count, and (when spans is
 * not NULL) where each starts and ends. -1 when it is not a plain list. */
static long array_elements(const char *t, size_t a0, size_t a1, size_t *spans)
{
	size_t p = a0 + 1;
	long n = 0;
	skip_space(t, a1, &p);
	if (p < a1 && t[p] == ']')
		return 0;
	for (;;) {
		size_t v0 = p;
		if (skip_value(t, a1, &p))
			return -1;
		if (spans) {
			spans[2 * n] = v0;
			spans[2 * n + 1] = p;
		}
		n++;
		skip_space(t, a1, &p);
		if (p < a1 && t[p] == ',') {
			p++;
			skip_space(t, a1, &p);
			continue;
		}
		return p < a1 && t[p] == ']' ? n : -1;
	}
}

/* The catalog text with the "assets" array's inside blanked, parsed: the
 * rest of the document, small even when the assets are many; *nel and
 * *spans (start, end of each element, the caller frees) say where the
 * assets are. NULL when the text does not lend itself to that. */
static json_t *load_skeleton(const char *text, size_t len, long *nel, size_t **spans)
{
	size_t a0 = 0, a1 = 0;
	char *skel = NULL;
	json_error_t jerr;
	if (!find_assets(text, len, &a0, &a1) || (*nel = array_elements(text, a0, a1, NULL)) < 0 ||
	    !(*spans = malloc(2 * ((size_t)*nel + 1) * sizeof(**spans))) ||
	    array_elements(text, a0, a1, *spans) != *nel || !(skel = malloc(len)))
		return NULL;
	memcpy(skel, text, len);
	memset(skel + a0 + 1, ' ', a1 - a0 - 2);
	json_t *root = json_loadb(skel, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	free(skel);
	return root;
}

/* The assets: of the parsed array, or with spans (load_skeleton) nel
 * elements parsed one at a time from the text. */
static enum px_status parse_assets(struct ctx *c, json_t *assets, const size_t *spans,
				   long nel)
{
	const int flags = JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY;
	json_error_t jerr;
	size_t count = spans ? (size_t)nel : json_array_size(assets);
	c->cat->assets = calloc(count + 1, sizeof(*c->cat->assets));
	if (!c->cat->assets)
		return oom(c);
	for (size_t i = 0; i < count; i++) {
		json_t *av = spans ? json_loadb(c->text + spans[2 * i],
						spans[2 * i + 1] - spans[2 * i], flags, &jerr)
				   : json_incref(json_array_get(assets, i));
		if (!av)
			return PX_EDECLINED; /* the whole parse says where and why */
		c->cat->nassets++;
		enum px_status st = parse_asset(c, i, av);
		json_decref(av);
		if (st)
			return st;
	}
	return PX_OK;
}

/* px_catalog_parse(); stream: the assets one at a time, PX_EDECLINED when
 * the document does not lend itself to that (nothing said, nothing kept). */
static enum px_status parse_text(const char *file, const char *text, size_t len, int stream,
				 struct px_catalog **out, char *err, size_t errlen)
{
	static const char *const keys[] = { "providers", "assets", "settings", "storages", NULL };
	const int flags = JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL;
	size_t *spans = NULL;
	long nel = -1;
	struct ctx c = { .file = file, .text = text, .len = len, .err = err, .errlen = errlen };
	json_error_t jerr;
	json_t *root = NULL;
	enum px_status st;

	*out = NULL;
	c.cat = calloc(1, sizeof(*c.cat));
	c.ps.cat = c.cat;
	c.ps.names = px_strmap_new(16);
	if (!c.cat || !c.ps.names || !(c.cat->file = strdup(file))) {
		st = oom(&c);
		goto out;
	}
	size_t blank = 0;
	while (blank < len && strchr(" \t\r\n", text[blank]) && text[blank])
		blank++;
	if (blank == len) {
		snprintf(err, errlen, "%s:1:1: (syntax): the catalog is empty (expected a JSON object)",
			 file);
		st = PX_EINVAL;
		goto out;
	}
	if (stream) {
		st = PX_EDECLINED;
		if (!(root = load_skeleton(text, len, &nel, &spans)))
			goto out;
	} else {
		root = json_loadb(text, len, flags, &jerr);
	}
	if (!root) {
		snprintf(err, errlen, "%s:%d:%d: (syntax): %s", file, jerr.line,
			 jerr.column < 1 ? 1 : jerr.column, jerr.text);
		st = PX_EINVAL;
		goto out;
	}
	if (!json_is_object(root)) {
		st = fail(&c, "", "the catalog must be a JSON object, not %s", type_name(root));
		goto out;
	}
	if ((st = check_keys(&c, "", root, keys, "the catalog")))
		goto out;
	json_t *provs = json_object_get(root, "providers");
	if (provs && (st = parse_providers(&c, provs)))
		goto out;
	json_t *assets = json_object_get(root, "assets");
	if (!assets) {
		st = fail(&c, "assets", "missing required field \"assets\"");
		goto out;
	}
	if (!json_is_array(assets)) {
		st = fail(&c, "assets", "must be an array, not %s", type_name(assets));
		goto out;
	}
	if ((st = parse_assets(&c, assets, spans, nel)) || (st = check_assets(&c)))
		goto out;
	json_t *settings = json_object_get(root, "settings");
	if (settings && (st = parse_settings(&c, settings)))
		goto out;
	json_t *storages = json_object_get(root, "storages");
	if (storages && (st = parse_storages(&c, storages)))
		goto out;
	*out = c.cat;
	c.cat = NULL;
out:
	json_decref(root);
	free(spans);
	px_strmap_free(c.ps.names);
	px_catalog_free(c.cat);
	return st;
}

enum px_status px_catalog_parse(const char *file, const char *text, size_t len,
				struct px_catalog **out, char *err, size_t errlen)
{
	enum px_status st = parse_text(file, text, len, 1, out, err, errlen);
	if (st == PX_EDECLINED)
		st = parse_text(file, text, len, 0, out, err, errlen);
	return st;
}

enum px_status px_catalog_load(const char *file, struct px_catalog **out,
			       char *err, size_t errlen)
{
	enum px_status st = PX_EIO;
	char *buf = NULL;
	struct stat sb;
	/* O_NONBLOCK: a FIFO put in the catalog's place must not hold the
	 * open until a writer comes; what is not a regular file is refused */
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);

	*out = NULL;
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot open the catalog: %s", file, strerror(errno));
		return PX_EIO;
	}
	if (fstat(fd, &sb)) {
		snprintf(err, errlen, "%s: cannot stat the catalog: %s", file, strerror(errno));
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "%s: the catalog is %s, not a regular file", file,
			 S_ISFIFO(sb.st_mode) ? "a FIFO" : S_ISDIR(sb.st_mode) ? "a directory"
			 : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device"
			 : S_ISSOCK(sb.st_mode) ? "a socket" : "something else");
		goto out;
	}
	if (sb.st_size > CATALOG_MAX_BYTES) {
		snprintf(err, errlen, "%s: the catalog is larger than %ld MiB",
			 file, CATALOG_MAX_BYTES >> 20);
		goto out;
	}
	buf = malloc((size_t)sb.st_size + 1);
	if (!buf) {
		snprintf(err, errlen, "%s: out of memory", file);
		st = PX_ENOMEM;
		goto out;
	}
	size_t got = 0;
	while (got < (size_t)sb.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)sb.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(err, errlen, "%s: cannot read the catalog: %s", file,
				 n < 0 ? strerror(errno) : "file shrank while reading");
			goto out;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	st = px_catalog_parse(file, buf, got, out, err, errlen);
out:
	free(buf);
	close(fd);
	return st;
}

void px_catalog_free(struct px_catalog *cat)
{
	if (!cat)
		return;
	for (size_t i = 0; i < cat->nproviders; i++) {
		free(cat->providers[i].name);
		for (size_t k = 0; k < cat->providers[i].nheaders; k++)
			free(cat->providers[i].headers[k]);
		free(cat->providers[i].headers);
		for (size_t k = 0; k < cat->providers[i].nheader_hosts; k++)
			free(cat->providers[i].header_hosts[k]);
		free(cat->providers[i].header_hosts);
	}
	free(cat->providers);
	for (size_t i = 0; i < cat->nassets; i++) {
		struct px_asset *a = &cat->assets[i];
		free(a->id);
		free(a->path);
		free(a->of);
		free(a->sha256);
		for (size_t k = 0; k < a->nsources; k++) {
			const struct px_source *src = &a->sources[k];
			const char *name = src->url ? src->url : src->path;
			if (src->shown != name)
				free(src->shown);
			if (src->key != name)
				free(src->key);
			free(src->url);
			free(src->path);
		}
		free(a->sources);
	}
	free(cat->assets);
	for (size_t i = 0; i < cat->nstorages; i++) {
		free(cat->storages[i].name);
		free(cat->storages[i].path);
		free(cat->storages[i].host);
	}
	free(cat->storages);
	for (size_t i = 0; i < cat->nsettings; i++) {
		free(cat->setting_names[i]);
		free(cat->setting_values[i]);
	}
	free(cat->setting_names);
	free(cat->setting_values);
	free(cat->file);
	free(cat);
}

long px_catalog_find(const struct px_catalog *cat, const char *id)
{
	for (size_t i = 0; i < cat->nassets; i++)
		if (strcmp(cat->assets[i].id, id) == 0)
			return (long)i;
	return -1;
}
