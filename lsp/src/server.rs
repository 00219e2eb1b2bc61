//! The protocol side: converts the compiler's `ide` answers to LSP types.
//! No compiler logic lives here (ARCHITECTURE.md). Edits and reads go
//! through the analysis host (`host`): every request runs on a snapshot on
//! a blocking thread, and a panic in one answers with an error while the
//! server goes on. Timing runs in a child process (`timing`).

use crate::document::Document;
use crate::host::{internal, path_of, Host, Snapshot};
use crate::timing::Runs;
use crate::worker;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tensor_compiler::ide::{self, View};
use tensor_compiler::language::db::SourceFile;
use tower_lsp_server::jsonrpc::{ErrorCode, Result};
use tower_lsp_server::ls_types::*;
use tower_lsp_server::{Client, LanguageServer};

const SEMANTIC_TYPES: [SemanticTokenType; 7] = [
    SemanticTokenType::KEYWORD,
    SemanticTokenType::TYPE,
    SemanticTokenType::VARIABLE,
    SemanticTokenType::PARAMETER,
    SemanticTokenType::FUNCTION,
    SemanticTokenType::CLASS,
    SemanticTokenType::NUMBER,
];

pub struct Backend {
    client: Client,
    host: Arc<Host>,
    runs: Arc<Runs>,
    /// Last timing per (document, kernel), shown in the code lens.
    timings: Arc<Mutex<HashMap<(Uri, String), String>>>,
    time_on_save: AtomicBool,
}

impl Backend {
    pub fn new(client: Client) -> Self {
        Backend {
            client,
            host: Arc::default(),
            runs: Arc::default(),
            timings: Arc::default(),
            time_on_save: AtomicBool::new(false),
        }
    }

    /// Run `f` on a snapshot holding the open document `uri` (None when it
    /// is not open). Cancelled by an edit of another document, it runs
    /// again; by an edit of this one, it answers `ContentModified`.
    async fn with_doc<T: Send + 'static>(
        &self,
        uri: &Uri,
        f: impl Fn(&Snapshot, &Document, SourceFile) -> Option<T> + Send + Sync + 'static,
    ) -> Result<Option<T>> {
        let f = Arc::new(f);
        loop {
            let version = self.host.version(uri);
            let (g, u) = (f.clone(), uri.clone());
            match self
                .host
                .read(move |snap| snap.doc(&u).and_then(|(doc, file)| g(snap, doc, file)))
                .await
            {
                Err(e)
                    if e.code == ErrorCode::ContentModified
                        && version.is_some()
                        && self.host.version(uri) == version =>
                {
                    continue
                }
                answer => return answer,
            }
        }
    }

    /// Write the client's documents to the database, then publish the
    /// diagnostics of `uri` unless a newer edit came meanwhile. Runs as a
    /// task of its own: notifications return at once.
    fn sync_and_publish(&self, uri: Uri, also: impl FnOnce(&mut ide::Analysis) + Send + 'static) {
        let (host, client) = (self.host.clone(), self.client.clone());
        tokio::spawn(async move {
            host.write(also).await;
            publish(&host, &client, uri).await;
        });
    }

    /// `tensor/view`: the emitted C, loop IR, lattices or iteration graph
    /// of the kernel at a position (or named).
    pub async fn view(&self, params: ViewParams) -> Result<String> {
        let view = View::parse(params.view.as_deref().unwrap_or("c"))
            .ok_or_else(|| internal("view is one of c, ir, lattice, graph"))?;
        let uri = params.text_document.uri.clone();
        let answer = self
            .with_doc(&uri, move |snap, doc, file| {
                let kernel = match (&params.kernel, params.position) {
                    (Some(k), _) => k.clone(),
                    (None, Some(p)) => match snap.analysis.kernel_at(file, doc.offset(p)) {
                        Some(k) => k,
                        None => return Some(Err(internal("no kernel at this position"))),
                    },
                    (None, None) => return Some(Err(internal("give a kernel name or a position"))),
                };
                Some(snap.analysis.view(file, &kernel, view).map_err(internal))
            })
            .await?;
        answer.unwrap_or_else(|| Err(internal("document not open")))
    }

    /// `window/workDoneProgress/cancel`: stop that timing run.
    pub async fn progress_cancel(&self, params: WorkDoneProgressCancelParams) {
        if let NumberOrString::String(token) = params.token {
            self.runs.stop(&token);
        }
    }

    /// `tensor/timeKernel`: time a kernel and answer with the figures.
    pub async fn time_kernel_request(&self, params: TimeParams) -> Result<Value> {
        self.time_kernel(
            params.text_document.uri,
            params.kernel,
            params.runs.unwrap_or(10),
        )
        .await
    }

    /// Time a kernel of the document as the client has it now, in a child
    /// process; edits meanwhile are answered as if no run were going.
    async fn time_kernel(&self, uri: Uri, kernel: String, runs: usize) -> Result<Value> {
        time_kernel(
            &self.client,
            &self.host,
            &self.runs,
            &self.timings,
            uri,
            kernel,
            runs,
        )
        .await
    }
}

