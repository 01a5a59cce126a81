/* ckpt.c -- checkpoint discovery; see ckpt.h. */
#include "ckpt/ckpt.h"
#include "core/sbuf.h"
#include "core/xalloc.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
