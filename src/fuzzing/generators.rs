//! Generators: raw fuzz bytes → structured cases.
//!
//! A case is built valid first — by [`crate::cases::random_call`], driven by the fuzz input itself
//! through [`InputRng`], so every choice the generator makes is a few input bytes the fuzzer can
//! mutate — and then, with some probability, one or two [`Mutation`]s (drawn from the input too)
//! push an argument away from validity, so that both the deep checks and the kernel are reached.

use crate::call::KvCacheCall;
use crate::cases::{self, Mutation, Options};
use crate::reference::Stack;
use arbitrary::{Arbitrary, Result, Unstructured};
use rand::RngCore;

/// A random-number source that reads the fuzz input (zeros once it is exhausted), so that the
/// seeded case generator becomes a structural decoder of fuzz bytes.
pub struct InputRng<'a, 'b> {
    input: &'b mut Unstructured<'a>,
}

impl<'a, 'b> InputRng<'a, 'b> {
    pub fn new(input: &'b mut Unstructured<'a>) -> Self {
        InputRng { input }
    }
}

impl RngCore for InputRng<'_, '_> {
    fn next_u32(&mut self) -> u32 {
        u32::arbitrary(self.input).unwrap_or(0)
    }

    fn next_u64(&mut self) -> u64 {
        u64::arbitrary(self.input).unwrap_or(0)
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        if self.input.fill_buffer(dest).is_err() {
            dest.fill(0);
        }
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

/// What a decoded case is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Any stack, valid or mutated towards an error site, MLA shapes included.
    Validation,
    /// Valid MUSA calls the kernel path evaluates (mate's fmha forward, no MLA branch).
    Kernel,
}

/// A fuzz case: a valid call for a stack, then up to two mutations.
#[derive(Clone, Debug)]
pub struct FuzzCall {
    pub stack: Stack,
    pub call: KvCacheCall,
    pub mutations: Vec<Mutation>,
}

impl FuzzCall {
    /// Decodes a case for `target`.
    pub fn decode(u: &mut Unstructured, target: Target) -> Result<FuzzCall> {
        let (stacks, mutate): (&[Stack], bool) = match target {
            Target::Validation => (&Stack::ALL, true),
            Target::Kernel => (&[Stack::Musa], false),
        };
        let stack = *u.choose(stacks)?;
        let mut options = Options::small(stack);
        // MLA-shaped calls take mate's separate MLA kernel, which the kernel path does not model.
        options.mla &= target == Target::Validation && u.ratio(1u8, 8u8)?;
        let seed = u64::arbitrary(u)?;
        let mut call = cases::random_call(&mut InputRng::new(u), &options);
        // A quarter of the kernel target's calls meet one of the device's departures; an
        // exhausted input keeps its random call.
        if target == Target::Kernel && !u.ratio(3u8, 4u8)? {
            call = cases::device_quirk_call(&mut InputRng::new(u));
        }
        call.seed = seed;
        let mut mutations = Vec::new();
        if mutate {
            let count = *u.choose(&[0usize, 1, 1, 1, 2, 2])?;
            for _ in 0..count {
                let mutation = Mutation::draw(&mut InputRng::new(u), &call);
                mutation.apply(&mut call);
                mutations.push(mutation);
            }
        }
        Ok(FuzzCall {
            stack,
            call,
            mutations,
        })
    }
}

/// Files of a fuzzed Python tree, in the order their bytes come (separated by NUL, which Python
/// source cannot contain): a script, a package and one of its modules (for imports and
/// re-exports), and SGLang's MUSA backend module (whose own wrapper the scan treats specially).
const PYTHON_TREE: [(&str, &str, bool); 4] = [
    ("app.py", "app", false),
    ("pkg/__init__.py", "pkg", true),
    ("pkg/attn.py", "pkg.attn", false),
    (
        "sglang/srt/hardware_backend/musa/attention/flashattention_backend.py",
        "sglang.srt.hardware_backend.musa.attention.flashattention_backend",
        false,
    ),
];

/// The `scan` target's case: the NUL-separated parts of `bytes` as the files of [`PYTHON_TREE`]
/// (at most four; the rest of the input is ignored).
pub fn python_tree(bytes: &[u8]) -> Vec<crate::scan::Source> {
    bytes
        .split(|&b| b == 0)
        .zip(PYTHON_TREE)
        .map(|(content, (display, module, is_package))| {
            let module = crate::scan::ModuleName {
                name: module.into(),
                is_package,
            };
            crate::scan::Source::in_memory(display, module, content.to_vec())
        })
        .collect()
}

/// The files of an exported and run bundle, in the order of their selector (see [`bundle_files`]).
pub const BUNDLE_FILES: [&str; 6] = [
    crate::bridge::bundle::CALL_FILE,
    crate::bridge::bundle::EXPECTED_JSON,
    crate::bridge::bundle::INPUTS_FILE,
    crate::bridge::bundle::EXPECTED_TENSORS,
    crate::bridge::bundle::RESULT_JSON,
    crate::bridge::bundle::RESULT_TENSORS,
];

/// The `bundle` target's case: the files of one bundle folder. `bytes` is a sequence of records,
/// each a selector byte (the file, [`BUNDLE_FILES`] modulo its length), a little-endian `u32`
/// length and that many bytes of content (fewer when the input ends); a later record of a file
/// replaces an earlier one, and a file without a record is absent. Binary safetensors contents
/// allow no separator byte, hence the lengths.
pub fn bundle_files(mut bytes: &[u8]) -> Vec<(&'static str, &[u8])> {
    let mut files: Vec<(&'static str, &[u8])> = Vec::new();
    while let [selector, l0, l1, l2, l3, rest @ ..] = bytes {
        let name = BUNDLE_FILES[*selector as usize % BUNDLE_FILES.len()];
        let len = (u32::from_le_bytes([*l0, *l1, *l2, *l3]) as usize).min(rest.len());
        let (content, after) = rest.split_at(len);
        files.retain(|(n, _)| *n != name);
        files.push((name, content));
        bytes = after;
    }
    files
}

/// The bytes [`bundle_files`] reads back as `files` (the seed corpus is written with it).
pub fn bundle_bytes(files: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for (name, content) in files {
        let selector = BUNDLE_FILES
            .iter()
            .position(|f| f == name)
            .unwrap_or_else(|| panic!("{name} is not a bundle file"));
        bytes.push(selector as u8);
        bytes.extend((content.len() as u32).to_le_bytes());
        bytes.extend(content);
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundle_bytes_read_back_as_their_files() {
        let files = vec![
            ("call.json", b"{}".to_vec()),
            ("result.safetensors", vec![0, 1, 2]),
        ];
        let bytes = bundle_bytes(&files);
        let read: Vec<(&str, Vec<u8>)> = bundle_files(&bytes)
            .into_iter()
            .map(|(n, c)| (n, c.to_vec()))
            .collect();
        assert_eq!(read, files);
        // A record cut short keeps what is there; a later record replaces an earlier one.
        let mut bytes = bundle_bytes(&[("call.json", b"{}".to_vec())]);
        bytes.extend([6, 9, 0, 0, 0, b'[']);
        assert_eq!(bundle_files(&bytes), [("call.json", &b"["[..])]);
    }

    #[test]
    fn exhausted_input_still_decodes_a_valid_call() {
        let mut u = Unstructured::new(&[]);
        let case = FuzzCall::decode(&mut u, Target::Validation).unwrap();
        assert!(case.call.bind_canonical().is_ok());
        assert!(case.mutations.is_empty());
    }
}
