/*
 * tfevents.h -- write TensorBoard event files (scalars only), so that
 * `tensorboard --logdir` shows a job's metrics without TensorFlow.
 *
 * File format (docs/formats.md, "TensorBoard event files"): records, each
 *   u64 LE length | u32 LE masked CRC32C(length bytes) | data | u32 LE masked CRC32C(data)
 * with mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8.  data is a protobuf
 * Event {wall_time=1 double, step=2 int64, file_version=3 string,
 * summary=5 Summary}; Summary {value=1 repeated Value}; Value {tag=1 string,
 * simple_value=2 float}.  The first record is file_version "brain.Event:2"
 * with source_metadata=10 {writer=1 "trainctl"}: the mark by which the
 * reader (tfread.h) knows trainctl's own files and never reads them back.
 * The file is events.out.tfevents.<secs>.<host> (".N" appended if taken).
 *
 * Records are buffered in memory and written by tfevents_flush() (and by
 * tfevents_add_scalar() once 64 KiB are pending); every write is whole
 * records, so a reader never sees half of one unless the disk fills.
 * A writer belongs to its caller; not thread-safe.
 */
#ifndef TC_METRICS_TFEVENTS_H
#define TC_METRICS_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define TFEVENTS_WRITER "trainctl" /* Event.source_metadata.writer of our files */

struct tfevents_writer;

/*
 * Create dir (mkdir -p) and a new event file in it; wall_time is the
 * creation time (0: now), used for the file name and the first event.
 */
int tfevents_open(const char *dir, double wall_time, struct tfevents_writer **out,
		  struct tc_err *err);
/* Append one scalar; wall_time 0 means now.  Values are stored as float. */
int tfevents_add_scalar(struct tfevents_writer *w, const char *tag, int64_t step,
			double value, double wall_time, struct tc_err *err);
/* Write pending records to the file (no fsync). */
int tfevents_flush(struct tfevents_writer *w, struct tc_err *err);
/* Flush, close and free; w is gone even when it fails.  NULL is a no-op. */
int tfevents_close(struct tfevents_writer *w, struct tc_err *err);
/* Path of the event file (owned by w). */
const char *tfevents_path(const struct tfevents_writer *w);

/* CRC32C (Castagnoli, reflected 0x82F63B78): start with crc = 0. */
uint32_t tfevents_crc32c(uint32_t crc, const void *data, size_t len);
uint32_t tfevents_mask_crc(uint32_t crc);

#endif
