//! Where each output goes, resolved, and the checks that keep outputs off the inputs and off each
//! other: done before any work, on real paths (symlinks, `..`, globs and directories resolved), so
//! no spelling of a path gets an output onto a file it must not replace.

use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Component, Path, PathBuf};

use crate::error::{IoContext, Result};
use crate::{bail, ensure};

/// Outputs that are directories, not files.
pub const DIRECTORY_OUTPUTS: &[&str] = &["corpus"];

/// Where one output goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A regular file (existing or new) at this real path, replaced by rename.
    File(PathBuf),
    /// A character device or FIFO, written through.
    Stream(PathBuf),
    /// Standard output.
    Stdout,
    /// A directory (the deduplicated corpus) at this real path, written into a staged directory
    /// beside it that replaces it at the commit.
    Dir(PathBuf),
}

impl Target {
    /// The real path of a file or directory output.
    pub fn real(&self) -> Option<&Path> {
        match self {
            Target::File(p) | Target::Dir(p) => Some(p),
            _ => None,
        }
    }
}

/// Follows symlinks (up to 40) to the path they finally name, which need not exist yet.
pub fn follow(path: &Path) -> io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let t = std::fs::read_link(&p)?;
                p = if t.is_absolute() {
                    t
                } else {
                    p.parent().unwrap_or(Path::new("")).join(t)
                };
            }
            _ => return Ok(p),
        }
    }
    Err(io::Error::other("too many levels of symbolic links"))
}

/// [`real_path`], its failure an error naming the path.
pub fn resolved(path: &Path) -> Result<PathBuf> {
    real_path(path).io_context(|| format!("resolving the path {}", path.display()))
}

/// The absolute path `path` names once symlinks are followed, whether or not it exists: the
/// longest existing ancestor canonicalized, the rest joined with `.` and `..` taken lexically.
pub fn real_path(path: &Path) -> io::Result<PathBuf> {
    let followed = follow(path)?;
    let absolute = if followed.is_absolute() {
        followed
    } else {
        std::env::current_dir()?.join(followed)
    };
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = existing.canonicalize() {
            let mut out = c;
            for part in rest.iter().rev() {
                match part {
                    Component::ParentDir => {
                        out.pop();
                    }
                    Component::Normal(n) => out.push(n),
                    _ => {}
                }
            }
            return Ok(out);
        }
        match (existing.parent(), existing.components().next_back()) {
            (Some(parent), Some(last)) => {
                rest.push(last);
                existing = parent;
            }
            _ => return Ok(absolute),
        }
    }
}

/// `base.join(p)` with `.` and `name/..` removed lexically (without looking at the disk), so
/// messages show `out/x`, not `jobs/../out/x`, and a record's `../summary.json` leads from its
/// real directory to the summary.
pub fn lexical_join(base: &Path, p: &Path) -> PathBuf {
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// The first folder of `path` (itself first) that is a symbolic link that cannot be followed,
/// said with where it points; messages add it where "File exists" or "not found" alone does not
/// say which folder is at fault.
pub fn broken_link_in(path: &Path) -> Option<String> {
    let link = path.ancestors().find(|a| {
        std::fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink())
            && std::fs::metadata(a).is_err()
    })?;
    let to = std::fs::read_link(link).unwrap_or_default();
    Some(format!(
        "{} is a symbolic link to {}, which does not exist",
        link.display(),
        to.display()
    ))
}

/// The directory a file path lives in (`.` for a bare name).
pub fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Creates `dir` and every directory above it that is missing; returns those it created, the
/// outermost first.
pub fn create_dir_all(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let missing: Vec<PathBuf> = dir
        .ancestors()
        .take_while(|d| !d.as_os_str().is_empty() && std::fs::symlink_metadata(d).is_err())
        .map(Path::to_path_buf)
        .collect();
    std::fs::create_dir_all(dir)?;
    Ok(missing.into_iter().rev().collect())
}

/// The identity of an existing file: device and inode.
pub fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// The device and inode a target is written to, for one that is not replaced by rename (a FIFO,
/// standard output) and a file that may be what standard output is; none for a character device
/// (`/dev/null`, a terminal), where two outputs may well meet.
fn written_through(target: &Target) -> Option<(u64, u64)> {
    use std::os::unix::fs::FileTypeExt;
    let path = match target {
        Target::Stdout => Path::new("/dev/stdout"),
        Target::Stream(p) | Target::File(p) => p.as_path(),
        Target::Dir(_) => return None,
    };
    let m = std::fs::metadata(path).ok()?;
    (!m.file_type().is_char_device()).then(|| (m.dev(), m.ino()))
}

