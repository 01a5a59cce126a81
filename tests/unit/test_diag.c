/* test_diag.c -- src/diag/: the median, the hang timeout, step times and
 * stragglers, faulthandler stacks and the likely culprit, the resume check
 * (docs/diagnostics.md states the rules) */
#include "test.h"

#include "diag/diag.h"
#include "spec/spec.h"

#include <math.h>

TEST(median_odd_even_empty)
{
	double a[] = { 5, 1, 3 };
	CHECK(diag_median(a, 3) == 3);
	double b[] = { 4, 1, 3, 2 };
	CHECK(diag_median(b, 4) == 2.5);
	CHECK(isnan(diag_median(b, 0)));
}

TEST(hang_timeout_rule)
{
	struct diag_hang_rule r = { .warmup_steps = 10, .min_seconds = 900, .factor = 5,
				    .startup_seconds = 0 };
	/* before the first step: off unless startup_seconds */
	CHECK(diag_hang_timeout(&r, 0, NAN) == 0);
	r.startup_seconds = 60;
	CHECK(diag_hang_timeout(&r, 0, NAN) == 60);
	/* warm-up: no rule */
	CHECK(diag_hang_timeout(&r, 9, 1.0) == 0);
	/* the larger of min_seconds and factor x median */
	CHECK(diag_hang_timeout(&r, 10, 1.0) == 900);
	CHECK(diag_hang_timeout(&r, 10, 600) == 3000); /* 10-minute steps: 50 minutes */
	CHECK(diag_hang_timeout(&r, 10, NAN) == 900);
}

TEST(defaults_never_fire_on_slow_healthy_steps)
{
	/* the spec's defaults (docs/diagnostics.md: how they were chosen) */
	struct spec *s = malloc(sizeof(*s));
	CHECK(s);
	spec_init(s);
	struct diag_hang_rule r = { s->watchdog.warmup_steps, s->watchdog.min_seconds,
				    s->watchdog.factor, s->watchdog.startup_seconds };
	CHECK(s->watchdog.startup_seconds == 0);
	/* digits: steps of milliseconds, epochs ending in a checkpoint of a second */
	CHECK(diag_hang_timeout(&r, 100, 0.002) >= 600);
	/* 10-minute steps with a step 2x slower than the median now and then */
	CHECK(diag_hang_timeout(&r, 100, 600) >= 2 * 600 * 2);
	spec_free(s);
}

TEST(steps_median_and_stragglers)
{
	struct diag_steps *d = diag_steps_new(4, 5);
	/* ranks 0..2 take 1 s a step, rank 3 takes 1.5 s */
	for (int k = 0; k <= 10; k++) {
		for (int r = 0; r < 3; r++)
			diag_steps_add(d, r, k * 1.0, NAN);
		diag_steps_add(d, 3, k * 1.5, NAN);
	}
	CHECK_INT(diag_steps_count(d), 11);
	CHECK(fabs(diag_steps_rank_time(d, 0) - 1.0) < 1e-9);
	CHECK(fabs(diag_steps_rank_time(d, 3) - 1.5) < 1e-9);
	int out[4];
	double med;
	CHECK_INT(diag_stragglers(d, 20, out, 4, &med), 1);
	CHECK_INT(out[0], 3);
	CHECK(fabs(med - 1.0) < 1e-9);
	/* 60% is more than rank 3's 50% */
	CHECK_INT(diag_stragglers(d, 60, out, 4, &med), 0);
	/* a record's own step time wins over the interval */
	diag_steps_add(d, 0, 11.0, 0.25);
	CHECK(diag_steps_rank_count(d, 0) == 12);
	/* a rank outside the world is ignored */
	diag_steps_add(d, 7, 1.0, NAN);
	diag_steps_add(d, -1, 1.0, NAN);
	/* a new attempt: the first step after it is no interval */
	diag_steps_new_attempt(d);
	CHECK(isnan(diag_steps_rank_time(d, 0)));
	diag_steps_add(d, 0, 500, NAN);
	CHECK(isnan(diag_steps_rank_time(d, 0)));
	CHECK(diag_steps_median(d) < 2); /* 500 - 11 was not taken as a step */
	diag_steps_free(d);
	diag_steps_free(NULL);
}

