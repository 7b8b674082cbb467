//! One Python file read with tree-sitter: the names its imports and aliases bind, and the calls that
//! may reach `flash_attn_with_kvcache`, with their arguments.
//!
//! Name binding is flow-insensitive: an import anywhere in the file (also inside a function, as lazy
//! imports are) binds its name for the whole file, and a name bound twice (e.g. in both branches of
//! `if is_musa(): ... else: ...`) keeps both meanings.

use crate::call::PyValue;
use std::collections::HashMap;
use tree_sitter::{Node, Parser};

/// A byte range in the file's source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// What a bound name refers to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Binding {
    /// An absolute dotted path: `import a.b` binds `a` to `a`, `from m import n as x` binds `x` to
    /// `m.n`, a module-level `def f` binds `f` to `<this module>.f`.
    Absolute(String),
    /// `x = a.b`: a dotted path resolved in this file.
    Alias(Vec<String>),
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
    /// The value when the expression is a literal (numbers, strings, booleans, `None`, and tuples
    /// or lists of them); `None` for anything the scan cannot evaluate.
    pub literal: Option<PyValue>,
    /// The whole argument, `name=` included.
    pub span: Span,
    /// The value expression alone.
    pub value_span: Span,
}

/// A call whose callee is a dotted name (`f(...)`, `mod.f(...)`).
#[derive(Clone, Debug, PartialEq)]
pub struct CallSite {
    pub function: Vec<String>,
    /// The callee expression, where diagnostics about the whole call point.
    pub callee_span: Span,
    pub args: Vec<Argument>,
}

impl CallSite {
    pub fn unpacks(&self) -> bool {
        self.args
            .iter()
            .any(|a| matches!(a.kind, ArgKind::Unpack | ArgKind::UnpackMapping))
    }
}

/// What a parsed file contributes to the scan.
#[derive(Debug, Default)]
pub struct ParsedFile {
    pub bindings: HashMap<String, Vec<Binding>>,
    /// Modules imported with `from m import *`.
    pub star_imports: Vec<String>,
    /// Calls whose callee's first name is bound in this file (or could come from a star import).
    pub calls: Vec<CallSite>,
}

/// The first syntax error of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    pub span: Span,
    pub message: String,
}

/// Literals nest at most this deep before the scan gives up on evaluating them.
const MAX_LITERAL_DEPTH: usize = 16;

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

    /// Parses `source`, reporting the first syntax error instead of a partial result.
    pub fn parse(&mut self, source: &str, module: &ModuleName) -> Result<ParsedFile, SyntaxError> {
        let tree = self
            .0
            .parse(source, None)
            .expect("parsing without a timeout or cancellation flag always yields a tree");
        let root = tree.root_node();
        if root.has_error() {
            return Err(first_syntax_error(root));
        }
        let mut file = ParsedFile::default();
        let mut cursor = root.walk();
        loop {
            let node = cursor.node();
            visit(node, source, module, &mut file);
            if cursor.goto_first_child() {
                continue;
            }
            while !cursor.goto_next_sibling() {
                if !cursor.goto_parent() {
                    let bindings = &file.bindings;
                    let any_star = !file.star_imports.is_empty();
                    file.calls
                        .retain(|c| any_star || bindings.contains_key(&c.function[0]));
                    return Ok(file);
                }
            }
        }
    }
}

impl Default for PythonParser {
    fn default() -> Self {
        PythonParser::new()
    }
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

fn text<'s>(node: Node, source: &'s str) -> &'s str {
    &source[node.byte_range()]
}

fn bind(file: &mut ParsedFile, name: &str, binding: Binding) {
    file.bindings
        .entry(name.to_string())
        .or_default()
        .push(binding);
}

