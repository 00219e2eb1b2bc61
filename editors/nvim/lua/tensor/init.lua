-- Neovim support for .tensor files: starts tensor-lsp, registers the
-- tree-sitter parser and queries, and adds commands to view the generated
-- code and time the kernel under the cursor. Works on Neovim 0.7 (the
-- start_client API) and 0.9+ (vim.lsp.start).
local M = {}

M.config = {
  -- The server binary; found on PATH or set explicitly.
  cmd = { vim.env.TENSOR_LSP or 'tensor-lsp' },
  -- Directory holding parser/tensor.so (built by scripts/build-nvim-parser.sh).
  parser_dir = nil,
  time_on_save = false,
}

local clients = {}

function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', M.config, opts or {})
end

local function register_parser()
  local dir = M.config.parser_dir
  if not dir then
    return false
  end
  local so = dir .. '/parser/tensor.so'
  if vim.fn.filereadable(so) == 0 then
    return false
  end
  -- The queries live beside the parser (scripts/build-nvim-parser.sh).
  vim.opt.runtimepath:append(dir)
  if vim.treesitter.language.add then
    vim.treesitter.language.add('tensor', { path = so })
  else
    vim.treesitter.require_language('tensor', so)
  end
  return true
end

-- Attach the current buffer: LSP client and tree-sitter highlighting.
function M.attach()
  local buf = vim.api.nvim_get_current_buf()
  local root = vim.fn.getcwd()
  local id = clients[root]
  if not id then
    local conf = {
      name = 'tensor-lsp',
      cmd = M.config.cmd,
      root_dir = root,
      init_options = { timeOnSave = M.config.time_on_save },
      handlers = {
        ['workspace/codeLens/refresh'] = function()
          return vim.NIL
        end,
      },
    }
    id = vim.lsp.start_client(conf)
    clients[root] = id
  end
  if id then
    vim.lsp.buf_attach_client(buf, id)
  end
  if register_parser() then
    pcall(vim.treesitter.start, buf, 'tensor')
  end
end

local function client()
  for _, c in pairs((vim.lsp.get_clients or vim.lsp.get_active_clients)()) do
    if c.name == 'tensor-lsp' then
      return c
    end
  end
end

local function kernel_request(method, params, timeout)
  local c = client()
  if not c then
    return nil, 'tensor-lsp is not running'
  end
  local res = c.request_sync(method, params, timeout or 10000, vim.api.nvim_get_current_buf())
  if not res then
    return nil, 'no answer'
  end
  if res.err then
    return nil, res.err.message
  end
  return res.result
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
  vim.cmd('new')
  vim.bo.buftype = 'nofile'
  vim.bo.filetype = (view == 'c' or view == nil) and 'c' or 'text'
  vim.api.nvim_buf_set_lines(0, 0, -1, false, vim.split(result, '\n'))
  return result
end

-- Time the kernel under the cursor; prints and returns the figures.
function M.time()
  local pos = vim.api.nvim_win_get_cursor(0)
  local lenses = vim.lsp.buf_request_sync(0, 'textDocument/codeLens', { textDocument = vim.lsp.util.make_text_document_params() }, 10000)
  local kernel
  for _, r in pairs(lenses or {}) do
    for _, l in ipairs(r.result or {}) do
      if l.command.command == 'tensor.timeKernel' and l.range.start.line <= pos[1] - 1 then
        kernel = l.command.arguments[2]
      end
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

return M
