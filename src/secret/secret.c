/*
 * secret.c -- the secret store, a job's secret and file values resolved,
 * and their masking in its output; see secret.h.
 */
#include "secret/secret.h"
#include "core/enc.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "spec/spec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool secret_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (!n || n > SECRET_NAME_MAX || name[0] == '.')
		return false;
	for (const char *c = name; *c; c++)
		if (!(*c == '-' || *c == '_' || *c == '.' || (*c >= '0' && *c <= '9') ||
		      (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z')))
			return false;
	return true;
}

char *secret_local_dir(const char *home)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/secrets", home);
	return sbuf_detach(&p);
}

char *secret_user_dir(const char *home, const char *user)
{
	struct sbuf p = SBUF_INIT;
	sbuf_addf(&p, "%s/user-secrets/%s", home, user);
	return sbuf_detach(&p);
}

/* ---- the store's folder ---- */

/*
 * dir opened O_NOFOLLOW; with create, it (and its parent) made 0700 when
 * missing.  It must be ours and private: a wider one of ours is tightened.
 */
static int open_store(const char *dir, bool create, int *dfd, struct tc_err *err)
{
	*dfd = -1;
	if (create) {
		/* its parent (the state folder, or user-secrets/) private too when we make it */
		char *parent = path_dirname(dir), *above = path_dirname(parent);
		struct tc_err e2 = TC_ERR_INIT;
		int r = mkdir_p(above, &e2) ? -1 : mkdir(parent, 0700);
		if (r < 0 && !e2.code && errno == EEXIST)
			r = 0;
		tc_err_release(&e2);
		free(above);
		free(parent);
		if (r < 0 || (mkdir(dir, 0700) < 0 && errno != EEXIST))
			return tc_error_errno(err, TC_ESTORAGE, "cannot make the secret store %s", dir);
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return TC_ENOTFOUND;
		return tc_error_errno(err, TC_ESTORAGE, "cannot open the secret store %s", dir);
	}
	struct stat sb;
	if (fstat(fd, &sb) < 0 || sb.st_uid != geteuid()) {
		close(fd);
		return tc_error(err, TC_ESTORAGE, "the secret store %s is not this account's: refused", dir);
	}
	if ((sb.st_mode & 077) && fchmod(fd, 0700) < 0) {
		close(fd);
		return tc_error_errno(err, TC_ESTORAGE, "cannot make %s private", dir);
	}
	*dfd = fd;
	return 0;
}

static int bad_name(const char *name, struct tc_err *err)
{
	return tc_error(err, TC_EINPUT,
			"'%s' is not a secret name (1 to %d letters, digits, '.', '_' and '-', not"
			" starting with '.')",
			name, SECRET_NAME_MAX);
}

int secret_put(const char *dir, const char *name, const char *value, size_t len,
	       struct tc_err *err)
{
	if (!secret_name_ok(name))
		return bad_name(name, err);
	if (len > SECRET_VALUE_MAX)
		return tc_error(err, TC_EINPUT, "secret '%s': the value is over %d bytes", name,
				SECRET_VALUE_MAX);
	if (memchr(value, '\0', len))
		return tc_error(err, TC_EINPUT, "secret '%s': the value holds a NUL byte, which an"
				" environment variable cannot", name);
	int dfd, rc = open_store(dir, true, &dfd, err);
	if (rc)
		return rc == TC_ENOTFOUND ? tc_error(err, TC_ESTORAGE, "no secret store %s", dir) : rc;
	/* a temp name no secret can have ('.' first), made new: nothing planted is written through */
	char tmp[64];
	snprintf(tmp, sizeof(tmp), ".tmp-%ld-%lx", (long)getpid(), (unsigned long)now_mono_ms());
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = tc_error_errno(err, TC_ESTORAGE, "cannot write secret '%s' in %s", name, dir);
		goto out;
	}
	if (fchmod(fd, 0600) < 0 || write_all(fd, value, len) < 0 || fsync(fd) < 0) {
		rc = tc_error_errno(err, TC_ESTORAGE, "cannot write secret '%s' in %s", name, dir);
		close(fd);
		unlinkat(dfd, tmp, 0);
		goto out;
	}
	if (close(fd) < 0 || renameat(dfd, tmp, dfd, name) < 0) {
		rc = tc_error_errno(err, TC_ESTORAGE, "cannot write secret '%s' in %s", name, dir);
		unlinkat(dfd, tmp, 0);
	}
out:
	close(dfd);
	return rc;
}

