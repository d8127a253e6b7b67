/*
 * metrics.c - the core's metrics in the Prometheus text exposition format
 * (version 0.0.4), for .seamfs/metrics and GET /v1/metrics.
 *
 * The numbers are copied first, as one snapshot (snapshot.c: each of the
 * core's locks taken once and alone), without the rows status.json
 * lists; the text is written after, with no lock held. Every family has
 * its HELP and TYPE lines before its samples, and label values are
 * escaped (backslash, double quote, newline) as the format requires:
 * provider names come from the catalog.
 *
 * Sessions are counted here by state; per-session figures (asset, client,
 * offset, bytes served) stay in status.json, because sessions come and go
 * by the thousand and a label per session would make every one of them a
 * series that a scraper keeps for good.
 *
 * One function writes each group of families (process, providers,
 * sessions, reads, copies, memory, failures, cluster), called in the order
 * a scrape shows them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "copies.h"
#include "metrics.h"
#include "reads.h"
#include "snapshot.h"
#include "standby.h"
#include "utf8.h"

/* Text grows up to this; a catalog would need millions of providers. */
#define METRICS_MAX (64u << 20)

struct buf {
	char *p;
	size_t len, cap;
	int bad;                   /* out of memory or too big: give up */
};

static void PX_PRINTF(2, 3) put(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	if (b->bad)
		return;
	for (;;) {
		va_start(ap, fmt);
		int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->bad = 1;
			return;
		}
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap * 2;
		while (cap - b->len <= (size_t)n)
			cap *= 2;
		char *np = cap <= METRICS_MAX ? realloc(b->p, cap) : NULL;
		if (!np) {
			b->bad = 1;
			return;
		}
		b->p = np;
		b->cap = cap;
	}
}

/* A label value, escaped: \\ for \, \" for ", \n for a newline; bytes
 * that are not UTF-8 (the format's encoding) as '?'. */
static void put_label(struct buf *b, const char *s)
{
	for (size_t n; *s && !b->bad; s += n) {
		n = px_utf8_seq(s);
		if (*s == '\\')
			put(b, "\\\\");
		else if (*s == '"')
			put(b, "\\\"");
		else if (*s == '\n')
			put(b, "\\n");
		else if (n)
			put(b, "%.*s", (int)n, s);
		else
			put(b, "?");
		if (!n)
			n = 1;
	}
}

