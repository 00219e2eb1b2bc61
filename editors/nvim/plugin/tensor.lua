-- Loaded on start: user commands and the autocommand that attaches tensor
-- buffers (highlighting and the language server; see lua/tensor/init.lua).
if vim.g.loaded_tensor then
  return
end
vim.g.loaded_tensor = true
vim.api.nvim_create_user_command('TensorShowC', function(o) require('tensor').show(o.args ~= '' and o.args or 'c') end, {
  nargs = '?',
  complete = function() return { 'c', 'ir', 'lattice', 'graph' } end,
  desc = 'Show the emitted C (or ir, lattice, graph) of the kernel under the cursor',
})
vim.api.nvim_create_user_command('TensorTime', function() require('tensor').time() end, { desc = 'Time the kernel under the cursor' })
local group = vim.api.nvim_create_augroup('tensor', { clear = true })
vim.api.nvim_create_autocmd('FileType', { group = group, pattern = 'tensor', callback = function(a) require('tensor').attach(a.buf) end })
-- .tensor files (works on Neovim 0.7, which has no vim.filetype.add).
vim.api.nvim_create_autocmd({ 'BufRead', 'BufNewFile' }, { group = group, pattern = '*.tensor', command = 'setfiletype tensor' })
