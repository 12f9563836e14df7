//! The `neardup` command line: a thin layer over the library.
//!
//! Exit codes: 0 success; 3 finished, but some records were skipped (see the summary); 1 error;
//! 2 bad command line; 128 + N killed by signal N (SIGINT 130, SIGTERM 143) after removing its
//! staged outputs.
//!
//! The arguments are parsed, and each sub-command run, by [`cli`].

mod cli;

use std::process::ExitCode;

use clap::Parser;

/// The system allocator, with a clear message instead of an abort when memory runs out.
struct Allocator;

// SAFETY: forwards every call to the system allocator unchanged; only a failed allocation is
// intercepted, and that path never returns.
unsafe impl std::alloc::GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = std::alloc::System.alloc(layout);
        if p.is_null() {
            neardup::output::cleanup::out_of_memory(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        let p = std::alloc::System.alloc_zeroed(layout);
        if p.is_null() {
            neardup::output::cleanup::out_of_memory(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        std::alloc::System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        let p = std::alloc::System.realloc(ptr, layout, new_size);
        if p.is_null() {
            neardup::output::cleanup::out_of_memory(new_size);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Allocator = Allocator;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    neardup::output::cleanup::one_arena_under_an_address_space_limit();
    if let Err(e) = neardup::output::cleanup::install() {
        neardup::say!("neardup: warning: cannot install the interrupt handler: {e}");
    }
    match cli::run(cli) {
        // A signal that came as the run ended: its handler ends the process (128 + the signal,
        // saying whether the outputs are whole), not this exit code.
        Ok(_) if neardup::output::cleanup::interrupted() => {
            neardup::output::cleanup::await_interrupt_exit()
        }
        Ok(code) => code,
        Err(e) => {
            if neardup::output::cleanup::interrupted() {
                // The error came from the interrupt removing staged outputs under a worker.
                neardup::output::cleanup::await_interrupt_exit();
            }
            neardup::say!("neardup: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
