//! Hazards of scheduler metadata that does not describe its call (musa-fa3.md §4.7, §6.7–§6.11):
//! found by [`crate::scheduler::stale_metadata_findings`] and the forward-pass emulation. Each
//! code names the metadata field (or argument) at fault; the message names the consequence.

macro_rules! mate_src {
    ($path:literal, $lines:literal) => {
        concat!("MooreThreads/mate@3f58cc3e ", $path, ":", $lines)
    };
}

const FWD_CONSUMES: &str = mate_src!("mate/jit/attention/fmha/fmha_fwd.py", "L765-L776");
const SCHEDULER: &str = mate_src!(
    "include/mate/attention/fmha/tile_scheduler.hpp",
    "L110-L193"
);
const COMBINE: &str = mate_src!("mate/jit/attention/fmha/fmha_combine.py", "L161-L216");
const METADATA_HOST: &str = mate_src!("mate/jit/attention/fmha/fmha_get_metadata.py", "L250-L424");
const FA3_WRAPPER: &str = mate_src!(
    "wrappers/flash-attention/flash_attn_3/interface.py",
    "L252-L298"
);

hazards! { HAZARDS:
    H_SCHED_BUFFER_LONGER = hazard!(
        "H-SCHED-BUFFER-LONGER",
        Warning,
        "the metadata has {} elements, the call slices 4·b = {}: its vectors are read at offsets of {}, not of the {} they were written at",
        FWD_CONSUMES,
        "§6.7/§6.11: mate checks only `shape[0] >= 4*batch_size` and re-slices a longer buffer at multiples of the call's batch, so batch_table is read from another vector's region. Harmful only through what the re-sliced vectors break (the H-SCHED batch-table, m-block and split findings beside it, which are errors); alone, the call computes what it asks for. Typical cause: metadata cached for a larger batch (SGLang reuses it across layers and passes)."
    ),
    H_SCHED_BATCH_TABLE = hazard!(
        "H-SCHED-BATCH-TABLE",
        Error,
        "batch_table {} is not a permutation of 0..{}: {}",
        SCHEDULER,
        "§6.11 (ii): the forward takes the batch of position p from batch_table[p]. Batches listed twice are computed twice (racing writes), missing batches are never computed (uninitialised output), out-of-range values index other sequences' memory. The kernel path refuses such metadata."
    ),
    H_SCHED_M_BLOCKS = hazard!(
        "H-SCHED-M-BLOCKS",
        Error,
        "num_m_blocks {}: {}",
        SCHEDULER,
        "§6.11 (iii): tiles with block >= num_m_blocks[p] are skipped, so query rows beyond num_m_blocks·tile_m (packed rows with pack-GQA) keep the uninitialised contents of torch.empty (NaN on the kernel path). A sequence listed at two positions loses only the rows neither computes, unless the short position splits: its combine then rewrites every row of the sequence from split partials it did not write (§6.10). Causes: metadata computed for a smaller max_seqlen_q or other cu_seqlens_q, another head ratio, or another pack_gqa."
    ),
    H_SCHED_SPLITS_EXCEED = hazard!(
        "H-SCHED-SPLITS-EXCEED",
        Error,
        "num_splits_dynamic {}: {} split(s) but the forward allocates {} split slot(s), so splits beyond them never run (key ranges dropped) and the combine reads past o_accum/lse_accum",
        COMBINE,
        "§6.11 (iv): the forward's split count S_F comes from its own heuristic (or num_splits); the metadata's per-sequence counts must not exceed it. Causes: metadata computed with another num_splits, max_seqlen_k, window or causal flag, head counts or sm_margin. The kernel path refuses such metadata."
    ),
    H_SCHED_SPLITS_NONPOSITIVE = hazard!(
        "H-SCHED-SPLITS-NONPOSITIVE",
        Error,
        "num_splits_dynamic {}: nothing runs for it and its rows are never computed",
        SCHEDULER,
        "§6.11 (iv): a split count of 0 or less skips every tile of that position, and the combine skips it too."
    ),
    H_SCHED_PERF_ONLY = hazard!(
        "H-SCHED-PERF-ONLY",
        Info,
        "the metadata differs from the call's own in {}: results stay correct, only split counts, batch order or L2 grouping change",
        SCHEDULER,
        "§6.11: provided (i)-(iv) hold, differences in key lengths, mask class, head counts or L2 grouping change only the schedule; with other split counts, outputs differ within floating-point rounding."
    ),
    H_SCHED_ARGS_DIFFER = hazard!(
        "H-SCHED-ARGS-DIFFER",
        Info,
        "the metadata was computed with {}",
        METADATA_HOST,
        "§4.7, §6.11: the arguments given to get_scheduler_metadata differ from the call's own. Which fields that corrupts is reported separately (H-SCHED-M-BLOCKS, -SPLITS-EXCEED, -BATCH-TABLE, -BUFFER-LONGER); without them the difference affects only performance."
    ),
    H_SCHED_ARGS_DROPPED = hazard!(
        "H-SCHED-ARGS-DROPPED",
        Info,
        "the metadata was computed with {}, which mate never reads: no effect",
        FA3_WRAPPER,
        "§2.5(b)-(c): page_size is dropped by flash_attn_3.interface.get_scheduler_metadata, qkv_dtype and has_softcap by mate.mha_interface.get_scheduler_metadata."
    ),
    H_SCHED_VALUES_NOT_FROM_ARGS = hazard!(
        "H-SCHED-VALUES-NOT-FROM-ARGS",
        Warning,
        "the scheduler_metadata values are not what get_scheduler_metadata(metadata_args) gives on a {}-multiprocessor device (first difference at element {})",
        METADATA_HOST,
        "The spec gives both the tensor's values and the arguments; they disagree, so either the arguments or the device's multiprocessor count are not the ones the tensor was made with. The values are what the forward reads; they are checked against the call."
    ),
    H_SCHED_DROPPED_BY_SINKS = hazard!(
        "H-SCHED-DROPPED-BY-SINKS",
        Info,
        "learnable sinks force num_splits=-1 and scheduler_metadata=None: the metadata is not used",
        mate_src!("mate/jit/attention/fmha/fmha_fwd.py", "L687-L690"),
        "§6.5: with learnable_sink the forward runs the single-tile scheduler with one split and no combine, whatever metadata was passed or injected."
    ),
    H_SCHED_MLA_WORKSPACE_STALE = hazard!(
        "H-SCHED-MLA-WORKSPACE-STALE",
        Error,
        "the MLA workspace is reused (is_inited=True) as written by call {}, whose {} differ: its tile schedule and split counts describe other sequences",
        mate_src!("csrc/mla_pybind.mu", "L908-L922"),
        "§4.4, §4.7 item 4, §6.12: the MLA workspace is one process-wide buffer, not keyed by prefix; after the refreshing layer every call skips the MLA metadata kernel and uses whatever the last refreshing call wrote."
    ),
    H_SCHED_OTHER_BACKEND = hazard!(
        "H-SCHED-OTHER-BACKEND",
        Warning,
        "the call is made by backend {}, but the wrapper injects from _CURRENT_BACKEND, the last instance constructed ({}): {}",
        concat!(
            "sgl-project/sglang@082898472f python/sglang/srt/hardware_backend/musa/attention/flashattention_backend.py:",
            "L162-L177"
        ),
        "§4.1, §4.7 item 5: `_CURRENT_BACKEND` is set in every backend's constructor, so it is the last instance constructed (a draft model's after the target's; MultiStep builds several), not the one calling. The call gets metadata for that instance's recorded layer, prefix, max_seqlen_k and can_run_tbo, or none while that instance has run no layer; all instances share one metadata dict."
    ),
    H_SCHED_UNCHECKED = hazard!(
        "H-SCHED-UNCHECKED",
        Warning,
        "the metadata could not be checked against the call: {}",
        METADATA_HOST,
        "The call's tensors could not be materialised or the metadata arguments are not computable (e.g. they fail mate's own checks)."
    ),
}
