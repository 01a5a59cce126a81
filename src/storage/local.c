/*
 * local.c -- the file:// scheme: a folder (or one file) on this machine.
 *
 * Listing walks the tree depth first; each directory's entries are sorted
 * with folders compared as "name/", which yields keys in plain byte order
 * across the whole tree (S3's order), holding one directory per level.
 * Writes go to '.tc-part-<name>-<pid>-<n>' beside the target, renamed into
 * place by the commit, so a reader never sees a half-written file.
 *
 * Keys may come from a listing somebody else wrote (an S3 bucket), so no key
 * may name a place outside the root: a key with an empty, '.' or '..'
 * segment, or a leading '/', is refused (storage_key_problem), and writes and
 * deletes reach their folder by openat()/mkdirat() from a descriptor of the
 * root, one component at a time with O_NOFOLLOW, so that a symbolic link
 * inside the root cannot lead them out either.
 */
#include "core/util.h"
#include "core/xalloc.h"
#include "storage/storage_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TMP_PREFIX ".tc-part-"

bool local_is_tmp_name(const char *name)
{
	return !strncmp(name, TMP_PREFIX, strlen(TMP_PREFIX));
}

/* The pid in '.tc-part-<name>-<pid>-<n>', or 0. */
static pid_t tmp_owner(const char *name)
{
	const char *last = strrchr(name, '-');
	if (!last || last == name)
		return 0;
	const char *p = last - 1;
	while (p > name && *p >= '0' && *p <= '9')
		p--;
	if (*p != '-')
		return 0;
	struct sbuf num = SBUF_INIT;
	sbuf_add(&num, p + 1, (size_t)(last - p - 1));
	long v = 0;
	bool ok = parse_long(num.buf, 1, 1L << 30, &v);
	sbuf_release(&num);
	return ok ? (pid_t)v : 0;
}

const char *storage_key_problem(const char *key)
{
	if (!*key)
		return "the key is empty";
	if (*key == '/')
		return "the key is an absolute path";
	for (const char *p = key;;) {
		const char *e = strchrnul(p, '/');
		size_t n = (size_t)(e - p);
		if (n == 0)
			return "the key has an empty path segment";
		if (n == 1 && p[0] == '.')
			return "the key has a '.' path segment";
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return "the key has a '..' path segment";
		if (!*e)
			return NULL;
		p = e + 1;
	}
}

/* TC_EINPUT naming the key when it could not stay under the root. */
static int check_key(struct storage *st, const char *key, struct tc_err *err)
{
	const char *why = storage_key_problem(key);
	if (why)
		return tc_error(err, TC_EINPUT, "refusing key '%s' under '%s': %s", key, st->root,
				why);
	return 0;
}

/*
 * The folder that holds key, as a descriptor reached from the root one
 * component at a time without following symbolic links; with create, the
 * missing folders (and the root) are made.  *leaf points into key at its
 * last component.  A missing folder without create is TC_ENOTFOUND.
 */
