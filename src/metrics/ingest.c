/*
 * ingest.c -- live metrics of a running job: parse what the workers print
 * and what followed files gain, batch it to the store, write TensorBoard
 * event files; and the same event files from the store (export).  See
 * ingest.h for the rules (seq, ranks, tags, never failing the job).
 */
#include "metrics/ingest.h"
#include "metrics/metrics.h"
#include "metrics/tfevents.h"
#include "metrics/tfread.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FLUSH_RECORDS 65536         /* a batch this big is written at once */
#define MAX_PENDING (256u << 20)    /* bytes kept while the database refuses */
#define POLL_MS 500                 /* followed files are read this often */
#define READ_MAX (1u << 20)         /* bytes read from one file per tick */
#define MAX_RANK (1 << 20)          /* a worker rank beyond this is not believed */
/* A worker may start ranks of its own (torchrun under one trainctl worker,
 * as `zoo test` cases do), so lines may name ranks up to this many even in a
 * smaller job: a few dozen KiB of per-rank state at most. */
#define SELF_LAUNCHED_RANKS 1024
#define RETRY_MS 5000               /* pause after a failed database write */
#define SCAN_DEPTH 8                /* folders below a TensorBoard folder looked into */
#define MAX_EVENT_FILES 1024        /* event files followed at most (note 6) */

enum { W_STORE = 1, W_DROP = 2, W_TB = 4, W_FILE = 8, W_PAT = 16, W_EVFILES = 32 };

struct rank_st {
	bool used, dirty, tb_failed;
	bool printed; /* printed a line, metrics or not (note 5) */
	bool fresh; /* a new attempt: its next point record is a step for the callback */
	long long seq;
	struct sbuf last_step;
	long long lines, records, malformed;
	char *last_error;
	struct tfevents_writer *tb;
};

struct follow {
	char *path;
	int rank;
	int fd;
	off_t off;
	bool had_old;        /* the file existed when the job started */
	dev_t old_dev;
	ino_t old_ino;
	off_t old_size;
	bool more;           /* the last read stopped at READ_MAX */
	bool own;            /* the in-job helper's channel (note 7) */
	struct sbuf partial;
	/* a TensorBoard event file (note 6): records, not lines */
	struct tfread *tf;
	uint64_t keep_from;  /* records starting before this were there before the job */
	bool done;           /* trainctl's own file: never read (tfread.h note 4) */
};

struct metrics_ingest {
	int (*write)(void *, struct store_mbatch *, struct tc_err *);
	void *write_ctx;
	char *job;
	char *tb_dir;
	int family; /* 0: every format */
	struct metrics_parser *p;
	struct metrics_matcher *pat; /* metrics.patterns:, or NULL */
	struct store_mbatch *b;
	struct rank_st *r;
	size_t nr;
	int world;          /* the job's world size: lines name ranks below max(world, SELF_LAUNCHED_RANKS) */
	struct follow *f;
	size_t nf;
	char **tbd;         /* TensorBoard folders whose event files are followed */
	size_t ntbd, atbd;
	struct metric_rec *evrecs; /* one Event's records */
	size_t aevrecs;
	double since;       /* an event file last changed before this is the job's from its end */
	int *node_ranks;    /* this node's ranks (note 6), or NULL: every rank */
	size_t nnode_ranks;
	size_t nevfiles;
	int flush_ms;
	int64_t next_flush, next_poll;
	int64_t retry_at;   /* after a failed write: no write before this */
	void (*warn)(void *, const char *);
	void *warn_ctx;
	void (*step)(void *, int, long long, long long, double, double);
	void *step_ctx;
	void (*took)(void *, int, const char *, const struct metric_rec *, size_t);
	void *took_ctx;
	unsigned warned;
	long long lines, records, malformed;
	long long seen; /* every line fed */
	struct sbuf tmp;
};

static void warn_once(struct metrics_ingest *mi, unsigned bit, const char *fmt, ...) TC_PRINTF(3, 4);

static void warn_once(struct metrics_ingest *mi, unsigned bit, const char *fmt, ...)
{
	if ((mi->warned & bit) || !mi->warn)
		return;
	mi->warned |= bit;
	va_list ap;
	va_start(ap, fmt);
	sbuf_vsay(mi->warn, mi->warn_ctx, fmt, ap);
	va_end(ap);
}