/// How long full diagnostics may take before those known without
/// compiling are shown first.
const BEFORE_COMPILING_AFTER: std::time::Duration = std::time::Duration::from_millis(1000);

/// Publish the diagnostics of `uri` for the client's current text. When
/// compiling takes long, publish the syntax and resolution problems first.
async fn publish(host: &Arc<Host>, client: &Client, uri: Uri) {
    let full = diagnostics(host, &uri, ide::Analysis::diagnostics);
    tokio::pin!(full);
    let answer = tokio::select! {
        answer = &mut full => answer,
        _ = tokio::time::sleep(BEFORE_COMPILING_AFTER) => {
            if let Some((diags, v)) = diagnostics(host, &uri, ide::Analysis::diagnostics_before_compiling).await {
                if host.version(&uri) == Some(v) {
                    client.publish_diagnostics(uri.clone(), diags, Some(v)).await;
                }
            }
            full.await
        }
    };
    if let Some((diags, v)) = answer {
        // Publish only what the client's current text gives.
        if host.version(&uri) == Some(v) {
            client
                .publish_diagnostics(uri.clone(), diags, Some(v))
                .await;
        }
    }
}

/// The diagnostics `which` gives for `uri`, with the document version they
/// belong to. Cancelled by an edit of another document, computed again.
async fn diagnostics(
    host: &Arc<Host>,
    uri: &Uri,
    which: fn(&ide::Analysis, SourceFile) -> Vec<ide::Diagnostic>,
) -> Option<(Vec<Diagnostic>, i32)> {
    loop {
        let version = host.version(uri);
        let u = uri.clone();
        let answer = host
            .read(move |snap| {
                let (doc, file) = snap.doc(&u)?;
                let diags: Vec<Diagnostic> = which(&snap.analysis, file)
                    .into_iter()
                    .map(|d| Diagnostic {
                        range: doc.range(d.span.start, d.span.end),
                        severity: Some(if d.is_error {
                            DiagnosticSeverity::ERROR
                        } else {
                            DiagnosticSeverity::WARNING
                        }),
                        source: Some("tensor".into()),
                        message: d.message,
                        ..Default::default()
                    })
                    .collect();
                Some((diags, doc.version))
            })
            .await;
        match answer {
            Ok(answer) => return answer,
            Err(e)
                if e.code == ErrorCode::ContentModified
                    && version.is_some()
                    && host.version(uri) == version =>
            {
                continue
            }
            Err(_) => return None,
        }
    }
}