/// Where output `name`, given as `path`, goes.
pub fn classify(name: &str, path: &Path) -> Result<Target> {
    let resolving = || format!("output {name}: resolving {}", path.display());
    if DIRECTORY_OUTPUTS.contains(&name) {
        ensure!(
            path.as_os_str() != "-",
            Output,
            "output {name} is a directory: it cannot be standard output"
        );
        if let Ok(m) = std::fs::metadata(path) {
            ensure!(
                m.is_dir(),
                Output,
                "output {name}: {} exists and is not a directory",
                path.display()
            );
        }
        return Ok(Target::Dir(real_path(path).io_context(resolving)?));
    }
    if path.as_os_str() == "-" {
        return Ok(Target::Stdout);
    }
    // The kernel follows links (also /proc's, such as /dev/stdout) to classify.
    let t = match std::fs::metadata(path) {
        Ok(m) => m.file_type(),
        // A new file, or a dangling symlink to one: created where the link points. A path
        // through a folder not made yet (`out/../fifo`, probe 22b) is taken as it will read.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let real = real_path(path).io_context(resolving)?;
            let t = std::fs::metadata(&real).map(|m| m.file_type());
            if t.is_ok_and(|t| t.is_char_device() || t.is_fifo()) {
                return Ok(Target::Stream(real));
            }
            return Ok(Target::File(real));
        }
        Err(e) => {
            return Err(e)
                .io_context(|| format!("output {name}: cannot inspect {}", path.display()))
        }
    };
    if t.is_file() {
        // Renamed over its real path, so a symlink keeps pointing at it.
        return Ok(Target::File(real_path(path).io_context(resolving)?));
    }
    if t.is_char_device() || t.is_fifo() {
        return Ok(Target::Stream(path.to_path_buf()));
    }
    let what = if t.is_dir() {
        "a directory"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "a socket or other special file"
    };
    bail!(
        Output,
        "output {name}: {} is {what}; give a file path (or - for standard output)",
        path.display()
    )
}

/// One input file: as given, its real path and its device and inode.
struct Input {
    shown: PathBuf,
    real: Option<PathBuf>,
    id: Option<(u64, u64)>,
}

/// The files a run reads, resolved: no output may be one of them or hold one.
pub struct Inputs {
    files: Vec<Input>,
}

impl Inputs {
    /// Resolves `inputs` (files already expanded from globs and directories).
    pub fn resolve(inputs: &[PathBuf]) -> Inputs {
        Inputs {
            files: inputs
                .iter()
                .map(|p| Input {
                    shown: p.clone(),
                    real: p.canonicalize().ok(),
                    id: identity(p),
                })
                .collect(),
        }
    }

    /// Refuses output `name` (given as `shown`) if it is an input, or a directory holding one.
    pub fn check(&self, name: &str, shown: &Path, target: &Target) -> Result<()> {
        let is_input = |i: &&Input| match target {
            Target::File(p) | Target::Stream(p) => {
                (i.id.is_some() && identity(p) == i.id) || i.real.as_deref() == Some(p.as_path())
            }
            Target::Dir(d) => i.real.as_ref().is_some_and(|r| r.starts_with(d)),
            Target::Stdout => false,
        };
        let Some(input) = self.files.iter().find(is_input) else {
            return Ok(());
        };
        if let Target::Dir(_) = target {
            bail!(
                Output,
                "output {name} ({}) is or holds the input {}: the corpus would replace it",
                shown.display(),
                input.shown.display()
            );
        }
        bail!(
            Output,
            "output {name} ({}) is the input {}: refusing to overwrite an input",
            shown.display(),
            input.shown.display()
        )
    }
}

