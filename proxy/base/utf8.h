/*
 * utf8.h - telling UTF-8 text from other bytes, and making it so.
 *
 * JSON (status, the control API, the state file) takes UTF-8 only, while
 * file names, playlists and HTTP responses are bytes. Input that becomes
 * a name is converted where it enters (px_utf8_latin1); text that is only
 * shown is scrubbed where it leaves (px_utf8_scrub).
 */
#ifndef SEAMFS_UTF8_H
#define SEAMFS_UTF8_H

#include <stddef.h>

/* The length of the well-formed UTF-8 sequence at s (shortest form, no
 * surrogates, at most U+10FFFF): 1 to 4, or 0 when s does not start one.
 * Reads at most up to s's NUL. */
size_t px_utf8_seq(const char *s);

/* Whether the NUL-terminated s is well-formed UTF-8. */
int px_utf8_valid(const char *s);

/* Makes s valid UTF-8 in place: every byte that starts no well-formed
 * sequence (a cut one at the end too) becomes '?'. */
void px_utf8_scrub(char *s);

/* A malloc'd UTF-8 copy of [s, s + n) (no NUL inside): well-formed
 * sequences are kept, and every other byte is read as Latin-1 (U+0080 to
 * U+00FF, two bytes each). *changed: whether any byte was read so. NULL
 * when out of memory. */
char *px_utf8_latin1(const char *s, size_t n, int *changed);

/* The value of the hex digit c (0-9, a-f, A-F), -1 for any other byte. */
int px_hex_digit(int c);

#endif
