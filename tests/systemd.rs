//! systemd/grove.service: `systemd-analyze verify` is clean and the offline
//! security exposure is at most 1.5 (where systemd-analyze is absent the test
//! skips, and fails under GROVE_TEST_STRICT=1). tests/sandbox.rs runs the
//! daemon under the unit's sandbox.

use std::process::Command;

#[test]
fn unit_verifies_and_is_hardened() {
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        crate::support::skip("systemd-analyze not installed (apt-get install systemd)");
        return;
    }
    let unit = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/systemd/grove.service"
    ))
    .unwrap();
    assert!(unit.contains("ExecStart=/usr/bin/grove node run"));
    // Point ExecStart at the binary under test, which exists here.
    let unit = unit.replace("/usr/bin/grove", env!("CARGO_BIN_EXE_grove"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("grove.service");
    std::fs::write(&path, unit).unwrap();
    let verify = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    assert!(
        verify.status.success() && out.trim().is_empty(),
        "systemd-analyze verify:\n{out}"
    );
    let security = Command::new("systemd-analyze")
        .args(["security", "--offline=true"])
        .arg(&path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&security.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("Overall exposure level"))
        .expect("an exposure line");
    let level: f64 = line
        .split(':')
        .nth(1)
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("cannot read the level in {line:?}"));
    assert!(level <= 1.5, "exposure {level} > 1.5:\n{text}");
}
