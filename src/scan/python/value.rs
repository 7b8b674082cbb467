//! What the scan knows about the value of a Python expression: a small set of alternatives (one per
//! path through the branches that assign it), each a literal, a reference to something that may be
//! an entry point, a dict being built for `**` expansion, a tensor cast to a dtype, or unknown.

use super::Span;
use crate::call::PyValue;

/// A function defined in the file, by its index in [`super::FileAnalysis::functions`].
pub type FunctionId = usize;
/// A class defined in the file, by its index in [`super::FileAnalysis::classes`].
pub type ClassId = usize;
/// A call recorded in the file, by its index in [`super::FileAnalysis::calls`].
pub type CallId = usize;

/// More alternatives than this are not worth telling apart: the value becomes unknown.
const MAX_ALTERNATIVES: usize = 8;

/// One possible value of an expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Literal(PyValue),
    /// An absolute dotted path: what `import a.b`, `from m import n` and attribute access on them
    /// name (`sgl_kernel.flash_attn.flash_attn_with_kvcache`, `torch.float8_e4m3fn`).
    Path(Vec<String>),
    /// A function defined in this file.
    Function(FunctionId),
    /// `self.<attr>` inside a method of the class.
    InstanceAttr {
        class: ClassId,
        attr: String,
    },
    /// `functools.partial(func, *args, **keywords)`.
    Partial(Box<Partial>),
    /// A dict literal (or `dict(...)`) and what was put into it since.
    Dict(Box<DictValue>),
    /// `x.to(dtype)`, `x.view(dtype)`, `torch.empty(..., dtype=dtype)`: a tensor of that dtype.
    Cast {
        dtype: Values,
        at: Span,
    },
    /// What a recorded call returned.
    CallResult(CallId),
    /// A parameter of the enclosing function (substituted when the function is a wrapper).
    Param {
        function: FunctionId,
        param: Param,
    },
    Unknown,
}

/// Which parameter of a function a value is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Param {
    /// A named parameter (positional-or-keyword or keyword-only).
    Named(String),
    /// `*args`
    VarPositional,
    /// `**kwargs`
    VarKeyword,
}

/// `functools.partial(func, ...)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Partial {
    pub func: Values,
    pub args: Vec<super::Argument>,
    /// The `partial(...)` call.
    pub at: Span,
}

/// A dict whose keys the scan follows, for `f(**d)`.
#[derive(Clone, Debug, PartialEq)]
pub struct DictValue {
    /// Where the dict was created; alternatives created at the same place are merged.
    pub origin: Span,
    /// The keyword parameter the dict started from (`**kwargs` of a wrapper), if any.
    pub base: Option<(FunctionId, String)>,
    pub entries: Vec<DictEntry>,
    /// Keys removed from `base` (`kwargs.pop("x")`).
    pub removed: Vec<String>,
    /// Keys the scan cannot list may be present (`d.update(other)`, `dict(**x)`).
    pub open: bool,
}

/// One key of a [`DictValue`].
#[derive(Clone, Debug, PartialEq)]
pub struct DictEntry {
    pub key: String,
    pub values: Values,
    /// Set on every path (false when only some branches set it).
    pub certain: bool,
    /// The value expression the key was set to.
    pub at: Span,
    /// Set only where a name has this truth value (`{"a" if flag else "b": x}`), when that is
    /// all that decides it.
    pub when: Option<Truth>,
}

/// A name known to be truthy or falsy: what `if name:` / `if not name:` establish in their arms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truth {
    pub name: String,
    pub truthy: bool,
}

impl DictValue {
    pub fn new(origin: Span) -> DictValue {
        DictValue {
            origin,
            base: None,
            entries: Vec::new(),
            removed: Vec::new(),
            open: false,
        }
    }

    pub fn set(&mut self, key: String, values: Values, at: Span) {
        self.removed.retain(|k| *k != key);
        match self.entries.iter_mut().find(|e| e.key == key) {
            Some(entry) => {
                entry.values = values;
                entry.certain = true;
                entry.at = at;
                entry.when = None;
            }
            None => self.entries.push(DictEntry {
                key,
                values,
                certain: true,
                at,
                when: None,
            }),
        }
    }

