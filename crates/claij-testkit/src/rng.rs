//! A seeded random source (SplitMix64): tiny, deterministic, good enough to scatter
//! test events; not for anything that needs real randomness.

use std::time::{SystemTime, UNIX_EPOCH};

/// A seeded pseudo-random source: the same seed gives the same sequence.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A source seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// A source seeded from the environment variable `var` when it holds a number, else
    /// from the clock. Returns the seed too, for the test to print so that a failure can
    /// be replayed (`VAR=seed cargo test …`).
    pub fn from_env(var: &str) -> (Rng, u64) {
        let seed = std::env::var(var)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0x5eed)
            });
        (Rng::new(seed), seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `low..=high` (`low` when `high < low`).
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        let span = high - low + 1;
        // Multiply-shift: uniform enough for test scheduling, and never divides by zero.
        low + ((u128::from(self.next_u64()) * u128::from(span)) >> 64) as u64
    }

    /// `true` with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.between(0, 99) < percent
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn the_same_seed_gives_the_same_sequence_within_bounds() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        for _ in 0..1000 {
            let x = a.between(3, 9);
            assert_eq!(x, b.between(3, 9));
            assert!((3..=9).contains(&x));
        }
        let mut c = Rng::new(7);
        let seen: std::collections::HashSet<u64> = (0..200).map(|_| c.between(0, 4)).collect();
        assert_eq!(seen.len(), 5, "every value comes up");
        assert_eq!(Rng::new(1).between(5, 5), 5);
        assert_eq!(Rng::new(1).between(5, 2), 5);
    }
}
