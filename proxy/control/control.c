/*
 * control.c - the control API server (see control.h, docs/control.md).
 *
 * libmicrohttpd answers on a Unix socket we make ourselves (mode 0600, so
 * only the mount's owner and root can talk to it) and hand over with
 * MHD_OPTION_LISTEN_SOCKET; its one internal thread serves every
 * connection, so handlers never run concurrently with each other, only
 * with the core's threads, through the core's thread-safe calls.
 *
 * A request goes through three pure steps: the route (method and path,
 * matched against a table whose "*" segments are parameters, decoded
 * after splitting so that %2F stays inside a name; libmicrohttpd's own
 * unescaping is turned off for that), the body (bounded by
 * PX_CTL_BODY_MAX; checked against what the route takes), then the
 * handler. Every failure is a JSON body {"error", "field"} with a 4xx or
 * 5xx status, and the server goes on. New routes (sources, reload) are a
 * table entry, a body check and a handler.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cluster.h"
#include "context.h"
#include "control.h"
#include "kvstore.h"
#include "metrics.h"
#include "provider.h"
#include "reload.h"
#include "report.h"
#include "sources.h"
#include "jsontext.h"
#include "copies.h"
#include "log.h"
#include "redact.h"
#include "utf8.h"

/* How replies other than errors are laid out. */
#define REPLY_JSON (JSON_INDENT(2) | JSON_SORT_KEYS)

/* ---- parsing (pure) */

static const struct route {
	const char *method;
	const char *path;          /* '/'-separated; a "*" segment is the NAME */
	enum px_ctl_route id;
} routes[] = {
	{ "GET", "/v1/status", PX_CTL_STATUS },
	{ "GET", "/v1/metrics", PX_CTL_METRICS },
	{ "POST", "/v1/providers/*/drain", PX_CTL_DRAIN },
	{ "POST", "/v1/providers/*/resume", PX_CTL_RESUME },
	{ "POST", "/v1/assets/*/sources", PX_CTL_ADD_SOURCE },
	{ "POST", "/v1/assets/*/sources/remove", PX_CTL_REMOVE_SOURCE },
	{ "POST", "/v1/reload", PX_CTL_RELOAD },
	{ "POST", "/v1/restart", PX_CTL_RESTART },
	{ "GET", "/v1/hosts", PX_CTL_HOSTS },
	{ "GET", "/v1/copies", PX_CTL_COPIES },
	{ "POST", "/v1/storages/*/disable", PX_CTL_STORAGE_DISABLE },
	{ "POST", "/v1/storages/*/enable", PX_CTL_STORAGE_ENABLE },
	{ "POST", "/v1/storages/*/drain", PX_CTL_STORAGE_DRAIN },
};

#define NROUTES (sizeof(routes) / sizeof(routes[0]))

static void set_err(struct px_ctl_error *err, int http, const char *field, const char *fmt, ...)
	PX_PRINTF(4, 5);

static void set_err(struct px_ctl_error *err, int http, const char *field, const char *fmt, ...)
{
	va_list ap;
	err->http = http;
	snprintf(err->field, sizeof(err->field), "%s", field);
	va_start(ap, fmt);
	vsnprintf(err->error, sizeof(err->error), fmt, ap);
	va_end(ap);
	/* both may quote what the client sent, or be cut inside a character */
	px_utf8_scrub(err->field);
	px_utf8_scrub(err->error);
}

long px_ctl_percent_decode(const char *in, size_t len, char *out, size_t outlen)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		if (c == '%') {
			int hi = i + 2 < len ? px_hex_digit((unsigned char)in[i + 1]) : -1;
			int lo = hi >= 0 ? px_hex_digit((unsigned char)in[i + 2]) : -1;
			if (hi < 0 || lo < 0)
				return -1;
			c = (unsigned char)(hi * 16 + lo);
			i += 2;
		}
		if (c < 0x20 || c == 0x7f || o + 1 >= outlen)
			return -1;
		out[o++] = (char)c;
	}
	if (o >= outlen)
		return -1;
	out[o] = '\0';
	return (long)o;
}

