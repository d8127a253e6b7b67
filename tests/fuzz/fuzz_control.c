/*
 * fuzz_control.c - libFuzzer target for the control API's request parsing
 * (control.c): route matching with percent-decoding of the path, the body
 * checks, and the error body.
 *
 * An input is "METHOD TARGET\n" then the body; both parts are copied into
 * buffers of exactly their size (the target NUL-terminated, as libmicro-
 * httpd hands it over; the body not) so ASan sees any read past them.
 * What the parser accepts must make sense: a known route, a decoded name
 * without control characters that fits; what it refuses, a 4xx naming a
 * field, whose JSON body parses back.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_error(const struct px_ctl_error *err)
{
	if (err->http < 400 || err->http > 499 || !err->field[0] || !err->error[0])
		abort();
	char *js = px_ctl_error_json(err);
	json_t *o = js ? json_loads(js, 0, NULL) : NULL;
	/* fields and messages quote what was sent: the body must still be JSON */
	if (!js || !json_is_string(json_object_get(o, "field")) ||
	    !json_is_string(json_object_get(o, "error")))
		abort();
	json_decref(o);
	free(js);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t head = nl ? (size_t)(nl - data) : size;
	const uint8_t *sp = memchr(data, ' ', head);
	struct px_ctl_request req;
	struct px_ctl_error err;
	char method[16];
	size_t ml = sp ? (size_t)(sp - data) : 0;

	if (!sp || ml >= sizeof(method))
		return 0;
	memcpy(method, data, ml);
	method[ml] = '\0';
	size_t tl = head - ml - 1;
	char *target = malloc(tl + 1);
	size_t bl = nl ? size - head - 1 : 0;
	char *body = malloc(bl ? bl : 1);
	if (!target || !body)
		goto out;
	memcpy(target, sp + 1, tl);
	target[tl] = '\0';
	if (bl)
		memcpy(body, nl + 1, bl);

	/* the decoder alone, on the raw target */
	char dec[64];
	long dl = px_ctl_percent_decode(target, tl, dec, sizeof(dec));
	if (dl >= (long)sizeof(dec) || (dl >= 0 && strlen(dec) != (size_t)dl))
		abort();

	if (px_ctl_match(method, target, &req, &err) != 0) {
		check_error(&err);
		goto out;
	}
	if ((int)req.route < 0 || req.route >= PX_CTL_NROUTES)
		abort();
	for (const char *c = req.name; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			abort();
	if (px_ctl_check_body(&req, body, bl, &err) != 0)
		check_error(&err);
	else if (strlen(req.reason) >= sizeof(req.reason))
		abort();
out:
	free(target);
	free(body);
	return 0;
}
