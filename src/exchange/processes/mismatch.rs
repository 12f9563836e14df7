//! The messages that name what differs between the processes of a cluster: the version, the
//! process count, the worker threads, or the first setting of their plans, with both values.

use super::Hello;
use crate::settings::narrowed;

/// The first setting where two plans differ, for the message: `` `k = 5` in process 2, `k = 3`
/// in processes 0, 1 ``. Settings are matched by key (one plan may have a line the other lacks:
/// a setting of another method, an output more), and a value written as a struct is narrowed to
/// its first field that differs (`fields.id = "idx"`).
///
/// A count of input files that differs is followed by the first file that differs, so the file
/// one process has and another lacks is named.
fn first_difference(odd: &str, reference: &str, who: &str, others: &str) -> String {
    let (a, b) = (keyed(odd), keyed(reference));
    let mut keys: Vec<&str> = a.iter().chain(&b).map(|(k, _)| *k).collect();
    let mut seen = std::collections::HashSet::new();
    keys.retain(|k| seen.insert(*k));
    let of = values;
    let say = |k: &str| {
        let (va, vb) = (of(&a, k), of(&b, k));
        let i = (0..va.len().max(vb.len()))
            .find(|&i| va.get(i) != vb.get(i))
            .unwrap_or(0);
        let (key, x, y) = narrowed(k, va.get(i).copied(), vb.get(i).copied());
        let line = |v: Option<String>| match v {
            None => "(nothing)".into(),
            Some(v) if key.is_empty() => format!("`{v}`"),
            Some(v) => format!("`{key} = {v}`"),
        };
        format!("{} in {who}, {} in {others}", line(x), line(y))
    };
    let mut differing = keys.iter().filter(|k| of(&a, k) != of(&b, k));
    let Some(first) = differing.next() else {
        return "the plans differ".into();
    };
    match differing
        .find(|k| **k == "input")
        .filter(|_| *first == "input files")
    {
        Some(files) => format!(
            "{}; the first file that differs: {}",
            say(first),
            say(files)
        ),
        None => say(first),
    }
}

/// A plan's lines as (key, value); a line without ` = ` is all value, of the key "".
fn keyed(plan: &str) -> Vec<(&str, &str)> {
    plan.lines()
        .map(|l| l.split_once(" = ").unwrap_or(("", l)))
        .collect()
}

/// The values of key `k` in `plan`, in order.
fn values<'a>(plan: &[(&'a str, &'a str)], k: &str) -> Vec<&'a str> {
    plan.iter()
        .filter(|(key, _)| *key == k)
        .map(|(_, v)| *v)
        .collect()
}

/// Process indices as a phrase: `process 0`, `processes 0, 1`.
fn processes_phrase(ps: &[usize]) -> String {
    let list: Vec<String> = ps.iter().map(|p| p.to_string()).collect();
    let noun = if ps.len() == 1 {
        "process"
    } else {
        "processes"
    };
    format!("{noun} {}", list.join(", "))
}

/// What must be equal in every process's hello.
fn agreement_key(h: &Hello) -> (&str, usize, usize, &str) {
    (&h.version, h.processes, h.workers, &h.plan)
}

/// The processes that differ from the rest, and how, the same message in every process: the
/// reference is the setting most processes share (process 0's on a tie, so with two processes
/// process 1 is the one named), and each other process is named with its first difference from
/// it. `hellos` holds every process's hello, this one's included. `None` if all agree.
pub(super) fn disagreement(hellos: &[Hello]) -> Option<String> {
    let count = |h: &Hello| {
        hellos
            .iter()
            .filter(|o| agreement_key(o) == agreement_key(h))
            .count()
    };
    // The first process of the largest group (max_by_key keeps the last maximum, so go in reverse).
    let reference = hellos.iter().rev().max_by_key(|h| count(h))?;
    let (agree, odd): (Vec<&Hello>, Vec<&Hello>) = hellos
        .iter()
        .partition(|h| agreement_key(h) == agreement_key(reference));
    let agree: Vec<usize> = agree.iter().map(|h| h.process).collect();
    let found: Vec<String> = odd
        .iter()
        .filter_map(|h| mismatch(reference, &agree, h))
        .collect();
    if found.is_empty() {
        return None;
    }
    Some(format!(
        "{}; start every process with the same job, flags and input files",
        found.join("; ")
    ))
}

/// What differs between process `odd` and the processes `agree` (whose hello is `reference`), if
/// anything: the version, process count, worker threads or the first differing plan line, with
/// both values.
pub(super) fn mismatch(reference: &Hello, agree: &[usize], odd: &Hello) -> Option<String> {
    let who = format!("process {}", odd.process);
    let others = processes_phrase(agree);
    if odd.version != reference.version {
        return Some(format!(
            "{who} runs neardup {}, {others} neardup {}: every process needs the same version",
            odd.version, reference.version
        ));
    }
    if odd.processes != reference.processes {
        return Some(format!(
            "{who} runs in a cluster of {} processes, {others} in one of {}: give every \
             process the same --processes, hostfile or launcher step",
            odd.processes, reference.processes
        ));
    }
    if odd.workers != reference.workers {
        return Some(format!(
            "{who} runs {} worker thread(s), {others} {}: every process needs the same -w",
            odd.workers, reference.workers
        ));
    }
    if odd.plan != reference.plan {
        let difference = first_difference(&odd.plan, &reference.plan, &who, &others);
        let hint = match () {
            _ if difference.starts_with("`input = ") => {
                " (input paths are compared as written, as the outputs name them: start every \
                 process in the same directory with the same job path)"
            }
            _ if difference.starts_with("`input file = ") => {
                " (the same path is another file, or a file modified at another time: the \
                 processes need one shared filesystem)"
            }
            _ => "",
        };
        return Some(format!(
            "{who} was started with other settings or inputs than {others} ({difference}){hint}"
        ));
    }
    None
}
