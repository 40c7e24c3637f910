//! Seeded sampling: temperature and nucleus (top-p) over the tokens a constraint allows.

/// A small deterministic generator (SplitMix64): same seed, same sequence.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Picks a token among `candidates` (token, logit). `temperature <= 0` is greedy
/// (ties go to the lowest id). Returns `None` when there is no candidate.
pub fn sample(
    candidates: &mut [(u32, f32)],
    temperature: f64,
    top_p: f64,
    rng: &mut Rng,
) -> Option<u32> {
    if candidates.is_empty() {
        return None;
    }
    if temperature <= 0.0 {
        return candidates
            .iter()
            .fold(None::<(u32, f32)>, |best, &(t, l)| match best {
                Some((bt, bl)) if bl > l || (bl == l && bt < t) => Some((bt, bl)),
                _ => Some((t, l)),
            })
            .map(|(t, _)| t);
    }
    candidates.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let max = f64::from(candidates[0].1);
    let mut weights: Vec<f64> = candidates
        .iter()
        .map(|(_, l)| ((f64::from(*l) - max) / temperature).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    // Nucleus: the smallest prefix whose probability reaches top_p.
    let top_p = top_p.clamp(0.0, 1.0);
    let mut kept = 0;
    let mut acc = 0.0;
    for w in &weights {
        kept += 1;
        acc += w / total;
        if acc >= top_p {
            break;
        }
    }
    weights.truncate(kept.max(1));
    let kept_total: f64 = weights.iter().sum();
    let mut r = rng.next_f64() * kept_total;
    for (i, w) in weights.iter().enumerate() {
        if r < *w {
            return Some(candidates[i].0);
        }
        r -= w;
    }
    Some(candidates[weights.len() - 1].0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_highest_logit() {
        let mut c = vec![(3, 0.5), (7, 2.0), (9, 1.0)];
        assert_eq!(sample(&mut c, 0.0, 1.0, &mut Rng::new(1)), Some(7));
    }

    #[test]
    fn same_seed_same_choices_and_top_p_cuts_the_tail() {
        let base = vec![(1, 5.0), (2, 4.9), (3, -20.0)];
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..50)
                .map(|_| sample(&mut base.clone(), 1.0, 0.9, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        assert!(run(42).iter().all(|t| *t != Some(3)));
        assert!(run(42).contains(&Some(1)) && run(42).contains(&Some(2)));
    }
}
