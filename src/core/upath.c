/* upath.c -- open, read, list, follow and delete below a trusted folder; see upath.h. */
#include "core/upath.h"
#include "core/util.h"
#include "core/xalloc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* deeper than this a delete stops: each level holds a descriptor */
#define DELETE_DEPTH 128
/* passes over one folder while entries keep appearing in it */
#define DELETE_PASSES 4

static bool owner_ok(const struct stat *sb, uid_t owner)
{
	return owner == UPATH_ANY || sb->st_uid == owner || sb->st_uid == geteuid();
}

/* Why openat(O_NOFOLLOW) of name failed, in words, into err. */
static int open_failed(int dirfd, const char *rel, const char *name, struct tc_err *err)
{
	int e = errno;
	struct stat sb;
	if ((e == ELOOP || e == ENOTDIR) && fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISLNK(sb.st_mode))
		return tc_error(err, TC_EINPUT, "'%s' is a symbolic link: refused", rel);
	if (e == ENOENT)
		return tc_error(err, TC_ENOTFOUND, "'%s' does not exist", rel);
	if (e == ENOTDIR)
		return tc_error(err, TC_EINPUT, "'%s' is not a folder", rel);
	errno = e;
	return tc_error_errno(err, TC_ESYS, "cannot open '%s'", rel);
}

static int check_owner(int fd, const char *rel, uid_t owner, bool dir, struct tc_err *err)
{
	struct stat sb;
	if (fstat(fd, &sb) < 0)
		return tc_error_errno(err, TC_ESYS, "cannot stat '%s'", rel);
	if (dir && !S_ISDIR(sb.st_mode))
		return tc_error(err, TC_EINPUT, "'%s' is not a folder", rel);
	if (!dir && (!S_ISREG(sb.st_mode) || sb.st_nlink != 1))
		return tc_error(err, TC_EINPUT, "'%s' is not a regular file with one link", rel);
	if (!owner_ok(&sb, owner))
		return tc_error(err, TC_EINPUT, "'%s' belongs to uid %u, not the job's: refused", rel,
				(unsigned)sb.st_uid);
	return 0;
}

int upath_base(const char *path, int *fd, struct tc_err *err)
{
	*fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*fd < 0)
		return tc_error_errno(err, errno == ENOENT ? TC_ENOTFOUND : TC_ESYS, "cannot open '%s'",
				      path);
	return 0;
}

/*
 * Walk rel below dirfd: every component a folder (O_DIRECTORY), but the
 * last a regular file unless last_dir; each checked per upath.h (3).
 */
static int walk(int dirfd, const char *rel, uid_t owner, bool last_dir, int *out,
		struct tc_err *err)
{
	*out = -1;
	if (!rel || *rel == '/')
		return tc_error(err, TC_EINPUT, "'%s': not a relative path", rel ? rel : "");
	/*
	 * A new open of dirfd rather than a dup: a dup shares its file offset,
	 * and a listing of it would leave dirfd's at the end for the next one.
	 */
	int cur = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cur < 0)
		return tc_error_errno(err, TC_ESYS, "cannot open '%s'", rel);
	struct sbuf comp = SBUF_INIT;
	int rc = 0;
	const char *p = rel;
	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		const char *next = slash ? slash + 1 : p + n;
		while (*next == '/')
			next++;
		sbuf_reset(&comp);
		sbuf_add(&comp, p, n);
		p = next;
		if (!n || !strcmp(comp.buf, "."))
			continue;
		if (!strcmp(comp.buf, "..")) {
			rc = tc_error(err, TC_EINPUT, "'%s': '..' refused", rel);
			break;
		}
		bool dir = *p || last_dir;
		int fl = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (dir ? O_DIRECTORY : O_NONBLOCK | O_NOCTTY);
		int fd = openat(cur, comp.buf, fl);
		if (fd < 0) {
			rc = open_failed(cur, rel, comp.buf, err);
			break;
		}
		close(cur);
		cur = fd;
		if ((rc = check_owner(cur, rel, owner, dir, err)))
			break;
	}
	sbuf_release(&comp);
	if (!rc && !last_dir) {
		/* "" or "." as a file: the folder itself, which is no file */
		struct stat sb;
		if (fstat(cur, &sb) < 0 || !S_ISREG(sb.st_mode))
			rc = tc_error(err, TC_EINPUT, "'%s' is not a regular file", rel);
	}
	if (!rc && !last_dir) {
		/* the open was O_NONBLOCK for FIFOs only: reads of a regular file may block */
		int fl = fcntl(cur, F_GETFL);
		if (fl < 0 || fcntl(cur, F_SETFL, fl & ~O_NONBLOCK) < 0)
			rc = tc_error_errno(err, TC_ESYS, "fcntl");
	}
	if (rc) {
		close(cur);
		return rc;
	}
	*out = cur;
	return 0;
}