    /// `{k: v}` where the key is one of `keys`: with more than one, each is set on some paths only
    /// (a key already present keeps its certainty and may keep its old value).
    pub fn set_one_of(&mut self, keys: Vec<String>, values: Values, at: Span) {
        let several = keys.len() > 1;
        for key in keys {
            match self.entries.iter_mut().find(|e| e.key == key) {
                Some(entry) if several => entry.values.join(&values),
                _ => {
                    self.set(key.clone(), values.clone(), at);
                    if let Some(entry) = self.entries.iter_mut().find(|e| e.key == key) {
                        entry.certain = !several;
                    }
                }
            }
        }
    }

    /// `{(a if name else b): v}`: `a` set where `name` is truthy, `b` where it is falsy. A key
    /// already present joins the value and keeps its certainty, under no condition.
    pub fn set_by_truth(&mut self, name: &str, keys: [String; 2], values: Values, at: Span) {
        for (key, truthy) in keys.into_iter().zip([true, false]) {
            match self.entries.iter_mut().find(|e| e.key == key) {
                Some(entry) => {
                    entry.values.join(&values);
                    entry.when = None;
                }
                None => self.entries.push(DictEntry {
                    key,
                    values: values.clone(),
                    certain: false,
                    at,
                    when: Some(Truth {
                        name: name.to_string(),
                        truthy,
                    }),
                }),
            }
        }
    }

    /// The dict where the names of `known` have those truth values: a key set under a condition
    /// that holds is certain, one set under a condition that fails is absent.
    pub fn assuming(&self, known: &[Truth]) -> DictValue {
        let mut dict = self.clone();
        dict.entries.retain_mut(|entry| {
            let Some(when) = &entry.when else {
                return true;
            };
            match known.iter().find(|k| k.name == when.name) {
                Some(k) if k.truthy == when.truthy => {
                    entry.certain = true;
                    entry.when = None;
                    true
                }
                Some(_) => false,
                None => true,
            }
        });
        dict
    }

    pub fn remove(&mut self, key: &str) {
        self.entries.retain(|e| e.key != key);
        if self.base.is_some() && !self.removed.iter().any(|k| k == key) {
            self.removed.push(key.to_string());
        }
    }

    /// The dict after one branch or the other: keys set on one side only become uncertain.
    fn join(&mut self, other: &DictValue) {
        for entry in &mut self.entries {
            match other.entries.iter().find(|e| e.key == entry.key) {
                Some(theirs) => {
                    entry.values.join(&theirs.values);
                    entry.certain &= theirs.certain;
                    if entry.when != theirs.when {
                        entry.when = None;
                    }
                }
                None => {
                    entry.certain = false;
                    entry.when = None;
                }
            }
        }
        for theirs in &other.entries {
            if !self.entries.iter().any(|e| e.key == theirs.key) {
                self.entries.push(DictEntry {
                    certain: false,
                    when: None,
                    ..theirs.clone()
                });
            }
        }
        self.removed.retain(|k| other.removed.contains(k));
        self.open |= other.open;
    }
}

/// The alternatives an expression may evaluate to; empty means "no binding reached here".
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Values(Vec<Value>);

impl Values {
    pub fn one(value: Value) -> Values {
        Values(vec![value])
    }

    pub fn unknown() -> Values {
        Values::one(Value::Unknown)
    }

