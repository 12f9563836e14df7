//! How a run is laid out: worker threads per process, processes, and the cluster's addresses; and
//! starting timely on them ([`Exec::start`]), after the cluster handshake of
//! [`crate::exchange::processes`].

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, IoContext, Result};
use crate::exchange::processes;
use crate::spill::SpillMode;
use crate::{bail, ensure};
use timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets;
use timely::communication::allocator::ProcessBuilder;
use timely::communication::{AllocatorBuilder, Hooks};

/// Default wait for the other processes of a cluster.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// Most worker threads per process, as a multiple of the machine's cores: beyond it a run only
/// adds channels (every worker has one to every other) and memory.
pub const MAX_WORKERS_PER_CORE: usize = 4;

/// Threads and processes of a run. Worker indices are global: process `p` owns workers
/// `p * workers .. (p + 1) * workers`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exec {
    /// Worker threads in each process.
    pub workers: usize,
    /// Number of processes in the cluster.
    pub processes: usize,
    /// This process's index, `0..processes`.
    pub process: usize,
    /// File with one `host:port` per line, in process order (default: `localhost:2101+i`).
    pub hostfile: Option<PathBuf>,
    /// Every process's `host:port` as a launcher gave them (`--cluster`), over the hostfile.
    pub addresses: Option<Vec<String>>,
    /// The launcher the place was read from (`--cluster`), for the start-up message.
    pub launcher: Option<&'static str>,
    /// How long a process waits for the others to connect.
    pub connect_timeout: Duration,
    /// Where this process's scratch directory goes (`None`: the system's temporary directory).
    pub scratch: Option<PathBuf>,
    /// When stages spill.
    pub spill: SpillMode,
}

impl Default for Exec {
    fn default() -> Self {
        Exec {
            workers: 1,
            processes: 1,
            process: 0,
            hostfile: None,
            addresses: None,
            launcher: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            scratch: None,
            spill: SpillMode::default(),
        }
    }
}

/// The machine's cores (1 if unknown).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// One name for a host, to find two lines that name one address: lowercase, an IP address in
/// its shortest form (`[::1]` and `0:0::1` are `::1`), and `localhost` as `127.0.0.1`, where a
/// process binds it.
fn one_name(host: &str) -> String {
    let host = host.to_ascii_lowercase();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) if bare == "localhost" => "127.0.0.1".into(),
        Err(_) => host,
    }
}

/// Reads a hostfile: one `host:port` per line; blank lines and `#` comments are ignored.
pub fn read_hostfile(path: &std::path::Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .io_context(|| format!("reading hostfile {}", path.display()))?;
    let mut out: Vec<String> = Vec::new();
    let mut line_of = std::collections::HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        // A host is a name or address without spaces; port 0 would be any port, which no peer
        // could find.
        let bracketed = line.starts_with('[') && line.contains("]:");
        ensure!(
            bracketed || line.matches(':').count() < 2 || line.contains(char::is_whitespace),
            Config,
            "{}:{}: {line:?} holds an IPv6 address without brackets, which cannot be told from \
             its port: write [ADDRESS]:PORT, for example [::1]:2101",
            path.display(),
            i + 1
        );
        let address = line.rsplit_once(':').and_then(|(host, port)| {
            let host_ok = !host.is_empty() && !host.contains(char::is_whitespace);
            let port = port.parse::<u16>().ok().filter(|&p| p > 0)?;
            host_ok.then(|| (one_name(host), port))
        });
        let Some(address) = address else {
            bail!(
                Config,
                "{}:{}: expected one host:port (a port from 1 to 65535), got {line:?}",
                path.display(),
                i + 1
            );
        };
        // Two processes cannot listen on one address: the second waited out its timeout.
        // Compared as host and port number, so `h:2101` and `H:02101` are one address.
        if let Some(first) = line_of.insert(address, i + 1) {
            bail!(
                Config,
                "{}:{}: {line} is line {first}'s address too; each process needs its own \
                 host:port",
                path.display(),
                i + 1
            );
        }
        out.push(line.to_string());
    }
    Ok(out)
}

/// An error if the scratch folder `parent` cannot be made (unless nothing spills), or lies in
/// (or is) a directory that a commit replaces or that holds one thing alone: the corpus
/// directory (`dirs` names each, as `("corpus", path)`) or the store. A scratch left there by a
/// killed run would be taken for a file this run did not write, and the directory refused on
/// every later run.
pub fn check_scratch(
    (parent, named): (&std::path::Path, &str),
    dirs: &[(&str, &std::path::Path)],
    spill: SpillMode,
) -> Result<()> {
    if spill != SpillMode::Never {
        check_scratch_can_be_made(parent)?;
    }
    let real = crate::output::paths::resolved;
    let scratch = real(parent)?;
    for (name, dir) in dirs {
        ensure!(
            !scratch.starts_with(real(dir)?),
            Config,
            "{named} {} lies inside the {name} directory {}, which holds what neardup \
             puts there alone: choose a scratch directory outside it",
            parent.display(),
            dir.display()
        );
    }
    Ok(())
}

