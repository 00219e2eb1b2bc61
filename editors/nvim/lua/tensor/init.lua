-- Neovim support for .tensor files: starts tensor-lsp, highlights with the
-- tree-sitter parser (built from the repository on first use) or the Vim
-- syntax file, and wires hover, diagnostics, inlay hints, code lenses and
-- the "show C" command so that they work on first open. Works on Neovim 0.7
-- (start_client, no native inlay hints) and 0.9+ (vim.lsp.start; native
-- inlay hints from 0.10).
local M = {}

-- This file is editors/nvim/lua/tensor/init.lua inside the repository.
local plugin_root = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h:h')
local repo_root = vim.fn.fnamemodify(plugin_root, ':h:h')

local function has(version)
  return vim.fn.has('nvim-' .. version) == 1
end

-- The server binary: $TENSOR_LSP, tensor-lsp on PATH, or the repository's
-- release build.
local function default_cmd()
  if vim.env.TENSOR_LSP and vim.env.TENSOR_LSP ~= '' then
    return { vim.env.TENSOR_LSP }
  end
  if vim.fn.executable('tensor-lsp') == 1 then
    return { 'tensor-lsp' }
  end
  local built = repo_root .. '/target/release/tensor-lsp'
  if vim.fn.executable(built) == 1 then
    return { built }
  end
  return { 'tensor-lsp' }
end