fn visit(node: Node, source: &str, module: &ModuleName, file: &mut ParsedFile) {
    match node.kind() {
        "import_statement" => {
            let mut cursor = node.walk();
            for name in node.children_by_field_name("name", &mut cursor) {
                match name.kind() {
                    "dotted_name" => {
                        let dotted = text(name, source);
                        let first = dotted.split('.').next().unwrap_or(dotted).trim();
                        bind(file, first, Binding::Absolute(first.to_string()));
                    }
                    "aliased_import" => {
                        if let (Some(target), Some(alias)) = (
                            name.child_by_field_name("name"),
                            name.child_by_field_name("alias"),
                        ) {
                            let target = normalise_dotted(text(target, source));
                            bind(file, text(alias, source), Binding::Absolute(target));
                        }
                    }
                    _ => {}
                }
            }
        }
        "import_from_statement" => {
            let Some(from) = node
                .child_by_field_name("module_name")
                .and_then(|m| imported_module(m, source, module))
            else {
                return;
            };
            let mut cursor = node.walk();
            for child in node.named_children(&mut cursor) {
                if child.kind() == "wildcard_import" {
                    file.star_imports.push(from.clone());
                }
            }
            let mut cursor = node.walk();
            for name in node.children_by_field_name("name", &mut cursor) {
                let (target, local) = match name.kind() {
                    "dotted_name" => (name, name),
                    "aliased_import" => match (
                        name.child_by_field_name("name"),
                        name.child_by_field_name("alias"),
                    ) {
                        (Some(target), Some(alias)) => (target, alias),
                        _ => continue,
                    },
                    _ => continue,
                };
                let member = normalise_dotted(text(target, source));
                bind(
                    file,
                    text(local, source),
                    Binding::Absolute(format!("{from}.{member}")),
                );
            }
        }
        "assignment" => {
            let (Some(left), Some(right)) = (
                node.child_by_field_name("left"),
                node.child_by_field_name("right"),
            ) else {
                return;
            };
            if left.kind() != "identifier" {
                return;
            }
            if let Some(path) = dotted_path(right, source) {
                let name = text(left, source);
                if path != [name] {
                    bind(file, name, Binding::Alias(path));
                }
            }
        }
        "function_definition" | "class_definition" => {
            if is_module_level(node)
                && let Some(name) = node.child_by_field_name("name")
            {
                let name = text(name, source);
                let path = if module.name.is_empty() {
                    name.to_string()
                } else {
                    format!("{}.{name}", module.name)
                };
                bind(file, name, Binding::Absolute(path));
            }
        }
        "call" => {
            if let Some(call) = call_site(node, source) {
                file.calls.push(call);
            }
        }
        _ => {}
    }
}

/// `a . b` (tree-sitter keeps the source's spacing) as `a.b`.
fn normalise_dotted(dotted: &str) -> String {
    dotted
        .split('.')
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(".")
}

/// The absolute module of `from <module_name> import ...`; `None` when a relative import climbs above
/// the top-level package.
fn imported_module(node: Node, source: &str, module: &ModuleName) -> Option<String> {
    if node.kind() != "relative_import" {
        return Some(normalise_dotted(text(node, source)));
    }
    let mut level = 0;
    let mut rest = None;
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        match child.kind() {
            "import_prefix" => level = text(child, source).matches('.').count(),
            "dotted_name" => rest = Some(normalise_dotted(text(child, source))),
            _ => {}
        }
    }
    // `.` is the package containing this module (the module itself for an `__init__.py`).
    let mut package: Vec<&str> = module.name.split('.').filter(|s| !s.is_empty()).collect();
    if !module.is_package {
        package.pop()?;
    }
    for _ in 1..level {
        package.pop()?;
    }
    let mut parts: Vec<String> = package.into_iter().map(str::to_string).collect();
    parts.extend(rest);
    (!parts.is_empty()).then(|| parts.join("."))
}

fn is_module_level(node: Node) -> bool {
    let mut parent = node.parent();
    while let Some(p) = parent {
        if matches!(p.kind(), "function_definition" | "class_definition") {
            return false;
        }
        parent = p.parent();
    }
    true
}

/// `a.b.c` as `["a", "b", "c"]` when the expression is a plain dotted name.
fn dotted_path(node: Node, source: &str) -> Option<Vec<String>> {
    let mut parts = Vec::new();
    let mut node = node;
    loop {
        match node.kind() {
            "identifier" => {
                parts.push(text(node, source).to_string());
                parts.reverse();
                return Some(parts);
            }
            "attribute" => {
                parts.push(text(node.child_by_field_name("attribute")?, source).to_string());
                node = node.child_by_field_name("object")?;
            }
            _ => return None,
        }
    }
}