/// Refuses output `name` when it is, holds or lies inside an earlier output of the same set.
pub fn check_overlap(
    name: &str,
    shown: &Path,
    target: &Target,
    earlier: &[(String, PathBuf, Target)],
) -> Result<()> {
    for (other, other_shown, t) in earlier {
        if *t == *target && *t == Target::Stdout {
            bail!(
                Output,
                "outputs {other} and {name} both go to standard output (-)"
            );
        }
        let (Some(a), Some(b)) = (target.real(), t.real()) else {
            // A device, FIFO or standard output: the same file when they are one inode (`-` and
            // `/dev/stdout`, two names of one FIFO), wherever standard output goes.
            let (x, y) = (written_through(target), written_through(t));
            ensure!(
                x.is_none() || x != y,
                Output,
                "outputs {other} and {name} are the same file {}",
                shown.display()
            );
            continue;
        };
        ensure!(
            a != b,
            Output,
            "outputs {other} and {name} are the same file {}",
            shown.display()
        );
        // A file output's path may hold another's too (`skipped = "."` beside `pairs.tsv`).
        inside(name, shown, a, other, other_shown, b)?;
        inside(other, other_shown, b, name, shown, a)?;
    }
    Ok(())
}

/// Refuses output `inner` (at real path `path`) inside directory output `outer` (at `dir`).
fn inside(
    inner: &str,
    inner_shown: &Path,
    path: &Path,
    outer: &str,
    outer_shown: &Path,
    dir: &Path,
) -> Result<()> {
    ensure!(
        !path.starts_with(dir),
        Output,
        "output {inner} ({}) lies inside the {outer} directory {}: committing the {outer} would \
         replace it; choose paths outside each other",
        inner_shown.display(),
        outer_shown.display()
    );
    Ok(())
}

/// Removes the folders above `file` while they are empty, up to and not including `root`: the
/// folders made only for a file that is gone (a dropped page's, an old corpus's).
pub fn remove_empty_parents(file: &Path, root: &Path) {
    let mut dir = file.parent();
    while let Some(d) = dir.filter(|d| *d != root && std::fs::remove_dir(d).is_ok()) {
        dir = d.parent();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_paths_resolve_dot_dot_and_links_of_paths_that_do_not_exist_yet() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().canonicalize().unwrap();
        std::fs::create_dir(d.join("a")).unwrap();
        std::os::unix::fs::symlink(d.join("a"), d.join("link")).unwrap();
        assert_eq!(
            real_path(&d.join("link/../a/new/x.tsv")).unwrap(),
            d.join("a/new/x.tsv")
        );
        assert_eq!(real_path(&d.join("a/./b/../c")).unwrap(), d.join("a/c"));
    }

    /// Regression (`skipped = "."`): the skipped file's path was the directory of the other
    /// outputs, and the refusal blamed a lock file that neardup itself had put there.
    #[test]
    fn a_file_output_whose_path_holds_another_output_is_refused() {
        let skipped = Target::File(PathBuf::from("/o"));
        let pairs = Target::File(PathBuf::from("/o/pairs.tsv"));
        let earlier = vec![("pairs".to_string(), PathBuf::from("o/pairs.tsv"), pairs)];
        let e = check_overlap("skipped", Path::new("o/."), &skipped, &earlier).unwrap_err();
        assert!(e.to_string().contains("lies inside the skipped"), "{e}");
        let beside = Target::File(PathBuf::from("/other"));
        assert!(check_overlap("skipped", Path::new("other"), &beside, &earlier).is_ok());
    }

    #[test]
    fn an_output_inside_the_corpus_directory_is_refused() {
        let corpus = Target::Dir(PathBuf::from("/o/corpus"));
        let inside = Target::File(PathBuf::from("/o/corpus/pairs.tsv"));
        let beside = Target::File(PathBuf::from("/o/pairs.tsv"));
        let earlier = vec![("corpus".to_string(), PathBuf::from("corpus"), corpus)];
        assert!(check_overlap("pairs", Path::new("p"), &beside, &earlier).is_ok());
        let e = check_overlap("pairs", Path::new("p"), &inside, &earlier).unwrap_err();
        assert!(e.to_string().contains("inside the corpus directory"), "{e}");
        // And the other way round: the corpus is the directory holding an earlier output.
        let outer = Target::Dir(PathBuf::from("/o"));
        let earlier = vec![("pairs".to_string(), PathBuf::from("p"), beside)];
        let e = check_overlap("corpus", Path::new("."), &outer, &earlier).unwrap_err();
        assert!(e.to_string().contains("inside the corpus directory"), "{e}");
    }
}
