/* test_compare.c -- src/compare/: step alignment, tolerances and verdicts */
#include "test.h"

#include "compare/compare.h"

#include <math.h>

#define P(e, i, v) { (e), (i), 0, #e "," #i, (v) }
#define S(seq, v) { -1, -1, (seq), "seq" #seq, (v) }

static const struct compare_opts MAX1 = { 0.01, 1e-8, false };
static const struct compare_opts MEAN1 = { 0.01, 1e-8, true };

TEST(identical_series_align)
{
	struct compare_pt a[] = { P(1, 5, 2.3), P(1, 10, 2.0), P(2, 5, 1.5) };
	struct compare_result r;
	compare_series(a, 3, a, 3, &MAX1, &r);
	CHECK(r.aligned);
	CHECK_INT(r.ncommon, 3);
	CHECK_INT(r.nfail, 0);
	CHECK(r.max_err == 0 && r.mean_err == 0);
	CHECK_INT(r.first_fail, -1);
	compare_result_release(&r);
}

TEST(relative_error_and_first_failing_step)
{
	struct compare_pt a[] = { P(1, 5, 2.0), P(1, 10, 1.0), P(2, 5, 0.5), P(2, 10, 0.25) };
	/* 0.5% off, 0.9% off, 4% off, 2% off */
	struct compare_pt b[] = { P(1, 5, 2.01), P(1, 10, 0.991), P(2, 5, 0.52), P(2, 10, 0.255) };
	struct compare_result r;
	compare_series(a, 4, b, 4, &MAX1, &r);
	CHECK(!r.aligned);
	CHECK_INT(r.nfail, 2);
	CHECK_INT(r.first_fail, 2);
	CHECK_STR(r.rows[r.first_fail].step, "2,5");
	CHECK(fabs(r.max_err - 0.04) < 1e-12);
	CHECK_STR(r.max_step, "2,5");
	CHECK(fabs(r.mean_err - (0.005 + 0.009 + 0.04 + 0.02) / 4) < 1e-12);
	CHECK(fabs(r.rows[0].err - 0.005) < 1e-12);
	compare_result_release(&r);
	/* the mean is 1.85%: still over 1% */
	compare_series(a, 4, b, 4, &MEAN1, &r);
	CHECK(!r.aligned);
	compare_result_release(&r);
	/* the mean judges, the max would not pass */
	struct compare_opts loose_mean = { 0.02, 1e-8, true };
	compare_series(a, 4, b, 4, &loose_mean, &r);
	CHECK(r.aligned);
	CHECK_INT(r.first_fail, 2); /* per-step failures are still named */
	compare_result_release(&r);
}

TEST(different_lengths_and_missing_steps)
{
	struct compare_pt a[] = { P(1, 5, 1.0), P(1, 10, 1.0), P(1, 15, 1.0), P(2, 5, 1.0) };
	struct compare_pt b[] = { P(1, 5, 1.0), P(1, 15, 1.001), P(2, 5, 1.0), P(2, 10, 9.0),
				  P(2, 15, 9.0) };
	struct compare_result r;
	compare_series(a, 4, b, 5, &MAX1, &r);
	CHECK(r.aligned);
	CHECK_INT(r.ncommon, 3);
	CHECK_INT(r.only_a, 1);
	CHECK_INT(r.only_b, 2);
	CHECK_INT(r.nrows, 6);
	CHECK_STR(r.rows[1].step, "1,10");
	CHECK_INT(r.rows[1].status, CMP_ONLY_A);
	CHECK_INT(r.rows[4].status, CMP_ONLY_B);
	compare_result_release(&r);
}

TEST(no_common_step_is_not_aligned)
{
	struct compare_pt a[] = { P(1, 5, 1.0) };
	struct compare_pt b[] = { P(1, 6, 1.0) };
	struct compare_result r;
	compare_series(a, 1, b, 1, &MAX1, &r);
	CHECK(!r.aligned);
	CHECK_INT(r.ncommon, 0);
	CHECK(isnan(r.max_err));
	compare_result_release(&r);
	compare_series(a, 1, b, 0, &MAX1, &r);
	CHECK(!r.aligned);
	CHECK_INT(r.only_a, 1);
	compare_result_release(&r);
}

TEST(zero_reference_uses_absolute_tolerance)
{
	struct compare_pt a[] = { P(1, 1, 0.0), P(1, 2, 1.0) };
	struct compare_pt b1[] = { P(1, 1, 1e-9), P(1, 2, 1.0) };
	struct compare_pt b2[] = { P(1, 1, 1e-3), P(1, 2, 1.0) };
	struct compare_result r;
	compare_series(a, 2, b1, 2, &MAX1, &r);
	CHECK(r.aligned);
	CHECK(r.rows[0].absolute);
	CHECK_INT(r.nabsolute, 1);
	CHECK(r.max_err == 0); /* the absolute row is not in the relative max */
	compare_result_release(&r);
	compare_series(a, 2, b2, 2, &MAX1, &r);
	CHECK(!r.aligned);
	CHECK_INT(r.first_fail, 0);
	CHECK(fabs(r.rows[0].err - 1e-3) < 1e-15);
	compare_result_release(&r);
	/* --mean does not excuse an absolute row */
	compare_series(a, 2, b2, 2, &MEAN1, &r);
	CHECK(!r.aligned);
	compare_result_release(&r);
	/* both zero: exact */
	struct compare_pt z[] = { P(1, 1, 0.0) };
	compare_series(z, 1, z, 1, &MAX1, &r);
	CHECK(r.aligned);
	compare_result_release(&r);
}