static int family_of(enum metrics_format f)
{
	switch (f) {
	case METRICS_FMT_DLLL:
	case METRICS_FMT_DLL:
		return 1;
	case METRICS_FMT_TCAP_JSON:
	case METRICS_FMT_TCAP_PLAIN:
		return 2;
	case METRICS_FMT_MINDFORMERS:
		return 3;
	case METRICS_FMT_PATTERN:
	case METRICS_FMT_TFEVENTS:
		return -1; /* the job asked for these: any format */
	}
	return 0;
}

static int family_named(const char *name)
{
	static const char *const names[] = { "auto", "dllogger", "tcap", "mindformers" };
	for (int i = 0; name && i < 4; i++)
		if (!strcmp(name, names[i]))
			return i;
	return 0;
}

static struct rank_st *rank_get(struct metrics_ingest *mi, int rank)
{
	if ((size_t)rank >= mi->nr) {
		size_t n = (size_t)rank + 1;
		mi->r = xrealloc(mi->r, n * sizeof(*mi->r));
		memset(mi->r + mi->nr, 0, (n - mi->nr) * sizeof(*mi->r));
		for (size_t i = mi->nr; i < n; i++)
			sbuf_init(&mi->r[i].last_step, 0);
		mi->nr = n;
	}
	mi->r[rank].used = true;
	return &mi->r[rank];
}

/* ---- TensorBoard ---- */

/* The tag and step of a record (ingest.h note 4); false: not written. */
static bool tb_tag(struct sbuf *tag, const char *name, const struct store_mpoint *p,
		   int64_t *step)
{
	sbuf_reset(tag);
	switch (p->kind) {
	case STORE_MPOINT:
		sbuf_adds(tag, name);
		*step = store_mpoint_x(p);
		return true;
	case STORE_MEPOCH:
		sbuf_addf(tag, "epoch/%s", name);
		*step = p->epoch;
		return true;
	case STORE_MSUMMARY:
		sbuf_addf(tag, "summary/%s", name);
		*step = p->seq;
		return true;
	}
	return false;
}

static char *rank_dir(const char *dir, int rank)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_addf(&sb, "%s/rank-%d", dir, rank);
	return sbuf_detach(&sb);
}

static void tb_add(struct metrics_ingest *mi, int rank, struct rank_st *rs, const char *name,
		   const struct store_mpoint *p)
{
	struct tc_err err = TC_ERR_INIT;
	int64_t step;
	if (!mi->tb_dir || rs->tb_failed || !tb_tag(&mi->tmp, name, p, &step))
		return;
	if (!rs->tb) {
		char *dir = rank_dir(mi->tb_dir, rank);
		if (tfevents_open(dir, 0, &rs->tb, &err) < 0) {
			rs->tb_failed = true;
			warn_once(mi, W_TB, "no TensorBoard files: %s", err.msg);
		}
		free(dir);
	}
	if (rs->tb && tfevents_add_scalar(rs->tb, mi->tmp.buf, step, p->value, p->wall_time,
					  &err) < 0) {
		rs->tb_failed = true;
		warn_once(mi, W_TB, "TensorBoard files stopped: %s", err.msg);
		tfevents_close(rs->tb, NULL);
		rs->tb = NULL;
	}
	tc_err_release(&err);
}

/* ---- lines ---- */

static const char *value_text(struct sbuf *sb, const struct metric_rec *r)
{
	if (r->str)
		return r->str;
	sbuf_reset(sb);
	sbuf_addf(sb, "%.17g", r->value);
	return sb->buf;
}

/* A new step of rank: the step callback, with the step time the line reports if any. */
static void tell_step(struct metrics_ingest *mi, int rank, const struct metric_rec *r,
		      const struct metric_rec *recs, size_t n, double now)
{
	double own = NAN;
	for (size_t i = 0; i < n; i++) {
		if (!recs[i].has_value || recs[i].kind != METRICS_POINT)
			continue;
		if (!strcmp(recs[i].name, "step_time"))
			own = recs[i].unit && !strcmp(recs[i].unit, "ms") ? recs[i].value / 1000
									  : recs[i].value;
		else if (!strcmp(recs[i].name, "per_step_time"))
			own = recs[i].value / 1000;
	}
	mi->step(mi->step_ctx, rank, r->epoch, r->iter, own,
		 isfinite(r->wall_time) ? r->wall_time : now);
}

