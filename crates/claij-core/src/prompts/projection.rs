//! One step's conversation as parts that can be shown smaller, to fit a prompt budget.

use super::Message;

/// The conversation a model is sent at one step ([`project`](super::project)), as parts
/// in order, each shown in one of its forms. [`messages`](Self::messages) is the
/// conversation; [`shrink`](Self::shrink) shows one part smaller, so that a caller that
/// counts tokens can fit the conversation under a budget (`max_prompt_tokens`).
///
/// Shrinking first collapses the oldest part that can still collapse (a finished visit
/// to its result, an old tool round to its calls), and only when nothing collapses any
/// more drops the oldest part that may go. The system message, the example turns, the
/// current state's input, request, latest tool round and failures never shrink.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Projection {
    parts: Vec<Part>,
}

/// A piece of the conversation and the forms it can be shown in, fullest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Part {
    /// The forms, fullest first: collapses up to `last_collapse`, then at most one more,
    /// the part dropped (nothing, or the remnant that must stay).
    forms: Vec<Vec<Message>>,
    /// The index of the smallest form that still shows the part.
    last_collapse: usize,
    /// The form shown.
    shown: usize,
}

impl Part {
    /// A part shown as `messages`; it never shrinks unless smaller forms are added
    /// ([`or`](Self::or), [`droppable`](Self::droppable)).
    pub(super) fn new(messages: Vec<Message>) -> Self {
        Self {
            forms: vec![messages],
            last_collapse: 0,
            shown: 0,
        }
    }

    /// Adds a smaller form the part may collapse to (ignored when equal to the last).
    pub(super) fn or(mut self, smaller: Vec<Message>) -> Self {
        if self.forms.last() != Some(&smaller) {
            self.forms.push(smaller);
            self.last_collapse = self.forms.len() - 1;
        }
        self
    }

    /// Lets the part be dropped, leaving `remnant` (usually nothing).
    pub(super) fn droppable(mut self, remnant: Vec<Message>) -> Self {
        if self.forms.last() != Some(&remnant) {
            self.forms.push(remnant);
        }
        self
    }

    /// Shows `self` in its form `smaller` to begin with, when it has one equal to it, else
    /// in its smallest collapse.
    pub(super) fn showing_form(mut self, smaller: &[Message]) -> Self {
        self.shown = self
            .forms
            .iter()
            .take(self.last_collapse + 1)
            .position(|f| f.as_slice() == smaller)
            .unwrap_or(self.last_collapse);
        self
    }

    fn dropped(&self) -> bool {
        self.shown > self.last_collapse
    }
}

impl Projection {
    /// The conversation of `parts`, each in the form it starts in.
    pub(super) fn new(parts: Vec<Part>) -> Self {
        Self { parts }
    }

    /// The messages, in order. Where parts were dropped to fit the budget, the first
    /// dropped one is replaced by a user message saying so.
    pub fn messages(&self) -> Vec<Message> {
        let mut out = Vec::new();
        let mut noted = false;
        let dropped = self.dropped();
        for part in &self.parts {
            if part.dropped() && !noted {
                noted = true;
                let (parts, are) = if dropped == 1 {
                    ("part", "is")
                } else {
                    ("parts", "are")
                };
                out.push(Message::user(format!(
                    "({dropped} earlier {parts} of this conversation {are} left out to fit the \
                     prompt.)"
                )));
            }
            out.extend(part.forms[part.shown].iter().cloned());
        }
        out
    }

    /// Shows one part smaller: the oldest part that can still collapse, else the oldest
    /// that may be dropped. `false` when nothing can shrink any more.
    pub fn shrink(&mut self) -> bool {
        let collapsible = self.parts.iter().position(|p| p.shown < p.last_collapse);
        let next = collapsible.or_else(|| {
            self.parts
                .iter()
                .position(|p| p.shown == p.last_collapse && p.forms.len() > p.last_collapse + 1)
        });
        match next {
            Some(i) => {
                self.parts[i].shown += 1;
                true
            }
            None => false,
        }
    }

    /// How many parts are dropped.
    pub fn dropped(&self) -> usize {
        self.parts.iter().filter(|p| p.dropped()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(text: &str) -> Message {
        Message::user(text)
    }

    #[test]
    fn collapses_the_oldest_first_then_drops_the_oldest() {
        let mut p = Projection::new(vec![
            Part::new(vec![m("system")]),
            Part::new(vec![m("a1"), m("a2")])
                .or(vec![m("a")])
                .droppable(vec![]),
            Part::new(vec![m("b1"), m("b2")])
                .or(vec![m("b")])
                .droppable(vec![m("b")]),
            Part::new(vec![m("request")]),
        ]);
        let texts = |p: &Projection| -> Vec<String> {
            p.messages().into_iter().map(|m| m.content).collect()
        };
        assert_eq!(texts(&p), ["system", "a1", "a2", "b1", "b2", "request"]);
        assert!(p.shrink());
        assert_eq!(texts(&p), ["system", "a", "b1", "b2", "request"]);
        assert!(p.shrink());
        assert_eq!(texts(&p), ["system", "a", "b", "request"]);
        assert!(p.shrink());
        assert_eq!(p.dropped(), 1);
        let dropped = texts(&p);
        assert_eq!(dropped.len(), 4, "{dropped:?}");
        assert!(
            dropped[1].contains("1 earlier part of this conversation is left out"),
            "{dropped:?}"
        );
        assert_eq!(dropped[2], "b");
        // `b` keeps its remnant (an equal form is not a drop); nothing else shrinks.
        assert!(!p.shrink());
    }

    #[test]
    fn a_part_may_start_collapsed() {
        let part = Part::new(vec![m("full")])
            .or(vec![m("summary"), m("result")])
            .or(vec![m("result")])
            .droppable(vec![]);
        let p = Projection::new(vec![part.clone().showing_form(&[m("result")])]);
        assert_eq!(p.messages(), [m("result")]);
        let p = Projection::new(vec![part.showing_form(&[m("summary"), m("result")])]);
        assert_eq!(p.messages(), [m("summary"), m("result")]);
    }
}