fn call_site(node: Node, source: &str) -> Option<CallSite> {
    let callee = node.child_by_field_name("function")?;
    let function = dotted_path(callee, source)?;
    let arguments = node.child_by_field_name("arguments")?;
    let mut args = Vec::new();
    if arguments.kind() == "generator_expression" {
        // `f(x for x in xs)`: one positional argument.
        args.push(Argument {
            kind: ArgKind::Positional,
            literal: None,
            span: Span::of(arguments),
            value_span: Span::of(arguments),
        });
    } else {
        let mut cursor = arguments.walk();
        for arg in arguments.named_children(&mut cursor) {
            let (kind, value) = match arg.kind() {
                "comment" => continue,
                "keyword_argument" => {
                    let name = text(arg.child_by_field_name("name")?, source).to_string();
                    (ArgKind::Keyword(name), arg.child_by_field_name("value")?)
                }
                "list_splat" => (ArgKind::Unpack, arg),
                "dictionary_splat" => (ArgKind::UnpackMapping, arg),
                _ => (ArgKind::Positional, arg),
            };
            let literal = match kind {
                ArgKind::Positional | ArgKind::Keyword(_) => literal(value, source, 0),
                ArgKind::Unpack | ArgKind::UnpackMapping => None,
            };
            args.push(Argument {
                kind,
                literal,
                span: Span::of(arg),
                value_span: Span::of(value),
            });
        }
    }
    Some(CallSite {
        function,
        callee_span: Span::of(callee),
        args,
    })
}

fn named_children(node: Node) -> Vec<Node> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor)
        .filter(|c| c.kind() != "comment")
        .collect()
}

/// The value of a literal expression.
fn literal(node: Node, source: &str, depth: usize) -> Option<PyValue> {
    if depth > MAX_LITERAL_DEPTH {
        return None;
    }
    match node.kind() {
        "integer" => parse_int(text(node, source)).map(PyValue::Int),
        "float" => {
            let digits = text(node, source).replace('_', "");
            if digits.ends_with(['j', 'J']) {
                return None;
            }
            digits.parse().ok().map(PyValue::Float)
        }
        "true" => Some(PyValue::Bool(true)),
        "false" => Some(PyValue::Bool(false)),
        "none" => Some(PyValue::None),
        "string" => string_literal(node, source).map(PyValue::Str),
        "unary_operator" => {
            let operator = text(node.child_by_field_name("operator")?, source);
            let value = literal(node.child_by_field_name("argument")?, source, depth + 1)?;
            match (operator, value) {
                ("+", v @ (PyValue::Int(_) | PyValue::Float(_))) => Some(v),
                ("-", PyValue::Int(i)) => i.checked_neg().map(PyValue::Int),
                ("-", PyValue::Float(x)) => Some(PyValue::Float(-x)),
                _ => None,
            }
        }
        "parenthesized_expression" => match named_children(node).as_slice() {
            [inner] => literal(*inner, source, depth + 1),
            _ => None,
        },
        "tuple" | "list" => {
            let items = named_children(node)
                .into_iter()
                .map(|item| literal(item, source, depth + 1))
                .collect::<Option<Vec<_>>>()?;
            Some(if node.kind() == "tuple" {
                PyValue::Tuple(items)
            } else {
                PyValue::List(items)
            })
        }
        _ => None,
    }
}

/// A Python int literal (`10`, `1_000`, `0x1f`, `0o17`, `0b101`) that fits in i64.
fn parse_int(literal: &str) -> Option<i64> {
    let digits = literal.replace('_', "").to_ascii_lowercase();
    let (radix, body) = match digits.get(..2) {
        Some("0x") => (16, &digits[2..]),
        Some("0o") => (8, &digits[2..]),
        Some("0b") => (2, &digits[2..]),
        _ => (10, digits.as_str()),
    };
    i64::from_str_radix(body, radix).ok()
}

