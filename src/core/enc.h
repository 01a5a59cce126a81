/*
 * enc.h -- byte encodings every module shares: percent-encoding for URLs,
 * hex, base64, UTF-8 and varints.  Pure functions; the sbuf ones only append.
 */
#ifndef TC_CORE_ENC_H
#define TC_CORE_ENC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/sbuf.h"

/*
 * Append s percent-encoded (RFC 3986): the unreserved characters A-Z a-z
 * 0-9 - _ . ~ stay, and '/' too when keep_slash; every other byte becomes
 * %XX in upper case, the canonical form AWS Signature V4 signs.
 */
void url_encode(struct sbuf *sb, const char *s, bool keep_slash);

/* n bytes as 2n lowercase hex digits into out, which holds 2n + 1 (NUL-terminated). */
void hex_encode(char *out, const void *data, size_t n);
/* The value of one hex digit (either case), -1 when c is none. */
int hex_digit(char c);

/* Append n bytes as base64 (RFC 4648, with padding). */
void b64_encode(struct sbuf *out, const void *data, size_t n);
/* Append what base64 text decodes to; false (out's new bytes undefined)
 * for text that is not base64 with padding. */
bool b64_decode(struct sbuf *out, const char *text, size_t n);

/* Append code point cp as UTF-8; one past U+10FFFF appends U+FFFD instead. */
void utf8_add(struct sbuf *sb, unsigned long cp);

/*
 * Append len bytes of s for a terminal: control characters (C0, DEL and
 * the C1 range U+0080..U+009F in UTF-8) become \xNN, so text from a job
 * (a name, a root cause) cannot move the cursor or clear the screen.
 * '\n' stays when keep_newline, '\t' always.
 */
void term_escape(struct sbuf *sb, const char *s, size_t len, bool keep_newline);

/* Append s as one CSV field (RFC 4180): quoted, with '"' doubled, when it holds ',', '"' or a newline. */
void csv_add(struct sbuf *sb, const char *s);

/*
 * Write v as a base-128 varint (protobuf, LEB128: low groups first, the top
 * bit set on all bytes but the last) into out; returns the bytes written,
 * 1 to VARINT_MAX.
 */
#define VARINT_MAX 10
size_t varint_put(unsigned char *out, uint64_t v);

#endif
