use super::*;
use crate::scan::entry_point::EntryPoint;
use crate::scan::python::{Interest, PythonParser};

fn module(name: &str, is_package: bool) -> ModuleName {
    ModuleName {
        name: name.into(),
        is_package,
    }
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

/// Parses `sources` as one tree and answers, for each call of the last file, the stacks its
/// targets' entry points may be (wrappers and partials as `wrapper`/`partial`).
fn targets_of_last_file(sources: &[(ModuleName, &str)]) -> Vec<Vec<String>> {
    let interest = Interest {
        names: ["flash_attn_with_kvcache", "attention", "exported", "loop"]
            .map(String::from)
            .into(),
        modules: sources.iter().map(|(m, _)| m.name.clone()).collect(),
    };
    let mut parser = PythonParser::new();
    let analyses: Vec<FileAnalysis> = sources
        .iter()
        .map(|(m, s)| parser.parse(s, m, &interest).unwrap())
        .collect();
    let files: Vec<ScannedFile> = sources
        .iter()
        .zip(&analyses)
        .map(|((module, source), analysis)| ScannedFile {
            module,
            analysis,
            source,
            is_entry: EntryModule::of_module(&module.name),
        })
        .collect();
    let resolver = Resolver::new(&files);
    let last = files.len() - 1;
    files[last]
        .analysis
        .calls
        .iter()
        .map(|call| {
            resolver
                .targets(last, &call.callee)
                .into_iter()
                .map(|t| match t {
                    Target::Entry(e) => e
                        .candidates
                        .iter()
                        .map(|s| s.name())
                        .collect::<Vec<_>>()
                        .join("|"),
                    Target::Wrapper { .. } => "wrapper".into(),
                    Target::Partial { .. } => "partial".into(),
                })
                .collect()
        })
        .collect()
}

#[test]
fn resolves_through_aliases_re_exports_and_stars() {
    let targets = targets_of_last_file(&[
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
             from pkg.attn import fa as loop\nloop = loop\n\
             exported()\npkg.exported()\npkg.flash_attn_with_kvcache()\n\
             fi.flash_attn_with_kvcache()\nloop()\nfi.other()\nunbound.flash_attn_with_kvcache()\n",
        ),
    ]);
    assert_eq!(
        targets,
        [
            vec!["mate"],
            vec!["mate"],
            vec!["sgl-kernel"],
            vec!["fa3|mate-fa3-wrapper"],
            vec!["mate"],
            vec![],
        ]
    );
}

#[test]
fn wrappers_partials_attributes_and_the_musa_backends_own_wrapper() {
    let targets = targets_of_last_file(&[
        (
            module(
                "sglang.srt.hardware_backend.musa.attention.flashattention_backend",
                false,
            ),
            "from flash_attn_interface import flash_attn_with_kvcache as mate_fa\n\
             def flash_attn_with_kvcache(q, k_cache, v_cache, ver=3):\n    \
             return mate_fa(q, k_cache, v_cache)\n\
             class Backend:\n    def forward(self, q, k, v):\n        \
             return flash_attn_with_kvcache(q, k, v)\n",
        ),
        (
            module("app", false),
            "import functools\nfrom flash_attn import flash_attn_with_kvcache as fa2\n\
             def flash_attn_with_kvcache(*args, **kwargs):\n    return fa2(*args, **kwargs)\n\
             def not_a_wrapper(*args):\n    return fa2(*args)\n\
             class Layer:\n    def __init__(self):\n        \
             self.attn = functools.partial(fa2, causal=True)\n    \
             def forward(self, q):\n        self.attn(q)\n        flash_attn_with_kvcache(q)\n        \
             not_a_wrapper(q)\n",
        ),
    ]);
    // The app file's calls: fa2 inside the wrapper, fa2 inside `not_a_wrapper`, the partial
    // through `self`, the wrapper; `not_a_wrapper(q)` is not even recorded (not named like the
    // entry point).
    assert_eq!(
        targets,
        [
            vec!["fa2|mate-fa3-wrapper"],
            vec!["fa2|mate-fa3-wrapper"],
            vec!["partial"],
            vec!["wrapper"],
        ]
    );
    let musa = targets_of_last_file(&[(
        module(
            "sglang.srt.hardware_backend.musa.attention.flashattention_backend",
            false,
        ),
        "from flash_attn_interface import flash_attn_with_kvcache as mate_fa\n\
         def flash_attn_with_kvcache(q, k_cache, v_cache, ver=3):\n    \
         return mate_fa(q, k_cache, v_cache)\n\
         class Backend:\n    def forward(self, q, k, v):\n        \
         return flash_attn_with_kvcache(q, k, v)\n",
    )]);
    assert_eq!(musa, [vec!["fa3|mate-fa3-wrapper"], vec!["sglang-musa"]]);
    assert_eq!(EntryPoint::SglangMusa.name(), "sglang-musa");
}

#[test]
fn import_cycles_terminate() {
    let targets = targets_of_last_file(&[
        (module("a", false), "from b import f\n"),
        (module("b", false), "from a import f\nf()\n"),
    ]);
    assert_eq!(targets, [Vec::<String>::new()]);
}