static void family(struct buf *b, const char *name, const char *type, const char *help)
{
	put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample(struct buf *b, const char *name, unsigned long long v)
{
	put(b, "%s %llu\n", name, v);
}

/* A metric family's name, type and help text. */
struct fam {
	const char *name, *type, *help;
};

/* A provider's family: one sample per provider of the field at offset. */
static void per_provider(struct buf *b, const struct px_snap_provider *ps, size_t n,
			 const struct fam *f, size_t off, int is64)
{
	const char *name = f->name;
	family(b, name, f->type, f->help);
	for (size_t i = 0; i < n; i++) {
		const char *base = (const char *)&ps[i] + off;
		unsigned long long v = is64 ? *(const uint64_t *)(const void *)base
					    : (unsigned long long)*(const int *)(const void *)base;
		put(b, "%s{provider=\"", name);
		put_label(b, ps[i].name);
		put(b, "\"} %llu\n", v);
	}
}

static void histogram(struct buf *b, const char *name, const char *help,
		      const struct px_histo_snap *s)
{
	family(b, name, "histogram", help);
	for (size_t i = 0; i < PX_HISTO_NBOUNDS; i++)
		put(b, "%s_bucket{le=\"%g\"} %llu\n", name, px_histo_bounds[i],
		    (unsigned long long)s->cum[i]);
	put(b, "%s_bucket{le=\"+Inf\"} %llu\n", name,
	    (unsigned long long)s->cum[PX_HISTO_NBOUNDS]);
	put(b, "%s_sum %.6f\n", name, s->sum);
	put(b, "%s_count %llu\n", name, (unsigned long long)s->count);
}

/* The heads and tails on disk (read/disk.c). */
static void disk_metrics(struct buf *b, const struct px_disk_stats *d)
{
	family(b, "seamfs_disk_cache_up", "gauge",
	       "1 while heads and tails are kept in cache_dir; 0 when off (see the status).");
	put(b, "seamfs_disk_cache_up %d\n", d->on);
	family(b, "seamfs_disk_cache_bytes", "gauge", "Bytes of the parts kept in cache_dir.");
	put(b, "seamfs_disk_cache_bytes %lld\n", (long long)d->bytes);
	family(b, "seamfs_disk_cache_max_bytes", "gauge", "The cache_max_bytes option.");
	put(b, "seamfs_disk_cache_max_bytes %lld\n", (long long)d->max_bytes);
	family(b, "seamfs_disk_cache_hits_total", "counter",
	       "Heads and tails loaded from cache_dir instead of fetched.");
	sample(b, "seamfs_disk_cache_hits_total", d->hits);
	family(b, "seamfs_disk_cache_hit_bytes_total", "counter", "Bytes those held.");
	sample(b, "seamfs_disk_cache_hit_bytes_total", d->hit_bytes);
	family(b, "seamfs_disk_cache_stored_total", "counter", "Parts written to cache_dir.");
	sample(b, "seamfs_disk_cache_stored_total", d->stored);
	family(b, "seamfs_disk_cache_evictions_total", "counter",
	       "Parts removed to stay within cache_max_bytes.");
	sample(b, "seamfs_disk_cache_evictions_total", d->evictions);
	family(b, "seamfs_disk_cache_rejects_total", "counter",
	       "Parts that did not check on load (or named an old version) and were removed.");
	sample(b, "seamfs_disk_cache_rejects_total", d->rejects);
}

void px_metrics_note_read(struct px_core *core, int64_t us)
{
	px_reads_note_read(core->reads, us);
}

/* The process: version, worker restarts, assets. */
static void process_metrics(struct buf *b, const struct px_snapshot *snap)
{
	family(b, "seamfs_info", "gauge", "Always 1; the version as a label.");
	put(b, "seamfs_info{version=\"%s\"} 1\n", SEAMFS_VERSION);
	family(b, "seamfs_worker_restarts_total", "counter",
	       "Workers the keeper started after one died (keeper=1).");
	sample(b, "seamfs_worker_restarts_total", snap->worker.restarts);
	family(b, "seamfs_assets", "gauge", "Assets in the catalog.");
	sample(b, "seamfs_assets", snap->nassets);
	family(b, "seamfs_assets_listed", "gauge", "Assets the mount shows as files.");
	sample(b, "seamfs_assets_listed", snap->nlisted);
}

/* Each provider: its state, its connections, its answers. */
static void provider_metrics(struct buf *b, const struct px_snapshot *snap)
{
	const struct px_snap_provider *ps = snap->provs;
	size_t np = snap->nprovs;

	family(b, "seamfs_provider_up", "gauge",
	       "1 unless the provider has answered badly for liveness_ttl (down).");
	for (size_t i = 0; i < np; i++) {
		put(b, "seamfs_provider_up{provider=\"");
		put_label(b, ps[i].name);
		put(b, "\"} %d\n", ps[i].state != PX_SNAP_DOWN);
	}
	family(b, "seamfs_provider_state", "gauge",
	       "1 for the provider's state (live, failing, down, drained, auth_error), 0 for "
	       "the others.");
	for (size_t i = 0; i < np; i++) {
		for (int k = 0; k < PX_SNAP_NSTATES; k++) {
			put(b, "seamfs_provider_state{provider=\"");
			put_label(b, ps[i].name);
			put(b, "\",state=\"%s\"} %d\n", px_snapshot_state_name((enum px_snap_state)k),
			    (int)ps[i].state == k);
		}
	}
#define PP(name, type, help, field) \
	per_provider(b, ps, np, &(const struct fam){ name, type, help }, \
		     offsetof(struct px_snap_provider, field), \
		     sizeof(ps[0].field) == sizeof(uint64_t))
	PP("seamfs_provider_sessions", "gauge", "Sessions whose source is on the provider.",
	   sessions);
	PP("seamfs_provider_transfers", "gauge", "Transfers open to the provider.", xfers);
	PP("seamfs_provider_background_transfers", "gauge",
	   "Background transfers (cache fills, probes) among them.", bg);
	PP("seamfs_provider_slots_held", "gauge",
	   "Connection slots taken: transfers, plus one kept by each session without one.", held);
	PP("seamfs_provider_max_connections", "gauge",
	   "The provider's connection limit; 0: none.", max);
	PP("seamfs_provider_drained", "gauge", "1 when the provider takes no new session.",
	   drained);
	family(b, "seamfs_provider_answers_total", "counter",
	       "Transfer outcomes that count for liveness, by result (good or bad).");
	for (size_t i = 0; i < np; i++) {
		for (int k = 0; k < 2; k++) {
			put(b, "seamfs_provider_answers_total{provider=\"");
			put_label(b, ps[i].name);
			put(b, "\",result=\"%s\"} %llu\n", k ? "bad" : "good",
			    (unsigned long long)(k ? ps[i].n_bad : ps[i].n_ok));
		}
	}
	PP("seamfs_provider_slot_waits_total", "counter",
	   "Transfers that had to wait for a connection slot.", n_waits);
	PP("seamfs_provider_slot_timeouts_total", "counter",
	   "Waits for a slot that ran out (EBUSY).", n_busy);
	PP("seamfs_provider_background_preempted_total", "counter",
	   "Background transfers, and paused ones a cutover left apart from their session, "
	   "cancelled to free a slot.", n_preempted);
	PP("seamfs_provider_lingering_sessions_ended_total", "counter",
	   "Closed sessions ended early because their slot was needed.", n_evicted);
	PP("seamfs_provider_liveness_probes_total", "counter",
	   "One-byte liveness probes sent.", n_probes);
#undef PP
}

/* Sessions and admission. */
static void session_metrics(struct buf *b, const struct px_snapshot *snap)
{
	family(b, "seamfs_sessions", "gauge",
	       "Sessions by state: open (a handle is open) or lingering (waiting for a reopen).");
	put(b, "seamfs_sessions{state=\"open\"} %llu\n",
	    (unsigned long long)snap->sessions_open);
	put(b, "seamfs_sessions{state=\"lingering\"} %llu\n",
	    (unsigned long long)snap->sessions_lingering);
	family(b, "seamfs_sessions_by_kind", "gauge",
	       "Sessions by what they read: playback (past the head and tail) or scan.");
	put(b, "seamfs_sessions_by_kind{kind=\"playback\"} %llu\n",
	    (unsigned long long)snap->sessions_playback);
	put(b, "seamfs_sessions_by_kind{kind=\"scan\"} %llu\n",
	    (unsigned long long)snap->sessions_scan);
	family(b, "seamfs_admission_refused_total", "counter",
	       "Opens refused because every provider that could serve was at its limit.");
	sample(b, "seamfs_admission_refused_total", snap->n_admit_busy);
}

/* How reads were served: the cache, streams, parts, direct ranges. */
static void read_metrics(struct buf *b, const struct px_snapshot *snap)
{
	family(b, "seamfs_cache_hits_total", "counter",
	       "Reads answered from the shared head/tail cache.");
	sample(b, "seamfs_cache_hits_total", snap->n_cache_hits);
	family(b, "seamfs_scans_from_cache_total", "counter",
	       "Opens that read only cached heads and tails (library scans), closed.");
	sample(b, "seamfs_scans_from_cache_total", snap->n_scans_cached);
	family(b, "seamfs_cache_fills_total", "counter", "Head/tail cache fills started.");
	sample(b, "seamfs_cache_fills_total", snap->n_cache_fills);
	family(b, "seamfs_cache_multipart_fills_total", "counter",
	       "Head fills that brought the tail in the same request (multipart ranges).");
	sample(b, "seamfs_cache_multipart_fills_total", snap->n_multipart);
	family(b, "seamfs_scans_total", "counter",
	       "Sessions closed having read only heads and tails (library scans).");
	sample(b, "seamfs_scans_total", snap->n_scans);
	family(b, "seamfs_scan_requests_total", "counter", "Requests those scans made.");
	sample(b, "seamfs_scan_requests_total", snap->n_scan_requests);
	family(b, "seamfs_streams_total", "counter", "Streaming transfers started.");
	sample(b, "seamfs_streams_total", snap->n_streams);
	family(b, "seamfs_stream_restarts_total", "counter",
	       "Streams restarted after a failed transfer.");
	sample(b, "seamfs_stream_restarts_total", snap->n_stream_restarts);
	family(b, "seamfs_stream_waits_total", "counter",
	       "Reads that waited for a stream's bytes.");
	sample(b, "seamfs_stream_waits_total", snap->n_stream_waits);
	family(b, "seamfs_stream_wait_seconds_total", "counter",
	       "Time reads spent waiting for a stream's bytes.");
	put(b, "seamfs_stream_wait_seconds_total %.6f\n",
	    (double)snap->stream_wait_us / 1e6);
	family(b, "seamfs_parallel_streams_total", "counter",
	       "Streams that turned parallel: their reader outran one transfer.");
	sample(b, "seamfs_parallel_streams_total", snap->n_par_streams);
	family(b, "seamfs_parallel_parts_total", "counter",
	       "Part transfers parallel streams started.");
	sample(b, "seamfs_parallel_parts_total", snap->n_parts);
	family(b, "seamfs_direct_reads_total", "counter", "Reads fetched by a range request.");
	sample(b, "seamfs_direct_reads_total", snap->n_direct);
}

/* Local copies and what was found in their way (core: for the copies' counters). */
static void copies_metrics(struct buf *b, const struct px_snapshot *snap, struct px_core *core)
{
	uint64_t made, failed, copied;
	px_copies_counters(core, &made, &failed, &copied);
	family(b, "seamfs_copies_made_total", "counter", "Copies made, verified and serving.");
	sample(b, "seamfs_copies_made_total", made);
	family(b, "seamfs_copies_failed_total", "counter",
	       "Copy attempts that failed (a broken read or a mismatch).");
	sample(b, "seamfs_copies_failed_total", failed);
	family(b, "seamfs_copies_bytes_total", "counter", "Bytes written to copies.");
	sample(b, "seamfs_copies_bytes_total", copied);
	family(b, "seamfs_work_dir_links_total", "counter",
	       "Links found in transcode job directories (never followed nor written through).");
	sample(b, "seamfs_work_dir_links_total", snap->n_work_links);
	family(b, "seamfs_copies_in_way_total", "counter",
	       "Links or foreign files found in a copy's way (left alone), by jobs and reads.");
	sample(b, "seamfs_copies_in_way_total", px_copies_in_way(core));
}

/* Memory and disk: read-ahead, the cache, cache_dir. */
static void memory_metrics(struct buf *b, const struct px_snapshot *snap)
{
	family(b, "seamfs_readahead_used_bytes", "gauge",
	       "Read-ahead memory in use (windows and cached heads/tails).");
	put(b, "seamfs_readahead_used_bytes %lld\n", (long long)snap->ra_used);
	family(b, "seamfs_readahead_budget_bytes", "gauge", "The readahead_budget option.");
	put(b, "seamfs_readahead_budget_bytes %lld\n", (long long)snap->ra_budget);
	family(b, "seamfs_cache_used_bytes", "gauge", "Bytes the cached heads and tails hold.");
	put(b, "seamfs_cache_used_bytes %lld\n", (long long)snap->cache_used);
	family(b, "seamfs_cache_size_bytes", "gauge", "The cache_size option.");
	put(b, "seamfs_cache_size_bytes %lld\n", (long long)snap->cache_size);
	disk_metrics(b, &snap->disk);
}

/* Failures and cutovers: auth errors, cutovers by reason, exhausted reads,
 * standby checks. */
static void failure_metrics(struct buf *b, const struct px_snapshot *snap)
{
	const struct px_snap_provider *ps = snap->provs;
	size_t np = snap->nprovs;

	family(b, "seamfs_provider_auth_errors_total", "counter",
	       "HTTP 401/403 answers: the provider's credentials refused.");
	for (size_t i = 0; i < np; i++) {
		put(b, "seamfs_provider_auth_errors_total{provider=\"");
		put_label(b, ps[i].name);
		put(b, "\"} %llu\n", (unsigned long long)ps[i].n_auth);
	}
	family(b, "seamfs_cutovers_total", "counter",
	       "Sessions moved to a standby at the same offset, by what failed.");
	/* several triggers share a reason's name ("error"): one series each,
	 * summed, as Prometheus takes a series once */
	for (int st = 0; st < PX_STATUS_COUNT; st++) {
		if (!snap->n_cutovers[st])
			continue;
		const char *name = px_cutover_reason_name((enum px_status)st);
		unsigned long long n = 0;
		int first = 1;
		for (int o = 0; o < PX_STATUS_COUNT; o++) {
			if (!snap->n_cutovers[o] ||
			    strcmp(px_cutover_reason_name((enum px_status)o), name) != 0)
				continue;
			first &= o >= st;
			n += snap->n_cutovers[o];
		}
		if (first)
			put(b, "seamfs_cutovers_total{reason=\"%s\"} %llu\n", name, n);
	}
	family(b, "seamfs_fallback_exhausted_total", "counter",
	       "Reads that failed with no standby able to take over.");
	sample(b, "seamfs_fallback_exhausted_total", snap->n_exhausted);
	family(b, "seamfs_verifications_total", "counter",
	       "Standby checks against the asset's reference, by outcome.");
	static const char *const outcomes[] = { "match", "mismatch", "size_mismatch",
						"inconclusive" };
	for (int k = 0; k < 4; k++)
		put(b, "seamfs_verifications_total{outcome=\"%s\"} %llu\n", outcomes[k],
		    (unsigned long long)snap->n_verified[k]);
}

/* Cluster mode (docs/cluster.md): the store and the hosts. */
static void cluster_metrics(struct buf *b, const struct px_snapshot *snap)
{
	/* cluster mode (docs/cluster.md) */
	family(b, "seamfs_store_up", "gauge",
	       "1 when the last call to the store (Redis) got an answer.");
	sample(b, "seamfs_store_up", (unsigned long long)snap->store.connected);
	family(b, "seamfs_store_latency_seconds", "gauge",
	       "Round trip of the last call to the store.");
	put(b, "seamfs_store_latency_seconds %.6f\n",
	    snap->store.latency_us >= 0 ? (double)snap->store.latency_us / 1e6 : 0.0);
	family(b, "seamfs_store_calls_total", "counter", "Calls to the store.");
	sample(b, "seamfs_store_calls_total", snap->store.calls);
	family(b, "seamfs_store_errors_total", "counter",
	       "Calls to the store that failed (no answer, or an error answer).");
	sample(b, "seamfs_store_errors_total", snap->store.errors);
	family(b, "seamfs_cluster_hosts", "gauge",
	       "Hosts registered in the cluster, as the last heartbeat listed them.");
	sample(b, "seamfs_cluster_hosts", snap->nhosts);
	family(b, "seamfs_transcode_takeovers_total", "counter",
	       "Transcode leases this host took over from another host's writer.");
	sample(b, "seamfs_transcode_takeovers_total", snap->n_takeovers);
}

char *px_metrics_text(struct px_core *core)
{
	struct px_snapshot *snap = NULL;
	struct buf b = { malloc(16384), 0, 16384, 0 };
	char *text = NULL;

	if (!b.p || px_snapshot_new(core, 0, &snap) != PX_OK)
		goto out;
	process_metrics(&b, snap);
	provider_metrics(&b, snap);
	session_metrics(&b, snap);
	read_metrics(&b, snap);
	copies_metrics(&b, snap, core);
	memory_metrics(&b, snap);
	failure_metrics(&b, snap);
	if (snap->clustered)
		cluster_metrics(&b, snap);
	histogram(&b, "seamfs_read_latency_seconds",
		  "Time to answer a read of a file, from the kernel's request to the reply.",
		  &snap->h_read);
	histogram(&b, "seamfs_first_byte_seconds",
		  "Time from submitting a transfer to its first byte.", &snap->h_ttfb);
	if (b.bad)
		goto out;
	text = b.p;
	b.p = NULL;
out:
	px_snapshot_free(snap);
	free(b.p);
	return text;
}
