use super::value::{Value, Values};
use super::*;
use crate::call::PyValue;

fn module(name: &str, is_package: bool) -> ModuleName {
    ModuleName {
        name: name.into(),
        is_package,
    }
}

fn interest() -> Interest {
    Interest {
        names: HashSet::from(["flash_attn_with_kvcache".to_string(), "f".to_string()]),
        modules: HashSet::new(),
    }
}

fn parse(source: &str) -> FileAnalysis {
    PythonParser::new()
        .parse(source, &module("pkg.sub.mod", false), &interest())
        .unwrap()
}

fn path(dotted: &str) -> Value {
    Value::Path(dotted.split('.').map(str::to_string).collect())
}

fn global(file: &FileAnalysis, name: &str) -> Vec<Value> {
    file.globals[name].iter().cloned().collect()
}

/// The values of argument `i` of call `call`.
fn arg(file: &FileAnalysis, call: usize, i: usize) -> Values {
    file.calls[call].args[i].values.clone()
}

#[test]
fn import_forms_bind_absolute_paths() {
    let file = parse(
        "import a.b\nimport c.d as e\nfrom f.g import h, i as j\nfrom . import k\n\
         from ..up import m\nfrom .side import *\nn = e.x\ndef p(): pass\n",
    );
    assert_eq!(global(&file, "a"), [path("a")]);
    assert_eq!(global(&file, "e"), [path("c.d")]);
    assert_eq!(global(&file, "h"), [path("f.g.h")]);
    assert_eq!(global(&file, "j"), [path("f.g.i")]);
    assert_eq!(global(&file, "k"), [path("pkg.sub.k")]);
    assert_eq!(global(&file, "m"), [path("pkg.up.m")]);
    assert_eq!(global(&file, "n"), [path("c.d.x")]);
    assert_eq!(global(&file, "p"), [Value::Function(0)]);
    assert_eq!(file.star_imports, ["pkg.sub.side"]);
}

#[test]
fn relative_imports_in_packages_and_above_the_top() {
    let mut parser = PythonParser::new();
    let init = parser
        .parse("from .attn import f\n", &module("pkg", true), &interest())
        .unwrap();
    assert_eq!(global(&init, "f"), [path("pkg.attn.f")]);
    let top = parser
        .parse("from ..x import f\n", &module("top", false), &interest())
        .unwrap();
    assert!(top.globals.is_empty());
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
        .map(|a| a.values.as_literal().cloned())
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
}

#[test]
fn only_calls_that_may_reach_an_entry_point_are_kept() {
    let file = parse("import m\nm.f()\nm.g()\nprint(1)\nobj.flash_attn_with_kvcache()\n");
    let callees: Vec<Option<&str>> = file
        .calls
        .iter()
        .map(|c| c.callee_name.as_deref())
        .collect();
    // `m.f` has an interesting name; `obj.flash_attn_with_kvcache` is kept to be counted as
    // unresolved.
    assert_eq!(callees, [Some("f"), Some("flash_attn_with_kvcache")]);
}

#[test]
fn a_local_import_binds_in_its_function_only() {
    // SGLang's backends: the module-level name is the dispatcher; `__init__` imports sgl-kernel's
    // function locally, which must not leak into the other methods.
    let file = parse(
        "from sglang.jit_kernel.flash_attention import flash_attn_with_kvcache\n\
         class Backend:\n    def __init__(self):\n        \
         from sgl_kernel.flash_attn import flash_attn_with_kvcache\n        \
         self.probe = flash_attn_with_kvcache\n    \
         def forward(self, q):\n        return flash_attn_with_kvcache(q)\n",
    );
    assert_eq!(
        file.calls[0].callee.iter().cloned().collect::<Vec<_>>(),
        [path(
            "sglang.jit_kernel.flash_attention.flash_attn_with_kvcache"
        )]
    );
    assert_eq!(
        file.classes[0].instance_attrs["probe"]
            .iter()
            .cloned()
            .collect::<Vec<_>>(),
        [path("sgl_kernel.flash_attn.flash_attn_with_kvcache")]
    );
}