int secret_get(const char *dir, const char *name, struct sbuf *out, struct tc_err *err)
{
	if (!secret_name_ok(name))
		return bad_name(name, err);
	int dfd, rc = open_store(dir, false, &dfd, err);
	if (rc == TC_ENOTFOUND)
		return tc_error(err, TC_ENOTFOUND, "no secret '%s'", name);
	if (rc)
		return rc;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	struct stat sb;
	if (fd < 0 && (errno == ENOENT || errno == ELOOP))
		rc = tc_error(err, TC_ENOTFOUND, "no secret '%s'", name);
	else if (fd < 0 || fstat(fd, &sb) < 0)
		rc = tc_error_errno(err, TC_ESTORAGE, "cannot read secret '%s'", name);
	else if (!S_ISREG(sb.st_mode) || sb.st_size > SECRET_VALUE_MAX)
		rc = tc_error(err, TC_ESTORAGE, "secret '%s' is not a regular file of at most %d bytes",
			      name, SECRET_VALUE_MAX);
	else {
		char buf[4096];
		ssize_t r;
		while ((r = read(fd, buf, sizeof(buf))) > 0 || (r < 0 && errno == EINTR))
			if (r > 0)
				sbuf_add(out, buf, (size_t)r);
		if (r < 0)
			rc = tc_error_errno(err, TC_ESTORAGE, "cannot read secret '%s'", name);
	}
	if (fd >= 0)
		close(fd);
	close(dfd);
	return rc;
}

bool secret_exists(const char *dir, const char *name)
{
	struct sbuf v = SBUF_INIT;
	struct tc_err err = TC_ERR_INIT;
	bool ok = secret_get(dir, name, &v, &err) == 0;
	sbuf_release(&v);
	tc_err_release(&err);
	return ok;
}

int secret_remove(const char *dir, const char *name, struct tc_err *err)
{
	if (!secret_name_ok(name))
		return bad_name(name, err);
	int dfd, rc = open_store(dir, false, &dfd, err);
	if (rc == TC_ENOTFOUND)
		return tc_error(err, TC_ENOTFOUND, "no secret '%s'", name);
	if (rc)
		return rc;
	if (unlinkat(dfd, name, 0) < 0)
		rc = errno == ENOENT ? tc_error(err, TC_ENOTFOUND, "no secret '%s'", name)
				     : tc_error_errno(err, TC_ESTORAGE, "cannot remove secret '%s'", name);
	close(dfd);
	return rc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int secret_list(const char *dir, struct strvec *out, struct tc_err *err)
{
	int dfd, rc = open_store(dir, false, &dfd, err);
	if (rc == TC_ENOTFOUND)
		return 0;
	if (rc)
		return rc;
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return tc_error_errno(err, TC_ESTORAGE, "cannot list %s", dir);
	}
	size_t first = out->nr;
	struct dirent *e;
	while ((e = readdir(d))) {
		struct stat sb;
		if (secret_name_ok(e->d_name) && fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISREG(sb.st_mode))
			strvec_push(out, e->d_name);
	}
	closedir(d);
	if (out->nr > first)
		qsort(out->v + first, out->nr - first, sizeof(char *), cmp_str);
	return 0;
}

void secret_trim(struct sbuf *v)
{
	if (v->len && v->buf[v->len - 1] == '\n') {
		v->len--;
		if (v->len && v->buf[v->len - 1] == '\r')
			v->len--;
		v->buf[v->len] = '\0';
	}
}

/* ---- a job's values ---- */

void secret_vals_release(struct secret_vals *v)
{
	strvec_clear(&v->env);
	strvec_clear(&v->mask);
}

