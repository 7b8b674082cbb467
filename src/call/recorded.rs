//! The recorder's annotation of a call (`"recorded"` in a spec): where it came from. No check
//! reads it; `certify` mentions values the recorder could not read.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recorded {
    /// The entry point the call went through, `module:function`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// Why the call's tensor values were not read (e.g. CUDA graph capture): index tensors then
    /// get generated values, as for a spec written by hand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values_skipped: Option<String>,
}
