/*
 * store_metrics_int.h -- private to the metrics files of src/store/: what the
 * writer (store_metrics.c) and the reader (store_metrics_read.c) share.
 */
#ifndef TC_STORE_METRICS_INT_H
#define TC_STORE_METRICS_INT_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>

#include "store/store_metrics.h"

/* The version byte that opens a chunk (store_metrics.c, note 2). */
#define CHUNK_VERSION 1

/* The columns of metric_summary after series_id, in the order both read and write them. */
#define SUMMARY_COLS                                                                           \
	"kind, points, n, n_finite, sum, n_pos, sum_pos, min, min_step, max, max_step, last,"  \
	" last_step, last_index, last_text"

/* A REAL column, NaN for NULL. */
double col_num(sqlite3_stmt *q, int i);
/*
 * One zigzag varint at *p (advanced past it); false when it runs past end.
 * Here, inline, as it was when static: a show decodes three a point.
 */
static inline bool get_varint(const unsigned char **p, const unsigned char *end, long long *out)
{
	unsigned long long u = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (*p >= end)
			return false;
		unsigned char c = *(*p)++;
		u |= (unsigned long long)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*out = (long long)(u >> 1) ^ -(long long)(u & 1);
			return true;
		}
	}
	return false;
}

/* Hand the points of one blob to fn; -1 when the blob is damaged, else fn's first non-zero. */
int walk_chunk(const unsigned char *p, size_t len,
	       int (*fn)(void *arg, const struct store_mpoint *p), void *arg);

#endif