async fn time_kernel(
    client: &Client,
    host: &Arc<Host>,
    runs: &Arc<Runs>,
    timings: &Arc<Mutex<HashMap<(Uri, String), String>>>,
    uri: Uri,
    kernel: String,
    n: usize,
) -> Result<Value> {
    let n = n.clamp(1, 1000);
    let text = host
        .text(&uri)
        .ok_or_else(|| internal("document not open"))?;
    let req = worker::Request {
        path: path_of(&uri),
        text,
        kernel: kernel.clone(),
        runs: n,
        threads: None,
        backend: None,
        build_cc: false,
    };
    let mut answer = runs.time(client, req.clone()).await?;
    if answer.get("cc_worth_building").and_then(Value::as_bool) == Some(true) {
        runs.build_cc_in_background(req);
    }
    let median = answer
        .get("median_ms")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    let gbs = answer
        .get("gbytes_per_s")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    let tier = answer
        .get("backend")
        .and_then(Value::as_str)
        .unwrap_or("cranelift")
        .to_string();
    let threads = answer.get("threads").and_then(Value::as_u64).unwrap_or(1);
    let label = format!(
        "⏱ {median:.3} ms median · {gbs:.2} GB/s · {tier} · {threads} thread{}",
        if threads == 1 { "" } else { "s" }
    );
    timings
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert((uri, kernel), label.clone());
    if let Some(o) = answer.as_object_mut() {
        o.insert("label".into(), json!(label));
    }
    let _ = client.code_lens_refresh().await;
    Ok(answer)
}

/// The `threads` setting: a count from 1 to `MAX_THREADS`, or 0 (or
/// null) for the default, every core for kernels big enough to gain.
fn threads_setting(o: &Value) -> Option<usize> {
    match o.get("threads")? {
        Value::Null => Some(0),
        v => v
            .as_u64()
            .map(|n| (n as usize).min(tensor_compiler::threads::MAX_THREADS)),
    }
}