/* Whether path[0..len) matches pattern; *param, *plen: its "*" segment. */
static int path_matches(const char *pattern, const char *path, size_t len, const char **param,
			size_t *plen)
{
	const char *p = pattern, *s = path, *end = path + len;
	*param = NULL;
	*plen = 0;
	while (*p && s < end) {
		if (*p != '/' || *s != '/')
			return 0;
		p++;
		s++;
		const char *pe = strchr(p, '/');
		size_t pn = pe ? (size_t)(pe - p) : strlen(p);
		const char *se = memchr(s, '/', (size_t)(end - s));
		size_t sn = se ? (size_t)(se - s) : (size_t)(end - s);
		if (pn == 1 && p[0] == '*') {
			if (sn == 0)
				return 0;
			*param = s;
			*plen = sn;
		} else if (pn != sn || memcmp(p, s, sn) != 0) {
			return 0;
		}
		p += pn;
		s += sn;
	}
	return *p == '\0' && s == end;
}

int px_ctl_match(const char *method, const char *url, struct px_ctl_request *req,
		 struct px_ctl_error *err)
{
	size_t len = strcspn(url, "?");
	char allow[32] = "";
	const struct route *hit = NULL;
	const char *param = NULL;
	size_t plen = 0;

	memset(req, 0, sizeof(*req));
	memset(err, 0, sizeof(err[0]));
	for (size_t i = 0; i < NROUTES; i++) {
		const char *pp;
		size_t pl;
		if (!path_matches(routes[i].path, url, len, &pp, &pl))
			continue;
		if (strcmp(routes[i].method, method) == 0) {
			hit = &routes[i];
			param = pp;
			plen = pl;
			break;
		}
		if (!strstr(allow, routes[i].method)) {
			size_t n = strlen(allow);
			snprintf(allow + n, sizeof(allow) - n, "%s%s", n ? ", " : "",
				 routes[i].method);
		}
	}
	if (!hit && allow[0]) {
		set_err(err, 405, "method", "%s is not allowed here (allowed: %s)", method, allow);
		snprintf(err->allow, sizeof(err->allow), "%s", allow);
		return -1;
	}
	if (!hit) {
		set_err(err, 404, "path", "no such path (routes: GET /v1/status, GET /v1/metrics, "
			"GET /v1/hosts, "
			"POST /v1/providers/NAME/drain, POST /v1/providers/NAME/resume, "
			"POST /v1/assets/ID/sources, POST /v1/assets/ID/sources/remove, "
			"POST /v1/reload, POST /v1/restart, GET /v1/copies, "
			"POST /v1/storages/NAME/disable|enable|drain)");
		return -1;
	}
	req->route = hit->id;
	if (param && px_ctl_percent_decode(param, plen, req->name, sizeof(req->name)) < 0) {
		set_err(err, 400, "name", "malformed name in the path (bad %%-escape, "
			"a control character, or longer than %d bytes)", PX_CTL_PARAM_MAX - 1);
		return -1;
	}
	/* names come from the catalog, which is JSON: anything else names nothing */
	if (param && !px_utf8_valid(req->name)) {
		set_err(err, 400, "name", "the name in the path is not valid UTF-8");
		return -1;
	}
	return 0;
}

/* Names a body key in err->field, only as much of it as is printable; the
 * empty key as "" so that the field is never blank. */
