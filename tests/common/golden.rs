//! Golden-file comparison shared by the planner golden tests (bwrap, Seatbelt).
//! `CORDON_UPDATE_GOLDEN=1` rewrites the files instead of comparing.

use std::path::Path;

/// Set to `1` to rewrite golden files.
pub const UPDATE_ENV: &str = "CORDON_UPDATE_GOLDEN";

/// Whether golden files are being rewritten.
pub fn updating() -> bool {
    std::env::var(UPDATE_ENV).is_ok_and(|v| v == "1")
}

/// Compare `actual` with the golden file `dir/name`, or rewrite it when updating.
pub fn check_golden(dir: &Path, name: &str, actual: &str) {
    let path = dir.join(name);
    if updating() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("cannot read golden file {}: {e}; run with {UPDATE_ENV}=1 to create it", path.display())
    });
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the planner's output, first at line {}:\n  golden: {:?}\n  actual: {:?}\n\
             run with {UPDATE_ENV}=1 to accept the new output (and review the diff)",
            path.display(),
            line + 1,
            expected.lines().nth(line),
            actual.lines().nth(line),
        );
    }
}
