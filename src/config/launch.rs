//! `--cluster`: a process of a cluster learns its place (how many processes, which one it is,
//! every process's address) from what started it: Slurm's variables, a Kubernetes StatefulSet's
//! pod name, or a hostfile and this machine's name. docs/CLUSTER.md has the recipes.

use std::collections::HashMap;
use std::path::Path;

use crate::error::Result;
use crate::{bail, ensure};

/// Port a process listens on when the launcher names only hosts (`NEARDUP_PORT` overrides it);
/// the processes of one host listen on consecutive ports from it.
pub const DEFAULT_PORT: u16 = 2101;

/// What started the processes of a cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launcher {
    /// The first of Slurm, Kubernetes and a hostfile whose variables are present; one process if
    /// none is.
    Auto,
    /// `srun`: `SLURM_PROCID`, `SLURM_NTASKS`, `SLURM_JOB_NODELIST`, `SLURM_TASKS_PER_NODE`.
    Slurm,
    /// A StatefulSet behind a headless service: the pod ordinal, `NEARDUP_PROCESSES`,
    /// `NEARDUP_SERVICE`.
    Kubernetes,
    /// `--hostfile`: every line a process; this one is `NEARDUP_PROCESS`, or the line naming
    /// this machine.
    Hostfile,
}

impl Launcher {
    /// The `--cluster` value.
    pub fn parse(name: &str) -> Result<Launcher> {
        Ok(match name {
            "auto" => Launcher::Auto,
            "slurm" => Launcher::Slurm,
            "kubernetes" | "k8s" => Launcher::Kubernetes,
            "hostfile" => Launcher::Hostfile,
            _ => bail!(
                Config,
                "--cluster {name:?}: expected auto, slurm, kubernetes or hostfile"
            ),
        })
    }
}

/// A process's place in its cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// The launcher it was read from (`slurm`, `kubernetes`, `hostfile`, `none`).
    pub launcher: &'static str,
    /// Processes in the cluster.
    pub processes: usize,
    /// This process's index.
    pub process: usize,
    /// Every process's `host:port`, in process order.
    pub addresses: Vec<String>,
}

/// The variables and host name a place is read from (the process's own, or a test's).
#[derive(Clone, Debug, Default)]
pub struct Environment {
    /// Environment variables.
    pub vars: HashMap<String, String>,
    /// This machine's host name.
    pub hostname: Option<String>,
}

impl Environment {
    /// This process's environment and host name.
    pub fn current() -> Environment {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|h| h.trim().to_string())
            .or_else(|| std::env::var("HOSTNAME").ok());
        Environment {
            vars: std::env::vars().collect(),
            hostname,
        }
    }

    fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    fn number(&self, name: &str) -> Result<Option<usize>> {
        match self.var(name) {
            None => Ok(None),
            Some(v) => match v.parse() {
                Ok(n) => Ok(Some(n)),
                Err(_) => bail!(Config, "{name}={v:?} is not a number"),
            },
        }
    }

    /// A number of processes: a cluster holds at least one.
    fn count(&self, name: &str) -> Result<Option<usize>> {
        let n = self.number(name)?;
        ensure!(
            n != Some(0),
            Config,
            "{name}=0: a cluster has at least one process"
        );
        Ok(n)
    }

    /// Whether `name` is set, even to nothing (which [`Environment::var`] passes over).
    fn is_set(&self, name: &str) -> bool {
        self.vars.contains_key(name)
    }

    fn port(&self) -> Result<u16> {
        match self.var("NEARDUP_PORT") {
            None => Ok(DEFAULT_PORT),
            Some(v) => match v.parse::<u16>() {
                Ok(p) if p > 0 => Ok(p),
                _ => bail!(Config, "NEARDUP_PORT={v:?} is not a port"),
            },
        }
    }
}

/// The place `launcher` gives this process; `Auto` with no launcher found is one process
/// (`launcher: "none"`).
pub fn place(launcher: Launcher, hostfile: Option<&Path>, env: &Environment) -> Result<Place> {
    if let Some(empty) = LAUNCH_VARIABLES
        .iter()
        .find(|v| env.is_set(v) && env.var(v).is_none())
    {
        bail!(
            Config,
            "{empty} is set but empty: give it a value, or unset it (docs/CLUSTER.md)"
        )
    }
    let place = place_of(launcher, hostfile, env)?;
    let named = env.number("NEARDUP_PROCESS")?;
    match named {
        Some(n) if n != place.process && matches!(place.launcher, "slurm" | "kubernetes") => bail!(
            Config,
            "NEARDUP_PROCESS={n}, but {} makes this process {}: unset NEARDUP_PROCESS, which \
             names a line of a --hostfile",
            place.launcher,
            place.process
        ),
        _ => Ok(place),
    }
}

