//! Forming a cluster of processes: connections with a deadline, and a handshake that refuses to
//! start processes that would compute different things.
//!
//! timely's own start-up retries a missing peer forever and trusts that every process runs the same
//! program with the same settings; a mismatch gives a panic or a silently wrong answer. neardup
//! connects the processes itself (process p connects to every lower-numbered process and accepts the
//! higher ones, as timely does), then on every connection both sides send a hello: protocol magic,
//! version, process index, process count, worker threads and a description of the plan. Each
//! process then runs its own checks (process 0 prepares the outputs) and sends every peer a verdict;
//! only if all verdicts are "go" are the sockets handed to timely. Otherwise every process ends with
//! the first difference named.
//!
//! The sockets handed over send TCP keep-alive probes ([`probe_when_silent`]): a peer whose machine
//! died or was cut off without a reset (power lost, a kernel panic, a partition) stops answering
//! them, the read fails after about two minutes of silence, and the run ends with the lost peer
//! named instead of waiting forever. A peer that is alive but stopped (SIGSTOP) still has its
//! kernel answer, so it is not seen.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::error::{Error, IoContext, Result};
use crate::{bail, ensure};

mod mismatch;
use mismatch::disagreement;

/// Seconds of silence on a connection before the first keep-alive probe, seconds between probes,
/// and unanswered probes before the connection is declared dead: 30 + 9 x 10 s.
const KEEP_ALIVE: (i32, i32, i32) = (30, 10, 9);

/// The socket options that set keep-alive probes, as (level, option): on, then [`KEEP_ALIVE`]'s
/// silence, interval and count.
const KEEP_ALIVE_OPTIONS: [(libc::c_int, libc::c_int); 4] = [
    (libc::SOL_SOCKET, libc::SO_KEEPALIVE),
    (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE),
    (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL),
    (libc::IPPROTO_TCP, libc::TCP_KEEPCNT),
];

/// Opens every handshake; changed when the hello's layout changes.
const MAGIC: &[u8; 8] = b"NEARDUP\x02";
/// Longest hello accepted (a plan lists its input files).
const MAX_HELLO: u32 = 256 << 20;

/// How long an accepted connection may stay silent before its hello begins: a peer sends it as soon
/// as it connects, so a connection that says nothing (a port scanner, a health check) is dropped
/// after this instead of holding up the handshake until the deadline.
const FIRST_WORD: Duration = Duration::from_secs(3);

/// What a process says about itself.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Hello {
    version: String,
    process: usize,
    processes: usize,
    workers: usize,
    /// The plan, one `key = value` per line.
    plan: String,
}

fn write_frame(s: &mut TcpStream, bytes: &[u8]) -> io::Result<()> {
    s.write_all(&(bytes.len() as u32).to_le_bytes())?;
    s.write_all(bytes)?;
    s.flush()
}

fn read_frame(s: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len);
    if len > MAX_HELLO {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "handshake message too long",
        ));
    }
    let mut buf = vec![0u8; len as usize];
    s.read_exact(&mut buf)?;
    Ok(buf)
}

fn send_hello(s: &mut TcpStream, hello: &Hello) -> io::Result<()> {
    s.write_all(MAGIC)?;
    write_frame(s, &serde_json::to_vec(hello)?)
}

/// Reads a peer's hello; `first_word` bounds the wait for its first bytes (the socket's read
/// timeout bounds the rest).
fn read_hello(s: &mut TcpStream, peer: &str, first_word: Option<Duration>) -> Result<Hello> {
    let mut magic = [0u8; 8];
    let waited = s.read_timeout().ok().flatten();
    // The shorter of the two waits, and the one the message names.
    let wait = first_word
        .filter(|w| waited.is_none_or(|t| *w < t))
        .or(waited);
    s.set_read_timeout(wait).map_err(net)?;
    let timeout = wait.unwrap_or_default().as_secs_f64();
    // An accepted connection (a first word awaited) came from the peer; ours went to it.
    let there = match first_word {
        Some(_) => "connecting from there",
        None => "listening there",
    };
    s.read_exact(&mut magic).map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::Cluster(format!(
            "no handshake from {peer}: it sent nothing within {} s (is another \
             program {there}, or is that process stopped?)",
            seconds(timeout)
        )),
        _ => Error::Io {
            context: format!("no handshake from {peer}"),
            cause: e,
        },
    })?;
    s.set_read_timeout(waited).map_err(net)?;
    if &magic != MAGIC {
        bail!(
            Cluster,
            "{peer} is not a neardup process of this version (a different program, or a neardup \
             with another cluster protocol, is {there})"
        );
    }
    let frame = read_frame(s).io_context(|| format!("reading the handshake of {peer}"))?;
    serde_json::from_slice(&frame)
        .map_err(|e| Error::Cluster(format!("bad handshake from {peer}: {e}")))
}

