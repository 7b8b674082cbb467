//! Which stack a called name refers to: through imports, aliases, star imports and re-exports by
//! other modules of the scanned tree.

use super::entry_point::{EntryPoint, FUNCTION};
use super::python::{Binding, ModuleName, ParsedFile};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Chains of re-exports longer than this are not followed (`a = a.b` would grow forever).
const MAX_DEPTH: usize = 32;

/// What one resolution has visited: a (file, path) pair is expanded once, so alias cycles end.
#[derive(Default)]
struct Walk {
    seen: HashSet<(usize, Vec<String>)>,
    stacks: BTreeSet<EntryPoint>,
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

/// The parsed files of a scan, indexed by module name.
pub struct Resolver<'a> {
    files: &'a [(ModuleName, &'a ParsedFile)],
    by_module: HashMap<&'a str, Vec<usize>>,
}

impl<'a> Resolver<'a> {
    pub fn new(files: &'a [(ModuleName, &'a ParsedFile)]) -> Resolver<'a> {
        let mut by_module: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, (module, _)) in files.iter().enumerate() {
            by_module.entry(module.name.as_str()).or_default().push(i);
        }
        Resolver { files, by_module }
    }

    /// The stacks whose `flash_attn_with_kvcache` the dotted `path`, written in file `file`, names.
    pub fn resolve(&self, file: usize, path: &[String]) -> BTreeSet<EntryPoint> {
        let mut walk = Walk::default();
        self.resolve_local(file, path, 0, &mut walk);
        walk.stacks
    }

    /// Names bound in file `file` that refer to a stack's function (aliases that other files may
    /// import).
    pub fn function_aliases(&self, file: usize) -> Vec<&'a str> {
        let (_, parsed) = self.files[file];
        parsed
            .bindings
            .keys()
            .filter(|name| !self.resolve(file, &[name.to_string()]).is_empty())
            .map(String::as_str)
            .collect()
    }

    fn resolve_local(&self, file: usize, path: &[String], depth: usize, out: &mut Walk) {
        if depth > MAX_DEPTH || path.is_empty() || !out.seen.insert((file, path.to_vec())) {
            return;
        }
        let (_, parsed) = self.files[file];
        let (name, rest) = (&path[0], &path[1..]);
        match parsed.bindings.get(name) {
            Some(bindings) => {
                for binding in bindings {
                    match binding {
                        Binding::Absolute(target) => {
                            let mut full: Vec<String> =
                                target.split('.').map(str::to_string).collect();
                            full.extend_from_slice(rest);
                            self.resolve_absolute(&full, depth + 1, out);
                        }
                        Binding::Alias(target) => {
                            let mut full = target.clone();
                            full.extend_from_slice(rest);
                            self.resolve_local(file, &full, depth + 1, out);
                        }
                    }
                }
            }
            None => {
                for module in &parsed.star_imports {
                    let mut full: Vec<String> = module.split('.').map(str::to_string).collect();
                    full.extend_from_slice(path);
                    self.resolve_absolute(&full, depth + 1, out);
                }
            }
        }
    }

    fn resolve_absolute(&self, path: &[String], depth: usize, out: &mut Walk) {
        if depth > MAX_DEPTH {
            return;
        }
        if let [module @ .., last] = path
            && last == FUNCTION
            && let Some(stack) = EntryPoint::from_module(&module.join("."))
        {
            out.stacks.insert(stack);
            return;
        }
        // The longest prefix that is a scanned module exports the rest.
        for split in (1..path.len()).rev() {
            if let Some(files) = self.by_module.get(path[..split].join(".").as_str()) {
                for &file in files {
                    self.resolve_local(file, &path[split..], depth + 1, out);
                }
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::python::PythonParser;

    fn module(name: &str, is_package: bool) -> ModuleName {
        ModuleName {
            name: name.into(),
            is_package,
        }
    }

    fn path(dotted: &str) -> Vec<String> {
        dotted.split('.').map(str::to_string).collect()
    }

    #[test]
    fn module_names_follow_init_files() {
        let packages = [Path::new("root/pkg"), Path::new("root/pkg/sub")];
        let mut has_init = |d: &Path| packages.contains(&d);
        assert_eq!(
            module_name(Path::new("root/pkg/sub/m.py"), &mut has_init),
            module("pkg.sub.m", false)
        );
        assert_eq!(
            module_name(Path::new("root/pkg/__init__.py"), &mut has_init),
            module("pkg", true)
        );
        assert_eq!(
            module_name(Path::new("root/script.py"), &mut has_init),
            module("script", false)
        );
    }

    #[test]
    fn resolves_through_aliases_re_exports_and_stars() {
        let mut parser = PythonParser::new();
        let sources = [
            (
                module("pkg", true),
                "from .attn import fa as exported\nfrom sgl_kernel.flash_attn import *\n",
            ),
            (
                module("pkg.attn", false),
                "import mate\nfa = mate.flash_attn_with_kvcache\n",
            ),
            (
                module("app", false),
                "import pkg\nfrom pkg import exported\nimport flash_attn_interface as fi\n\
                 from pkg.attn import fa as loop\nloop = loop\n",
            ),
        ];
        let parsed: Vec<ParsedFile> = sources
            .iter()
            .map(|(m, s)| parser.parse(s, m).unwrap())
            .collect();
        let files: Vec<(ModuleName, &ParsedFile)> = sources
            .iter()
            .zip(&parsed)
            .map(|((m, _), p)| (m.clone(), p))
            .collect();
        let resolver = Resolver::new(&files);
        let app = 2;
        let stacks = |dotted: &str| resolver.resolve(app, &path(dotted));
        assert_eq!(stacks("exported"), BTreeSet::from([EntryPoint::Mate]));
        assert_eq!(stacks("pkg.exported"), BTreeSet::from([EntryPoint::Mate]));
        assert_eq!(
            stacks("pkg.flash_attn_with_kvcache"),
            BTreeSet::from([EntryPoint::SglKernel])
        );
        assert_eq!(
            stacks("fi.flash_attn_with_kvcache"),
            BTreeSet::from([EntryPoint::Fa3])
        );
        assert_eq!(stacks("loop"), BTreeSet::from([EntryPoint::Mate]));
        assert!(stacks("fi.other").is_empty());
        assert!(stacks("unbound").is_empty());
        let mut aliases = resolver.function_aliases(app);
        aliases.sort();
        assert_eq!(aliases, ["exported", "loop"]);
    }
}