/* path's bytes, appended to out (we are the job's account); a message in err when it cannot be. */
static int read_value(const char *path, struct sbuf *out, struct tc_err *err)
{
	struct tc_err e2 = TC_ERR_INIT;
	int rc = read_file(path, out, &e2);
	if (rc)
		rc = tc_error(err, TC_ESTORAGE, "%s", e2.msg);
	tc_err_release(&e2);
	return rc;
}

/* Each line of value (and value) of SECRET_MASK_MIN bytes or more, to mask. */
static void add_mask(struct strvec *mask, const char *value)
{
	if (strlen(value) >= SECRET_MASK_MIN)
		strvec_push(mask, value);
	if (!strchr(value, '\n'))
		return;
	for (const char *p = value; *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		if (n && p[n - 1] == '\r')
			n--;
		if (n >= SECRET_MASK_MIN) {
			char *line = xstrndup(p, n);
			strvec_push_nodup(mask, line);
		}
		p += nl ? (size_t)(nl - p) + 1 : strlen(p);
	}
}

int secret_resolve(const struct spec *s, const struct secret_src *src, struct secret_vals *out,
		   struct tc_err *err)
{
	int rc = 0;
	for (size_t i = 0; i < s->nenv && !rc; i++) {
		const struct spec_kv *kv = &s->env[i];
		if (kv->from == ENV_FROM_VALUE)
			continue;
		struct sbuf v = SBUF_INIT;
		if (kv->from == ENV_FROM_SECRET && src->given) {
			const char *g = env_get(src->given, kv->val);
			if (g)
				sbuf_adds(&v, g);
			else
				rc = tc_error(err, TC_ESTORAGE, "env %s: secret '%s' was not handed to the"
					      " job (`trainctl secret set %s` on the server)",
					      kv->key, kv->val, kv->val);
		} else if (kv->from == ENV_FROM_SECRET) {
			struct tc_err e2 = TC_ERR_INIT;
			if (secret_get(src->local_dir, kv->val, &v, &e2))
				rc = tc_error(err, TC_ESTORAGE, "env %s: %s (`trainctl secret set %s`)",
					      kv->key, e2.msg, kv->val);
			tc_err_release(&e2);
		} else {
			struct tc_err e2 = TC_ERR_INIT;
			if (read_value(kv->val, &v, &e2))
				rc = tc_error(err, TC_ESTORAGE, "env %s: {file: %s}: %s", kv->key, kv->val,
					      e2.msg);
			else if (v.len > SECRET_VALUE_MAX || memchr(v.buf, '\0', v.len))
				rc = tc_error(err, TC_ESTORAGE, "env %s: {file: %s}: not text of at most"
					      " %d bytes", kv->key, kv->val, SECRET_VALUE_MAX);
			tc_err_release(&e2);
			secret_trim(&v);
		}
		if (!rc) {
			env_set(&out->env, kv->key, v.buf ? v.buf : "");
			add_mask(&out->mask, v.buf ? v.buf : "");
		}
		sbuf_release(&v);
	}
	if (rc)
		secret_vals_release(out);
	return rc;
}

/* The name in have closest to name ("hf_tokn" -> "hf_token"), or NULL. */
static const char *closest(const struct strvec *have, const char *name)
{
	size_t n = strlen(name), limit = n <= 3 ? 1 : n <= 8 ? 2 : 3, best_d = limit + 1;
	const char *best = NULL;
	for (size_t i = 0; i < have->nr; i++) {
		size_t d = edit_distance(have->v[i], name);
		if (d < best_d) {
			best_d = d;
			best = have->v[i];
		}
	}
	return best;
}

char *secret_missing(const struct spec *s, const char *dir)
{
	struct sbuf m = SBUF_INIT;
	struct strvec have = STRVEC_INIT;
	struct tc_err e = TC_ERR_INIT;
	bool listed = false;
	for (size_t i = 0; i < s->nenv; i++) {
		if (s->env[i].from != ENV_FROM_SECRET || secret_exists(dir, s->env[i].val))
			continue;
		sbuf_addf(&m, "%s%s", m.len ? ", " : "", s->env[i].val);
		if (!listed)
			listed = true, (void)secret_list(dir, &have, &e); /* no list: no suggestion */
		const char *near = closest(&have, s->env[i].val);
		if (near)
			sbuf_addf(&m, " (did you mean '%s'?)", near);
	}
	strvec_clear(&have);
	tc_err_release(&e);
	return m.len ? sbuf_detach(&m) : NULL;
}

