//! One command's memory budget: `--memory-cap` bytes for everything that grows with the input.
//!
//! Each stage of a command says, before it allocates, how many bytes it will hold at most (a file's
//! text, its parsed JSON, the materialised tensors, the kernel path's buffers, the reference's
//! scratch and outputs, encoded output files) and the budget refuses a stage that does not fit in
//! what the earlier ones left. The figures are upper bounds, so a call is refused somewhat before
//! the process would really reach the cap; what the budget does not count is a fixed overhead
//! (the binary, thread stacks, buffers of a few MiB) that does not grow with the input.
//! `tests/memory_limit.rs` runs every command under an operating-system limit of the cap plus
//! [`FIXED_OVERHEAD`].

use thiserror::Error;

/// `--memory-cap` when none is given (2 GiB).
pub const DEFAULT_MEMORY_CAP: usize = 2 << 30;

/// What a command takes besides its budget, whatever the input: the binary and its libraries'
/// writable data, rayon's and the allocator's per-thread state, thread stacks, I/O buffers.
pub const FIXED_OVERHEAD: usize = 32 << 20;

/// The bytes a command may still allocate.
#[derive(Clone, Debug, PartialEq)]
pub struct Budget {
    cap: usize,
    held: u128,
}

/// A stage that does not fit: what it is, what it needs and what the stages before it hold.
#[derive(Clone, Debug, Error, PartialEq)]
#[error(
    "{what} needs {needed} bytes{}, over the memory cap of {cap} bytes (raise it with --memory-cap)",
    held_before(*.held)
)]
pub struct OverBudget {
    pub what: String,
    pub needed: u128,
    pub held: u128,
    pub cap: usize,
}

fn held_before(held: u128) -> String {
    match held {
        0 => String::new(),
        held => format!(" besides the {held} bytes already held"),
    }
}

impl Budget {
    pub fn new(cap: usize) -> Budget {
        Budget { cap, held: 0 }
    }

    /// The bytes not yet held.
    pub fn left(&self) -> usize {
        (self.cap as u128).saturating_sub(self.held) as usize
    }

    /// Counts `bytes` for `what` (held until [`Budget::release`]), or refuses them.
    pub fn hold(&mut self, what: impl Into<String>, bytes: u128) -> Result<(), OverBudget> {
        if self.held + bytes > self.cap as u128 {
            return Err(self.refusal(what, bytes));
        }
        self.held += bytes;
        Ok(())
    }

    /// The refusal of `needed` bytes for `what` on top of what is held (for a stage that found
    /// itself over [`Budget::left`]).
    pub fn refusal(&self, what: impl Into<String>, needed: u128) -> OverBudget {
        OverBudget {
            what: what.into(),
            needed,
            held: self.held,
            cap: self.cap,
        }
    }

    /// Gives back `bytes` an earlier [`Budget::hold`] counted, once they are freed.
    pub fn release(&mut self, bytes: u128) {
        self.held = self.held.saturating_sub(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_until_the_cap_and_names_what_does_not_fit() {
        let mut budget = Budget::new(100);
        budget.hold("the text", 60).unwrap();
        assert_eq!(budget.left(), 40);
        budget.hold("the tensors", 40).unwrap();
        assert_eq!(budget.left(), 0);
        let refused = budget.hold("the reference", 1).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "the reference needs 1 bytes besides the 100 bytes already held, over the memory \
             cap of 100 bytes (raise it with --memory-cap)"
        );
        // A refused stage holds nothing.
        budget.release(60);
        assert_eq!(budget.left(), 60);
        assert_eq!(
            Budget::new(10).hold("a file", 11).unwrap_err().to_string(),
            "a file needs 11 bytes, over the memory cap of 10 bytes (raise it with --memory-cap)"
        );
    }
}
