//! How a run is laid out: worker threads per process, processes, and the cluster's addresses.

use std::path::PathBuf;

use anyhow::{bail, ensure, Context};

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
}

impl Default for Exec {
    fn default() -> Self {
        Exec {
            workers: 1,
            processes: 1,
            process: 0,
            hostfile: None,
        }
    }
}

/// Reads a hostfile: one `host:port` per line; blank lines and `#` comments are ignored.
pub fn read_hostfile(path: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading hostfile {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if line
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse::<u16>().ok())
            .is_none()
        {
            bail!(
                "{}:{}: expected host:port, got {line:?}",
                path.display(),
                i + 1
            );
        }
        out.push(line.to_string());
    }
    Ok(out)
}

impl Exec {
    /// Total workers in the cluster.
    pub fn peers(&self) -> usize {
        self.workers * self.processes
    }

    /// Checks the layout and builds timely's configuration.
    pub fn timely_config(&self) -> anyhow::Result<timely::Config> {
        use timely::CommunicationConfig as C;
        ensure!(self.workers >= 1, "workers must be at least 1");
        ensure!(self.processes >= 1, "processes must be at least 1");
        ensure!(
            self.process < self.processes,
            "process index {} is out of range for {} processes",
            self.process,
            self.processes
        );
        let communication = if self.processes > 1 {
            let addresses = match &self.hostfile {
                Some(path) => {
                    let hosts = read_hostfile(path)?;
                    ensure!(
                        hosts.len() >= self.processes,
                        "hostfile {} lists {} hosts for {} processes",
                        path.display(),
                        hosts.len(),
                        self.processes
                    );
                    hosts[..self.processes].to_vec()
                }
                None => (0..self.processes)
                    .map(|i| format!("localhost:{}", 2101 + i))
                    .collect(),
            };
            C::Cluster {
                threads: self.workers,
                process: self.process,
                addresses,
                report: false,
                zerocopy: false,
            }
        } else if self.hostfile.is_some() || self.process != 0 {
            bail!("--process and --hostfile need --processes greater than 1");
        } else if self.workers > 1 {
            C::Process(self.workers)
        } else {
            C::Thread
        };
        Ok(timely::Config {
            communication,
            worker: timely::WorkerConfig::default(),
        })
    }
}