/*
 * The handover's text: "NAME=HEX;NAME=HEX" (hex: any bytes but NUL pass
 * through an environment variable unharmed).
 */
int secret_handover(const struct spec *s, const char *dir, char **text, struct tc_err *err)
{
	struct sbuf t = SBUF_INIT;
	int rc = 0;
	*text = NULL;
	for (size_t i = 0; i < s->nenv && !rc; i++) {
		if (s->env[i].from != ENV_FROM_SECRET)
			continue;
		struct sbuf v = SBUF_INIT;
		struct tc_err e2 = TC_ERR_INIT;
		if (secret_get(dir, s->env[i].val, &v, &e2)) {
			rc = tc_error(err, TC_ESTORAGE, "env %s: %s (`trainctl secret set %s --server URL`)",
				      s->env[i].key, e2.msg, s->env[i].val);
		} else {
			char *hex = xmalloc(2 * v.len + 1);
			hex_encode(hex, v.buf ? v.buf : "", v.len);
			sbuf_addf(&t, "%s%s=%s", t.len ? ";" : "", s->env[i].val, hex);
			free(hex);
		}
		tc_err_release(&e2);
		sbuf_release(&v);
	}
	if (rc)
		sbuf_release(&t);
	else
		*text = t.len ? sbuf_detach(&t) : xstrdup("");
	return rc;
}

bool secret_take_env(struct strvec *out)
{
	const char *v = getenv(SECRET_ENV_VAR);
	if (!v)
		return false;
	for (const char *p = v; *p;) {
		const char *semi = strchr(p, ';');
		size_t n = semi ? (size_t)(semi - p) : strlen(p);
		const char *eq = memchr(p, '=', n);
		if (eq) {
			char *name = xstrndup(p, (size_t)(eq - p));
			const char *h = eq + 1;
			size_t hn = n - (size_t)(h - p);
			struct sbuf val = SBUF_INIT;
			bool ok = hn % 2 == 0;
			for (size_t k = 0; ok && k < hn; k += 2) {
				int hi = hex_digit(h[k]), lo = hex_digit(h[k + 1]);
				ok = hi >= 0 && lo >= 0 && (hi || lo);
				if (ok)
					sbuf_addch(&val, (char)(hi << 4 | lo));
			}
			if (ok && secret_name_ok(name))
				env_set(out, name, val.buf ? val.buf : "");
			sbuf_release(&val);
			free(name);
		}
		p += n + (semi ? 1 : 0);
	}
	/*
	 * Our workers and helpers start from our environment: it goes now.  Its
	 * bytes are wiped where they are first, as /proc/PID/environ shows the
	 * environment we were started with.
	 */
	explicit_bzero((char *)v, strlen(v));
	unsetenv(SECRET_ENV_VAR);
	return true;
}

/* ---- masking ---- */

bool secret_mask(const struct strvec *mask, const char *data, size_t len, struct sbuf *out)
{
	sbuf_reset(out);
	if (!mask || !mask->nr)
		return false;
	const char *p = data, *end = data + len;
	bool any = false;
	while (p < end) {
		/* the earliest match of any value, the longest there */
		const char *best = NULL;
		size_t best_len = 0;
		for (size_t i = 0; i < mask->nr; i++) {
			size_t n = strlen(mask->v[i]);
			const char *m = n ? memmem(p, (size_t)(end - p), mask->v[i], n) : NULL;
			if (m && (!best || m < best || (m == best && n > best_len))) {
				best = m;
				best_len = n;
			}
		}
		if (!best)
			break;
		sbuf_add(out, p, (size_t)(best - p));
		sbuf_adds(out, "***");
		p = best + best_len;
		any = true;
	}
	if (!any)
		return false;
	sbuf_add(out, p, (size_t)(end - p));
	return true;
}
