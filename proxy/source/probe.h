/*
 * probe.h - discovery of assets' sizes from their sources (probe.c).
 */
#ifndef SEAMFS_PROBE_H
#define SEAMFS_PROBE_H

#include "context.h"

/* Probes every asset that needs it (probe.c). */
void px_probe_assets(struct px_core *core, const unsigned char *need);

#endif
