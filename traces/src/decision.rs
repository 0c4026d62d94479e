//! The queue a streaming trace rewrite (`csd trace offload`, `csd trace fuse`) keeps events
//! in while a decision about them is pending: each entry keeps the position it was pushed at,
//! valid however much of the front has been written out since.

use std::collections::VecDeque;

/// Entries addressed by position; [`DecisionQueue::drain`] hands over the decided front.
#[derive(Debug)]
pub(crate) struct DecisionQueue<S> {
    items: VecDeque<S>,
    /// The position of `items[0]`.
    base: u64,
}

impl<S> Default for DecisionQueue<S> {
    fn default() -> Self {
        DecisionQueue {
            items: VecDeque::new(),
            base: 0,
        }
    }
}

impl<S> DecisionQueue<S> {
    /// Appends `s`; returns its position.
    pub fn push(&mut self, s: S) -> u64 {
        let at = self.base + self.items.len() as u64;
        self.items.push_back(s);
        at
    }

    /// The entry at `pos`, while it is still queued.
    pub fn get(&self, pos: u64) -> Option<&S> {
        self.items.get(pos.checked_sub(self.base)? as usize)
    }

    /// The entry at `pos`; a position no longer (or not yet) queued is a bug of the caller.
    pub fn at(&mut self, pos: u64) -> &mut S {
        let i = (pos - self.base) as usize;
        &mut self.items[i]
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Takes entries off the front while `decided` says so, in order.
    pub fn drain(&mut self, decided: impl Fn(&S) -> bool) -> Vec<S> {
        let mut out = Vec::new();
        while self.items.front().is_some_and(&decided) {
            out.extend(self.items.pop_front());
            self.base += 1;
        }
        out
    }
}
