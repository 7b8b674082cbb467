//! The scopes of one file walked in source order, as far as static code allows Python's rules:
//! module, class and function scopes; names bound flow-sensitively inside a scope (branches join,
//! statically dead branches bind nothing); a function sees its enclosing functions' names as they
//! were at its `def`, and the module's names with every value they are ever given (functions run
//! after the module has been executed). Module-level functions and methods are analysed after the
//! module body for that reason.
//!
//! Every call whose callee may lead to an entry point is recorded with what is known of each
//! argument; the resolver ([`crate::scan::resolve`]) decides later, across files, which ones do.

use super::literal;
use super::value::{CallId, ClassId, DictValue, FunctionId, Param, Partial, Truth, Value, Values};
use super::{
    ArgKind, Argument, CallSite, ClassInfo, FileAnalysis, FunctionInfo, ImportRecord, Interest,
    ModuleName, Params, Span, Unpacking,
};
use crate::call::PyValue;
use crate::scan::entry_point::FUNCTION;
use std::collections::HashMap;
use std::rc::Rc;
use tree_sitter::Node;

/// Expressions nested deeper than this are not analysed (recursion stays within a thread's stack;
/// CPython itself refuses more than 200 nested brackets).
const MAX_EXPRESSION_DEPTH: usize = 200;

type Env = HashMap<String, Values>;

pub fn analyse(root: Node, source: &str, module: &ModuleName, interest: &Interest) -> FileAnalysis {
    let mut analyser = Analyser {
        source,
        module,
        interest,
        out: FileAnalysis::default(),
        pending: Vec::new(),
        current_function: None,
    };
    let mut scope = Scope {
        kind: ScopeKind::Module,
        env: Env::new(),
        enclosing: Rc::new(Vec::new()),
        self_of: None,
        dead: false,
        truths: Vec::new(),
    };
    analyser.block(root, &mut scope);
    let mut next = 0;
    while next < analyser.pending.len() {
        let pending = analyser.pending[next].clone();
        analyser.function_body(pending);
        next += 1;
    }
    analyser.out
}

#[derive(Clone, Copy, PartialEq)]
enum ScopeKind {
    Module,
    Class(ClassId),
    Function,
}

struct Scope {
    kind: ScopeKind,
    env: Env,
    /// The enclosing functions' names at the `def`, innermost last.
    enclosing: Rc<Vec<Env>>,
    /// Inside a method: its class and the name of its first parameter.
    self_of: Option<(ClassId, String)>,
    /// In a branch that never runs.
    dead: bool,
    /// Names whose truth value the enclosing `if`/`elif`/`else` arms establish here.
    truths: Vec<Truth>,
}

impl Scope {
    /// The enclosing chain a function defined in this scope sees.
    fn chain_for_nested(&self) -> Rc<Vec<Env>> {
        match self.kind {
            ScopeKind::Function => {
                let mut chain = (*self.enclosing).clone();
                chain.push(self.env.clone());
                Rc::new(chain)
            }
            // Class bodies are not visible from their methods; the module is reached through
            // `globals`.
            ScopeKind::Class(_) | ScopeKind::Module => Rc::clone(&self.enclosing),
        }
    }
}

/// A function body to analyse once the module body has been.
#[derive(Clone)]
struct PendingFunction<'t> {
    body: Node<'t>,
    id: FunctionId,
    enclosing: Rc<Vec<Env>>,
    class: Option<ClassId>,
    is_static: bool,
}

struct Analyser<'s, 't> {
    source: &'s str,
    module: &'s ModuleName,
    interest: &'s Interest,
    out: FileAnalysis,
    pending: Vec<PendingFunction<'t>>,
    current_function: Option<FunctionId>,
}

fn named_children(node: Node) -> Vec<Node> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor)
        .filter(|c| c.kind() != "comment")
        .collect()
}

fn join_envs(mut envs: Vec<Env>) -> Env {
    let mut joined = envs.pop().unwrap_or_default();
    for env in envs {
        // An attribute narrowed by an `assert` stays narrowed only where every path narrowed it.
        joined.retain(|name, _| !is_narrowed_attribute(name) || env.contains_key(name));
        for (name, values) in env {
            if is_narrowed_attribute(&name) && !joined.contains_key(&name) {
                continue;
            }
            joined.entry(name).or_default().join(&values);
        }
    }
    joined
}

/// The environment key of `self.attr` once an `assert` has narrowed it (no identifier has a dot).
fn narrowed_attribute(self_name: &str, attr: &str) -> String {
    format!("{self_name}.{attr}")
}

fn is_narrowed_attribute(name: &str) -> bool {
    name.contains('.')
}

/// The keys a dict key expression may be: every alternative a string literal
/// (`"page_table" if fa3 else "block_table"` is two).
fn string_keys(key: &Values) -> Option<Vec<String>> {
    key.literals()?
        .into_iter()
        .map(|k| match k {
            PyValue::Str(k) => Some(k.clone()),
            _ => None,
        })
        .collect()
}

