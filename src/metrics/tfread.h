/*
 * tfread.h -- read TensorBoard event files: the scalars of the Events, for
 * the supervisor to store as metrics (ingest.c follows the files).  The
 * writer is tfevents.h; the CRC32C and its mask are shared with it.
 *
 * A reader is a byte stream: the caller feeds it what the file gained and
 * asks for the next item until it wants more bytes.  Pure C, no I/O.
 *
 * NOTES ON THE DESIGN
 * (1) Framing (docs/formats.md, "TensorBoard event files"): u64 LE length,
 *     u32 masked CRC32C of those 8 bytes, the data, u32 masked CRC32C of
 *     the data.  A record that is not whole yet is waited for (TFREAD_MORE)
 *     unless the caller says the stream is at its end: then it is
 *     TFREAD_CORRUPT ("truncated").
 * (2) Corruption is never fatal and counted once per damaged stretch: a
 *     bad data CRC (or an Event that does not decode) skips that record,
 *     its length being trusted; a bad length CRC, or a length over
 *     TFREAD_MAX_RECORD, cannot be trusted, so the reader looks for the next
 *     offset whose 12 header bytes check, one byte at a time.
 * (3) Event {wall_time=1 double, step=2 int64, file_version=3 string,
 *     summary=5 Summary, source_metadata=10 {writer=1 string}}; Summary
 *     {value=1 repeated Value}; Value {tag=1 string, simple_value=2 float,
 *     metadata=9 {plugin_data=1 {plugin_name=1}}, tensor=8 TensorProto}.
 *     A Value is a scalar when it has simple_value, or a tensor of dtype
 *     DT_FLOAT/DT_DOUBLE/DT_INT32/DT_INT64 holding exactly one value (in
 *     float_val=5, double_val=6, int_val=7, int64_val=10, packed or not, or
 *     tensor_content=4) whose plugin, when named, is "scalars".  Everything
 *     else is skipped by its wire type (varint, 64-bit, length-delimited,
 *     32-bit); groups and unknown wire types make the Event corrupt.
 * (4) An Event whose source_metadata.writer is "trainctl" was written by
 *     trainctl itself (tfevents.h marks its files so): the caller skips
 *     such a file, so that trainctl never reads its own output back.
 * (5) Memory: the bytes of one record at most (plus what was fed past
 *     it); the scalars and their tags live in the reader until the next
 *     tfread_next() or tfread_feed().
 */
#ifndef TC_METRICS_TFREAD_H
#define TC_METRICS_TFREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TFREAD_MAX_RECORD (64u << 20) /* a longer record is corrupt */

struct tfread_scalar {
	const char *tag; /* NUL-terminated; may be "" */
	double value;
};

struct tfread_event {
	uint64_t offset;       /* where its record starts in the stream */
	double wall_time;      /* 0 when absent */
	int64_t step;          /* 0 when absent (proto3) */
	const char *file_version; /* or NULL */
	bool trainctl;         /* source_metadata.writer is "trainctl" (note 4) */
	size_t nscalars;
	const struct tfread_scalar *scalars;
};

enum tfread_result {
	TFREAD_MORE = 0,     /* nothing whole left: feed more bytes */
	TFREAD_EVENT = 1,    /* *ev holds the next Event */
	TFREAD_CORRUPT = -1, /* a damaged or truncated record: tfread_reason() */
};

struct tfread;

struct tfread *tfread_new(void);
void tfread_free(struct tfread *r); /* NULL is a no-op */
/* Append bytes the stream gained. */
void tfread_feed(struct tfread *r, const void *data, size_t len);
/*
 * The next item.  at_end: no byte will follow what was fed, so a record
 * cut short is TFREAD_CORRUPT, and then TFREAD_MORE for good.
 */
enum tfread_result tfread_next(struct tfread *r, bool at_end, struct tfread_event *ev);
/* After TFREAD_CORRUPT: why, with the record's offset (owned by r). */
const char *tfread_reason(const struct tfread *r);
/* After TFREAD_CORRUPT: the offset where the damage starts. */
uint64_t tfread_corrupt_offset(const struct tfread *r);
/*
 * Decode one Event's bytes (no framing) into *ev, its strings kept in r;
 * false when they are not an Event (note 3).
 */
bool tfread_parse_event(struct tfread *r, const void *data, size_t len, struct tfread_event *ev);

#endif
