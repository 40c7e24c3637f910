//! Choosing the next token, seeded: greedy, or at random under a temperature among the
//! top-p most likely of the tokens a constraint allows.

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

/// The candidates first put in order when choosing (see [`choose`]).
const FIRST_CUT: usize = 64;

/// Higher logit first; ties to the lower token id.
fn best_first(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// The next token of a generation: the `logits` of the first `n` tokens, narrowed to those
/// the constraint's `matcher` allows (all of them without one), then [`choose`]n.
/// `candidates` is scratch space kept between steps.
#[cfg_attr(not(feature = "llama-cpp"), allow(dead_code))]
pub(crate) fn next_token(
    matcher: Option<&mut llguidance::Matcher>,
    logits: &[f32],
    n: usize,
    candidates: &mut Vec<(u32, f32)>,
    options: &crate::generation::GenerateOptions,
    rng: &mut Rng,
) -> Result<u32, crate::error::GenerateError> {
    use crate::error::GenerateError;
    let n = logits.len().min(n);
    candidates.clear();
    match matcher {
        Some(m) => {
            let mask = m
                .compute_mask()
                .map_err(|e| GenerateError::Constraint(e.to_string()))?;
            candidates.extend(
                (0..n as u32)
                    .filter(|t| mask.is_allowed(*t))
                    .map(|t| (t, logits[t as usize])),
            );
        }
        None => candidates.extend((0..n as u32).map(|t| (t, logits[t as usize]))),
    }
    choose(candidates, options.temperature, options.top_p, rng)
        .ok_or_else(|| GenerateError::Constraint("no token is allowed at this point".into()))
}

/// Picks a token among `candidates` (token, logit). `temperature <= 0` is greedy
/// (ties go to the lowest id). Returns `None` when there is no candidate.
pub fn choose(
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
    let max = f64::from(candidates.iter().map(|c| c.1).max_by(f32::total_cmp)?);
    let weight = |logit: f32| ((f64::from(logit) - max) / temperature).exp();
    let total: f64 = candidates.iter().map(|(_, l)| weight(*l)).sum();
    // Top-p: the smallest prefix, best first, whose probability reaches top_p. Only the
    // best `cut` candidates are put in order (a vocabulary is 49,152 of them, and the
    // prefix usually a few dozen); `cut` grows until the prefix fits in it.
    let top_p = top_p.clamp(0.0, 1.0);
    let n = candidates.len();
    let mut cut = FIRST_CUT.min(n);
    let mut weights: Vec<f64> = Vec::with_capacity(cut);
    loop {
        if cut < n {
            candidates.select_nth_unstable_by(cut - 1, best_first);
        }
        candidates[..cut].sort_by(best_first);
        weights.clear();
        let mut acc = 0.0;
        for (_, l) in &candidates[..cut] {
            let w = weight(*l);
            weights.push(w);
            acc += w / total;
            if acc >= top_p {
                break;
            }
        }
        if acc >= top_p || cut == n {
            break;
        }
        cut = (cut * 4).min(n);
    }
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

    /// [`choose`] ordering every candidate (what it did before it ordered only the best).
    fn choose_sorting_all(
        candidates: &mut [(u32, f32)],
        temperature: f64,
        top_p: f64,
        rng: &mut Rng,
    ) -> Option<u32> {
        let max = f64::from(candidates.iter().map(|c| c.1).max_by(f32::total_cmp)?);
        let weight = |logit: f32| ((f64::from(logit) - max) / temperature).exp();
        let total: f64 = candidates.iter().map(|(_, l)| weight(*l)).sum();
        candidates.sort_by(best_first);
        let mut weights = Vec::new();
        let mut acc = 0.0;
        for (_, l) in candidates.iter() {
            weights.push(weight(*l));
            acc += weight(*l) / total;
            if acc >= top_p {
                break;
            }
        }
        let mut r = rng.next_f64() * weights.iter().sum::<f64>();
        for (i, w) in weights.iter().enumerate() {
            if r < *w {
                return Some(candidates[i].0);
            }
            r -= w;
        }
        Some(candidates[weights.len() - 1].0)
    }

    #[test]
    fn ordering_only_the_best_picks_what_ordering_all_picks() {
        let mut logit_rng = Rng::new(7);
        for (temperature, top_p, spread) in [(0.7, 0.95, 8.0), (1.0, 0.9, 0.5), (2.0, 1.0, 0.1)] {
            // A vocabulary-sized set of logits, with ties; flat ones need a wide top-p prefix.
            let logits: Vec<(u32, f32)> = (0..49_152u32)
                .map(|t| {
                    (
                        t,
                        ((logit_rng.next_f64() * spread * 16.0).round() / 16.0) as f32,
                    )
                })
                .collect();
            let (mut a, mut b) = (Rng::new(3), Rng::new(3));
            for _ in 0..20 {
                let ours = choose(&mut logits.clone(), temperature, top_p, &mut a);
                let all = choose_sorting_all(&mut logits.clone(), temperature, top_p, &mut b);
                assert_eq!(ours, all, "temperature {temperature}, top_p {top_p}");
            }
        }
    }

    #[test]
    fn greedy_takes_the_highest_logit() {
        let mut c = vec![(3, 0.5), (7, 2.0), (9, 1.0)];
        assert_eq!(choose(&mut c, 0.0, 1.0, &mut Rng::new(1)), Some(7));
    }

    #[test]
    fn same_seed_same_choices_and_top_p_cuts_the_tail() {
        let base = vec![(1, 5.0), (2, 4.9), (3, -20.0)];
        let run = |seed| {
            let mut rng = Rng::new(seed);
            (0..50)
                .map(|_| choose(&mut base.clone(), 1.0, 0.9, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(42), run(42));
        assert!(run(42).iter().all(|t| *t != Some(3)));
        assert!(run(42).contains(&Some(1)) && run(42).contains(&Some(2)));
    }
}