static int open_parent(struct storage *st, const char *key, bool create, int *dirfd,
		       const char **leaf, struct tc_err *err)
{
	int rc = check_key(st, key, err);
	if (rc)
		return rc;
	if (create && (rc = mkdir_p(st->root, err)))
		return rc;
	int fd = open(st->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return tc_error_errno(err, errno == ENOENT ? TC_ENOTFOUND : TC_ESTORAGE,
				      "cannot open the folder '%s'", st->root);
	const char *p = key, *e;
	struct sbuf comp = SBUF_INIT;
	while ((e = strchr(p, '/'))) {
		sbuf_reset(&comp);
		sbuf_add(&comp, p, (size_t)(e - p));
		if (create && mkdirat(fd, comp.buf, 0755) < 0 && errno != EEXIST) {
			rc = tc_error_errno(err, TC_ESTORAGE, "cannot create the folder of '%s' under '%s'",
					    key, st->root);
			break;
		}
		int next = openat(fd, comp.buf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0) {
			struct stat lsb;
			/* with O_DIRECTORY a link gives ENOTDIR rather than ELOOP */
			if (errno == ENOTDIR && fstatat(fd, comp.buf, &lsb, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISLNK(lsb.st_mode))
				errno = ELOOP;
			if (errno == ELOOP)
				rc = tc_error(err, TC_ESTORAGE,
					      "'%s' under '%s': '%.*s' is a symbolic link; refusing to follow it out of the folder",
					      key, st->root, (int)(e - key), key);
			else if (errno == ENOENT && !create)
				rc = tc_error(err, TC_ENOTFOUND, "'%s' does not exist under '%s'", key,
					      st->root);
			else
				rc = tc_error_errno(err, TC_ESTORAGE, "cannot open the folder '%.*s' under '%s'",
						    (int)(e - key), key, st->root);
			break;
		}
		close(fd);
		fd = next;
		p = e + 1;
	}
	sbuf_release(&comp);
	if (rc) {
		close(fd);
		return rc;
	}
	*dirfd = fd;
	*leaf = p;
	return 0;
}

char *local_path(struct storage *st, const char *key)
{
	struct sbuf sb = SBUF_INIT;
	sbuf_adds(&sb, st->root);
	if (*key) {
		if (sb.len && sb.buf[sb.len - 1] != '/')
			sbuf_addch(&sb, '/');
		sbuf_adds(&sb, key);
	}
	return sbuf_detach(&sb);
}

static int l_open(struct storage *st, struct tc_err *err)
{
	(void)err;
	const char *p = st->url;
	if (!strncmp(p, "file://", 7))
		p += 7;
	if (!*p)
		p = ".";
	char *abs = path_absolute(p, NULL);
	struct stat sb;
	if (stat(abs, &sb) == 0 && S_ISREG(sb.st_mode)) {
		/* one file: the root is its folder, the listing holds only it */
		st->single = true;
		st->priv = xstrdup(path_basename(abs));
		st->root = path_dirname(abs);
		free(abs);
	} else {
		size_t n = strlen(abs);
		while (n > 1 && abs[n - 1] == '/')
			abs[--n] = '\0';
		st->root = abs;
	}
	return 0;
}

static void l_close(struct storage *st)
{
	free(st->priv);
}

/* ---- listing ---- */

struct lentry {
	char *sortkey; /* name, or name + "/" for a folder */
	bool dir;
};

struct frame {
	struct lentry *e;
	size_t n, i;
	size_t prefix_len; /* length of the key prefix of this folder */
};

struct liter {
	struct storage_iter base;
	struct frame *stack;
	size_t depth, alloc;
	struct sbuf key;   /* current key prefix / key */
	struct sbuf path;  /* scratch */
	bool single_done;
};

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct lentry *)a)->sortkey, ((const struct lentry *)b)->sortkey);
}

/* Read and sort one folder (relative key prefix in it->key) onto the stack. */
static int push_dir(struct liter *it, struct tc_err *err)
{
	struct storage *st = it->base.st;
	sbuf_reset(&it->path);
	sbuf_adds(&it->path, st->root);
	if (it->key.len) {
		sbuf_addch(&it->path, '/');
		sbuf_add(&it->path, it->key.buf, it->key.len);
	}
	DIR *d = opendir(it->path.buf);
	if (!d) {
		if (errno == ENOENT && !it->depth)
			return 0; /* a missing root lists as empty: sync creates it */
		return tc_error_errno(err, TC_ESTORAGE, "cannot list '%s'", it->path.buf);
	}
	struct frame f = { NULL, 0, 0, it->key.len };
	size_t alloc = 0;
	struct dirent *de;
	size_t base_len = it->path.len;
	while ((de = readdir(d))) {
		const char *nm = de->d_name;
		if (!strcmp(nm, ".") || !strcmp(nm, ".."))
			continue;
		if (local_is_tmp_name(nm)) {
			/* left by a copy that was killed: its owner is gone, nobody will rename it */
			pid_t owner = tmp_owner(nm);
			if (owner > 0 && kill(owner, 0) < 0 && errno == ESRCH) {
				sbuf_setlen(&it->path, base_len);
				sbuf_addf(&it->path, "/%s", nm);
				if (unlink(it->path.buf) < 0)
					errno = 0; /* someone else cleaned it */
			}
			continue;
		}
		bool dir = de->d_type == DT_DIR;
		if (st->no_links && de->d_type == DT_LNK)
			continue;
		if (de->d_type == DT_UNKNOWN || de->d_type == DT_LNK) {
			struct stat sb;
			sbuf_setlen(&it->path, base_len);
			sbuf_addf(&it->path, "/%s", nm);
			if ((st->no_links ? lstat : stat)(it->path.buf, &sb) < 0)
				continue; /* dangling link or raced away */
			dir = S_ISDIR(sb.st_mode);
			if (!dir && !S_ISREG(sb.st_mode))
				continue;
		} else if (!dir && de->d_type != DT_REG) {
			continue;
		}
		XGROW(f.e, f.n + 1, alloc);
		struct sbuf k = SBUF_INIT;
		sbuf_adds(&k, nm);
		if (dir)
			sbuf_addch(&k, '/');
		f.e[f.n].sortkey = sbuf_detach(&k);
		f.e[f.n].dir = dir;
		f.n++;
	}
	closedir(d);
	if (f.n > 1)
		qsort(f.e, f.n, sizeof(*f.e), cmp_entry);
	XGROW(it->stack, it->depth + 1, it->alloc);
	it->stack[it->depth++] = f;
	return 0;
}

