//! The protocol side: converts the compiler's `ide` answers to LSP types.
//! No compiler logic lives here (ARCHITECTURE.md). Every request runs its
//! analysis under `catch_unwind`: a failing request answers with an error
//! and the server goes on.

use crate::document::Document;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tensor_compiler::ide::{self, Analysis, View};
use tensor_compiler::language::db::SourceFile;
use tower_lsp_server::jsonrpc::{Error, Result};
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

#[derive(Default)]
struct State {
    analysis: Analysis,
    docs: HashMap<Uri, Document>,
    /// Last timing per (document, kernel), shown in the code lens.
    timings: HashMap<(Uri, String), String>,
    time_on_save: bool,
    cancel: Option<Arc<AtomicBool>>,
}

pub struct Backend {
    client: Client,
    state: Arc<Mutex<State>>,
}

fn path_of(uri: &Uri) -> PathBuf {
    uri.to_file_path().map(|p| p.into_owned()).unwrap_or_else(|| PathBuf::from(uri.as_str()))
}

fn internal(e: impl std::fmt::Display) -> Error {
    let mut err = Error::internal_error();
    err.message = e.to_string().into();
    err
}

impl Backend {
    pub fn new(client: Client) -> Self {
        Backend { client, state: Arc::default() }
    }

    /// Run `f` on the state, turning a panic into an error answer.
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> Result<T> {
        let mut guard = match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        catch_unwind(AssertUnwindSafe(|| f(&mut guard))).map_err(|p| {
            let what = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default();
            internal(format!("internal error: {what}"))
        })
    }

    /// Run `f` on an open document and its analysis file (None when the
    /// document is not open).
    fn with_doc<T>(&self, uri: &Uri, f: impl FnOnce(&State, &Document, SourceFile) -> Option<T>) -> Result<Option<T>> {
        self.with(|s| {
            let doc = s.docs.get(uri)?;
            let file = s.analysis.file(&path_of(uri))?;
            f(s, doc, file)
        })
    }

    async fn publish(&self, uri: Uri) {
        let answer = self.with(|s| {
            let doc = s.docs.get(&uri)?;
            let version = doc.version;
            let file = s.analysis.file(&path_of(&uri))?;
            let diags: Vec<Diagnostic> = s
                .analysis
                .diagnostics(file)
                .into_iter()
                .map(|d| Diagnostic {
                    range: doc.range(d.span.start, d.span.end),
                    severity: Some(if d.is_error { DiagnosticSeverity::ERROR } else { DiagnosticSeverity::WARNING }),
                    source: Some("tensor".into()),
                    message: d.message,
                    ..Default::default()
                })
                .collect();
            Some((diags, version))
        });
        if let Ok(Some((diags, version))) = answer {
            // Drop stale results: the text moved on while we computed.
            let current = self.with(|s| s.docs.get(&uri).map(|d| d.version)).ok().flatten();
            if current == Some(version) {
                self.client.publish_diagnostics(uri, diags, Some(version)).await;
            }
        }
    }

    fn sync(s: &mut State, uri: &Uri) {
        if let Some(doc) = s.docs.get(uri) {
            let text = doc.text();
            s.analysis.set_file(&path_of(uri), text);
        }
    }

    /// `tensor/view`: the emitted C, loop IR, lattices or iteration graph
    /// of the kernel at a position (or named).
    pub async fn view(&self, params: ViewParams) -> Result<String> {
        self.with(|s| {
            let uri = params.text_document.uri;
            let doc = s.docs.get(&uri).ok_or_else(|| internal("document not open"))?;
            let file = s.analysis.file(&path_of(&uri)).ok_or_else(|| internal("document not open"))?;
            let kernel = match (&params.kernel, params.position) {
                (Some(k), _) => k.clone(),
                (None, Some(p)) => s.analysis.kernel_at(file, doc.offset(p)).ok_or_else(|| internal("no kernel at this position"))?,
                (None, None) => return Err(internal("give a kernel name or a position")),
            };
            let view = View::parse(params.view.as_deref().unwrap_or("c")).ok_or_else(|| internal("view is one of c, ir, lattice, graph"))?;
            s.analysis.view(file, &kernel, view).map_err(internal)
        })?
    }

