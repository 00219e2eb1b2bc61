// The request model (DESIGN.md): nothing slow holds up other requests,
// timing runs can be stopped at once, lines are counted as LSP counts them.
// Bounds here are generous guards against freezes; latency is measured by
// bench-latency.mjs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync, rmSync, existsSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { start, stop, within, timed, open, change, hover, diagnosticsOf, positionOf, children, until, uriOf, tmp, root, lsp, garbageText } from './client.mjs';

const small = 'tensor x : f64[4] @ dense = random(seed: 1)\ntensor y : f64[4] @ dense\nkernel copy { y(i) = x(i) }\n';

/// Open a small healthy document and answer how long a hover on it takes.
async function otherDocument(s, name) {
  const uri = uriOf(resolve(tmp, `${name}.tensor`));
  const d = diagnosticsOf(s, uri);
  open(s, uri, small);
  await within(d, 5000, 'diagnostics of a small document');
  return async () => {
    const { value, ms } = await timed(within(hover(s, uri, positionOf(small, 'x(i)', 2)), 5000, 'hover'));
    assert.match(value.contents.value, /index `i`/);
    return ms;
  };
}

test('a FIFO as a data path is an error on the string, and requests go on', async () => {
  const s = await start();
  const fifo = resolve(tmp, 'pipe.mtx');
  if (existsSync(fifo)) rmSync(fifo);
  execFileSync('mkfifo', [fifo]);
  const text = 'tensor A : f64[M, N] @ CSR = mtx("pipe.mtx")\ntensor x : f64[N] @ dense\ntensor y : f64[M] @ dense\nkernel spmv { y(i) = A(i,j) * x(j) }\n';
  const uri = uriOf(resolve(tmp, 'fifo.tensor'));
  const d = diagnosticsOf(s, uri);
  open(s, uri, text);
  const diags = await within(d, 5000, 'diagnostics with a FIFO data path');
  assert.ok(diags.some((x) => /not a regular file/.test(x.message) && x.range.start.line === 0), JSON.stringify(diags));
  const hoverOther = await otherDocument(s, 'fifo-other');
  assert.ok((await hoverOther()) < 1000);
  await stop(s);
  rmSync(fifo);
});

test('a trailing slash after a data path gives "Not a directory", as on a fresh server', async () => {
  const s = await start();
  const text = 'tensor A : f64[M, N] @ CSR = mtx("../../examples/data/west0479.mtx")\ntensor x : f64[N] @ dense\ntensor y : f64[M] @ dense\nkernel spmv { y(i) = A(i,j) * x(j) }\n';
  const uri = uriOf(resolve(tmp, 'slash.tensor'));
  let d = diagnosticsOf(s, uri);
  open(s, uri, text);
  assert.deepEqual(await within(d, 5000, 'diagnostics'), []);
  d = diagnosticsOf(s, uri, 2);
  const at = positionOf(text, '.mtx"', 4);
  change(s, uri, 2, [{ range: { start: at, end: at }, text: '/' }]);
  const diags = await within(d, 5000, 'diagnostics after the slash');
  assert.ok(diags.some((x) => /Not a directory/.test(x.message)), JSON.stringify(diags));
  await stop(s);
});

test('U+2028, U+2029, U+0085, FF and VT do not break lines: positions, hover and edits stay right', async () => {
  const s = await start();
  const text = '// odd\u2028breaks\u2029in\u0085a\fcomment\u000b😀 é\ntensor x : f64[4] @ dense = random(seed: 1)\ntensor y : f64[4] @ dense\n// \u2028\nkernel k { y(i) = x(i) + q(i) }\n';
  const uri = uriOf(resolve(tmp, 'breaks.tensor'));
  let d = diagnosticsOf(s, uri);
  open(s, uri, text);
  let diags = await within(d, 5000, 'diagnostics');
  assert.equal(diags.length, 1, JSON.stringify(diags));
  assert.match(diags[0].message, /unknown tensor `q`/);
  assert.deepEqual(diags[0].range.start, positionOf(text, 'q(i)'));
  assert.equal(diags[0].range.start.line, 4);
  const h = await hover(s, uri, positionOf(text, 'x(i)', 2));
  assert.ok(h && /index `i`/.test(h.contents.value), JSON.stringify(h));
  // Incremental edits on and after the odd lines keep the text in sync.
  d = diagnosticsOf(s, uri, 2);
  const after = positionOf(text, 'comment', 7);
  change(s, uri, 2, [{ range: { start: after, end: after }, text: ' more\u2028' }]);
  await within(d, 5000, 'diagnostics after edit 2');
  d = diagnosticsOf(s, uri, 3);
  const q = positionOf(text, 'q(i)');
  change(s, uri, 3, [{ range: { start: q, end: { line: q.line, character: q.character + 1 } }, text: 'x' }]);
  diags = await within(d, 5000, 'diagnostics after edit 3');
  assert.deepEqual(diags, [], 'the server has the same text as the client');
  await stop(s);
});