static void pop_dir(struct liter *it)
{
	struct frame *f = &it->stack[--it->depth];
	for (size_t i = 0; i < f->n; i++)
		free(f->e[i].sortkey);
	free(f->e);
}

static int l_next(struct storage_iter *base, struct storage_obj *obj, struct tc_err *err)
{
	struct liter *it = (struct liter *)base;
	struct storage *st = base->st;
	struct stat sb;
	if (st->single) {
		if (it->single_done)
			return 0;
		it->single_done = true;
		char *p = local_path(st, st->priv);
		int rc = (st->no_links ? lstat : stat)(p, &sb);
		if (!rc && st->no_links && !S_ISREG(sb.st_mode)) {
			free(p);
			return 0; /* a link: nothing */
		}
		free(p);
		if (rc < 0)
			return tc_error_errno(err, TC_ESTORAGE, "cannot read '%s'", st->url);
		sbuf_reset(&it->key);
		sbuf_adds(&it->key, st->priv);
		goto fill;
	}
	while (it->depth) {
		struct frame *f = &it->stack[it->depth - 1];
		if (f->i >= f->n) {
			pop_dir(it);
			continue;
		}
		struct lentry *e = &f->e[f->i++];
		sbuf_setlen(&it->key, f->prefix_len);
		sbuf_adds(&it->key, e->sortkey);
		if (e->dir) {
			sbuf_setlen(&it->key, it->key.len - 1);
			int rc = push_dir(it, err);
			if (rc)
				return rc;
			/* children are keyed "dir/name": push_dir recorded prefix_len without '/' */
			it->stack[it->depth - 1].prefix_len = it->key.len + 1;
			sbuf_addch(&it->key, '/');
			continue;
		}
		sbuf_reset(&it->path);
		sbuf_addf(&it->path, "%s/%s", st->root, it->key.buf);
		if ((st->no_links ? lstat : stat)(it->path.buf, &sb) < 0 || !S_ISREG(sb.st_mode))
			continue; /* removed (or made a link) while we listed */
		goto fill;
	}
	return 0;
fill:
	obj->key = it->key.buf;
	obj->size = (uint64_t)sb.st_size;
	obj->mtime_ns = timespec_to_ns(sb.st_mtim);
	obj->etag = NULL;
	return 1;
}

static void l_iter_free(struct storage_iter *base)
{
	struct liter *it = (struct liter *)base;
	while (it->depth)
		pop_dir(it);
	free(it->stack);
	sbuf_release(&it->key);
	sbuf_release(&it->path);
	free(it);
}

static int l_iter_start(struct storage *st, struct storage_iter **out, struct tc_err *err)
{
	struct liter *it = xcalloc(1, sizeof(*it));
	it->base.st = st;
	it->base.next = l_next;
	it->base.free = l_iter_free;
	sbuf_init(&it->key, 0);
	sbuf_init(&it->path, 0);
	if (!st->single) {
		int rc = push_dir(it, err);
		if (rc) {
			l_iter_free(&it->base);
			return rc;
		}
	}
	*out = &it->base;
	return 0;
}

