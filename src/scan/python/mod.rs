//! One Python file read with tree-sitter: CPython's limits and syntax errors first, then the names
//! each scope binds ([`analysis`]) and the calls that may reach `flash_attn_with_kvcache`, with what
//! the scan knows of every argument's value ([`value`]).

mod analysis;
mod literal;
pub mod value;

pub use literal::python_eq;

use std::collections::{HashMap, HashSet};
use tree_sitter::{Node, Parser};
use value::{FunctionId, Values};

/// A byte range in the file's source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    fn of(node: Node) -> Span {
        Span {
            start: node.start_byte(),
            end: node.end_byte(),
        }
    }
}

/// The dotted module name of a file and whether it is a package's `__init__.py`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleName {
    pub name: String,
    pub is_package: bool,
}

/// How an argument is passed.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgKind {
    Positional,
    Keyword(String),
    /// `*args`
    Unpack,
    /// `**kwargs`
    UnpackMapping,
}

/// One argument of a call as written.
#[derive(Clone, Debug, PartialEq)]
pub struct Argument {
    pub kind: ArgKind,
    pub values: Values,
    /// The whole argument, `name=` included.
    pub span: Span,
    /// The value expression alone.
    pub value_span: Span,
}

/// How a call's result is unpacked: `a, b = f(...)` (2, no star), `a, b, *rest = ...` (2, star).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unpacking {
    pub targets: usize,
    pub starred: bool,
    /// The assignment's target list.
    pub span: Span,
}

/// A call whose callee may be (or lead to) an entry point.
#[derive(Clone, Debug, PartialEq)]
pub struct CallSite {
    pub callee: Values,
    /// The callee expression, where diagnostics about the whole call point.
    pub callee_span: Span,
    /// The last name of the callee as written (`f` in `m.f(...)`), when it is a plain name.
    pub callee_name: Option<String>,
    pub args: Vec<Argument>,
    /// The function whose body holds the call.
    pub function: Option<FunctionId>,
    pub unpacked: Option<Unpacking>,
    /// In a branch that never runs (`if False:`, `if TYPE_CHECKING:`).
    pub dead: bool,
}

/// The parameters of a `def`, with the values of their defaults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Params {
    /// Positional-or-keyword parameters (positional-only ones included) and their defaults.
    pub positional: Vec<(String, Option<Values>)>,
    pub var_positional: Option<String>,
    pub keyword_only: Vec<(String, Option<Values>)>,
    pub var_keyword: Option<String>,
}

/// A `def` of the file.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionInfo {
    pub name: String,
    /// The `def` line's name.
    pub span: Span,
    pub params: Params,
    /// Calls recorded in its own body (nested functions have their own).
    pub calls: Vec<value::CallId>,
    /// Defined in a branch that never runs.
    pub dead: bool,
}

/// A `class` of the file: what `self.<attr>` may hold.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClassInfo {
    pub name: String,
    pub instance_attrs: HashMap<String, Values>,
}

/// `from <module> import flash_attn_with_kvcache`: kept to say when `<module>` is unknown.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportRecord {
    pub module: String,
    pub span: Span,
}

/// What a parsed file contributes to the scan.
#[derive(Debug, Default)]
pub struct FileAnalysis {
    /// Module-level names, with every value assigned to them anywhere at module level.
    pub globals: HashMap<String, Values>,
    /// Modules imported with `from m import *`.
    pub star_imports: Vec<String>,
    pub functions: Vec<FunctionInfo>,
    pub classes: Vec<ClassInfo>,
    pub calls: Vec<CallSite>,
    pub imports: Vec<ImportRecord>,
    /// The first expression nested too deeply to be analysed.
    pub too_deep: Option<Span>,
}

/// What makes a call worth recording: names known to refer to an entry point (its own name and the
/// aliases other files bind), and the modules of the scanned tree (a path into one of them may be a
/// re-export).
#[derive(Debug, Default)]
pub struct Interest {
    pub names: HashSet<String>,
    pub modules: HashSet<String>,
}

/// The first syntax error of a file, or a limit of CPython's that the file exceeds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    pub span: Span,
    pub message: String,
}

/// CPython's tokenizer limits (`MAXLEVEL`, `MAXINDENT` in Parser/tokenizer.h, 3.11): a file past
/// them does not compile, so the scan reports it instead of analysing it.
const MAX_BRACKET_DEPTH: usize = 200;
const MAX_INDENT_LEVELS: usize = 100;