impl<'s, 't> Analyser<'s, 't> {
    fn text(&self, node: Node) -> &'s str {
        &self.source[node.byte_range()]
    }

    fn bind(&mut self, name: &str, values: Values, scope: &mut Scope) {
        if scope.kind == ScopeKind::Module && !scope.dead {
            self.out
                .globals
                .entry(name.to_string())
                .or_default()
                .join(&values);
        }
        scope.truths.retain(|t| t.name != name);
        scope.env.insert(name.to_string(), values);
    }

    /// The truth an `if` condition establishes in its arm when it is a name or `not name`.
    fn truth_of(&self, condition: Node<'t>) -> Option<Truth> {
        match (condition.kind(), named_children(condition).as_slice()) {
            ("identifier", _) => Some(Truth {
                name: self.text(condition).to_string(),
                truthy: true,
            }),
            ("not_operator", [operand]) => self.truth_of(*operand).map(|t| Truth {
                truthy: !t.truthy,
                ..t
            }),
            ("parenthesized_expression", [inner]) => self.truth_of(*inner),
            _ => None,
        }
    }

    /// What `name` refers to here: this scope, the enclosing functions, the module, star imports,
    /// the builtins the scan models.
    fn lookup(&self, name: &str, scope: &Scope) -> Values {
        if let Some(values) = scope.env.get(name) {
            return values.clone();
        }
        for env in scope.enclosing.iter().rev() {
            if let Some(values) = env.get(name) {
                return values.clone();
            }
        }
        if let Some(values) = self.out.globals.get(name) {
            return values.clone();
        }
        if !self.out.star_imports.is_empty() {
            return self
                .out
                .star_imports
                .iter()
                .map(|module| {
                    let mut path: Vec<String> = module.split('.').map(str::to_string).collect();
                    path.push(name.to_string());
                    Value::Path(path)
                })
                .collect();
        }
        match name {
            "dict" | "staticmethod" => {
                Values::one(Value::Path(vec!["builtins".into(), name.into()]))
            }
            _ => Values::unknown(),
        }
    }

    // ----- statements -----

    fn block(&mut self, node: Node<'t>, scope: &mut Scope) {
        for statement in named_children(node) {
            self.statement(statement, scope);
        }
    }

    fn statement(&mut self, node: Node<'t>, scope: &mut Scope) {
        match node.kind() {
            "expression_statement" => {
                for child in named_children(node) {
                    self.expression_statement(child, scope);
                }
            }
            "import_statement" => self.import(node, scope),
            "import_from_statement" => self.import_from(node, scope),
            "function_definition" => self.function_definition(node, &[], scope),
            "class_definition" => self.class_definition(node, scope),
            "decorated_definition" => {
                let decorators: Vec<Node> = named_children(node)
                    .into_iter()
                    .filter(|c| c.kind() == "decorator")
                    .collect();
                for decorator in &decorators {
                    self.eval_children(*decorator, scope, 0);
                }
                match node.child_by_field_name("definition") {
                    Some(def) if def.kind() == "function_definition" => {
                        self.function_definition(def, &decorators, scope)
                    }
                    Some(def) => self.class_definition(def, scope),
                    None => {}
                }
            }
            "if_statement" => self.if_statement(node, scope),
            "assert_statement" => {
                self.eval_children(node, scope, 0);
                if let Some(condition) = named_children(node).first() {
                    self.narrow(*condition, scope);
                }
            }
            "for_statement" => {
                if let Some(iterable) = node.child_by_field_name("right") {
                    self.eval(iterable, scope, 0);
                }
                if let Some(target) = node.child_by_field_name("left") {
                    self.assign(target, Values::unknown(), Span::of(node), scope);
                }
                self.loop_body(node, scope);
            }
            "while_statement" => {
                if let Some(condition) = node.child_by_field_name("condition") {
                    self.eval(condition, scope, 0);
                }
                self.loop_body(node, scope);
            }
            "try_statement" => self.try_statement(node, scope),
            "with_statement" => {
                for child in named_children(node) {
                    match child.kind() {
                        "with_clause" => {
                            for item in named_children(child) {
                                self.with_item(item, scope);
                            }
                        }
                        "block" => self.block(child, scope),
                        _ => {}
                    }
                }
            }
            "match_statement" => {
                if let Some(subject) = node.child_by_field_name("subject") {
                    self.eval(subject, scope, 0);
                }
                let before = scope.env.clone();
                let mut outcomes = vec![before.clone()];
                if let Some(body) = node.child_by_field_name("body") {
                    for case in named_children(body) {
                        scope.env = before.clone();
                        self.eval_children(case, scope, 0);
                        outcomes.push(std::mem::take(&mut scope.env));
                    }
                }
                scope.env = join_envs(outcomes);
            }
            "delete_statement" => {
                for target in named_children(node) {
                    if !self.remove_dict_key(target, scope) {
                        self.eval(target, scope, 0);
                    }
                }
            }
            "block" => self.block(node, scope),
            "comment"
            | "pass_statement"
            | "break_statement"
            | "continue_statement"
            | "global_statement"
            | "nonlocal_statement"
            | "future_import_statement" => {}
            _ => {
                self.eval_children(node, scope, 0);
            }
        }
    }

    fn expression_statement(&mut self, node: Node<'t>, scope: &mut Scope) {
        match node.kind() {
            "assignment" => self.assignment(node, scope),
            "augmented_assignment" => {
                if let Some(right) = node.child_by_field_name("right") {
                    self.eval(right, scope, 0);
                }
                if let Some(left) = node.child_by_field_name("left") {
                    self.assign(left, Values::unknown(), Span::of(node), scope);
                }
            }
            _ => {
                self.eval(node, scope, 0);
            }
        }
    }

    fn assignment(&mut self, node: Node<'t>, scope: &mut Scope) {
        let Some(left) = node.child_by_field_name("left") else {
            return;
        };
        let Some(right) = node.child_by_field_name("right") else {
            // `x: int` declares without binding.
            return;
        };
        // `a = b = value`: the right side is itself an assignment.
        let values = if right.kind() == "assignment" {
            self.assignment(right, scope);
            right
                .child_by_field_name("left")
                .map_or_else(Values::unknown, |l| self.eval(l, scope, 0))
        } else if is_sequence_target(left)
            && matches!(right.kind(), "expression_list" | "tuple")
            && named_children(left).len() == named_children(right).len()
        {
            // `a, b = x, y`: pairwise.
            let values: Vec<(Values, Span)> = named_children(right)
                .into_iter()
                .map(|r| (self.eval(r, scope, 0), Span::of(r)))
                .collect();
            for (target, (value, from)) in named_children(left).into_iter().zip(values) {
                self.assign(target, value, from, scope);
            }
            return;
        } else {
            self.eval(right, scope, 0)
        };
        if is_sequence_target(left) {
            self.record_unpacking(left, &values);
        }
        if let ScopeKind::Class(class) = scope.kind
            && left.kind() == "identifier"
            && is_staticmethod_call(right, self.source)
            && !scope.dead
        {
            let attr = self.text(left).to_string();
            self.out.classes[class]
                .instance_attrs
                .entry(attr)
                .or_default()
                .join(&values);
        }
        self.assign(left, values, Span::of(right), scope);
    }

    /// `a, b = f(...)` (or `= result` holding what `f` returned): how the result is unpacked.
    fn record_unpacking(&mut self, left: Node, values: &Values) {
        let elements = named_children(left);
        let starred = elements.iter().any(|e| e.kind() == "list_splat_pattern");
        let unpacking = Unpacking {
            targets: elements.len() - usize::from(starred),
            starred,
            span: Span::of(left),
        };
        for value in values.iter() {
            if let Value::CallResult(id) = value {
                self.out.calls[*id].unpacked = Some(unpacking);
            }
        }
    }

    fn assign(&mut self, target: Node<'t>, values: Values, from: Span, scope: &mut Scope) {
        match target.kind() {
            "identifier" => {
                let name = self.text(target);
                self.bind(name, values, scope);
            }
            "pattern_list" | "tuple_pattern" | "list_pattern" | "expression_list" | "tuple"
            | "list" => {
                let elements = named_children(target);
                let known = values
                    .as_literal()
                    .and_then(PyValue::as_sequence)
                    .filter(|items| items.len() == elements.len())
                    .map(<[PyValue]>::to_vec);
                for (i, element) in elements.into_iter().enumerate() {
                    let value = known
                        .as_ref()
                        .map_or_else(Values::unknown, |items| Values::literal(items[i].clone()));
                    self.assign(element, value, from, scope);
                }
            }
            "list_splat_pattern" | "parenthesized_expression" => {
                for inner in named_children(target) {
                    self.assign(inner, Values::unknown(), from, scope);
                }
            }
            "attribute" => {
                let (Some(object), Some(attr)) = (
                    target.child_by_field_name("object"),
                    target.child_by_field_name("attribute"),
                ) else {
                    return;
                };
                let attr = self.text(attr).to_string();
                if self.self_class(object, scope).is_some() {
                    scope
                        .env
                        .remove(&narrowed_attribute(self.text(object), &attr));
                }
                match self.self_class(object, scope) {
                    Some(class) if !scope.dead => self.out.classes[class]
                        .instance_attrs
                        .entry(attr)
                        .or_default()
                        .join(&values),
                    Some(_) => {}
                    None => {
                        self.eval(object, scope, 0);
                    }
                }
            }
            "subscript" => {
                let key = target
                    .child_by_field_name("subscript")
                    .and_then(|k| literal::scalar(k, self.source));
                let updated = match (target.child_by_field_name("value"), key) {
                    (Some(dict), Some(PyValue::Str(key))) => {
                        self.update_dict(dict, scope, |d| d.set(key.clone(), values.clone(), from))
                    }
                    _ => false,
                };
                if !updated {
                    self.eval_children(target, scope, 0);
                }
            }
            _ => {
                self.eval(target, scope, 0);
            }
        }
    }

    /// Applies `change` to every dict `name` may hold; false when `node` is not such a name.
    fn update_dict(
        &mut self,
        node: Node,
        scope: &mut Scope,
        mut change: impl FnMut(&mut DictValue),
    ) -> bool {
        if node.kind() != "identifier" {
            return false;
        }
        let name = self.text(node);
        let Some(values) = scope.env.get_mut(name) else {
            return false;
        };
        let mut any = false;
        for value in values.iter_mut() {
            if let Value::Dict(dict) = value {
                change(dict);
                any = true;
            }
        }
        any
    }

    /// `del d["key"]`.
    fn remove_dict_key(&mut self, target: Node, scope: &mut Scope) -> bool {
        if target.kind() != "subscript" {
            return false;
        }
        let key = target
            .child_by_field_name("subscript")
            .and_then(|k| literal::scalar(k, self.source));
        match (target.child_by_field_name("value"), key) {
            (Some(dict), Some(PyValue::Str(key))) => {
                self.update_dict(dict, scope, |d| d.remove(&key))
            }
            _ => false,
        }
    }

    /// After `assert x == 3` or `assert self.ver in [3]`, the name or `self` attribute is one of
    /// the literals (SGLang asserts its FA version before building `**kwargs` on it).
    fn narrow(&mut self, condition: Node<'t>, scope: &mut Scope) {
        if condition.kind() != "comparison_operator" {
            return;
        }
        let mut cursor = condition.walk();
        let operators: Vec<&str> = condition
            .children_by_field_name("operators", &mut cursor)
            .map(|o| o.kind())
            .collect();
        let operands = named_children(condition);
        let ([subject, allowed], [operator]) = (operands.as_slice(), operators.as_slice()) else {
            return;
        };
        let literal = |node: Node| literal::scalar(node, self.source);
        let allowed: Option<Vec<PyValue>> = match (*operator, allowed.kind()) {
            ("==", _) => literal(*allowed).map(|v| vec![v]),
            ("in", "list" | "tuple") => named_children(*allowed).into_iter().map(literal).collect(),
            _ => None,
        };
        let Some(allowed) = allowed.filter(|a| !a.is_empty()) else {
            return;
        };
        let values: Values = allowed.into_iter().map(Value::Literal).collect();
        match subject.kind() {
            "identifier" => self.bind(self.text(*subject), values, scope),
            "attribute" => {
                let (Some(object), Some(attr)) = (
                    subject.child_by_field_name("object"),
                    subject.child_by_field_name("attribute"),
                ) else {
                    return;
                };
                if self.self_class(object, scope).is_some() {
                    let key = narrowed_attribute(self.text(object), self.text(attr));
                    scope.env.insert(key, values);
                }
            }
            _ => {}
        }
    }

    fn if_statement(&mut self, node: Node<'t>, scope: &mut Scope) {
        let mut arms: Vec<(Option<Node>, Node)> = Vec::new();
        if let Some(body) = node.child_by_field_name("consequence") {
            arms.push((node.child_by_field_name("condition"), body));
        }
        let mut cursor = node.walk();
        for alternative in node.children_by_field_name("alternative", &mut cursor) {
            let body = match alternative.kind() {
                "elif_clause" => alternative.child_by_field_name("consequence"),
                _ => alternative.child_by_field_name("body"),
            };
            if let Some(body) = body {
                arms.push((alternative.child_by_field_name("condition"), body));
            }
        }
        let before = scope.env.clone();
        let outer_dead = scope.dead;
        let outer_truths = scope.truths.clone();
        // What the arms so far leave known in the ones after them (`if flag: ... else:` runs its
        // `else` where `flag` is falsy).
        let mut later_truths = outer_truths.clone();
        let mut outcomes = Vec::new();
        // An earlier condition known to be true: the later arms never run.
        let mut decided = false;
        let mut else_taken = false;
        for (condition, body) in arms {
            scope.env = before.clone();
            let truth = match condition {
                Some(condition) => {
                    let value = self.eval(condition, scope, 0);
                    if decided { Some(false) } else { value.truthy() }
                }
                None if decided => Some(false),
                None => {
                    else_taken = true;
                    None
                }
            };
            scope.dead = outer_dead || truth == Some(false);
            scope.truths = later_truths.clone();
            if let Some(established) = condition.and_then(|c| self.truth_of(c)) {
                later_truths.retain(|t| t.name != established.name);
                later_truths.push(Truth {
                    truthy: !established.truthy,
                    ..established.clone()
                });
                scope.truths.retain(|t| t.name != established.name);
                scope.truths.push(established);
            }
            self.block(body, scope);
            if truth != Some(false) {
                outcomes.push(std::mem::take(&mut scope.env));
            }
            decided |= truth == Some(true);
        }
        scope.dead = outer_dead;
        scope.truths = outer_truths;
        if !decided && !else_taken {
            outcomes.push(before.clone());
        }
        scope.env = if outcomes.is_empty() {
            before
        } else {
            join_envs(outcomes)
        };
    }

    /// A loop body runs zero or more times: its bindings join the ones before it.
    fn loop_body(&mut self, node: Node<'t>, scope: &mut Scope) {
        let before = scope.env.clone();
        if let Some(body) = node.child_by_field_name("body") {
            self.block(body, scope);
        }
        let after = std::mem::take(&mut scope.env);
        scope.env = join_envs(vec![before, after]);
        if let Some(alternative) = node.child_by_field_name("alternative") {
            self.eval_children(alternative, scope, 0);
        }
    }

    fn try_statement(&mut self, node: Node<'t>, scope: &mut Scope) {
        let before = scope.env.clone();
        if let Some(body) = node.child_by_field_name("body") {
            self.block(body, scope);
        }
        let after_body = std::mem::take(&mut scope.env);
        // A handler may run after any part of the body.
        let handler_entry = join_envs(vec![before, after_body.clone()]);
        let mut outcomes = Vec::new();
        let mut after_else = after_body;
        let mut finally = None;
        for clause in named_children(node) {
            match clause.kind() {
                "except_clause" | "except_group_clause" => {
                    scope.env = handler_entry.clone();
                    if let Some(value) = clause.child_by_field_name("value") {
                        self.eval(value, scope, 0);
                    }
                    if let Some(alias) = clause.child_by_field_name("alias") {
                        self.assign(alias, Values::unknown(), Span::of(alias), scope);
                    }
                    for block in named_children(clause)
                        .into_iter()
                        .filter(|c| c.kind() == "block")
                    {
                        self.block(block, scope);
                    }
                    outcomes.push(std::mem::take(&mut scope.env));
                }
                "else_clause" => {
                    scope.env = after_else;
                    self.eval_children(clause, scope, 0);
                    after_else = std::mem::take(&mut scope.env);
                }
                "finally_clause" => finally = Some(clause),
                _ => {}
            }
        }
        outcomes.push(after_else);
        scope.env = join_envs(outcomes);
        if let Some(finally) = finally {
            self.eval_children(finally, scope, 0);
        }
    }

    fn with_item(&mut self, item: Node<'t>, scope: &mut Scope) {
        let Some(value) = item.child_by_field_name("value") else {
            return;
        };
        if value.kind() == "as_pattern" {
            let children = named_children(value);
            if let Some(expression) = children.first() {
                self.eval(*expression, scope, 0);
            }
            for target in children.iter().skip(1) {
                for name in named_children(*target) {
                    self.assign(name, Values::unknown(), Span::of(name), scope);
                }
            }
        } else {
            self.eval(value, scope, 0);
        }
    }

    // ----- imports -----

    fn import(&mut self, node: Node, scope: &mut Scope) {
        let mut cursor = node.walk();
        let names: Vec<Node> = node.children_by_field_name("name", &mut cursor).collect();
        for name in names {
            match name.kind() {
                "dotted_name" => {
                    let dotted = normalise_dotted(self.text(name));
                    let first = dotted.split('.').next().unwrap_or(&dotted).to_string();
                    self.bind(&first, Values::one(Value::Path(vec![first.clone()])), scope);
                }
                "aliased_import" => {
                    if let (Some(target), Some(alias)) = (
                        name.child_by_field_name("name"),
                        name.child_by_field_name("alias"),
                    ) {
                        let path = split_path(&normalise_dotted(self.text(target)));
                        let alias = self.text(alias);
                        self.bind(alias, Values::one(Value::Path(path)), scope);
                    }
                }
                _ => {}
            }
        }
    }

    fn import_from(&mut self, node: Node, scope: &mut Scope) {
        let Some(from) = node
            .child_by_field_name("module_name")
            .and_then(|m| imported_module(m, self.source, self.module))
        else {
            return;
        };
        for child in named_children(node) {
            if child.kind() == "wildcard_import" && scope.kind == ScopeKind::Module {
                self.out.star_imports.push(from.clone());
            }
        }
        let mut cursor = node.walk();
        let names: Vec<Node> = node.children_by_field_name("name", &mut cursor).collect();
        for name in names {
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
            let member = normalise_dotted(self.text(target));
            if member == FUNCTION {
                self.out.imports.push(ImportRecord {
                    module: from.clone(),
                    span: Span::of(name),
                });
            }
            let mut path = split_path(&from);
            path.extend(split_path(&member));
            let local = self.text(local);
            self.bind(local, Values::one(Value::Path(path)), scope);
        }
    }

    // ----- definitions -----

    fn function_definition(&mut self, node: Node<'t>, decorators: &[Node], scope: &mut Scope) {
        let (Some(name), Some(body)) = (
            node.child_by_field_name("name"),
            node.child_by_field_name("body"),
        ) else {
            return;
        };
        let params = node
            .child_by_field_name("parameters")
            .map(|p| self.parameters(p, scope))
            .unwrap_or_default();
        if let Some(return_type) = node.child_by_field_name("return_type") {
            self.eval(return_type, scope, 0);
        }
        let id = self.out.functions.len();
        self.out.functions.push(FunctionInfo {
            name: self.text(name).to_string(),
            span: Span::of(name),
            params,
            calls: Vec::new(),
            dead: scope.dead,
        });
        let name = self.text(name);
        self.bind(name, Values::one(Value::Function(id)), scope);
        let is_static = decorators.iter().any(|d| {
            named_children(*d)
                .first()
                .is_some_and(|e| self.text(*e) == "staticmethod")
        });
        let pending = PendingFunction {
            body,
            id,
            enclosing: scope.chain_for_nested(),
            class: match scope.kind {
                ScopeKind::Class(class) => Some(class),
                _ => None,
            },
            is_static,
        };
        if scope.enclosing.is_empty() && scope.kind != ScopeKind::Function {
            // At module level (directly or in a module-level class): after the module body.
            self.pending.push(pending);
        } else {
            self.function_body(pending);
        }
    }

    fn parameters(&mut self, node: Node<'t>, scope: &mut Scope) -> Params {
        let mut params = Params::default();
        let mut keyword_only = false;
        for param in named_children(node) {
            let (name, default) = match param.kind() {
                "identifier" => (Some(self.text(param).to_string()), None),
                "default_parameter" | "typed_default_parameter" => (
                    param
                        .child_by_field_name("name")
                        .map(|n| self.text(n).to_string()),
                    param
                        .child_by_field_name("value")
                        .map(|v| self.eval(v, scope, 0)),
                ),
                "typed_parameter" => match named_children(param).first() {
                    Some(inner) if inner.kind() == "identifier" => {
                        (Some(self.text(*inner).to_string()), None)
                    }
                    Some(inner) => {
                        self.splat_parameter(*inner, &mut params, &mut keyword_only);
                        (None, None)
                    }
                    None => (None, None),
                },
                "list_splat_pattern" | "dictionary_splat_pattern" | "keyword_separator" => {
                    self.splat_parameter(param, &mut params, &mut keyword_only);
                    (None, None)
                }
                _ => (None, None),
            };
            if let Some(name) = name {
                if keyword_only {
                    params.keyword_only.push((name, default));
                } else {
                    params.positional.push((name, default));
                }
            }
        }
        params
    }

    fn splat_parameter(&self, node: Node, params: &mut Params, keyword_only: &mut bool) {
        let name = named_children(node)
            .first()
            .map(|n| self.text(*n).to_string());
        match node.kind() {
            "list_splat_pattern" => {
                params.var_positional = name;
                *keyword_only = true;
            }
            "dictionary_splat_pattern" => params.var_keyword = name,
            _ => *keyword_only = true,
        }
    }

    fn function_body(&mut self, pending: PendingFunction<'t>) {
        let info = &self.out.functions[pending.id];
        let params = info.params.clone();
        let mut scope = Scope {
            kind: ScopeKind::Function,
            env: Env::new(),
            enclosing: pending.enclosing,
            self_of: None,
            dead: info.dead,
            truths: Vec::new(),
        };
        let function = pending.id;
        for (i, (name, _)) in params
            .positional
            .iter()
            .chain(&params.keyword_only)
            .enumerate()
        {
            if i == 0
                && !pending.is_static
                && let Some(class) = pending.class
            {
                scope.self_of = Some((class, name.clone()));
            }
            scope.env.insert(
                name.clone(),
                Values::one(Value::Param {
                    function,
                    param: Param::Named(name.clone()),
                }),
            );
        }
        if let Some(name) = &params.var_positional {
            scope.env.insert(
                name.clone(),
                Values::one(Value::Param {
                    function,
                    param: Param::VarPositional,
                }),
            );
        }
        if let Some(name) = &params.var_keyword {
            let mut kwargs = DictValue::new(self.out.functions[function].span);
            kwargs.base = Some((function, name.clone()));
            scope
                .env
                .insert(name.clone(), Values::one(Value::Dict(Box::new(kwargs))));
        }
        let outer = self.current_function.replace(function);
        self.block(pending.body, &mut scope);
        self.current_function = outer;
    }

    fn class_definition(&mut self, node: Node<'t>, scope: &mut Scope) {
        if let Some(superclasses) = node.child_by_field_name("superclasses") {
            self.eval_children(superclasses, scope, 0);
        }
        let Some(name) = node.child_by_field_name("name") else {
            return;
        };
        let id = self.out.classes.len();
        self.out.classes.push(ClassInfo {
            name: self.text(name).to_string(),
            ..ClassInfo::default()
        });
        let name = self.text(name);
        self.bind(name, Values::unknown(), scope);
        let mut body_scope = Scope {
            kind: ScopeKind::Class(id),
            env: Env::new(),
            enclosing: scope.chain_for_nested(),
            self_of: None,
            dead: scope.dead,
            truths: Vec::new(),
        };
        if let Some(body) = node.child_by_field_name("body") {
            self.block(body, &mut body_scope);
        }
    }

    /// The class whose instance `node` (`self` in a method) is.
    fn self_class(&self, node: Node, scope: &Scope) -> Option<ClassId> {
        let (class, name) = scope.self_of.as_ref()?;
        (node.kind() == "identifier" && self.text(node) == name).then_some(*class)
    }

    // ----- expressions -----

    /// Evaluates every named child (so that calls inside are found); the node's own value is
    /// unknown.
    fn eval_children(&mut self, node: Node<'t>, scope: &mut Scope, depth: usize) -> Values {
        for child in named_children(node) {
            match child.kind() {
                "block" => self.block(child, scope),
                _ => {
                    self.eval(child, scope, depth + 1);
                }
            }
        }
        Values::unknown()
    }

    fn eval(&mut self, node: Node<'t>, scope: &mut Scope, depth: usize) -> Values {
        if depth > MAX_EXPRESSION_DEPTH {
            self.out.too_deep.get_or_insert(Span::of(node));
            return Values::unknown();
        }
        let next = depth + 1;
        match node.kind() {
            "identifier" => self.lookup(self.text(node), scope),
            "attribute" => {
                let (Some(object), Some(attr)) = (
                    node.child_by_field_name("object"),
                    node.child_by_field_name("attribute"),
                ) else {
                    return self.eval_children(node, scope, depth);
                };
                let attr = self.text(attr);
                if self.self_class(object, scope).is_some()
                    && let Some(narrowed) =
                        scope.env.get(&narrowed_attribute(self.text(object), attr))
                {
                    return narrowed.clone();
                }
                match self.self_class(object, scope) {
                    Some(class) => Values::one(Value::InstanceAttr {
                        class,
                        attr: attr.to_string(),
                    }),
                    None => self.eval(object, scope, next).attribute(attr),
                }
            }
            "call" => self.call(node, scope, depth),
            "integer" | "float" | "true" | "false" | "none" | "string" => {
                match literal::scalar(node, self.source) {
                    Some(value) => Values::literal(value),
                    // f-strings: their replacement fields may call things.
                    None => self.eval_children(node, scope, depth),
                }
            }
            "unary_operator" => {
                let operand = node
                    .child_by_field_name("argument")
                    .map_or_else(Values::unknown, |a| self.eval(a, scope, next));
                let operator = node.child_by_field_name("operator").map(|o| self.text(o));
                match (operator, operand.as_literal()) {
                    (Some("+"), Some(v @ (PyValue::Int(_) | PyValue::Float(_)))) => {
                        Values::literal(v.clone())
                    }
                    (Some("-"), Some(PyValue::Int(i))) => i
                        .checked_neg()
                        .map_or_else(Values::unknown, |i| Values::literal(PyValue::Int(i))),
                    (Some("-"), Some(PyValue::Float(x))) => Values::literal(PyValue::Float(-x)),
                    _ => Values::unknown(),
                }
            }
            "not_operator" => {
                let operand = node
                    .child_by_field_name("argument")
                    .map_or_else(Values::unknown, |a| self.eval(a, scope, next));
                operand
                    .truthy()
                    .map_or_else(Values::unknown, |t| Values::literal(PyValue::Bool(!t)))
            }
            "boolean_operator" => {
                let left = node
                    .child_by_field_name("left")
                    .map_or_else(Values::unknown, |l| self.eval(l, scope, next));
                let right = node
                    .child_by_field_name("right")
                    .map_or_else(Values::unknown, |r| self.eval(r, scope, next));
                let operator = node.child_by_field_name("operator").map(|o| o.kind());
                match (operator, left.truthy()) {
                    (Some("and"), Some(false)) | (Some("or"), Some(true)) => left,
                    (Some("and"), Some(true)) | (Some("or"), Some(false)) => right,
                    _ => Values::unknown(),
                }
            }
            "comparison_operator" => self.comparison(node, scope, next),
            "parenthesized_expression" => match named_children(node).as_slice() {
                [inner] => self.eval(*inner, scope, next),
                _ => self.eval_children(node, scope, depth),
            },
            "tuple" | "list" | "expression_list" => {
                let items: Vec<Values> = named_children(node)
                    .into_iter()
                    .map(|item| self.eval(item, scope, next))
                    .collect();
                let literals: Option<Vec<PyValue>> =
                    items.iter().map(|v| v.as_literal().cloned()).collect();
                match literals {
                    Some(items) if node.kind() == "list" => Values::literal(PyValue::List(items)),
                    Some(items) => Values::literal(PyValue::Tuple(items)),
                    None => Values::unknown(),
                }
            }
            "dictionary" => self.dictionary(node, scope, next),
            "conditional_expression" => match named_children(node).as_slice() {
                [then, condition, otherwise] => {
                    let condition = self.eval(*condition, scope, next);
                    let then = self.eval(*then, scope, next);
                    let otherwise = self.eval(*otherwise, scope, next);
                    match condition.truthy() {
                        Some(true) => then,
                        Some(false) => otherwise,
                        None => {
                            let mut both = then;
                            both.join(&otherwise);
                            both
                        }
                    }
                }
                _ => self.eval_children(node, scope, depth),
            },
            "named_expression" => {
                let values = node
                    .child_by_field_name("value")
                    .map_or_else(Values::unknown, |v| self.eval(v, scope, next));
                if let Some(name) = node.child_by_field_name("name") {
                    let name = self.text(name);
                    self.bind(name, values.clone(), scope);
                }
                values
            }
            "lambda"
            | "list_comprehension"
            | "set_comprehension"
            | "dictionary_comprehension"
            | "generator_expression" => {
                // Their own scope: the names they bind stay inside.
                let saved = scope.env.clone();
                self.eval_children(node, scope, depth);
                scope.env = saved;
                Values::unknown()
            }
            "for_in_clause" => {
                if let Some(right) = node.child_by_field_name("right") {
                    self.eval(right, scope, next);
                }
                if let Some(left) = node.child_by_field_name("left") {
                    self.assign(left, Values::unknown(), Span::of(left), scope);
                }
                Values::unknown()
            }
            _ => self.eval_children(node, scope, depth),
        }
    }

    /// `==`, `!=`, `is`, `is not` between literals; anything else is unknown.
    fn comparison(&mut self, node: Node<'t>, scope: &mut Scope, depth: usize) -> Values {
        let operands: Vec<Values> = named_children(node)
            .into_iter()
            .map(|o| self.eval(o, scope, depth))
            .collect();
        let mut cursor = node.walk();
        let operators: Vec<&str> = node
            .children_by_field_name("operators", &mut cursor)
            .map(|o| o.kind())
            .collect();
        let ([left, right], [operator]) = (operands.as_slice(), operators.as_slice()) else {
            return Values::unknown();
        };
        let (Some(a), Some(b)) = (left.as_literal(), right.as_literal()) else {
            return Values::unknown();
        };
        let result = match *operator {
            "==" => literal::python_eq(a, b),
            "!=" => !literal::python_eq(a, b),
            "is" if a.is_none() || b.is_none() => a.is_none() && b.is_none(),
            "is not" if a.is_none() || b.is_none() => !(a.is_none() && b.is_none()),
            "in" | "not in" => {
                let Some(items) = b.as_sequence() else {
                    return Values::unknown();
                };
                items.iter().any(|item| literal::python_eq(a, item)) == (*operator == "in")
            }
            _ => return Values::unknown(),
        };
        Values::literal(PyValue::Bool(result))
    }

    fn dictionary(&mut self, node: Node<'t>, scope: &mut Scope, depth: usize) -> Values {
        let mut dict = DictValue::new(Span::of(node));
        for item in named_children(node) {
            match item.kind() {
                "pair" => {
                    let key = item.child_by_field_name("key");
                    let by_truth = key.and_then(|k| self.keys_by_truth(k, scope));
                    let keys = match by_truth {
                        Some(_) => None,
                        None => key.map(|k| self.eval(k, scope, depth)),
                    };
                    let value = item
                        .child_by_field_name("value")
                        .map_or_else(Values::unknown, |v| self.eval(v, scope, depth));
                    let at = item
                        .child_by_field_name("value")
                        .map_or(Span::of(item), Span::of);
                    match (by_truth, keys.as_ref().and_then(string_keys)) {
                        (Some((name, keys)), _) => dict.set_by_truth(&name, keys, value, at),
                        (None, Some(keys)) => dict.set_one_of(keys, value, at),
                        (None, None) => dict.open = true,
                    }
                }
                _ => {
                    self.eval(item, scope, depth);
                    dict.open = true;
                }
            }
        }
        Values::one(Value::Dict(Box::new(dict)))
    }

    /// `"a" if name else "b"` (or `not name`) as a dict key whose condition the scan cannot
    /// decide here: the name and the keys set where it is truthy and where it is falsy.
    fn keys_by_truth(&mut self, key: Node<'t>, scope: &mut Scope) -> Option<(String, [String; 2])> {
        let [then, condition, otherwise] = named_children(key).try_into().ok()?;
        let truth = (key.kind() == "conditional_expression")
            .then(|| self.truth_of(condition))
            .flatten()?;
        if self.eval(condition, scope, 0).truthy().is_some() {
            return None;
        }
        let mut one_key = |node| match string_keys(&self.eval(node, scope, 0))?.as_slice() {
            [k] => Some(k.clone()),
            _ => None,
        };
        let (then, otherwise) = (one_key(then)?, one_key(otherwise)?);
        let keys = if truth.truthy {
            [then, otherwise]
        } else {
            [otherwise, then]
        };
        Some((truth.name, keys))
    }

    fn call(&mut self, node: Node<'t>, scope: &mut Scope, depth: usize) -> Values {
        let next = depth + 1;
        let (Some(function), Some(arguments)) = (
            node.child_by_field_name("function"),
            node.child_by_field_name("arguments"),
        ) else {
            return self.eval_children(node, scope, depth);
        };
        let callee = self.eval(function, scope, next);
        let args = self.arguments(arguments, scope, next);
        let method = (function.kind() == "attribute")
            .then(|| function.child_by_field_name("attribute"))
            .flatten()
            .map(|a| self.text(a));
        let is = |path: &[&str]| {
            callee
                .iter()
                .any(|v| matches!(v, Value::Path(p) if p.iter().map(String::as_str).eq(path.iter().copied())))
        };
        if is(&["functools", "partial"])
            && let Some(func) = args.first().filter(|a| a.kind == ArgKind::Positional)
        {
            return Values::one(Value::Partial(Box::new(Partial {
                func: func.values.clone(),
                args: args[1..].to_vec(),
                at: Span::of(node),
            })));
        }
        if is(&["builtins", "dict"]) {
            let mut dict = DictValue::new(Span::of(node));
            for arg in args {
                match arg.kind {
                    ArgKind::Keyword(key) => dict.set(key, arg.values, arg.value_span),
                    _ => dict.open = true,
                }
            }
            return Values::one(Value::Dict(Box::new(dict)));
        }
        if is(&["builtins", "staticmethod"]) {
            return args
                .first()
                .map_or_else(Values::unknown, |a| a.values.clone());
        }
        if let (Some(method), Some(object)) = (method, function.child_by_field_name("object"))
            && self.dict_method(object, method, &args, scope)
        {
            return Values::unknown();
        }
        let callee_name = match function.kind() {
            "identifier" => Some(self.text(function).to_string()),
            "attribute" => method.map(str::to_string),
            _ => None,
        };
        let recorded =
            callee.iter().any(|v| self.interesting(v)) || callee_name.as_deref() == Some(FUNCTION);
        if recorded {
            let id: CallId = self.out.calls.len();
            self.out.calls.push(CallSite {
                callee,
                callee_span: Span::of(function),
                callee_name,
                args,
                function: self.current_function,
                unpacked: None,
                dead: scope.dead,
            });
            if let Some(f) = self.current_function {
                self.out.functions[f].calls.push(id);
            }
            return Values::one(Value::CallResult(id));
        }
        // A dtype given to a tensor constructor or conversion.
        let dtype = args
            .iter()
            .find(|a| a.kind == ArgKind::Keyword("dtype".into()))
            .map(|a| a.values.clone())
            .or_else(|| {
                matches!(method, Some("to" | "view" | "type")).then(|| {
                    let mut dtype = Values::default();
                    for arg in args.iter().filter(|a| a.kind == ArgKind::Positional) {
                        dtype.join(&arg.values);
                    }
                    dtype
                })
            });
        match dtype {
            Some(dtype) if !dtype.is_empty() => Values::one(Value::Cast {
                dtype,
                at: Span::of(node),
            }),
            _ => Values::unknown(),
        }
    }

    /// `d.update(...)`, `d.pop("k")`, `d.setdefault("k", v)`, `d.clear()` on a dict the scan
    /// follows; false when `object` is not such a dict or the method is another.
    fn dict_method(
        &mut self,
        object: Node,
        method: &str,
        args: &[Argument],
        scope: &mut Scope,
    ) -> bool {
        let key = |i: usize| match args.get(i).and_then(|a| a.values.as_literal()) {
            Some(PyValue::Str(key)) => Some(key.clone()),
            _ => None,
        };
        match method {
            "update" => self.update_dict(object, scope, |dict| {
                for arg in args {
                    match (&arg.kind, arg.values.iter().next()) {
                        (ArgKind::Keyword(key), _) => {
                            dict.set(key.clone(), arg.values.clone(), arg.value_span)
                        }
                        (ArgKind::Positional, Some(Value::Dict(other))) if !other.open => {
                            for entry in &other.entries {
                                dict.set(entry.key.clone(), entry.values.clone(), entry.at);
                            }
                        }
                        _ => dict.open = true,
                    }
                }
            }),
            "pop" => match key(0) {
                Some(key) => self.update_dict(object, scope, |dict| dict.remove(&key)),
                None => false,
            },
            "setdefault" => match (key(0), args.get(1)) {
                (Some(key), Some(value)) => {
                    let (values, at) = (value.values.clone(), value.value_span);
                    self.update_dict(object, scope, |dict| {
                        if !dict.entries.iter().any(|e| e.key == key) {
                            dict.set(key.clone(), values.clone(), at);
                        }
                    })
                }
                _ => false,
            },
            "clear" => self.update_dict(object, scope, |dict| {
                dict.entries.clear();
                dict.open = false;
            }),
            _ => false,
        }
    }

    fn arguments(&mut self, node: Node<'t>, scope: &mut Scope, depth: usize) -> Vec<Argument> {
        if node.kind() == "generator_expression" {
            // `f(x for x in xs)`: one positional argument.
            let values = self.eval(node, scope, depth);
            return vec![Argument {
                kind: ArgKind::Positional,
                values,
                span: Span::of(node),
                value_span: Span::of(node),
            }];
        }
        let mut args = Vec::new();
        for arg in named_children(node) {
            let (kind, value) = match arg.kind() {
                "keyword_argument" => {
                    let (Some(name), Some(value)) = (
                        arg.child_by_field_name("name"),
                        arg.child_by_field_name("value"),
                    ) else {
                        continue;
                    };
                    (ArgKind::Keyword(self.text(name).to_string()), value)
                }
                "list_splat" | "dictionary_splat" => {
                    let Some(inner) = named_children(arg).into_iter().next() else {
                        continue;
                    };
                    let kind = if arg.kind() == "list_splat" {
                        ArgKind::Unpack
                    } else {
                        ArgKind::UnpackMapping
                    };
                    (kind, inner)
                }
                _ => (ArgKind::Positional, arg),
            };
            let mut values = self.eval(value, scope, depth);
            if kind == ArgKind::UnpackMapping {
                for value in values.iter_mut() {
                    if let Value::Dict(dict) = value {
                        **dict = dict.assuming(&scope.truths);
                    }
                }
            }
            args.push(Argument {
                kind,
                values,
                span: Span::of(arg),
                value_span: Span::of(value),
            });
        }
        args
    }

    /// Whether a call of `value` may reach an entry point, so that the call is worth recording.
    fn interesting(&self, value: &Value) -> bool {
        match value {
            Value::Path(path) => {
                path.last()
                    .is_some_and(|last| self.interest.names.contains(last))
                    || self.has_scanned_prefix(path)
            }
            Value::Function(id) => {
                let name = &self.out.functions[*id].name;
                name.contains(FUNCTION) || self.interest.names.contains(name)
            }
            Value::InstanceAttr { .. } => true,
            Value::Partial(partial) => partial.func.iter().any(|v| self.interesting(v)),
            _ => false,
        }
    }

    /// A proper prefix of `path` is a module of the scanned tree (which may re-export the rest).
    fn has_scanned_prefix(&self, path: &[String]) -> bool {
        if self.interest.modules.is_empty() {
            return false;
        }
        let mut prefix = String::new();
        for part in &path[..path.len().saturating_sub(1)] {
            if !prefix.is_empty() {
                prefix.push('.');
            }
            prefix.push_str(part);
            if self.interest.modules.contains(&prefix) {
                return true;
            }
        }
        false
    }
}