#[test]
fn assignments_flow_through_branches_and_dead_branches_bind_nothing() {
    let file = parse(
        "import m\nUSE_FP8 = False\ndef g(c, s):\n    \
         k_descale, v_descale = None, None\n    \
         if USE_FP8:\n        k_descale = s\n    \
         ver = 3\n    if c:\n        ver = 4\n    \
         m.f(k_descale=k_descale, v_descale=v_descale, ver=ver)\n    \
         if False:\n        m.f()\n",
    );
    assert!(arg(&file, 0, 0).is_none(), "{:?}", arg(&file, 0, 0));
    assert!(arg(&file, 0, 1).is_none());
    let ver = arg(&file, 0, 2);
    assert_eq!(
        ver.literals().unwrap(),
        [&PyValue::Int(3), &PyValue::Int(4)]
    );
    assert!(!file.calls[0].dead);
    assert!(file.calls[1].dead);
}

#[test]
fn asserts_narrow_names_and_self_attributes_on_every_path_that_made_them() {
    let file = parse(
        "import m\nclass B:\n    def g(self, v, c):\n        \
         assert self.ver in [3], 'FA3 only'\n        assert v == 4\n        \
         kwargs = {}\n        if self.ver != 3:\n            kwargs['ver'] = self.ver\n        \
         m.f(self.ver, v, **kwargs)\n        \
         if c:\n            assert self.mode in (1, 2)\n        \
         self.ver = c\n        m.f(self.ver, self.mode)\n",
    );
    assert_eq!(arg(&file, 0, 0).literals().unwrap(), [&PyValue::Int(3)]);
    assert_eq!(arg(&file, 0, 1).literals().unwrap(), [&PyValue::Int(4)]);
    let kwargs = arg(&file, 0, 2);
    let [Value::Dict(dict)] = &kwargs.iter().collect::<Vec<_>>()[..] else {
        panic!("{kwargs:?}");
    };
    assert!(
        dict.entries.is_empty(),
        "the `ver` branch is dead: {dict:?}"
    );
    // Reassigned, and narrowed on one branch only: back to what the class knows.
    assert!(matches!(
        arg(&file, 1, 0).iter().next(),
        Some(Value::InstanceAttr { .. })
    ));
    assert!(matches!(
        arg(&file, 1, 1).iter().next(),
        Some(Value::InstanceAttr { .. })
    ));
}

#[test]
fn dicts_built_for_keyword_expansion_keep_their_keys() {
    let file = parse(
        "import m\ndef g(self, sinks):\n    kwargs = {}\n    \
         if self.ver != 3:\n        kwargs[\"ver\"] = self.ver\n    \
         kwargs.update(causal=True)\n    kwargs.pop(\"missing\", None)\n    \
         m.f(q, **kwargs)\n",
    );
    let values = arg(&file, 0, 1);
    let [Value::Dict(dict)] = &values.iter().collect::<Vec<_>>()[..] else {
        panic!("{values:?}");
    };
    let keys: Vec<(&str, bool)> = dict
        .entries
        .iter()
        .map(|e| (e.key.as_str(), e.certain))
        .collect();
    assert_eq!(keys, [("ver", false), ("causal", true)]);
    assert!(!dict.open);
}

#[test]
fn results_unpacked_directly_or_through_a_name_are_recorded() {
    let file = parse(
        "import m\ndef g(q):\n    o, lse = m.f(q)\n    result = m.f(q)\n    \
         if q:\n        o, lse, *rest = result\n    return m.f(q)\n",
    );
    let unpacked: Vec<Option<(usize, bool)>> = file
        .calls
        .iter()
        .map(|c| c.unpacked.map(|u| (u.targets, u.starred)))
        .collect();
    assert_eq!(unpacked, [Some((2, false)), Some((2, true)), None]);
}