/// Every variable a launcher is read from.
const LAUNCH_VARIABLES: [&str; 13] = [
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_NODELIST",
    "SLURM_JOB_NODELIST",
    "SLURM_STEP_TASKS_PER_NODE",
    "SLURM_TASKS_PER_NODE",
    "NEARDUP_PORT",
    "NEARDUP_PROCESS",
    "NEARDUP_PROCESSES",
    "NEARDUP_SERVICE",
    "NEARDUP_POD_NAME",
    "NEARDUP_NAMESPACE",
];

/// [`place`], its variables checked.
fn place_of(launcher: Launcher, hostfile: Option<&Path>, env: &Environment) -> Result<Place> {
    match launcher {
        Launcher::Slurm => slurm(env),
        Launcher::Kubernetes => kubernetes(env),
        Launcher::Hostfile => match hostfile {
            Some(path) => from_hostfile(path, env),
            None => bail!(Config, "--cluster hostfile needs --hostfile FILE"),
        },
        Launcher::Auto => {
            let found = auto_launcher(env);
            if let (Some((name, variables)), Some(path)) = (&found, hostfile) {
                bail!(
                    Config,
                    "--cluster auto found {name}'s variables ({variables}) and --hostfile {}: \
                     say which gives the processes (--cluster {} or --cluster hostfile)",
                    path.display(),
                    name.to_ascii_lowercase()
                )
            }
            match found {
                // Setting a launcher's variable means a cluster: one it lacks is an error,
                // where running alone would make every process do the whole job.
                Some(("Slurm", _)) => return slurm(env),
                Some(_) => return kubernetes(env),
                None => {}
            }
            if let Some(path) = hostfile {
                from_hostfile(path, env)
            } else if let Some(v) = env.var("NEARDUP_PROCESS") {
                // It names a line of a hostfile: without one, running alone would make every
                // process do the whole job.
                bail!(
                    Config,
                    "--cluster auto: NEARDUP_PROCESS={v} is set but no --hostfile names the \
                     processes (give --hostfile FILE, or unset NEARDUP_PROCESS to run alone)"
                )
            } else {
                Ok(Place {
                    launcher: "none",
                    processes: 1,
                    process: 0,
                    addresses: Vec::new(),
                })
            }
        }
    }
}

/// The launcher whose variables are set (Slurm's task index, or any variable a StatefulSet's
/// pod spec sets), with the ones found.
fn auto_launcher(env: &Environment) -> Option<(&'static str, String)> {
    let set = |names: &[&'static str]| -> Vec<&'static str> {
        let set = names.iter().copied().filter(|v| env.var(v).is_some());
        set.collect()
    };
    let slurm = set(&["SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS"]);
    // A batch script outside srun may have a task index but no count: it runs alone.
    if slurm.len() > 1 && slurm[0] == "SLURM_PROCID" {
        return Some(("Slurm", slurm.join(", ")));
    }
    let pod = set(&KUBERNETES_VARIABLES);
    (!pod.is_empty()).then(|| ("Kubernetes", pod.join(", ")))
}

/// Slurm: the task's index and count, and the step's nodes with the tasks of each (block
/// distribution, srun's default: tasks fill the first node, then the next). A node's tasks listen
/// on consecutive ports from `NEARDUP_PORT`.
fn slurm(env: &Environment) -> Result<Place> {
    let need = |name: &str, n: Option<usize>| -> Result<usize> {
        n.ok_or_else(|| {
            crate::error::Error::Config(format!(
                "--cluster slurm: {name} is not set (run under srun)"
            ))
        })
    };
    let process = need("SLURM_PROCID", env.number("SLURM_PROCID")?)?;
    let processes = match env.count("SLURM_STEP_NUM_TASKS")? {
        Some(n) => n,
        None => need("SLURM_NTASKS", env.count("SLURM_NTASKS")?)?,
    };
    let (nodes_from, nodes) = slurm_variable(env, "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST")?;
    let nodes = expand_nodelist(nodes).map_err(|e| said_of(e, nodes_from))?;
    let per_node = match slurm_variable(env, "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE") {
        Ok((from, t)) => expand_tasks_per_node(t).map_err(|e| said_of(e, from))?,
        Err(_) => vec![processes.div_ceil(nodes.len()); nodes.len()],
    };
    let addresses = block_addresses(&nodes, &per_node, processes, env.port()?)?;
    ensure!(
        process < processes,
        Config,
        "SLURM_PROCID={process} is out of range for {processes} tasks"
    );
    check_slurm_node(env, &addresses[process], process)?;
    Ok(Place {
        launcher: "slurm",
        processes,
        process,
        addresses,
    })
}

/// The step's variable `step`, else the job's `job`, with its name; an error naming both when
/// neither is set ([`place`] refuses one set but empty).
fn slurm_variable<'a>(
    env: &'a Environment,
    step: &'static str,
    job: &'static str,
) -> Result<(&'static str, &'a str)> {
    for name in [step, job] {
        if let Some(v) = env.var(name) {
            return Ok((name, v));
        }
    }
    bail!(
        Config,
        "--cluster slurm: {job} is not set (nor {step}): run under srun"
    )
}