fn is_sequence_target(node: Node) -> bool {
    matches!(
        node.kind(),
        "pattern_list" | "tuple_pattern" | "list_pattern" | "expression_list" | "tuple" | "list"
    )
}

fn is_staticmethod_call(node: Node, source: &str) -> bool {
    node.kind() == "call"
        && node
            .child_by_field_name("function")
            .is_some_and(|f| &source[f.byte_range()] == "staticmethod")
}

/// `a . b` (tree-sitter keeps the source's spacing) as `a.b`.
fn normalise_dotted(dotted: &str) -> String {
    dotted
        .split('.')
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(".")
}

fn split_path(dotted: &str) -> Vec<String> {
    dotted.split('.').map(str::to_string).collect()
}

/// The absolute module of `from <module_name> import ...`; `None` when a relative import climbs above
/// the top-level package.
fn imported_module(node: Node, source: &str, module: &ModuleName) -> Option<String> {
    let text = |n: Node| &source[n.byte_range()];
    if node.kind() != "relative_import" {
        return Some(normalise_dotted(text(node)));
    }
    let mut level = 0;
    let mut rest = None;
    for child in named_children(node) {
        match child.kind() {
            "import_prefix" => level = text(child).matches('.').count(),
            "dotted_name" => rest = Some(normalise_dotted(text(child))),
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
