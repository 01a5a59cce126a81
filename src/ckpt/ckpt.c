/* ckpt.c -- checkpoint discovery, completeness, checksums, resume choice; see ckpt.h. */
#include "ckpt/ckpt.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "metrics/tfevents.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *ckpt_find_latest(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return NULL;
	struct sbuf path = SBUF_INIT, best = SBUF_INIT;
	struct timespec best_t = { 0, 0 };
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || strstr(e->d_name, ".tmp") || strstr(e->d_name, ".partial"))
			continue;
		sbuf_reset(&path);
		sbuf_addf(&path, "%s/%s", dir, e->d_name);
		struct stat st;
		if (stat(path.buf, &st) < 0)
			continue;
		if (!best.len || st.st_mtim.tv_sec > best_t.tv_sec ||
		    (st.st_mtim.tv_sec == best_t.tv_sec && st.st_mtim.tv_nsec > best_t.tv_nsec) ||
		    (st.st_mtim.tv_sec == best_t.tv_sec && st.st_mtim.tv_nsec == best_t.tv_nsec &&
		     strcmp(path.buf, best.buf) > 0)) {
			best_t = st.st_mtim;
			sbuf_reset(&best);
			sbuf_adds(&best, path.buf);
		}
	}
	closedir(d);
	sbuf_release(&path);
	if (!best.len) {
		sbuf_release(&best);
		return NULL;
	}
	return sbuf_detach(&best);
}

/* ---- names ---- */

static bool skip_name(const char *n)
{
	return n[0] == '.' || strstr(n, ".tmp") || strstr(n, ".partial");
}

/* "rank_3", "rank-3", "rank3" inside name: the rank, and where the token ends. */
static int name_rank(const char *name, const char **tok, const char **tok_end)
{
	for (const char *p = name; (p = strstr(p, "rank")); p += 4) {
		const char *q = p + 4;
		if (*q == '_' || *q == '-')
			q++;
		if (*q < '0' || *q > '9')
			continue;
		long r = 0;
		const char *d = q;
		while (*d >= '0' && *d <= '9' && r < 1000000)
			r = r * 10 + (*d++ - '0');
		*tok = p;
		*tok_end = d;
		return (int)r;
	}
	return -1;
}

/* The last run of digits in [s, end) outside [skip, skip_end): -1 if none. */
static long long last_number(const char *s, const char *end, const char *skip,
			     const char *skip_end)
{
	long long v = -1;
	for (const char *p = s; p < end;) {
		if (p >= skip && p < skip_end) {
			p = skip_end;
			continue;
		}
		if (*p >= '0' && *p <= '9') {
			long long x = 0;
			while (p < end && *p >= '0' && *p <= '9' && !(p >= skip && p < skip_end)) {
				if (x < 100000000000000LL)
					x = x * 10 + (*p - '0');
				p++;
			}
			v = x;
		} else {
			p++;
		}
	}
	return v;
}

/* MindFormers "<prefix>-<epoch>_<step>.<ext>": true with both filled. */
static bool mf_name(const char *name, long long *epoch, long long *step)
{
	const char *dot = strrchr(name, '.');
	const char *dash = strrchr(name, '-');
	if (!dot || !dash || dash > dot)
		return false;
	char *e1, *e2;
	errno = 0;
	long long e = strtoll(dash + 1, &e1, 10);
	if (e1 == dash + 1 || *e1 != '_')
		return false;
	long long s = strtoll(e1 + 1, &e2, 10);
	if (e2 == e1 + 1 || e2 != dot || errno)
		return false;
	*epoch = e;
	*step = s;
	return true;
}

/* ---- scanning ---- */

static double stable_seconds(void)
{
	const char *e = getenv("TRAINCTL_CKPT_STABLE_SECONDS");
	double v;
	if (e && parse_double(e, &v) && v >= 0)
		return v;
	return 1.0;
}

struct scan {
	const char *dir;
	struct ckpt_set *set;
	size_t alloc;
	double now, stable;
	bool all_stable;
	bool all_files_stable_ok;
};

static struct ckpt *find_or_add(struct scan *sc, enum ckpt_layout layout, long long step,
				const char *folder)
{
	struct ckpt_set *set = sc->set;
	for (size_t i = 0; i < set->nr; i++) {
		struct ckpt *c = &set->v[i];
		bool same_kind = (c->layout == CKPT_FOLDER) == (layout == CKPT_FOLDER) &&
				 (c->layout == CKPT_MINDFORMERS) == (layout == CKPT_MINDFORMERS);
		if (same_kind && c->step == step &&
		    (layout != CKPT_FOLDER || !strcmp(c->name, folder)))
			return c;
	}
	XGROW(set->v, set->nr + 1, sc->alloc);
	struct ckpt *c = &set->v[set->nr++];
	memset(c, 0, sizeof(*c));
	c->step = step;
	c->epoch = -1;
	c->layout = layout;
	c->complete = true; /* until a file says otherwise */
	if (folder)
		c->name = xstrdup(folder);
	return c;
}