/* A line (or record) of rank that could not be read: counted, why kept (takes why). */
static void count_malformed(struct metrics_ingest *mi, int rank, char *why)
{
	struct rank_st *rs = rank_get(mi, rank);
	rs->malformed++;
	rs->dirty = true;
	free(rs->last_error);
	rs->last_error = why;
	mi->malformed++;
}

static int take_records(struct metrics_ingest *mi, int wrank, const struct metric_rec *recs,
			size_t n, double now, bool any_format);

static void one_record(struct metrics_ingest *mi, int wrank, const char *line, size_t len,
		       double now, bool any_format)
{
	const struct metric_rec *recs;
	size_t n;
	enum metrics_result res = metrics_parse_line(mi->p, line, len, &recs, &n);
	if (res == METRICS_NONE && mi->pat) {
		/* only lines no built-in format took (note 5) */
		n = metrics_matcher_match(mi->pat, line, len, &recs);
		res = n ? METRICS_PARSED : METRICS_NONE;
	}
	if (res == METRICS_NONE)
		return;
	if (res == METRICS_MALFORMED) {
		count_malformed(mi, wrank, xstrdup(metrics_parser_reason(mi->p)));
		return;
	}
	int rank = take_records(mi, wrank, recs, n, now, any_format);
	if (rank >= 0 && mi->took)
		mi->took(mi->took_ctx, rank, line, recs, n);
}

/*
 * The records of one line (or one Event) from worker or file wrank: the
 * rank they went to, or -1 when they were not taken (another format, a
 * rank the job does not have).  any_format: the in-job helper's channel,
 * kept whatever metrics.format says (note 7).
 */
static int take_records(struct metrics_ingest *mi, int wrank, const struct metric_rec *recs,
			size_t n, double now, bool any_format)
{
	if (n && mi->family && !any_format && family_of(recs[0].format) >= 0 &&
	    family_of(recs[0].format) != mi->family)
		return -1;
	if (n && recs[0].rank >= mi->world && recs[0].rank >= SELF_LAUNCHED_RANKS) {
		/* a rank the job does not have: an error of this line, not a
		 * per-rank entry for every rank up to it */
		struct sbuf why = SBUF_INIT;
		sbuf_addf(&why, "\"rank\": %d is not a rank of this job (world size %d)", recs[0].rank,
			  mi->world);
		count_malformed(mi, wrank, sbuf_detach(&why));
		return -1;
	}
	int rank = n && recs[0].rank >= 0 ? recs[0].rank : wrank;
	struct rank_st *rs = rank_get(mi, rank);
	rs->lines++;
	rs->records += (long long)n;
	rs->dirty = true;
	mi->lines++;
	mi->records += (long long)n;
	for (size_t i = 0; i < n; i++)
		if (recs[i].kind == METRICS_POINT) {
			const char *step = recs[i].step;
			bool fresh = rs->fresh;
			rs->fresh = false;
			if (!rs->seq || strcmp(step, rs->last_step.buf)) {
				rs->seq++;
				sbuf_reset(&rs->last_step);
				sbuf_adds(&rs->last_step, step);
			} else if (!fresh) {
				break;
			}
			if (mi->step)
				tell_step(mi, rank, &recs[i], recs, n, now);
			break;
		}
	for (size_t i = 0; i < n; i++) {
		const struct metric_rec *r = &recs[i];
		int kind;
		switch (r->kind) {
		case METRICS_METADATA:
			store_mbatch_meta(mi->b, r->name, r->key ? r->key : "", value_text(&mi->tmp, r));
			continue;
		case METRICS_PARAMETER:
			store_mbatch_param(mi->b, rank, r->name, value_text(&mi->tmp, r));
			continue;
		case METRICS_EPOCH:
			kind = STORE_MEPOCH;
			break;
		case METRICS_SUMMARY:
			kind = STORE_MSUMMARY;
			break;
		default:
			kind = STORE_MPOINT;
			break;
		}
		double wall = isfinite(r->wall_time) ? r->wall_time : now;
		struct store_mpoint pt = {
			.kind = kind, .seq = rs->seq, .epoch = r->epoch, .iter = r->iter,
			.step = r->step, .value = r->has_value ? r->value : NAN, .text = r->str,
			.wall_time = wall,
		};
		store_mbatch_point(mi->b, rank, r->name, &pt);
		/* an event file's scalars are in event files already */
		if (r->has_value && r->format != METRICS_FMT_TFEVENTS)
			tb_add(mi, rank, rs, r->name, &pt);
	}
	return rank;
}

