/*
 * catalog_i.h - catalog internals shared by the JSON parser (catalog.c)
 * and the .strm/M3U importers (import.c). No other folder includes it.
 *
 * The importers build the same struct px_catalog as the JSON parser, with
 * the same rules for what a valid asset path and source are and the same
 * implicit providers, so these live in one place.
 */
#ifndef SEAMFS_CATALOG_I_H
#define SEAMFS_CATALOG_I_H

#include <stddef.h>
#include "catalog.h"
#include "strmap.h"

/* Providers while a catalog is being built. names maps each provider's name
 * to its index; its keys are borrowed from cat->providers[].name. */
struct px_catalog_providers {
	struct px_catalog *cat;
	size_t cap;                 /* allocated length of cat->providers */
	struct px_strmap *names;
};

/* Fills s->shown and s->key (redact.h) from its url or path; allocated,
 * freed with the catalog. PX_ENOMEM when they could not be made. */
enum px_status px_catalog_source_names(struct px_source *s) PX_WUR;

/* Adds the origin of url to p->header_hosts, once, when p has headers.
 * PX_ENOMEM on failure. */
enum px_status px_catalog_add_header_host(struct px_provider *p, const char *url) PX_WUR;

/* Appends a provider named name (copied) and returns its index in *index.
 * The caller has checked that the name is new. PX_ENOMEM on failure. */
enum px_status px_catalog_add_provider(struct px_catalog_providers *ps, const char *name,
				       int implicit, size_t *index) PX_WUR;

/* The implicit provider of a source: the one named hostport ("host:port"
 * from px_catalog_bad_url, or "local"), made when not there yet. */
enum px_status px_catalog_implicit_provider(struct px_catalog_providers *ps,
					    const char *hostport, size_t *index) PX_WUR;

#endif