static void add_file(struct scan *sc, struct ckpt *c, const char *rel, int rank,
		     const struct stat *st)
{
	size_t alloc = c->nfiles; /* grow one at a time: checkpoints hold few files */
	c->files = xrealloc(c->files, (alloc + 1) * sizeof(*c->files));
	struct ckpt_file *f = &c->files[c->nfiles++];
	memset(f, 0, sizeof(*f));
	f->path = xstrdup(rel);
	f->rank = rank;
	f->size = (uint64_t)st->st_size;
	f->mtime = (double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec / 1e9;
	c->bytes += f->size;
	if (!sc->all_stable && sc->now - f->mtime < sc->stable)
		c->complete = false;
}

static void scan_folder_ckpt(struct scan *sc, struct ckpt *c, const char *rel)
{
	struct sbuf path = SBUF_INIT, sub = SBUF_INIT;
	sbuf_addf(&path, "%s/%s", sc->dir, rel);
	DIR *d = opendir(path.buf);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (skip_name(e->d_name))
			continue;
		sbuf_reset(&sub);
		sbuf_addf(&sub, "%s/%s", rel, e->d_name);
		sbuf_reset(&path);
		sbuf_addf(&path, "%s/%s", sc->dir, sub.buf);
		struct stat st;
		if (stat(path.buf, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode))
			scan_folder_ckpt(sc, c, sub.buf);
		else if (S_ISREG(st.st_mode))
			add_file(sc, c, sub.buf, -1, &st);
	}
	if (d)
		closedir(d);
	sbuf_release(&path);
	sbuf_release(&sub);
}

static void read_meta(struct scan *sc, const char *rankdir)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/%s/meta.json", sc->dir, rankdir);
	json_t *j = json_load_file(p.buf, 0, NULL);
	sbuf_release(&p);
	if (!j)
		return;
	json_t *e = json_object_get(j, "last_epoch"), *s = json_object_get(j, "last_step");
	if (json_is_integer(e) && json_is_integer(s)) {
		long long ev = json_integer_value(e), sv = json_integer_value(s);
		struct ckpt_set *set = sc->set;
		if (!set->have_meta || ev < set->meta_epoch ||
		    (ev == set->meta_epoch && sv < set->meta_step)) {
			set->meta_epoch = ev;
			set->meta_step = sv;
		}
		set->have_meta = true;
	}
	json_decref(j);
}

