//! A principal's `max_connections` (auth file): client connections it may have open at once,
//! over all of its clients, counted from a successful Hello to the connection's end. One
//! [`ConnectionCap`] per principal lives across reloads (`rules.rs` carries it over), so a
//! reload changes the limit without forgetting the connections already open.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// A principal's open connections and its limit (`u32::MAX`: none).
#[derive(Debug)]
pub struct ConnectionCap {
    max: AtomicU32,
    open: AtomicU32,
}

impl ConnectionCap {
    pub fn new(max: Option<u32>) -> Self {
        ConnectionCap {
            max: AtomicU32::new(max.unwrap_or(u32::MAX)),
            open: AtomicU32::new(0),
        }
    }

    /// The limit from now on (a reload); connections already open stay open.
    pub fn set_max(&self, max: Option<u32>) {
        self.max.store(max.unwrap_or(u32::MAX), Ordering::Relaxed);
    }

    /// The limit, if there is one.
    pub fn max(&self) -> Option<u32> {
        Some(self.max.load(Ordering::Relaxed)).filter(|&m| m != u32::MAX)
    }

    pub fn open(&self) -> u32 {
        self.open.load(Ordering::Relaxed)
    }

    /// One more connection, if the limit allows it: held until the slot is dropped.
    pub fn try_open(self: &Arc<Self>) -> Option<ConnectionSlot> {
        let max = self.max.load(Ordering::Relaxed);
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < max).then_some(open + 1)
            })
            .ok()
            .map(|_| ConnectionSlot(Arc::clone(self)))
    }
}

/// One open connection of a principal; dropping it (the connection's end) gives it back.
#[derive(Debug)]
pub struct ConnectionSlot(Arc<ConnectionCap>);

impl ConnectionSlot {
    /// Whether it counts against `cap` (a second Hello of the same principal keeps its slot).
    pub fn is_for(&self, cap: &Arc<ConnectionCap>) -> bool {
        Arc::ptr_eq(&self.0, cap)
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_up_to_the_limit_and_given_back() {
        let cap = Arc::new(ConnectionCap::new(Some(2)));
        let a = cap.try_open().expect("first");
        let b = cap.try_open().expect("second");
        assert!(cap.try_open().is_none(), "the third is over the limit");
        assert_eq!(cap.open(), 2);
        drop(a);
        let c = cap.try_open().expect("a slot was given back");
        assert!(c.is_for(&cap) && b.is_for(&cap));
        // A lower limit after a reload: open connections stay, new ones wait below it.
        cap.set_max(Some(1));
        assert!(cap.try_open().is_none());
        drop((b, c));
        assert_eq!(cap.open(), 0);
        assert!(cap.try_open().is_some());
        cap.set_max(None);
        assert_eq!(cap.max(), None);
    }
}
