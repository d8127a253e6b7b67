/*
 * fuzz_redact.c - libFuzzer target for proxy/catalog/redact.c.
 *
 * The input is one string (cut at its first NUL). px_redact_url must
 * return the same length whatever the buffer, write a NUL-terminated
 * prefix of the whole result within every cap, write nothing past cap, and
 * be idempotent; a local path (no "scheme://") comes back unchanged.
 * px_redact_key, px_redact_origin, px_redact_headers_ok and
 * px_redact_bad_host run on the same bytes (origin's output must parse as
 * an origin again).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "redact.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = malloc(size + 1), *full = NULL, *again = NULL, *key = NULL;
	char small[24], origin[600], host[300];
	int down = 0;

	if (!in)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';
	size_t n = px_redact_url(in, NULL, 0);
	full = malloc(n + 1);
	if (!full)
		goto out;
	if (px_redact_url(in, full, n + 1) != n || strlen(full) != n)
		abort();
	for (size_t cap = 1; cap <= sizeof(small); cap++) {
		memset(small, 'Z', sizeof(small));
		if (px_redact_url(in, small, cap) != n)
			abort();
		size_t got = strlen(small);
		if (got >= cap || got != (n < cap - 1 ? n : cap - 1) || memcmp(small, full, got))
			abort();
		if (cap < sizeof(small) && small[cap] != 'Z')
			abort();
	}
	again = px_redact_url_dup(full);
	if (again && strcmp(again, full) != 0)
		abort();
	if (!strstr(in, "://") && strcmp(full, in) != 0)
		abort();
	key = px_redact_key(in);
	if (key && strncmp(key, full, n) != 0)
		abort();
	if (px_redact_origin(in, origin, sizeof(origin)) == 0) {
		char o2[600];
		if (px_redact_origin(origin, o2, sizeof(o2)) != 0 || strcmp(origin, o2) != 0)
			abort();
	}
	const char *hosts[] = { in, "cdn.example", "https://h.example:443" };
	(void)px_redact_headers_ok(in, in, in, hosts, 3, &down);
	(void)px_redact_headers_ok("https://h.example/a", in, in, hosts, 3, &down);
	(void)px_redact_bad_host(in, host, sizeof(host));
out:
	free(in);
	free(full);
	free(again);
	free(key);
	return 0;
}
