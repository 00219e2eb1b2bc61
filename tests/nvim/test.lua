-- Headless Neovim test (0.7.2 and 0.11) of what a new user sees on first
-- open, with no call into the plugin beyond setup: highlighting (tree-sitter
-- and the Vim syntax fallback), diagnostics with virtual text, K mapped to
-- hover, inlay hints, code lenses refreshed on open and InsertLeave, the
-- time lens and the client-side "show C" lens command.
-- Run: nvim --headless -u NONE -c "luafile tests/nvim/test.lua" examples/spmv_vectors.tensor
local root = vim.fn.getcwd()
vim.opt.runtimepath:prepend(root .. '/editors/nvim')
vim.cmd('filetype plugin on')
vim.cmd('runtime plugin/tensor.lua')
vim.cmd('runtime ftdetect/tensor.lua')
local out = {}
local function log(s) table.insert(out, s) end
local function fail(msg)
  log('FAIL: ' .. msg)
  vim.fn.writefile(out, vim.env.NVIM_TEST_LOG or '/dev/stderr')
  vim.cmd('cquit 1')
end
local function check(cond, msg) if not cond then fail(msg) end end
local modern = vim.fn.has('nvim-0.10') == 1
local tensor = require('tensor')
-- Defaults: the server and the parser are found or built by the plugin.
tensor.setup({})
vim.cmd('edit! ' .. vim.fn.fnameescape(vim.fn.argv(0)))
check(vim.bo.filetype == 'tensor', 'filetype is ' .. vim.bo.filetype)
local buf = vim.api.nvim_get_current_buf()
local clients = vim.lsp.get_clients or vim.lsp.get_active_clients
log('version ' .. tostring(vim.version().major) .. '.' .. tostring(vim.version().minor))

-- The FileType autocommand attached the buffer by itself.
local ok = vim.wait(10000, function()
  return #clients() > 0 and vim.lsp.buf_is_attached(buf, clients()[1].id)
end, 50)
check(ok, 'client did not attach')

-- Highlighting: the tree-sitter highlighter runs on this buffer.
check(tensor.highlighting == 'treesitter', 'highlighting: ' .. tostring(tensor.highlighting))
check(vim.treesitter.highlighter.active[buf] ~= nil, 'no tree-sitter highlighter on the buffer')
local okp, parser = pcall(vim.treesitter.get_parser, buf, 'tensor')
check(okp, 'tree-sitter parser: ' .. tostring(parser))
local tree = parser:parse()[1]
check(not tree:root():has_error(), 'tree has errors')
local q = (vim.treesitter.query.get or vim.treesitter.get_query)('tensor', 'highlights')
check(q ~= nil, 'highlights query not found')
local captures, kinds = 0, {}
for id in q:iter_captures(tree:root(), buf, 0, -1) do
  captures = captures + 1
  kinds[q.captures[id]] = true
end
check(captures >= 20 and kinds.keyword and kinds['function'], 'too few captures: ' .. captures)
if vim.inspect_pos then
  local at = vim.inspect_pos(buf, 7, 1) -- `kernel` of the first kernel
  local names = vim.tbl_map(function(c) return c.capture end, at.treesitter)
  check(vim.tbl_contains(names, 'keyword'), 'kernel keyword not highlighted: ' .. vim.inspect(names))
end
log('tree-sitter: ' .. tree:root():type() .. ', ' .. captures .. ' highlight captures')

-- K is mapped to hover in this buffer.
local k = vim.fn.maparg('K', 'n', false, true)
check(k.buffer == 1 and (k.callback ~= nil or (k.rhs or ''):match('hover')), 'K is not mapped to hover: ' .. vim.inspect(k))