/// A tree-sitter parser set up for Python; one per thread.
pub struct PythonParser(Parser);

impl PythonParser {
    pub fn new() -> PythonParser {
        let mut parser = Parser::new();
        parser
            .set_language(&tree_sitter_python::LANGUAGE.into())
            .expect("the bundled grammar matches the tree-sitter ABI");
        PythonParser(parser)
    }

    /// Parses and analyses `source`, reporting the first syntax error (or exceeded CPython limit)
    /// instead of a partial result. Line breaks must be `\n` or `\r\n` (see [`normalise_newlines`]).
    pub fn parse(
        &mut self,
        source: &str,
        module: &ModuleName,
        interest: &Interest,
    ) -> Result<FileAnalysis, SyntaxError> {
        let tree = self
            .0
            .parse(source, None)
            .expect("parsing without a timeout or cancellation flag always yields a tree");
        let root = tree.root_node();
        if root.has_error() {
            return Err(first_syntax_error(root));
        }
        check_cpython_limits(root)?;
        Ok(analysis::analyse(root, source, module, interest))
    }
}

impl Default for PythonParser {
    fn default() -> Self {
        PythonParser::new()
    }
}

/// Python reads `\r`, `\r\n` and `\n` as line breaks (universal newlines); tree-sitter's grammar
/// knows only the last two. A lone `\r` becomes `\n`: the same length, so byte offsets still match
/// the file.
pub fn normalise_newlines(source: &mut String) {
    let bytes = source.as_bytes();
    let lone: Vec<usize> = memchr::memchr_iter(b'\r', bytes)
        .filter(|&i| bytes.get(i + 1) != Some(&b'\n'))
        .collect();
    if lone.is_empty() {
        return;
    }
    let mut bytes = std::mem::take(source).into_bytes();
    for i in lone {
        bytes[i] = b'\n';
    }
    *source = String::from_utf8(bytes).expect("replacing an ASCII byte keeps UTF-8 valid");
}

fn first_syntax_error(root: Node) -> SyntaxError {
    let mut cursor = root.walk();
    loop {
        let node = cursor.node();
        if node.is_missing() {
            return SyntaxError {
                span: Span::of(node),
                message: format!("syntax error: expected `{}`", node.kind()),
            };
        }
        if node.is_error() {
            return SyntaxError {
                span: Span::of(node),
                message: "syntax error".into(),
            };
        }
        // Descend only into subtrees that contain the error.
        if node.has_error() && cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return SyntaxError {
                    span: Span::of(root),
                    message: "syntax error".into(),
                };
            }
        }
    }
}

/// CPython refuses more than 200 nested brackets and 100 levels of indentation. Walks the tree
/// without recursion, so any depth is safe here; brackets inside strings (f-string replacement
/// fields included) are not the tokenizer's.
fn check_cpython_limits(root: Node) -> Result<(), SyntaxError> {
    let mut cursor = root.walk();
    // Per entered node: whether it is a string, whether it is an indented block.
    let mut path: Vec<(bool, bool)> = Vec::new();
    let (mut strings, mut indents, mut brackets) = (0usize, 0usize, 0usize);
    loop {
        let node = cursor.node();
        let is_string = node.kind() == "string";
        let is_indented = node.kind() == "block"
            && node
                .parent()
                .is_some_and(|p| p.start_position().row != node.start_position().row);
        if is_indented {
            indents += 1;
            if indents >= MAX_INDENT_LEVELS {
                return Err(SyntaxError {
                    span: Span::of(node),
                    message: "IndentationError: too many levels of indentation".into(),
                });
            }
        }
        if node.child_count() == 0 && strings == 0 {
            match node.kind() {
                "(" | "[" | "{" => {
                    brackets += 1;
                    if brackets > MAX_BRACKET_DEPTH {
                        return Err(SyntaxError {
                            span: Span::of(node),
                            message: "SyntaxError: too many nested parentheses".into(),
                        });
                    }
                }
                ")" | "]" | "}" => brackets = brackets.saturating_sub(1),
                _ => {}
            }
        }
        strings += usize::from(is_string);
        if cursor.goto_first_child() {
            path.push((is_string, is_indented));
            continue;
        }
        let mut leaving = (is_string, is_indented);
        loop {
            strings -= usize::from(leaving.0);
            indents -= usize::from(leaving.1);
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return Ok(());
            }
            leaving = path.pop().expect("every parent was entered");
        }
    }
}

#[cfg(test)]
mod tests;
