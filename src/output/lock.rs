//! Advisory locks that keep two neardup runs out of one place: an output directory
//! (`.neardup.lock`, see [`super::commit`]) or a store (see [`crate::store`]). The lock is an
//! exclusive `flock` on a file holding the holder's pid, released by the kernel when the process
//! ends, so a killed run never leaves a place locked.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::io::AsRawFd;
use std::path::Path;

use crate::bail;
use crate::error::{IoContext, Result};

/// The file whose lock a store's writer holds: it also marks a store's directory, which input
/// discovery passes over ([`super::recorded::Recorded`]).
pub const STORE_LOCK: &str = ".neardup-store.lock";

/// Takes the lock at `path` (the file created if missing) and writes this process's pid in it;
/// true with it if this process created the file. Held by another run: an error saying that
/// `what` is in use, by which pid, ending with `hint`.
pub fn take(path: &Path, what: &str, hint: &str) -> Result<(File, bool)> {
    loop {
        refuse_foreign(path)?;
        let (mut file, created) =
            open(path).io_context(|| format!("cannot write the lock file {}", path.display()))?;
        let taken = try_flock(&file, path).io_context(|| {
            format!(
                "cannot lock {} (does its filesystem support file locks?)",
                path.display()
            )
        })?;
        if !taken {
            let holder = std::fs::read_to_string(path).unwrap_or_default();
            let holder = holder.trim();
            let pid = match holder.is_empty() {
                true => String::new(),
                false => format!(" (pid {holder})"),
            };
            bail!(
                Output,
                "{what} is in use by another neardup run{pid}; wait for it to finish{hint}"
            );
        }
        if !is_at(&file, path) {
            // The run that held it removed the file as it let go: lock the one there now.
            continue;
        }
        file.set_len(0)
            .and_then(|_| writeln!(file, "{}", std::process::id()))
            .io_context(|| format!("writing {}", path.display()))?;
        return Ok((file, created));
    }
}

/// Refuses a lock file that neardup did not write: a symlink (the lock would truncate what it
/// points to) or a file holding anything but a pid. A user's `.neardup.lock` was truncated and
/// given a pid.
fn refuse_foreign(path: &Path) -> Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    let held = match meta.is_file() && meta.len() <= 32 {
        true => std::fs::read(path).unwrap_or_default(),
        false => b"?".to_vec(),
    };
    let text = String::from_utf8_lossy(&held);
    let pid = text.trim();
    if pid.is_empty() || pid.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(());
    }
    bail!(
        Output,
        "{} is not a lock file neardup wrote (a lock file holds a run's pid): move it away and \
         run again",
        path.display()
    )
}

/// Opens the lock file at `path`, creating it if missing; true with it if created here.
pub fn open(path: &Path) -> io::Result<(File, bool)> {
    loop {
        let mut options = OpenOptions::new();
        options.read(true).write(true);
        match options.clone().create_new(true).open(path) {
            Ok(f) => return Ok((f, true)),
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            Err(_) => {}
        }
        match options.open(path) {
            Ok(f) => return Ok((f, false)),
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            Err(_) => {} // removed in between: create it
        }
    }
}

/// True if open `file` is the file at `path` now (not one removed from there since it was opened).
pub fn is_at(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// Takes the exclusive lock of `file` (at `path`) without blocking; true if taken, false if
/// another holds it, an error if the filesystem cannot lock. A lock this process's own pid holds
/// is waited for a little: a child forked by another thread of the process (a test harness
/// spawning a command) holds a copy of the descriptor until it execs, so a run's lock released a
/// moment ago can still look held.
fn try_flock(file: &File, path: &Path) -> io::Result<bool> {
    let own = std::process::id().to_string();
    for _ in 0..200 {
        if try_exclusive(file)? {
            return Ok(true);
        }
        let holder = std::fs::read_to_string(path).unwrap_or_default();
        if holder.trim() != own {
            return Ok(false);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Ok(false)
}

/// Takes a shared lock on the file at `path` (created if missing), waiting while an exclusive one
/// is held: the readers of a store hold it while one that removes files takes it exclusively.
pub fn shared(path: &Path) -> io::Result<File> {
    let file = match open(path) {
        Ok((file, _)) => file,
        Err(_) => File::open(path)?, // a place this process cannot write in
    };
    relax(&file)?;
    Ok(file)
}

/// Takes the lock of `file` exclusively (or turns its shared lock exclusive) if no other holder
/// has it, without waiting; true if done, false if another holds it, an error if the filesystem
/// cannot lock. When not done, a shared lock it held is gone until [`relax`] (the kernel drops
/// the old lock first).
pub fn try_exclusive(file: &File) -> io::Result<bool> {
    loop {
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return Ok(false),
            io::ErrorKind::Interrupted => {}
            _ => return Err(e),
        }
    }
}

/// Takes the lock of `file` as shared again, waiting while another holds it exclusively.
pub fn relax(file: &File) -> io::Result<()> {
    loop {
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The pid of the process that holds an exclusive `flock` on the file at `path`, read from
/// `/proc/locks` (without taking the lock, which would make a run starting now find it in use);
/// `None` when nobody holds it, or where that cannot be read.
pub fn holder(path: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    let dev = meta.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    // A line: `1: FLOCK  ADVISORY  WRITE 5134 fe:00:5308788 0 EOF` (major and minor in hex).
    let id = format!("{major:02x}:{minor:02x}:{}", meta.ino());
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        let held = f.len() > 5 && f[1] == "FLOCK" && f[3] == "WRITE" && f[5] == id;
        held.then(|| f[4].parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a `.neardup.lock` (or `.neardup-store.lock`) that a user had made was
    /// truncated and given a pid; a symlink there truncated the file it pointed to.
    #[test]
    fn a_lock_file_neardup_did_not_write_is_refused_not_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join(".neardup.lock");
        let theirs = dir.path().join("notes.txt");
        std::fs::write(&theirs, "user lock content\n").unwrap();
        std::fs::copy(&theirs, &lock).unwrap();
        let err = take(&lock, "x", "").unwrap_err().to_string();
        assert!(err.contains("is not a lock file neardup wrote"), "{err}");
        assert_eq!(
            std::fs::read_to_string(&lock).unwrap(),
            "user lock content\n"
        );
        std::fs::remove_file(&lock).unwrap();
        std::os::unix::fs::symlink(&theirs, &lock).unwrap();
        assert!(take(&lock, "x", "").is_err());
        assert_eq!(
            std::fs::read_to_string(&theirs).unwrap(),
            "user lock content\n"
        );
        // An earlier run's lock (a pid), an empty one, and none at all are taken.
        std::fs::remove_file(&lock).unwrap();
        for before in [Some("12345\n"), Some(""), None] {
            if let Some(b) = before {
                std::fs::write(&lock, b).unwrap();
            }
            let (file, created) = take(&lock, "x", "").unwrap();
            assert_eq!(created, before.is_none());
            let pid = std::fs::read_to_string(&lock).unwrap();
            assert_eq!(pid.trim(), std::process::id().to_string());
            drop(file);
            std::fs::remove_file(&lock).unwrap();
        }
    }

    #[test]
    fn the_holder_of_a_lock_is_read_without_taking_it() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join(".neardup.lock");
        std::fs::write(&lock, "").unwrap();
        assert_eq!(holder(&lock), None);
        let (file, _) = take(&lock, "x", "").unwrap();
        assert_eq!(holder(&lock), Some(std::process::id()));
        drop(file);
        assert_eq!(holder(&lock), None);
    }
}