/// A setting's error, said of what it was read from (`SLURM_JOB_NODELIST: ...`).
fn said_of(e: crate::error::Error, source: &str) -> crate::error::Error {
    match e {
        crate::error::Error::Config(m) => crate::error::Error::Config(format!("{source}: {m}")),
        e => e,
    }
}

/// The address of each task under block distribution: node i runs `per_node[i]` consecutive
/// tasks, on ports `port`, `port + 1`, ...
fn block_addresses(
    nodes: &[String],
    per_node: &[usize],
    processes: usize,
    port: u16,
) -> Result<Vec<String>> {
    ensure!(
        nodes.len() == per_node.len(),
        Config,
        "Slurm lists {} node(s) but tasks per node for {}",
        nodes.len(),
        per_node.len()
    );
    let mut addresses = Vec::with_capacity(processes);
    for (node, &tasks) in nodes.iter().zip(per_node) {
        ensure!(
            port as usize + tasks.min(processes).saturating_sub(1) <= u16::MAX as usize,
            Config,
            "node {node} runs {tasks} task(s) on ports from NEARDUP_PORT = {port}, past 65535: \
             set a lower NEARDUP_PORT"
        );
        for local in 0..tasks.min(processes) {
            addresses.push(format!("{node}:{}", port as usize + local));
        }
        if addresses.len() >= processes {
            break;
        }
    }
    ensure!(
        addresses.len() >= processes,
        Config,
        "Slurm's nodes hold {} task(s), fewer than the {processes} of the step",
        addresses.len()
    );
    addresses.truncate(processes);
    Ok(addresses)
}

/// A task that is not on the node block distribution puts it on (srun `--distribution=cyclic`)
/// would listen on another machine's address: refused with the fix.
fn check_slurm_node(env: &Environment, address: &str, process: usize) -> Result<()> {
    let Some(here) = env.var("SLURMD_NODENAME") else {
        return Ok(());
    };
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    ensure!(
        host == here,
        Config,
        "Slurm task {process} runs on {here}, but block distribution puts it on {host}: run srun \
         with --distribution=block (its default)"
    );
    Ok(())
}

/// Expands a Slurm host list: `node[01-03,07],login1` -> node01, node02, node03, node07, login1.
/// Brackets may appear several times in one name (`rack[1-2]-n[1-2]`); zero padding is kept.
pub fn expand_nodelist(list: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let said = |e| said_of(e, &format!("Slurm node list {list:?}"));
    for item in split_top_level(list) {
        if item.trim().is_empty() {
            return Err(said(crate::error::Error::Config("an empty name".into())));
        }
        expand_name(item, &mut out).map_err(said)?;
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(twice) = out.iter().find(|n| !seen.insert(n.as_str())) {
        let e = format!("names {twice} twice: each node runs its tasks on ports of its own");
        return Err(said(crate::error::Error::Config(e)));
    }
    Ok(out)
}

/// The items of a comma-separated list whose brackets may hold commas.
fn split_top_level(list: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&list[start..]);
    items
}

/// The most names a node list may expand to (Slurm's largest clusters have tens of thousands).
const MAX_NODES: u64 = 1 << 20;

/// Appends the names of one item (`prefix[ranges]rest`) to `out`.
fn expand_name(item: &str, out: &mut Vec<String>) -> Result<()> {
    let Some(open) = item.find('[') else {
        ensure!(!item.contains(']'), Config, "unopened ']' in {item:?}");
        out.push(item.trim().to_string());
        return Ok(());
    };
    ensure!(
        !item[..open].contains(']'),
        Config,
        "unopened ']' in {item:?}"
    );
    let Some(close) = item[open..].find(']').map(|c| open + c) else {
        bail!(Config, "unclosed '[' in {item:?}")
    };
    let (prefix, ranges, rest) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
    for range in ranges.split(',') {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let width = lo.len();
        let (Ok(a), Ok(b)) = (lo.parse::<u64>(), hi.parse::<u64>()) else {
            bail!(Config, "bad range {range:?}")
        };
        ensure!(a <= b, Config, "range {range:?} runs backwards");
        ensure!(
            b - a < MAX_NODES - (out.len() as u64).min(MAX_NODES),
            Config,
            "range {range:?} names more than {MAX_NODES} nodes"
        );
        for n in a..=b {
            expand_name(&format!("{prefix}{n:0width$}{rest}"), out)?;
        }
    }
    Ok(())
}

