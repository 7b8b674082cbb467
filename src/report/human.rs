//! Pieces of the human reports that more than one command prints.

use std::io::{self, Write};

/// A case that did not pass: `LABEL name`, the message indented by two spaces (every line of it),
/// and an empty line.
pub fn failure_block(
    out: &mut dyn Write,
    label: &str,
    name: &str,
    message: &str,
) -> io::Result<()> {
    writeln!(out, "{label} {name}\n  {}\n", message.replace('\n', "\n  "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_of_the_message_is_indented() {
        let mut out = Vec::new();
        failure_block(&mut out, "FAIL", "suite::case", "first\nsecond").unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "FAIL suite::case\n  first\n  second\n\n"
        );
    }
}