TEST(stragglers_of_needs_two_ranks)
{
	double t[] = { 1.0, NAN };
	int out[2];
	double med;
	CHECK_INT(diag_stragglers_of(t, 2, 10, out, 2, &med), 0);
	CHECK(isnan(med));
	double u[] = { 1.0, 1.0, 2.0 };
	CHECK_INT(diag_stragglers_of(u, 3, 10, out, 2, &med), 1);
	CHECK_INT(out[0], 2);
}

static const char rank0[] =
	"Thread 0x00007f0000000001 (most recent call first):\n"
	"  File \"/usr/lib/python3.11/threading.py\", line 324 in wait\n"
	"  File \"/usr/lib/python3.11/threading.py\", line 622 in wait\n"
	"\n"
	"Current thread 0x00007f430e70a2c0 (most recent call first):\n"
	"  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1541 in all_reduce\n"
	"  File \"/tmp/train.py\", line 41 in <module>\n";
static const char rank1[] =
	"Current thread 0x00007f93fbe232c0 (most recent call first):\n"
	"  File \"/tmp/train.py\", line 34 in stuck_in_step\n"
	"  File \"/tmp/train.py\", line 40 in <module>\n";

TEST(stack_parse)
{
	struct diag_stack s = { 0 };
	diag_stack_parse(rank0, sizeof(rank0) - 1, &s);
	CHECK_INT(s.nt, 2);
	CHECK(!s.t[0].current && s.t[1].current);
	CHECK_INT(s.t[1].nf, 2);
	CHECK_STR(s.t[1].f[0].func, "all_reduce");
	CHECK_INT(s.t[1].f[0].line, 1541);
	CHECK_STR(s.t[1].f[1].file, "/tmp/train.py");
	const char *where = NULL;
	CHECK(diag_stack_in_collective(&s, &where));
	CHECK_STR(where, "all_reduce");
	diag_stack_release(&s);
	/* cut and odd lines are skipped, never a crash */
	const char junk[] = "Current thread 0x1 (most\n  File \"x\nline\n  File \"a\", line 9 in";
	diag_stack_parse(junk, sizeof(junk) - 1, &s);
	CHECK_INT(s.nt, 1);
	diag_stack_release(&s);
}

TEST(culprit_is_the_rank_outside_the_collective)
{
	struct diag_stack a = { 0 }, b = { 0 }, c = { 0 };
	diag_stack_parse(rank0, sizeof(rank0) - 1, &a);
	diag_stack_parse(rank1, sizeof(rank1) - 1, &b);
	diag_stack_parse(rank0, sizeof(rank0) - 1, &c);
	const struct diag_stack *v[] = { &a, &b, &c };
	struct sbuf why = SBUF_INIT;
	CHECK_INT(diag_culprit(v, 3, &why), 1);
	CHECK_CONTAINS(why.buf, "rank 1 is not in a collective while 2 other ranks wait in all_reduce");
	/* two ranks: the same */
	sbuf_reset(&why);
	CHECK_INT(diag_culprit(v, 2, &why), 1);
	/* a rank without a stack is left out */
	const struct diag_stack *w[] = { &a, NULL, &b };
	sbuf_reset(&why);
	CHECK_INT(diag_culprit(w, 3, &why), 2);
	/* everyone in the collective: nobody stands out */
	const struct diag_stack *x[] = { &a, &c };
	sbuf_reset(&why);
	CHECK_INT(diag_culprit(x, 2, &why), -1);
	/* no collective, three ranks: the odd one out */
	const struct diag_stack *y[] = { &b, &b, &b };
	sbuf_reset(&why);
	CHECK_INT(diag_culprit(y, 3, &why), -1);
	struct diag_stack d = { 0 };
	const char other[] = "Current thread 0x2 (most recent call first):\n"
			     "  File \"/tmp/train.py\", line 77 in load_batch\n";
	diag_stack_parse(other, sizeof(other) - 1, &d);
	const struct diag_stack *z[] = { &b, &d, &b };
	sbuf_reset(&why);
	CHECK_INT(diag_culprit(z, 3, &why), 1);
	CHECK_CONTAINS(why.buf, "rank 1 is not where the other 2 ranks are");
	sbuf_reset(&why);
	CHECK_INT(diag_culprit(z, 0, &why), -1);
	sbuf_release(&why);
	diag_stack_release(&a);
	diag_stack_release(&b);
	diag_stack_release(&c);
	diag_stack_release(&d);
}