/// Expands Slurm's tasks per node: `2(x3),1` -> 2, 2, 2, 1.
pub fn expand_tasks_per_node(list: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (count, times) = match item.split_once("(x") {
            Some((c, t)) => (c, t.trim_end_matches(')')),
            None => (item, "1"),
        };
        let (Ok(count), Ok(times)) = (count.parse::<usize>(), times.parse::<usize>()) else {
            bail!(Config, "Slurm tasks per node {list:?}: bad item {item:?}")
        };
        ensure!(
            times as u64 <= MAX_NODES,
            Config,
            "Slurm tasks per node {list:?}: {item:?} names more than {MAX_NODES} nodes"
        );
        out.extend(std::iter::repeat_n(count, times));
    }
    Ok(out)
}

/// The variables a StatefulSet's pod spec sets for `--cluster kubernetes`.
const KUBERNETES_VARIABLES: [&str; 3] =
    ["NEARDUP_SERVICE", "NEARDUP_PROCESSES", "NEARDUP_POD_NAME"];

/// Kubernetes: a StatefulSet's pods are `<set>-<ordinal>` (`NEARDUP_POD_NAME`, else the host
/// name), reachable as `<set>-<i>.<service>` through the headless service `NEARDUP_SERVICE`;
/// `NEARDUP_PROCESSES` is the set's replicas. The variables the pod spec sets are checked first,
/// so a missing one is named (not a host name that only looked like a pod's).
fn kubernetes(env: &Environment) -> Result<Place> {
    let outside = match env.var("KUBERNETES_SERVICE_HOST") {
        None => " (KUBERNETES_SERVICE_HOST is not set either: is this a pod?)",
        Some(_) => "",
    };
    let Some(service) = env.var("NEARDUP_SERVICE") else {
        bail!(
            Config,
            "--cluster kubernetes: set NEARDUP_SERVICE to the headless service's name{outside}"
        )
    };
    let Some(processes) = env.count("NEARDUP_PROCESSES")? else {
        bail!(
            Config,
            "--cluster kubernetes: set NEARDUP_PROCESSES to the StatefulSet's replicas{outside}"
        )
    };
    let pod = env
        .var("NEARDUP_POD_NAME")
        .map(str::to_string)
        .or_else(|| env.hostname.clone());
    let Some(pod) = pod else {
        bail!(
            Config,
            "--cluster kubernetes: no pod name (set NEARDUP_POD_NAME from metadata.name)"
        )
    };
    // A StatefulSet numbers its pods 0, 1, ...: no sign, no leading zero, a set's name first.
    let ordinal_of = |o: &str| {
        let canonical = !o.is_empty() && (o == "0" || !o.starts_with('0'));
        (canonical && o.bytes().all(|b| b.is_ascii_digit())).then(|| o.parse().ok())?
    };
    let Some((set, ordinal)) = pod
        .rsplit_once('-')
        .filter(|(s, _)| !s.is_empty())
        .and_then(|(s, o)| Some((s, ordinal_of(o)?)))
    else {
        let from = match env.var("NEARDUP_POD_NAME") {
            Some(_) => "NEARDUP_POD_NAME",
            None => "the host name; set NEARDUP_POD_NAME from metadata.name",
        };
        bail!(
            Config,
            "--cluster kubernetes: pod name {pod:?} ({from}) is not <statefulset>-<ordinal>"
        )
    };
    let domain = match env.var("NEARDUP_NAMESPACE") {
        Some(ns) => format!("{service}.{ns}.svc"),
        None => service.to_string(),
    };
    let port = env.port()?;
    ensure!(
        ordinal < processes,
        Config,
        "pod {pod} has ordinal {ordinal}, but NEARDUP_PROCESSES = {processes}"
    );
    Ok(Place {
        launcher: "kubernetes",
        processes,
        process: ordinal,
        addresses: (0..processes)
            .map(|i| format!("{set}-{i}.{domain}:{port}"))
            .collect(),
    })
}

/// A hostfile: a process a line; this one is `NEARDUP_PROCESS`, else the one line whose host is
/// this machine's name.
fn from_hostfile(path: &Path, env: &Environment) -> Result<Place> {
    let addresses = super::exec::read_hostfile(path)?;
    let processes = addresses.len();
    ensure!(
        processes >= 1,
        Config,
        "hostfile {} lists no host",
        path.display()
    );
    let process = match env.number("NEARDUP_PROCESS")? {
        Some(p) => p,
        None => line_of_this_host(path, &addresses, env)?,
    };
    ensure!(
        process < processes,
        Config,
        "NEARDUP_PROCESS={process} is out of range for the {processes} line(s) of hostfile {}",
        path.display()
    );
    Ok(Place {
        launcher: "hostfile",
        processes,
        process,
        addresses,
    })
}