    pub fn literal(value: PyValue) -> Values {
        Values::one(Value::Literal(value))
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Value> {
        self.0.iter()
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Value> {
        self.0.iter_mut()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds an alternative (dicts from the same origin merge into one).
    pub fn push(&mut self, value: Value) {
        if self.0.contains(&value) {
            return;
        }
        if let Value::Dict(theirs) = &value
            && let Some(Value::Dict(ours)) = self
                .0
                .iter_mut()
                .find(|v| matches!(v, Value::Dict(d) if d.origin == theirs.origin))
        {
            ours.join(theirs);
            return;
        }
        if self.0.len() >= MAX_ALTERNATIVES {
            self.0.retain(|v| !matches!(v, Value::Unknown));
            self.0.truncate(MAX_ALTERNATIVES - 1);
            self.0.push(Value::Unknown);
            return;
        }
        self.0.push(value);
    }

    pub fn join(&mut self, other: &Values) {
        for value in &other.0 {
            self.push(value.clone());
        }
    }

    /// The single literal, when every alternative is that literal.
    pub fn as_literal(&self) -> Option<&PyValue> {
        match self.0.as_slice() {
            [Value::Literal(v)] => Some(v),
            _ => None,
        }
    }

    /// Every alternative is a literal: their values.
    pub fn literals(&self) -> Option<Vec<&PyValue>> {
        self.0
            .iter()
            .map(|v| match v {
                Value::Literal(l) => Some(l),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .filter(|l| !l.is_empty())
    }

    /// Known to be `None` on every path.
    pub fn is_none(&self) -> bool {
        !self.0.is_empty()
            && self
                .0
                .iter()
                .all(|v| matches!(v, Value::Literal(PyValue::None)))
    }

    /// Python truthiness when every alternative agrees on it.
    pub fn truthy(&self) -> Option<bool> {
        let mut answer = None;
        for value in &self.0 {
            let Value::Literal(l) = value else {
                return None;
            };
            let t = l.truthy()?;
            if answer.is_some_and(|a| a != t) {
                return None;
            }
            answer = Some(t);
        }
        answer
    }

    /// `value.attr` for every alternative.
    pub fn attribute(&self, attr: &str) -> Values {
        let mut out = Values::default();
        for value in &self.0 {
            out.push(match value {
                Value::Path(path) => {
                    let mut path = path.clone();
                    path.push(attr.to_string());
                    Value::Path(path)
                }
                _ => Value::Unknown,
            });
        }
        out
    }
}

impl FromIterator<Value> for Values {
    fn from_iter<I: IntoIterator<Item = Value>>(iter: I) -> Values {
        let mut values = Values::default();
        for value in iter {
            values.push(value);
        }
        values
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: usize) -> Span {
        Span { start, end: start }
    }

    #[test]
    fn dicts_from_one_origin_merge_and_keys_set_on_one_branch_become_uncertain() {
        let mut before = DictValue::new(span(1));
        before.set("sinks".into(), Values::unknown(), span(2));
        let mut branch = before.clone();
        branch.set("ver".into(), Values::literal(PyValue::Int(4)), span(3));
        let mut values = Values::one(Value::Dict(Box::new(before)));
        values.push(Value::Dict(Box::new(branch)));
        let [Value::Dict(merged)] = values.0.as_slice() else {
            panic!("one merged dict: {values:?}");
        };
        let certainty: Vec<(&str, bool)> = merged
            .entries
            .iter()
            .map(|e| (e.key.as_str(), e.certain))
            .collect();
        assert_eq!(certainty, [("sinks", true), ("ver", false)]);
    }

    #[test]
    fn a_conditional_key_is_set_on_some_paths_only() {
        let mut dict = DictValue::new(span(1));
        dict.set("q".into(), Values::unknown(), span(2));
        let page = Values::literal(PyValue::Int(7));
        dict.set_one_of(
            vec!["page_table".into(), "block_table".into()],
            page,
            span(3),
        );
        dict.set_one_of(vec!["q".into(), "qv".into()], Values::unknown(), span(4));
        let certainty: Vec<(&str, bool)> = dict
            .entries
            .iter()
            .map(|e| (e.key.as_str(), e.certain))
            .collect();
        assert_eq!(
            certainty,
            [
                ("q", true),
                ("page_table", false),
                ("block_table", false),
                ("qv", false)
            ]
        );
        dict.set_one_of(vec!["causal".into()], Values::unknown(), span(5));
        assert!(dict.entries.last().is_some_and(|e| e.certain));
    }

    #[test]
    fn too_many_alternatives_become_unknown() {
        let values: Values = (0..20).map(|i| Value::Literal(PyValue::Int(i))).collect();
        assert_eq!(values.0.len(), MAX_ALTERNATIVES);
        assert_eq!(values.0.last(), Some(&Value::Unknown));
        assert!(values.literals().is_none());
    }

    #[test]
    fn truthiness_needs_agreement() {
        let mut values = Values::literal(PyValue::Int(0));
        assert_eq!(values.truthy(), Some(false));
        values.push(Value::Literal(PyValue::Bool(true)));
        assert_eq!(values.truthy(), None);
        assert_eq!(Values::unknown().truthy(), None);
    }
}
