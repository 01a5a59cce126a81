/*
 * trial.c -- a trial's spec: the sweep's base spec with the trial's
 * parameters as --set overrides (spec_parse_set), checked by the same
 * rules as a spec file.
 */
#include "sweep/sweep.h"
#include "core/strvec.h"
#include "core/xalloc.h"
#include "spec/spec.h"

#include <stdlib.h>
#include <string.h>

void sweep_trial_sets(const char *params_json, struct strvec *sets)
{
	json_t *o = json_loads(params_json ? params_json : "{}", 0, NULL);
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v) {
		char *t = sweep_value_text(v);
		strvec_pushf(sets, "%s=%s", k, t);
		free(t);
	}
	json_decref(o);
}

int sweep_trial_spec(const struct sweep_def *d, const char *params_json, const char *backend,
		     struct spec **out, struct tc_err *err)
{
	struct strvec sets = STRVEC_INIT;
	sweep_trial_sets(params_json, &sets);
	const char *name = d->spec_path ? d->spec_path : "spec";
	int rc = spec_parse_set(d->spec_text, strlen(d->spec_text), name, d->base, backend, &sets,
				out, err);
	strvec_clear(&sets);
	return rc;
}

int sweep_check_trials(const struct sweep_def *d, const json_t *trials, const char *backend,
		       struct tc_err *err)
{
	size_t i;
	json_t *t;
	json_array_foreach(trials, i, t) {
		char *p = json_dumps(t, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
		struct spec *s = NULL;
		int rc = sweep_trial_spec(d, p, backend, &s, err);
		spec_free(s);
		if (rc) {
			char *txt = sweep_params_text(p);
			tc_error_prefix(err, "trial %zu (%s)", i, txt);
			free(txt);
			free(p);
			return rc;
		}
		free(p);
	}
	return 0;
}