static void key_field(char *field, size_t cap, const char *key)
{
	size_t k = 0;
	if (!key[0]) {
		snprintf(field, cap, "\"\"");
		return;
	}
	for (const char *c = key; *c && k + 1 < cap; c++)
		field[k++] = (unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c;
	field[k] = '\0';
}

/* The body of adding or removing a source: one of "url" and "path", and
 * (adding) an optional "provider", all strings. */
static int source_body(struct px_ctl_request *req, json_t *root, struct px_ctl_error *err)
{
	const char *key;
	json_t *v;
	int add = req->route == PX_CTL_ADD_SOURCE;

	json_object_foreach(root, key, v) {
		char field[64];
		key_field(field, sizeof(field), key);
		int known = !strcmp(key, "url") || !strcmp(key, "path") ||
			    (add && !strcmp(key, "provider"));
		if (!known) {
			set_err(err, 400, field, "unknown field (%s)",
				add ? "a source takes \"url\" or \"path\", and \"provider\""
				    : "removing a source takes \"url\" or \"path\"");
			return -1;
		}
		if (!json_is_string(v) || json_string_length(v) == 0 ||
		    strlen(json_string_value(v)) != json_string_length(v)) {
			set_err(err, 400, field, "\"%s\" must be a non-empty string", field);
			return -1;
		}
		char *dst = !strcmp(key, "provider") ? req->provider : req->where;
		size_t cap = !strcmp(key, "provider") ? sizeof(req->provider) : sizeof(req->where);
		if (json_string_length(v) >= cap) {
			set_err(err, 400, field, "\"%s\" is longer than %zu bytes", field, cap - 1);
			return -1;
		}
		if (dst == req->where && req->where[0]) {
			set_err(err, 400, field, "give one of \"url\" and \"path\", not both");
			return -1;
		}
		memcpy(dst, json_string_value(v), json_string_length(v) + 1);
	}
	if (!req->where[0]) {
		set_err(err, 400, "url", "missing \"url\" (or \"path\")");
		return -1;
	}
	return 0;
}

int px_ctl_check_body(struct px_ctl_request *req, const char *body, size_t len,
		      struct px_ctl_error *err)
{
	json_error_t jerr;
	json_t *root = NULL;
	const char *key;
	json_t *v;
	size_t i = 0;
	int rc = -1;

	memset(err, 0, sizeof(err[0]));
	while (i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\r' || body[i] == '\n'))
		i++;
	if (i == len) {
		if (req->route == PX_CTL_ADD_SOURCE || req->route == PX_CTL_REMOVE_SOURCE) {
			set_err(err, 400, "body", "this request takes a JSON object with \"url\" "
				"or \"path\"");
			return -1;
		}
		return 0; /* no body: the other routes take that */
	}
	if (req->route == PX_CTL_STATUS || req->route == PX_CTL_METRICS ||
	    req->route == PX_CTL_RELOAD || req->route == PX_CTL_HOSTS ||
	    req->route == PX_CTL_COPIES || req->route == PX_CTL_RESTART) {
		set_err(err, 400, "body", "this request takes no body");
		return -1;
	}
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		set_err(err, 400, "body", "malformed JSON at line %d, column %d: %s", jerr.line,
			jerr.column, jerr.text);
		goto out;
	}
	if (!json_is_object(root)) {
		set_err(err, 400, "body", "the body must be a JSON object");
		goto out;
	}
	if (req->route == PX_CTL_ADD_SOURCE || req->route == PX_CTL_REMOVE_SOURCE) {
		rc = source_body(req, root, err);
		goto out;
	}
	json_object_foreach(root, key, v) {
		if (strcmp(key, "reason") != 0) {
			char field[64];
			key_field(field, sizeof(field), key);
			set_err(err, 400, field, "unknown field (drain and resume take \"reason\")");
			goto out;
		}
		if (!json_is_string(v)) {
			set_err(err, 400, "reason", "\"reason\" must be a string");
			goto out;
		}
		snprintf(req->reason, sizeof(req->reason), "%s", json_string_value(v));
	}
	rc = 0;
out:
	json_decref(root);
	return rc;
}

char *px_ctl_error_json(const struct px_ctl_error *err)
{
	return px_json_text(json_pack("{s:s, s:s}", "error", err->error, "field", err->field),
			    JSON_SORT_KEYS);
}

/* ---- the server */

struct px_control {
	struct px_core *core;
	struct MHD_Daemon *mhd;
	char *path;
	dev_t dev;                 /* the socket file we made, to remove only it */
	ino_t ino;
};

/* One request in progress (MHD's con_cls). */
struct conn {
	struct px_ctl_request req;
	struct px_ctl_error err;
	int failed;                /* err is the answer */
	int answered;              /* refused before its body: read no more */
	char *body;
	size_t len;
	long keeper;               /* a restart: signalled once the answer is out */
};

static const char oom_json[] = "{\"error\": \"out of memory\", \"field\": \"\"}\n";

static enum MHD_Result respond(struct MHD_Connection *c, unsigned int status, char *text,
			       const char *ctype, const char *allow)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	if (!text) {
		status = MHD_HTTP_INTERNAL_SERVER_ERROR;
		ctype = "application/json";
		allow = NULL;
		r = MHD_create_response_from_buffer(sizeof(oom_json) - 1, (void *)oom_json,
						    MHD_RESPMEM_PERSISTENT);
	} else {
		r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
		if (!r)
			free(text);
	}
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	if (allow)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result respond_err(struct MHD_Connection *c, const struct px_ctl_error *err)
{
	return respond(c, (unsigned int)err->http, px_ctl_error_json(err), "application/json",
		       err->http == 405 && err->allow[0] ? err->allow : NULL);
}

/* POST drain or resume of a provider: here, and through the store on every host. */
static enum MHD_Result on_drain(struct px_control *ctl, struct MHD_Connection *c, struct conn *r)
{
	struct px_ctl_error err = { 0 };
	int drain = r->req.route == PX_CTL_DRAIN;
	enum px_status st = px_provider_drain(ctl->core, r->req.name, drain);
	px_debug("control", "%s of provider %s requested%s%s: %s", drain ? "drain" : "resume",
		 r->req.name, r->req.reason[0] ? "; reason: " : "", r->req.reason,
		 px_strerror(st));
	if (st == PX_ENOTFOUND) {
		set_err(&err, 404, "name", "no provider named \"%.200s\"", r->req.name);
		return respond_err(c, &err);
	}
	if (st != PX_OK) {
		set_err(&err, 500, "", "%s", px_strerror(st));
		return respond_err(c, &err);
	}
	int cluster = 0;
	if (px_cluster_store(ctl->core)) {
		/* cluster mode: every host applies it at its next heartbeat */
		char key[256];
		const char *argv[] = { "HSET", key, r->req.name, drain ? "1" : "0" };
		if (px_store_key(px_cluster_store(ctl->core), key, sizeof(key), "drains") >= 0 &&
		    px_store_call(px_cluster_store(ctl->core), 4, argv, NULL, NULL) == PX_OK)
			cluster = 1;
		else
			px_warn("control", "%s of provider %s applies to this host only: the "
				"store %s does not answer", drain ? "drain" : "resume",
				r->req.name, px_store_url(px_cluster_store(ctl->core)));
	}
	return respond(c, MHD_HTTP_OK,
		       px_json_text(json_pack("{s:s, s:b, s:b}", "provider", r->req.name,
					   "drained", drain, "cluster", cluster),
				    REPLY_JSON),
		       "application/json", NULL);
}

/* POST or DELETE of an asset's source. */
static enum MHD_Result on_source(struct px_control *ctl, struct MHD_Connection *c, struct conn *r)
{
	struct px_ctl_error err = { 0 };
	int add = r->req.route == PX_CTL_ADD_SOURCE;
	char msg[600];
	enum px_status st = add ? px_sources_add(ctl->core, r->req.name, r->req.where,
						    r->req.provider[0] ? r->req.provider
								       : NULL,
						    msg, sizeof(msg))
			       : px_sources_remove(ctl->core, r->req.name,
						       r->req.where, msg, sizeof(msg));
	if (st != PX_OK) {
		/* the core's message is "FIELD: what is wrong" */
		const char *colon = strstr(msg, ": ");
		char field[64] = "";
		if (colon && (size_t)(colon - msg) < sizeof(field))
			snprintf(field, sizeof(field), "%.*s", (int)(colon - msg), msg);
		set_err(&err, st == PX_ENOTFOUND ? 404 : st == PX_EEXIST ? 409
			      : st == PX_EINVAL ? 400 : 500, field, "%s",
			colon ? colon + 2 : msg);
		return respond_err(c, &err);
	}
	char shown[sizeof(r->req.where)]; /* answers end up in logs: no credentials */
	px_redact_url(r->req.where, shown, sizeof(shown));
	return respond(c, MHD_HTTP_OK,
		       px_json_text(json_pack("{s:s, s:s, s:s}", "asset", r->req.name,
					   "source", shown,
					   "result", add ? "added" : "removed"),
			    REPLY_JSON),
		       "application/json", NULL);
}

/* POST reload: the catalog read again. */
static enum MHD_Result on_reload(struct px_control *ctl, struct MHD_Connection *c, struct conn *r)
{
	struct px_ctl_error err = { 0 };
	(void)r;
	char report[1024];
	if (px_reload_file(ctl->core, report, sizeof(report)) != PX_OK) {
		set_err(&err, 400, "catalog", "%s", report);
		return respond_err(c, &err);
	}
	px_utf8_scrub(report); /* may quote the catalog, or be cut inside a character */
	return respond(c, MHD_HTTP_OK,
		       px_json_text(json_pack("{s:b, s:s}", "reloaded", 1, "notes", report),
			    REPLY_JSON),
		       "application/json", NULL);
}

/* POST restart: the keeper starts the binary on disk. */
static enum MHD_Result on_restart(struct px_control *ctl, struct MHD_Connection *c, struct conn *r)
{
	struct px_ctl_error err = { 0 };
	/* the keeper ends this worker at once and starts the binary on
	 * disk (fs/keeper.h): it is told in on_completed, after this
	 * answer is written, or the answer would die with the worker */
	long keeper = ctl->core->worker.keeper_pid;
	if (keeper <= 0) {
		set_err(&err, 409, "keeper", "this mount has no keeper (keeper=0): a "
			"restart would end it");
		return respond_err(c, &err);
	}
	if (!ctl->core->worker.resend) {
		/* the keeper would refuse the signal: say why here */
		set_err(&err, 409, "keeper", "this kernel cannot resend a worker's requests "
			"(FUSE_NOTIFY_RESEND, Linux 6.9+): a restart would end the mount");
		return respond_err(c, &err);
	}
	if (kill((pid_t)keeper, 0) != 0) {
		set_err(&err, 500, "keeper", "cannot signal keeper pid %ld: %s", keeper,
			strerror(errno));
		return respond_err(c, &err);
	}
	r->keeper = keeper;
	return respond(c, MHD_HTTP_ACCEPTED,
		       px_json_text(json_pack("{s:b, s:I, s:I}", "restarting", 1,
					   "keeper_pid", (json_int_t)keeper, "worker_pid",
					   (json_int_t)ctl->core->worker.pid),
			    REPLY_JSON),
		       "application/json", NULL);
}

/* GET copies: the copies' status (copies/status.c). */
static enum MHD_Result on_copies(struct px_control *ctl, struct MHD_Connection *c, struct conn *r)
{
	struct px_ctl_error err = { 0 };
	(void)r;
	char *text = px_copies_status(ctl->core);
	json_t *js = text ? json_loads(text, 0, NULL) : NULL;
	free(text);
	if (!js) {
		set_err(&err, 500, "", "out of memory");
		return respond_err(c, &err);
	}
	return respond(c, MHD_HTTP_OK, px_json_text(js, REPLY_JSON), "application/json",
		       NULL);
}

/* POST a storage's role: copying on or off, drained. */
static enum MHD_Result on_storage(struct px_control *ctl, struct MHD_Connection *c, struct conn *r)
{
	struct px_ctl_error err = { 0 };
	int on = r->req.route == PX_CTL_STORAGE_ENABLE;
	int drain = r->req.route == PX_CTL_STORAGE_DRAIN;
	enum px_status st = px_copies_role(ctl->core, r->req.name, on, drain);
	if (st == PX_ENOTFOUND) {
		set_err(&err, 404, "name", "no storage named \"%.200s\" in the catalog",
			r->req.name);
		return respond_err(c, &err);
	}
	return respond(c, MHD_HTTP_OK,
		       px_json_text(json_pack("{s:s, s:b, s:b}", "storage", r->req.name,
					   "copying", on, "drained", drain), REPLY_JSON),
		       "application/json", NULL);
}

static enum MHD_Result handle(struct px_control *ctl, struct MHD_Connection *c, struct conn *r)
{
	struct px_ctl_error err = { 0 };

	switch (r->req.route) {
	case PX_CTL_STATUS:
		return respond(c, MHD_HTTP_OK, px_report_json(ctl->core), "application/json",
			       NULL);
	case PX_CTL_METRICS:
		return respond(c, MHD_HTTP_OK, px_metrics_text(ctl->core),
			       "text/plain; version=0.0.4; charset=utf-8", NULL);
	case PX_CTL_HOSTS:
		return respond(c, MHD_HTTP_OK, px_report_hosts(ctl->core), "application/json",
			       NULL);
	case PX_CTL_DRAIN:
	case PX_CTL_RESUME:
		return on_drain(ctl, c, r);
	case PX_CTL_ADD_SOURCE:
	case PX_CTL_REMOVE_SOURCE:
		return on_source(ctl, c, r);
	case PX_CTL_RELOAD:
		return on_reload(ctl, c, r);
	case PX_CTL_RESTART:
		return on_restart(ctl, c, r);
	case PX_CTL_COPIES:
		return on_copies(ctl, c, r);
	case PX_CTL_STORAGE_DISABLE:
	case PX_CTL_STORAGE_ENABLE:
	case PX_CTL_STORAGE_DRAIN:
		return on_storage(ctl, c, r);
	case PX_CTL_NROUTES:
		break;
	}
	set_err(&err, 500, "", "unhandled route");
	return respond_err(c, &err);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version,
				  const char *upload, size_t *upload_size, void **con_cls)
{
	struct px_control *ctl = cls;
	struct conn *r = *con_cls;
	(void)version;

	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return MHD_NO;
		*con_cls = r;
		if (px_ctl_match(method, url, &r->req, &r->err) != 0)
			r->failed = 1;
		/* a body announced too big is refused before it is read */
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
							     MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > PX_CTL_BODY_MAX) {
			set_err(&r->err, 413, "body", "body larger than %u bytes", PX_CTL_BODY_MAX);
			r->failed = r->answered = 1;
			return respond_err(c, &r->err);
		}
		return MHD_YES;
	}
	if (r->answered) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size) {
		/* bounded, and kept only when it will be looked at */
		if (!r->failed && r->len + *upload_size > PX_CTL_BODY_MAX) {
			r->failed = 1;
			set_err(&r->err, 413, "body", "body larger than %u bytes", PX_CTL_BODY_MAX);
		}
		if (!r->failed) {
			char *nb = realloc(r->body, r->len + *upload_size);
			if (!nb) {
				r->failed = 1;
				set_err(&r->err, 500, "body", "out of memory");
			} else {
				memcpy(nb + r->len, upload, *upload_size);
				r->body = nb;
				r->len += *upload_size;
			}
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (!r->failed && px_ctl_check_body(&r->req, r->body, r->len, &r->err) != 0)
		r->failed = 1;
	if (r->failed) {
		px_debug("control", "%s %s: %d %s (%s)", method, url, r->err.http, r->err.error,
			 r->err.field);
		return respond_err(c, &r->err);
	}
	return handle(ctl, c, r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct conn *r = *con_cls;
	(void)cls, (void)c;
	if (r && r->keeper > 0) {
		if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
			px_warn("control", "restart not asked: its answer was not delivered");
		else if (kill((pid_t)r->keeper, SIGUSR2) != 0)
			px_error("control", "restart answered but keeper pid %ld cannot be "
				 "signalled: %s", r->keeper, strerror(errno));
		else
			px_info("control", "restart asked: keeper pid %ld starts a new worker",
				r->keeper);
	}
	if (r) {
		free(r->body);
		free(r);
	}
	*con_cls = NULL;
}

/* Leaves the path as it came: path parameters are decoded after the path
 * is split, so an escaped '/' stays inside its segment. */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s)
{
	(void)cls, (void)c;
	return strlen(s);
}

void px_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	px_warn(cls, "libmicrohttpd: %s", line);
}