-- Code lenses appear on open, without a refresh by hand.
ok = vim.wait(10000, function() return #vim.lsp.codelens.get(buf) >= 6 end, 50)
check(ok, 'no code lenses after open: ' .. #vim.lsp.codelens.get(buf))
log('code lenses on open: ' .. #vim.lsp.codelens.get(buf))

-- Inlay hints appear on open: native on 0.10+, end-of-line text before.
local function hint_count()
  if modern then
    return #vim.lsp.inlay_hint.get({ bufnr = buf })
  end
  local ns = vim.api.nvim_get_namespaces()['tensor-inlay-hints']
  return ns and #vim.api.nvim_buf_get_extmarks(buf, ns, 0, -1, {}) or 0
end
if modern then check(vim.lsp.inlay_hint.is_enabled({ bufnr = buf }), 'inlay hints are not enabled') end
ok = vim.wait(10000, function() return hint_count() >= 3 end, 50)
check(ok, 'inlay hints: ' .. hint_count())
log('inlay hints: ' .. hint_count())

-- Diagnostics: a clean file gets none; a broken edit gets one, shown as
-- virtual text.
vim.wait(500)
check(#vim.diagnostic.get(buf) == 0, 'unexpected diagnostics: ' .. vim.inspect(vim.diagnostic.get(buf)))
local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
local kline
for n, l in ipairs(lines) do if l:match('^kernel sparse_x') then kline = n end end
vim.api.nvim_buf_set_lines(buf, -1, -1, false, { 'kernel broken { y(i) = A(i,j) * q(j) }' })
ok = vim.wait(5000, function() return #vim.diagnostic.get(buf) > 0 end, 50)
check(ok, 'no diagnostic for the unknown tensor')
local msg = vim.diagnostic.get(buf)[1].message
log('diagnostic: ' .. msg)
check(msg:match('unknown tensor `q`'), 'wrong diagnostic')
-- Virtual text lives in a namespace of vim.diagnostic's own (anonymous on
-- 0.7): look in every namespace but the plugin's inlay hints.
local function virtual_texts()
  local found = {}
  local hints = vim.api.nvim_get_namespaces()['tensor-inlay-hints']
  for ns = 1, 200 do
    local okm, marks = pcall(vim.api.nvim_buf_get_extmarks, buf, ns, 0, -1, { details = true })
    if okm and ns ~= hints then
      for _, m in ipairs(marks) do
        for _, chunk in ipairs(m[4].virt_text or {}) do table.insert(found, chunk[1]) end
      end
    end
  end
  return table.concat(found, ' ')
end
ok = vim.wait(3000, function() return virtual_texts():match('unknown tensor') ~= nil end, 50)
check(ok, 'diagnostic not shown as virtual text: ' .. virtual_texts())
log('virtual text: ' .. virtual_texts())

-- Lenses are refreshed on InsertLeave: the new kernel gets its own.
vim.api.nvim_buf_set_lines(buf, -2, -1, false, { 'kernel again { y(i) = A(i,j) * xd(j) }' })
vim.cmd('doautocmd InsertLeave')
ok = vim.wait(5000, function() return #vim.lsp.codelens.get(buf) >= 8 end, 50)
check(ok, 'lenses not refreshed on InsertLeave: ' .. #vim.lsp.codelens.get(buf))
vim.api.nvim_buf_set_lines(buf, -2, -1, false, {})
vim.cmd('doautocmd InsertLeave')
vim.wait(3000, function() return #vim.lsp.codelens.get(buf) == 6 end, 50)

-- K on the index variable j of kernel sparse_x opens a hover float with
-- the lattice, without the image only graphical clients draw.
local col = lines[kline]:find('xs%(j') + 2
vim.api.nvim_win_set_cursor(0, { kline, col })
tensor.last_hover = nil
vim.cmd('normal K')
ok = vim.wait(5000, function() return tensor.last_hover ~= nil end, 50)
check(ok, 'K showed no hover')
local hover = table.concat(tensor.last_hover, '\n')
check(hover:match('index `j`') and hover:match('co%-iterate'), 'hover: ' .. hover)
check(not hover:match('data:image'), 'hover shows the image source')
local float
for _, w in ipairs(vim.api.nvim_list_wins()) do
  if vim.api.nvim_win_get_config(w).relative ~= '' then float = w end
end
check(float ~= nil, 'no hover float')
log('hover: ' .. hover:gsub('\n', ' '):sub(1, 120))
vim.api.nvim_win_close(float, true)
-- K on a tensor: its format and data, without the sparsity picture's
-- data: URI (a terminal cannot draw it).
vim.api.nvim_win_set_cursor(0, { 2, 7 })
tensor.last_hover = nil
vim.cmd('normal K')
ok = vim.wait(5000, function() return tensor.last_hover ~= nil end, 50)
check(ok, 'K on a tensor showed no hover')
hover = table.concat(tensor.last_hover, '\n')
check(hover:match('f64%[M, N%]') and hover:match('1910 stored entries') and not hover:match('data:image'), 'tensor hover: ' .. hover)
log('tensor hover: ' .. #tensor.last_hover .. ' lines, picture dropped')
for _, w in ipairs(vim.api.nvim_list_wins()) do
  if vim.api.nvim_win_get_config(w).relative ~= '' then vim.api.nvim_win_close(w, true) end
end

-- Lenses run through vim.lsp.codelens.run (which asks vim.ui.select when a
-- line has two lenses).
local function run_lens(title)
  local chosen
  vim.ui.select = function(items, opts, cb)
    for _, it in ipairs(items) do
      if opts.format_item(it):match(title) then chosen = it; return cb(it) end
    end
    cb(nil)
  end
  vim.lsp.codelens.run()
  return chosen
end
local first_kernel
for n, l in ipairs(lines) do if l:match('^kernel') and not first_kernel then first_kernel = n end end
vim.api.nvim_win_set_cursor(0, { first_kernel, 0 })

-- "show C" is a client command: it opens the C in a split.
local wins = #vim.api.nvim_list_wins()
check(run_lens('show C') ~= nil, 'no show C lens on the kernel line')
ok = vim.wait(5000, function() return #vim.api.nvim_list_wins() > wins end, 50)
check(ok, 'show C opened no window')
local c = table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n')
check(vim.bo.filetype == 'c' and c:match('int64_t [%w_]+%(tensor_args_t %*'), 'show C: ' .. c:sub(1, 200))
log('show C lens: ' .. #vim.split(c, '\n') .. ' lines')
vim.cmd('close')

-- The time lens runs on the server; its figures come back in the lens.
vim.api.nvim_win_set_cursor(0, { first_kernel, 0 })
check(run_lens('time') ~= nil, 'no time lens')
local timed
ok = vim.wait(30000, function()
  for _, l in ipairs(vim.lsp.codelens.get(buf)) do
    if l.command and l.command.title:match('ms median') then timed = l.command.title; return true end
  end
end, 100)
check(ok, 'time lens did not report a timing')
log('time lens: ' .. timed)

-- :TensorShowC on the kernel under the cursor.
vim.api.nvim_win_set_cursor(0, { kline, 2 })
c = tensor.show('c')
check(c and c:match('int64_t [%w_]+%(tensor_args_t %*'), 'TensorShowC: ' .. tostring(c))
vim.cmd('close')

-- The Vim syntax file highlights where tree-sitter is off.
tensor.setup({ treesitter = false })
vim.cmd('edit ' .. vim.fn.fnameescape(root .. '/examples/spmv_csr.tensor'))
check(tensor.highlighting == 'syntax', 'fallback highlighting: ' .. tostring(tensor.highlighting))
local groups = {}
for n, l in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do
  for _, word in ipairs({ 'kernel', 'tensor', 'spmv', 'CSR', 'f64' }) do
    local at = l:find('%f[%w]' .. word .. '%f[%W]')
    if at then groups[word] = vim.fn.synIDattr(vim.fn.synID(n, at, 1), 'name') end
  end
end
check(groups.kernel == 'tensorKeyword' and groups.tensor == 'tensorKeyword' and groups.spmv == 'tensorKernelName' and groups.CSR == 'tensorPreset' and groups.f64 == 'tensorType', 'syntax groups: ' .. vim.inspect(groups))
log('syntax fallback: ' .. vim.inspect(groups):gsub('%s+', ' '))

log('PASS')
vim.fn.writefile(out, vim.env.NVIM_TEST_LOG or '/dev/stdout')
vim.cmd('qall!')