#[test]
fn self_attributes_partials_and_fp8_casts() {
    let file = parse(
        "import functools, torch\nfrom m import flash_attn_with_kvcache as fa\n\
         FP8 = torch.float8_e4m3fn\nclass A:\n    def __init__(self):\n        \
         self.attn = functools.partial(fa, causal=True)\n    \
         def run(self, q, k):\n        self.attn(q.to(FP8), k.view(torch.bfloat16))\n",
    );
    let call = &file.calls[0];
    assert!(matches!(
        call.callee.iter().next(),
        Some(Value::InstanceAttr { class: 0, attr }) if attr == "attn"
    ));
    let [Value::Partial(partial)] = &file.classes[0].instance_attrs["attn"]
        .iter()
        .collect::<Vec<_>>()[..]
    else {
        panic!("a partial");
    };
    assert_eq!(
        partial.func.iter().next(),
        Some(&path("m.flash_attn_with_kvcache"))
    );
    assert_eq!(partial.args[0].kind, ArgKind::Keyword("causal".into()));
    let Some(Value::Cast { dtype, .. }) = call.args[0].values.iter().next() else {
        panic!("a cast: {:?}", call.args[0].values);
    };
    assert_eq!(dtype.iter().next(), Some(&path("torch.float8_e4m3fn")));
}

#[test]
fn wrapper_parameters_and_kwargs_are_kept_symbolic() {
    let file = parse(
        "from m import flash_attn_with_kvcache as _fa\n\
         def flash_attn_with_kvcache(q, *args, causal=False, **kwargs):\n    \
         kwargs.pop(\"sinks\", None)\n    return _fa(q, *args, causal=causal, **kwargs)\n",
    );
    let info = &file.functions[0];
    assert_eq!(info.params.positional[0].0, "q");
    assert_eq!(info.params.var_positional.as_deref(), Some("args"));
    assert_eq!(info.params.keyword_only[0].0, "causal");
    assert_eq!(info.params.var_keyword.as_deref(), Some("kwargs"));
    assert_eq!(info.calls, [0]);
    let kwargs = arg(&file, 0, 3);
    let Some(Value::Dict(dict)) = kwargs.iter().next() else {
        panic!("{kwargs:?}");
    };
    assert_eq!(dict.base, Some((0, "kwargs".into())));
    assert_eq!(dict.removed, ["sinks"]);
}

#[test]
fn cpython_limits_on_brackets_and_indentation() {
    let nested = |n: usize| {
        format!(
            "import m\nm.f({}x{})\n",
            "(".repeat(n - 1),
            ")".repeat(n - 1)
        )
    };
    let mut parser = PythonParser::new();
    let m = module("t", false);
    assert!(parser.parse(&nested(200), &m, &interest()).is_ok());
    let err = parser.parse(&nested(201), &m, &interest()).unwrap_err();
    assert_eq!(err.message, "SyntaxError: too many nested parentheses");
    // The 201st opening bracket.
    assert_eq!(err.span.start, "import m\nm.f".len() + 200);
    // Brackets inside strings are not the tokenizer's.
    let in_string = format!("x = '{}'\n", "(".repeat(500));
    assert!(parser.parse(&in_string, &m, &interest()).is_ok());
    let indented = |levels: usize| {
        let mut s = String::new();
        for i in 0..levels {
            s += &format!("{}if x:\n", " ".repeat(i));
        }
        s + &format!("{}pass\n", " ".repeat(levels))
    };
    assert!(parser.parse(&indented(99), &m, &interest()).is_ok());
    let err = parser.parse(&indented(100), &m, &interest()).unwrap_err();
    assert_eq!(
        err.message,
        "IndentationError: too many levels of indentation"
    );
}

#[test]
fn lone_carriage_returns_are_line_breaks() {
    let mut source = "import m\rm.f(1)\r\nm.f(2)\r".to_string();
    normalise_newlines(&mut source);
    assert_eq!(source, "import m\nm.f(1)\r\nm.f(2)\n");
    let file = parse(&source);
    assert_eq!(file.calls.len(), 2);
}

#[test]
fn syntax_errors_are_located() {
    let source = "import m\ndef f(:\n    pass\n";
    let err = PythonParser::new()
        .parse(source, &module("x", false), &interest())
        .unwrap_err();
    assert!(err.message.starts_with("syntax error"), "{err:?}");
    assert!(err.span.start >= source.find("def").unwrap(), "{err:?}");
}

#[test]
fn deep_expressions_are_cut_off_and_reported() {
    let chain = format!("import m\nm.f(x{})\n", ".y".repeat(5000));
    let file = parse(&chain);
    assert!(file.too_deep.is_some());
    assert_eq!(file.calls.len(), 1);
}
