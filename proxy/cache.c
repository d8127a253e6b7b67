/*
 * cache.c - the heads and tails of assets, shared by every session.
 *
 * Players and library scanners open a file, read its head (container
 * header), jump to its tail (index, cues, moov) and come back; scanners
 * stop there. Each asset's first head_size and last tail_size bytes are
 * fetched once, as one bounded range, and served to every later open from
 * memory, so a rescan or a reopen costs no transfer and never starts a
 * long stream.
 *
 * A slot remembers which source filled it: a session reading another
 * source does not use it (an open file never mixes bytes of sources not
 * proved identical). All slots share cache_size; a fill evicts the least
 * recently used ready slots (a reader copies under the lock, so a ready
 * slot is never in use outside it). One reader fills a
 * slot while the others wait for it (bounded by their deadlines).
 *
 * Lock: core->cache_lock guards every slot and the accounting; it is never
 * held across a fill (the fill runs unlocked, the slot marked FILLING).
 */
#include <stdlib.h>
#include <string.h>

#include "core_i.h"
#include "log.h"

enum { CACHE_EMPTY, CACHE_FILLING, CACHE_READY };

void px_cache_init(struct px_core *core)
{
	pthread_mutex_init(&core->cache_lock, NULL);
	px_cond_init_mono(&core->cache_cond);
}

void px_cache_release(struct px_core *core)
{
	for (size_t i = 0; i < core->cat->nassets; i++)
		for (int k = 0; k < 2; k++)
			free(core->assets[i].slot[k].buf);
	pthread_cond_destroy(&core->cache_cond);
	pthread_mutex_destroy(&core->cache_lock);
}

/* Makes room for need bytes by evicting idle ready slots, oldest first.
 * Lock held. Returns 0 when there is room. */
static int make_room(struct px_core *core, int64_t need)
{
	while (core->cache_used + need > core->cfg->cache_size) {
		struct cache_slot *victim = NULL;
		for (size_t i = 0; i < core->cat->nassets; i++) {
			for (int k = 0; k < 2; k++) {
				struct cache_slot *s = &core->assets[i].slot[k];
				if (s->state == CACHE_READY &&
				    (!victim || s->last_use < victim->last_use))
					victim = s;
			}
		}
		if (!victim)
			return -1;
		free(victim->buf);
		victim->buf = NULL;
		core->cache_used -= victim->len;
		victim->state = CACHE_EMPTY;
	}
	return 0;
}

enum px_status px_cache_read(struct px_core *core, size_t asset, int which, size_t source,
			     int64_t start, int64_t slen, int64_t off, size_t len, void *buf,
			     int64_t deadline, px_fill_fn fill, void *ctx)
{
	struct cache_slot *s = &core->assets[asset].slot[which];
	enum px_status st;

	pthread_mutex_lock(&core->cache_lock);
	for (;;) {
		if (s->state == CACHE_READY) {
			if (s->source != source || s->start != start || s->len != slen) {
				st = PX_EAGAIN;
				break;
			}
			/* copy under the lock: at most a few MiB, and it keeps the
			 * slot from being evicted meanwhile */
			memcpy(buf, s->buf + (off - start), len);
			s->last_use = ++core->cache_clock;
			core->n_cache_hits++;
			st = PX_OK;
			break;
		}
		if (s->state == CACHE_EMPTY) {
			if (slen > core->cfg->cache_size || make_room(core, slen)) {
				st = PX_EAGAIN;
				break;
			}
			unsigned char *b = malloc((size_t)slen);
			if (!b) {
				st = PX_EAGAIN;
				break;
			}
			s->state = CACHE_FILLING;
			s->buf = b;
			s->start = start;
			s->len = slen;
			s->source = source;
			core->cache_used += slen;
			pthread_mutex_unlock(&core->cache_lock);

			st = fill(ctx, start, (size_t)slen, b, deadline);

			pthread_mutex_lock(&core->cache_lock);
			if (st == PX_OK) {
				s->state = CACHE_READY;
				s->last_use = ++core->cache_clock;
				core->n_cache_fills++;
				memcpy(buf, b + (off - start), len);
			} else {
				s->state = CACHE_EMPTY;
				free(s->buf);
				s->buf = NULL;
				core->cache_used -= slen;
			}
			pthread_cond_broadcast(&core->cache_cond);
			break;
		}
		/* another reader is filling it: wait for that (bounded) */
		struct timespec ts = { deadline / 1000, (deadline % 1000) * 1000000 };
		if (px_now_ms() >= deadline ||
		    pthread_cond_timedwait(&core->cache_cond, &core->cache_lock, &ts) != 0) {
			st = PX_ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&core->cache_lock);
	return st;
}