/*
 * Makes the listening socket at path: refuses a path that exists and is
 * not a socket, or a socket that a live server answers on; replaces a
 * stale one. Returns the fd or -1 (logged).
 */
static int make_socket(const char *path, dev_t *dev, ino_t *ino)
{
	struct sockaddr_un sa;
	struct stat sb;
	int fd = -1;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa.sun_path)) {
		px_error("control", "control socket %s: path longer than %zu bytes", path,
			 sizeof(sa.sun_path) - 1);
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path));
	if (lstat(path, &sb) == 0) {
		if (!S_ISSOCK(sb.st_mode)) {
			px_error("control", "control socket %s: exists and is not a socket; "
				 "not touching it", path);
			return -1;
		}
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int live = probe >= 0 &&
			   connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		int why = errno;
		if (probe >= 0)
			close(probe);
		if (live || (why != ECONNREFUSED && why != ENOENT)) {
			px_error("control", "control socket %s: %s", path,
				 live ? "another server answers on it" : strerror(why));
			return -1;
		}
		px_info("control", "control socket %s: replacing a stale socket", path);
		if (unlink(path) && errno != ENOENT) {
			px_error("control", "control socket %s: cannot remove the stale socket: %s",
				 path, strerror(errno));
			return -1;
		}
	} else if (errno != ENOENT) {
		px_error("control", "control socket %s: %s", path, strerror(errno));
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		px_error("control", "control socket %s: socket: %s", path, strerror(errno));
		return -1;
	}
	/* made 0600 from the start: no moment when others may connect */
	mode_t old = umask(0177);
	int b = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	int berr = errno;
	umask(old);
	if (b) {
		px_error("control", "control socket %s: bind: %s", path, strerror(berr));
		goto fail;
	}
	if (chmod(path, 0600) || lstat(path, &sb)) {
		px_error("control", "control socket %s: %s", path, strerror(errno));
		unlink(path);
		goto fail;
	}
	*dev = sb.st_dev;
	*ino = sb.st_ino;
	if (listen(fd, 16)) {
		px_error("control", "control socket %s: listen: %s", path, strerror(errno));
		unlink(path);
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return -1;
}