/// A plain string literal without escapes, prefixes or interpolation.
fn string_literal(node: Node, source: &str) -> Option<String> {
    let mut content = String::new();
    for child in named_children(node) {
        match child.kind() {
            "string_start" => {
                let quote = text(child, source);
                if !quote.starts_with(['"', '\'']) {
                    return None; // b'', f'', r'', ...
                }
            }
            "string_content" => {
                if child.named_child_count() > 0 {
                    return None; // escape sequences
                }
                content.push_str(text(child, source));
            }
            "string_end" => {}
            _ => return None,
        }
    }
    Some(content)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(name: &str, is_package: bool) -> ModuleName {
        ModuleName {
            name: name.into(),
            is_package,
        }
    }

    fn parse(source: &str) -> ParsedFile {
        PythonParser::new()
            .parse(source, &module("pkg.sub.mod", false))
            .unwrap()
    }

    fn absolute(file: &ParsedFile, name: &str) -> Vec<String> {
        file.bindings[name]
            .iter()
            .map(|b| match b {
                Binding::Absolute(p) => p.clone(),
                Binding::Alias(p) => format!("alias {}", p.join(".")),
            })
            .collect()
    }

    #[test]
    fn import_forms_bind_absolute_paths() {
        let file = parse(
            "import a.b\nimport c.d as e\nfrom f.g import h, i as j\nfrom . import k\n\
             from ..up import m\nfrom .side import *\nn = e.x\ndef p(): pass\n",
        );
        assert_eq!(absolute(&file, "a"), ["a"]);
        assert_eq!(absolute(&file, "e"), ["c.d"]);
        assert_eq!(absolute(&file, "h"), ["f.g.h"]);
        assert_eq!(absolute(&file, "j"), ["f.g.i"]);
        assert_eq!(absolute(&file, "k"), ["pkg.sub.k"]);
        assert_eq!(absolute(&file, "m"), ["pkg.up.m"]);
        assert_eq!(absolute(&file, "n"), ["alias e.x"]);
        assert_eq!(absolute(&file, "p"), ["pkg.sub.mod.p"]);
        assert_eq!(file.star_imports, ["pkg.sub.side"]);
    }

    #[test]
    fn relative_imports_in_packages_and_above_the_top() {
        let mut parser = PythonParser::new();
        let init = parser
            .parse("from .attn import f\n", &module("pkg", true))
            .unwrap();
        assert_eq!(absolute(&init, "f"), ["pkg.attn.f"]);
        let top = parser
            .parse("from ..x import f\n", &module("top", false))
            .unwrap();
        assert!(top.bindings.is_empty());
    }

    #[test]
    fn literals_are_evaluated_and_expressions_are_not() {
        let file = parse(
            "import m\nm.f(1, -2, 0x10, 1_000, 2.5, -1e-3, True, None, 'ab', (-1, -1), [0], \
             x, f'{x}', 'a\\n', 1j, 2 + 3, 99999999999999999999, (1))\n",
        );
        let values: Vec<Option<PyValue>> = file.calls[0]
            .args
            .iter()
            .map(|a| a.literal.clone())
            .collect();
        use PyValue::*;
        assert_eq!(
            values,
            [
                Some(Int(1)),
                Some(Int(-2)),
                Some(Int(16)),
                Some(Int(1000)),
                Some(Float(2.5)),
                Some(Float(-1e-3)),
                Some(Bool(true)),
                Some(None),
                Some(Str("ab".into())),
                Some(Tuple(vec![Int(-1), Int(-1)])),
                Some(List(vec![Int(0)])),
                Option::None,
                Option::None,
                Option::None,
                Option::None,
                Option::None,
                Option::None,
                Some(Int(1)),
            ]
        );
    }

    #[test]
    fn arguments_keep_kind_and_order() {
        let file = parse("import m\nm.f(a, *b, k=1, **c)  # comment\n");
        let kinds: Vec<ArgKind> = file.calls[0].args.iter().map(|a| a.kind.clone()).collect();
        assert_eq!(
            kinds,
            [
                ArgKind::Positional,
                ArgKind::Unpack,
                ArgKind::Keyword("k".into()),
                ArgKind::UnpackMapping
            ]
        );
        assert!(file.calls[0].unpacks());
    }

    #[test]
    fn only_calls_of_bound_names_are_kept() {
        let file = parse("import m\nm.f()\nprint(1)\nobj.method()\n");
        let callees: Vec<String> = file.calls.iter().map(|c| c.function.join(".")).collect();
        assert_eq!(callees, ["m.f"]);
    }

    #[test]
    fn methods_do_not_shadow_module_names() {
        let file = parse("from m import f\nclass A:\n    def f(self): return f()\n");
        assert_eq!(absolute(&file, "f"), ["m.f"]);
    }

    #[test]
    fn syntax_errors_are_located() {
        let source = "import m\ndef f(:\n    pass\n";
        let err = PythonParser::new()
            .parse(source, &module("x", false))
            .unwrap_err();
        assert!(err.message.starts_with("syntax error"), "{err:?}");
        assert!(err.span.start >= source.find("def").unwrap(), "{err:?}");
    }
}
