//! A setting that changes during training (a threshold, a bit-width, an assignment table),
//! shared between the method's controller and the codecs that read it.
//!
//! The controller sets it between steps, from values that are identical on every rank (e.g.
//! all-reduced statistics), so every rank's codecs read the same value at the same step: a
//! stateful encoder and its decoder on the peer never disagree about it.

use std::sync::{Arc, PoisonError, RwLock};

/// A cloneable handle to one shared value; clones see each other's [`Knob::set`].
#[derive(Debug, Default)]
pub struct Knob<T>(Arc<RwLock<T>>);

impl<T> Clone for Knob<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T: Clone> Knob<T> {
    /// A knob holding `value`.
    pub fn new(value: T) -> Self {
        Self(Arc::new(RwLock::new(value)))
    }

    /// The current value.
    pub fn get(&self) -> T {
        // A poisoned lock still holds a whole value: writers only ever replace it.
        self.0.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Replaces the value; call between steps only.
    pub fn set(&self, value: T) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_value() {
        let knob = Knob::new(8u8);
        let reader = knob.clone();
        assert_eq!(reader.get(), 8);
        knob.set(4);
        assert_eq!(reader.get(), 4);
    }
}
