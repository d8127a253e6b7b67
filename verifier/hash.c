/*
 * hash.c - SHA-256 through OpenSSL's EVP interface (3.0). OpenSSL errors
 * are translated here, once: a failed init/update/final is PX_ENOMEM (the
 * only way they fail with a built-in digest).
 *
 * vf_hash_once() hashes the samples that pass through the read path
 * (ownprint.c), where steady reads allocate nothing: it uses SHA256_Init/
 * Update/Final on a context on the stack; EVP_Digest() and, in 3.0, the
 * one-shot SHA256() allocate a context per call. 3.0 marks the low-level
 * calls deprecated in favour of EVP; they are kept for this one reason,
 * here alone.
 */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <stdlib.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "hash.h"
#include "utf8.h"

struct vf_hash {
	EVP_MD_CTX *ctx;
	int final;
};

enum px_status vf_hash_new(struct vf_hash **out)
{
	struct vf_hash *h = calloc(1, sizeof(*h));
	*out = NULL;
	if (!h)
		return PX_ENOMEM;
	h->ctx = EVP_MD_CTX_new();
	if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
		vf_hash_free(h);
		return PX_ENOMEM;
	}
	*out = h;
	return PX_OK;
}

enum px_status vf_hash_update(struct vf_hash *h, const void *buf, size_t len)
{
	if (h->final)
		return PX_EINVAL;
	return EVP_DigestUpdate(h->ctx, buf, len) == 1 ? PX_OK : PX_ENOMEM;
}

enum px_status vf_hash_final(struct vf_hash *h, unsigned char out[VF_HASH_LEN])
{
	unsigned int n = 0;
	if (h->final)
		return PX_EINVAL;
	h->final = 1;
	if (EVP_DigestFinal_ex(h->ctx, out, &n) != 1 || n != VF_HASH_LEN)
		return PX_ENOMEM;
	return PX_OK;
}

void vf_hash_free(struct vf_hash *h)
{
	if (!h)
		return;
	EVP_MD_CTX_free(h->ctx);
	free(h);
}

enum px_status vf_hash_once(const void *buf, size_t len, unsigned char out[VF_HASH_LEN])
{
	SHA256_CTX c;
	if (SHA256_Init(&c) != 1 || SHA256_Update(&c, buf, len) != 1 || SHA256_Final(out, &c) != 1)
		return PX_ENOMEM;
	return PX_OK;
}

void vf_hash_hex(const unsigned char *in, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

int vf_hash_unhex(const char *in, size_t len, unsigned char *out, size_t n)
{
	if (len != 2 * n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int hi = px_hex_digit((unsigned char)in[2 * i]);
		int lo = px_hex_digit((unsigned char)in[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

const char *vf_hash_library_version(void)
{
	return OpenSSL_version(OPENSSL_VERSION);
}
