/*
 * upath.h -- the one door to paths a user can write.
 *
 * A root server (and the hub, the log readers, spec loading) reads and
 * deletes in folders a job's account owns: its run folder, logs/, output/.
 * The account can replace any part of such a path by a symbolic link at
 * any moment, so a path string is never trusted below a folder we own.
 *
 * Invariants:
 *   (1) Every walk starts from a descriptor of a trusted folder (one only
 *       root, or our own account, can write: STATE/runs).  upath_base opens
 *       one by path; nothing below it is ever opened by path.
 *   (2) Below it, each component is opened with openat(O_NOFOLLOW), a
 *       folder with O_DIRECTORY: a symbolic link anywhere is refused, never
 *       followed.  ".." and absolute paths are refused.
 *   (3) What is opened is checked with fstat on the descriptor: a folder is
 *       a folder, a file is a regular file with one link (a FIFO or a
 *       device is refused; O_NONBLOCK so that opening a FIFO cannot block),
 *       and each belongs to `owner` (the job's account) or to us (files the
 *       hub made for the job).  UPATH_ANY skips the owner check.
 *   (4) Reads are capped: over `cap` bytes is an error, not a truncation.
 *   (5) Deletes unlink from folder descriptors, never by full path, and
 *       never descend through a link, into a folder of another owner or
 *       onto another filesystem: an entry swapped for a link mid-walk is
 *       unlinked as the link.
 *
 * Every function returns 0 or a negative TC_E* code with err filled;
 * descriptors handed out are O_CLOEXEC and the caller's to close.
 * upath_read_path is the exception to (1)-(3): for a file a spec names and
 * a server reads with the caller's file ids (setfsuid), where links are the
 * caller's own to follow; it keeps (3)'s type check and (4).
 */
#ifndef TC_CORE_UPATH_H
#define TC_CORE_UPATH_H

#include <stddef.h>
#include <sys/types.h>

#include "core/err.h"
#include "core/sbuf.h"
#include "core/strvec.h"

/* No owner check (the caller checked the folder above, or there is none). */
#define UPATH_ANY ((uid_t)-1)
/* Cap for a file a spec names (a cluster or model description). */
#define UPATH_SPEC_MAX ((size_t)16 << 20)

/* Open the trusted folder at path (followed as given: the caller vouches for it). */
int upath_base(const char *path, int *fd, struct tc_err *err);

/*
 * A job's run folder: its parent (STATE/runs, the server's) is the trusted
 * base, the folder itself is opened O_NOFOLLOW.  *owner gets its owner
 * (root handed it to the job's account), the owner every part below must
 * have.  want: the job's account, or UPATH_ANY; a folder of another owner
 * (nor ours) is refused.
 */
int upath_run_dir(const char *run_dir, uid_t want, int *fd, uid_t *owner, struct tc_err *err);

/* Folder rel below dirfd ("" or "." is dirfd itself, opened anew), per (2), (3). */
int upath_dir(int dirfd, const char *rel, uid_t owner, int *fd, struct tc_err *err);

/* Regular file rel below dirfd, opened O_RDONLY (blocking reads), per (2), (3). */
int upath_open(int dirfd, const char *rel, uid_t owner, int *fd, struct tc_err *err);

/* The whole of file rel below dirfd, appended to out; over cap bytes is TC_EINPUT. */
int upath_read(int dirfd, const char *rel, uid_t owner, size_t cap, struct sbuf *out,
	       struct tc_err *err);

/*
 * A file a spec names, read as the caller (see the top): a regular file of
 * at most cap bytes, else TC_EINPUT naming it; missing is TC_ENOTFOUND.
 */
int upath_read_path(const char *path, size_t cap, struct sbuf *out, struct tc_err *err);

/* The names in folder rel below dirfd (no "." and ".."), sorted, appended to names. */
int upath_list(int dirfd, const char *rel, uid_t owner, struct strvec *names,
	       struct tc_err *err);

/*
 * Delete name (a file, a link, or a folder and all of it) in dirfd per (5).
 * A folder named by name itself must belong to owner (or us).  Missing is
 * fine.  What could not go (a folder of another owner, a mount) is named
 * in the error; everything else is gone.
 */
int upath_delete(int dirfd, const char *name, uid_t owner, struct tc_err *err);

/*
 * Follow a growing file: name in the folder dirfd (borrowed, not closed),
 * opened per (2), (3) once it appears, read from off on.
 */
struct upath_follow {
	int dirfd;
	char *name;
	uid_t owner;
	int fd; /* -1 until the file is there */
	off_t off;
};
void upath_follow_init(struct upath_follow *f, int dirfd, const char *name, uid_t owner, off_t off);
/*
 * What the file gained since the last call, at most max bytes: > 0 bytes
 * read, 0 nothing new (or no file yet), -1 an error (errno; ELOOP for a link).
 */
ssize_t upath_follow_read(struct upath_follow *f, char *buf, size_t max);
/* The file's size now (opened if it appeared), or -1. */
off_t upath_follow_size(struct upath_follow *f);
void upath_follow_release(struct upath_follow *f);

#endif
