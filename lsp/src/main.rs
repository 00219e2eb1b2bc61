//! `tensor-lsp`: the language server for `.tensor` files, over stdio.
//! (`--stdio` is accepted and ignored: VS Code's client appends it.)

mod document;
mod host;
mod server;
mod timing;
mod worker;

use tower_lsp_server::{LspService, Server};

/// Tensors' arrays on cache lines, as in `tensorc` (timing runs happen in
/// this binary's worker).
#[global_allocator]
static ALLOCATOR: tensor_compiler::line_aligned::LineAligned =
    tensor_compiler::line_aligned::LineAligned;

/// Requests handled at once: handlers wait on snapshots and timing runs
/// rather than holding locks, so a slow one must not take every slot.
const CONCURRENT_REQUESTS: usize = 64;

fn main() {
    if std::env::args().any(|a| a == "--version") {
        println!("tensor-lsp {}", env!("CARGO_PKG_VERSION"));
        return;
    }
    if std::env::args().any(|a| a == worker::FLAG) {
        std::process::exit(worker::main());
    }
    serve();
}

#[tokio::main]
async fn serve() {
    let (stdin, stdout) = (tokio::io::stdin(), tokio::io::stdout());
    let (service, socket) = LspService::build(server::Backend::new)
        .custom_method("tensor/view", server::Backend::view)
        .custom_method("tensor/timeKernel", server::Backend::time_kernel_request)
        .custom_method(
            "window/workDoneProgress/cancel",
            server::Backend::progress_cancel,
        )
        .finish();
    Server::new(stdin, stdout, socket)
        .concurrency_level(CONCURRENT_REQUESTS)
        .serve(service)
        .await;
}