TEST(resume_check)
{
	CHECK_INT(diag_ckpt_step("/x/ckpt/step-5.pt"), 5);
	CHECK_INT(diag_ckpt_step("/x/ckpt/epoch-3.pt"), 3);
	CHECK_INT(diag_ckpt_step("/x/ckpt/checkpoint-500/"), 500);
	CHECK_INT(diag_ckpt_step("/x/ckpt/llama-2_120.ckpt"), 120);
	CHECK_INT(diag_ckpt_step("/x/7/latest"), -1);
	CHECK_INT(diag_ckpt_step(NULL), -1);
	CHECK(diag_resume_continues(5, -1, 6));
	CHECK(!diag_resume_continues(5, -1, 1));
	CHECK(!diag_resume_continues(5, -1, 7));
	CHECK(diag_resume_continues(3, 4, 1)); /* an epoch checkpoint: the next epoch */
	CHECK(diag_resume_continues(5, -1, -1)); /* nothing to compare */
	CHECK(diag_resume_continues(-1, 0, 0));
}

TEST(sitecustomize_text)
{
	const char *py = diag_sitecustomize_py();
	CHECK_CONTAINS(py, "faulthandler.register(sig, file=f, all_threads=True, chain=False)");
	CHECK_CONTAINS(py, "TRAINCTL_STACK_DIR");
	CHECK_CONTAINS(py, "register_at_fork");
}

/* the root cause's exception line (issue 29, item 11) */
static char *exc(const char *text)
{
	return diag_exception_line(text, strlen(text), false);
}

TEST(exception_line)
{
	char *s = exc("loading\nTraceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n"
		      "    x = {}['missing_key']\n        ~~^^^^^^^\nKeyError: 'missing_key'\n");
	CHECK_STR(s, "KeyError: 'missing_key'");
	free(s);
	/* chained: the last traceback's exception */
	s = exc("Traceback (most recent call last):\n  File \"a\", line 1\nValueError: a\n\n"
		"During handling of the above exception, another exception occurred:\n\n"
		"Traceback (most recent call last):\n  File \"b\", line 2\ntorch.OutOfMemoryError: CUDA out of memory\n"
		"[rank0]: extra\n");
	CHECK_STR(s, "torch.OutOfMemoryError: CUDA out of memory");
	free(s);
	/* torch @record's message, a bare exception name */
	s = exc("KeyError: 'missing_key'");
	CHECK_STR(s, "KeyError: 'missing_key'");
	free(s);
	s = exc("SystemExit");
	CHECK_STR(s, "SystemExit");
	free(s);
	/* not an exception line: nothing */
	CHECK(exc("exit status 3, see the log") == NULL);
	CHECK(exc("Traceback (most recent call last):\n  File \"x\", line 1\n") == NULL);
	CHECK(exc("") == NULL);
	/* a log without a traceback names none, whatever its first line */
	CHECK(diag_exception_line("hello\n", 6, true) == NULL);
	/* cut at DIAG_EXCEPTION_MAX bytes, at a character's start */
	char big[600] = "E: ";
	for (size_t i = 3; i + 2 < sizeof(big) - 1; i += 2)
		memcpy(big + i, "\xc3\xa9", 2);
	s = exc(big);
	CHECK(s && strlen(s) <= DIAG_EXCEPTION_MAX && ((unsigned char)s[strlen(s) - 1] & 0xc0) == 0x80);
	free(s);
}
