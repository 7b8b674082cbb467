//! A call site as the entry point receives it: through `functools.partial` objects and wrapper
//! functions (the wrapper's parameters replaced by what the call passes), with the `**dict`s and
//! `*tuple`s the scan follows expanded into keyword and positional arguments.

use super::diagnostic::LineIndex;
use super::entry_point::EntryModule;
use super::python::value::{FunctionId, Param, Value, Values};
use super::python::{ArgKind, Argument, CallSite, Params, Span};
use super::resolve::{Resolver, Target};
use crate::call::PyValue;
use std::collections::HashMap;

/// Wrappers of wrappers deeper than this are not followed.
pub(super) const MAX_DEPTH: usize = 8;
/// Steps (entry points, partials, wrappers reached) one call site's walk may take: wrappers that
/// call wrappers many times each would otherwise take time exponential in the nesting. Real
/// wrappers forward one to three calls, a few levels deep (a few dozen steps); adversarial code
/// reaches the cap (the scan fuzz target did) and has the paths past it left out.
pub(super) const MAX_STEPS: usize = 256;

/// Longest source text kept for an argument.
const MAX_TEXT: usize = 120;

/// One way a call site reaches an entry point.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveCall {
    pub entry: EntryModule,
    pub args: Vec<EffectiveArg>,
    /// The partials and wrappers on the way, outermost first.
    pub via: Vec<String>,
}

/// An argument the entry point receives.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveArg {
    pub kind: ArgKind,
    pub values: Values,
    /// The file whose analysis `values` refer to.
    pub values_file: usize,
    /// Where diagnostics about it point, in the call's file: the argument as written, or the callee
    /// when the argument comes from elsewhere (a partial, a wrapper's body).
    pub span: Span,
    /// The value's source text (shortened).
    pub text: String,
    pub origin: Origin,
    /// Passed on every path (false for a key only some branches put into a `**` dict).
    pub certain: bool,
}

/// Where an argument comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Origin {
    /// Written at the call.
    Call,
    /// A key of the dict expanded with `**name`, set at `line` of the call's file.
    DictKey { dict: String, line: usize },
    /// Bound by `functools.partial` at `place` (`path:line`).
    Partial { place: String },
    /// Passed by the wrapper `function` (defined at `place`) to the entry point.
    Wrapper { function: String, place: String },
}

impl Origin {
    /// A note for messages: "(set in `kwargs` at line 12)".
    pub fn note(&self) -> Option<String> {
        match self {
            Origin::Call => None,
            Origin::DictKey { dict, line } => Some(format!("put in `{dict}` at line {line}")),
            Origin::Partial { place } => Some(format!("bound by `functools.partial` at {place}")),
            Origin::Wrapper { function, place } => {
                Some(format!("passed by the wrapper `{function}` at {place}"))
            }
        }
    }
}

/// Expands calls over the files of one scan.
pub struct Expander<'a> {
    pub resolver: &'a Resolver<'a>,
    pub lines: &'a [LineIndex<'a>],
    pub displays: &'a [String],
}

/// Where one call site's walk through partials and wrappers stands.
struct Walk {
    depth: usize,
    /// The wrappers the walk is inside, outermost first.
    wrappers: Vec<(usize, FunctionId)>,
    steps_left: usize,
    /// Whether a path was left at [`MAX_DEPTH`] or [`MAX_STEPS`].
    cut: bool,
}

/// The ways one call site reaches an entry point.
pub struct Reached {
    pub calls: Vec<EffectiveCall>,
    /// Some paths were not followed to their end (too deep, or past the step limit).
    pub incomplete: bool,
}

