//! The module structure the README's "Which module may import which" list states is the one the
//! code has: every top-level module of `src/` is listed, its `crate::…` uses (outside comments) are
//! exactly the modules listed for it, the list has no cycle, and no product module uses the test
//! machinery.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type Graph = BTreeMap<String, BTreeSet<String>>;

/// Modules that exist to test the product; only they and the command line may use them.
const MACHINERY: [&str; 4] = ["cases", "strategies", "fuzzing", "conform"];
const COMMAND_LINE: &str = "cli";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The README's list: `- \`a\`, \`b\`: c, d` (or `nothing`) per line.
fn declared() -> Graph {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("### Which module may import which\n")
        .nth(1)
        .expect("README has the section")
        .split("\n#")
        .next()
        .unwrap();
    let mut graph = Graph::new();
    for line in section.lines().filter_map(|l| l.strip_prefix("- ")) {
        let (modules, uses) = line.split_once(": ").expect("`- modules: uses`");
        let uses: BTreeSet<String> = match uses.trim() {
            "nothing" => BTreeSet::new(),
            list => list.split(", ").map(|m| m.trim().to_string()).collect(),
        };
        for module in modules.split(", ") {
            let name = module.trim().trim_matches('`').to_string();
            assert!(
                graph.insert(name.clone(), uses.clone()).is_none(),
                "README lists `{name}` twice"
            );
        }
    }
    graph
}

/// The top-level module a file of `src/` belongs to (`None` for the crate roots and binaries).
fn top_level(src: &Path, file: &Path) -> Option<String> {
    let first = file.strip_prefix(src).unwrap().components().next()?;
    let name = first.as_os_str().to_str()?.trim_end_matches(".rs");
    (!["lib", "main", "bin"].contains(&name)).then(|| name.to_string())
}

/// The first path segment of every `crate::` path in `code`, `crate::{a, b::c}` included.
fn crate_uses(code: &str) -> BTreeSet<String> {
    let mut uses = BTreeSet::new();
    for (_, rest) in code
        .match_indices("crate::")
        .map(|(i, _)| code.split_at(i + 7))
    {
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let inner: String = group
                .chars()
                .take_while(|&c| {
                    depth += i32::from(c == '{') - i32::from(c == '}');
                    depth >= 0
                })
                .collect();
            // Top-level items of the group: split at commas outside nested braces.
            let mut level = 0;
            let mut item = String::new();
            for c in inner.chars().chain([',']) {
                match c {
                    '{' => level += 1,
                    '}' => level -= 1,
                    ',' if level == 0 => {
                        uses.insert(identifier(item.trim()));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                item.push(c);
            }
        } else {
            uses.insert(identifier(rest));
        }
    }
    uses.remove("");
    uses
}

fn identifier(text: &str) -> String {
    text.chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// What the code does: each top-level module and the other top-level modules it uses.
fn actual() -> Graph {
    let src = root().join("src");
    let mut graph = Graph::new();
    let mut pending = vec![src.clone()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let Some(module) = top_level(&src, &path) else {
                continue;
            };
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let code: String = fs::read_to_string(&path)
                .unwrap()
                .lines()
                .filter(|l| !l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            let uses = graph.entry(module.clone()).or_default();
            uses.extend(crate_uses(&code).into_iter().filter(|m| *m != module));
        }
    }
    graph
}

#[test]
fn the_readme_list_is_what_the_code_imports() {
    let (declared, actual) = (declared(), actual());
    let mut wrong = Vec::new();
    for (module, uses) in &actual {
        match declared.get(module) {
            None => wrong.push(format!("`{module}` is not in the list (it uses {uses:?})")),
            Some(listed) if listed != uses => wrong.push(format!(
                "`{module}`: the README lists {listed:?}, the code uses {uses:?}"
            )),
            Some(_) => {}
        }
    }
    for module in declared.keys().filter(|m| !actual.contains_key(*m)) {
        wrong.push(format!("`{module}` is listed but is not a module of src/"));
    }
    assert!(
        wrong.is_empty(),
        "README \"Which module may import which\" is out of date:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_list_has_no_cycle() {
    let graph = declared();
    // Kahn's algorithm: repeatedly remove modules whose uses are all removed.
    let mut left = graph.clone();
    while let Some(free) = left
        .iter()
        .find(|(_, uses)| uses.iter().all(|u| !left.contains_key(u)))
        .map(|(m, _)| m.clone())
    {
        left.remove(&free);
    }
    assert!(left.is_empty(), "modules on a cycle: {:?}", left.keys());
}

#[test]
fn no_product_module_uses_the_test_machinery() {
    for (module, uses) in declared() {
        if MACHINERY.contains(&module.as_str()) || module == COMMAND_LINE {
            continue;
        }
        let machinery: Vec<_> = uses
            .iter()
            .filter(|u| MACHINERY.contains(&u.as_str()))
            .collect();
        assert!(machinery.is_empty(), "`{module}` uses {machinery:?}");
    }
}

#[test]
fn crate_paths_are_read_like_the_compiler_reads_them() {
    let uses = crate_uses(
        "use crate::a::b;\nuse crate::{c, d::{e, f}, g::h};\nx = crate::i::j(crate::k);",
    );
    let expected: BTreeSet<String> = ["a", "c", "d", "g", "i", "k"].map(String::from).into();
    assert_eq!(uses, expected);
}
