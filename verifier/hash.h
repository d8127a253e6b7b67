/*
 * hash.h - SHA-256, the verifier's one hash. The only file of seamfs that
 * includes OpenSSL is hash.c (EVP_Digest* with EVP_sha256(), the 3.0 API).
 */
#ifndef SEAMFS_VF_HASH_H
#define SEAMFS_VF_HASH_H

#include <stddef.h>
#include "px.h"

/* The running OpenSSL's version text ("OpenSSL 3.0.17 1 Jul 2025"), for
 * --version. */
const char *vf_hash_library_version(void);

#define VF_HASH_LEN 32
#define VF_HASH_HEX (2 * VF_HASH_LEN + 1)

/* A SHA-256 computed over several updates (the whole-file check). */
struct vf_hash;

/* PX_ENOMEM when OpenSSL cannot make a context. */
enum px_status vf_hash_new(struct vf_hash **out) PX_WUR;
enum px_status vf_hash_update(struct vf_hash *h, const void *buf, size_t len) PX_WUR;
/* Writes the digest; the hash cannot be updated afterwards. */
enum px_status vf_hash_final(struct vf_hash *h, unsigned char out[VF_HASH_LEN]) PX_WUR;
void vf_hash_free(struct vf_hash *h);

/* SHA-256 of one buffer. Allocates nothing. Any thread. */
enum px_status vf_hash_once(const void *buf, size_t len, unsigned char out[VF_HASH_LEN]) PX_WUR;

/* Lowercase hex of n bytes into out (2n+1 bytes, NUL-terminated). */
void vf_hash_hex(const unsigned char *in, size_t n, char *out);

/* Parses exactly 2n lowercase or uppercase hex digits (len == 2n).
 * Returns 0 on success, -1 otherwise (out then undefined). */
int vf_hash_unhex(const char *in, size_t len, unsigned char *out, size_t n);

#endif