static void flush(struct metrics_ingest *mi);

/*
 * Workers sharing one stdout run records together ("... imgs/sTCAPPDLL ...
 * rank : 3 ..."): each record of the line is read alone, so that one
 * record's "rank" never claims another's.
 */
static void one_line(struct metrics_ingest *mi, int wrank, const char *line, size_t len,
		     double now, bool any_format)
{
	mi->seen++;
	if ((size_t)wrank >= mi->nr || !mi->r[wrank].printed) {
		/* once per rank: its counters row says it printed (note 5) */
		struct rank_st *ws = rank_get(mi, wrank);
		ws->printed = ws->dirty = true;
	}
	while (len) {
		size_t first = metrics_first_record_len(line, len);
		one_record(mi, wrank, line, first, now, any_format);
		line += first;
		len -= first;
	}
}

void metrics_ingest_mark_attempt(struct metrics_ingest *mi)
{
	for (size_t i = 0; mi && i < mi->nr; i++)
		mi->r[i].fresh = true;
}

static void ingest_lines(struct metrics_ingest *mi, int rank, const char *data, size_t len,
			 bool any_format)
{
	if (!mi || rank < 0 || rank >= MAX_RANK)
		return;
	if (rank >= mi->world)
		mi->world = rank + 1; /* the supervisor's own count of its workers: trusted */
	double now = now_wall();
	const char *p = data, *end = data + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		one_line(mi, rank, p, n, now, any_format);
		p += n;
	}
	if (store_mbatch_pending(mi->b) >= FLUSH_RECORDS &&
	    (!mi->retry_at || now_mono_ms() >= mi->retry_at))
		flush(mi);
}

void metrics_ingest_lines(struct metrics_ingest *mi, int rank, const char *data, size_t len)
{
	ingest_lines(mi, rank, data, len, false);
}

/* ---- flushing ---- */

static void flush(struct metrics_ingest *mi)
{
	struct tc_err err = TC_ERR_INIT;
	for (size_t i = 0; i < mi->nr; i++) {
		struct rank_st *rs = &mi->r[i];
		if (rs->dirty)
			store_mbatch_counters(mi->b, (int)i, rs->lines, rs->records, rs->malformed,
					      rs->last_error);
		rs->dirty = false;
		if (rs->tb && tfevents_flush(rs->tb, &err) < 0) {
			warn_once(mi, W_TB, "TensorBoard files stopped: %s", err.msg);
			tfevents_close(rs->tb, NULL);
			rs->tb = NULL;
			rs->tb_failed = true;
		}
	}
	mi->retry_at = 0;
	int wrc = mi->write(mi->write_ctx, mi->b, &err);
	if (wrc < 0) {
		/* a busy or broken database is not asked again at once: every
		 * try may wait out the busy timeout */
		mi->retry_at = now_mono_ms() + RETRY_MS;
		warn_once(mi, W_STORE, "cannot store metrics (will retry): %s", err.msg);
		if (store_mbatch_bytes(mi->b) > MAX_PENDING) {
			warn_once(mi, W_DROP, "dropping %zu metrics points the database did not take",
				  store_mbatch_pending(mi->b));
			store_mbatch_drop(mi->b);
		}
	}
	tc_err_release(&err);
}

/* ---- followed files ---- */

/* The rank a malformed record of a file is counted on: its own, when believable (note 3). */
static int file_rank(const struct metrics_ingest *mi, int rank)
{
	return rank < mi->world || rank < SELF_LAUNCHED_RANKS ? rank : 0;
}

/* The scalars of one Event, as the records of one line at its step (note 6). */
static void take_event(struct metrics_ingest *mi, const struct follow *f,
		       const struct tfread_event *ev, double now)
{
	char step[24];
	size_t n = 0;
	snprintf(step, sizeof(step), "%lld", (long long)ev->step);
	XGROW(mi->evrecs, ev->nscalars, mi->aevrecs);
	for (size_t i = 0; i < ev->nscalars; i++) {
		if (!*ev->scalars[i].tag)
			continue; /* no name to store it under */
		mi->evrecs[n++] = (struct metric_rec){
			.kind = METRICS_POINT, .format = METRICS_FMT_TFEVENTS, .rank = f->rank,
			.epoch = -1, .iter = ev->step, .step = step, .name = ev->scalars[i].tag,
			.has_value = true, .value = ev->scalars[i].value,
			.wall_time = ev->wall_time > 0 ? ev->wall_time : NAN, .elapsed = NAN,
		};
	}
	if (n)
		take_records(mi, 0, mi->evrecs, n, now, false);
}

