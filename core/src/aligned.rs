//! Window alignment, shared by the window algorithms.

/// The aligned window holding `t`: windows are `[k * window, (k + 1) * window)`
/// from the caller's time zero. Alignment lives here alone, so that an origin
/// or a calendar can replace it for every window algorithm at once.
pub(crate) fn window_of(t: u64, window: u64) -> u64 {
    t / window
}