TEST(nan_always_fails)
{
	struct compare_pt a[] = { P(1, 1, 1.0), P(1, 2, NAN), P(1, 3, 1.0) };
	struct compare_pt b[] = { P(1, 1, 1.0), P(1, 2, NAN), P(1, 3, INFINITY) };
	struct compare_result r;
	compare_series(a, 3, b, 3, &MAX1, &r);
	CHECK(!r.aligned);
	CHECK_INT(r.first_fail, 1);
	CHECK_INT(r.rows[1].status, CMP_NONFINITE);
	CHECK_INT(r.rows[2].status, CMP_NONFINITE);
	CHECK(isinf(r.max_err));
	CHECK_STR(r.max_step, "1,2");
	compare_result_release(&r);
	struct compare_opts huge_mean = { 1e9, 1e-8, true };
	compare_series(a, 3, a, 3, &huge_mean, &r);
	CHECK(!r.aligned); /* NaN against NaN is still a failure */
	CHECK(isinf(r.mean_err));
	compare_result_release(&r);
}

TEST(repeated_steps_keep_the_last_and_seq_keys)
{
	/* a restarted group logs step (1, 10) again; the last one counts */
	struct compare_pt a[] = { P(1, 5, 1.0), P(1, 10, 5.0), P(1, 10, 1.0) };
	struct compare_pt b[] = { P(1, 5, 1.0), P(1, 10, 1.0) };
	struct compare_result r;
	compare_series(a, 3, b, 2, &MAX1, &r);
	CHECK(r.aligned);
	CHECK_INT(r.ncommon, 2);
	compare_result_release(&r);
	/* plain lines: matched by seq, out of order input sorted */
	struct compare_pt c[] = { S(2, 4.0), S(1, 2.0), S(3, 8.0) };
	struct compare_pt d[] = { S(1, 2.0), S(2, 4.0), S(3, 8.1) };
	compare_series(c, 3, d, 3, &MAX1, &r);
	CHECK(!r.aligned);
	CHECK_STR(r.rows[0].step, "seq1");
	CHECK_STR(r.rows[r.first_fail].step, "seq3");
	compare_result_release(&r);
}

TEST(tolerance_boundary_is_inclusive)
{
	struct compare_pt a[] = { P(1, 1, 100.0) };
	struct compare_pt b[] = { P(1, 1, 101.0) };
	struct compare_result r;
	compare_series(a, 1, b, 1, &MAX1, &r);
	CHECK(r.aligned); /* exactly 1% */
	compare_result_release(&r);
	struct compare_opts zero = { 0, 0, false };
	compare_series(a, 1, a, 1, &zero, &r);
	CHECK(r.aligned);
	compare_result_release(&r);
}

TEST(many_jobs_align_on_the_union_of_steps)
{
	struct compare_pt a[] = { S(1, 1.0), S(2, 2.0), S(3, 3.0) };
	struct compare_pt b[] = { S(2, 20.0), S(3, 30.0), S(4, 40.0) };
	struct compare_pt c[] = { S(1, 100.0), S(1, 101.0) }; /* a step logged twice keeps its last */
	const struct compare_pt *pts[] = { a, b, c };
	size_t n[] = { 3, 3, 2 };
	struct compare_aligned al;
	compare_align(pts, n, 3, &al);
	CHECK_INT(al.nsteps, 4);
	CHECK_STR(al.step[0], "seq1");
	CHECK_STR(al.step[3], "seq4");
	CHECK(al.v[0] == 1.0 && isnan(al.v[1]) && al.v[2] == 101.0);
	CHECK(al.v[3 * 3 + 1] == 40.0 && isnan(al.v[3 * 3 + 0]));
	size_t nr;
	struct compare_range *r = compare_ranges(&al, 3, &nr);
	CHECK_INT(nr, 3);
	CHECK_INT(r[0].first, 0);
	CHECK_INT(r[0].last, 1);
	CHECK_INT(r[1].first, 2);
	CHECK_INT(r[2].last, 3);
	CHECK(r[0].mean[0] == 1.5 && r[0].mean[1] == 20.0 && r[0].mean[2] == 101.0);
	CHECK(isnan(r[2].mean[0]) && r[2].mean[1] == 40.0);
	compare_ranges_free(r, nr);
	r = compare_ranges(&al, 10, &nr); /* never more ranges than steps */
	CHECK_INT(nr, 4);
	compare_ranges_free(r, nr);
	compare_aligned_release(&al);
}
