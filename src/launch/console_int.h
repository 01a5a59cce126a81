/*
 * console_int.h -- private to src/launch/: what `trainctl run` shows on a
 * terminal.  Worker lines that a metrics reader took (ingest.h, the took
 * callback) are not echoed; instead each rank has one progress line (its
 * step, of how many when the line says, its loss-like metric and the job's
 * accuracy metric, steps/s, ETA), a block kept at the bottom of the screen
 * and redrawn in place with ANSI codes.  Every other line is echoed as
 * before ("[r] line").  The logs keep everything whatever the console does.
 *
 * NOTES ON THE DESIGN
 * (1) console_new() says NULL unless stdout is a terminal that takes ANSI
 *     codes (TERM is not dumb) and the run is neither --raw nor --quiet:
 *     the caller then echoes as before, byte for byte.
 * (2) The block is redrawn at most 4 times a second (REDRAW_MS); a change
 *     in between waits for console_tick().  Echoed lines go above it: the
 *     block is erased, the lines written, the block drawn again when due.
 * (3) Lines are cut to the terminal's width, so the block's height in rows
 *     is its number of lines (the erase moves up that many).
 * (4) The supervisor's own messages go to stderr, often the same terminal:
 *     console_before_stderr() erases the block first (it comes back on the
 *     next tick).  It may be called from any thread; a mutex guards the
 *     console and at most one console exists at a time.
 * (5) console_free() draws the block one last time and leaves it, so the
 *     final progress stays on the screen above the result line.
 */
#ifndef TC_LAUNCH_CONSOLE_INT_H
#define TC_LAUNCH_CONSOLE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics/metrics.h"

struct console;

/* fd: the console (stdout); accuracy: metrics.accuracy or NULL (copied). */
struct console *console_new(int fd, bool raw, bool quiet, const char *accuracy);
void console_free(struct console *c);

/*
 * The next worker output handed to console_echo is data[0..len): the lines
 * the readers take meanwhile (console_took with a line inside it) are left
 * out of the echo.
 */
void console_expect(struct console *c, const char *data, size_t len);
/* A line a metrics reader took, with its records (the ingest's took callback). */
void console_took(struct console *c, int rank, const char *line, const struct metric_rec *recs,
		  size_t n);
/* Worker rank's whole lines: every line not taken, as "[rank] line". */
void console_echo(struct console *c, int rank, const char *data, size_t len);
/* Redraw when due; ms until it wants to be called again, -1: not needed. */
int console_tick(struct console *c, int64_t now_ms);
/* Erase the block before another writer uses the terminal (note 4). */
void console_before_stderr(void);

#endif
