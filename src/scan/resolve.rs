//! What a called name refers to, across the scanned tree: imports, aliases, star imports and
//! re-exports by other modules, `self.<attr>` assignments, local wrapper functions and
//! `functools.partial` objects, down to an entry point of [`super::entry_point`].

use super::entry_point::{EntryModule, FUNCTION};
use super::python::value::{FunctionId, Partial, Value, Values};
use super::python::{FileAnalysis, ModuleName};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Chains of references longer than this are not followed.
const MAX_DEPTH: usize = 32;

/// A parsed file as the resolver sees it.
pub struct ScannedFile<'a> {
    pub module: &'a ModuleName,
    pub analysis: &'a FileAnalysis,
    pub source: &'a str,
    /// The entry point this file itself is (e.g. SGLang's MUSA backend module, whose
    /// `flash_attn_with_kvcache` is the MUSA wrapper).
    pub is_entry: Option<EntryModule>,
}

/// What a callee leads to.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    Entry(EntryModule),
    /// A function named like the entry point whose body calls one.
    Wrapper {
        file: usize,
        function: FunctionId,
    },
    Partial {
        file: usize,
        partial: Partial,
    },
}

/// A value that no reference leads further from.
enum Terminal {
    Path(Vec<String>),
    Function(usize, FunctionId),
    Partial(usize, Partial),
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum Visit {
    Global(usize, String),
    Attr(usize, usize, String),
    Wrapper(usize, FunctionId),
}

#[derive(Default)]
struct Walk {
    seen: HashSet<Visit>,
    depth: usize,
}

/// The parsed files of a scan, indexed by module name.
pub struct Resolver<'a> {
    files: &'a [ScannedFile<'a>],
    by_module: HashMap<&'a str, Vec<usize>>,
    wrappers: RefCell<HashMap<(usize, FunctionId), bool>>,
}

impl<'a> Resolver<'a> {
    pub fn new(files: &'a [ScannedFile<'a>]) -> Resolver<'a> {
        let mut by_module: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, file) in files.iter().enumerate() {
            by_module
                .entry(file.module.name.as_str())
                .or_default()
                .push(i);
        }
        Resolver {
            files,
            by_module,
            wrappers: RefCell::default(),
        }
    }

    /// Whether `module` is a module of the scanned tree.
    pub fn is_scanned_module(&self, module: &str) -> bool {
        self.by_module.contains_key(module)
    }

    pub fn file(&self, index: usize) -> &'a ScannedFile<'a> {
        &self.files[index]
    }

    /// Where a call of `callee`, written in file `file`, may lead.
    pub fn targets(&self, file: usize, callee: &Values) -> Vec<Target> {
        self.targets_in(file, callee, &mut Walk::default())
    }

    fn targets_in(&self, file: usize, callee: &Values, walk: &mut Walk) -> Vec<Target> {
        let mut targets = Vec::new();
        for terminal in self.chase(file, callee, walk) {
            let target = match terminal {
                Terminal::Path(path) => entry_of_path(&path).map(Target::Entry),
                Terminal::Function(file, function) => self
                    .is_wrapper_in(file, function, walk)
                    .then_some(Target::Wrapper { file, function }),
                Terminal::Partial(file, partial) => Some(Target::Partial { file, partial }),
            };
            if let Some(target) = target
                && !targets.contains(&target)
            {
                targets.push(target);
            }
        }
        targets
    }

    /// Whether `values` (written in file `file`) is a torch fp8 dtype on some path.
    pub fn is_fp8_dtype(&self, file: usize, values: &Values) -> bool {
        self.chase(file, values, &mut Walk::default())
            .iter()
            .any(|t| matches!(t, Terminal::Path(p) if is_fp8_dtype_path(p)))
    }

    /// Module-level names of file `file` that lead to an entry point: aliases other files may
    /// import.
    pub fn aliases(&self, file: usize) -> Vec<&'a str> {
        self.files[file]
            .analysis
            .globals
            .iter()
            .filter(|(_, values)| !self.targets(file, values).is_empty())
            .map(|(name, _)| name.as_str())
            .collect()
    }

    /// Whether the function is a wrapper: named like the entry point, with a call in its body that
    /// leads to one.
    fn is_wrapper_in(&self, file: usize, function: FunctionId, walk: &mut Walk) -> bool {
        if let Some(&known) = self.wrappers.borrow().get(&(file, function)) {
            return known;
        }
        let analysis = self.files[file].analysis;
        let info = &analysis.functions[function];
        if !info.name.contains(FUNCTION) || !walk.seen.insert(Visit::Wrapper(file, function)) {
            return false;
        }
        let wraps = info.calls.iter().any(|&call| {
            !self
                .targets_in(file, &analysis.calls[call].callee, walk)
                .is_empty()
        });
        self.wrappers.borrow_mut().insert((file, function), wraps);
        wraps
    }

    /// Follows references (globals of scanned modules, instance attributes) to the values they end
    /// at.
    fn chase(&self, file: usize, values: &Values, walk: &mut Walk) -> Vec<Terminal> {
        let mut out = Vec::new();
        if walk.depth > MAX_DEPTH {
            return out;
        }
        walk.depth += 1;
        for value in values.iter() {
            self.chase_value(file, value, walk, &mut out);
        }
        walk.depth -= 1;
        out
    }

    fn chase_value(&self, file: usize, value: &Value, walk: &mut Walk, out: &mut Vec<Terminal>) {
        let analysis = self.files[file].analysis;
        match value {
            Value::Path(path) => self.chase_path(path, walk, out),
            Value::Function(function) => {
                let is_entry = self.files[file].is_entry;
                match is_entry {
                    // The file is the entry point's module: its own `def` is the entry point.
                    Some(entry) if analysis.functions[*function].name == FUNCTION => {
                        let mut path: Vec<String> =
                            entry.module.split('.').map(str::to_string).collect();
                        path.push(FUNCTION.to_string());
                        out.push(Terminal::Path(path));
                    }
                    _ => out.push(Terminal::Function(file, *function)),
                }
            }
            Value::InstanceAttr { class, attr } => {
                if walk.seen.insert(Visit::Attr(file, *class, attr.clone()))
                    && let Some(values) = analysis.classes[*class].instance_attrs.get(attr)
                {
                    out.extend(self.chase(file, values, walk));
                }
            }
            Value::Partial(partial) => out.push(Terminal::Partial(file, (**partial).clone())),
            _ => {}
        }
    }

    fn chase_path(&self, path: &[String], walk: &mut Walk, out: &mut Vec<Terminal>) {
        if entry_of_path(path).is_some() {
            out.push(Terminal::Path(path.to_vec()));
            return;
        }
        // The longest prefix that is a scanned module exports the rest.
        for split in (1..path.len()).rev() {
            let module = path[..split].join(".");
            if let Some(files) = self.by_module.get(module.as_str()) {
                for &file in files {
                    self.chase_global(file, &path[split], &path[split + 1..], walk, out);
                }
                return;
            }
        }
        out.push(Terminal::Path(path.to_vec()));
    }

    fn chase_global(
        &self,
        file: usize,
        name: &str,
        rest: &[String],
        walk: &mut Walk,
        out: &mut Vec<Terminal>,
    ) {
        if !walk
            .seen
            .insert(Visit::Global(file, format!("{name}.{}", rest.join("."))))
        {
            return;
        }
        let analysis = self.files[file].analysis;
        match analysis.globals.get(name) {
            Some(values) => {
                let values = rest
                    .iter()
                    .fold(values.clone(), |v, attr| v.attribute(attr));
                out.extend(self.chase(file, &values, walk));
            }
            None => {
                for module in &analysis.star_imports {
                    let mut path: Vec<String> = module.split('.').map(str::to_string).collect();
                    path.push(name.to_string());
                    path.extend_from_slice(rest);
                    walk.depth += 1;
                    if walk.depth <= MAX_DEPTH {
                        self.chase_path(&path, walk, out);
                    }
                    walk.depth -= 1;
                }
            }
        }
    }
}