/* Every whole record f's reader holds; at_end: a cut one is corrupt (tfread.h note 1). */
static void follow_events(struct metrics_ingest *mi, struct follow *f, bool at_end)
{
	struct tfread_event ev;
	enum tfread_result res;
	double now = now_wall();
	while ((res = tfread_next(f->tf, at_end, &ev)) != TFREAD_MORE) {
		if (res == TFREAD_CORRUPT) {
			if (tfread_corrupt_offset(f->tf) < f->keep_from)
				continue; /* damage from before the job is not the job's */
			struct sbuf why = SBUF_INIT;
			sbuf_addf(&why, "%s: %s", f->path, tfread_reason(f->tf));
			count_malformed(mi, file_rank(mi, f->rank), sbuf_detach(&why));
			continue;
		}
		if (ev.trainctl) { /* our own output (tfread.h note 4): never read back */
			f->done = true;
			tfread_free(f->tf);
			f->tf = NULL;
			(void)close(f->fd); /* read-only: nothing to lose */
			f->fd = -1;
			return;
		}
		if (ev.offset >= f->keep_from)
			take_event(mi, f, &ev, now);
	}
}

static void follow_read(struct metrics_ingest *mi, struct follow *f, bool to_end)
{
	if (f->done)
		return;
	if (f->fd < 0) {
		f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
		if (f->fd < 0)
			return; /* not written yet */
		struct stat sb;
		if (fstat(f->fd, &sb) == 0 && f->had_old && sb.st_dev == f->old_dev &&
		    sb.st_ino == f->old_ino && sb.st_size >= f->old_size)
			f->off = f->old_size; /* what was there before the job is not ours */
	}
	struct stat sb;
	if (fstat(f->fd, &sb) == 0 && sb.st_size < f->off) {
		f->off = 0; /* truncated: the writer started over */
		sbuf_reset(&f->partial);
		if (f->tf) {
			tfread_free(f->tf);
			f->tf = tfread_new();
			f->keep_from = 0;
		}
	}
	f->more = false;
	size_t budget = to_end ? SIZE_MAX : READ_MAX;
	char buf[65536];
	while (budget) {
		size_t want = budget < sizeof(buf) ? budget : sizeof(buf);
		ssize_t r = pread(f->fd, buf, want, f->off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			warn_once(mi, W_FILE, "cannot read '%s': %s", f->path, strerror(errno));
			return;
		}
		if (r == 0)
			break;
		f->off += r;
		budget -= (size_t)r;
		if (!budget)
			f->more = true;
		if (f->tf) {
			tfread_feed(f->tf, buf, (size_t)r);
			follow_events(mi, f, false);
			if (f->done)
				return;
			continue;
		}
		sbuf_add(&f->partial, buf, (size_t)r);
		const char *nl = memrchr(f->partial.buf, '\n', f->partial.len);
		if (nl) {
			size_t whole = (size_t)(nl - f->partial.buf) + 1;
			ingest_lines(mi, f->rank, f->partial.buf, whole, f->own);
			sbuf_remove_front(&f->partial, whole);
		}
	}
	if (to_end && f->tf)
		follow_events(mi, f, true);
	if (to_end && f->partial.len) {
		sbuf_addch(&f->partial, '\n');
		ingest_lines(mi, f->rank, f->partial.buf, f->partial.len, f->own);
		sbuf_reset(&f->partial);
	}
}

/*
 * Follow path; old: what it holds now was there before the job (metrics.files,
 * the channel); own: the in-job helper's channel (note 7).
 */
