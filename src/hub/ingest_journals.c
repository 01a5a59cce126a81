/*
 * ingest_journals.c -- a hub reads the journals a gone supervisor of its own host
 * left in the job's run folder (hub.h: hub_ingest_journals), so that a
 * supervisor need not wait long for a hub that is down.
 *
 * The run folder belongs to the job's account, so everything in it is
 * untrusted input read by a process that may be root: each name is opened
 * with O_NOFOLLOW relative to a descriptor of the folder above it (the
 * server's own runs/), owner and type are checked on the descriptor, the
 * part to read is bounded, and each line passes the checks a supervisor's
 * own records would pass, plus two: no file record (a server's supervisor
 * shares its run folder with the hub, so it never sends one, and root must
 * not write where the account points) and no record that names another
 * job.  The job is the folder's; nothing in the file chooses it.
 */
#include "hub/hub.h"
#include "hub/hub_int.h"
#include "core/strvec.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK (4 << 20) /* bytes of whole lines applied at a time */

static bool stream_ok(const char *s, size_t n)
{
	if (!n || n > 128)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_' || s[i] == '.'))
			return false;
	return true;
}

/* Could the job's supervisor have written this line?  false: why says what it is. */
static bool line_ok(const char *job, const char *p, const char *end, long long *seq,
		    struct sbuf *why)
{
	const char *rest = NULL;
	*seq = hub_line_seq(p, end, &rest);
	if (*seq < 0) {
		sbuf_adds(why, "a line that is no record");
		return false;
	}
	/* a metrics record (most of a journal): base64 only, no job in it (event.c) */
	static const char mpre[] = "\"ev\":\"metrics\",\"b\":\"";
	size_t ml = sizeof(mpre) - 1, n = (size_t)(end - rest);
	if (n > ml + 2 && !memcmp(rest, mpre, ml) && !memcmp(end - 2, "\"}", 2) &&
	    !memchr(rest + ml, '"', n - ml - 2))
		return true;
	json_t *o = json_loadb(p, (size_t)(end - p), 0, NULL);
	const char *ev = json_string_value(json_object_get(o, "ev"));
	json_t *jv = json_object_get(o, "job");
	bool ok = false;
	if (!json_is_object(o) || !ev)
		sbuf_adds(why, "a line that is no record");
	else if (!strcmp(ev, "file"))
		sbuf_adds(why, "a file record (a supervisor of this host sends none)");
	else if (jv && !(json_is_string(jv) && !strcmp(json_string_value(jv), job)))
		sbuf_addf(why, "a record of another job (%.64s)",
			  json_is_string(jv) ? json_string_value(jv) : "not a name");
	else
		ok = true;
	json_decref(o);
	return ok;
}

/* Rename dir/name to dir/name<suffix>: never taken again (rename follows no link). */
static void set_aside(int dfd, const char *name, const char *suffix)
{
	struct sbuf to = SBUF_INIT;
	sbuf_addf(&to, "%s%s", name, suffix);
	if (renameat(dfd, name, dfd, to.buf) < 0)
		errno = 0; /* read either way; the hub's dedup keeps a second reading harmless */
	sbuf_release(&to);
}

/*
 * Apply the journal fd (stream) from its first unacknowledged line to its
 * size: 0 taken whole, 1 refused (why), or a store error (try later).
 */
static int take(struct hub *h, const char *job, const char *stream, int fd, off_t size,
		long long max_bytes, struct sbuf *why, struct tc_err *err)
{
	/* past the hole of what the hub acknowledged (remote.c: release_acked) */
	off_t off = lseek(fd, 0, SEEK_DATA);
	if (off < 0)
		return 0; /* empty or all hole: nothing left */
	if (size - off > max_bytes) {
		sbuf_addf(why, "%lld bytes to read, over the limit of %lld",
			  (long long)(size - off), max_bytes);
		return 1;
	}
	struct sbuf buf = SBUF_INIT;
	int rc = 0;
	bool first = off > 0; /* the data may start inside a line the hub has */
	while (off < size && !rc) {
		size_t want = (size_t)(size - off) < CHUNK ? (size_t)(size - off) : CHUNK;
		sbuf_reset(&buf);
		sbuf_grow(&buf, want);
		ssize_t got = pread(fd, buf.buf, want, off);
		if (got <= 0) {
			rc = tc_error_errno(err, TC_ESYS, "cannot read the journal of %s", job);
			break;
		}
		buf.len = (size_t)got;
		buf.buf[buf.len] = '\0';
		const char *p = buf.buf, *end = buf.buf + buf.len;
		if (first && !(end - p > 7 && !memcmp(p, "{\"seq\":", 7))) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			if (!nl) {
				sbuf_adds(why, "a line longer than a batch");
				rc = 1;
				break;
			}
			p = nl + 1;
		}
		first = false;
		const char *start = p, *ok_end = p;
		long long last = 0, seq = 0;
		bool bad = false;
		while (p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			if (!nl)
				break; /* the rest of the chunk: the next read's */
			if (!line_ok(job, p, nl, &seq, why)) {
				bad = true;
				break;
			}
			last = seq;
			p = ok_end = nl + 1;
		}
		if (ok_end > start) {
			long long acked = 0;
			rc = hub_apply_local(h, job, stream, start, (size_t)(ok_end - start), &acked, err);
			if (!rc && acked < last) {
				sbuf_addf(why, "the records after %lld do not follow", acked);
				rc = 1;
			}
		} else if (!bad && off + (off_t)buf.len >= size) {
			break; /* a torn last line: the writer was killed inside its append */
		} else if (!bad) {
			sbuf_adds(why, "a line longer than a batch");
			rc = 1;
		}
		if (!rc && bad)
			rc = 1;
		off += (off_t)(ok_end - buf.buf);
		if (!rc && ok_end == start)
			break;
	}
	sbuf_release(&buf);
	return rc;
}

