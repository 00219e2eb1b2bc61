//! `tensor-lsp`: the language server for `.tensor` files, over stdio.
//! (`--stdio` is accepted and ignored: VS Code's client appends it.)

mod document;
mod server;

use tower_lsp_server::{LspService, Server};

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "--version") {
        println!("tensor-lsp {}", env!("CARGO_PKG_VERSION"));
        return;
    }
    let (stdin, stdout) = (tokio::io::stdin(), tokio::io::stdout());
    let (service, socket) = LspService::build(server::Backend::new)
        .custom_method("tensor/view", server::Backend::view)
        .custom_method("tensor/timeKernel", server::Backend::time_kernel_request)
        .custom_method("window/workDoneProgress/cancel", server::Backend::progress_cancel)
        .finish();
    Server::new(stdin, stdout, socket).serve(service).await;
}
