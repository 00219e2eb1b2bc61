// VS Code client for tensor-lsp: starts the server, and adds commands that
// show a kernel's generated code in a side editor and time it.
import * as vscode from 'vscode';
import { LanguageClient, LanguageClientOptions, ServerOptions } from 'vscode-languageclient/node';

let client: LanguageClient | undefined;

async function showView(view: string, kernel?: string, uri?: string): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!client) return;
  const target = uri ?? editor?.document.uri.toString();
  if (!target) return;
  const position = editor && !kernel ? client.code2ProtocolConverter.asPosition(editor.selection.active) : undefined;
  try {
    const text: string = await client.sendRequest('tensor/view', { textDocument: { uri: target }, position, kernel, view });
    const doc = await vscode.workspace.openTextDocument({ content: text, language: view === 'c' ? 'c' : 'plaintext' });
    await vscode.window.showTextDocument(doc, vscode.ViewColumn.Beside, true);
  } catch (e) {
    vscode.window.showErrorMessage(`tensor: ${e instanceof Error ? e.message : String(e)}`);
  }
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const config = vscode.workspace.getConfiguration('tensor');
  const command = config.get<string>('server.path', 'tensor-lsp');
  // vscode-languageclient appends --stdio; the server accepts it.
  const serverOptions: ServerOptions = { run: { command }, debug: { command } };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ language: 'tensor' }],
    initializationOptions: { timeOnSave: config.get<boolean>('timeOnSave', false), threads: config.get<number>('threads', 0), backend: config.get<string>('backend', 'auto') },
    synchronize: { configurationSection: 'tensor' },
  };
  client = new LanguageClient('tensor', 'tensor', serverOptions, clientOptions);
  context.subscriptions.push(
    vscode.commands.registerCommand('tensor.showC', (uri?: string, kernel?: string) => showView('c', kernel, uri)),
    vscode.commands.registerCommand('tensor.showIr', () => showView('ir')),
    vscode.commands.registerCommand('tensor.showLattice', () => showView('lattice')),
    vscode.commands.registerCommand('tensor.showGraph', () => showView('graph')),
    vscode.commands.registerCommand('tensor.time', async () => {
      const editor = vscode.window.activeTextEditor;
      if (!client || !editor) return;
      const lenses: any[] = await client.sendRequest('textDocument/codeLens', { textDocument: { uri: editor.document.uri.toString() } });
      const line = editor.selection.active.line;
      const lens = lenses.filter((l) => l.command.command === 'tensor.timeKernel' && l.range.start.line <= line).pop();
      if (!lens) return;
      const r: any = await client.sendRequest('workspace/executeCommand', { command: 'tensor.timeKernel', arguments: lens.command.arguments });
      vscode.window.showInformationMessage(`tensor: ${lens.command.arguments[1]} ${r.label}`);
    }),
  );
  await client.start();
}

export async function deactivate(): Promise<void> {
  await client?.stop();
}
