-- Headless Neovim test (0.7.2 and 0.11): open an example, wait for the
-- server's diagnostics, hover an index variable, run the timing lens
-- command, view the C, check tree-sitter highlighting loads.
-- Run: nvim --headless -u NONE -c "luafile tests/nvim/test.lua" examples/spmv_vectors.tensor
local root = vim.fn.getcwd()
vim.opt.runtimepath:prepend(root .. '/editors/nvim')
vim.cmd('filetype on')
vim.cmd('runtime plugin/tensor.lua')
vim.cmd('runtime ftdetect/tensor.lua')
local out = {}
local function log(s) table.insert(out, s) end
local function fail(msg)
  log('FAIL: ' .. msg)
  vim.fn.writefile(out, vim.env.NVIM_TEST_LOG or '/dev/stderr')
  vim.cmd('cquit 1')
end
require('tensor').setup({ cmd = { vim.env.TENSOR_LSP }, parser_dir = vim.env.TENSOR_PARSER_DIR })
vim.cmd('edit! ' .. vim.fn.fnameescape(vim.fn.argv(0)))
if vim.bo.filetype ~= 'tensor' then fail('filetype is ' .. vim.bo.filetype) end
require('tensor').attach()
local buf = vim.api.nvim_get_current_buf()

-- Wait for the client to attach and the server to answer.
local ok = vim.wait(10000, function()
  return #(vim.lsp.get_clients or vim.lsp.get_active_clients)() > 0 and vim.lsp.buf_is_attached(buf, (vim.lsp.get_clients or vim.lsp.get_active_clients)()[1].id)
end, 50)
if not ok then fail('client did not attach') end
log('version ' .. tostring(vim.version().major) .. '.' .. tostring(vim.version().minor))

-- Diagnostics: a clean file gets none; a broken edit gets some.
vim.wait(1500)
if #vim.diagnostic.get(buf) ~= 0 then fail('unexpected diagnostics: ' .. vim.inspect(vim.diagnostic.get(buf))) end
local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
local kline
for n, l in ipairs(lines) do if l:match('^kernel sparse_x') then kline = n end end
vim.api.nvim_buf_set_lines(buf, -1, -1, false, { 'kernel broken { y(i) = A(i,j) * q(j) }' })
ok = vim.wait(5000, function() return #vim.diagnostic.get(buf) > 0 end, 50)
if not ok then fail('no diagnostic for the unknown tensor') end
log('diagnostic: ' .. vim.diagnostic.get(buf)[1].message)
if not vim.diagnostic.get(buf)[1].message:match('unknown tensor `q`') then fail('wrong diagnostic') end
vim.api.nvim_buf_set_lines(buf, -2, -1, false, {})

-- Hover on the index variable j of kernel sparse_x.
local col = lines[kline]:find('xs%(j') + 2
local res = vim.lsp.buf_request_sync(buf, 'textDocument/hover', { textDocument = { uri = vim.uri_from_bufnr(buf) }, position = { line = kline - 1, character = col } }, 5000)
local hover
for _, r in pairs(res or {}) do if r.result then hover = r.result.contents.value end end
if not hover or not hover:match('index `j`') or not hover:match('co%-iterate') then fail('hover: ' .. tostring(hover)) end
log('hover: ' .. hover:gsub('\n', ' '):sub(1, 120))

-- Inlay hints (requested directly: 0.7 has no native display).
res = vim.lsp.buf_request_sync(buf, 'textDocument/inlayHint', { textDocument = { uri = vim.uri_from_bufnr(buf) }, range = { start = { line = 0, character = 0 }, ['end'] = { line = #lines, character = 0 } } }, 5000)
local nhints = 0
for _, r in pairs(res or {}) do nhints = nhints + #(r.result or {}) end
if nhints < 3 then fail('inlay hints: ' .. nhints) end
log('inlay hints: ' .. nhints)

-- Code lens: run the time command of the first kernel through the server.
res = vim.lsp.buf_request_sync(buf, 'textDocument/codeLens', { textDocument = { uri = vim.uri_from_bufnr(buf) } }, 5000)
local lens
for _, r in pairs(res or {}) do for _, l in ipairs(r.result or {}) do if l.command.command == 'tensor.timeKernel' and not lens then lens = l end end end
if not lens then fail('no time lens') end
res = vim.lsp.buf_request_sync(buf, 'workspace/executeCommand', { command = lens.command.command, arguments = lens.command.arguments }, 30000)
local timing
for _, r in pairs(res or {}) do if r.result then timing = r.result end end
if not timing or not (timing.median_ms > 0) then fail('timing: ' .. vim.inspect(res)) end
log('lens ' .. lens.command.title .. ' -> ' .. timing.label)

-- The :TensorShowC command opens the emitted C.
vim.api.nvim_win_set_cursor(0, { kline, 2 })
local c = require('tensor').show('c')
if not c or not c:match('int [%w_]+%(tensor_t') then fail('show C: ' .. tostring(c)) end
log('show C: ' .. #vim.split(c, '\n') .. ' lines')
vim.cmd('close')

-- Tree-sitter highlighting: the parser loads and parses without errors.
if vim.env.TENSOR_PARSER_DIR then
  local okp, parser = pcall(vim.treesitter.get_parser, buf, 'tensor')
  if not okp then fail('tree-sitter parser: ' .. tostring(parser)) end
  local tree = parser:parse()[1]
  if tree:root():has_error() then fail('tree has errors') end
  local q = (vim.treesitter.query.get or vim.treesitter.get_query)('tensor', 'highlights')
  if not q then fail('highlights query not found') end
  local captures = 0
  for _ in q:iter_captures(tree:root(), buf, 0, -1) do captures = captures + 1 end
  log('tree-sitter: ' .. tree:root():type() .. ', ' .. captures .. ' highlight captures')
  if captures < 20 then fail('too few captures') end
end
log('PASS')
vim.fn.writefile(out, vim.env.NVIM_TEST_LOG or '/dev/stdout')
vim.cmd('qall!')
