//! The statistics of the report: the Wilson score interval of a pass rate and
//! nearest-rank percentiles.

/// z for a two-sided 95 % interval.
const Z95: f64 = 1.959_963_984_540_054;

/// The 95 % Wilson score interval of `passed` successes in `n` trials, as `(low, high)`
/// fractions; `(0, 1)` when there were no trials. Unlike the normal approximation it
/// stays inside [0, 1] and says something useful at 0/n and n/n.
pub fn wilson_95(passed: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let n = n as f64;
    let p = passed as f64 / n;
    let z2 = Z95 * Z95;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The nearest-rank percentile `q` (0 < q ≤ 100) of `values`: the smallest value with at
/// least q % of the values at or below it. `None` for no values.
pub fn percentile(values: &[u64], q: f64) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let rank = ((q / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted.get(rank.min(sorted.len()) - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::{percentile, wilson_95};

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 5e-4
    }

    #[test]
    fn wilson_matches_hand_computed_intervals() {
        // 8 of 10: p = .8, z² = 3.8415; centre = (.8 + .19207) / 1.38415 = .71674;
        // half = 1.96 · √(.016 + .0096037) / 1.38415 = .22657 → [.4902, .9433].
        let (lo, hi) = wilson_95(8, 10);
        assert!(close(lo, 0.4902) && close(hi, 0.9433), "{lo} {hi}");
        // 0 of 5: centre = .38415 / 1.76830 = .21724 = half → [0, .4345].
        let (lo, hi) = wilson_95(0, 5);
        assert!(close(lo, 0.0) && close(hi, 0.4345), "{lo} {hi}");
        // 5 of 5 mirrors it.
        let (lo, hi) = wilson_95(5, 5);
        assert!(close(lo, 0.5655) && close(hi, 1.0), "{lo} {hi}");
        // 1 of 2: centre .5, half = 1.96 · √(.125 + .24009) / 2.92074 = .40546.
        let (lo, hi) = wilson_95(1, 2);
        assert!(close(lo, 0.0945) && close(hi, 0.9055), "{lo} {hi}");
        assert_eq!(wilson_95(0, 0), (0.0, 1.0));
    }

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let v = [15, 20, 35, 40, 50];
        // p50: rank ⌈2.5⌉ = 3 → 35; p95: rank ⌈4.75⌉ = 5 → 50; p20: rank 1 → 15.
        assert_eq!(percentile(&v, 50.0), Some(35));
        assert_eq!(percentile(&v, 95.0), Some(50));
        assert_eq!(percentile(&v, 20.0), Some(15));
        // Order does not matter; ten values: p50 = 5th, p95 = 10th.
        let w = [10, 1, 9, 2, 8, 3, 7, 4, 6, 5];
        assert_eq!(percentile(&w, 50.0), Some(5));
        assert_eq!(percentile(&w, 95.0), Some(10));
        assert_eq!(percentile(&[7], 95.0), Some(7));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