static void scan_rank_dir(struct scan *sc, const char *rankdir, int rank)
{
	struct sbuf path = SBUF_INIT, rel = SBUF_INIT;
	sbuf_addf(&path, "%s/%s", sc->dir, rankdir);
	DIR *d = opendir(path.buf);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		long long epoch, step;
		if (skip_name(e->d_name) || !mf_name(e->d_name, &epoch, &step))
			continue;
		sbuf_reset(&rel);
		sbuf_addf(&rel, "%s/%s", rankdir, e->d_name);
		sbuf_reset(&path);
		sbuf_addf(&path, "%s/%s", sc->dir, rel.buf);
		struct stat st;
		if (stat(path.buf, &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		struct ckpt *c = find_or_add(sc, CKPT_MINDFORMERS, step, NULL);
		c->epoch = epoch;
		add_file(sc, c, rel.buf, rank, &st);
	}
	if (d)
		closedir(d);
	sbuf_release(&path);
	sbuf_release(&rel);
	read_meta(sc, rankdir);
}

static int cmp_file(const void *a, const void *b)
{
	const struct ckpt_file *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return strcmp(x->path, y->path);
}

static int cmp_ckpt(const void *a, const void *b)
{
	const struct ckpt *x = a, *y = b;
	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	return strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

int ckpt_scan(const char *dir, int world, bool all_stable, struct ckpt_set *out,
	      struct tc_err *err)
{
	memset(out, 0, sizeof(*out));
	struct scan sc = { dir, out, 0, now_wall(), stable_seconds(), all_stable, true };
	DIR *d = opendir(dir);
	if (!d) {
		if (errno == ENOENT)
			return 0;
		return tc_error_errno(err, TC_ESTORAGE, "cannot read checkpoint folder '%s'", dir);
	}
	struct dirent *e;
	struct sbuf path = SBUF_INIT;
	int max_rank = -1;
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		if (skip_name(n))
			continue;
		sbuf_reset(&path);
		sbuf_addf(&path, "%s/%s", dir, n);
		struct stat st;
		if (stat(path.buf, &st) < 0)
			continue;
		long rank;
		if (S_ISDIR(st.st_mode) && !strncmp(n, "rank_", 5) && parse_long(n + 5, 0, 1000000, &rank)) {
			scan_rank_dir(&sc, n, (int)rank);
			if (rank > max_rank)
				max_rank = (int)rank;
			continue;
		}
		const char *tok = n, *tok_end = n;
		int r = S_ISREG(st.st_mode) ? name_rank(n, &tok, &tok_end) : -1;
		long long step = last_number(n, n + strlen(n), tok, tok_end);
		if (step < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			struct ckpt *c = find_or_add(&sc, CKPT_FOLDER, step, n);
			scan_folder_ckpt(&sc, c, n);
		} else if (S_ISREG(st.st_mode)) {
			struct ckpt *c = find_or_add(&sc, r >= 0 ? CKPT_RANKED : CKPT_FLAT, step, NULL);
			if (r >= 0)
				c->layout = CKPT_RANKED;
			add_file(&sc, c, n, r, &st);
			if (r > max_rank)
				max_rank = r;
		}
	}
	closedir(d);
	sbuf_release(&path);
	int w = world > 0 ? world : max_rank + 1;
	for (size_t i = 0; i < out->nr; i++) {
		struct ckpt *c = &out->v[i];
		if (c->nfiles > 1)
			qsort(c->files, c->nfiles, sizeof(*c->files), cmp_file);
		if (!c->nfiles)
			c->complete = false;
		if (c->layout == CKPT_RANKED || c->layout == CKPT_MINDFORMERS) {
			for (int r = 0; r < w; r++) {
				bool have = false;
				for (size_t k = 0; k < c->nfiles && !have; k++)
					have = c->files[k].rank == r;
				if (!have)
					c->complete = false;
			}
		}
		if (!c->name && c->nfiles)
			c->name = xstrdup(c->files[0].path); /* rank 0's file, or the first one */
	}
	if (out->nr > 1)
		qsort(out->v, out->nr, sizeof(*out->v), cmp_ckpt);
	return 0;
}

void ckpt_release(struct ckpt *c)
{
	for (size_t i = 0; i < c->nfiles; i++)
		free(c->files[i].path);
	free(c->files);
	free(c->name);
	memset(c, 0, sizeof(*c));
}

void ckpt_set_release(struct ckpt_set *set)
{
	for (size_t i = 0; i < set->nr; i++)
		ckpt_release(&set->v[i]);
	free(set->v);
	memset(set, 0, sizeof(*set));
}

/* ---- checksums ---- */

int ckpt_file_crc(const char *path, uint32_t *crc, uint64_t *size, struct tc_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return tc_error_errno(err, TC_ESTORAGE, "cannot open '%s'", path);
	size_t bufsz = 1 << 20;
	char *buf = xmalloc(bufsz);
	uint32_t c = 0;
	uint64_t n = 0;
	int rc = 0;
	for (;;) {
		ssize_t r = read(fd, buf, bufsz);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = tc_error_errno(err, TC_ESTORAGE, "cannot read '%s'", path);
			break;
		}
		if (!r)
			break;
		c = tfevents_crc32c(c, buf, (size_t)r);
		n += (uint64_t)r;
	}
	free(buf);
	close(fd);
	*crc = c;
	*size = n;
	return rc;
}

static void combine(struct ckpt *c)
{
	uint32_t all = 0;
	for (size_t i = 0; i < c->nfiles; i++) {
		const struct ckpt_file *f = &c->files[i];
		unsigned char tail[12];
		for (int k = 0; k < 4; k++)
			tail[k] = (unsigned char)(f->crc >> (8 * k));
		for (int k = 0; k < 8; k++)
			tail[4 + k] = (unsigned char)(f->size >> (8 * k));
		all = tfevents_crc32c(all, f->path, strlen(f->path) + 1);
		all = tfevents_crc32c(all, tail, sizeof(tail));
	}
	snprintf(c->checksum, sizeof(c->checksum), "%08x", all);
}

int ckpt_checksum(const char *dir, struct ckpt *c, struct tc_err *err)
{
	struct sbuf p = SBUF_INIT;
	int rc = 0;
	c->bytes = 0;
	for (size_t i = 0; i < c->nfiles && !rc; i++) {
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/%s", dir, c->files[i].path);
		rc = ckpt_file_crc(p.buf, &c->files[i].crc, &c->files[i].size, err);
		c->bytes += c->files[i].size;
	}
	sbuf_release(&p);
	if (!rc) {
		combine(c);
		c->summed = true;
	}
	return rc;
}

