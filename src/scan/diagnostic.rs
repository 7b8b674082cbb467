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

/// Part of a source line, at most [`EXCERPT_CHARS`] characters around a location.
#[derive(Clone, Debug, PartialEq)]
pub struct Excerpt {
    pub text: String,
    /// The column of the excerpt's first character (1 when it starts the line).
    pub first_column: usize,
    /// The line goes on after the excerpt.
    pub cut_after: bool,
}

/// Longest line excerpt a diagnostic carries (long lines are cut around the location).
pub const EXCERPT_CHARS: usize = 160;

/// How far before the location an excerpt of a long line starts.
const EXCERPT_LEAD: usize = 60;

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
    /// The stacks the call was written against; empty for file-level diagnostics.
    pub stacks: Vec<EntryPoint>,
    /// The start line around the start column; `None` when the file is not text.
    pub excerpt: Option<Excerpt>,
}

impl Diagnostic {
    pub fn severity(&self) -> Severity {
        self.rule.severity()
    }
}

/// Bytes per chunk of the character counts that make column lookups cheap on long lines.
const CHUNK: usize = 4096;

/// Byte offsets to line/column locations for one source text, in time independent of the line's
/// length.
pub struct LineIndex<'s> {
    source: &'s str,
    line_starts: Vec<usize>,
    /// Characters before each [`CHUNK`]-byte chunk of the source.
    chars_before_chunk: Vec<usize>,
}

impl<'s> LineIndex<'s> {
    pub fn new(source: &'s str) -> LineIndex<'s> {
        let line_starts = std::iter::once(0)
            .chain(memchr::memchr_iter(b'\n', source.as_bytes()).map(|i| i + 1))
            .collect();
        let mut chars_before_chunk = Vec::with_capacity(source.len() / CHUNK + 1);
        let mut chars = 0;
        for chunk in source.as_bytes().chunks(CHUNK) {
            chars_before_chunk.push(chars);
            chars += count_chars(chunk);
        }
        LineIndex {
            source,
            line_starts,
            chars_before_chunk,
        }
    }

    /// Characters before byte `offset` (a character boundary).
    fn chars_before(&self, offset: usize) -> usize {
        let chunk = offset / CHUNK;
        match self.chars_before_chunk.get(chunk) {
            Some(before) => before + count_chars(&self.source.as_bytes()[chunk * CHUNK..offset]),
            None => count_chars(self.source.as_bytes()),
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
            column: self.chars_before(offset) - self.chars_before(start) + 1,
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

    /// The line of byte `offset`, or, when it is longer than [`EXCERPT_CHARS`] characters, that many
    /// starting a little before the offset; reads only those characters, however long the line.
    pub fn excerpt(&self, offset: usize) -> Excerpt {
        let at = self.location(offset);
        let line = self.line(at.line);
        let line_start = self.line_starts[at.line - 1];
        let mut start = offset.clamp(line_start, line_start + line.len()) - line_start;
        while !line.is_char_boundary(start) {
            start -= 1;
        }
        let fits = line.len() <= 4 * EXCERPT_CHARS && line.chars().count() <= EXCERPT_CHARS;
        let lead = if fits {
            0
        } else {
            line[..start]
                .char_indices()
                .rev()
                .take(EXCERPT_LEAD)
                .last()
                .map_or(start, |(i, _)| i)
        };
        let mut chars = line[lead..].chars();
        let text: String = chars.by_ref().take(EXCERPT_CHARS).collect();
        Excerpt {
            first_column: at.column - line[lead..start].chars().count(),
            cut_after: chars.next().is_some(),
            text,
        }
    }
}

/// Characters in a UTF-8 byte range (bytes that do not continue a character).
fn count_chars(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b & 0xC0 != 0x80).count()
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

    #[test]
    fn columns_on_long_lines_cross_chunks() {
        let line = "é".repeat(5000) + "x";
        let index = LineIndex::new(&line);
        let x = line.len() - 1;
        assert_eq!(
            index.location(x),
            Location {
                line: 1,
                column: 5001
            }
        );
        let excerpt = index.excerpt(x);
        assert_eq!(excerpt.first_column, 5001 - 60);
        assert!(excerpt.text.ends_with('x') && !excerpt.cut_after);
        assert_eq!(excerpt.text.chars().count(), 61);
        let long = "y".repeat(1000);
        let start = LineIndex::new(&long).excerpt(0);
        assert_eq!((start.first_column, start.cut_after), (1, true));
        assert_eq!(start.text.len(), EXCERPT_CHARS);
    }
}