static int l_stat(struct storage *st, const char *key, struct storage_obj *obj, struct tc_err *err)
{
	int krc = check_key(st, key, err);
	if (krc)
		return krc;
	char *p = local_path(st, key);
	struct stat sb;
	int rc = 0;
	if (stat(p, &sb) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			rc = tc_error(err, TC_ENOTFOUND, "'%s' does not exist", p);
		else
			rc = tc_error_errno(err, TC_ESTORAGE, "cannot read '%s'", p);
	} else if (!S_ISREG(sb.st_mode)) {
		rc = tc_error(err, TC_ENOTFOUND, "'%s' is not a file", p);
	} else {
		obj->key = key;
		obj->size = (uint64_t)sb.st_size;
		obj->mtime_ns = timespec_to_ns(sb.st_mtim);
		obj->etag = NULL;
	}
	free(p);
	return rc;
}

static int l_del(struct storage *st, const char *key, struct tc_err *err)
{
	int dirfd;
	const char *leaf;
	int rc = open_parent(st, key, false, &dirfd, &leaf, err);
	if (rc == TC_ENOTFOUND) {
		tc_err_release(err);
		return 0; /* its folder is gone, so is it */
	}
	if (rc)
		return rc;
	if (unlinkat(dirfd, leaf, 0) < 0 && errno != ENOENT) {
		char *p = local_path(st, key);
		rc = tc_error_errno(err, TC_ESTORAGE, "cannot remove '%s'", p);
		free(p);
	}
	close(dirfd);
	return rc;
}

int local_open_for_read(struct storage *st, const char *key, int *fd, struct tc_err *err)
{
	int krc = check_key(st, key, err);
	if (krc)
		return krc;
	char *p = local_path(st, key);
	*fd = open(p, O_RDONLY | O_CLOEXEC | (st->no_links ? O_NOFOLLOW : 0));
	int rc = *fd < 0 ? tc_error_errno(err, TC_ESTORAGE, "cannot open '%s'", p) : 0;
	free(p);
	return rc;
}