int ckpt_verify(const char *dir, const struct ckpt *rec, struct tc_err *err)
{
	struct sbuf p = SBUF_INIT;
	int rc = 0;
	for (size_t i = 0; i < rec->nfiles && !rc; i++) {
		const struct ckpt_file *f = &rec->files[i];
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/%s", dir, f->path);
		struct stat st;
		if (stat(p.buf, &st) < 0) {
			rc = tc_error(err, TC_EINPUT, "%s is missing", f->path);
			break;
		}
		if ((uint64_t)st.st_size != f->size) {
			rc = tc_error(err, TC_EINPUT, "%s has %llu bytes, %llu recorded", f->path,
				      (unsigned long long)st.st_size, (unsigned long long)f->size);
			break;
		}
		uint32_t crc;
		uint64_t size;
		struct tc_err e2 = TC_ERR_INIT;
		if (ckpt_file_crc(p.buf, &crc, &size, &e2)) {
			rc = tc_error(err, TC_EINPUT, "%s", e2.msg);
		} else if (crc != f->crc || size != f->size) {
			rc = tc_error(err, TC_EINPUT, "%s: checksum %08x, %08x recorded", f->path, crc,
				      f->crc);
		}
		tc_err_release(&e2);
	}
	sbuf_release(&p);
	return rc;
}

char *ckpt_files_json(const struct ckpt *c)
{
	json_t *a = json_array();
	for (size_t i = 0; i < c->nfiles; i++) {
		const struct ckpt_file *f = &c->files[i];
		json_array_append_new(a, json_pack("{s:s, s:i, s:I, s:I}", "path", f->path, "rank", f->rank,
						   "size", (json_int_t)f->size, "crc", (json_int_t)f->crc));
	}
	char *t = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	if (!t)
		xdie_oom(0);
	char *r = xstrdup(t);
	free(t);
	return r;
}

int ckpt_files_from_json(const char *text, struct ckpt *c, struct tc_err *err)
{
	json_t *a = json_loads(text, 0, NULL);
	if (!json_is_array(a)) {
		json_decref(a);
		return tc_error(err, TC_EINPUT, "malformed checkpoint file list");
	}
	size_t i;
	json_t *x;
	c->files = xcalloc(json_array_size(a) + 1, sizeof(*c->files));
	c->nfiles = 0;
	c->bytes = 0;
	json_array_foreach(a, i, x) {
		const char *p = json_string_value(json_object_get(x, "path"));
		if (!p) {
			json_decref(a);
			return tc_error(err, TC_EINPUT, "malformed checkpoint file list");
		}
		struct ckpt_file *f = &c->files[c->nfiles++];
		f->path = xstrdup(p);
		f->rank = (int)json_integer_value(json_object_get(x, "rank"));
		f->size = (uint64_t)json_integer_value(json_object_get(x, "size"));
		f->crc = (uint32_t)json_integer_value(json_object_get(x, "crc"));
		c->bytes += f->size;
	}
	c->summed = true;
	json_decref(a);
	return 0;
}

int ckpt_choose(const char *dir, const struct ckpt *rec, size_t n, const struct ckpt_set *set,
		struct sbuf *report)
{
	for (size_t k = n; k-- > 0;) {
		const struct ckpt *c = &rec[k];
		if (set && set->have_meta && c->layout == CKPT_MINDFORMERS &&
		    (c->epoch > set->meta_epoch ||
		     (c->epoch == set->meta_epoch && c->step > set->meta_step))) {
			sbuf_addf(report, "skipping %s: newer than what every rank's meta.json records (epoch %lld, step %lld)\n",
				  c->name, set->meta_epoch, set->meta_step);
			continue;
		}
		struct tc_err err = TC_ERR_INIT;
		if (ckpt_verify(dir, c, &err)) {
			sbuf_addf(report, "checkpoint %s (step %lld) is damaged: %s; falling back to an earlier one\n",
				  c->name, c->step, err.msg);
			tc_err_release(&err);
			continue;
		}
		return (int)k;
	}
	return -1;
}

int ckpt_remove(const char *dir, const struct ckpt *c, struct tc_err *err)
{
	struct sbuf p = SBUF_INIT;
	int rc = 0;
	for (size_t i = 0; i < c->nfiles; i++) {
		sbuf_reset(&p);
		sbuf_addf(&p, "%s/%s", dir, c->files[i].path);
		if (unlink(p.buf) < 0 && errno != ENOENT && !rc)
			rc = tc_error_errno(err, TC_ESTORAGE, "cannot remove '%s'", p.buf);
	}
	if (c->layout == CKPT_FOLDER && c->name) {
		/* folders left empty, deepest first: rmdir fails harmlessly on the rest */
		for (size_t i = c->nfiles; i-- > 0;) {
			char *d = xstrdup(c->files[i].path);
			char *sl;
			while ((sl = strrchr(d, '/'))) {
				*sl = '\0';
				sbuf_reset(&p);
				sbuf_addf(&p, "%s/%s", dir, d);
				if (rmdir(p.buf) < 0)
					break;
			}
			free(d);
		}
	}
	sbuf_release(&p);
	return rc;
}