static struct follow *add_follow(struct metrics_ingest *mi, const char *path, int rank, bool old,
				 bool own)
{
	mi->f = xrealloc(mi->f, (mi->nf + 1) * sizeof(*mi->f));
	struct follow *f = &mi->f[mi->nf++];
	memset(f, 0, sizeof(*f));
	f->path = xstrdup(path);
	f->rank = rank;
	f->own = own;
	f->fd = -1;
	sbuf_init(&f->partial, 0);
	struct stat sb;
	if (old && stat(path, &sb) == 0) {
		f->had_old = true;
		f->old_dev = sb.st_dev;
		f->old_ino = sb.st_ino;
		f->old_size = sb.st_size;
	}
	return f;
}

/* ---- TensorBoard folders (note 6) ---- */

/* The last folder below the TensorBoard folder named rank-N, rank_N or rankN gives N; else 0. */
static int rank_in_path(const char *rel)
{
	int rank = 0;
	for (const char *c = rel; *c;) {
		size_t n = strcspn(c, "/"), i = 4;
		if (n > 4 && !strncmp(c, "rank", 4)) {
			if (c[i] == '-' || c[i] == '_')
				i++;
			size_t digits = i;
			long v = 0;
			while (i < n && c[i] >= '0' && c[i] <= '9' && v < MAX_RANK)
				v = v * 10 + (c[i++] - '0');
			if (i == n && i > digits && v < MAX_RANK)
				rank = (int)v;
		}
		c += n;
		if (*c == '/')
			c++;
	}
	return rank;
}

static bool followed(const struct metrics_ingest *mi, const char *path)
{
	for (size_t i = 0; i < mi->nf; i++)
		if (!strcmp(mi->f[i].path, path))
			return true;
	return false;
}

static void add_event_file(struct metrics_ingest *mi, const char *path, size_t root,
			   const struct stat *sb)
{
	if (mi->nevfiles >= MAX_EVENT_FILES) {
		warn_once(mi, W_EVFILES, "more than %d TensorBoard event files: '%s' and later ones "
			  "are not read", MAX_EVENT_FILES, path);
		return;
	}
	mi->nevfiles++;
	struct follow *f = add_follow(mi, path, rank_in_path(path + root), false, false);
	bool mine = !mi->node_ranks;
	for (size_t i = 0; i < mi->nnode_ranks && !mine; i++)
		mine = mi->node_ranks[i] == f->rank;
	if (!mine) { /* another node's (note 6): known, never read */
		f->done = true;
		return;
	}
	f->tf = tfread_new();
	double mtime = (double)sb->st_mtim.tv_sec + (double)sb->st_mtim.tv_nsec / 1e9;
	if (mtime < mi->since)
		f->keep_from = (uint64_t)sb->st_size;
}

/* Event files (names holding ".tfevents.") below path not followed yet; no symlinks. */
static void scan_dir(struct metrics_ingest *mi, struct sbuf *path, size_t root, int depth)
{
	DIR *d = opendir(path->buf);
	if (!d)
		return; /* not made yet, or gone */
	size_t keep = path->len;
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *name = de->d_name;
		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		sbuf_setlen(path, keep);
		sbuf_addch(path, '/');
		sbuf_adds(path, name);
		struct stat sb;
		if (lstat(path->buf, &sb) < 0)
			continue;
		if (S_ISDIR(sb.st_mode) && depth < SCAN_DEPTH)
			scan_dir(mi, path, root, depth + 1);
		else if (S_ISREG(sb.st_mode) && strstr(name, ".tfevents.") && !followed(mi, path->buf))
			add_event_file(mi, path->buf, root, &sb);
	}
	sbuf_setlen(path, keep);
	closedir(d);
}

static void scan_tb(struct metrics_ingest *mi)
{
	struct sbuf path = SBUF_INIT;
	for (size_t i = 0; i < mi->ntbd; i++) {
		sbuf_reset(&path);
		sbuf_adds(&path, mi->tbd[i]);
		scan_dir(mi, &path, path.len + 1, 0);
	}
	sbuf_release(&path);
}

/* path, or one follow per rank first .. first+n-1 when it holds "{rank}" */
static void add_follows(struct metrics_ingest *mi, const char *path, int first, int n, bool own)
{
	const char *at = strstr(path, "{rank}");
	if (!at) {
		add_follow(mi, path, first, true, own);
		return;
	}
	for (int r = first; r < first + (n > 0 ? n : 1); r++) {
		struct sbuf p = SBUF_INIT;
		sbuf_add(&p, path, (size_t)(at - path));
		sbuf_addf(&p, "%d%s", r, at + 6);
		add_follow(mi, p.buf, r, true, own);
		sbuf_release(&p);
	}
}

