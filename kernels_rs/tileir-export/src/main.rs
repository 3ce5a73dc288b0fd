//! `tileport-rs-export`: compile one cutile-rs kernel to Tile IR, with no GPU.
//!
//! The kernel is read from a Rust source file at run time (the file holds a
//! `#[cutile::module] mod ... { ... }`), so a new or edited kernel needs no
//! cargo rebuild. Requests and responses are JSON (see `request.rs`).
//!
//! Usage:
//!   tileport-rs-export REQUEST.json     one request, one JSON response on stdout
//!   tileport-rs-export --serve          JSON lines in on stdin, JSON lines out

mod compile;
mod request;

use std::io::{BufRead, Write};
use std::process::ExitCode;

use request::{ExportRequest, ExportResponse};

fn respond(line: &str) -> ExportResponse {
    match serde_json::from_str::<ExportRequest>(line) {
        Ok(request) => compile::run_on_large_stack(request),
        Err(err) => ExportResponse::failure("request", format!("invalid request: {err}")),
    }
}

fn serve() -> ExitCode {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let response = respond(&line);
        let encoded = serde_json::to_string(&response).expect("response serialises");
        if writeln!(stdout, "{encoded}")
            .and_then(|_| stdout.flush())
            .is_err()
        {
            break;
        }
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [flag] if flag == "--serve" => serve(),
        [path] if path != "--help" && path != "-h" => {
            let response = match std::fs::read_to_string(path) {
                Ok(text) => respond(&text),
                Err(err) => {
                    ExportResponse::failure("request", format!("cannot read {path}: {err}"))
                }
            };
            println!(
                "{}",
                serde_json::to_string_pretty(&response).expect("response serialises")
            );
            if response.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        _ => {
            eprintln!("usage: tileport-rs-export REQUEST.json | --serve");
            ExitCode::from(2)
        }
    }
}
