//! `vote: k` (an `llm` state's option): the state's answer decided by a majority of k.
//!
//! The first answer is decoded as configured (greedy by default); each of the k − 1
//! others is sampled ([`sampled`]: the configured temperature when it is above 0, else
//! [`VOTE_TEMPERATURE`], each with its own seed), from the same request. Every answer
//! that parses as one JSON object votes for the route its `id` names; the route with the
//! most votes wins, a tie going to the route voted for first (so the configured answer's
//! route wins a tie), and the first answer that voted for it is the state's answer.
//! Extra samples are optional calls: a budget that would be overrun by one stops the
//! voting, never the run. The votes are recorded in the attempt's trail entry (`votes`)
//! and their tokens in its `usage`.

use serde_json::Value;

use crate::request::Decoding;

/// The temperature of the extra samples when the state's own is 0 (greedy), which
/// would give the same answer k times.
pub const VOTE_TEMPERATURE: f32 = 0.7;

/// The most answers one vote may ask for.
pub const MAX_VOTES: u32 = 9;

/// The decoding of the `i`th extra sample (from 1): `decoding`, sampled at its own
/// temperature when that is above 0, else at [`VOTE_TEMPERATURE`], seeded `seed + i`.
pub fn sampled(base: Decoding, i: u32) -> Decoding {
    Decoding {
        temperature: Some(
            base.temperature
                .filter(|t| *t > 0.0)
                .unwrap_or(VOTE_TEMPERATURE),
        ),
        seed: Some(base.seed.unwrap_or(0).wrapping_add(u64::from(i))),
        ..base
    }
}

/// Which answer wins: `routes` holds each answer's route (its `id`, `None` for an
/// answer that did not parse), in the order they were sampled. The index of the first
/// answer for the route with the most votes (a tie: the route voted for first); `None`
/// when no answer voted.
pub fn winner(routes: &[Option<Value>]) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None; // (votes, first index)
    for (i, route) in routes.iter().enumerate() {
        let Some(route) = route else { continue };
        if routes[..i].iter().any(|r| r.as_ref() == Some(route)) {
            continue; // counted at its first vote
        }
        let votes = routes.iter().filter(|r| r.as_ref() == Some(route)).count();
        if best.is_none_or(|(most, _)| votes > most) {
            best = Some((votes, i));
        }
    }
    best.map(|(_, i)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(to: &str) -> Option<Value> {
        Some(json!(["route", to]))
    }

    #[test]
    fn the_majority_route_wins_with_its_first_answer() {
        assert_eq!(winner(&[id("a"), id("b"), id("b")]), Some(1));
        assert_eq!(winner(&[id("a"), None, id("a")]), Some(0));
        assert_eq!(
            winner(&[None, id("c"), id("b"), id("c"), id("b"), id("c")]),
            Some(1)
        );
    }

    #[test]
    fn a_tie_goes_to_the_route_voted_for_first() {
        assert_eq!(winner(&[id("a"), id("b")]), Some(0));
        assert_eq!(winner(&[None, id("b"), id("a"), id("a"), id("b")]), Some(1));
        assert_eq!(winner(&[None, None]), None);
        assert_eq!(winner(&[]), None);
    }

    #[test]
    fn extra_samples_are_sampled_and_seeded_apart() {
        let greedy = Decoding {
            temperature: Some(0.0),
            seed: Some(7),
            max_tokens: Some(300),
            ..Decoding::default()
        };
        let one = sampled(greedy, 1);
        assert_eq!(one.temperature, Some(VOTE_TEMPERATURE));
        assert_eq!(one.seed, Some(8));
        assert_eq!(one.max_tokens, Some(300));
        assert_eq!(sampled(greedy, 2).seed, Some(9));
        let warm = Decoding {
            temperature: Some(1.1),
            ..Decoding::default()
        };
        assert_eq!(sampled(warm, 1).temperature, Some(1.1));
        assert_eq!(sampled(Decoding::default(), 3).seed, Some(3));
    }
}
