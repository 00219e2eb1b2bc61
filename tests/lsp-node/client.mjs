// A small LSP client over stdio for the tests and the latency benchmark:
// Microsoft's vscode-jsonrpc + vscode-languageserver-protocol, the same
// protocol VS Code speaks. Records diagnostics, progress and the requests
// the server makes of the client.
import { spawn, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { resolve, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as lsp from 'vscode-languageserver-protocol/node';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const server = process.env.TENSOR_LSP ?? ['release', 'debug'].map((p) => resolve(root, 'target', p, 'tensor-lsp')).find(existsSync);
export const tmp = resolve(root, 'target', 'lsp-node-tmp');
mkdirSync(tmp, { recursive: true });

export async function start() {
  const proc = spawn(server, ['--stdio'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const conn = lsp.createMessageConnection(new lsp.StreamMessageReader(proc.stdout), new lsp.StreamMessageWriter(proc.stdin));
  const s = { proc, conn, diagnostics: new Map(), published: [], created: [], progress: new Map(), waiters: [] };
  conn.onNotification(lsp.PublishDiagnosticsNotification.type, (p) => {
    s.diagnostics.set(p.uri, p.diagnostics);
    s.published.push({ at: performance.now(), ...p });
    s.waiters = s.waiters.filter((w) => !w(p));
  });
  conn.onRequest('window/workDoneProgress/create', (p) => {
    s.created.push(p.token);
    return null;
  });
  conn.onRequest('workspace/codeLens/refresh', () => null);
  conn.onNotification('$/progress', (p) => {
    if (!s.progress.has(p.token)) s.progress.set(p.token, []);
    s.progress.get(p.token).push({ at: performance.now(), ...p.value });
    s.waiters = s.waiters.filter((w) => !w(null));
  });
  conn.listen();
  s.init = await conn.sendRequest(lsp.InitializeRequest.type, { processId: process.pid, rootUri: pathToFileURL(root).href, capabilities: { window: { workDoneProgress: true } }, initializationOptions: { timeOnSave: false } });
  conn.sendNotification(lsp.InitializedNotification.type, {});
  return s;
}

export async function stop({ conn, proc }) {
  const exited = new Promise((r) => proc.on('exit', r));
  try {
    await within(conn.sendRequest(lsp.ShutdownRequest.type), 2000, 'shutdown');
    await conn.sendNotification(lsp.ExitNotification.type);
  } catch {}
  await Promise.race([exited, new Promise((r) => setTimeout(r, 2000))]);
  proc.kill('SIGKILL');
  conn.dispose();
}

/// Resolves when `check` holds, checked on every notification.
export function until(s, check) {
  return new Promise((r) => {
    if (check()) return r();
    s.waiters.push(() => (check() ? (r(), true) : false));
  });
}

/// The diagnostics of `uri` at `version` (or later), once published.
export function diagnosticsOf(s, uri, version) {
  return new Promise((r) => {
    const done = (p) => p && p.uri === uri && (version === undefined || p.version >= version) && (r(p.diagnostics), true);
    s.waiters.push(done);
  });
}

export function within(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export async function timed(promise) {
  const t0 = performance.now();
  const value = await promise;
  return { value, ms: performance.now() - t0 };
}

export function open(s, uri, text, version = 1) {
  s.conn.sendNotification(lsp.DidOpenTextDocumentNotification.type, { textDocument: { uri, languageId: 'tensor', version, text } });
}

export function change(s, uri, version, contentChanges) {
  s.conn.sendNotification(lsp.DidChangeTextDocumentNotification.type, { textDocument: { uri, version }, contentChanges });
}

export function hover(s, uri, position) {
  return s.conn.sendRequest(lsp.HoverRequest.type, { textDocument: { uri }, position });
}

/// LSP position of the `skip`-th character after `needle` (UTF-16 columns,
/// lines broken at \n, \r\n and \r only).
export function positionOf(text, needle, skip = 0) {
  const at = text.indexOf(needle) + skip;
  const lines = text.slice(0, at).split(/\r\n|\r|\n/);
  return { line: lines.length - 1, character: lines[lines.length - 1].length };
}

/// Processes whose parent is the server (timing workers).
export function children(s) {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(s.proc.pid)], { encoding: 'utf8' }).trim().split('\n').filter(Boolean);
  } catch {
    return [];
  }
}

export function uriOf(path) {
  return pathToFileURL(path).href;
}

/// Text that keeps the parser and the analysis busy for seconds: many
/// broken kernels.
export function garbageText(bytes) {
  let text = '';
  for (let n = 0; text.length < bytes; n++) text += `kernel k${n} { y(i) = $ }\n`;
  return text;
}

export { lsp };