/// The `backend` setting: `auto`, `cranelift` or `cc` (null: `auto`).
/// Another value is passed on, and the timing run says it is unknown.
fn backend_setting(o: &Value) -> Option<Option<String>> {
    match o.get("backend")? {
        Value::Null => Some(None),
        v => v.as_str().map(|s| Some(s.to_string())),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ViewParams {
    pub text_document: TextDocumentIdentifier,
    pub position: Option<Position>,
    pub kernel: Option<String>,
    pub view: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimeParams {
    pub text_document: TextDocumentIdentifier,
    pub kernel: String,
    pub runs: Option<usize>,
}

impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        let on_save = params
            .initialization_options
            .as_ref()
            .and_then(|o| o.get("timeOnSave"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        self.time_on_save.store(on_save, Ordering::Relaxed);
        if let Some(n) = params
            .initialization_options
            .as_ref()
            .and_then(threads_setting)
        {
            self.runs.threads.store(n, Ordering::Relaxed);
        }
        if let Some(b) = params
            .initialization_options
            .as_ref()
            .and_then(backend_setting)
        {
            *self.runs.backend.lock().unwrap_or_else(|p| p.into_inner()) = b;
        }
        let progress = params
            .capabilities
            .window
            .as_ref()
            .and_then(|w| w.work_done_progress)
            .unwrap_or(false);
        self.runs.progress.store(progress, Ordering::Relaxed);
        Ok(InitializeResult {
            server_info: Some(ServerInfo {
                name: "tensor-lsp".into(),
                version: Some(env!("CARGO_PKG_VERSION").into()),
            }),
            capabilities: ServerCapabilities {
                text_document_sync: Some(TextDocumentSyncCapability::Options(
                    TextDocumentSyncOptions {
                        open_close: Some(true),
                        change: Some(TextDocumentSyncKind::INCREMENTAL),
                        save: Some(TextDocumentSyncSaveOptions::Supported(true)),
                        ..Default::default()
                    },
                )),
                hover_provider: Some(HoverProviderCapability::Simple(true)),
                inlay_hint_provider: Some(OneOf::Left(true)),
                code_lens_provider: Some(CodeLensOptions {
                    resolve_provider: Some(false),
                }),
                completion_provider: Some(CompletionOptions {
                    trigger_characters: Some(vec!["@".into(), "(".into(), ",".into()]),
                    ..Default::default()
                }),
                definition_provider: Some(OneOf::Left(true)),
                document_symbol_provider: Some(OneOf::Left(true)),
                document_formatting_provider: Some(OneOf::Left(true)),
                code_action_provider: Some(CodeActionProviderCapability::Simple(true)),
                // Only timing runs in the server; "tensor.showC" is the client's command
                // (editors show the text), also answered here for clients without it.
                execute_command_provider: Some(ExecuteCommandOptions {
                    commands: vec!["tensor.timeKernel".into()],
                    ..Default::default()
                }),
                semantic_tokens_provider: Some(
                    SemanticTokensServerCapabilities::SemanticTokensOptions(
                        SemanticTokensOptions {
                            legend: SemanticTokensLegend {
                                token_types: SEMANTIC_TYPES.to_vec(),
                                token_modifiers: vec![],
                            },
                            full: Some(SemanticTokensFullOptions::Bool(true)),
                            ..Default::default()
                        },
                    ),
                ),
                ..Default::default()
            },
            ..Default::default()
        })
    }

    async fn shutdown(&self) -> Result<()> {
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let uri = params.text_document.uri.clone();
        self.host.change(|docs| {
            docs.insert(
                uri.clone(),
                Document::new(&params.text_document.text, params.text_document.version),
            );
        });
        self.sync_and_publish(uri, |_| {});
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        let uri = params.text_document.uri.clone();
        // Applied here, before anything awaits: in the order they came.
        self.host.change(|docs| {
            if let Some(doc) = docs.get_mut(&uri) {
                for ch in &params.content_changes {
                    doc.apply(ch);
                }
                doc.version = params.text_document.version;
            }
        });
        self.sync_and_publish(uri, |_| {});
    }

    async fn did_save(&self, params: DidSaveTextDocumentParams) {
        let uri = params.text_document.uri;
        self.sync_and_publish(uri.clone(), |analysis| analysis.refresh_data_files());
        if !self.time_on_save.load(Ordering::Relaxed) {
            return;
        }
        let Ok(Some(kernels)) = self
            .with_doc(&uri, |snap, _, file| {
                Some(tensor_compiler::language::db::kernel_names(&snap.analysis.db, file).clone())
            })
            .await
        else {
            return;
        };
        let (client, host, runs, timings) = (
            self.client.clone(),
            self.host.clone(),
            self.runs.clone(),
            self.timings.clone(),
        );
        tokio::spawn(async move {
            for k in kernels {
                let _ = time_kernel(&client, &host, &runs, &timings, uri.clone(), k, 10).await;
            }
        });
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        let uri = params.text_document.uri;
        self.host.change(|docs| {
            docs.remove(&uri);
        });
        let host = self.host.clone();
        tokio::spawn(async move { host.write(|_| {}).await });
        self.client.publish_diagnostics(uri, Vec::new(), None).await;
    }

    async fn did_change_configuration(&self, params: DidChangeConfigurationParams) {
        if let Some(v) = params
            .settings
            .get("tensor")
            .and_then(|t| t.get("timeOnSave"))
            .and_then(Value::as_bool)
        {
            self.time_on_save.store(v, Ordering::Relaxed);
        }
        if let Some(n) = params.settings.get("tensor").and_then(threads_setting) {
            self.runs.threads.store(n, Ordering::Relaxed);
        }
        if let Some(b) = params.settings.get("tensor").and_then(backend_setting) {
            *self.runs.backend.lock().unwrap_or_else(|p| p.into_inner()) = b;
        }
    }

    async fn hover(&self, params: HoverParams) -> Result<Option<Hover>> {
        let uri = params.text_document_position_params.text_document.uri;
        let pos = params.text_document_position_params.position;
        self.with_doc(&uri, move |s, doc, file| {
            let h = s.analysis.hover(file, doc.offset(pos))?;
            Some(Hover {
                contents: HoverContents::Markup(MarkupContent {
                    kind: MarkupKind::Markdown,
                    value: h.markdown,
                }),
                range: Some(doc.range(h.span.start, h.span.end)),
            })
        })
        .await
    }

    async fn inlay_hint(&self, params: InlayHintParams) -> Result<Option<Vec<InlayHint>>> {
        let uri = params.text_document.uri;
        self.with_doc(&uri, |s, doc, file| {
            Some(
                s.analysis
                    .inlay_hints(file)
                    .into_iter()
                    .map(|h| InlayHint {
                        position: doc.position(h.offset),
                        label: InlayHintLabel::String(h.label),
                        kind: None,
                        text_edits: None,
                        tooltip: h.tooltip.map(InlayHintTooltip::String),
                        padding_left: Some(true),
                        padding_right: None,
                        data: None,
                    })
                    .collect(),
            )
        })
        .await
    }

    async fn code_lens(&self, params: CodeLensParams) -> Result<Option<Vec<CodeLens>>> {
        let uri = params.text_document.uri;
        let lenses = self
            .with_doc(&uri, |s, doc, file| {
                Some(
                    s.analysis
                        .code_lenses(file)
                        .into_iter()
                        .map(|l| (doc.position(l.span.start), l))
                        .collect::<Vec<_>>(),
                )
            })
            .await?;
        let timings = self.timings.lock().unwrap_or_else(|p| p.into_inner());
        Ok(lenses.map(|lenses| {
            lenses
                .into_iter()
                .map(|(start, l)| {
                    let (title, command) = match l.kind {
                        ide::LensKind::Time => (
                            timings
                                .get(&(uri.clone(), l.kernel.clone()))
                                .map_or_else(|| "▶ time".to_string(), |t| format!("▶ time ({t})")),
                            "tensor.timeKernel",
                        ),
                        ide::LensKind::ShowC => ("show C".to_string(), "tensor.showC"),
                    };
                    CodeLens {
                        range: Range { start, end: start },
                        command: Some(Command {
                            title,
                            command: command.into(),
                            arguments: Some(vec![json!(uri.as_str()), json!(l.kernel)]),
                        }),
                        data: None,
                    }
                })
                .collect()
        }))
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<Value>> {
        let uri = params
            .arguments
            .first()
            .and_then(Value::as_str)
            .and_then(|u| u.parse::<Uri>().ok())
            .ok_or_else(|| internal("first argument: document uri"))?;
        let kernel = params
            .arguments
            .get(1)
            .and_then(Value::as_str)
            .ok_or_else(|| internal("second argument: kernel name"))?
            .to_string();
        match params.command.as_str() {
            "tensor.timeKernel" => self.time_kernel(uri, kernel, 10).await.map(Some),
            "tensor.showC" => {
                let text = self
                    .view(ViewParams {
                        text_document: TextDocumentIdentifier { uri },
                        position: None,
                        kernel: Some(kernel),
                        view: Some("c".into()),
                    })
                    .await?;
                Ok(Some(Value::String(text)))
            }
            other => Err(internal(format!("unknown command {other}"))),
        }
    }

    async fn completion(&self, params: CompletionParams) -> Result<Option<CompletionResponse>> {
        let uri = params.text_document_position.text_document.uri;
        let pos = params.text_document_position.position;
        self.with_doc(&uri, move |s, doc, file| {
            let items = s
                .analysis
                .completions(file, doc.offset(pos))
                .into_iter()
                .map(|c| CompletionItem {
                    label: c.label,
                    detail: Some(c.detail),
                    kind: Some(match c.kind {
                        ide::CompletionKind::Level | ide::CompletionKind::Preset => {
                            CompletionItemKind::CLASS
                        }
                        ide::CompletionKind::Property => CompletionItemKind::PROPERTY,
                        ide::CompletionKind::Tensor => CompletionItemKind::VARIABLE,
                        ide::CompletionKind::Index => CompletionItemKind::TYPE_PARAMETER,
                        ide::CompletionKind::Keyword => CompletionItemKind::KEYWORD,
                        ide::CompletionKind::Source => CompletionItemKind::FUNCTION,
                    }),
                    ..Default::default()
                })
                .collect();
            Some(CompletionResponse::Array(items))
        })
        .await
    }

    async fn goto_definition(
        &self,
        params: GotoDefinitionParams,
    ) -> Result<Option<GotoDefinitionResponse>> {
        let uri = params.text_document_position_params.text_document.uri;
        let pos = params.text_document_position_params.position;
        let target = uri.clone();
        self.with_doc(&uri, move |s, doc, file| {
            let span = s.analysis.definition(file, doc.offset(pos))?;
            Some(GotoDefinitionResponse::Scalar(Location {
                uri: target.clone(),
                range: doc.range(span.start, span.end),
            }))
        })
        .await
    }

    async fn document_symbol(
        &self,
        params: DocumentSymbolParams,
    ) -> Result<Option<DocumentSymbolResponse>> {
        let uri = params.text_document.uri;
        self.with_doc(&uri, |s, doc, file| {
            #[allow(deprecated)]
            let symbols = s
                .analysis
                .symbols(file)
                .into_iter()
                .map(|sym| DocumentSymbol {
                    name: sym.name,
                    detail: None,
                    kind: match sym.kind {
                        ide::SymbolKind::Format => SymbolKind::STRUCT,
                        ide::SymbolKind::Tensor => SymbolKind::VARIABLE,
                        ide::SymbolKind::Kernel => SymbolKind::FUNCTION,
                    },
                    tags: None,
                    deprecated: None,
                    range: doc.range(sym.span.start, sym.span.end),
                    selection_range: doc.range(sym.selection.start, sym.selection.end),
                    children: None,
                })
                .collect();
            Some(DocumentSymbolResponse::Nested(symbols))
        })
        .await
    }

    async fn semantic_tokens_full(
        &self,
        params: SemanticTokensParams,
    ) -> Result<Option<SemanticTokensResult>> {
        let uri = params.text_document.uri;
        self.with_doc(&uri, |s, doc, file| {
            let mut data = Vec::new();
            let (mut line, mut col) = (0u32, 0u32);
            for (span, kind) in s.analysis.semantic_tokens(file) {
                let p = doc.position(span.start);
                let len = doc.position(span.end).character.saturating_sub(p.character);
                let token_type = match kind {
                    ide::TokenKind::Keyword => 0,
                    ide::TokenKind::Type | ide::TokenKind::Format => 1,
                    ide::TokenKind::Tensor => 2,
                    ide::TokenKind::Index => 3,
                    ide::TokenKind::Kernel => 4,
                    ide::TokenKind::Number => 6,
                };
                let delta_line = p.line - line;
                let delta_start = if delta_line == 0 {
                    p.character - col
                } else {
                    p.character
                };
                data.push(SemanticToken {
                    delta_line,
                    delta_start,
                    length: len,
                    token_type,
                    token_modifiers_bitset: 0,
                });
                line = p.line;
                col = p.character;
            }
            Some(SemanticTokensResult::Tokens(SemanticTokens {
                result_id: None,
                data,
            }))
        })
        .await
    }

    async fn formatting(&self, params: DocumentFormattingParams) -> Result<Option<Vec<TextEdit>>> {
        let uri = params.text_document.uri;
        self.with_doc(&uri, |s, doc, file| {
            let new = s.analysis.format(file)?;
            Some(vec![TextEdit {
                range: doc.range(0, doc.rope.len_bytes()),
                new_text: new,
            }])
        })
        .await
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let uri = params.text_document.uri;
        let target = uri.clone();
        self.with_doc(&uri, move |s, doc, file| {
            let uri = &target;
            let mut actions = Vec::new();
            for d in &params.context.diagnostics {
                for fix in s
                    .analysis
                    .quick_fixes(file, doc.offset(d.range.start), &d.message)
                {
                    let edit = TextEdit {
                        range: doc.range(fix.span.start, fix.span.end),
                        new_text: fix.replacement,
                    };
                    actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                        title: fix.title,
                        kind: Some(CodeActionKind::QUICKFIX),
                        diagnostics: Some(vec![d.clone()]),
                        edit: Some(WorkspaceEdit {
                            changes: Some([(uri.clone(), vec![edit])].into_iter().collect()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }));
                }
            }
            Some(actions)
        })
        .await
    }
}
