/*
 * s3_int.h -- private to the S3 scheme: what s3.c (the requests, through
 * libcurl) shares with s3_ini.c (the configuration: storage.conf and the
 * environment) and s3_xml.c (S3's XML answers).
 *
 * The two helpers are functions of bytes: text in, parsed result out, no
 * libcurl, no network and no global state, so that unit tests and fuzzers
 * can call them directly.  Inputs need not be NUL-terminated.
 */
#ifndef TC_STORAGE_S3_INT_H
#define TC_STORAGE_S3_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/sbuf.h"

/* ---- configuration (s3_ini.c) ---- */

/* One opened s3:// or obs:// location's settings. */
struct s3 {
	char *access, *secret, *token, *region, *endpoint;
	bool virtual_host; /* bucket.host/key instead of host/bucket/key */
	bool verify_etag;  /* compare ETags of uploads with the MD5 of what was sent */
	char *sigv4;       /* "aws:amz:REGION:s3" */
};

/*
 * The settings for url (obs selects [obs] and the OBS_* variables):
 * environment first, then [s3] or [obs] of $TRAINCTL_STORAGE_CONFIG or
 * ~/.trainctl/storage.conf, then [s3] of that file, then defaults.
 * TC_EINPUT when credentials are missing or the endpoint is not http(s).
 */
int s3_config_load(const char *url, bool obs, struct s3 **out, struct tc_err *err);
struct storage;
/* A quick connect to st's endpoint; a failure said in warning (storage_check_location). */
void s3_probe(struct storage *st, struct sbuf *warning);
/* Frees s and wipes the secret; NULL is a no-op. */
void s3_config_free(struct s3 *s);

/* Value of key in [section] of an INI text (len bytes); heap string or NULL. */
char *s3_ini_get(const char *text, size_t len, const char *section, const char *key);

/* ---- XML answers (s3_xml.c) ---- */

/* One object of a ListObjectsV2 page. */
struct s3_xml_obj {
	char *key;   /* with the listing's prefix taken off */
	uint64_t size;
	int64_t mtime_ns; /* LastModified, nanoseconds since the epoch (0: none) */
	char *etag;  /* without quotes, or NULL */
};

struct s3_xml_list {
	struct s3_xml_obj *obj;
	size_t n, alloc;
	bool truncated;   /* more pages follow */
	char *next_token; /* NextContinuationToken, or NULL (then truncated is false) */
};

/*
 * A ListObjectsV2 answer: the objects whose keys start with prefix (and
 * are longer), prefix taken off, "folder/" markers left out, in the order
 * given.  Appends to out (zeroed or released before the first use).
 */
void s3_xml_parse_list(const char *xml, size_t len, const char *prefix, struct s3_xml_list *out);
void s3_xml_list_release(struct s3_xml_list *l);

/* An <Error> answer: its <Code> and <Message>, each heap or NULL; false when it has neither. */
bool s3_xml_parse_error(const char *xml, size_t len, char **code, char **message);
/* Does an answer hold <Error> (CompleteMultipartUpload can fail inside a 200)? */
bool s3_xml_is_error(const char *xml, size_t len);
/* InitiateMultipartUpload's <UploadId>: heap string, or NULL when absent. */
char *s3_xml_upload_id(const char *xml, size_t len);

/* The decoded text (entities, numeric references) of the first <tag>..</tag> in [xml, end). */
bool s3_xml_text(const char *xml, const char *end, const char *tag, struct sbuf *out);
/* "2026-01-02T03:04:05.678Z" as seconds since the epoch; 0 when not such a date. */
int64_t s3_parse_iso_date(const char *v);

#endif