    /// `window/workDoneProgress/cancel`: stop the running timing.
    pub async fn progress_cancel(&self, _: WorkDoneProgressCancelParams) {
        let _ = self.with(|s| {
            if let Some(c) = &s.cancel {
                c.store(true, Ordering::Relaxed);
            }
        });
    }

    /// `tensor/timeKernel`: time a kernel and answer with the figures.
    pub async fn time_kernel_request(&self, params: TimeParams) -> Result<Value> {
        self.time_kernel(params.text_document.uri, params.kernel, params.runs.unwrap_or(10)).await
    }

    async fn time_kernel(&self, uri: Uri, kernel: String, runs: usize) -> Result<Value> {
        let runs = runs.clamp(1, 1000);
        let cancel = Arc::new(AtomicBool::new(false));
        let snapshot = self.with(|s| {
            if let Some(old) = s.cancel.replace(cancel.clone()) {
                old.store(true, Ordering::Relaxed);
            }
            s.analysis.file(&path_of(&uri)).map(|f| (s.analysis.clone(), f))
        })?;
        let Some((analysis, file)) = snapshot else { return Err(internal("document not open")) };
        let progress = self.client.progress(ProgressToken::String(format!("tensor-time-{kernel}")), format!("Timing kernel {kernel}")).with_cancel_button().begin().await;
        let k = kernel.clone();
        let c = cancel.clone();
        // The database snapshot runs on a blocking thread; an edit meanwhile
        // cancels it (salsa unwinds), which we report as cancelled.
        let result = tokio::task::spawn_blocking(move || catch_unwind(AssertUnwindSafe(|| analysis.time_kernel(file, &k, runs, &c))))
            .await
            .map_err(internal)?
            .unwrap_or_else(|_| Err("cancelled by an edit".into()));
        progress.finish_with_message("done").await;
        match result {
            Ok(run) => {
                let label = format!("⏱ {:.3} ms median · {:.2} GB/s", run.median_ms(), run.gbytes_per_s());
                let _ = self.with(|s| s.timings.insert((uri.clone(), kernel.clone()), label.clone()));
                let _ = self.client.code_lens_refresh().await;
                Ok(json!({
                    "kernel": kernel,
                    "median_ms": run.median_ms(),
                    "gbytes_per_s": run.gbytes_per_s(),
                    "runs": runs,
                    "statements": run.statements.iter().map(|s| json!({"statement": s.statement, "nnz": s.nnz, "median_ms": s.timing.median().as_secs_f64() * 1e3})).collect::<Vec<_>>(),
                    "label": label,
                }))
            }
            Err(e) => Err(internal(e)),
        }
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
        let on_save = params.initialization_options.as_ref().and_then(|o| o.get("timeOnSave")).and_then(Value::as_bool).unwrap_or(false);
        let _ = self.with(|s| s.time_on_save = on_save);
        Ok(InitializeResult {
            server_info: Some(ServerInfo { name: "tensor-lsp".into(), version: Some(env!("CARGO_PKG_VERSION").into()) }),
            capabilities: ServerCapabilities {
                text_document_sync: Some(TextDocumentSyncCapability::Options(TextDocumentSyncOptions {
                    open_close: Some(true),
                    change: Some(TextDocumentSyncKind::INCREMENTAL),
                    save: Some(TextDocumentSyncSaveOptions::Supported(true)),
                    ..Default::default()
                })),
                hover_provider: Some(HoverProviderCapability::Simple(true)),
                inlay_hint_provider: Some(OneOf::Left(true)),
                code_lens_provider: Some(CodeLensOptions { resolve_provider: Some(false) }),
                completion_provider: Some(CompletionOptions { trigger_characters: Some(vec!["@".into(), "(".into(), ",".into()]), ..Default::default() }),
                definition_provider: Some(OneOf::Left(true)),
                document_symbol_provider: Some(OneOf::Left(true)),
                document_formatting_provider: Some(OneOf::Left(true)),
                code_action_provider: Some(CodeActionProviderCapability::Simple(true)),
                // Only timing runs in the server; "tensor.showC" is the client's command
                // (editors show the text), also answered here for clients without it.
                execute_command_provider: Some(ExecuteCommandOptions { commands: vec!["tensor.timeKernel".into()], ..Default::default() }),
                semantic_tokens_provider: Some(SemanticTokensServerCapabilities::SemanticTokensOptions(SemanticTokensOptions {
                    legend: SemanticTokensLegend { token_types: SEMANTIC_TYPES.to_vec(), token_modifiers: vec![] },
                    full: Some(SemanticTokensFullOptions::Bool(true)),
                    ..Default::default()
                })),
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
        let _ = self.with(|s| {
            s.docs.insert(uri.clone(), Document::new(&params.text_document.text, params.text_document.version));
            Self::sync(s, &uri);
        });
        self.publish(uri).await;
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        let uri = params.text_document.uri.clone();
        let _ = self.with(|s| {
            if let Some(c) = s.cancel.take() {
                c.store(true, Ordering::Relaxed);
            }
            if let Some(doc) = s.docs.get_mut(&uri) {
                for ch in &params.content_changes {
                    doc.apply(ch);
                }
                doc.version = params.text_document.version;
            }
            Self::sync(s, &uri);
        });
        self.publish(uri).await;
    }

    async fn did_save(&self, params: DidSaveTextDocumentParams) {
        let uri = params.text_document.uri;
        let _ = self.with(|s| s.analysis.refresh_data_files());
        self.publish(uri.clone()).await;
        let kernels = self.with(|s| if s.time_on_save { s.analysis.file(&path_of(&uri)).map(|f| tensor_compiler::language::db::kernel_names(&s.analysis.db, f).clone()) } else { None });
        if let Ok(Some(kernels)) = kernels {
            for k in kernels {
                let _ = self.time_kernel(uri.clone(), k, 10).await;
            }
        }
    }

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        let uri = params.text_document.uri;
        let _ = self.with(|s| {
            s.docs.remove(&uri);
            s.analysis.remove_file(&path_of(&uri));
        });
        self.client.publish_diagnostics(uri, Vec::new(), None).await;
    }

    async fn did_change_configuration(&self, params: DidChangeConfigurationParams) {
        if let Some(v) = params.settings.get("tensor").and_then(|t| t.get("timeOnSave")).and_then(Value::as_bool) {
            let _ = self.with(|s| s.time_on_save = v);
        }
    }

    async fn hover(&self, params: HoverParams) -> Result<Option<Hover>> {
        let uri = params.text_document_position_params.text_document.uri;
        let pos = params.text_document_position_params.position;
        self.with_doc(&uri, |s, doc, file| {
            let h = s.analysis.hover(file, doc.offset(pos))?;
            Some(Hover { contents: HoverContents::Markup(MarkupContent { kind: MarkupKind::Markdown, value: h.markdown }), range: Some(doc.range(h.span.start, h.span.end)) })
        })
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
    }

    async fn code_lens(&self, params: CodeLensParams) -> Result<Option<Vec<CodeLens>>> {
        let uri = params.text_document.uri;
        self.with_doc(&uri, |s, doc, file| {
            Some(
                s.analysis
                    .code_lenses(file)
                    .into_iter()
                    .map(|l| {
                        let (title, command) = match l.kind {
                            ide::LensKind::Time => (
                                s.timings.get(&(uri.clone(), l.kernel.clone())).map_or_else(|| "▶ time".to_string(), |t| format!("▶ time ({t})")),
                                "tensor.timeKernel",
                            ),
                            ide::LensKind::ShowC => ("show C".to_string(), "tensor.showC"),
                        };
                        let start = doc.position(l.span.start);
                        CodeLens {
                            range: Range { start, end: start },
                            command: Some(Command { title, command: command.into(), arguments: Some(vec![json!(uri.as_str()), json!(l.kernel)]) }),
                            data: None,
                        }
                    })
                    .collect(),
            )
        })
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<Value>> {
        let uri = params.arguments.first().and_then(Value::as_str).and_then(|u| u.parse::<Uri>().ok()).ok_or_else(|| internal("first argument: document uri"))?;
        let kernel = params.arguments.get(1).and_then(Value::as_str).ok_or_else(|| internal("second argument: kernel name"))?.to_string();
        match params.command.as_str() {
            "tensor.timeKernel" => self.time_kernel(uri, kernel, 10).await.map(Some),
            "tensor.showC" => {
                let text = self.view(ViewParams { text_document: TextDocumentIdentifier { uri }, position: None, kernel: Some(kernel), view: Some("c".into()) }).await?;
                Ok(Some(Value::String(text)))
            }
            other => Err(internal(format!("unknown command {other}"))),
        }
    }

    async fn completion(&self, params: CompletionParams) -> Result<Option<CompletionResponse>> {
        let uri = params.text_document_position.text_document.uri;
        let pos = params.text_document_position.position;
        self.with_doc(&uri, |s, doc, file| {
            let items = s
                .analysis
                .completions(file, doc.offset(pos))
                .into_iter()
                .map(|c| CompletionItem {
                    label: c.label,
                    detail: Some(c.detail),
                    kind: Some(match c.kind {
                        ide::CompletionKind::Level | ide::CompletionKind::Preset => CompletionItemKind::CLASS,
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
    }

    async fn goto_definition(&self, params: GotoDefinitionParams) -> Result<Option<GotoDefinitionResponse>> {
        let uri = params.text_document_position_params.text_document.uri;
        let pos = params.text_document_position_params.position;
        self.with_doc(&uri, |s, doc, file| {
            let span = s.analysis.definition(file, doc.offset(pos))?;
            Some(GotoDefinitionResponse::Scalar(Location { uri: uri.clone(), range: doc.range(span.start, span.end) }))
        })
    }

    async fn document_symbol(&self, params: DocumentSymbolParams) -> Result<Option<DocumentSymbolResponse>> {
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
    }

    async fn semantic_tokens_full(&self, params: SemanticTokensParams) -> Result<Option<SemanticTokensResult>> {
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
                let delta_start = if delta_line == 0 { p.character - col } else { p.character };
                data.push(SemanticToken { delta_line, delta_start, length: len, token_type, token_modifiers_bitset: 0 });
                line = p.line;
                col = p.character;
            }
            Some(SemanticTokensResult::Tokens(SemanticTokens { result_id: None, data }))
        })
    }

    async fn formatting(&self, params: DocumentFormattingParams) -> Result<Option<Vec<TextEdit>>> {
        let uri = params.text_document.uri;
        self.with_doc(&uri, |s, doc, file| {
            let new = s.analysis.format(file)?;
            Some(vec![TextEdit { range: doc.range(0, doc.rope.len_bytes()), new_text: new }])
        })
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let uri = params.text_document.uri;
        self.with_doc(&uri, |s, doc, file| {
            let mut actions = Vec::new();
            for d in &params.context.diagnostics {
                for fix in s.analysis.quick_fixes(file, doc.offset(d.range.start), &d.message) {
                    let edit = TextEdit { range: doc.range(fix.span.start, fix.span.end), new_text: fix.replacement };
                    actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                        title: fix.title,
                        kind: Some(CodeActionKind::QUICKFIX),
                        diagnostics: Some(vec![d.clone()]),
                        edit: Some(WorkspaceEdit { changes: Some([(uri.clone(), vec![edit])].into_iter().collect()), ..Default::default() }),
                        ..Default::default()
                    }));
                }
            }
            Some(actions)
        })
    }
}