int upath_dir(int dirfd, const char *rel, uid_t owner, int *fd, struct tc_err *err)
{
	return walk(dirfd, rel, owner, true, fd, err);
}

int upath_open(int dirfd, const char *rel, uid_t owner, int *fd, struct tc_err *err)
{
	return walk(dirfd, rel, owner, false, fd, err);
}

int upath_run_dir(const char *run_dir, uid_t want, int *fd, uid_t *owner, struct tc_err *err)
{
	*fd = -1;
	if (!run_dir || !*run_dir)
		return tc_error(err, TC_ENOTFOUND, "the job has no run folder");
	char *parent = path_dirname(run_dir);
	const char *name = path_basename(run_dir);
	int base = -1, rc = upath_base(parent, &base, err);
	if (!rc)
		rc = upath_dir(base, name, want, fd, err);
	struct stat sb;
	if (!rc && fstat(*fd, &sb) < 0)
		rc = tc_error_errno(err, TC_ESYS, "cannot stat '%s'", run_dir);
	if (!rc && owner)
		*owner = sb.st_uid;
	if (rc && *fd >= 0) {
		close(*fd);
		*fd = -1;
	}
	if (base >= 0)
		close(base);
	free(parent);
	return rc;
}

/* Read fd to its end into out, at most cap bytes (more is TC_EINPUT); closes fd. */
static int read_capped(int fd, const char *what, size_t cap, struct sbuf *out, struct tc_err *err)
{
	size_t start = out->len;
	int rc = 0;
	for (;;) {
		size_t left = cap - (out->len - start); /* one byte past the cap tells "over" */
		size_t want = left < 65535 ? left + 1 : 65536;
		sbuf_grow(out, want);
		ssize_t n = read(fd, out->buf + out->len, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = tc_error_errno(err, TC_ESYS, "cannot read '%s'", what);
			break;
		}
		if (n == 0)
			break;
		out->len += (size_t)n;
		out->buf[out->len] = '\0';
		if (out->len - start > cap) {
			rc = tc_error(err, TC_EINPUT, "'%s' is larger than %zu bytes: refused", what, cap);
			break;
		}
	}
	if (rc) {
		out->len = start;
		out->buf[start] = '\0';
	}
	close(fd);
	return rc;
}

int upath_read(int dirfd, const char *rel, uid_t owner, size_t cap, struct sbuf *out,
	       struct tc_err *err)
{
	int fd;
	int rc = upath_open(dirfd, rel, owner, &fd, err);
	return rc ? rc : read_capped(fd, rel, cap, out, err);
}