/// The index of the one hostfile line naming this machine (its full or short name).
fn line_of_this_host(path: &Path, addresses: &[String], env: &Environment) -> Result<usize> {
    let Some(name) = env.hostname.as_deref() else {
        bail!(
            Config,
            "this machine's name is unknown: set NEARDUP_PROCESS to its line of hostfile {}",
            path.display()
        )
    };
    // Host names are compared without case, as DNS compares them.
    let name = name.to_ascii_lowercase();
    let short = name.split('.').next().unwrap_or(&name);
    let lines: Vec<usize> = (0..addresses.len())
        .filter(|&i| {
            let host = addresses[i].rsplit_once(':').map_or("", |(h, _)| h);
            let host = host.to_ascii_lowercase();
            host == name || host == short || host.split('.').next() == Some(short)
        })
        .collect();
    match lines[..] {
        [one] => Ok(one),
        [] => bail!(
            Config,
            "no line of hostfile {} names this machine ({name}): set NEARDUP_PROCESS",
            path.display()
        ),
        _ => bail!(
            Config,
            "lines {} of hostfile {} all name this machine ({name}): set NEARDUP_PROCESS to tell \
             its processes apart",
            lines
                .iter()
                .map(|i| (i + 1).to_string())
                .collect::<Vec<_>>()
                .join(", "),
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)], hostname: Option<&str>) -> Environment {
        Environment {
            vars: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            hostname: hostname.map(str::to_string),
        }
    }

    #[test]
    fn slurm_node_lists_expand_with_padding_ranges_and_several_brackets() {
        let l = expand_nodelist("node[01-03,07],login1,rack[1-2]-n[8-9]").unwrap();
        let want = [
            "node01", "node02", "node03", "node07", "login1", "rack1-n8", "rack1-n9", "rack2-n8",
            "rack2-n9",
        ];
        assert_eq!(l, want);
        assert!(expand_nodelist("node[3-1]").is_err());
        assert!(expand_nodelist("node[1-").is_err());
        assert_eq!(expand_tasks_per_node("2(x3),1").unwrap(), [2, 2, 2, 1]);
        assert!(expand_tasks_per_node("2(xa)").is_err());
    }

    #[test]
    fn slurm_tasks_are_placed_by_block_distribution_with_a_port_per_task_of_a_node() {
        let vars = [
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "5"),
            ("SLURM_JOB_NODELIST", "cn[7-9]"),
            ("SLURM_TASKS_PER_NODE", "2(x2),1"),
            ("SLURMD_NODENAME", "cn8"),
            ("NEARDUP_PORT", "4000"),
        ];
        let p = place(Launcher::Auto, None, &env(&vars, None)).unwrap();
        assert_eq!(p.launcher, "slurm");
        assert_eq!((p.processes, p.process), (5, 3));
        let want = ["cn7:4000", "cn7:4001", "cn8:4000", "cn8:4001", "cn9:4000"];
        assert_eq!(p.addresses, want);
        // Cyclic distribution puts task 3 elsewhere: refused with the fix.
        let mut cyclic = vars.to_vec();
        cyclic[4] = ("SLURMD_NODENAME", "cn7");
        let err = place(Launcher::Slurm, None, &env(&cyclic, None))
            .unwrap_err()
            .to_string();
        assert!(err.contains("--distribution=block"), "{err}");
        let err = place(Launcher::Slurm, None, &env(&[], None)).unwrap_err();
        assert!(err.to_string().contains("SLURM_PROCID"), "{err}");
    }

    #[test]
    fn a_kubernetes_pod_takes_its_ordinal_and_names_its_peers_through_the_headless_service() {
        let vars = [
            ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
            ("NEARDUP_SERVICE", "neardup"),
            ("NEARDUP_PROCESSES", "3"),
        ];
        let p = place(Launcher::Auto, None, &env(&vars, Some("dedup-worker-2"))).unwrap();
        assert_eq!((p.launcher, p.processes, p.process), ("kubernetes", 3, 2));
        assert_eq!(p.addresses[0], "dedup-worker-0.neardup:2101");
        assert_eq!(p.addresses[2], "dedup-worker-2.neardup:2101");
        let err = place(
            Launcher::Kubernetes,
            None,
            &env(&vars, Some("dedup-worker-5")),
        );
        assert!(err.unwrap_err().to_string().contains("ordinal 5"));
        let err = place(Launcher::Kubernetes, None, &env(&vars, Some("laptop")));
        assert!(err
            .unwrap_err()
            .to_string()
            .contains("<statefulset>-<ordinal>"));
    }

    /// Regression (found by a probe): `--cluster kubernetes` outside a pod blamed the machine's
    /// host name for not being a pod's, never naming the variables it lacked; and with
    /// `--cluster auto`, a pod that forgot NEARDUP_SERVICE ran the whole job alone (every pod of
    /// the set would have).
    #[test]
    fn a_kubernetes_pod_missing_a_variable_is_told_which_and_never_runs_alone() {
        let err = place(Launcher::Kubernetes, None, &env(&[], Some("vm"))).unwrap_err();
        let err = err.to_string();
        assert!(err.contains("NEARDUP_SERVICE"), "{err}");
        assert!(err.contains("KUBERNETES_SERVICE_HOST is not set"), "{err}");
        let pod = [
            ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
            ("NEARDUP_POD_NAME", "dedup-1"),
            ("NEARDUP_PROCESSES", "2"),
        ];
        let err = place(Launcher::Auto, None, &env(&pod, Some("dedup-1"))).unwrap_err();
        let err = err.to_string();
        assert!(err.contains("set NEARDUP_SERVICE"), "{err}");
        assert!(!err.contains("is not set either"), "{err}");
        // A pod that sets none of them is not a cluster: one process.
        let alone = [("KUBERNETES_SERVICE_HOST", "10.0.0.1")];
        let p = place(Launcher::Auto, None, &env(&alone, Some("web-0"))).unwrap();
        assert_eq!((p.launcher, p.processes), ("none", 1));
        let host = place(Launcher::Kubernetes, None, &env(&alone[..], Some("vm")));
        let host = host.unwrap_err().to_string();
        assert!(host.contains("NEARDUP_SERVICE"), "{host}");
        let named = [
            ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
            ("NEARDUP_SERVICE", "nd"),
            ("NEARDUP_PROCESSES", "2"),
        ];
        let err = place(Launcher::Kubernetes, None, &env(&named, Some("vm"))).unwrap_err();
        assert!(
            err.to_string()
                .contains("the host name; set NEARDUP_POD_NAME"),
            "{err}"
        );
        // Defect (probe 9): the same variables without KUBERNETES_SERVICE_HOST ran one process
        // alone, where NEARDUP_PROCESS without a hostfile is refused for that danger.
        let outside = [("NEARDUP_SERVICE", "nd"), ("NEARDUP_PROCESSES", "3")];
        let p = place(Launcher::Auto, None, &env(&outside, Some("dedup-1"))).unwrap();
        assert_eq!((p.launcher, p.processes, p.process), ("kubernetes", 3, 1));
        let err = place(Launcher::Auto, None, &env(&outside[..1], Some("dedup-1"))).unwrap_err();
        assert!(err.to_string().contains("NEARDUP_PROCESSES"), "{err}");
    }

    /// Defects (probe 9): a port past 65535 was found only when the process listened, while its
    /// peers waited out their timeout; a stray ']' made a host name; a huge range was expanded in
    /// full; a pod `dedup-+1` was ordinal 1; a hostfile of port 0, no host or two addresses on a
    /// line was read; and `VM:5401` did not name the machine `vm`.
    #[test]
    fn launch_places_refuse_what_no_peer_could_reach() {
        let slurm = |port: &str, nodes: &str| {
            let vars = [
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "2"),
                ("SLURM_JOB_NODELIST", nodes),
                ("NEARDUP_PORT", port),
            ];
            place(Launcher::Slurm, None, &env(&vars, None)).map_err(|e| e.to_string())
        };
        let err = slurm("65535", "127.0.0.1").unwrap_err();
        assert!(err.contains("past 65535"), "{err}");
        assert!(slurm("65534", "127.0.0.1").is_ok());
        for bad in ["node1]", "node[1-3]]x", "n[0-9999999999]"] {
            assert!(slurm("4000", bad).is_err(), "{bad}");
        }
        assert_eq!(
            slurm("4000", "n[0-1]").unwrap().addresses,
            ["n0:4000", "n1:4000"]
        );
        let pods = [
            ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
            ("NEARDUP_SERVICE", "nd"),
            ("NEARDUP_PROCESSES", "3"),
            ("NEARDUP_POD_NAME", "dedup-+1"),
        ];
        assert!(place(Launcher::Kubernetes, None, &env(&pods, None)).is_err());
        for text in [
            "127.0.0.1:0\n",
            ":4703\n",
            "127.0.0.1:4708 127.0.0.1:4709\n",
        ] {
            let (_dir, path) = hosts(text);
            let err = crate::config::exec::read_hostfile(&path).unwrap_err();
            assert!(
                err.to_string().contains(":1: expected one host:port"),
                "{err}"
            );
        }
        let (_dir, path) = hosts("VM:5401\nother:5401\n");
        let p = place(Launcher::Hostfile, Some(&path), &env(&[], Some("vm"))).unwrap();
        assert_eq!(p.process, 0);
    }

    /// Defects (probe 13b): a count of 0 processes was said to put task 0 out of range; an empty
    /// node list was "not set"; a bad node list or tasks per node did not name its variable;
    /// `--hostfile` under `--cluster auto` was passed over when Slurm's variables were set.
    /// Probe 23 (1, 5, 6, 7, 9): a launcher variable set but empty was taken for unset, so
    /// `--cluster auto` with `SLURM_PROCID=` ran the whole job alone and `NEARDUP_PORT=` moved to
    /// 2101; `NEARDUP_PROCESS` was passed over under Slurm; a node list naming a node twice gave two
    /// tasks one address, and a trailing comma passed; pods `-1` and `dedup-01` were taken; a
    /// hostfile's bare IPv6 address lost its last group to the port. Each is refused, named.
    #[test]
    fn empty_variables_conflicting_indexes_and_unreadable_addresses_are_refused_before_work() {
        let slurm = [
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_JOB_NODELIST", "n[1-2]"),
        ];
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut vars = slurm.to_vec();
            vars.retain(|(k, _)| extra.iter().all(|(e, _)| e != k));
            vars.extend_from_slice(extra);
            vars
        };
        let refused = |launcher, vars: &[(&str, &str)]| {
            place(launcher, None, &env(vars, Some("n2")))
                .map_err(|e| e.to_string())
                .unwrap_err()
        };
        assert!(place(Launcher::Auto, None, &env(&slurm, Some("n2"))).is_ok());
        for (extra, says) in [
            (("SLURM_PROCID", ""), "SLURM_PROCID is set but empty"),
            (("SLURM_NTASKS", " "), "SLURM_NTASKS is set but empty"),
            (("NEARDUP_PORT", ""), "NEARDUP_PORT is set but empty"),
            (
                ("SLURM_STEP_NODELIST", ""),
                "SLURM_STEP_NODELIST is set but empty",
            ),
            (
                ("NEARDUP_NAMESPACE", ""),
                "NEARDUP_NAMESPACE is set but empty",
            ),
            (
                ("NEARDUP_PROCESS", "0"),
                "NEARDUP_PROCESS=0, but slurm makes this process 1",
            ),
            (("SLURM_JOB_NODELIST", "n1,n1"), "names n1 twice"),
            (("SLURM_JOB_NODELIST", "n[1-2],"), "an empty name"),
        ] {
            let err = refused(Launcher::Auto, &with(&[extra]));
            assert!(err.contains(says), "{extra:?}: {err}");
        }
        assert!(place(
            Launcher::Auto,
            None,
            &env(&with(&[("NEARDUP_PROCESS", "1")]), None)
        )
        .is_ok());
        let pod = |name: &'static str| {
            let vars = [
                ("NEARDUP_SERVICE", "svc"),
                ("NEARDUP_PROCESSES", "3"),
                ("NEARDUP_POD_NAME", name),
            ];
            place(Launcher::Kubernetes, None, &env(&vars, None)).map_err(|e| e.to_string())
        };
        assert_eq!(pod("dedup-1").unwrap().process, 1);
        for name in ["-1", "dedup-01", "dedup-+1"] {
            let err = pod(name).unwrap_err();
            assert!(
                err.contains("is not <statefulset>-<ordinal>"),
                "{name}: {err}"
            );
        }
        for text in ["127.0.0.1:23540\nfd00::2\n", "::1:23210\n[::1]:23211\n"] {
            let (_dir, path) = hosts(text);
            let err = crate::config::exec::read_hostfile(&path)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("without brackets") && err.contains(":1:") == text.starts_with(':'),
                "{err}"
            );
        }
    }

    #[test]
    fn launcher_variables_that_cannot_make_a_cluster_are_named() {
        let slurm = |extra: &[(&'static str, &'static str)]| {
            let mut vars = vec![
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "2"),
                ("SLURM_JOB_NODELIST", "n[1-2]"),
            ];
            for (k, v) in extra {
                vars.retain(|(name, _)| name != k);
                vars.push((k, v));
            }
            place(Launcher::Slurm, None, &env(&vars, None))
                .map_err(|e| e.to_string())
                .unwrap_err()
        };
        for (extra, says) in [
            (
                ("SLURM_NTASKS", "0"),
                "SLURM_NTASKS=0: a cluster has at least one process",
            ),
            (
                ("SLURM_STEP_NUM_TASKS", "0"),
                "SLURM_STEP_NUM_TASKS=0: a cluster has",
            ),
            (
                ("SLURM_JOB_NODELIST", " "),
                "SLURM_JOB_NODELIST is set but empty",
            ),
            (
                ("SLURM_JOB_NODELIST", "n[2-1]"),
                "SLURM_JOB_NODELIST: Slurm node list",
            ),
            (
                ("SLURM_TASKS_PER_NODE", "2(xa)"),
                "SLURM_TASKS_PER_NODE: Slurm tasks per node",
            ),
        ] {
            let err = slurm(&[extra]);
            assert!(err.contains(says), "{extra:?}: {err}");
        }
        let pods = [("NEARDUP_SERVICE", "nd"), ("NEARDUP_PROCESSES", "0")];
        let err = place(Launcher::Auto, None, &env(&pods, Some("dedup-0"))).unwrap_err();
        assert!(err.to_string().contains("NEARDUP_PROCESSES=0"), "{err}");
        let (_dir, path) = hosts("a:2101\nb:2101\n");
        let tasks = [("SLURM_PROCID", "1"), ("SLURM_NTASKS", "2")];
        let err = place(Launcher::Auto, Some(&path), &env(&tasks, Some("b"))).unwrap_err();
        let err = err.to_string();
        assert!(
            err.contains("Slurm's variables (SLURM_PROCID, SLURM_NTASKS)")
                && err.contains("--cluster slurm or --cluster hostfile"),
            "{err}"
        );
        let err = place(Launcher::Auto, Some(&path), &env(&pods[..1], Some("b"))).unwrap_err();
        assert!(
            err.to_string()
                .contains("Kubernetes's variables (NEARDUP_SERVICE)"),
            "{err}"
        );
        // Outside srun (a batch script) a task index without a count is no cluster.
        let batch = place(Launcher::Auto, None, &env(&tasks[..1], None)).unwrap();
        assert_eq!((batch.launcher, batch.processes), ("none", 1));
        let batch = place(Launcher::Auto, Some(&path), &env(&tasks[..1], Some("b"))).unwrap();
        assert_eq!((batch.launcher, batch.process), ("hostfile", 1));
    }

    /// A hostfile holding `text`, in a directory that lives as long as the first value.
    fn hosts(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hosts");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    /// Regression (found by probes): a hostfile that gave two lines one address made the second
    /// process wait out its timeout for a peer that could never listen; `h:2101` and `H:02101`
    /// are one address too.
    #[test]
    fn a_hostfile_listing_one_address_twice_is_refused() {
        // Defect (probe 9): `localhost` and `127.0.0.1` on one port were two addresses, and the
        // second process connected to its own listener and waited out its timeout.
        for (text, line) in [
            ("127.0.0.1:23501\n# c\n127.0.0.1:23501\n", ":3:"),
            ("Node1:2101\nnode1:02101\n", ":2:"),
            ("localhost:4701\n127.0.0.1:4701\n", ":2:"),
            ("[::1]:4701\n[0:0::1]:4701\n", ":2:"),
        ] {
            let (_dir, path) = hosts(text);
            let err = crate::config::exec::read_hostfile(&path)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(line) && err.contains("line 1's address"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_hostfile_process_is_its_variable_or_the_one_line_naming_this_machine() {
        let (_dir, path) = hosts("alpha.lan:2101\nbeta:2101\nbeta:2102\n");
        let mine = |vars: &[(&str, &str)], host: &str| {
            place(Launcher::Auto, Some(&path), &env(vars, Some(host)))
        };
        let p = mine(&[], "alpha").unwrap();
        assert_eq!((p.launcher, p.processes, p.process), ("hostfile", 3, 0));
        assert_eq!(
            mine(&[("NEARDUP_PROCESS", "2")], "beta").unwrap().process,
            2
        );
        let err = mine(&[], "beta").unwrap_err().to_string();
        assert!(
            err.contains("lines 2, 3") && err.contains("NEARDUP_PROCESS"),
            "{err}"
        );
        let err = mine(&[], "gamma").unwrap_err().to_string();
        assert!(err.contains("no line"), "{err}");
        let err = mine(&[("NEARDUP_PROCESS", "3")], "x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("out of range"), "{err}");
        // No launcher at all: one process.
        let p = place(Launcher::Auto, None, &env(&[], Some("alpha"))).unwrap();
        assert_eq!((p.processes, p.launcher), (1, "none"));
    }

    /// Regression (found by a probe): `NEARDUP_PROCESS` without a hostfile ran the whole job
    /// alone, as every process so launched would.
    #[test]
    fn neardup_process_without_a_hostfile_is_refused_not_run_alone() {
        let vars = [("NEARDUP_PROCESS", "1")];
        let err = place(Launcher::Auto, None, &env(&vars, Some("alpha")))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("NEARDUP_PROCESS=1") && err.contains("--hostfile"),
            "{err}"
        );
    }

    /// Regression (found by a probe): `--processes 2` with a hostfile of three lines ran on the
    /// first two and said nothing of the third; one line short was refused.
    #[test]
    fn a_hostfile_of_more_or_fewer_lines_than_processes_is_refused() {
        let (_dir, path) = hosts("127.0.0.1:2151\n127.0.0.1:2152\n10.1.1.1:2153\n");
        let exec = |processes| crate::config::Exec {
            processes,
            hostfile: Some(path.clone()),
            ..Default::default()
        };
        for n in [2, 4] {
            let err = exec(n).addresses().unwrap_err().to_string();
            assert!(
                err.contains(&format!("3 host(s) for {n} processes")),
                "{err}"
            );
        }
        assert_eq!(exec(3).addresses().unwrap().len(), 3);
    }
}