test('400 KB of garbage text leaves other requests answered', async () => {
  const s = await start();
  const hoverOther = await otherDocument(s, 'garbage-other');
  const garbage = garbageText(400_000);
  const uri = uriOf(resolve(tmp, 'garbage.tensor'));
  open(s, uri, garbage);
  await new Promise((r) => setTimeout(r, 50));
  const times = [];
  for (let n = 0; n < 5; n++) {
    change(s, uri, n + 2, [{ range: { start: { line: 0, character: n }, end: { line: 0, character: n } }, text: '#' }]);
    times.push(await hoverOther());
  }
  assert.ok(Math.max(...times) < 1000, `hover on another document took ${times.map((t) => t.toFixed(1)).join(', ')} ms`);
  await stop(s);
});

// A kernel that runs for seconds: a dense-ish CSR matrix times a vector,
// many runs.
const slowText = 'tensor A : f64[3000, 3000] @ CSR = random(seed: 1, density: 0.3)\ntensor x : f64[3000] @ dense = random(seed: 2)\ntensor y : f64[3000] @ dense\nkernel spmv { y(i) = A(i,j) * x(j) }\n';

async function startRun(s, name) {
  const uri = uriOf(resolve(tmp, `${name}.tensor`));
  const d = diagnosticsOf(s, uri);
  open(s, uri, slowText);
  await within(d, 10000, 'diagnostics');
  const source = new lsp.CancellationTokenSource();
  const answer = s.conn.sendRequest('tensor/timeKernel', { textDocument: { uri }, kernel: 'spmv', runs: 1000 }, source.token);
  answer.catch(() => {});
  await within(until(s, () => s.created.length > 0 && s.progress.get(s.created[0])?.some((p) => p.kind === 'begin')), 5000, 'progress begin');
  const token = s.created[0];
  assert.equal(s.progress.get(token)[0].cancellable, true);
  await within(until(s, () => children(s).length > 0), 5000, 'a timing worker');
  return { uri, answer, source, token };
}

async function assertStopped(s, token, stoppedAt) {
  await within(until(s, () => s.progress.get(token).some((p) => p.kind === 'end')), 1000, 'progress end');
  const end = s.progress.get(token).find((p) => p.kind === 'end');
  assert.ok(end.at - stoppedAt < 1000, `end came ${(end.at - stoppedAt).toFixed(0)} ms after the cancel`);
  await within(until(s, () => children(s).length === 0), 1000, 'the worker gone');
  assert.equal(s.progress.get(token).filter((p) => p.kind === 'begin').length, 1);
}

test('window/workDoneProgress/cancel stops a timing run at once', async () => {
  const s = await start();
  const run = await startRun(s, 'cancel-progress');
  const t0 = performance.now();
  s.conn.sendNotification('window/workDoneProgress/cancel', { token: run.token });
  await assert.rejects(within(run.answer, 1000, 'the cancelled run'));
  await assertStopped(s, run.token, t0);
  await stop(s);
});

test('$/cancelRequest stops a timing run at once and its progress ends', async () => {
  const s = await start();
  const run = await startRun(s, 'cancel-request');
  const t0 = performance.now();
  run.source.cancel();
  await assert.rejects(within(run.answer, 1000, 'the cancelled request'));
  await assertStopped(s, run.token, t0);
  await stop(s);
});

test('edits and hovers during a timing run are answered as if no run were going', async () => {
  const s = await start();
  const run = await startRun(s, 'edit-during-run');
  const text = slowText;
  let version = 1;
  for (let n = 0; n < 10; n++) {
    version++;
    const d = diagnosticsOf(s, run.uri, version);
    const at = positionOf(text, 'spmv');
    change(s, run.uri, version, [{ range: { start: at, end: { line: at.line, character: at.character + 4 } }, text: n % 2 ? 'spmv' : 'spmw' }]);
    const { ms } = await timed(within(d, 1000, 'diagnostics during a run'));
    assert.ok(ms < 1000);
    const h = await within(hover(s, run.uri, positionOf(text, 'x(j)', 2)), 1000, 'hover during a run');
    assert.match(h.contents.value, /index `j`/);
  }
  assert.equal(children(s).length, 1, 'the run goes on');
  s.conn.sendNotification('window/workDoneProgress/cancel', { token: run.token });
  await assertStopped(s, run.token, performance.now());
  await stop(s);
});

test('a timing run answers with its figures, through a worker process', async () => {
  const s = await start();
  const uri = uriOf(resolve(root, 'examples', 'spmv_csr.tensor'));
  const { readFileSync } = await import('node:fs');
  const d = diagnosticsOf(s, uri);
  open(s, uri, readFileSync(resolve(root, 'examples', 'spmv_csr.tensor'), 'utf8'));
  await within(d, 10000, 'diagnostics');
  const r = await within(s.conn.sendRequest('tensor/timeKernel', { textDocument: { uri }, kernel: 'spmv', runs: 3 }), 20000, 'timing');
  assert.ok(r.median_ms > 0 && r.runs === 3, JSON.stringify(r));
  assert.equal(s.created.length, 1);
  const kinds = s.progress.get(s.created[0]).map((p) => p.kind);
  assert.deepEqual([kinds[0], kinds[kinds.length - 1]], ['begin', 'end']);
  await stop(s);
});