static int l_read(struct storage *st, const char *key, uint64_t off, uint64_t len, sink_fn sink,
		  void *arg, uint64_t *done, struct tc_err *err)
{
	int fd, rc;
	if ((rc = local_open_for_read(st, key, &fd, err)))
		return rc;
	char *buf = xmalloc(1 << 20);
	while (*done < len) {
		size_t want = len - *done > (1 << 20) ? (1 << 20) : (size_t)(len - *done);
		ssize_t r = pread(fd, buf, want, (off_t)(off + *done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = r < 0 ? tc_error_errno(err, TC_ESTORAGE, "cannot read '%s'", key)
				   : tc_error(err, TC_ESTORAGE, "'%s' shrank while being copied", key);
			break;
		}
		if (sink(arg, buf, (size_t)r) < 0) {
			rc = tc_error_errno(err, TC_ESTORAGE, "cannot write data of '%s'", key);
			break;
		}
		*done += (uint64_t)r;
	}
	free(buf);
	close(fd);
	return rc;
}

/* ---- writing ---- */

struct wtx {
	char *path, *tmp; /* for messages */
	int dirfd;        /* the target's folder, reached without following links */
	char *leaf, *tmpleaf;
	int fd;
	int64_t mtime_ns;
};

static atomic_uint tmp_counter;

static void wtx_free(struct wtx *tx)
{
	if (tx->dirfd >= 0)
		close(tx->dirfd);
	free(tx->tmpleaf);
	free(tx->leaf);
	free(tx->tmp);
	free(tx->path);
	free(tx);
}

static int l_wbegin(struct storage *st, const char *key, uint64_t size,
		    const struct wmeta *meta, int nparts, struct wtx **out, struct tc_err *err)
{
	(void)nparts;
	int64_t mtime_ns = meta->mtime_ns;
	const char *leaf;
	int dirfd;
	int rc = open_parent(st, key, true, &dirfd, &leaf, err);
	if (rc)
		return rc;
	struct wtx *tx = xcalloc(1, sizeof(*tx));
	tx->dirfd = dirfd;
	tx->path = local_path(st, key);
	tx->leaf = xstrdup(leaf);
	tx->mtime_ns = mtime_ns;
	struct sbuf t = SBUF_INIT;
	sbuf_addf(&t, TMP_PREFIX "%s-%d-%u", leaf, (int)getpid(), atomic_fetch_add(&tmp_counter, 1));
	tx->tmpleaf = sbuf_detach(&t);
	sbuf_addf(&t, "%.*s%s", (int)(strlen(tx->path) - strlen(leaf)), tx->path, tx->tmpleaf);
	tx->tmp = sbuf_detach(&t);
	/* O_NOFOLLOW: a link planted at the temporary name must not be written through */
	tx->fd = openat(dirfd, tx->tmpleaf, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
			0644);
	if (tx->fd < 0)
		rc = tc_error_errno(err, TC_ESTORAGE, "cannot create '%s'", tx->tmp);
	else if (size && ftruncate(tx->fd, (off_t)size) < 0)
		rc = tc_error_errno(err, TC_ESTORAGE, "cannot size '%s'", tx->tmp);
	if (rc) {
		if (tx->fd >= 0) {
			close(tx->fd);
			(void)unlinkat(dirfd, tx->tmpleaf, 0); /* best effort */
		}
		wtx_free(tx);
		return rc;
	}
	*out = tx;
	return 0;
}

struct pw_sink {
	int fd;
	uint64_t off;
};

static int pwrite_sink(void *arg, const void *data, size_t len)
{
	struct pw_sink *s = arg;
	const char *p = data;
	while (len) {
		ssize_t w = pwrite(s->fd, p, len, (off_t)s->off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
		s->off += (uint64_t)w;
	}
	return 0;
}

static int l_wpart(struct wtx *tx, int part, uint64_t off, uint64_t len, struct reader *rd,
		   struct tc_err *err)
{
	(void)part;
	struct pw_sink s = { tx->fd, off };
	char *buf = xmalloc(1 << 20);
	uint64_t done = 0;
	int rc = 0;
	while (done < len) {
		ssize_t r = rd->read(rd, buf, 1 << 20);
		if (r <= 0) {
			rc = tc_error(err, TC_ESTORAGE, "short read while writing '%s'", tx->path);
			break;
		}
		if (pwrite_sink(&s, buf, (size_t)r) < 0) {
			rc = tc_error_errno(err, TC_ESTORAGE, "cannot write '%s'", tx->tmp);
			break;
		}
		done += (uint64_t)r;
	}
	free(buf);
	return rc;
}

int local_wpart_from_fd(struct wtx *tx, int src_fd, uint64_t off, uint64_t len,
			struct tc_err *err)
{
	loff_t in = (loff_t)off, outo = (loff_t)off;
	uint64_t left = len;
	while (left) {
		ssize_t n = copy_file_range(src_fd, &in, tx->fd, &outo, left, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL ||
			      errno == EOPNOTSUPP))
			break; /* fall back to read/write below */
		if (n < 0)
			return tc_error_errno(err, TC_ESTORAGE, "cannot copy into '%s'", tx->path);
		if (n == 0)
			return tc_error(err, TC_ESTORAGE, "source of '%s' shrank while being copied",
					tx->path);
		left -= (uint64_t)n;
	}
	if (!left)
		return 0;
	struct pw_sink s = { tx->fd, (uint64_t)outo };
	char *buf = xmalloc(1 << 20);
	int rc = 0;
	while (left) {
		size_t want = left > (1 << 20) ? (1 << 20) : (size_t)left;
		ssize_t r = pread(src_fd, buf, want, in);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = tc_error(err, TC_ESTORAGE, "short read while writing '%s'", tx->path);
			break;
		}
		if (pwrite_sink(&s, buf, (size_t)r) < 0) {
			rc = tc_error_errno(err, TC_ESTORAGE, "cannot write '%s'", tx->tmp);
			break;
		}
		in += r;
		left -= (uint64_t)r;
	}
	free(buf);
	return rc;
}

