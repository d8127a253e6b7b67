/*
 * redact.h - sources as seamfs shows and keeps them, without their
 * secrets; and where a provider's headers may go.
 *
 * A source URL may carry credentials: userinfo (http://user:pass@host/)
 * and tokens in its query (?token=..., ?api_key=...). Whatever leaves the
 * process (log lines, status.json, ctl output, control API answers,
 * metrics, files in the state and work directories) shows the URL through
 * px_redact_url; what needs a stable name on disk uses px_redact_key.
 * Catalog loaders compute both once per source (px_source.shown, .key).
 *
 * All functions are pure: any thread, any bytes.
 */
#ifndef SEAMFS_REDACT_H
#define SEAMFS_REDACT_H

#include <stddef.h>

#define PX_REDACT_MASK "***"

/*
 * Writes url with its secrets replaced into out: scheme, host, port and
 * path as they are; userinfo replaced by "***" (the authority reads "***@host:8080"), so
 * a reader sees that credentials are there; each query parameter's value
 * replaced by "***" ("?token=***&x=***"; a parameter without '=' is all
 * "***": it may be a bare token); the fragment dropped. A string that does
 * not start with "scheme://" (a local path) is copied unchanged. Paths of
 * URLs are kept: a secret in the path itself (a signed path segment) is not
 * recognised. out (cap bytes) is always NUL-terminated when cap > 0 and cut
 * when short. Returns the length of the whole result (as snprintf does):
 * out was cut when it is >= cap.
 */
size_t px_redact_url(const char *url, char *out, size_t cap);

/* px_redact_url into a new string (the caller frees it); NULL without
 * memory. */
char *px_redact_url_dup(const char *url);

/*
 * The name a source is kept under on disk (fingerprint store, transcode
 * plans): the URL itself when it has no userinfo, query or fragment; else
 * px_redact_url's form, "#h=" and 8 hex digits of the SHA-256 of the whole
 * URL ("https://host/a.mkv?token=***#h=1a2b3c4d"), so that two URLs that
 * differ only in a token stay apart while no secret is written. A path:
 * itself. A new string (the caller frees it); NULL without memory.
 */
char *px_redact_key(const char *url);

/*
 * The origin of an http(s) URL, "scheme://host:port": scheme and host
 * lowercase, the port always written (80 or 443 when the URL gives none),
 * userinfo left out. Returns 0, or -1 when url is not an http(s) URL with
 * a host, or out (cap bytes) is too small.
 */
int px_redact_origin(const char *url, char *out, size_t cap);

/*
 * Whether a provider's headers may go with the request to `to`, the target
 * of a redirect in a chain that began at `first`. hosts lists where they
 * may go besides first's own origin: origins ("https://cdn.example:443",
 * as px_redact_origin writes them: the provider's URLs) and trusted hosts
 * ("cdn.example" on any port, or "cdn.example:8443"; the provider's
 * trust_redirects). *downgraded (0 at the start of the chain) is set once
 * a hop goes from https to http (from → to) and stays set: after a
 * downgrade headers never go, wherever the chain leads. A target that is
 * not an http(s) URL gets none.
 */
int px_redact_headers_ok(const char *first, const char *from, const char *to,
			 const char *const *hosts, size_t nhosts, int *downgraded);

/*
 * Checks a trust_redirects entry: a host name, IPv4 address or bracketed
 * IPv6 address, with an optional ":port" (1-65535); no scheme, userinfo,
 * path or space. Writes it lowercase into out. Returns NULL, or a static
 * message saying what is wrong.
 */
const char *px_redact_bad_host(const char *entry, char *out, size_t cap);

#endif