M.config = {
  cmd = nil, -- default_cmd() when nil
  -- Where parser/tensor.so and queries/tensor/*.scm live. nil: built from the
  -- repository's tree-sitter-tensor/ into stdpath('data')/tensor on first use.
  parser_dir = nil,
  -- false: use the Vim syntax file (syntax/tensor.vim) only.
  treesitter = true,
  time_on_save = false,
  -- Most threads a timed kernel may use (0: every core, for kernels big enough).
  threads = 0,
  -- Which tier timing runs use: 'auto' (the C compiler's build once cached,
  -- built in the background; Cranelift meanwhile), 'cranelift' or 'cc'.
  backend = 'auto',
  -- Passed to vim.diagnostic.config for this server's diagnostics.
  diagnostics = { virtual_text = { spacing = 2, prefix = '●' }, signs = true, underline = true, severity_sort = true },
  inlay_hints = true,
  codelens = true,
  -- Map K to hover in tensor buffers.
  keymaps = true,
}

function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', M.config, opts or {})
end

-- ------------------------------------------------------------ highlighting

local parser_state -- nil: not tried; true: registered; false: unavailable

-- Build the parser from the repository with scripts/build-nvim-parser.sh
-- when it is missing or older than the grammar.
local function build_parser(dir)
  local script = repo_root .. '/scripts/build-nvim-parser.sh'
  local src = repo_root .. '/tree-sitter-tensor/src/parser.c'
  if vim.fn.filereadable(script) == 0 or vim.fn.filereadable(src) == 0 or vim.fn.executable('cc') == 0 then
    return false
  end
  local so = dir .. '/parser/tensor.so'
  if vim.fn.filereadable(so) == 1 and vim.fn.getftime(so) >= vim.fn.getftime(src) then
    return true
  end
  vim.fn.system({ 'bash', script, dir })
  return vim.v.shell_error == 0 and vim.fn.filereadable(so) == 1
end

local function register_parser()
  if not M.config.treesitter then
    return false
  end
  if parser_state ~= nil then
    return parser_state
  end
  parser_state = false
  local dir = M.config.parser_dir
  if not dir then
    dir = vim.fn.stdpath('data') .. '/tensor'
    if not build_parser(dir) then
      return false
    end
  end
  local so = dir .. '/parser/tensor.so'
  if vim.fn.filereadable(so) == 0 then
    return false
  end
  -- The queries live beside the parser (scripts/build-nvim-parser.sh).
  vim.opt.runtimepath:append(dir)
  local ok
  if vim.treesitter.language.add then
    ok = pcall(vim.treesitter.language.add, 'tensor', { path = so })
  else
    ok = pcall(vim.treesitter.require_language, 'tensor', so)
  end
  parser_state = ok
  return ok
end

-- Tree-sitter highlighting where the parser loads (vim.treesitter.start on
-- 0.8+, the highlighter object on 0.7), else the Vim syntax file.
local function highlight(buf)
  if register_parser() then
    local ok
    if vim.treesitter.start then
      ok = pcall(vim.treesitter.start, buf, 'tensor')
    else
      ok = pcall(function()
        if not vim.treesitter.highlighter.active[buf] then
          vim.treesitter.highlighter.new(vim.treesitter.get_parser(buf, 'tensor'))
        end
      end)
    end
    if ok then
      M.highlighting = 'treesitter'
      return 'treesitter'
    end
  end
  if vim.g.syntax_on ~= 1 then
    -- Installs the Syntax autocommand that loads syntax/tensor.vim, without
    -- turning syntax on for other filetypes.
    vim.cmd('runtime! syntax/synload.vim')
  end
  vim.api.nvim_buf_set_option(buf, 'syntax', 'tensor')
  M.highlighting = 'syntax'
  return 'syntax'
end

-- ------------------------------------------------------------------ client

local function client()
  for _, c in pairs((vim.lsp.get_clients or vim.lsp.get_active_clients)()) do
    if c.name == 'tensor-lsp' then
      return c
    end
  end
end

local function request_sync(c, method, params, timeout, buf)
  if has('0.11') then
    return c:request_sync(method, params, timeout, buf)
  end
  return c.request_sync(method, params, timeout, buf)
end

local function kernel_request(method, params, timeout)
  local c = client()
  if not c then
    return nil, 'tensor-lsp is not running'
  end
  local res = request_sync(c, method, params, timeout or 10000, vim.api.nvim_get_current_buf())
  if not res then
    return nil, 'no answer'
  end
  if res.err then
    return nil, res.err.message
  end
  return res.result
end

local function show_text(text, filetype)
  vim.cmd('new')
  vim.bo.buftype = 'nofile'
  vim.bo.bufhidden = 'wipe'
  vim.bo.filetype = filetype
  vim.api.nvim_buf_set_lines(0, 0, -1, false, vim.split(text, '\n'))
end

-- Show the emitted C (or ir, lattice, graph) of the kernel under the cursor
-- in a scratch split.
function M.show(view)
  local pos = vim.api.nvim_win_get_cursor(0)
  local result, err = kernel_request('tensor/view', {
    textDocument = vim.lsp.util.make_text_document_params(),
    position = { line = pos[1] - 1, character = pos[2] },
    view = view or 'c',
  })
  if not result then
    vim.notify('tensor: ' .. tostring(err), vim.log.levels.ERROR)
    return nil
  end
  show_text(result, (view == 'c' or view == nil) and 'c' or 'text')
  return result
end

-- The "show C" lens: arguments are the document's uri and the kernel name.
function M.show_c(uri, kernel)
  local result, err = kernel_request('tensor/view', { textDocument = { uri = uri }, kernel = kernel, view = 'c' })
  if not result then
    vim.notify('tensor: ' .. tostring(err), vim.log.levels.ERROR)
    return nil
  end
  show_text(result, 'c')
  return result
end

-- Time the kernel under the cursor; prints and returns the figures.
function M.time()
  local pos = vim.api.nvim_win_get_cursor(0)
  local lenses = kernel_request('textDocument/codeLens', { textDocument = vim.lsp.util.make_text_document_params() })
  local kernel
  for _, l in ipairs(lenses or {}) do
    if l.command.command == 'tensor.timeKernel' and l.range.start.line <= pos[1] - 1 then
      kernel = l.command.arguments[2]
    end
  end
  if not kernel then
    vim.notify('tensor: no kernel under the cursor', vim.log.levels.WARN)
    return nil
  end
  local result, err = kernel_request('tensor/timeKernel', { textDocument = vim.lsp.util.make_text_document_params(), kernel = kernel, runs = 10 }, 60000)
  if not result then
    vim.notify('tensor: ' .. tostring(err), vim.log.levels.ERROR)
    return nil
  end
  vim.notify(string.format('tensor: %s %s', kernel, result.label))
  return result
end

-- Hover in a float. Images (the sparsity picture, a data: URI) are for
-- clients that draw them; a terminal shows the text only.
function M.hover()
  local c = client()
  if not c then
    return vim.lsp.buf.hover()
  end
  local params = vim.lsp.util.make_position_params(0, c.offset_encoding)
  local buf = vim.api.nvim_get_current_buf()
  local handler = function(err, result)
    if err or not result or not result.contents then
      return
    end
    local lines = vim.lsp.util.convert_input_to_markdown_lines(result.contents)
    local kept = {}
    for _, l in ipairs(lines) do
      if not l:match('^%s*!%[.-%]%(data:') then
        table.insert(kept, l)
      end
    end
    while #kept > 0 and kept[#kept]:match('^%s*$') do
      table.remove(kept)
    end
    if #kept == 0 then
      return
    end
    M.last_hover = kept
    vim.lsp.util.open_floating_preview(kept, 'markdown', { focus_id = 'tensor-hover', border = 'rounded' })
  end
  if has('0.11') then
    c:request('textDocument/hover', params, handler, buf)
  else
    c.request('textDocument/hover', params, function(err, result) handler(err, result) end, buf)
  end
end

-- --------------------------------------------------- lenses and inlay hints

local hint_ns = vim.api.nvim_create_namespace('tensor-inlay-hints')

-- Neovim before 0.10 has no inlay hints: show them as end-of-line text.
local function virtual_hints(buf)
  local c = client()
  if not c or not vim.api.nvim_buf_is_loaded(buf) then
    return
  end
  local params = { textDocument = { uri = vim.uri_from_bufnr(buf) }, range = { start = { line = 0, character = 0 }, ['end'] = { line = vim.api.nvim_buf_line_count(buf), character = 0 } } }
  c.request('textDocument/inlayHint', params, function(err, result)
    if err or not vim.api.nvim_buf_is_loaded(buf) then
      return
    end
    vim.api.nvim_buf_clear_namespace(buf, hint_ns, 0, -1)
    local by_line = {}
    for _, h in ipairs(result or {}) do
      local label = type(h.label) == 'string' and h.label or table.concat(vim.tbl_map(function(p) return p.value end, h.label), '')
      by_line[h.position.line] = (by_line[h.position.line] and (by_line[h.position.line] .. ' ') or '') .. label
    end
    for line, text in pairs(by_line) do
      if line < vim.api.nvim_buf_line_count(buf) then
        vim.api.nvim_buf_set_extmark(buf, hint_ns, line, 0, { virt_text = { { text, 'Comment' } }, virt_text_pos = 'eol' })
      end
    end
  end, buf)
end

local function refresh_lenses(buf)
  if not M.config.codelens then
    return
  end
  if has('0.10') then
    vim.lsp.codelens.refresh({ bufnr = buf })
  else
    vim.api.nvim_buf_call(buf, function() vim.lsp.codelens.refresh() end)
  end
end

local function refresh(buf)
  refresh_lenses(buf)
  if M.config.inlay_hints and not vim.lsp.inlay_hint then
    virtual_hints(buf)
  end
end

local attached = {}

local function on_attach(c, buf)
  if attached[buf] then
    return
  end
  attached[buf] = true
  if M.config.keymaps then
    vim.keymap.set('n', 'K', M.hover, { buffer = buf, desc = 'tensor: hover' })
  end
  if M.config.inlay_hints and vim.lsp.inlay_hint then
    vim.lsp.inlay_hint.enable(true, { bufnr = buf })
  end
  local group = vim.api.nvim_create_augroup('tensor-refresh-' .. buf, { clear = true })
  vim.api.nvim_create_autocmd({ 'BufEnter', 'BufWritePost', 'InsertLeave' }, {
    group = group,
    buffer = buf,
    callback = function() refresh(buf) end,
  })
  vim.api.nvim_create_autocmd('BufWipeout', { group = group, buffer = buf, callback = function() attached[buf] = nil end })
  refresh(buf)
  local _ = c
end

-- The server asks for fresh lenses after a timing run.
local function on_lens_refresh()
  for buf in pairs(attached) do
    if vim.api.nvim_buf_is_loaded(buf) then
      refresh_lenses(buf)
    end
  end
  return vim.NIL
end

-- Client-side commands the lenses name (Neovim looks here before asking
-- the server).
vim.lsp.commands['tensor.showC'] = function(command)
  local args = command.arguments or {}
  return M.show_c(args[1], args[2])
end

local warned = false

-- Attach the current buffer: highlighting and the language server.
function M.attach(buf)
  buf = (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf
  highlight(buf)
  local cmd = M.config.cmd or default_cmd()
  if vim.fn.executable(cmd[1]) == 0 then
    if not warned then
      warned = true
      vim.notify('tensor: server `' .. cmd[1] .. '` not found; build it with `cargo build --release -p tensor-lsp` or set cmd in require("tensor").setup', vim.log.levels.WARN)
    end
    return
  end
  local ns_configured = false
  local conf = {
    name = 'tensor-lsp',
    cmd = cmd,
    root_dir = vim.fn.getcwd(),
    init_options = { timeOnSave = M.config.time_on_save, threads = M.config.threads, backend = M.config.backend },
    handlers = { ['workspace/codeLens/refresh'] = on_lens_refresh },
    on_init = function(c)
      if not ns_configured then
        ns_configured = true
        vim.diagnostic.config(M.config.diagnostics, vim.lsp.diagnostic.get_namespace(c.id))
      end
    end,
    on_attach = on_attach,
  }
  if vim.lsp.start then
    vim.lsp.start(conf, { bufnr = buf })
  else
    local c = client()
    local id = c and c.id or vim.lsp.start_client(conf)
    if id then
      vim.lsp.buf_attach_client(buf, id)
    end
  end
end

return M