/// An error if the scratch folder `parent` could not be made when a stage first spills, late in
/// the run: the nearest of its folders that is there is not a directory (a file, or a symbolic
/// link to nothing).
fn check_scratch_can_be_made(parent: &std::path::Path) -> Result<()> {
    let named = |why: String| {
        Error::Config(format!(
            "the scratch directory {} cannot be made: {why}; set [run] scratch (or TMPDIR) to \
             a directory, made if missing, where a run short of memory writes its spill files",
            parent.display()
        ))
    };
    for folder in parent.ancestors().filter(|a| !a.as_os_str().is_empty()) {
        if std::fs::symlink_metadata(folder).is_err() {
            continue; // missing: made
        }
        return match std::fs::metadata(folder) {
            Ok(m) if m.is_dir() => Ok(()),
            Ok(_) => Err(named(format!("{} is not a directory", folder.display()))),
            Err(e) => Err(named(
                crate::output::paths::broken_link_in(folder)
                    .unwrap_or_else(|| format!("{}: {e}", folder.display())),
            )),
        };
    }
    Ok(())
}

/// An error unless `workers` threads a process is at least 1 and at most
/// [`MAX_WORKERS_PER_CORE`] a core (`-w` and `[run] workers` alike).
pub fn check_workers(workers: usize) -> Result<()> {
    ensure!(workers >= 1, Config, "workers must be at least 1");
    let most = MAX_WORKERS_PER_CORE * cores();
    ensure!(
        workers <= most,
        Config,
        "{workers} worker threads on a machine with {} core(s): at most {most} \
         ({MAX_WORKERS_PER_CORE} per core); more only adds channels and memory. Use --processes \
         on more machines to go wider",
        cores()
    );
    Ok(())
}

impl Exec {
    /// Total workers in the cluster.
    pub fn peers(&self) -> usize {
        self.workers * self.processes
    }

    /// Checks the layout: at least one worker, at most [`MAX_WORKERS_PER_CORE`] per core, a valid
    /// process index, a hostfile only with several processes.
    pub fn validate(&self) -> Result<()> {
        check_workers(self.workers)?;
        ensure!(self.processes >= 1, Config, "processes must be at least 1");
        ensure!(
            self.process < self.processes,
            Config,
            "process index {} is out of range for {} processes",
            self.process,
            self.processes
        );
        if self.processes == 1 && (self.hostfile.is_some() || self.process != 0) {
            let given = match (self.hostfile.is_some(), self.process != 0) {
                (true, true) => "--process and --hostfile need",
                (true, false) => "--hostfile needs",
                _ => "--process needs",
            };
            bail!(
                Config,
                "{given} --processes greater than 1 (or --cluster hostfile, which takes one \
                 process a line of the hostfile)"
            );
        }
        Ok(())
    }

    /// The folder this process's scratch directory is made in.
    pub fn scratch_parent(&self) -> PathBuf {
        self.scratch.clone().unwrap_or_else(std::env::temp_dir)
    }

    /// Where [`Exec::scratch_parent`] came from, for a message: `[run] scratch`, or the system's
    /// temporary directory when the job names none (probe 24a: a TMPDIR inside the corpus was
    /// refused in the name of a `[run] scratch` the job did not have).
    pub fn scratch_named(&self) -> &'static str {
        match self.scratch {
            Some(_) => "[run] scratch",
            None => "the scratch folder (TMPDIR, as [run] scratch is not set)",
        }
    }

    /// The cluster's addresses, one per process.
    pub fn addresses(&self) -> Result<Vec<String>> {
        if let Some(given) = &self.addresses {
            return Ok(given.clone());
        }
        Ok(match &self.hostfile {
            Some(path) => {
                let hosts = read_hostfile(path)?;
                // One line a process: a longer file's last lines would be left out unsaid.
                ensure!(
                    hosts.len() == self.processes,
                    Config,
                    "hostfile {} lists {} host(s) for {} processes: give it one line a \
                     process (or --cluster auto, which takes its lines as the processes)",
                    path.display(),
                    hosts.len(),
                    self.processes
                );
                hosts
            }
            None => (0..self.processes)
                .map(|i| format!("localhost:{}", 2101 + i))
                .collect(),
        })
    }

    /// Starts the communication of a run: for several processes, forms the cluster (every process
    /// must describe the same `plan`) and runs `checks` before the verdict; for one process, runs
    /// `checks`. Returns what `timely::execute::execute_from` needs.
    pub fn start(
        &self,
        plan: &str,
        checks: impl FnOnce() -> Result<()>,
    ) -> Result<(Vec<AllocatorBuilder>, Box<dyn std::any::Any + Send>)> {
        self.validate()?;
        let hooks = Hooks::default();
        if self.processes == 1 {
            checks()?;
            let builders =
                ProcessBuilder::new_typed_vector(self.workers, hooks.refill, hooks.spill)
                    .into_iter()
                    .map(AllocatorBuilder::Process)
                    .collect();
            return Ok((builders, Box::new(())));
        }
        let addresses = self.addresses()?;
        let sockets = processes::form(
            &addresses,
            self.process,
            self.workers,
            plan,
            self.connect_timeout,
            checks,
        )?;
        let by = self
            .launcher
            .map_or(String::new(), |l| format!(", placed by {l}"));
        crate::say!(
            "neardup: process {} of {} connected to its peers ({} worker(s) each{by})",
            self.process,
            self.processes,
            self.workers
        );
        let locals = ProcessBuilder::new_typed_vector(
            self.workers,
            hooks.refill.clone(),
            hooks.spill.clone(),
        );
        let (builders, guard) =
            initialize_networking_from_sockets(locals, sockets, self.process, self.workers, hooks)
                .io_context(|| "starting the cluster's network threads".into())?;
        let builders = builders.into_iter().map(AllocatorBuilder::Tcp).collect();
        Ok((builders, Box::new(guard)))
    }
}