enum px_status px_control_start(struct px_core *core, const char *path, struct px_control **out)
{
	struct px_control *ctl = calloc(1, sizeof(*ctl));
	sigset_t all, old;
	int fd;

	*out = NULL;
	if (!ctl || !(ctl->path = strdup(path))) {
		free(ctl);
		px_error("control", "control socket %s: out of memory", path);
		return PX_ENOMEM;
	}
	ctl->core = core;
	fd = make_socket(path, &ctl->dev, &ctl->ino);
	if (fd < 0) {
		free(ctl->path);
		free(ctl);
		return PX_EIO;
	}
	/* the server's thread inherits this mask: signals go to main's */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	ctl->mhd = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
		on_request, ctl,
		MHD_OPTION_EXTERNAL_LOGGER, px_mhd_log, (void *)"control",
		MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
		MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, NULL,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned int)32,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)10,
		MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!ctl->mhd) {
		px_error("control", "control socket %s: libmicrohttpd did not start", path);
		close(fd);
		unlink(path);
		free(ctl->path);
		free(ctl);
		return PX_EIO;
	}
	px_info("control", "control API on %s", path);
	*out = ctl;
	return PX_OK;
}

void px_control_stop(struct px_control *ctl)
{
	struct stat sb;
	if (!ctl)
		return;
	/* closes the listening socket too */
	MHD_stop_daemon(ctl->mhd);
	if (lstat(ctl->path, &sb) == 0 && sb.st_dev == ctl->dev && sb.st_ino == ctl->ino)
		unlink(ctl->path);
	free(ctl->path);
	free(ctl);
}

const char *px_control_library_version(void)
{
	return MHD_get_version();
}