/*
 * A download's sink.  libcurl hands a body over 16 KiB at a time (its most
 * per call), so the sink gathers up to DL_BUF bytes for one pwrite: 64
 * writes per MiB were most of a small-file download's system calls.  Not
 * more: with 1 MiB the system time grew by half (the data left the cache
 * before it was written).
 */
#define DL_BUF ((size_t)128 << 10)

struct dl_sink {
	int fd;
	uint64_t base;
	const uint64_t *done; /* the reader's count: data goes to base + *done */
	char *buf;            /* DL_BUF bytes, once needed */
	size_t len;           /* gathered, for the file at `at` */
	uint64_t at;
};

static int dl_flush(struct dl_sink *s)
{
	struct pw_sink w = { s->fd, s->at };
	size_t n = s->len;
	s->len = 0;
	return n ? pwrite_sink(&w, s->buf, n) : 0;
}

static int dl_sink_write(void *arg, const void *data, size_t len)
{
	struct dl_sink *s = arg;
	uint64_t pos = s->base + *s->done;
	/* a retry that starts over moves *done back: what is gathered goes first */
	if (s->len && (s->at + s->len != pos || s->len + len > DL_BUF) && dl_flush(s) < 0)
		return -1;
	if (len >= DL_BUF) {
		struct pw_sink w = { s->fd, pos };
		return pwrite_sink(&w, data, len);
	}
	if (!s->buf)
		s->buf = xmalloc(DL_BUF);
	if (!s->len)
		s->at = pos;
	memcpy(s->buf + s->len, data, len);
	s->len += len;
	return 0;
}

int local_wtx_sink(struct wtx *tx, uint64_t off, const uint64_t *done, sink_fn *fn, void **arg)
{
	struct dl_sink *s = xcalloc(1, sizeof(*s));
	s->fd = tx->fd;
	s->base = off;
	s->done = done;
	*fn = dl_sink_write;
	*arg = s;
	return 0;
}

int local_wtx_sink_end(struct wtx *tx, void *arg, struct tc_err *err)
{
	struct dl_sink *s = arg;
	int rc = dl_flush(s) < 0 ? tc_error_errno(err, TC_ESTORAGE, "cannot write '%s'", tx->tmp) : 0;
	free(s->buf);
	free(s);
	return rc;
}

static int l_wcommit(struct wtx *tx, struct tc_err *err)
{
	int rc = 0;
	struct timespec ts[2];
	ts[0] = ts[1] = ns_to_timespec(tx->mtime_ns);
	if (tx->mtime_ns > 0 && futimens(tx->fd, ts) < 0)
		rc = tc_error_errno(err, TC_ESTORAGE, "cannot set the time of '%s'", tx->tmp);
	if (close(tx->fd) < 0 && !rc)
		rc = tc_error_errno(err, TC_ESTORAGE, "cannot write '%s'", tx->tmp);
	tx->fd = -1;
	/* renameat replaces a link at the target name; it never writes through one */
	if (!rc && renameat(tx->dirfd, tx->tmpleaf, tx->dirfd, tx->leaf) < 0) {
		/* a folder of the same name is in the way (it was a prefix in S3) */
		rc = tc_error_errno(err, TC_ESTORAGE, "cannot rename into '%s'", tx->path);
	}
	if (rc)
		(void)unlinkat(tx->dirfd, tx->tmpleaf, 0); /* best effort */
	wtx_free(tx);
	return rc;
}

static void l_wabort(struct wtx *tx)
{
	if (tx->fd >= 0)
		close(tx->fd);
	(void)unlinkat(tx->dirfd, tx->tmpleaf, 0); /* best effort */
	wtx_free(tx);
}

const struct storage_ops storage_local_ops = {
	.name = "file",
	.open = l_open,
	.close = l_close,
	.iter_start = l_iter_start,
	.stat = l_stat,
	.del = l_del,
	.read = l_read,
	.wbegin = l_wbegin,
	.wpart = l_wpart,
	.wcommit = l_wcommit,
	.wabort = l_wabort,
};
