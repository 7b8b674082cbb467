//! Shared by the snapshot tests.

/// insta settings for snapshots kept in `snapshots/<folder>/` at the top of the repository: one
/// file per snapshot, named by the snapshot alone, without the asserted expression.
pub fn snapshot_settings(folder: &str) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("snapshots")
            .join(folder),
    );
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings
}