int hub_ingest_journals(struct hub *h, int runs_fd, const char *job, uid_t owner,
			long long max_bytes, struct hub_ingest_result *res, struct tc_err *err)
{
	memset(res, 0, sizeof(*res));
	if (!stream_ok(job, strlen(job)))
		return tc_error(err, TC_EUSAGE, "hub: bad job name");
	int rc = 0;
	struct stat sb;
	int rd = openat(runs_fd, job, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (rd < 0)
		return errno == ENOENT ? 0 : tc_error_errno(err, TC_ESYS, "the run folder of %s", job);
	if (fstat(rd, &sb) < 0 || (sb.st_uid != owner && sb.st_uid != geteuid())) {
		close(rd);
		return tc_error(err, TC_ESYS, "the run folder of %s has an owner of its own", job);
	}
	int jd = openat(rd, "journal", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	close(rd);
	if (jd < 0) {
		if (errno == ENOENT)
			return 0;
		res->refused++;
		struct sbuf why = SBUF_INIT;
		sbuf_addf(&why, "journal refused: runs/%s/journal is not a folder (%s)", job,
			  strerror(errno));
		rc = hub_job_event(h, job, why.buf, err);
		sbuf_release(&why);
		return rc;
	}
	DIR *d = NULL;
	int dd = dup(jd);
	if (dd < 0 || !(d = fdopendir(dd))) {
		rc = tc_error_errno(err, TC_ESYS, "the journal folder of %s", job);
		if (dd >= 0)
			close(dd);
		close(jd);
		return rc;
	}
	bool mine = fstat(jd, &sb) == 0 && S_ISDIR(sb.st_mode) && sb.st_uid == owner;
	struct strvec names = STRVEC_INIT;
	struct dirent *e;
	while (mine && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n > 6 && !strcmp(e->d_name + n - 6, ".jsonl") && stream_ok(e->d_name, n - 6))
			strvec_push(&names, e->d_name);
	}
	closedir(d);
	struct sbuf why = SBUF_INIT, stream = SBUF_INIT;
	if (!mine) {
		res->refused++;
		sbuf_addf(&why, "journal refused: runs/%s/journal belongs to uid %u, not the job's",
			  job, (unsigned)sb.st_uid);
		rc = hub_job_event(h, job, why.buf, err);
	}
	for (size_t i = 0; i < names.nr && !rc; i++) {
		const char *name = names.v[i];
		sbuf_reset(&why);
		sbuf_reset(&stream);
		sbuf_add(&stream, name, strlen(name) - 6);
		int fd = openat(jd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		int took = 1;
		if (fd < 0 && errno == ENOENT)
			continue; /* gone since the listing */
		if (fd < 0)
			sbuf_addf(&why, "%s", errno == ELOOP ? "a symbolic link" : strerror(errno));
		else if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode))
			sbuf_adds(&why, "not a regular file");
		else if (sb.st_uid != owner)
			sbuf_addf(&why, "owned by uid %u, not the job's", (unsigned)sb.st_uid);
		else if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			res->busy++; /* a live process holds it: it sends it itself */
			took = -1;
		} else {
			took = take(h, job, stream.buf, fd, sb.st_size, max_bytes, &why, err);
		}
		if (fd >= 0)
			close(fd);
		if (took == 0) {
			res->taken++;
			set_aside(jd, name, ".done");
		} else if (took == 1) {
			res->refused++;
			set_aside(jd, name, ".refused");
			struct sbuf ev = SBUF_INIT;
			sbuf_addf(&ev, "journal refused: runs/%s/journal/%s: %s", job, name, why.buf);
			rc = hub_job_event(h, job, ev.buf, err);
			sbuf_release(&ev);
		} else if (took != -1) {
			rc = took; /* the store: the journal stays for the next look */
		}
	}
	strvec_clear(&names);
	if (!rc && res->taken) {
		/* its end came from the journal: the report its supervisor could not ask for */
		struct tc_err e2 = TC_ERR_INIT;
		if (hub_write_report(h, job, &e2)) {
			sbuf_reset(&why);
			sbuf_addf(&why, "report.json not written: %s", e2.msg);
			rc = hub_job_event(h, job, why.buf, err);
		}
		tc_err_release(&e2);
	}
	sbuf_release(&why);
	sbuf_release(&stream);
	close(jd);
	return rc;
}