/* ---- the object ---- */

struct metrics_ingest *metrics_ingest_new(const struct metrics_ingest_opts *o)
{
	struct metrics_ingest *mi = xcalloc(1, sizeof(*mi));
	mi->write = o->write;
	mi->write_ctx = o->write_ctx;
	mi->job = xstrdup(o->job_id);
	mi->tb_dir = o->tb_dir ? xstrdup(o->tb_dir) : NULL;
	mi->family = family_named(o->format);
	mi->p = metrics_parser_new();
	mi->b = store_mbatch_new(o->job_id);
	mi->flush_ms = o->flush_ms > 0 ? o->flush_ms : 500;
	mi->warn = o->warn;
	mi->warn_ctx = o->warn_ctx;
	mi->step = o->step;
	mi->step_ctx = o->step_ctx;
	mi->took = o->took;
	mi->took_ctx = o->took_ctx;
	if (o->npatterns) {
		size_t bad = 0;
		mi->pat = metrics_matcher_new(o->patterns, o->npatterns, &bad);
		if (!mi->pat) /* the spec's walk compiled it: not seen in practice */
			warn_once(mi, W_PAT, "metrics.patterns[%zu] does not compile; patterns not used",
				  bad);
	}
	sbuf_init(&mi->tmp, 0);
	/* the world size: the caller knows it for every node of a multi-node
	 * job; nranks counts this supervisor's workers */
	mi->world = o->nranks > 0 ? o->nranks : 1;
	if (o->world > mi->world)
		mi->world = o->world;
	int64_t now = now_mono_ms();
	mi->next_flush = now + mi->flush_ms;
	mi->next_poll = now;
	for (size_t i = 0; i < o->nfiles; i++)
		add_follows(mi, o->files[i], 0, o->nranks, false);
	if (o->channel)
		add_follows(mi, o->channel, o->first_rank, o->nranks, true);
	mi->since = o->since > 0 ? o->since - 0.05 : now_wall(); /* file times lag a clock tick */
	if (o->node_ranks) {
		size_t bytes = o->nnode_ranks * sizeof(*mi->node_ranks);
		mi->node_ranks = xmalloc(bytes ? bytes : 1);
		memcpy(mi->node_ranks, o->node_ranks, bytes);
		mi->nnode_ranks = o->nnode_ranks;
	}
	for (size_t i = 0; i < o->ntb_dirs; i++) {
		XGROW(mi->tbd, mi->ntbd + 1, mi->atbd);
		mi->tbd[mi->ntbd++] = xstrdup(o->tb_dirs[i]);
	}
	scan_tb(mi);
	return mi;
}

int metrics_ingest_tick(struct metrics_ingest *mi, int64_t now)
{
	if (!mi)
		return 60000;
	bool more = false;
	if (now >= mi->next_poll) {
		scan_tb(mi);
		for (size_t i = 0; i < mi->nf; i++) {
			follow_read(mi, &mi->f[i], false);
			more |= mi->f[i].more;
		}
		mi->next_poll = now + POLL_MS;
	}
	if (now >= mi->next_flush && now >= mi->retry_at) {
		flush(mi);
		mi->next_flush = now + mi->flush_ms;
	}
	if (more)
		return 0;
	int64_t flush_at = mi->next_flush > mi->retry_at ? mi->next_flush : mi->retry_at;
	int64_t next = (mi->nf || mi->ntbd) && mi->next_poll < flush_at ? mi->next_poll : flush_at;
	return next > now ? (int)(next - now) : 0;
}

void metrics_ingest_finish(struct metrics_ingest *mi)
{
	if (!mi)
		return;
	scan_tb(mi);
	for (size_t i = 0; i < mi->nf; i++)
		follow_read(mi, &mi->f[i], true);
	flush(mi);
	for (size_t i = 0; i < mi->nr; i++) {
		struct tc_err err = TC_ERR_INIT;
		if (mi->r[i].tb && tfevents_close(mi->r[i].tb, &err) < 0)
			warn_once(mi, W_TB, "TensorBoard files: %s", err.msg);
		mi->r[i].tb = NULL;
		tc_err_release(&err);
	}
}