/// Why a process that connected from `from` is not one this process `me` of `n` expects;
/// `earlier`: where the process of its index connected from before, if one did.
fn unexpected(
    peer: &Hello,
    from: std::net::SocketAddr,
    me: usize,
    n: usize,
    earlier: Option<std::net::SocketAddr>,
) -> String {
    let p = peer.process;
    if peer.processes != n {
        return format!(
            "a process from {from} says it is process {p} of {}, where this process is {me} of \
             {n}: give every process the same hostfile (or --processes)",
            peer.processes
        );
    }
    if let Some(earlier) = earlier {
        return format!(
            "two processes say they are process {p}, one connected from {earlier} and one from \
             {from}: give each process its own index (--process, NEARDUP_PROCESS, or its own \
             line of the hostfile)"
        );
    }
    format!(
        "a process from {from} says it is process {p}, which is not one this process ({me} of \
         {n}) waits for: only processes after {me} connect to it; are the processes placed alike?"
    )
}

/// Seconds for a message: whole from 10 on, else to the millisecond (`0.001`, `2.5`).
fn seconds(secs: f64) -> String {
    if secs >= 10.0 {
        return format!("{secs:.0}");
    }
    let s = format!("{secs:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A network error while forming the cluster.
fn net(e: io::Error) -> Error {
    Error::Cluster(format!("network error while forming the cluster: {e}"))
}

/// Connects to `addr` until `deadline`, retrying refused connections and failed name lookups.
fn connect(
    addr: &str,
    deadline: Instant,
    between: &mut dyn FnMut() -> Result<()>,
) -> Result<TcpStream> {
    let mut last: String;
    loop {
        let attempt = addr
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve: {e}"));
        last = match attempt {
            Ok(addrs) => {
                let mut err = String::from("no address");
                let mut stream = None;
                for a in addrs {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match TcpStream::connect_timeout(&a, left.max(Duration::from_millis(10))) {
                        Ok(s) => {
                            stream = Some(s);
                            break;
                        }
                        Err(e) => err = e.to_string(),
                    }
                }
                if let Some(s) = stream {
                    return Ok(s);
                }
                err
            }
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            bail!(Cluster, "{last}");
        }
        between()?;
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Listens on this process's own `addr`, retrying a failed name lookup until `deadline`: a pod's
/// own DNS name (a StatefulSet's headless service) may be published only once the pod runs.
fn listen(addr: &str, deadline: Instant) -> io::Result<TcpListener> {
    loop {
        match addr.to_socket_addrs() {
            Ok(found) => return TcpListener::bind(&found.collect::<Vec<_>>()[..]),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// Connects this process (`me` of `addresses.len()`) to every other, exchanges hellos and verdicts,
/// and returns one socket per peer (`None` at `me`), ready for timely. `checks` runs once every hello
/// is in; its error (or any mismatch) stops every process.
pub fn form(
    addresses: &[String],
    me: usize,
    workers: usize,
    plan: &str,
    timeout: Duration,
    checks: impl FnOnce() -> Result<()>,
) -> Result<Vec<Option<TcpStream>>> {
    let n = addresses.len();
    let hello = Hello {
        version: env!("CARGO_PKG_VERSION").to_string(),
        process: me,
        processes: n,
        workers,
        plan: plan.to_string(),
    };
    let deadline = Instant::now() + timeout;
    let listener = listen(&addresses[me], deadline).io_context(|| {
        format!(
            "process {me} cannot listen on {} (its own address in the cluster's list)",
            addresses[me]
        )
    })?;
    listener.set_nonblocking(true).map_err(net)?;
    let mut f = Forming {
        addresses,
        me,
        deadline,
        secs: timeout.as_secs_f64(),
        sockets: (0..n).map(|_| None).collect(),
        early: (0..n).map(|_| None).collect(),
        problems: Vec::new(),
        hellos: vec![hello.clone()],
        hello,
    };
    f.connect_lower()?;
    if f.problems.is_empty() {
        f.accept_higher(&listener)?;
    }
    f.hellos.sort_by_key(|h| h.process);
    // A peer that can never agree has been named already (only the first problem is told).
    if f.problems.is_empty() {
        f.problems.extend(disagreement(&f.hellos));
    }
    // Local checks, then everyone's verdict.
    if f.problems.is_empty() {
        if let Err(e) = checks() {
            f.problems.push(e.to_string());
        }
    }
    f.verdicts()?;
    for s in f.sockets.iter_mut().flatten() {
        s.set_read_timeout(None).map_err(net)?;
        probe_when_silent(s).map_err(net)?;
    }
    Ok(f.sockets)
}

/// Turns on TCP keep-alive probes on `s` after [`KEEP_ALIVE`]'s silence, interval and count, so
/// that a read from a peer whose machine is gone fails instead of blocking forever.
fn probe_when_silent(s: &TcpStream) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let (idle, interval, count) = KEEP_ALIVE;
    for ((level, name), value) in KEEP_ALIVE_OPTIONS
        .into_iter()
        .zip([1, idle, interval, count])
    {
        // SAFETY: a valid socket, and a pointer to an `int` of the length given.
        let done = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                level,
                name,
                (&value as *const i32).cast(),
                std::mem::size_of::<i32>() as libc::socklen_t,
            )
        };
        if done != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A cluster being formed, as one process sees it.
struct Forming<'a> {
    addresses: &'a [String],
    me: usize,
    hello: Hello,
    deadline: Instant,
    /// The wait, in seconds, for messages.
    secs: f64,
    /// One socket per peer (`None` at `me` and for peers not yet connected).
    sockets: Vec<Option<TcpStream>>,
    /// The verdicts read while this process still waited for others ([`Forming::read_early_verdicts`]).
    early: Vec<Option<Vec<u8>>>,
    /// What is wrong, first first: every process says the first it found.
    problems: Vec<String>,
    /// Every process's hello, to name the one that differs the same way in every process.
    hellos: Vec<Hello>,
}

impl Forming<'_> {
    /// Waits for a peer's messages until the deadline (at least a second).
    fn wait_for(&self, s: &TcpStream) -> Result<()> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        s.set_read_timeout(Some(left.max(Duration::from_secs(1))))
            .map_err(net)
    }

    /// Lower-numbered processes: connect, send our hello, read theirs.
    fn connect_lower(&mut self) -> Result<()> {
        let (me, secs, addresses, deadline) = (self.me, self.secs, self.addresses, self.deadline);
        for (p, addr) in addresses.iter().enumerate().take(me) {
            // Between tries, the verdicts lower processes sent already are read, and one that
            // left stops this process (said as itself, not as the next one unreached).
            let mut stopped = None;
            let tried = connect(addr, deadline, &mut || {
                let refused = self.read_early_verdicts().err();
                let stop = refused.is_some();
                stopped = stopped.take().or(refused);
                ensure!(!stop, Cluster, "stopped by a verdict");
                Ok(())
            });
            if let Some(e) = stopped {
                return Err(e);
            }
            let mut s = tried.map_err(|e| {
                Error::Cluster(format!(
                    "process {me} could not reach process {p} at {addr} within {} s ({e}); \
                     is it running, and are the addresses right (the hostfile, or the launcher's \
                     variables)? (--connect-timeout sets the wait)",
                    seconds(secs)
                ))
            })?;
            s.set_nodelay(true).map_err(net)?;
            self.wait_for(&s)?;
            send_hello(&mut s, &self.hello).map_err(net)?;
            let peer = read_hello(&mut s, &format!("process {p} at {addr}"), None)?;
            if peer.process != p {
                self.problems.push(format!(
                    "{addr} answered as process {}, but it is process {p}'s line in the hostfile",
                    peer.process
                ));
            }
            if self.joined(p, peer, s) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Takes process `p`'s connection `s` and hello `peer`; true if the cluster can never form
    /// with it ([`Forming::never_agrees`]), so forming stops here.
    fn joined(&mut self, p: usize, peer: Hello, s: TcpStream) -> bool {
        let apart = self.never_agrees(&peer);
        self.hellos.push(peer);
        self.sockets[p] = Some(s);
        apart
    }

    /// True if `peer` runs another version or another number of processes than this one: the
    /// cluster can never form (a process counted among more processes waits for one that never
    /// comes), so this process says so at once, to the peers it has ([`Forming::verdicts`]),
    /// instead of waiting out the deadline.
    fn never_agrees(&mut self, peer: &Hello) -> bool {
        let apart = peer.version != self.hello.version || peer.processes != self.hello.processes;
        if apart {
            let mut both = [self.hello.clone(), peer.clone()];
            both.sort_by_key(|h| h.process);
            self.problems.extend(disagreement(&both));
        }
        apart
    }

    /// Higher-numbered processes: accept, read their hello, answer with ours.
    fn accept_higher(&mut self, listener: &TcpListener) -> Result<()> {
        let (me, n) = (self.me, self.addresses.len());
        let mut waiting = n - me - 1;
        loop {
            if waiting == 0 {
                // A peer counted may have died since: its place is open again.
                waiting += self.read_early_verdicts()?;
                if waiting == 0 {
                    return Ok(());
                }
            }
            match listener.accept() {
                Ok((mut s, from)) => {
                    s.set_nonblocking(false).map_err(net)?;
                    s.set_nodelay(true).map_err(net)?;
                    self.wait_for(&s)?;
                    let who = format!("the connection from {from}");
                    let peer = match read_hello(&mut s, &who, Some(FIRST_WORD)) {
                        Ok(h) => h,
                        Err(e) => {
                            crate::say!("neardup: ignoring a connection: {e}");
                            continue;
                        }
                    };
                    send_hello(&mut s, &self.hello).map_err(net)?;
                    let p = peer.process;
                    if p > me && p < n && self.sockets[p].as_ref().is_some_and(closed) {
                        self.forget(p);
                        waiting += 1;
                    }
                    if p <= me || p >= n || self.sockets[p].is_some() {
                        // Said at once, to it too: waiting on would end in a timeout that
                        // names only the process still missing.
                        let earlier = self
                            .sockets
                            .get(p)
                            .and_then(|s| s.as_ref()?.peer_addr().ok());
                        let problem = unexpected(&peer, from, me, n, earlier);
                        let _ = write_frame(&mut s, problem.as_bytes());
                        self.problems.push(problem);
                        return Ok(());
                    }
                    waiting -= 1;
                    if self.joined(p, peer, s) {
                        return Ok(());
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() >= self.deadline {
                        return Err(self.not_connected());
                    }
                    waiting += self.read_early_verdicts()?;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(e).io_context(|| "accepting a connection".into()),
            }
        }
    }

    /// Reads the verdicts that peers already formed have sent while this process still waits
    /// for others, keeping them for [`Forming::verdicts`] (acting on a refusal here would close
    /// this process's listener while a higher one still connects). A lower process that left
    /// stops this one; a higher process that left is forgotten, to connect again (a pod
    /// restarted by its StatefulSet): the answer is how many were.
    fn read_early_verdicts(&mut self) -> Result<usize> {
        let mut forgotten = 0;
        for p in 0..self.sockets.len() {
            let (Some(s), None) = (&mut self.sockets[p], &self.early[p]) else {
                continue;
            };
            match peeked(s) {
                Ok(0) if p < self.me => bail!(
                    Cluster,
                    "process {p} left during start-up (its connection closed)"
                ),
                Ok(0) => {
                    self.forget(p);
                    forgotten += 1;
                }
                Ok(_) => {
                    let v =
                        read_frame(s).io_context(|| format!("process {p} left during start-up"))?;
                    // Kept for the verdicts: stopping here would close this process's
                    // listener while a higher one still connects (a reset, not the verdict).
                    self.early[p] = Some(v);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e).io_context(|| format!("process {p} left during start-up")),
            }
        }
        Ok(forgotten)
    }

    /// Forgets higher process `p`, whose connection closed during start-up: it may connect again.
    fn forget(&mut self, p: usize) {
        crate::say!(
            "neardup: process {p} left during start-up (its connection closed); waiting for it \
             to connect again"
        );
        self.sockets[p] = None;
        self.early[p] = None;
        self.hellos.retain(|h| h.process != p);
    }

    /// The higher-numbered processes that did not connect in time.
    fn not_connected(&self) -> Error {
        let (me, n) = (self.me, self.addresses.len());
        let mut missing: Vec<String> = (me + 1..n)
            .filter(|&p| self.sockets[p].is_none())
            .map(|p| format!("{p} ({})", self.addresses[p]))
            .collect();
        // Named up to a few: a 300-line hostfile made a line of 7 KB (probe 23).
        const NAMED: usize = 8;
        if missing.len() > NAMED {
            let more = missing.len() - NAMED;
            missing.truncate(NAMED);
            missing.push(format!("and {more} more"));
        }
        Error::Cluster(format!(
            "process {me} waited {} s for process(es) {} to connect; are they running, placed \
             alike (the same hostfile, or the same launcher's step)? (--connect-timeout sets the \
             wait)",
            seconds(self.secs),
            missing.join(", ")
        ))
    }

    /// Sends this process's verdict (empty: agreed) to every peer and reads theirs: any problem,
    /// here or in a peer, stops this process. A process with a problem of its own stops at once,
    /// with it: a peer that has not come to its verdicts (still waiting for a process that will
    /// not come) must not hide it behind a lost connection.
    fn verdicts(&mut self) -> Result<()> {
        let verdict = self.problems.first().cloned().unwrap_or_default();
        for s in self.sockets.iter_mut().flatten() {
            // A peer that has gone already is told nothing; this process's own problem stands.
            let sent = write_frame(s, verdict.as_bytes());
            if verdict.is_empty() {
                sent.map_err(net)?;
            }
        }
        if !verdict.is_empty() {
            // Theirs are read for a moment (unread, a close would reset the connection, and the
            // peer could lose this verdict), not waited for.
            for s in self.sockets.iter_mut().flatten() {
                let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                let _ = read_frame(s);
            }
            bail!(Cluster, "{verdict}");
        }
        let mut theirs = Vec::new();
        for (p, s) in self.sockets.iter_mut().enumerate() {
            if let Some(s) = s {
                let v = match self.early[p].take() {
                    Some(v) => v,
                    None => {
                        read_frame(s).io_context(|| format!("process {p} left during start-up"))?
                    }
                };
                theirs.push((p, v));
            }
        }
        let theirs: Vec<(usize, &[u8])> = theirs.iter().map(|(p, v)| (*p, &v[..])).collect();
        refused(&theirs)
    }
}

/// True if the peer of `s` has closed it (or it broke).
fn closed(s: &TcpStream) -> bool {
    match peeked(s) {
        Ok(n) => n == 0,
        Err(e) => e.kind() != io::ErrorKind::WouldBlock,
    }
}

/// Looks, without waiting, at what `s` has to read: 0 bytes at its end, `WouldBlock` if nothing
/// has come yet.
fn peeked(s: &TcpStream) -> io::Result<usize> {
    s.set_nonblocking(true)?;
    let seen = s.peek(&mut [0u8; 1]);
    s.set_nonblocking(false)?;
    seen
}

/// An error naming every refusal among the peers' verdicts (`(process, verdict)`; empty: agreed).
fn refused(verdicts: &[(usize, &[u8])]) -> Result<()> {
    let refusals: Vec<String> = verdicts
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(p, v)| format!("process {p}: {}", String::from_utf8_lossy(v)))
        .collect();
    if !refusals.is_empty() {
        bail!(
            Cluster,
            "another process refused to start, so this one stops too: {}",
            refusals.join("; ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::mismatch::mismatch;
    use super::*;

    fn hello(process: usize, workers: usize, plan: &str) -> Hello {
        Hello {
            version: "1".into(),
            process,
            processes: 3,
            workers,
            plan: plan.into(),
        }
    }

    const PLAN: &str = "format = jsonl\nshingle = 3\nk = 3\n";

    #[test]
    fn a_process_looks_its_own_name_up_again_until_the_deadline() {
        // Regression (probe 13b): a pod whose own DNS record was not yet published exited at
        // once; its peers' names were looked up again until the deadline.
        let started = Instant::now();
        let wait = Duration::from_millis(600);
        let unknown = listen("no-such-host.invalid:2101", started + wait);
        assert!(unknown.is_err());
        assert!(started.elapsed() >= wait, "{:?}", started.elapsed());
        assert!(listen("127.0.0.1:0", Instant::now()).is_ok());
    }

    /// Defect (probe 13b): a process given one more input file than the others was told only
    /// the counts (`input files = 3` against 2), not which file.
    #[test]
    fn an_extra_input_file_is_named_beside_the_count() {
        let files = |names: &[&str]| {
            let mut plan = format!("k = 3\ninput files = {}\n", names.len());
            for n in names {
                plan += &format!("input = {n} (9 bytes, none)\ninput file = /d/{n} (modified 1)\n");
            }
            plan + "verify.mode = exact\n"
        };
        let two = hello(0, 1, &files(&["a.jsonl", "c.jsonl"]));
        let three = hello(1, 1, &files(&["a.jsonl", "b.jsonl", "c.jsonl"]));
        let m = mismatch(&two, &[0], &three).unwrap();
        assert!(
            m.contains(
                "`input files = 3` in process 1, `input files = 2` in process 0; the first \
                 file that differs: `input = b.jsonl (9 bytes, none)` in process 1, \
                 `input = c.jsonl (9 bytes, none)` in process 0"
            ),
            "{m}"
        );
        let m = mismatch(&three, &[1], &hello(0, 1, &files(&["a.jsonl", "b.jsonl"]))).unwrap();
        assert!(
            m.contains("`input = c.jsonl (9 bytes, none)` in process 1"),
            "{m}"
        );
    }

    #[test]
    fn mismatches_name_the_first_difference() {
        let a = hello(0, 2, PLAN);
        assert_eq!(mismatch(&a, &[0], &hello(1, 2, PLAN)), None);
        let m = mismatch(&a, &[0], &hello(1, 1, PLAN)).unwrap();
        assert!(
            m.contains("process 1 runs 1 worker thread(s), process 0 2"),
            "{m}"
        );
        assert!(m.contains("-w"), "{m}");
        let other = hello(1, 2, "format = jsonl\nshingle = 2\nk = 3\n");
        let m = mismatch(&a, &[0], &other).unwrap();
        assert!(
            m.contains("`shingle = 2` in process 1, `shingle = 3` in process 0"),
            "{m}"
        );
        // Probe 23 (8): plans of unlike length were compared line by line, which paired
        // `max_record_bytes` with `minhash.values`, and a struct was named whole, in Rust's words.
        let exact = hello(
            0,
            2,
            "k = 3\nminhash.values = band keys\nverify.mode = exact\n",
        );
        let estimate = hello(1, 2, "k = 3\nverify.mode = estimate\n");
        let m = mismatch(&exact, &[0], &estimate).unwrap();
        assert!(
            m.contains("`verify.mode = estimate` in process 1, `verify.mode = exact` in process 0"),
            "{m}"
        );
        let fields =
            |id: &str| format!("fields = Fields {{ id: \"{id}\", text: \"t, u\", url: None }}\n");
        let m = mismatch(
            &hello(0, 2, &fields("id")),
            &[0],
            &hello(1, 2, &fields("idx")),
        )
        .unwrap();
        assert!(
            m.contains("`fields.id = \"idx\"` in process 1, `fields.id = \"id\"` in process 0"),
            "{m}"
        );
    }

    #[test]
    fn the_process_that_differs_from_the_others_is_named_in_every_process() {
        let odd = "format = jsonl\nshingle = 3\nk = 5\n";
        let hellos = [hello(0, 1, PLAN), hello(1, 1, PLAN), hello(2, 1, odd)];
        let m = disagreement(&hellos).unwrap();
        assert!(
            m.contains("process 2 was started with other settings or inputs than processes 0, 1")
                && m.contains("`k = 5` in process 2, `k = 3` in processes 0, 1"),
            "{m}"
        );
        // The majority wins even against process 0, and -w is named.
        let hellos = [hello(0, 2, PLAN), hello(1, 1, PLAN), hello(2, 1, PLAN)];
        let m = disagreement(&hellos).unwrap();
        assert!(
            m.starts_with("process 0 runs 2 worker thread(s), processes 1, 2 1"),
            "{m}"
        );
        // A tie goes to process 0's side: with two processes, process 1 is named.
        let m = disagreement(&[hello(0, 1, PLAN), hello(1, 1, odd)]).unwrap();
        assert!(
            m.contains("`k = 5` in process 1, `k = 3` in process 0"),
            "{m}"
        );
        // Every odd process is named.
        let third = "format = jsonl\nshingle = 4\nk = 3\n";
        let hellos = [hello(0, 1, PLAN), hello(1, 1, third), hello(2, 1, odd)];
        let m = disagreement(&hellos).unwrap();
        assert!(
            m.contains("process 1 was") && m.contains("process 2 was"),
            "{m}"
        );
        assert_eq!(disagreement(&[hello(0, 1, PLAN), hello(1, 1, PLAN)]), None);
    }

    /// A socket's keep-alive settings: on, silence, interval and count.
    fn probing(s: &TcpStream) -> [i32; 4] {
        use std::os::fd::AsRawFd;
        KEEP_ALIVE_OPTIONS.map(|(level, name)| {
            let (mut value, mut len) = (0i32, std::mem::size_of::<i32>() as libc::socklen_t);
            // SAFETY: a valid socket, and an `int` of the length given to write into.
            let done = unsafe {
                libc::getsockopt(
                    s.as_raw_fd(),
                    level,
                    name,
                    (&mut value as *mut i32).cast(),
                    &mut len,
                )
            };
            assert_eq!(done, 0, "{}", io::Error::last_os_error());
            value
        })
    }

    /// Three processes formed on free ports with `plans`: each one's peers' keep-alive settings
    /// ([`probing`]), or its error. A port
    /// found free can be taken before its process listens on it (an outgoing connection's own
    /// port, in this or another test), so the three start again on fresh ports when a listen
    /// finds its port in use (a test failed so once, from a clean clone).
    fn formed_on_free_ports(plans: [&'static str; 3]) -> Vec<Result<Vec<[i32; 4]>, String>> {
        for _ in 0..5 {
            let results = formed(plans);
            let taken = |r: &Result<Vec<[i32; 4]>, String>| {
                r.as_ref()
                    .is_err_and(|e| e.contains("Address already in use"))
            };
            if !results.iter().any(taken) {
                return results;
            }
        }
        panic!("five tries found no three free ports")
    }

    /// Three processes formed on ports found free, one a thread, with `plans`.
    fn formed(plans: [&'static str; 3]) -> Vec<Result<Vec<[i32; 4]>, String>> {
        let ports: Vec<u16> = (0..3)
            .map(|_| {
                std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port()
            })
            .collect();
        let addresses: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let handles: Vec<_> = (0..3)
            .map(|me| {
                let addresses = addresses.clone();
                std::thread::spawn(move || {
                    let twenty = Duration::from_secs(20);
                    form(&addresses, me, 1, plans[me], twenty, || Ok(()))
                        .map(|s| s.iter().flatten().map(probing).collect())
                        .map_err(|e| format!("{e:#}"))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn three_processes_form_a_cluster_or_refuse_together() {
        let run = formed_on_free_ports;
        // Each process has its two peers, both connections probing a silent peer.
        let (idle, interval, count) = KEEP_ALIVE;
        let probing = vec![[1, idle, interval, count]; 2];
        assert_eq!(run(["a", "a", "a"]), vec![Ok(probing); 3]);
        let results = run(["a", "a", "b"]);
        for r in &results {
            let err = r.as_ref().expect_err("every process refuses");
            assert!(
                err.contains("process 2 was started with other settings")
                    && err.contains("`b` in process 2, `a` in processes 0, 1"),
                "every process names process 2: {results:?}"
            );
        }
    }

    /// Defect (probe 9): process 0 read an accepted connection's hello until the deadline, so one
    /// connection that said nothing (a port scanner) made the whole cluster fail.
    #[test]
    fn a_silent_connection_does_not_stop_the_cluster() {
        let free = || {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let addresses: Vec<String> = [free(), free()]
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        // Process 1 waits less than process 0 would have spent on the silent connection.
        let start = |me: usize, secs: u64| {
            let addresses = addresses.clone();
            std::thread::spawn(move || {
                let wait = Duration::from_secs(secs);
                form(&addresses, me, 1, "p", wait, || Ok(())).map(|s| s.len())
            })
        };
        let zero = start(0, 15);
        let soon = Instant::now() + Duration::from_secs(10);
        let silent = connect(&addresses[0], soon, &mut || Ok(())).unwrap();
        let one = start(1, 8);
        for (p, h) in [zero, one].into_iter().enumerate() {
            let formed = h.join().unwrap();
            assert!(formed.is_ok(), "process {p}: {:#}", formed.unwrap_err());
        }
        drop(silent);
    }

    /// Three free loopback addresses.
    fn three_addresses() -> Vec<String> {
        let listeners: Vec<_> = (0..3)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let ports = listeners.iter().map(|l| l.local_addr().unwrap().port());
        ports.map(|p| format!("127.0.0.1:{p}")).collect()
    }

    /// Probe 23 (3): two processes started with index 1 both connected to process 0, and every
    /// process waited out its deadline to name only the missing process 2. Process 0 names both at
    /// once, and the others stop on its verdict, before their deadline.
    #[test]
    fn two_processes_of_one_index_are_named_at_once_by_process_0() {
        let (first, other) = (three_addresses(), three_addresses());
        let mut second = first.clone();
        second[1] = other[1].clone(); // its own listening address, the same index
        let start = |addresses: Vec<String>, me: usize| {
            std::thread::spawn(move || {
                let wait = Duration::from_secs(6);
                form(&addresses, me, 1, "p", wait, || Ok(())).map(|s| s.len())
            })
        };
        let started = Instant::now();
        let zero = start(first.clone(), 0);
        let one = start(first, 1);
        std::thread::sleep(Duration::from_millis(300));
        let again = start(second, 1);
        let err = format!("{:#}", zero.join().unwrap().unwrap_err());
        assert!(
            err.contains("two processes say they are process 1"),
            "{err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "not at the deadline"
        );
        // The others wait for process 2 (stopping early could reset a peer still connecting).
        assert!(one.join().unwrap().is_err() && again.join().unwrap().is_err());
    }

    /// Probe 23 (2): a process that connected and died during start-up could not join again when
    /// restarted (a pod restarted by its StatefulSet): process 0 kept its closed connection and
    /// refused the new one. The new one is taken.
    #[test]
    fn a_process_that_died_during_start_up_joins_when_started_again() {
        let addresses = three_addresses();
        let start = |me: usize| {
            let addresses = addresses.clone();
            std::thread::spawn(move || {
                let wait = Duration::from_secs(30);
                form(&addresses, me, 1, "p", wait, || Ok(())).map(|s| s.len())
            })
        };
        let zero = start(0);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut dying = connect(&addresses[0], deadline, &mut || Ok(())).unwrap();
        let version = env!("CARGO_PKG_VERSION").to_string();
        send_hello(
            &mut dying,
            &Hello {
                version,
                ..hello(1, 1, "p")
            },
        )
        .unwrap();
        read_hello(&mut dying, "process 0", None).unwrap();
        drop(dying);
        std::thread::sleep(Duration::from_millis(100));
        let (one, two) = (start(1), start(2));
        for (p, h) in [zero, one, two].into_iter().enumerate() {
            let formed = h.join().unwrap();
            assert!(formed.is_ok(), "process {p}: {:#}", formed.unwrap_err());
        }
    }

    /// Probe 23: a cluster of 300 whose others never came named all 299 on one line.
    #[test]
    fn a_timeout_names_a_few_missing_processes_and_counts_the_rest() {
        let mut addresses = vec![three_addresses().remove(0)];
        addresses.extend((1..12).map(|i| format!("127.0.0.1:{}", 9 + i)));
        let wait = Duration::from_millis(300);
        let err = format!(
            "{:#}",
            form(&addresses, 0, 1, "p", wait, || Ok(())).unwrap_err()
        );
        assert!(err.contains("8 (127.0.0.1:17), and 3 more"), "{err}");
        assert!(!err.contains("127.0.0.1:18"), "{err}");
    }

    #[test]
    fn a_missing_peer_ends_in_a_timeout_not_a_hang() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let free = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addresses = vec![format!("127.0.0.1:{free}"), format!("127.0.0.1:{port}")];
        let started = Instant::now();
        let err = form(&addresses, 1, 1, "p", Duration::from_millis(800), || Ok(())).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(
            format!("{err:#}").contains("could not reach process 0"),
            "{err:#}"
        );
    }
}