impl<'a> Expander<'a> {
    /// Every way the call at `file` reaches an entry point (none when it does not) within the
    /// walk's limits.
    pub fn expand(&self, file: usize, call: &CallSite) -> Reached {
        let params = call
            .function
            .map(|f| &self.resolver.file(file).analysis.functions[f].params);
        let args: Vec<EffectiveArg> = call
            .args
            .iter()
            .map(|a| self.written(file, a, params))
            .collect();
        let mut out = Vec::new();
        let at = Place {
            file,
            callee: call.callee_span,
        };
        let mut walk = Walk {
            depth: 0,
            wrappers: Vec::new(),
            steps_left: MAX_STEPS,
            cut: false,
        };
        self.reach(
            file,
            &call.callee,
            args,
            &at,
            Vec::new(),
            &mut walk,
            &mut out,
        );
        Reached {
            calls: out,
            incomplete: walk.cut,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn reach(
        &self,
        file: usize,
        callee: &Values,
        args: Vec<EffectiveArg>,
        at: &Place,
        via: Vec<String>,
        walk: &mut Walk,
        out: &mut Vec<EffectiveCall>,
    ) {
        if walk.depth > MAX_DEPTH {
            walk.cut = true;
            return;
        }
        for target in self.resolver.targets(file, callee) {
            if walk.steps_left == 0 {
                walk.cut = true;
                return;
            }
            walk.steps_left -= 1;
            match target {
                Target::Entry(entry) => {
                    let call = EffectiveCall {
                        entry,
                        args: self.expand_unpacking(args.clone(), at),
                        via: via.clone(),
                    };
                    if !out.contains(&call) {
                        out.push(call);
                    }
                }
                Target::Partial { file: pf, partial } => {
                    let place = self.place(pf, partial.at);
                    let bound: Vec<EffectiveArg> = partial
                        .args
                        .iter()
                        .map(|a| {
                            self.carried(
                                pf,
                                a,
                                at,
                                Origin::Partial {
                                    place: place.clone(),
                                },
                            )
                        })
                        .collect();
                    let mut via = via.clone();
                    via.push(format!("`functools.partial` at {place}"));
                    let merged = merge_partial(bound, args.clone());
                    walk.depth += 1;
                    self.reach(pf, &partial.func, merged, at, via, walk, out);
                    walk.depth -= 1;
                }
                // A wrapper already on the way (recursion) reaches nothing it has not reached.
                Target::Wrapper { file: wf, function }
                    if walk.wrappers.contains(&(wf, function)) => {}
                Target::Wrapper { file: wf, function } => {
                    let analysis = self.resolver.file(wf).analysis;
                    let info = &analysis.functions[function];
                    let place = self.place(wf, info.span);
                    let mut via = via.clone();
                    via.push(format!("wrapper `{}` at {place}", info.name));
                    walk.depth += 1;
                    walk.wrappers.push((wf, function));
                    // Inner calls that become the same call once substituted are walked once.
                    let mut walked: Vec<(&Values, Vec<EffectiveArg>)> = Vec::new();
                    for &inner in &info.calls {
                        let inner = &analysis.calls[inner];
                        if inner.dead || self.resolver.targets(wf, &inner.callee).is_empty() {
                            continue;
                        }
                        let substituted =
                            self.substitute(wf, function, inner, args.clone(), at, &place);
                        let key = (&inner.callee, substituted);
                        if walked.contains(&key) {
                            continue;
                        }
                        self.reach(wf, key.0, key.1.clone(), at, via.clone(), walk, out);
                        walked.push(key);
                    }
                    walk.wrappers.pop();
                    walk.depth -= 1;
                }
            }
        }
    }

    /// An argument as written at the call; parameters of the enclosing function stand for their
    /// defaults (a wrapper forwarding an optional parameter passes nothing unless its caller does).
    fn written(&self, file: usize, arg: &Argument, params: Option<&Params>) -> EffectiveArg {
        EffectiveArg {
            kind: arg.kind.clone(),
            values: params.map_or_else(|| arg.values.clone(), |p| with_defaults(&arg.values, p)),
            values_file: file,
            span: arg.span,
            text: self.text(file, arg.value_span),
            origin: Origin::Call,
            certain: true,
        }
    }

    /// An argument written elsewhere (a partial, a wrapper's body), reported at the call.
    fn carried(&self, file: usize, arg: &Argument, at: &Place, origin: Origin) -> EffectiveArg {
        EffectiveArg {
            kind: arg.kind.clone(),
            values: arg.values.clone(),
            values_file: file,
            span: at.callee,
            text: self.text(file, arg.value_span),
            origin,
            certain: true,
        }
    }

    /// The wrapper's inner call with the wrapper's parameters replaced by what the outer call
    /// binds to them (Python's binding: positionals in order, keywords by name, the rest into
    /// `*args`/`**kwargs`).
    fn substitute(
        &self,
        wf: usize,
        function: FunctionId,
        inner: &CallSite,
        outer: Vec<EffectiveArg>,
        at: &Place,
        place: &str,
    ) -> Vec<EffectiveArg> {
        let params = &self.resolver.file(wf).analysis.functions[function].params;
        let name = &self.resolver.file(wf).analysis.functions[function].name;
        let outer = self.expand_unpacking(outer, at);
        let mut bound: HashMap<&str, EffectiveArg> = HashMap::new();
        let (mut extra_positional, mut extra_keywords, mut opaque) =
            (Vec::new(), Vec::new(), Vec::new());
        let mut positional = params.positional.iter();
        for arg in outer {
            match &arg.kind {
                ArgKind::Positional => match positional.next() {
                    Some((param, _)) => {
                        bound.insert(param, arg);
                    }
                    None => extra_positional.push(arg),
                },
                ArgKind::Keyword(key) => {
                    match params
                        .positional
                        .iter()
                        .chain(&params.keyword_only)
                        .find(|(p, _)| p == key)
                    {
                        Some((param, _)) => {
                            bound.insert(param, arg);
                        }
                        None => extra_keywords.push(arg),
                    }
                }
                ArgKind::Unpack | ArgKind::UnpackMapping => opaque.push(arg),
            }
        }
        let origin = Origin::Wrapper {
            function: name.clone(),
            place: place.to_string(),
        };
        let mut args = Vec::new();
        for arg in &inner.args {
            let forwarded = match arg.values.iter().collect::<Vec<_>>().as_slice() {
                [Value::Param { function: f, param }] if *f == function => Some(param),
                [Value::Dict(dict)] if dict.base.as_ref().is_some_and(|(f, _)| *f == function) => {
                    Some(&Param::VarKeyword)
                }
                _ => None,
            };
            match (&arg.kind, forwarded) {
                (ArgKind::Positional | ArgKind::Keyword(_), Some(Param::Named(param))) => {
                    match bound.get(param.as_str()) {
                        Some(outer) => args.push(EffectiveArg {
                            kind: arg.kind.clone(),
                            ..outer.clone()
                        }),
                        None => {
                            let default = params
                                .positional
                                .iter()
                                .chain(&params.keyword_only)
                                .find(|(p, _)| p == param)
                                .and_then(|(_, d)| d.clone())
                                .unwrap_or_else(Values::unknown);
                            args.push(EffectiveArg {
                                values: default,
                                ..self.carried(wf, arg, at, origin.clone())
                            });
                        }
                    }
                }
                (ArgKind::Unpack, Some(Param::VarPositional)) => {
                    args.append(&mut extra_positional);
                    args.extend(opaque.iter().filter(|a| a.kind == ArgKind::Unpack).cloned());
                }
                (ArgKind::UnpackMapping, Some(Param::VarKeyword)) => {
                    let Some(Value::Dict(dict)) = arg.values.iter().next() else {
                        continue;
                    };
                    for keyword in extra_keywords.drain(..) {
                        let ArgKind::Keyword(key) = &keyword.kind else {
                            continue;
                        };
                        let overridden = dict.entries.iter().any(|e| e.key == *key);
                        if !dict.removed.contains(key) && !overridden {
                            args.push(keyword);
                        }
                    }
                    for entry in &dict.entries {
                        args.push(EffectiveArg {
                            kind: ArgKind::Keyword(entry.key.clone()),
                            values: substitute_values(&entry.values, function, &bound, params),
                            values_file: wf,
                            span: at.callee,
                            text: self.text(wf, entry.at),
                            origin: origin.clone(),
                            certain: entry.certain,
                        });
                    }
                    args.extend(
                        opaque
                            .iter()
                            .filter(|a| a.kind == ArgKind::UnpackMapping)
                            .cloned(),
                    );
                }
                _ => args.push(EffectiveArg {
                    values: substitute_values(&arg.values, function, &bound, params),
                    ..self.carried(wf, arg, at, origin.clone())
                }),
            }
        }
        args
    }

    /// `**d` with a dict the scan follows becomes one keyword per key (uncertain keys where only
    /// some paths set them); `*t` with a literal tuple becomes positionals. What cannot be listed
    /// stays an opaque `*`/`**` argument.
    fn expand_unpacking(&self, args: Vec<EffectiveArg>, at: &Place) -> Vec<EffectiveArg> {
        let mut out = Vec::new();
        for arg in args {
            match arg.kind {
                ArgKind::UnpackMapping => {
                    let alternatives = arg.values.iter().count();
                    let mut opaque = false;
                    for value in arg.values.iter() {
                        let Value::Dict(dict) = value else {
                            opaque = true;
                            continue;
                        };
                        opaque |= dict.open || dict.base.is_some();
                        for entry in &dict.entries {
                            let key = ArgKind::Keyword(entry.key.clone());
                            if out.iter().any(|a: &EffectiveArg| a.kind == key) {
                                continue;
                            }
                            let line = (arg.values_file == at.file)
                                .then(|| self.lines[at.file].location(entry.at.start).line);
                            out.push(EffectiveArg {
                                kind: key,
                                values: entry.values.clone(),
                                values_file: arg.values_file,
                                span: arg.span,
                                text: self.text(arg.values_file, entry.at),
                                origin: match (line, &arg.origin) {
                                    (Some(line), Origin::Call) => Origin::DictKey {
                                        dict: arg.text.clone(),
                                        line,
                                    },
                                    (_, origin) => origin.clone(),
                                },
                                certain: arg.certain && entry.certain && alternatives == 1,
                            });
                        }
                    }
                    if opaque {
                        out.push(EffectiveArg {
                            kind: ArgKind::UnpackMapping,
                            ..arg
                        });
                    }
                }
                ArgKind::Unpack => match arg.values.as_literal().and_then(PyValue::as_sequence) {
                    Some(items) => {
                        for item in items {
                            out.push(EffectiveArg {
                                kind: ArgKind::Positional,
                                values: Values::literal(item.clone()),
                                text: item.to_string(),
                                ..arg.clone()
                            });
                        }
                    }
                    None => out.push(arg),
                },
                _ => out.push(arg),
            }
        }
        out
    }

    fn text(&self, file: usize, span: Span) -> String {
        let source = self.resolver.file(file).source;
        let text = source.get(span.start..span.end).unwrap_or("");
        shorten(text, MAX_TEXT)
    }

    /// `path:line` of a span.
    fn place(&self, file: usize, span: Span) -> String {
        format!(
            "{}:{}",
            self.displays[file],
            self.lines[file].location(span.start).line
        )
    }
}

/// The call being expanded: its file and callee, where carried arguments are reported.
struct Place {
    file: usize,
    callee: Span,
}

/// `functools.partial`: the bound positionals first, then the call's; keywords of the call replace
/// the bound ones of the same name.
fn merge_partial(bound: Vec<EffectiveArg>, call: Vec<EffectiveArg>) -> Vec<EffectiveArg> {
    let (bound_positional, bound_other): (Vec<_>, Vec<_>) = bound
        .into_iter()
        .partition(|a| a.kind == ArgKind::Positional);
    let (call_positional, call_other): (Vec<_>, Vec<_>) = call
        .into_iter()
        .partition(|a| a.kind == ArgKind::Positional);
    let mut merged = bound_positional;
    merged.extend(call_positional);
    for arg in bound_other {
        match call_other
            .iter()
            .find(|c| c.kind == arg.kind && matches!(c.kind, ArgKind::Keyword(_)))
        {
            Some(replacement) => merged.push(replacement.clone()),
            None => merged.push(arg),
        }
    }
    for arg in call_other {
        if !merged
            .iter()
            .any(|m| m.kind == arg.kind && matches!(m.kind, ArgKind::Keyword(_)))
        {
            merged.push(arg);
        }
    }
    merged
}

/// `values` with every parameter of the enclosing function replaced by its default (unknown when
/// it has none).
fn with_defaults(values: &Values, params: &Params) -> Values {
    let mut out = Values::default();
    for value in values.iter() {
        match value {
            Value::Param {
                param: Param::Named(name),
                ..
            } => match params
                .positional
                .iter()
                .chain(&params.keyword_only)
                .find(|(p, _)| p == name)
                .and_then(|(_, d)| d.as_ref())
            {
                Some(default) => out.join(default),
                None => out.push(Value::Unknown),
            },
            Value::Param { .. } => out.push(Value::Unknown),
            other => out.push(other.clone()),
        }
    }
    out
}

/// `values` with the wrapper's parameters replaced by what the outer call binds to them.
fn substitute_values(
    values: &Values,
    function: FunctionId,
    bound: &HashMap<&str, EffectiveArg>,
    params: &Params,
) -> Values {
    let mut out = Values::default();
    for value in values.iter() {
        match value {
            Value::Param {
                function: f,
                param: Param::Named(name),
            } if *f == function => match bound.get(name.as_str()) {
                Some(arg) => out.join(&arg.values),
                None => out.join(&with_defaults(&Values::one(value.clone()), params)),
            },
            other => out.push(other.clone()),
        }
    }
    out
}

/// At most `max` characters, with `…` where text was cut; on one line. Reads at most `4 * max`
/// bytes of `text`, so that shortening is cheap whatever the text's length.
pub fn shorten(text: &str, max: usize) -> String {
    let mut end = text.len().min(4 * max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let one_line: String = text[..end].split_whitespace().collect::<Vec<_>>().join(" ");
    if end == text.len() && one_line.chars().count() <= max {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(max - 1).collect();
    cut.push('…');
    cut
}
