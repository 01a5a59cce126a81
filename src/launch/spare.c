/*
 * spare.c -- a hot spare's watch (spare.h): the job's device health
 * checks, at once and then every interval, each told to the driver as one
 * line; and the driver's reading of those lines.
 */
#include "launch/spare.h"
#include "core/sbuf.h"
#include "core/util.h"
#include "core/xalloc.h"
#include "devices/health.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* One check of the devices, as its line (heap, '\n'-terminated). */
static char *check_line(const struct launch_spare_watch *w, struct health_watch *hw)
{
	bool checked = hw != NULL;
	struct sbuf why = SBUF_INIT;
	if (checked) {
		char **reasons = xcalloc((size_t)w->n + 1, sizeof(char *));
		health_check(hw, w->ids, w->n, reasons);
		for (int i = 0; i < w->n; i++)
			if (reasons[i])
				sbuf_addf(&why, "%s%s %d: %s", why.len ? "; " : "", w->type, w->ids[i],
					  reasons[i]);
		health_reasons_release(reasons, w->n);
		free(reasons);
	}
	json_t *o = json_pack("{s:s, s:f, s:b, s:b, s:s?}", "node_name", w->node_name, "time",
			      now_wall(), "ok", why.len == 0, "checked", checked, "reason",
			      why.len ? why.buf : NULL);
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	struct sbuf line = SBUF_INIT;
	sbuf_addf(&line, "%s%s\n", LAUNCH_SPARE_TAG, text ? text : "{}");
	free(text);
	json_decref(o);
	sbuf_release(&why);
	return sbuf_detach(&line);
}

/* Sleep up to seconds, in short slices so that a stop is seen within a quarter second. */
static void nap(const struct launch_spare_watch *w, int seconds)
{
	for (int i = 0; i < seconds * 4 && !*w->stop; i++) {
		struct timespec ts = { 0, 250 * 1000 * 1000 };
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !*w->stop)
			;
	}
}

int launch_spare_watch(const struct launch_spare_watch *w, struct tc_err *err)
{
	if (!w->node_name || !*w->node_name || !w->type || w->n < 0 || w->interval <= 0 || !w->tell)
		return tc_error(err, TC_EUSAGE, "spare: a node name, a device type and an interval "
				"are needed");
	/* kept open between checks: a GPU's XID events arrive in between (health.h) */
	struct health_watch *hw = health_checked(w->type) ? health_open(w->type) : NULL;
	while (!*w->stop) {
		char *line = check_line(w, hw);
		bool heard = w->tell(w->tell_ctx, line);
		free(line);
		if (!heard)
			break; /* the driver's srun is gone: nobody to wait for */
		nap(w, w->interval);
	}
	health_close(hw);
	return 0;
}

bool launch_spare_parse(const char *line, size_t len, struct launch_spare_health *out)
{
	static const char tag[] = LAUNCH_SPARE_TAG;
	memset(out, 0, sizeof(*out));
	if (len < sizeof(tag) - 1 || memcmp(line, tag, sizeof(tag) - 1) != 0)
		return false;
	json_t *o = json_loadb(line + sizeof(tag) - 1, len - (sizeof(tag) - 1), 0, NULL);
	const char *name = json_string_value(json_object_get(o, "node_name"));
	json_t *ok = json_object_get(o, "ok");
	bool good = name && *name && json_is_boolean(ok);
	if (good) {
		const char *why = json_string_value(json_object_get(o, "reason"));
		out->node_name = xstrdup(name);
		out->time = json_number_value(json_object_get(o, "time"));
		out->ok = json_is_true(ok);
		if (!out->ok)
			out->reason = xstrdup(why && *why ? why : "no reason given");
	}
	json_decref(o);
	return good;
}

void launch_spare_health_release(struct launch_spare_health *h)
{
	if (!h)
		return;
	free(h->node_name);
	free(h->reason);
	h->node_name = h->reason = NULL;
}