void metrics_ingest_counts(const struct metrics_ingest *mi, long long *lines, long long *records,
			   long long *malformed)
{
	*lines = mi ? mi->lines : 0;
	*records = mi ? mi->records : 0;
	*malformed = mi ? mi->malformed : 0;
}

const char *metrics_ingest_hint(const struct metrics_ingest *mi)
{
	return mi && mi->seen && !mi->records && !mi->malformed ? metrics_none_hint : NULL;
}

void metrics_ingest_free(struct metrics_ingest *mi)
{
	if (!mi)
		return;
	metrics_matcher_free(mi->pat);
	for (size_t i = 0; i < mi->nr; i++) {
		sbuf_release(&mi->r[i].last_step);
		free(mi->r[i].last_error);
		tfevents_close(mi->r[i].tb, NULL);
	}
	for (size_t i = 0; i < mi->nf; i++) {
		free(mi->f[i].path);
		if (mi->f[i].fd >= 0)
			close(mi->f[i].fd);
		sbuf_release(&mi->f[i].partial);
		tfread_free(mi->f[i].tf);
	}
	for (size_t i = 0; i < mi->ntbd; i++)
		free(mi->tbd[i]);
	free(mi->tbd);
	free(mi->evrecs);
	free(mi->node_ranks);
	free(mi->r);
	free(mi->f);
	store_mbatch_free(mi->b);
	metrics_parser_free(mi->p);
	sbuf_release(&mi->tmp);
	free(mi->job);
	free(mi->tb_dir);
	free(mi);
}

/* ---- export ---- */

struct tb_item {
	const struct store_mpoint *p;
	const char *metric;
	size_t order;
};

static int cmp_item(const void *a, const void *b)
{
	const struct tb_item *x = a, *y = b;
	if (x->p->seq != y->p->seq)
		return x->p->seq < y->p->seq ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

int metrics_export_tb(struct store *st, const char *job_id, const char *dir, size_t *nfiles,
		      size_t *npoints, struct tc_err *err)
{
	struct store_mseries *v = NULL;
	size_t nv = 0;
	*nfiles = *npoints = 0;
	int rc = store_metric_series(st, job_id, NULL, -1, &v, &nv, err);
	if (!rc)
		rc = metrics_export_tb_series(v, nv, dir, nfiles, npoints, err);
	store_mseries_free(v, nv);
	return rc;
}

int metrics_export_tb_series(const struct store_mseries *v, size_t nv, const char *dir,
			     size_t *nfiles, size_t *npoints, struct tc_err *err)
{
	struct sbuf tag = SBUF_INIT;
	struct tb_item *items = NULL;
	size_t nitems = 0, aitems = 0;
	int rc = 0;
	*nfiles = *npoints = 0;
	/* ranks in ascending order; the series come by metric then rank */
	int rank = -1;
	for (;;) {
		int next = -1;
		for (size_t i = 0; i < nv; i++)
			if (v[i].rank > rank && (next < 0 || v[i].rank < next))
				next = v[i].rank;
		if (next < 0)
			break;
		rank = next;
		nitems = 0;
		for (size_t i = 0; i < nv; i++) {
			if (v[i].rank != rank)
				continue;
			for (size_t k = 0; k < v[i].n; k++) {
				if (v[i].v[k].text)
					continue;
				XGROW(items, nitems + 1, aitems);
				items[nitems] = (struct tb_item){ &v[i].v[k], v[i].metric, nitems };
				nitems++;
			}
		}
		if (!nitems)
			continue;
		qsort(items, nitems, sizeof(*items), cmp_item);
		char *rdir = rank_dir(dir, rank);
		struct tfevents_writer *w = NULL;
		rc = tfevents_open(rdir, items[0].p->wall_time, &w, err);
		free(rdir);
		if (rc)
			goto out;
		for (size_t i = 0; i < nitems && !rc; i++) {
			const struct store_mpoint *p = items[i].p;
			int64_t step;
			if (tb_tag(&tag, items[i].metric, p, &step)) {
				rc = tfevents_add_scalar(w, tag.buf, step, p->value, p->wall_time, err);
				(*npoints)++;
			}
		}
		if (rc) {
			tfevents_close(w, NULL);
			goto out;
		}
		if ((rc = tfevents_close(w, err)))
			goto out;
		(*nfiles)++;
	}
out:
	free(items);
	sbuf_release(&tag);
	return rc;
}