/// The entry point a dotted path names (`<known module>.flash_attn_with_kvcache`).
fn entry_of_path(path: &[String]) -> Option<EntryModule> {
    match path {
        [module @ .., last] if last == FUNCTION && !module.is_empty() => {
            EntryModule::of_module(&module.join("."))
        }
        _ => None,
    }
}

/// torch's fp8 dtypes (`torch.float8_e4m3fn`, `torch.float8_e5m2`, their `fnuz` variants, ...).
fn is_fp8_dtype_path(path: &[String]) -> bool {
    matches!(path, [torch, dtype] if torch == "torch" && dtype.starts_with("float8_"))
}

/// Python's module name for a file: the directories above it that hold an `__init__.py` are its
/// packages. `has_init` answers (and may cache) whether a directory holds one.
pub fn module_name(path: &Path, has_init: &mut impl FnMut(&Path) -> bool) -> ModuleName {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let is_package = stem == "__init__";
    let mut parts = if is_package { vec![] } else { vec![stem] };
    let mut dir = path.parent().map(Path::to_path_buf);
    while let Some(d) = dir {
        if d.as_os_str().is_empty() || !has_init(&d) {
            break;
        }
        match d.file_name() {
            Some(name) => parts.push(name.to_string_lossy().into_owned()),
            None => break,
        }
        dir = d.parent().map(Path::to_path_buf);
    }
    if is_package {
        parts.reverse();
    } else {
        let stem = parts.remove(0);
        parts.reverse();
        parts.push(stem);
    }
    ModuleName {
        name: parts.join("."),
        is_package,
    }
}

/// A filesystem `__init__.py` lookup with a cache per directory.
#[derive(Default)]
pub struct InitCache(HashMap<PathBuf, bool>);

impl InitCache {
    pub fn has_init(&mut self, dir: &Path) -> bool {
        *self
            .0
            .entry(dir.to_path_buf())
            .or_insert_with(|| dir.join("__init__.py").is_file())
    }
}

#[cfg(test)]
mod tests;