int upath_read_path(const char *path, size_t cap, struct sbuf *out, struct tc_err *err)
{
	/* O_NONBLOCK: a FIFO's open would wait for a writer; a device is no file either */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return tc_error_errno(err, errno == ENOENT ? TC_ENOTFOUND : TC_EINPUT,
				      "cannot open '%s'", path);
	struct stat sb;
	int rc = 0;
	if (fstat(fd, &sb) < 0)
		rc = tc_error_errno(err, TC_ESYS, "cannot stat '%s'", path);
	else if (!S_ISREG(sb.st_mode))
		rc = tc_error(err, TC_EINPUT, "'%s' is not a regular file", path);
	else if ((size_t)sb.st_size > cap)
		rc = tc_error(err, TC_EINPUT, "'%s' is larger than %zu bytes: refused", path, cap);
	if (rc) {
		close(fd);
		return rc;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		rc = tc_error_errno(err, TC_ESYS, "fcntl");
		close(fd);
		return rc;
	}
	return read_capped(fd, path, cap, out, err);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int upath_list(int dirfd, const char *rel, uid_t owner, struct strvec *names,
	       struct tc_err *err)
{
	int fd;
	int rc = upath_dir(dirfd, rel, owner, &fd, err);
	if (rc)
		return rc;
	DIR *d = fdopendir(fd);
	if (!d) {
		rc = tc_error_errno(err, TC_ESYS, "cannot list '%s'", rel);
		close(fd);
		return rc;
	}
	size_t first = names->nr;
	for (struct dirent *e; (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			strvec_push(names, e->d_name);
	closedir(d);
	if (names->nr - first > 1)
		qsort(names->v + first, names->nr - first, sizeof(char *), cmp_str);
	return 0;
}

/* ---- delete ---- */

struct del {
	uid_t owner;
	dev_t dev;
	struct sbuf left; /* what stayed, for the message */
};

static void left(struct del *d, const char *name, const char *why)
{
	if (d->left.len < 512)
		sbuf_addf(&d->left, "%s'%s' (%s)", d->left.len ? ", " : "", name, why);
}

static void rm_entry(int dfd, const char *name, int depth, struct del *d);

/* Empty the folder fd (ours to close), what stays named in d->left. */
static void rm_contents(int fd, int depth, struct del *d)
{
	DIR *dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return;
	}
	for (int pass = 0; pass < DELETE_PASSES; pass++) {
		bool any = false;
		rewinddir(dir);
		for (struct dirent *e; (e = readdir(dir));) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			any = true;
			rm_entry(dirfd(dir), e->d_name, depth, d);
		}
		if (!any)
			break;
	}
	closedir(dir);
}

/*
 * Remove name in dfd: first as a file or link (unlinkat never follows);
 * only what unlinkat calls a folder is opened (O_NOFOLLOW: swapped for a
 * link meanwhile, it is a link again and unlinked as one), emptied, removed.
 */
static void rm_entry(int dfd, const char *name, int depth, struct del *d)
{
	for (int tries = 0; tries < 3; tries++) {
		if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
			return;
		if (errno != EISDIR && errno != EPERM) {
			left(d, name, strerror(errno));
			return;
		}
		int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT)
				return;
			if (errno == ELOOP || errno == ENOTDIR)
				continue; /* a link or file now: unlinked as such */
			left(d, name, strerror(errno));
			return;
		}
		struct stat sb;
		if (fstat(fd, &sb) < 0 || !owner_ok(&sb, d->owner)) {
			left(d, name, "a folder of another owner");
			close(fd);
			return;
		}
		if (sb.st_dev != d->dev) {
			left(d, name, "another filesystem");
			close(fd);
			return;
		}
		if (depth >= DELETE_DEPTH) {
			left(d, name, "too deep");
			close(fd);
			return;
		}
		rm_contents(fd, depth + 1, d);
		if (unlinkat(dfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
			return;
		if (errno != ENOTDIR) {
			left(d, name, strerror(errno));
			return;
		}
		/* ENOTDIR: swapped for a file or a link after we emptied it: once more */
	}
	left(d, name, "keeps changing");
}

int upath_delete(int dirfd, const char *name, uid_t owner, struct tc_err *err)
{
	if (!name || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return tc_error(err, TC_EINPUT, "'%s': not a name in a folder", name ? name : "");
	struct stat sb;
	if (fstatat(dirfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : tc_error_errno(err, TC_ESYS, "cannot stat '%s'", name);
	if (S_ISDIR(sb.st_mode) && !owner_ok(&sb, owner))
		return tc_error(err, TC_EINPUT, "'%s' belongs to uid %u, not the job's: not deleted",
				name, (unsigned)sb.st_uid);
	struct del d = { owner, sb.st_dev, SBUF_INIT };
	rm_entry(dirfd, name, 0, &d);
	int rc = 0;
	if (d.left.len)
		rc = tc_error(err, TC_ESYS, "'%s': left %s", name, d.left.buf);
	sbuf_release(&d.left);
	return rc;
}

/* ---- follow ---- */

void upath_follow_init(struct upath_follow *f, int dirfd, const char *name, uid_t owner, off_t off)
{
	f->dirfd = dirfd;
	f->name = xstrdup(name);
	f->owner = owner;
	f->fd = -1;
	f->off = off;
}

static bool follow_open(struct upath_follow *f)
{
	if (f->fd >= 0)
		return true;
	struct tc_err err = TC_ERR_INIT;
	int rc = upath_open(f->dirfd, f->name, f->owner, &f->fd, &err);
	tc_err_release(&err);
	if (rc == TC_ENOTFOUND)
		errno = ENOENT;
	else if (rc)
		errno = ELOOP; /* a link or no regular file: refused */
	return rc == 0;
}

ssize_t upath_follow_read(struct upath_follow *f, char *buf, size_t max)
{
	if (!follow_open(f))
		return errno == ENOENT ? 0 : -1;
	for (;;) {
		ssize_t n = pread(f->fd, buf, max, f->off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0)
			f->off += n;
		return n;
	}
}

off_t upath_follow_size(struct upath_follow *f)
{
	struct stat sb;
	if (!follow_open(f) || fstat(f->fd, &sb) < 0)
		return -1;
	return sb.st_size;
}

void upath_follow_release(struct upath_follow *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	free(f->name);
	f->name = NULL;
}
