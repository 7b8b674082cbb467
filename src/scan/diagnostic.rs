//! A finding located in a file: what every emitter renders.

use super::entry_point::EntryPoint;
use super::rules::Rule;
use crate::validate::Severity;

/// A 1-based line and column; columns count characters, as editors and SARIF do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Location {
    pub line: usize,
    pub column: usize,
}

/// One diagnostic of the scan.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostic {
    pub rule: Rule,
    /// The file as the walk reached it (relative when the scanned path was).
    pub path: String,
    pub start: Location,
    /// Exclusive end.
    pub end: Location,
    pub message: String,
    pub help: Option<String>,
    /// The stacks the call was written against; empty for file-level errors.
    pub stacks: Vec<EntryPoint>,
    /// The text of line `start.line`, without its line break; `None` when the file is not text.
    pub source_line: Option<String>,
}

impl Diagnostic {
    pub fn severity(&self) -> Severity {
        self.rule.severity()
    }
}

/// Byte offsets to line/column locations for one source text.
pub struct LineIndex<'s> {
    source: &'s str,
    line_starts: Vec<usize>,
}

impl<'s> LineIndex<'s> {
    pub fn new(source: &'s str) -> LineIndex<'s> {
        let line_starts = std::iter::once(0)
            .chain(source.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex {
            source,
            line_starts,
        }
    }

    /// The location of byte `offset` (clamped to the source, and to a character boundary).
    pub fn location(&self, offset: usize) -> Location {
        let mut offset = offset.min(self.source.len());
        while !self.source.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|&start| start <= offset);
        let start = self.line_starts[line - 1];
        Location {
            line,
            column: self.source[start..offset].chars().count() + 1,
        }
    }

    /// The text of a 1-based line, without `\n` or `\r\n`.
    pub fn line(&self, line: usize) -> &'s str {
        let start = self.line_starts[line - 1];
        let end = self
            .line_starts
            .get(line)
            .map_or(self.source.len(), |&next| next - 1);
        self.source[start..end].trim_end_matches('\r')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_count_lines_and_characters() {
        let index = LineIndex::new("ab\r\nçd = 1\n\nx");
        assert_eq!(index.location(0), Location { line: 1, column: 1 });
        assert_eq!(index.location(4), Location { line: 2, column: 1 });
        // `ç` is two bytes but one column.
        assert_eq!(index.location(6), Location { line: 2, column: 2 });
        assert_eq!(index.location(13), Location { line: 4, column: 1 });
        assert_eq!(index.location(99), Location { line: 4, column: 2 });
        assert_eq!(index.line(1), "ab");
        assert_eq!(index.line(2), "çd = 1");
        assert_eq!(index.line(3), "");
        assert_eq!(index.line(4), "x");
    }
}
