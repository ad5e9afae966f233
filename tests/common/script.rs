//! An executable shell script for a test (a stand-in ptxas or python), included by path.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Writes `#!/bin/sh` and `body` to `path`, executable, and returns once it can be run: a process that
/// another test thread forks while the file is open for writing holds that descriptor until it execs, and
/// running the file then fails with ETXTBSY ("Text file busy"), so it is run (with `--version`) until it
/// is not busy.
pub fn write_script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    for _ in 0..200 {
        match std::process::Command::new(path).arg("--version").output() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            _ => return,
        }
    }
}
